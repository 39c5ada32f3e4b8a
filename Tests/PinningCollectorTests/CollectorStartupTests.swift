import Foundation
import Logging
import NIOCore
import NIOPosix
import Pinning
import PinningCollector
import PinningTestSupport
import Testing

/// Start-up failures a new user met (a port in use, a key that is not the certificate's, a PostgreSQL server that
/// refuses): one line in words naming the option, at once, without NIO's or the drivers' type and function names.
@Suite("Collector start-up failures in words", .serialized)
struct CollectorStartupTests {
    static let logger: Logger = {
        var logger = Logger(label: "collector-startup-test")
        logger.logLevel = .critical
        return logger
    }()

    @Test("sslmode: require and verify-full (the same: chain and name verified) require TLS; verify-ca, prefer and sslrootcert are refused in words")
    func sslModes() throws {
        for mode in ["require", "verify-full"] {
            guard case .postgres(let url) = try DatabaseURL.parse("postgres://c@db.example:5432/pins?sslmode=\(mode)", environment: [:]) else {
                Issue.record("not PostgreSQL")
                continue
            }
            #expect(url.requireTLS, "\(mode)")
        }
        guard case .postgres(let plain) = try DatabaseURL.parse("postgres://c@db.example:5432/pins?sslmode=disable", environment: [:]) else {
            Issue.record("not PostgreSQL")
            return
        }
        #expect(!plain.requireTLS)
        for mode in ["verify-ca", "prefer", "allow"] {
            #expect(
                throws: CollectorOptionError(
                    "--database: sslmode=\(mode) is not supported: use sslmode=require (the same as verify-full: the server's certificate is verified against the system's trust roots and must name the host) or sslmode=disable"
                )
            ) { try DatabaseURL.parse("postgres://c@db.example:5432/pins?sslmode=\(mode)", environment: [:]) }
        }
        #expect(throws: CollectorOptionError("--database: sslrootcert is not supported: the server's certificate is verified against the system's trust roots; add its CA there")) {
            try DatabaseURL.parse("postgres://c@db.example:5432/pins?sslmode=verify-full&sslrootcert=ca.pem", environment: [:])
        }
    }

    /// Runs a collector that is expected not to start; its StartError (the run must not start listening).
    static func startError(_ collector: Collector) async throws -> Collector.StartError {
        do {
            try await collector.run(signals: []) { line, _ in Issue.record("it started: \(line)") }
        } catch let error as Collector.StartError {
            return error
        }
        throw CollectorTestError("the collector stopped without a StartError")
    }

    static func expectPlainWords(_ text: String) {
        for word in ["errno", "bind(", "NIO", "PSQLError", "Error.", ".swift", "failedTo", "descriptor:"] {
            #expect(!text.contains(word), "\(word) in: \(text)")
        }
        #expect(!text.contains("\n"), "more than one line: \(text)")
    }

    @Test("a port another process listens on: --listen and 'already in use', exit 3")
    func portInUse() async throws {
        let taken = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(taken.localAddress?.port)
        defer { taken.close(promise: nil) }
        let directory = try TemporaryDirectory(prefix: "pinning-collector-startup")
        defer { directory.remove() }
        let collector = Collector(
            listen: ListenAddress(host: "127.0.0.1", port: port), database: .sqlite(path: directory.path("r.db")),
            settings: CollectorSettings(token: "test-token-0123456789abcdef"), logger: Self.logger)
        let error = try await Self.startError(collector)
        #expect(error.exitStatus == 3)
        #expect(error.description == "--listen 127.0.0.1:\(port): the address is already in use (another process listens on it)")
        Self.expectPlainWords(error.description)
    }

    /// Why a collector with `--tls-identity identity` (and an SQLite file in `directory`) refused to start.
    static func identityRefusal(_ identity: String, in directory: TemporaryDirectory) async throws -> Collector.StartError {
        var collector = Collector(
            listen: ListenAddress(host: "127.0.0.1", port: 0), database: .sqlite(path: directory.path("r.db")),
            settings: CollectorSettings(token: "test-token-0123456789abcdef"), logger: Self.logger)
        collector.tlsIdentity = identity
        return try await Self.startError(collector)
    }

    @Test("--tls-identity whose key is not the leaf's: refused naming the option, exit 2, before anything listens")
    func mismatchedKey() async throws {
        let chain = try TestChain(host: "localhost")
        let other = try TestChain(host: "localhost")
        let directory = try TemporaryDirectory(prefix: "pinning-collector-startup")
        defer { directory.remove() }
        let identity = try directory.write("identity.pem", TestPKI.pemBundle([chain.leaf.certificate, chain.intermediate.certificate]) + other.leaf.privateKeyPEM)
        let error = try await Self.identityRefusal(identity, in: directory)
        #expect(error.exitStatus == 2)
        #expect(error.description == "--tls-identity \(identity): the private key is not the key of the first certificate (the leaf)")
        Self.expectPlainWords(error.description)
    }

    @Test("--database sqlite: a directory, a path ending in /, a missing folder: one line naming the option, exit 2, no crash")
    func sqlitePathThatIsNoFile() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-collector-startup")
        defer { directory.remove() }
        let folder = directory.path("d")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        _ = try directory.write("file", "not a folder")
        // "q/" and "q": one character, which Foundation's NSString.deletingLastPathComponent trapped on (SIGILL,
        // the whole process). "q/" is refused from its text alone, so the test's current directory does not matter.
        let cases: [(String, String)] = [
            (folder, "the path is a directory, not a file"),
            (folder + "/", "the path ends in /, so it names a directory, not a file"),
            ("q/", "the path ends in /, so it names a directory, not a file"),
            (directory.path("missing/r.db"), "the folder \(directory.path("missing")) does not exist"),
            (directory.path("file/r.db"), "\(directory.path("file")) is not a folder"),
        ]
        for (path, expected) in cases {
            let collector = Collector(
                listen: ListenAddress(host: "127.0.0.1", port: 0), database: .sqlite(path: path),
                settings: CollectorSettings(token: "test-token-0123456789abcdef"), logger: Self.logger)
            let error = try await Self.startError(collector)
            #expect(error.exitStatus == 2, "\(path)")
            #expect(error.description == "--database sqlite:\(path): \(expected)")
            Self.expectPlainWords(error.description)
        }
    }

    @Test("--tls-identity with an encrypted key: the collector needs an unencrypted one (it takes no passphrase)", .enabled(if: TestTools.opensslAvailable))
    func encryptedKey() async throws {
        let chain = try TestChain(host: "localhost")
        let directory = try TemporaryDirectory(prefix: "pinning-collector-startup")
        defer { directory.remove() }
        let plain = try directory.write("plain.key", chain.leaf.privateKeyPEM)
        let encrypted = directory.path("encrypted.key")
        let result = try await TestTools.openssl(["pkcs8", "-topk8", "-in", plain, "-out", encrypted, "-passout", "pass:secret"])
        #expect(result.status == 0, "\(result)")
        let identity = try directory.write(
            "identity.pem", TestPKI.pemBundle([chain.leaf.certificate, chain.intermediate.certificate]) + (try String(contentsOfFile: encrypted, encoding: .utf8)))
        let error = try await Self.identityRefusal(identity, in: directory)
        #expect(error.exitStatus == 2)
        #expect(error.description == "--tls-identity \(identity): the private key is encrypted; the collector needs an unencrypted key (it has no passphrase option)")
        Self.expectPlainWords(error.description)
    }

    @Test("--token-file: a directory or a missing file in the words every option uses")
    func tokenFileWords() throws {
        let directory = try TemporaryDirectory(prefix: "pinning-collector-startup")
        defer { directory.remove() }
        let cases: [(String, String)] = [
            (directory.path, "--token-file \(directory.path): the path is a directory, not a file"),
            (directory.path("missing"), "--token-file \(directory.path("missing")): no such file or directory"),
        ]
        for (path, expected) in cases {
            #expect(throws: CollectorOptionError(expected)) { try TokenFile.read(path) }
        }
        let large = try directory.write("large", String(repeating: "a", count: 5000))
        #expect(throws: CollectorOptionError("--token-file \(large): the file is larger than 4 KiB; it should hold one token")) { try TokenFile.read(large) }
        let good = try directory.write("good", "  0123456789abcdef0123  \nsecond line\n")
        #expect(try TokenFile.read(good) == "0123456789abcdef0123")
    }

    @Test("a PostgreSQL port where nothing listens: 'connection refused' at once (not after the pool's 60 s), exit 3")
    func postgresRefused() async throws {
        // A port that was just free: bound and closed again.
        let probe = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = try #require(probe.localAddress?.port)
        try await probe.close()
        let collector = Collector(
            listen: ListenAddress(host: "127.0.0.1", port: 0), database: try DatabaseURL.parse("postgres://collector@127.0.0.1:\(port)/pins"),
            settings: CollectorSettings(token: "test-token-0123456789abcdef"), logger: Self.logger)
        let error = try await Self.startError(collector)
        #expect(error.exitStatus == 3)
        #expect(error.description == "--database: cannot connect to 127.0.0.1:\(port): connection refused (nothing listens there)")
        Self.expectPlainWords(error.description)
    }

    @Test(
        "a PostgreSQL server that refuses the database or the user: the server's own words and SQLSTATE",
        .enabled(if: PostgresCluster.available, "needs Debian's postgresql"))
    func postgresServerRefuses() async throws {
        let cluster = try await PostgresCluster()
        defer { cluster.stop() }
        let cases: [(String, String)] = [
            ("postgres://pinning@127.0.0.1:\(cluster.port)/nosuchdb", "refused the connection: database \"nosuchdb\" does not exist (SQLSTATE 3D000)"),
            ("postgres://nosuchuser@127.0.0.1:\(cluster.port)/postgres", "refused the connection: role \"nosuchuser\" does not exist (SQLSTATE 28000)"),
            ("postgres://pinning@127.0.0.1:\(cluster.port)/postgres?sslmode=require", "does not offer TLS, and the URL asks for it (sslmode=require)"),
        ]
        for (url, expected) in cases {
            let collector = Collector(
                listen: ListenAddress(host: "127.0.0.1", port: 0), database: try DatabaseURL.parse(url),
                settings: CollectorSettings(token: "test-token-0123456789abcdef"), logger: Self.logger)
            let error = try await Self.startError(collector)
            #expect(error.exitStatus == 3, "\(url)")
            #expect(error.description.hasSuffix(expected), "\(url): \(error)")
            Self.expectPlainWords(error.description)
        }
    }
}
