import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

// Runs `pinning serve` as a subprocess on 127.0.0.1 (port 0) and `pinning check` against it, checking the exit
// statuses of the CLI contract. Every wait is bounded and every subprocess is killed on every path.

/// A child process with stdout/stderr captured to files, killed when done.
final class Subprocess: @unchecked Sendable {
    let process = Process()
    /// When the process was launched and when it ended, taken on Foundation's threads: unaffected by how long
    /// the test's own task waits to be resumed.
    let launched: Date
    private let endedBox = NSLock()
    private var endedAt: Date?
    var runtime: TimeInterval? { self.endedBox.withLock { self.endedAt.map { $0.timeIntervalSince(self.launched) } } }
    let stdoutPath: String
    let stderrPath: String
    let arguments: [String]

    init(_ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:]) throws {
        let binary = try PinningBinary.located.get()
        let id = UUID().uuidString
        self.arguments = arguments
        self.stdoutPath = directory.path("proc-\(id).out")
        self.stderrPath = directory.path("proc-\(id).err")
        _ = FileManager.default.createFile(atPath: self.stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: self.stderrPath, contents: nil)
        self.process.executableURL = binary
        self.process.arguments = arguments
        self.process.currentDirectoryURL = URL(fileURLWithPath: directory.path, isDirectory: true)
        self.process.standardInput = FileHandle.nullDevice
        self.process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: self.stdoutPath))
        self.process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: self.stderrPath))
        var merged = ProcessInfo.processInfo.environment
        for (key, value) in environment { merged[key] = value }
        self.process.environment = merged
        self.launched = Date()
        // Weak: the process holds this handler, so a strong self would be a retain cycle (found by the suite's
        // ASan run: every Subprocess, its Process and its environment leaked).
        self.process.terminationHandler = { [weak self] _ in
            let now = Date()
            guard let self else { return }
            self.endedBox.withLock { self.endedAt = now }
        }
        try self.process.run()
    }

    var stdout: String { (try? String(contentsOfFile: self.stdoutPath, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: self.stderrPath, encoding: .utf8)) ?? "" }

    /// Waits up to `seconds` for exit; kills the process when it overstays. Returns the status, nil if killed.
    func wait(seconds: Double) async -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        while self.process.isRunning && Date() < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if self.process.isRunning {
            self.kill()
            return nil
        }
        // Foundation reports the exit (isRunning false) before it runs the termination handler that records
        // the end time: give the handler a bounded moment, so `runtime` is there for the caller.
        let recorded = Date().addingTimeInterval(5)
        while self.runtime == nil && Date() < recorded {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return self.process.terminationStatus
    }

    /// SIGTERM, then SIGKILL after a second if needed.
    func kill() {
        guard self.process.isRunning else { return }
        self.process.terminate()
        let deadline = Date().addingTimeInterval(1)
        while self.process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if self.process.isRunning { Foundation.kill(self.process.processIdentifier, SIGKILL) }
        self.process.waitUntilExit()
    }
}

/// `pinning serve --port 0 …`, up once its `listening on` line appeared.
final class ServeProcess: @unchecked Sendable {
    let subprocess: Subprocess
    let port: Int

    init(_ arguments: [String], in directory: TemporaryDirectory) async throws {
        let subprocess = try Subprocess(["serve", "--port", "0"] + arguments, in: directory)
        self.subprocess = subprocess
        let deadline = Date().addingTimeInterval(20)
        var port: Int?
        while port == nil && Date() < deadline && subprocess.process.isRunning {
            if let line = subprocess.stdout.split(separator: "\n").first(where: { $0.hasPrefix("listening on https://") }) {
                port = Int(line.split(separator: ":").last ?? "")
            } else {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        // A starved task may resume after the deadline although the line is there: look once more.
        if port == nil, let line = subprocess.stdout.split(separator: "\n").first(where: { $0.hasPrefix("listening on https://") }) {
            port = Int(line.split(separator: ":").last ?? "")
        }
        guard let port else {
            subprocess.kill()
            throw ServeError(message: "pinning serve did not report listening: stdout \(subprocess.stdout) stderr \(subprocess.stderr)")
        }
        self.port = port
    }

    struct ServeError: Error, CustomStringConvertible {
        var message: String
        var description: String { self.message }
    }

    func stop() { self.subprocess.kill() }
}

/// The PKIs: a server chain for localhost, a client chain (clientAuth) from another root, and files.
struct ServeCheckFixture {
    let directory: TemporaryDirectory
    let server: TestChain
    let client: TestChain
    let serverChain: String
    let serverKey: String
    let root: String
    let clientRoot: String
    let clientCert: String
    let clientKey: String
    let clientP12: String?

    init() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-serve-check")
        self.directory = directory
        // Until the fixture is whole no test holds it: a step that throws removes the directory here.
        var ready = false
        defer { if !ready { directory.remove() } }
        self.server = try TestChain(host: "localhost")
        self.client = try TestChain(host: "client-7", ipAddresses: [], leafUsage: .clientAuth, rootName: "Client Root", intermediateName: "Client Issuing CA")
        self.serverChain = try self.directory.write("server-chain.pem", TestPKI.pemBundle(self.server.presented))
        self.serverKey = try self.directory.write("server.key", self.server.leaf.privateKeyPEM)
        self.root = try self.directory.write("root.pem", self.server.root.certificatePEM)
        self.clientRoot = try self.directory.write("client-root.pem", self.client.root.certificatePEM)
        self.clientCert = try self.directory.write("client-chain.pem", TestPKI.pemBundle(self.client.presented))
        self.clientKey = try self.directory.write("client.key", self.client.leaf.privateKeyPEM)
        if CLI.hasOpenSSL {
            let leaf = try self.directory.write("client-leaf.pem", self.client.leaf.certificatePEM)
            let extra = try self.directory.write("client-cas.pem", TestPKI.pemBundle([self.client.intermediate.certificate]))
            let p12 = self.directory.path("client.p12")
            let status = try await CLI.openssl(["pkcs12", "-export", "-in", leaf, "-inkey", self.clientKey, "-certfile", extra, "-out", p12, "-passout", "pass:s3cret"])
            self.clientP12 = status == 0 ? p12 : nil
        } else {
            self.clientP12 = nil
        }
        ready = true
    }

    func checkArguments(_ port: Int) -> [String] {
        ["check", "https://localhost:\(port)/", "--resolve", "localhost:\(port):127.0.0.1", "--roots", self.root]
    }

    /// Runs `pinning check`, bounded.
    func check(_ arguments: [String], environment: [String: String] = [:], seconds: Double = 20) async throws -> (status: Int32?, stdout: String, stderr: String, runtime: TimeInterval?) {
        let run = try Subprocess(arguments, in: self.directory, environment: environment)
        let status = await run.wait(seconds: seconds)
        return (status, run.stdout, run.stderr, run.runtime)
    }
}

@Suite("pinning serve + pinning check", .serialized)
struct ServeCheckCLITests {
    @Test("trusted: exit 0; the chain served in order with pins, the verdict, status and JSON body")
    func trusted() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey], in: fixture.directory)
        defer { server.stop() }
        let intermediatePin = Pin(spkiOf: fixture.server.intermediate.certificate).description
        let run = try await fixture.check(fixture.checkArguments(server.port) + ["--pin-sha256", intermediatePin])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("TRUSTED: localhost"))
        #expect(run.stdout.contains("[0] CN=localhost"))
        #expect(run.stdout.contains("[1] CN=Test Intermediate CA"))
        #expect(run.stdout.contains(Pin(spkiOf: fixture.server.leaf.certificate).description))
        #expect(run.stdout.contains("HTTP 200"))
        #expect(run.stdout.contains("\"clientCertificate\":null"))

        let json = try await fixture.check(fixture.checkArguments(server.port) + ["--json"])
        #expect(json.status == 0, "\(json)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["status"] as? Int == 200)
        let evaluation = try #require(object["evaluation"] as? [String: Any])
        let presented = try #require(evaluation["presentedChain"] as? [[String: Any]])
        #expect(presented.map { $0["subject"] as? String } == ["CN=localhost", "CN=Test Intermediate CA"])
    }

    @Test(
        "HTTP/2 (issue 13): curl negotiates h2 with ALPN; three requests in parallel share one connection (counted on the server: one handshake in its key log); HTTP/1.1 is still served; mTLS names the client on every stream",
        .enabled(if: curlAvailable))
    func http2() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let keyLog = fixture.directory.path("server-keys.log")
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey, "--keylog", keyLog], in: fixture.directory)
        defer { server.stop() }
        let base = "https://localhost:\(server.port)"
        let common = ["-s", "--cacert", fixture.root, "--resolve", "localhost:\(server.port):127.0.0.1", "-w", "\n%{http_version}\n"]

        let parallel = try await TestTools.run(curlPath, ["--http2", "-Z"] + common + ["\(base)/a", "\(base)/b", "\(base)/c"], timeout: 30)
        #expect(parallel.status == 0, "\(parallel)")
        for path in ["/a", "/b", "/c"] {
            #expect(parallel.stdout.contains("\"path\":\"\(path)\""), "\(parallel.stdout)")
        }
        #expect(parallel.stdout.components(separatedBy: "\"httpVersion\":\"HTTP/2.0\"").count == 4, "\(parallel.stdout)")
        // One TLS handshake for the three requests: each handshake writes its client random to the key log.
        let randoms = Set(
            try String(contentsOfFile: keyLog, encoding: .utf8).split(separator: "\n").compactMap { line -> Substring? in
                let fields = line.split(separator: " ")
                return fields.count == 3 ? fields[1] : nil
            })
        #expect(randoms.count == 1, "handshakes seen by the server: \(randoms.count)")

        // `pinning check --http2` (PinnedHTTPClient offering h2) reaches the same server over HTTP/2.
        let check = try await fixture.check(fixture.checkArguments(server.port) + ["--http2", "--json"])
        #expect(check.status == 0, "\(check)")
        let checked = try #require(try JSONSerialization.jsonObject(with: Data(check.stdout.utf8)) as? [String: Any])
        #expect(checked["httpVersion"] as? String == "HTTP/2.0", "\(check.stdout)")
        #expect((checked["body"] as? String)?.contains("\"httpVersion\":\"HTTP/2.0\"") == true, "\(check.stdout)")
        let plainCheck = try await fixture.check(fixture.checkArguments(server.port) + ["--json"])
        let plainChecked = try #require(try JSONSerialization.jsonObject(with: Data(plainCheck.stdout.utf8)) as? [String: Any])
        #expect(plainChecked["httpVersion"] as? String == "HTTP/1.1", "without --http2, as before: \(plainCheck.stdout)")

        let http1 = try await TestTools.run(curlPath, ["--http1.1"] + common + ["\(base)/one"], timeout: 30)
        #expect(http1.status == 0 && http1.stdout.contains("\"httpVersion\":\"HTTP/1.1\""), "\(http1)")

        let mutual = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey, "--client-ca", fixture.clientRoot], in: fixture.directory)
        defer { mutual.stop() }
        let mtlsBase = "https://localhost:\(mutual.port)"
        let device = try await TestTools.run(
            curlPath,
            [
                "--http2", "-s", "--cacert", fixture.root, "--resolve", "localhost:\(mutual.port):127.0.0.1", "--cert", fixture.clientCert, "--key", fixture.clientKey,
                "\(mtlsBase)/x", "\(mtlsBase)/y",
            ],
            timeout: 30)
        #expect(device.status == 0, "\(device)")
        #expect(device.stdout.components(separatedBy: "\"subject\":\"CN=client-7\"").count == 3, "both streams name the client: \(device.stdout)")
        #expect(device.stdout.components(separatedBy: "\"httpVersion\":\"HTTP/2.0\"").count == 3, "\(device.stdout)")
        let anonymous = try await TestTools.run(
            curlPath, ["--http2", "-s", "--cacert", fixture.root, "--resolve", "localhost:\(mutual.port):127.0.0.1", "\(mtlsBase)/z"], timeout: 30)
        #expect(anonymous.status != 0 && !anonymous.stdout.contains("httpVersion"), "a client without a certificate gets no answer: \(anonymous)")
    }

    @Test("wrong pin: exit 1 with the reason")
    func wrongPin() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey], in: fixture.directory)
        defer { server.stop() }
        let otherPin = Pin(spkiOf: fixture.client.root.certificate).description
        let run = try await fixture.check(fixture.checkArguments(server.port) + ["--pin-sha256", otherPin])
        #expect(run.status == 1, "\(run)")
        #expect(run.stdout.contains("NOT TRUSTED: localhost"))
        #expect(run.stdout.contains("pinMismatch"))
        #expect(!run.stdout.contains("HTTP 200"))
    }

    @Test("mutual TLS with a .p12 identity: exit 0; the server saw the client certificate", .enabled(if: CLI.hasOpenSSL))
    func mutualTLSWithPKCS12() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let p12 = try #require(fixture.clientP12)
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey, "--client-ca", fixture.clientRoot], in: fixture.directory)
        defer { server.stop() }
        let run = try await fixture.check(
            fixture.checkArguments(server.port) + ["--identity", p12, "--passphrase-env", "PINNING_TEST_P12"],
            environment: ["PINNING_TEST_P12": "s3cret"]
        )
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("\"subject\":\"CN=client-7\""))

        let pem = try await fixture.check(fixture.checkArguments(server.port) + ["--identity-cert", fixture.clientCert, "--identity-key", fixture.clientKey])
        #expect(pem.status == 0, "\(pem)")
        #expect(pem.stdout.contains("\"subject\":\"CN=client-7\""))
    }

    @Test("mutual TLS without an identity: exit 3 with a message")
    func mutualTLSWithoutIdentity() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey, "--client-ca", fixture.clientRoot], in: fixture.directory)
        defer { server.stop() }
        let run = try await fixture.check(fixture.checkArguments(server.port))
        #expect(run.status == 3, "\(run)")
        // TLS 1.3: our side of the handshake completes before the server refuses; its alert is what is reported,
        // once, on stderr (the trusted chain is shown only with --verbose or --json).
        #expect(run.stderr.hasPrefix("pinning: check: localhost: the server refused the handshake: TLS alert certificate_required (116)"), "\(run.stderr)")
        #expect(run.stdout.isEmpty, "\(run.stdout)")
    }

    @Test("wrong passphrase: exit 2, the message says the passphrase is wrong", .enabled(if: CLI.hasOpenSSL))
    func wrongPassphrase() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let p12 = try #require(fixture.clientP12)
        let passphraseFile = try fixture.directory.write("wrong.txt", "not-it\n")
        let run = try await fixture.check(
            ["check", "https://localhost:1/", "--roots", fixture.root, "--identity", p12, "--passphrase-file", passphraseFile]
        )
        #expect(run.status == 2, "\(run)")
        #expect(run.stderr.contains("passphrase"))
        #expect(run.stderr.contains("wrong passphrase") || run.stderr.contains("does not unlock"))
    }

    @Test("closed port: exit 3 within a few seconds")
    func closedPort() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        // A port that was just free: serve on port 0, then stop it.
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey], in: fixture.directory)
        let port = server.port
        server.stop()
        let run = try await fixture.check(fixture.checkArguments(port), seconds: 20)
        #expect(run.status == 3, "\(run)")
        // The process's own lifetime (start included): the refusal is immediate (ECONNREFUSED), not the 5 s
        // connect timeout.
        let runtime = try #require(run.runtime)
        #expect(runtime < 5, "\(runtime)")
        #expect(run.stderr == "pinning: check: cannot connect to localhost (127.0.0.1) port \(port): connection refused\n", "\(run.stderr)")
    }

    @Test("mutual TLS with a client certificate from another CA: exit 3")
    func mutualTLSForeignClient() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let foreign = try TestChain(host: "client-9", ipAddresses: [], leafUsage: .clientAuth, rootName: "Foreign Client Root")
        let cert = try fixture.directory.write("foreign-chain.pem", TestPKI.pemBundle(foreign.presented))
        let key = try fixture.directory.write("foreign.key", foreign.leaf.privateKeyPEM)
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey, "--client-ca", fixture.clientRoot], in: fixture.directory)
        defer { server.stop() }
        let run = try await fixture.check(fixture.checkArguments(server.port) + ["--identity-cert", cert, "--identity-key", key])
        #expect(run.status == 3, "\(run)")
        #expect(!run.stdout.contains("HTTP 200"))
    }

    @Test("--config: the host configuration decides (pinned match 0, mismatch 1); flags that it replaces are bad input")
    func hostConfiguration() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey], in: fixture.directory)
        defer { server.stop() }
        func config(_ pins: [Certificate]) throws -> String {
            let list = pins.map { "\"\(Pin(spkiOf: $0).description)\"" }.joined(separator: ", ")
            return try fixture.directory.write(
                "pinning-\(UUID().uuidString).json",
                "{\"version\": 1, \"unlistedHosts\": \"default\", \"domains\": {\"localhost\": {\"pins\": [\(list)]}}}"
            )
        }
        let matching = try config([fixture.server.intermediate.certificate, fixture.client.root.certificate])
        let trusted = try await fixture.check(fixture.checkArguments(server.port) + ["--config", matching])
        #expect(trusted.status == 0, "\(trusted)")
        #expect(trusted.stdout.contains("mode configuration"))

        let mismatching = try config([fixture.client.intermediate.certificate, fixture.client.root.certificate])
        let refused = try await fixture.check(fixture.checkArguments(server.port) + ["--config", mismatching])
        #expect(refused.status == 1, "\(refused)")

        let conflicting = try await fixture.check(fixture.checkArguments(server.port) + ["--config", matching, "--anchors-only"])
        #expect(conflicting.status == 2, "\(conflicting)")
        #expect(conflicting.stderr.contains("cannot be combined with --config"))
    }

    @Test("--config: a wildcard, ** or includeSubdomains entry is found as the configuration finds it; its pins are the expected pins in text and JSON")
    func hostConfigurationPatterns() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let chain = try TestChain(host: "api.example.test")
        let serverChain = try fixture.directory.write("api-chain.pem", TestPKI.pemBundle(chain.presented))
        let serverKey = try fixture.directory.write("api.key", chain.leaf.privateKeyPEM)
        let root = try fixture.directory.write("api-root.pem", chain.root.certificatePEM)
        let server = try await ServeProcess(["--cert", serverChain, "--key", serverKey], in: fixture.directory)
        defer { server.stop() }
        let good = [Pin(spkiOf: chain.intermediate.certificate), Pin(spkiOf: fixture.client.root.certificate)]
        let bad = [Pin(spkiOf: fixture.client.intermediate.certificate), Pin(spkiOf: fixture.client.root.certificate)]
        for (key, extra) in [("*.example.test", ""), ("**.example.test", ""), ("example.test", ", \"includeSubdomains\": true")] {
            for (pins, status) in [(good, Int32(0)), (bad, Int32(1))] {
                let list = pins.map { "\"\($0)\"" }.joined(separator: ", ")
                let config = try fixture.directory.write(
                    "pinning-\(UUID().uuidString).json",
                    "{\"version\": 1, \"unlistedHosts\": \"reject\", \"domains\": {\"\(key)\": {\"pins\": [\(list)]\(extra)}}}"
                )
                let arguments = [
                    "check", "https://api.example.test:\(server.port)/", "--resolve", "api.example.test:\(server.port):127.0.0.1",
                    "--roots", root, "--config", config,
                ]
                let text = try await fixture.check(arguments)
                #expect(text.status == status, "\(key) \(text)")
                // The text report lists the expected pins under a refusal (a trusted report shows the path's pins).
                for pin in pins where status == 1 {
                    #expect(text.stdout.contains(pin.description), "\(key): \(pin) missing from\n\(text.stdout)")
                }
                let json = try await fixture.check(arguments + ["--json"])
                #expect(json.status == status, "\(key) \(json)")
                let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
                let expected = (object?["expectedPins"] as? [String]) ?? (object?["evaluation"] as? [String: Any])?["expectedPins"] as? [String]
                #expect(Set(expected ?? []) == Set(pins.map(\.description)), "\(key): \(json.stdout.prefix(600))")
            }
        }
    }

    @Test("IPv6 loopback: serve --bind ::1, check --resolve localhost:PORT:[::1]", .enabled(if: ipv6LoopbackAvailable()))
    func ipv6Loopback() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey, "--bind", "::1"], in: fixture.directory)
        defer { server.stop() }
        #expect(server.subprocess.stdout.contains("listening on https://[::1]:\(server.port)"))
        let run = try await fixture.check(
            ["check", "https://localhost:\(server.port)/", "--resolve", "localhost:\(server.port):[::1]", "--roots", fixture.root]
        )
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("HTTP 200"))
    }

    @Test("serve: bad key file is bad input (exit 2)")
    func serveBadInput() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let run = try Subprocess(["serve", "--port", "0", "--cert", fixture.serverChain, "--key", fixture.directory.path("missing.key")], in: fixture.directory)
        let status = await run.wait(seconds: 10)
        #expect(status == 2, "\(run.stderr)")
        #expect(run.stderr.contains("missing.key"))
    }
}

/// Whether a TCP socket can bind to ::1 here.
func ipv6LoopbackAvailable() -> Bool {
    #if canImport(Glibc)
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
    #else
        let fd = socket(AF_INET6, SOCK_STREAM, 0)
    #endif
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in6()
    address.sin6_family = sa_family_t(AF_INET6)
    address.sin6_addr = in6addr_loopback
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
    }
    return result == 0
}
