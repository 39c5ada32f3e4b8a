import Foundation
import Pinning
import PinningTestSupport
import Testing

// Issue 27, item 4: `pinning proxy` held a CONNECT dribbled at one byte a second for 40 s (200 such clients fill
// --max-connections); `pinning serve` kept connections that never sent a ClientHello, and kept a connection open
// after answering 400. Both now have a handshake deadline and a request-head deadline (--handshake-timeout,
// --request-head-timeout; 10 s and 30 s by default), and close after an error answer. The slow clients are Python
// scripts on loopback; the deadlines are set short here so the tests take seconds, and every bound on how long a
// close may take is generous (a loaded 2-core machine), far below the 40 s a dribbling client would otherwise hold.

@Suite("serve and proxy deadlines: slow clients are cut off, error answers close", .enabled(if: TestTools.python3Available))
struct DeadlinesCLITests {
    /// A close must come after the deadline, and long before the client would have given up on its own.
    static func expectCutOff(_ outcome: SlowClients.Outcome, after seconds: Double, sourceLocation: SourceLocation = #_sourceLocation) {
        let closed = outcome.closedAfter
        #expect(closed != nil, "the server must close: \(outcome)", sourceLocation: sourceLocation)
        if let closed {
            #expect(closed >= seconds - 0.2 && closed < seconds + 15, "closed after \(closed) s, deadline \(seconds) s: \(outcome)", sourceLocation: sourceLocation)
        }
    }

    struct Serve {
        let directory: TemporaryDirectory
        let process: ServeProcess
        let serverRoot: String

        init(_ extra: [String]) async throws {
            let directory = try TemporaryDirectory(prefix: "pinning-serve-deadlines")
            self.directory = directory
            // Until the fixture is whole no test holds it: a step that throws removes the directory here.
            var ready = false
            defer { if !ready { directory.remove() } }
            let server = try TestChain(host: "localhost")
            let client = try TestChain(host: "device-1", ipAddresses: [], leafUsage: .clientAuth, rootName: "Deadline Client Root", intermediateName: "Deadline Client CA")
            let chain = try self.directory.write("server-chain.pem", TestPKI.pemBundle(server.presented))
            let key = try self.directory.write("server.key", server.leaf.privateKeyPEM)
            self.serverRoot = try self.directory.write("server-root.pem", server.root.certificatePEM)
            let clientRoot = try self.directory.write("client-root.pem", client.root.certificatePEM)
            let arguments = ["--cert", chain, "--key", key] + extra.map { $0 == "CLIENT-CA" ? clientRoot : $0 }
            self.process = try await ServeProcess(arguments, in: self.directory)
            ready = true
        }

        func stop() {
            self.process.stop()
            self.directory.remove()
        }
    }

    @Test("serve: a client that never sends a ClientHello is closed at --handshake-timeout, and logged with --client-ca")
    func serveHandshakeDeadline() async throws {
        let serve = try await Serve(["--handshake-timeout", "1", "--client-ca", "CLIENT-CA"])
        defer { serve.stop() }
        let silent = try await SlowClients.run(["silent", "\(serve.process.port)", "40"], in: serve.directory)
        Self.expectCutOff(silent, after: 1)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline && !serve.process.subprocess.stderr.contains("127.0.0.1:\(silent.port):") {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(
            serve.process.subprocess.stderr.contains(
                "refused the client at 127.0.0.1:\(silent.port): the client did not complete its TLS handshake within 1 s"),
            "\(serve.process.subprocess.stderr)")
    }

    @Test("serve: a request head dribbled inside TLS gets 408 at --request-head-timeout; garbage gets 400 and an oversized head 431, in words, and the connection closes")
    func serveRequestHeadDeadlineAndErrorAnswers() async throws {
        let serve = try await Serve(["--request-head-timeout", "1.5"])
        defer { serve.stop() }
        let port = "\(serve.process.port)"
        let dribbled = try await SlowClients.run(
            ["tls-dribble", port, "40", "0.3", "GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n", serve.serverRoot, "localhost"],
            in: serve.directory)
        Self.expectCutOff(dribbled, after: 1.5)
        #expect(dribbled.received.hasPrefix("HTTP/1.1 408 Request Timeout"), "\(dribbled)")
        #expect(dribbled.received.contains("pinning serve: the client's request head did not arrive whole within 1.5 s"), "\(dribbled)")

        // Errors are answered at once and the connection closes: well before the 1.5 s head deadline could.
        let garbage = try await SlowClients.run(["tls-send", port, "40", "0", "NOT HTTP AT ALL\r\n\r\n", serve.serverRoot, "localhost"], in: serve.directory)
        #expect(garbage.received.hasPrefix("HTTP/1.1 400 Bad Request"), "\(garbage)")
        #expect(garbage.received.contains("pinning serve: not an HTTP/1.1 request"), "\(garbage)")
        #expect((garbage.closedAfter ?? 99) < 1.4, "closed after the 400, not by a deadline: \(garbage)")

        let big = try serve.directory.write("big-head.txt", "GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + String(repeating: "b", count: 100_000) + "\r\n\r\n")
        let oversized = try await SlowClients.run(["tls-send", port, "40", "0", "@" + big, serve.serverRoot, "localhost"], in: serve.directory)
        #expect(oversized.received.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large"), "\(oversized)")
        #expect(oversized.received.contains("larger than 80 KiB"), "\(oversized)")
        #expect(oversized.closedAfter != nil, "\(oversized)")

        // A well-behaved client is untouched: kept alive across two requests sent at once.
        let good = try await SlowClients.run(
            ["tls-send", port, "3", "0", "GET /a HTTP/1.1\r\nHost: localhost\r\n\r\nGET /b HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", serve.serverRoot, "localhost"],
            in: serve.directory)
        #expect(good.received.components(separatedBy: "HTTP/1.1 200 OK").count - 1 == 2, "\(good)")
    }

    struct Proxy {
        let directory: TemporaryDirectory
        let process: Subprocess
        let port: Int
        let caPath: String

        init(_ extra: [String]) async throws {
            let directory = try TemporaryDirectory(prefix: "pinning-proxy-deadlines")
            self.directory = directory
            // Until the fixture is whole no test holds it: a step that throws removes the directory here.
            var ready = false
            defer { if !ready { directory.remove() } }
            let pins = ["sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString(), "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString()]
            let config = try self.directory.write("pinning.json", #"{"version": 1, "domains": {"api.test": {"pins": ["\#(pins[0])", "\#(pins[1])"]}}}"#)
            self.process = try Subprocess(
                ["proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", self.directory.path("ca")] + extra, in: self.directory)
            let lines = try await ProxyFixture.startupLines(self.process, count: 2)
            guard lines.count >= 2, let port = Int(lines[0].split(separator: ":").last ?? "") else {
                self.process.kill()
                throw ServeProcess.ServeError(message: "proxy did not start: \(lines) \(self.process.stderr)")
            }
            self.port = port
            let caLine = lines[1].dropFirst("local CA: ".count)
            self.caPath = caLine[..<(caLine.lastIndex(of: "(") ?? caLine.endIndex)].trimmingCharacters(in: .whitespaces)
            ready = true
        }

        /// The log line of the connection from `port`, waiting up to 10 s for it.
        func logLine(port: Int) async throws -> String {
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                if let line = self.process.stderr.split(separator: "\n").first(where: { $0.contains("client=127.0.0.1:\(port) ") }) { return String(line) }
                try await Task.sleep(for: .milliseconds(50))
            }
            return ""
        }

        func stop() {
            self.process.kill()
            self.directory.remove()
        }
    }

    @Test("proxy: a dribbled CONNECT gets 408 at --request-head-timeout, a silent client is closed, both logged requestHeadTimeout")
    func proxyConnectDeadline() async throws {
        let proxy = try await Proxy(["--request-head-timeout", "1.5"])
        defer { proxy.stop() }
        let dribbled = try await SlowClients.run(
            ["dribble", "\(proxy.port)", "40", "0.3", "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n"], in: proxy.directory)
        Self.expectCutOff(dribbled, after: 1.5)
        #expect(dribbled.received.hasPrefix("HTTP/1.1 408 Request Timeout"), "\(dribbled)")
        let dribbledLine = try await proxy.logLine(port: dribbled.port)
        #expect(dribbledLine.contains("failure=requestHeadTimeout") && dribbledLine.contains("did not arrive whole within 1.5 s"), "\(dribbledLine) / \(proxy.process.stderr)")

        let silent = try await SlowClients.run(["silent", "\(proxy.port)", "40"], in: proxy.directory)
        Self.expectCutOff(silent, after: 1.5)
        #expect(silent.received.isEmpty, "nothing to answer: \(silent)")
        let silentLine = try await proxy.logLine(port: silent.port)
        #expect(silentLine.contains("failure=requestHeadTimeout") && silentLine.contains("sent no request within 1.5 s"), "\(silentLine)")
    }

    @Test("proxy: an intercepted client that never starts TLS is closed at --handshake-timeout; a request head dribbled inside TLS gets 408")
    func proxyInterceptDeadlines() async throws {
        let proxy = try await Proxy(["--handshake-timeout", "1", "--request-head-timeout", "2.5"])
        defer { proxy.stop() }
        let noHandshake = try await SlowClients.run(["connect-silent", "\(proxy.port)", "40", "api.test:443"], in: proxy.directory)
        Self.expectCutOff(noHandshake, after: 1)
        let noHandshakeLine = try await proxy.logLine(port: noHandshake.port)
        #expect(
            noHandshakeLine.hasPrefix("intercept ") && noHandshakeLine.contains("failure=handshakeTimeout")
                && noHandshakeLine.contains("did not complete its TLS handshake within 1 s"), "\(noHandshakeLine) / \(proxy.process.stderr)")

        let dribbled = try await SlowClients.run(
            [
                "tls-dribble", "\(proxy.port)", "40", "0.3", "GET / HTTP/1.1\r\nHost: api.test\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n", proxy.caPath, "api.test",
                "api.test:443",
            ],
            in: proxy.directory)
        // The first request's deadline runs from the CONNECT's answer; the TLS session started just after it.
        Self.expectCutOff(dribbled, after: 2.2)
        #expect(dribbled.received.hasPrefix("HTTP/1.1 408 Request Timeout"), "\(dribbled)")
        let dribbledLine = try await proxy.logLine(port: dribbled.port)
        #expect(dribbledLine.contains("failure=requestHeadTimeout"), "\(dribbledLine) / \(proxy.process.stderr)")
    }

    @Test("the deadline options refuse what is not a usable number of seconds: exit 2, naming the option")
    func deadlineOptionsRangeChecked() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-deadline-options")
        defer { directory.remove() }
        let prefixes = [["serve", "--cert", "c.pem", "--key", "k.pem"], ["proxy", "--config", "p.json"]]
        for prefix in prefixes {
            for option in ["--handshake-timeout", "--request-head-timeout"] {
                for value in ["0", "-1", "inf", "nan", "1e300", "604800.5", "abc", ""] {
                    let run = try await Executable.pinning(prefix + [option, value], in: directory)
                    #expect(run.status == 2 && run.stderr.contains(option), "\(prefix[0]) \(option) \(value): \(run)")
                }
            }
        }
    }

    @Test("--help of serve and proxy names both deadlines and their defaults")
    func helpNamesTheDeadlines() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-deadline-help")
        defer { directory.remove() }
        for command in ["serve", "proxy"] {
            let help = try await Executable.pinning([command, "--help"], in: directory)
            #expect(help.status == 0, "\(help)")
            #expect(help.stdout.contains("--handshake-timeout") && help.stdout.contains("--request-head-timeout"), "\(command): \(help.stdout)")
            #expect(help.stdout.contains("default 10") && help.stdout.contains("default 30"), "\(command): \(help.stdout)")
        }
    }
}
