// swift-tools-version:6.1
// libFuzzer targets for swift-pinning. A separate package on purpose: the targets need
// `-sanitize=fuzzer,address`, so the root package's `swift build` / `swift test` must never see them.
// Build and run them with `scripts/fuzz.sh TARGET SECONDS` from the repository root.
import Foundation
import PackageDescription

// A path dependency's identity is the last component of its path, which differs between checkouts and
// worktrees ("swift-pinning", "wt-hardening", …), so compute it rather than hard-coding it.
let rootDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
let root = rootDirectory.lastPathComponent.lowercased()

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let targets = [
    "FuzzCertificateLoading", "FuzzPKCS7", "FuzzPKCS12", "FuzzPin", "FuzzConfiguration", "FuzzEvaluation", "FuzzCRL",
]

let package = Package(
    name: "swift-pinning-fuzz",
    platforms: [.macOS(.v13)],
    products: targets.map { .executable(name: $0, targets: [$0]) },
    dependencies: [
        .package(path: rootDirectory.path),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        // The fixed fuzzing PKI (deterministic keys) and the seed writer shared by every target.
        .target(
            name: "FuzzSupport",
            dependencies: [
                .product(name: "Pinning", package: root),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        )
    ]
        + targets.map { name in
            .executableTarget(
                name: name,
                dependencies: [
                    "FuzzSupport",
                    .product(name: "Pinning", package: root),
                    .product(name: "PinningNIO", package: root),
                    // Seeds made with the test PKI (FuzzCRL signs its seed CRLs with TestCRL).
                    .product(name: "PinningPKI", package: root),
                    .product(name: "X509", package: "swift-certificates"),
                    .product(name: "SwiftASN1", package: "swift-asn1"),
                ],
                swiftSettings: swiftSettings + [.unsafeFlags(["-parse-as-library"])]
            )
        }
)
