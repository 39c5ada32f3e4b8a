import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

// `pinning check` against servers we did not write (openssl s_server, Python's http.server) and our own `serve`:
// every class of failure gets one line of words on stderr and nothing on stdout (issue 11, items 9-12), Ed25519
// servers are reached (item 4), and `serve --client-ca` resumes sessions (item 8).

extension ServerProcess {
    /// `openssl s_server` serving the fixture's leaf and intermediate (s_server's `-cert` sends only the first
    /// certificate of a file; the rest goes in `-cert_chain`).
    static func openssl(serving fixture: ServeCheckFixture, _ arguments: [String]) async throws -> ServerProcess {
        let leaf = try fixture.directory.write("server-leaf-\(UUID().uuidString).pem", fixture.server.leaf.certificatePEM)
        let intermediate = try fixture.directory.write("server-intermediate-\(UUID().uuidString).pem", fixture.server.intermediate.certificatePEM)
        return try await Self.openssl(["-cert", leaf, "-cert_chain", intermediate, "-key", fixture.serverKey] + arguments, in: fixture.directory)
    }

    static func openssl(_ arguments: [String], in directory: TemporaryDirectory) async throws -> ServerProcess {
        try await ServerProcess.opensslServer(arguments, in: directory)
    }
}

/// A TCP listener on 127.0.0.1 that never accepts: connecting succeeds (the kernel completes it), the TLS
/// handshake never starts.
final class SilentListener {
    let descriptor: Int32
    let port: Int

    init() throws {
        #if canImport(Glibc)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard fd >= 0, bound == 0, listen(fd, 8) == 0 else { throw ServeProcess.ServeError(message: "cannot listen") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.descriptor = fd
        self.port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(self.descriptor) }
}

/// What no user-facing line may contain: library internals.
let internalsMarkers = [
    "CNIOBoringSSL", ".build/", "NSCocoaErrorDomain", "Error Domain", "SingleConnectionFailure", ".swift:", "TestPKIError", "OPENSSL_internal", "errno:", "BoringSSLError", "IOError", "(error set)",
]

func expectOneCleanLine(_ run: (status: Int32?, stdout: String, stderr: String, runtime: TimeInterval?), status: Int32, contains expected: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(run.status == status, "\(run)", sourceLocation: sourceLocation)
    #expect(run.stdout.isEmpty, "stdout must be empty on error: \(run.stdout)", sourceLocation: sourceLocation)
    let lines = run.stderr.split(separator: "\n", omittingEmptySubsequences: true)
    #expect(lines.count == 1, "one line on stderr: \(run.stderr)", sourceLocation: sourceLocation)
    #expect(run.stderr.hasPrefix("pinning: "), "\(run.stderr)", sourceLocation: sourceLocation)
    #expect(run.stderr.contains(expected), "expected \(expected) in: \(run.stderr)", sourceLocation: sourceLocation)
    for marker in internalsMarkers {
        #expect(!run.stderr.contains(marker), "internals (\(marker)) leaked: \(run.stderr)", sourceLocation: sourceLocation)
    }
}

@Suite("pinning check: errors in words, interoperability, resumption", .serialized)
struct CheckErrorsCLITests {
    /// `check https://localhost:PORT/PATH --resolve localhost:PORT:127.0.0.1 --roots ROOT`.
    static func arguments(_ port: Int, root: String, path: String = "/") -> [String] {
        ["check", "https://localhost:\(port)\(path)", "--resolve", "localhost:\(port):127.0.0.1", "--roots", root]
    }

    @Test("connection refused: one line as curl says it, nothing on stdout")
    func refused() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey], in: fixture.directory)
        let port = server.port
        server.stop()
        let run = try await fixture.check(Self.arguments(port, root: fixture.root))
        expectOneCleanLine(run, status: 3, contains: "pinning: check: cannot connect to localhost (127.0.0.1) port \(port): connection refused")
        let direct = try await fixture.check(["check", "https://127.0.0.1:\(port)/", "--roots", fixture.root])
        expectOneCleanLine(direct, status: 3, contains: "pinning: check: cannot connect to 127.0.0.1 port \(port): connection refused")
    }

    @Test("a TLS handshake that never completes: one line naming the time bound")
    func timeout() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let listener = try SilentListener()
        let run = try await fixture.check(Self.arguments(listener.port, root: fixture.root) + ["--connect-timeout", "1"])
        expectOneCleanLine(run, status: 3, contains: "pinning: check: the TLS handshake with localhost port \(listener.port) did not complete within 1 s")
    }

    @Test("a name that does not resolve (.invalid never leaves the machine)")
    func dns() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let run = try await fixture.check(["check", "https://no-such-host.invalid/", "--roots", fixture.root])
        expectOneCleanLine(run, status: 3, contains: "pinning: check: cannot resolve host no-such-host.invalid")
    }

    @Test("bad ports in the URL are bad input (exit 2)", arguments: ["https://localhost:99999/", "https://localhost:abc/", "https://localhost:0/", "https://[::1]:70000/", "https://localhost:-1/"])
    func badPort(_ url: String) async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let run = try await fixture.check(["check", url, "--roots", fixture.root])
        expectOneCleanLine(run, status: 2, contains: "pinning: \(url): ")
    }

    @Test("bad identity files: one line naming the file, no parser internals (exit 2)")
    func badIdentity() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let garbage = try fixture.directory.write("garbage.p12", "garbage\n")
        let random = try fixture.directory.write(
            "random.p12",
            String(decoding: (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }, as: UTF8.self)
        )
        for arguments in [
            ["--identity", garbage], ["--identity", random], ["--identity-cert", fixture.clientCert, "--identity-key", garbage],
            ["--identity-cert", garbage, "--identity-key", fixture.clientKey], ["--identity", fixture.directory.path("missing.p12")],
        ] {
            let run = try await fixture.check(["check", "https://localhost:1/", "--roots", fixture.root] + arguments)
            expectOneCleanLine(run, status: 2, contains: "pinning: --identity")
        }
    }

    /// One clean line (exit 2) that names the option and the file and says what is wrong; none of the words of a
    /// library below (the markers of ``internalsMarkers`` and of TLSIdentityError's own test).
    static func expectIdentityLine(
        _ run: (status: Int32?, stdout: String, stderr: String, runtime: TimeInterval?), option: String, file: String, says words: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        expectOneCleanLine(run, status: 2, contains: "pinning: \(option) \(file): ", sourceLocation: sourceLocation)
        #expect(run.stderr.contains(words), "expected \(words) in: \(run.stderr)", sourceLocation: sourceLocation)
        for marker in ["Error", "ASN1", "BoringSSL", "NIOSSL", "CNIO", "TLSIdentity", "PKCS12Container", "PasswordBased"] {
            #expect(!run.stderr.contains(marker), "internals (\(marker)) leaked: \(run.stderr)", sourceLocation: sourceLocation)
        }
    }

    @Test("each kind of bad identity: the option, the file and what is wrong, in words (exit 2); --verbose adds the library's detail before it")
    func identityKinds() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        func write(_ name: String, _ bytes: [UInt8]) throws -> String {
            let path = fixture.directory.path(name)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
        func check(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32?, stdout: String, stderr: String, runtime: TimeInterval?) {
            try await fixture.check(["check", "https://localhost:1/", "--roots", fixture.root] + arguments, environment: environment)
        }
        let p12 = try write("device.p12", try fixture.client.leaf.pkcs12(passphrase: "s3cret", intermediates: [fixture.client.intermediate.certificate]))
        let wrongPassphrase = try await check(["--identity", p12, "--passphrase-env", "PINNING_TEST_P12"], environment: ["PINNING_TEST_P12": "wrong"])
        Self.expectIdentityLine(wrongPassphrase, option: "--identity", file: p12, says: "wrong passphrase: the passphrase does not unlock this PKCS#12 file")

        let derCertificate = try write("device.der", fixture.client.leaf.der)
        let derAsP12 = try await check(["--identity", derCertificate])
        Self.expectIdentityLine(derAsP12, option: "--identity", file: derCertificate, says: "corrupt file: not a PKCS#12 (PFX) file")
        let derAsKey = try await check(["--identity-cert", fixture.clientCert, "--identity-key", derCertificate])
        Self.expectIdentityLine(derAsKey, option: "--identity-key", file: derCertificate, says: "a DER certificate, not a private key")

        let certificatePEM = fixture.client.leaf.certificatePEM
        let truncated = try write("truncated.pem", Array(certificatePEM.prefix(certificatePEM.count / 2).utf8))
        let cut = try await check(["--identity-cert", truncated, "--identity-key", fixture.clientKey])
        Self.expectIdentityLine(cut, option: "--identity-cert", file: truncated, says: "corrupt file: not a certificate file")

        let keyPEM = fixture.client.leaf.privateKeyPEM
        let truncatedKey = try write("truncated.key", Array(keyPEM.prefix(keyPEM.count / 2).utf8))
        let cutKey = try await check(["--identity-cert", fixture.clientCert, "--identity-key", truncatedKey])
        Self.expectIdentityLine(cutKey, option: "--identity-key", file: truncatedKey, says: "the private key cannot be read")

        let mismatch = try await check(["--identity-cert", fixture.clientCert, "--identity-key", fixture.serverKey])
        Self.expectIdentityLine(
            mismatch, option: "--identity-cert/--identity-key", file: fixture.serverKey,
            says: "the key does not belong to the first certificate of \(fixture.clientCert)")

        // --verbose: what the library said comes first, on its own line; the last line is the same clean one.
        let verbose = try await check(["--identity-cert", fixture.clientCert, "--identity-key", truncatedKey, "--verbose"])
        let lines = verbose.stderr.split(separator: "\n")
        #expect(verbose.status == 2 && lines.count == 2, "\(verbose)")
        #expect(lines.first?.hasPrefix("pinning: check: detail: ") == true, "\(verbose)")
        #expect(lines.last.map(String.init) == cutKey.stderr.trimmingCharacters(in: .newlines), "\(verbose)")
    }

    @Test("encrypted PEM keys made by openssl (PKCS#8 and traditional), wrong passphrase: one line in words", .enabled(if: CLI.hasOpenSSL))
    func encryptedIdentityKey() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let pkcs8 = fixture.directory.path("client.pkcs8.key")
        let traditional = fixture.directory.path("client.traditional.key")
        #expect(try await CLI.openssl(["pkcs8", "-topk8", "-in", fixture.clientKey, "-out", pkcs8, "-passout", "pass:pem-secret"]) == 0)
        #expect(try await CLI.openssl(["pkey", "-in", fixture.clientKey, "-traditional", "-aes256", "-out", traditional, "-passout", "pass:pem-secret"]) == 0)
        for key in [pkcs8, traditional] {
            let run = try await fixture.check(
                ["check", "https://localhost:1/", "--roots", fixture.root, "--identity-cert", fixture.clientCert, "--identity-key", key, "--passphrase-env", "PINNING_TEST_KEY"],
                environment: ["PINNING_TEST_KEY": "wrong"])
            Self.expectIdentityLine(run, option: "--identity-key", file: key, says: "wrong passphrase: the passphrase does not decrypt the private key")
        }
    }

    @Test("TLS version and cipher mismatches with openssl s_server: the alert, in words", .enabled(if: CLI.hasOpenSSL))
    func versionAndCipherMismatch() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let oldTLS = try await ServerProcess.openssl(serving: fixture, ["-www", "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"])
        defer { oldTLS.stop() }
        let version = try await fixture.check(Self.arguments(oldTLS.port, root: fixture.root))
        expectOneCleanLine(version, status: 3, contains: "pinning: check: localhost: the server refused the handshake: TLS alert protocol_version (70)")

        let cipher = try await ServerProcess.openssl(serving: fixture, ["-www", "-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-CCM"])
        defer { cipher.stop() }
        let run = try await fixture.check(Self.arguments(cipher.port, root: fixture.root))
        expectOneCleanLine(run, status: 3, contains: "pinning: check: localhost: the server refused the handshake: TLS alert handshake_failure (40)")
    }

    @Test("a port that does not speak TLS (a plain HTTP server)", .enabled(if: TestTools.python3Available))
    func notTLS() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let server = try await ServerProcess("/usr/bin/python3", ["-u", "-m", "http.server", "--bind", "127.0.0.1", "0"], in: fixture.directory) { line in
            guard line.hasPrefix("Serving HTTP on "), let range = line.range(of: " port ") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        defer { server.stop() }
        let run = try await fixture.check(Self.arguments(server.port, root: fixture.root))
        expectOneCleanLine(run, status: 3, contains: "pinning: check: localhost: the server did not answer with TLS")
    }

    @Test("a reply that is not HTTP and an HTTP error status, from openssl s_server -HTTP", .enabled(if: CLI.hasOpenSSL))
    func notHTTPAndErrorStatus() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        _ = try fixture.directory.write("ssh.txt", "SSH-2.0-OpenSSH_9.6\r\n")
        _ = try fixture.directory.write("missing.txt", "HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\n\r\nno such thing\n")
        let server = try await ServerProcess.openssl(serving: fixture, ["-HTTP"])
        defer { server.stop() }
        let notHTTP = try await fixture.check(Self.arguments(server.port, root: fixture.root, path: "/ssh.txt"))
        expectOneCleanLine(notHTTP, status: 3, contains: "pinning: check: localhost: the server did not answer with HTTP")
        #expect(!notHTTP.stderr.contains("certificate"), "a non-HTTP reply is not blamed on certificates: \(notHTTP.stderr)")

        let status = try await fixture.check(Self.arguments(server.port, root: fixture.root, path: "/missing.txt"))
        expectOneCleanLine(status, status: 3, contains: "pinning: check: https://localhost:\(server.port)/missing.txt: the server answered HTTP 404 Not Found")

        // --verbose adds the details (on stderr); --json puts them in the report on stdout.
        let verbose = try await fixture.check(Self.arguments(server.port, root: fixture.root, path: "/missing.txt") + ["--verbose"])
        #expect(verbose.status == 3)
        #expect(verbose.stdout.isEmpty)
        #expect(verbose.stderr.contains("TRUSTED: localhost"), "\(verbose.stderr)")
        #expect(verbose.stderr.contains("no such thing"), "\(verbose.stderr)")
        let json = try await fixture.check(Self.arguments(server.port, root: fixture.root, path: "/ssh.txt") + ["--json"])
        #expect(json.status == 3)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json)")
        #expect((object["error"] as? String)?.contains("did not answer with HTTP") == true)
        #expect(object["errorDetail"] is String)
        #expect(json.stderr.split(separator: "\n").count == 1, "\(json.stderr)")
    }

    @Test("an untrusted server: the verdict once on stdout (exit 1), nothing on stderr, no internals")
    func untrusted() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey], in: fixture.directory)
        defer { server.stop() }
        let run = try await fixture.check(Self.arguments(server.port, root: fixture.clientRoot))
        #expect(run.status == 1, "\(run)")
        #expect(run.stdout.contains("NOT TRUSTED: localhost"))
        #expect(run.stderr.isEmpty, "\(run.stderr)")
        for marker in internalsMarkers { #expect(!run.stdout.contains(marker), "\(marker): \(run.stdout)") }
    }

    @Test("a server that refuses our client certificate: the same line with its alert 20 times in a row (openssl s_server -Verify 1 and pinning serve)", .enabled(if: CLI.hasOpenSSL))
    func refusedClientCertificate() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let openssl = try await ServerProcess.openssl(
            serving: fixture,
            ["-www", "-Verify", "1", "-verify_return_error", "-CAfile", fixture.clientRoot]
        )
        defer { openssl.stop() }
        let serve = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey, "--client-ca", fixture.clientRoot], in: fixture.directory)
        defer { serve.stop() }
        let foreign = try TestChain(host: "client-9", ipAddresses: [], leafUsage: .clientAuth, rootName: "Foreign Client Root")
        let foreignCert = try fixture.directory.write("foreign-chain.pem", TestPKI.pemBundle(foreign.presented))
        let foreignKey = try fixture.directory.write("foreign.key", foreign.leaf.privateKeyPEM)
        let required =
            "pinning: check: localhost: the server refused the handshake: TLS alert certificate_required (116) (the server requires a client certificate: give one with --identity, or --identity-cert and --identity-key)\n"
        let cases: [(port: Int, identity: [String], line: String)] = [
            (openssl.port, [], required),
            (serve.port, [], required),
            (
                openssl.port, ["--identity-cert", foreignCert, "--identity-key", foreignKey],
                "pinning: check: localhost: the server refused the handshake: TLS alert unknown_ca (48) (the server did not accept our client certificate)\n"
            ),
        ]
        for item in cases {
            var lines: [String: Int] = [:]
            for _ in 0..<20 {
                let run = try await fixture.check(Self.arguments(item.port, root: fixture.root) + item.identity)
                #expect(run.status == 3 && run.stdout.isEmpty, "\(run)")
                lines[run.stderr, default: 0] += 1
            }
            #expect(lines == [item.line: 20], "\(lines)")
        }
        // Our serve refusing a foreign client: BoringSSL's alert for a certificate our callback refused.
        let foreignAtServe = try await fixture.check(Self.arguments(serve.port, root: fixture.root) + ["--identity-cert", foreignCert, "--identity-key", foreignKey])
        expectOneCleanLine(foreignAtServe, status: 3, contains: "the server refused the handshake: TLS alert")
    }

    @Test(
        "--json: the alert s_server sent as a value under each TLS 1.3 AEAD (decrypted from the records), the line naming it",
        .enabled(if: CLI.hasOpenSSL),
        arguments: ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]
    )
    func alertValueInJSON(_ suite: String) async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let server = try await ServerProcess.openssl(
            serving: fixture, ["-www", "-tls1_3", "-ciphersuites", suite, "-Verify", "1", "-verify_return_error", "-CAfile", fixture.clientRoot])
        defer { server.stop() }
        let run = try await fixture.check(Self.arguments(server.port, root: fixture.root) + ["--json"])
        #expect(run.status == 3, "\(run)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run)")
        let alert = try #require(object["tlsAlert"] as? [String: Any], "\(run.stdout)")
        #expect(alert["code"] as? Int == 116 && alert["name"] as? String == "certificate_required" && alert["level"] as? String == "fatal", "\(alert)")
        #expect(object["errorCode"] as? String == "handshakeFailed")
        #expect((object["error"] as? String)?.hasPrefix("localhost: the server refused the handshake: TLS alert certificate_required (116)") == true, "\(object)")
        #expect(run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
    }

    @Test("check reaches openssl s_server with an Ed25519 certificate", .enabled(if: CLI.hasOpenSSL))
    func ed25519Server() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let ed = try TestChain(host: "localhost", key: .ed25519)
        let chain = try fixture.directory.write("ed-chain.pem", TestPKI.pemBundle(ed.presented))
        let key = try fixture.directory.write("ed.key", ed.leaf.privateKeyPEM)
        let root = try fixture.directory.write("ed-root.pem", ed.root.certificatePEM)
        let leaf = try fixture.directory.write("ed-leaf.pem", ed.leaf.certificatePEM)
        let intermediate = try fixture.directory.write("ed-intermediate.pem", ed.intermediate.certificatePEM)
        let server = try await ServerProcess.openssl(["-cert", leaf, "-cert_chain", intermediate, "-key", key, "-www"], in: fixture.directory)
        defer { server.stop() }
        let run = try await fixture.check(Self.arguments(server.port, root: root))
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("TRUSTED: localhost"))
        // And our own serve with the same Ed25519 certificate.
        let serve = try await ServeProcess(["--cert", chain, "--key", key], in: fixture.directory)
        defer { serve.stop() }
        let own = try await fixture.check(Self.arguments(serve.port, root: root))
        #expect(own.status == 0, "\(own)")
    }

    @Test("serve --client-ca resumes sessions: openssl s_client -sess_out, then -sess_in says Reused and the reply names the client", .enabled(if: CLI.hasOpenSSL), arguments: ["-tls1_2", "-tls1_3"])
    func serveResumes(_ version: String) async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let serve = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey, "--client-ca", fixture.clientRoot], in: fixture.directory)
        defer { serve.stop() }
        let session = fixture.directory.path("session-\(version).pem")
        let leaf = try fixture.directory.write("client-leaf-only.pem", fixture.client.leaf.certificatePEM)
        let intermediates = try fixture.directory.write("client-intermediates.pem", fixture.client.intermediate.certificatePEM)
        func probe(_ reuse: Bool) async throws -> String {
            let out = fixture.directory.path("probe-\(UUID().uuidString).out")
            let status = try await CLI.openssl(
                [
                    "s_client", "-connect", "127.0.0.1:\(serve.port)", "-cert", leaf, "-cert_chain", intermediates, "-key", fixture.clientKey,
                    version, "-noservername", "-ign_eof", reuse ? "-sess_in" : "-sess_out", session,
                ],
                stdin: "GET / HTTP/1.0\r\n\r\n",
                stdoutPath: out
            )
            let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            #expect(status == 0, "\(text)")
            return text
        }
        let first = try await probe(false)
        #expect(first.contains("New,"), "\(first.prefix(2000))")
        #expect(first.contains("\"subject\":\"CN=client-7\""), "\(first.suffix(1500))")
        let second = try await probe(true)
        #expect(second.contains("Reused,"), "\(second.prefix(2000))")
        #expect(second.contains("\"subject\":\"CN=client-7\""), "the resumed session carries the validated client: \(second.suffix(1500))")
    }
}
