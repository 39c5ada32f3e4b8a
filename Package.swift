// swift-tools-version:6.1
// swift-pinning: HTTPS trust control (AFSecurityPolicy semantics, hardened) for every Swift program.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "swift-pinning",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "Pinning", targets: ["Pinning"]),
        .library(name: "PinningNIO", targets: ["PinningNIO"]),
        .library(name: "PinningAsyncHTTPClient", targets: ["PinningAsyncHTTPClient"]),
        // Separate product: Hummingbird adds build time that PinningNIO users should not pay.
        .library(name: "PinningHummingbird", targets: ["PinningHummingbird"]),
        // Mints test PKIs (roots, intermediates, servers, clients, name constraints, every key type we claim) for
        // users' own tests, as OkHttp ships HeldCertificate; the `pinning pki` commands are built on it.
        .library(name: "PinningPKI", targets: ["PinningPKI"]),
        // `pinning proxy` as a library: the forward proxy, tunnels and local CA, on PinningNIO's pinned client.
        .library(name: "PinningProxy", targets: ["PinningProxy"]),
        // `pinning config export` / `import` as a library: the configuration in Android's, TrustKit's, ATS's and
        // OkHttp's formats, and back. `import PinningExport` gives both (the exporter re-exported from
        // PinningExportCore).
        .library(name: "PinningExport", targets: ["PinningExport"]),
        // Separate products: Vapor and gRPC are heavy to build, and only their users should pay for them.
        .library(name: "PinningVapor", targets: ["PinningVapor"]),
        .library(name: "PinningGRPC", targets: ["PinningGRPC"]),
        .executable(name: "pinning", targets: ["pinning"]),
        // The report collector (issue 30): its own executable, installed beside `pinning`, which hands
        // `pinning collector …` over to it. Its HTTP server, SQLite and PostgreSQL drivers and templates stay out of
        // the `pinning` binary (size and start-up).
        .executable(name: "pinning-collector", targets: ["pinning-collector"]),
        // `pinning config import`'s work (issue 31): its own executable, installed beside `pinning`, which hands
        // the parsed command over to it. Reading Android's XML links FoundationXML, and through it libxml2, ICU and
        // liblzma, which every other `pinning` command would otherwise load at start-up.
        .executable(name: "pinning-config-import", targets: ["pinning-config-import"]),
        // `limbo` (the x509-limbo conformance runner) is a tool for this repository: an executable target, not a
        // product, so `swift run limbo` works here and users never see it.
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // HTTP/2 for PinnedHTTPClient and `pinning serve` (ALPN h2 with HTTP/1.1 fallback); already in the
        // graph through AsyncHTTPClient, so naming it adds nothing to build.
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        // `swift package generate-documentation --target Pinning` (the Docs.docc catalog); a plugin only,
        // nothing of it is linked into the products.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        // Already in the graph through Hummingbird and AsyncHTTPClient; named so PinningHummingbird can
        // implement ServerChildChannel, whose requirements take a Logger.
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // The proxy records its metrics through swift-metrics (already in the graph); the CLI exports them with
        // swift-prometheus's registry at /metrics.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // PinningVapor (issue 13): mutual TLS for Vapor applications and a pinned Vapor `Client`.
        .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
        // PinningGRPC (issue 13): pinned gRPC client and mTLS server transports on grpc-swift 2's HTTP/2
        // transport. No protobuf: the examples and tests use their own message serializers.
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
        // The report collector (issue 30) only: SQLite (its own amalgamation, no system library) and PostgreSQL
        // drivers on SwiftNIO, and Mustache templates that HTML-escape every value for the dashboard.
        .package(url: "https://github.com/vapor/sqlite-nio", from: "1.13.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        // Already in the graph through Hummingbird and PostgresNIO: the collector's services (the writer, retention,
        // the PostgreSQL pool) stop in order on SIGTERM/SIGINT.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        // The pure core: X509 + ASN.1 + Crypto only. No NIO, no logging.
        .target(
            name: "Pinning",
            dependencies: [
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // Pinned TLS on SwiftNIO: client handlers that enforce a ServerTrustEvaluating, PKCS#12/PEM client
        // identities, mTLS servers. Depends on the core, never the other way round.
        .target(
            name: "PinningNIO",
            dependencies: [
                "Pinning",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // PinnedHTTPClient's HTTP/2 (ALPN h2).
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // AsyncHTTPClient: anchors and names through its TLS configuration, the leaf re-checked after the
        // handshake. AHC has no verification hook, so pins above the leaf cannot be enforced here.
        .target(
            name: "PinningAsyncHTTPClient",
            dependencies: [
                "Pinning",
                "PinningNIO",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        // Hummingbird mTLS servers whose request context carries the validated client chain.
        .target(
            name: "PinningHummingbird",
            dependencies: [
                "Pinning",
                "PinningNIO",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        // Test PKIs for users' tests and the CLI's `pki` commands, PKCS#12 export included.
        .target(
            name: "PinningPKI",
            dependencies: [
                // PKCS#12 export (TestIdentity.pkcs12): the writer lives in PinningNIO beside the reader that shares
                // its structures and BoringSSL ciphers. Never the other way round.
                "PinningNIO",
                // The core's one IP-address parser for iPAddress SANs.
                "Pinning",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // Helpers for this repository's tests only (loopback servers); no product links it. Re-exports PinningPKI.
        .target(
            name: "PinningTestSupport",
            dependencies: [
                "Pinning",
                "PinningPKI",
                "PinningNIO",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        // Pin configurations for the mobile platforms (issue 15): pure text in, text out, on the core. The exporter
        // and the formats (PinningExportCore, which `pinning` links) apart from the importer (PinningExport, which
        // re-exports the core): the importer's XML parser is FoundationXML, whose libxml2, ICU and liblzma the
        // dynamic loader would map and bind on every `pinning` start (issue 31's cold path).
        .target(
            name: "PinningExportCore",
            dependencies: [
                "Pinning",
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PinningExport",
            dependencies: [
                "PinningExportCore",
                "Pinning",
            ],
            swiftSettings: swiftSettings
        ),
        // The local proxy (issue 16): every upstream connection through PinningNIO's PinnedTLSClient.
        .target(
            name: "PinningProxy",
            dependencies: [
                "Pinning",
                "PinningNIO",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                // TLSUserEvent: the client's handshake with the local CA completed (its alert observer ends).
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // Vapor: the full client policy on Vapor's own TLS server (its verification callback with metadata), the
        // validated client on `Request`, a middleware that requires it, and `app.client` on PinnedHTTPClient.
        .target(
            name: "PinningVapor",
            dependencies: [
                "Pinning",
                "PinningNIO",
                .product(name: "Vapor", package: "vapor"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        // gRPC: every connection through PinningNIO's handlers (PinnedTLSClient, MutualTLSServer) inside
        // grpc-swift-nio-transport's HTTP/2 transports.
        .target(
            name: "PinningGRPC",
            dependencies: [
                "Pinning",
                "PinningNIO",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "pinning",
            dependencies: [
                "Pinning",
                "PinningNIO",
                "PinningPKI",
                "PinningProxy",
                // `config export`; `config import` hands over to pinning-config-import, which links the importer.
                "PinningExportCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // `pinning proxy` exports the proxy's metrics at /metrics in Prometheus's text format.
                .product(name: "Prometheus", package: "swift-prometheus"),
                // `serve`, `check`, `demo` and `bench handshake` drive loopback TLS.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings,
            // Release builds on Linux export none of our own symbols (issue 31's cold path). `--static-swift-stdlib`
            // links with `-export-dynamic` (the toolchain's static-stdlib-args.lnk), which put ~34,700 of the
            // binary's symbols in its dynamic symbol table, and the Swift runtime's start-up (its backtracer
            // initialiser looking up its own path with dladdr) scans that table linearly on every run: ~5% of a
            // one-chain `pinning evaluate`. Nothing needs those symbols exported: the runtime's own are hidden
            // anyway (`--exclude-libs ALL` in the same file), nothing here looks our symbols up with dlsym, and the
            // backtracer symbolicates a crash from the file's symbol table, not the dynamic one (its report for a
            // SIGSEGV is the same with and without; README, Performance, round 5). Debug builds link as before.
            linkerSettings: [.unsafeFlags(["-Xlinker", "--no-export-dynamic"], .when(platforms: [.linux], configuration: .release))]
        ),
        // The report collector (issue 30): ingest, storage (SQLite or PostgreSQL, one set of versioned migrations),
        // the JSON API, the dashboard and /metrics, on Hummingbird. A library so that tests and the benchmark drive it
        // in process; the `pinning-collector` executable is its command line.
        .target(
            name: "PinningCollector",
            dependencies: [
                "Pinning",
                // --tls-identity is read by PinningNIO's identity loader (one loader for every server and client).
                "PinningNIO",
                .product(name: "Hummingbird", package: "hummingbird"),
                // --tls-identity: HTTPS through Hummingbird's own TLS channel (NIOSSL, already in the graph).
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // `pinning config import`'s companion: reads the command `pinning` parsed and hands over, imports, writes.
        .executableTarget(
            name: "pinning-config-import",
            dependencies: [
                "PinningExport",
                "Pinning",
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "pinning-collector",
            dependencies: [
                "PinningCollector",
                "Pinning",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                // `pinning bench collector` drives a child collector over the loopback with AsyncHTTPClient.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        // Examples (issue 13): built by `swift build`, so CI builds them; run with `swift run VaporDevicesExample`
        // and `swift run GRPCPinnedExample`. Not products: users copy from them, they do not link them. Built without
        // `package` access (packageAccess: false), so they use only what a user's code can.
        .executableTarget(
            name: "VaporDevicesExample",
            dependencies: [
                "Pinning",
                "PinningNIO",
                "PinningPKI",
                "PinningVapor",
                .product(name: "Vapor", package: "vapor"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Examples/VaporDevices",
            packageAccess: false,
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "GRPCPinnedExample",
            dependencies: [
                "Pinning",
                "PinningNIO",
                "PinningPKI",
                "PinningGRPC",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Examples/GRPCPinned",
            packageAccess: false,
            swiftSettings: swiftSettings
        ),
        // Requests per second through the integrations beside NIOSSL's own verification (issue 13); run by
        // `INTEGRATIONS=1 scripts/bench-compare.sh`. Its own executable: the CLI does not link Vapor or gRPC.
        .executableTarget(
            name: "IntegrationBench",
            dependencies: [
                "Pinning",
                "PinningNIO",
                "PinningPKI",
                "PinningGRPC",
                "PinningVapor",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Vapor", package: "vapor"),
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        // Every Swift code block of the README, the DocC articles and the doc comments, compiled by
        // `scripts/doc-snippets.sh` (issue 27): it writes them into scripts/doc-snippets/Generated/ and builds this
        // target. Not a product, never run; it depends on every module a snippet may import.
        .target(
            name: "DocSnippets",
            dependencies: [
                "Pinning",
                "PinningNIO",
                "PinningPKI",
                "PinningAsyncHTTPClient",
                "PinningHummingbird",
                "PinningProxy",
                "PinningExport",
                "PinningVapor",
                "PinningGRPC",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Vapor", package: "vapor"),
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
            ],
            path: "scripts/doc-snippets",
            // The script's self-test fixtures, read by the script, never compiled as such.
            exclude: ["self-test.md", "self-test-doc-comments.swift.txt"],
            // Outside the package for `package` access, as a user's code is: a snippet naming a package declaration
            // fails here rather than in a reader's project.
            packageAccess: false,
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "limbo",
            dependencies: [
                "Pinning",
                "PinningPKI",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PinningTests",
            dependencies: [
                "Pinning",
                "PinningTestSupport",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PinningNIOTests",
            dependencies: [
                "Pinning",
                "PinningNIO",
                "PinningTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                // In-memory handshakes (NIOAsyncTestingChannel), as swift-nio-ssl tests its own handlers.
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PinningAsyncHTTPClientTests",
            dependencies: [
                "Pinning",
                "PinningNIO",
                "PinningAsyncHTTPClient",
                // AsyncHTTPClient through the proxy (issue 16): the whole per-host policy for an unmodified client.
                "PinningProxy",
                "PinningTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PinningHummingbirdTests",
            dependencies: [
                "Pinning",
                "PinningNIO",
                "PinningHummingbird",
                "PinningAsyncHTTPClient",
                "PinningTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PinningVaporTests",
            dependencies: [
                "Pinning",
                "PinningNIO",
                "PinningVapor",
                "PinningTestSupport",
                .product(name: "Vapor", package: "vapor"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PinningGRPCTests",
            dependencies: [
                "Pinning",
                "PinningNIO",
                "PinningGRPC",
                "PinningTestSupport",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        // The proxy's and the exporter's libraries, without the CLI (issue 28 item 6).
        .testTarget(
            name: "PinningProxyTests",
            dependencies: [
                "Pinning",
                "PinningProxy",
                "PinningTestSupport",
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PinningExportTests",
            dependencies: ["Pinning", "PinningExport", "PinningExportCore", "PinningTestSupport"],
            swiftSettings: swiftSettings
        ),
        // The report collector (issue 30): in process on a real SQLite file and a real PostgreSQL server on the
        // loopback, and as the built executable (signals, restarts, headless Chromium on the dashboard).
        .testTarget(
            name: "PinningCollectorTests",
            dependencies: [
                "Pinning",
                "PinningCollector",
                "PinningTestSupport",
                // Built for the process tests (signals, restarts, Chromium), which run the executable; the bench's
                // options are parsed in process (`@testable import pinning_collector`, with argument-parser).
                "pinning-collector",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PinningCLITests",
            dependencies: [
                "Pinning",
                "PinningNIO",
                "PinningTestSupport",
                // The executable target: parse-time refusals are tested in process (`@testable import pinning`,
                // InProcessCLI.swift); every other test runs the built binary.
                "pinning",
                // What the in-process parse of `proxy --tunnel` returns (ProxySettings.Tunnel).
                "PinningProxy",
                // Built for the failure-report tests (ReportsEndToEndCLITests), which send to the real collector.
                "pinning-collector",
                // Built for the `config import` tests, which run it through `pinning config import`.
                "pinning-config-import",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "X509", package: "swift-certificates"),
                // Names of every shape for the report's name writer (EvaluationReportCLITests).
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)

// The hardening build (issue 28): `scripts/hardening-settings.sh` sets PINNING_HARDENING_BUILD=1 and builds this
// graph ONCE for both the sanitizer pass of the test suite and the fuzz targets. OUR modules are compiled with
// AddressSanitizer plus libFuzzer's coverage instrumentation (the flags below, on our targets only); every
// dependency is compiled exactly as in the plain build. That is what lets CI run this build in the plain `.build`
// it has already filled (PINNING_HARDENING_SCRATCH=.build): only our modules are compiled again, not swift-nio,
// BoringSSL (twice), Hummingbird or SQLite. What that gives up, deliberately: ASan does not check memory accesses
// made INSIDE dependencies (its allocator still catches double frees, bad frees and leaks everywhere, since
// malloc and free are the runtime's), and the fuzzers' coverage feedback comes from our code, not from
// swift-asn1's or swift-certificates' parsers. `scripts/sanitizers.sh address` still builds every module with
// ASan, deps included (its own scratch path), for a full local pass. Coverage hooks in the test binary resolve to
// the sanitizer runtime's no-op definitions; only the fuzz targets link libFuzzer. An ordinary `swift build` /
// `swift test` never sees any of this. In the hardening build:
// - the libFuzzer targets of Fuzz/Sources are added (`scripts/fuzz.sh`);
// - the framework adapters (AsyncHTTPClient, Hummingbird, Vapor, gRPC), their tests, the examples and
//   IntegrationBench are left out. They parse no untrusted input of their own: every byte a peer sends reaches
//   the core and PinningNIO (the AsyncHTTPClient adapter hands the peer's DER to ServerTrust), whose suites,
//   the CLI's and the proxy's run in this build. Their tests run in the plain `swift test`.
if Context.environment["PINNING_HARDENING_BUILD"] == "1" {
    let frameworkAdapters: Set<String> = [
        "PinningAsyncHTTPClient", "PinningHummingbird", "PinningVapor", "PinningGRPC",
        "PinningAsyncHTTPClientTests", "PinningHummingbirdTests", "PinningVaporTests", "PinningGRPCTests",
        "VaporDevicesExample", "GRPCPinnedExample", "IntegrationBench",
        // scripts/doc-snippets.sh's compile-only target imports every adapter; it runs on the plain build.
        "DocSnippets",
    ]
    package.targets.removeAll { frameworkAdapters.contains($0.name) }
    package.products.removeAll { frameworkAdapters.contains($0.name) }

    // ASan and coverage on the code we ship (every target of this package is ours); -sanitize=fuzzer's own
    // coverage choice minus stack-depth, whose counter only libFuzzer defines (the test binary would not link).
    // The test targets and PinningTestSupport are only linked with the runtime: they are the harness, not what is
    // under test, and compiling them instrumented would only add time. Linking with -sanitize=address is needed by
    // every product that contains instrumented code; linker settings of a target reach every product it is linked
    // into.
    let instrumentation: [String] = [
        "-sanitize=address", "-sanitize-coverage=edge,indirect-calls,trace-cmp,inline-8bit-counters,pc-table",
    ]
    for target in package.targets {
        if target.type != .test && target.name != "PinningTestSupport" {
            target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(instrumentation)]
        }
        target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=address"])]
    }

    // `-sanitize=fuzzer` on the fuzz targets alone: it links libFuzzer, whose main() drives them.
    let fuzzFlags: [String] = ["-sanitize=fuzzer,address"]
    package.targets.append(
        .target(
            name: "FuzzSupport",
            dependencies: [
                "Pinning",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Fuzz/Sources/FuzzSupport",
            swiftSettings: swiftSettings + [.unsafeFlags(instrumentation)],
            linkerSettings: [.unsafeFlags(["-sanitize=address"])]
        )
    )
    for name in ["FuzzCertificateLoading", "FuzzPKCS7", "FuzzPKCS12", "FuzzPin", "FuzzConfiguration", "FuzzEvaluation", "FuzzCRL", "FuzzPathBuilding", "FuzzTLSRecords"] {
        package.targets.append(
            .executableTarget(
                name: name,
                dependencies: [
                    "FuzzSupport",
                    "Pinning",
                    "PinningNIO",
                    // Seeds made with the test PKI (FuzzCRL signs its seed CRLs with TestCRL).
                    "PinningPKI",
                    // FuzzTLSRecords hands the record reader NIO byte buffers.
                    .product(name: "NIOCore", package: "swift-nio"),
                    .product(name: "X509", package: "swift-certificates"),
                    .product(name: "SwiftASN1", package: "swift-asn1"),
                ],
                path: "Fuzz/Sources/\(name)",
                swiftSettings: swiftSettings + [.unsafeFlags(["-parse-as-library"] + fuzzFlags)],
                linkerSettings: [.unsafeFlags(fuzzFlags)]
            )
        )
    }
}

// CI links with LLVM's lld (`PINNING_LINKER=lld`, which .ci/run exports for every stage): the toolchain's default
// on Linux is GNU gold, which links the debug test bundle in one thread; lld, shipped with the toolchain, took 9.7 s
// of wall time against gold's 22 s for the same bundle (3.1 against 6.5 CPU-s), and CI links about 20 executables
// and bundles across its builds. Only how our products are linked changes; nothing is compiled differently. An
// ordinary `swift build` / `swift test`, run without the variable, never sees it; nor does the README's install
// build, which gold links (lld made that static binary's start-up slower: README, Performance, round 4).
if Context.environment["PINNING_LINKER"] == "lld" {
    for target in package.targets {
        target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-use-ld=lld"])]
    }
}
