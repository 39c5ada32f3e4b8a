import Foundation
import Pinning
import PinningTestSupport
import Testing

// Issue 27, item 2: `pinning serve --client-ca` logged a refused client only when our policy (or the client check)
// refused it. Clients the TLS library turned away (no certificate, a chain over BoringSSL's 100 KiB, an alert from
// the client, not TLS at all) and clients that left while their chain was judged had no line. Now every client
// whose handshake does not end trusted is one line, naming it by address and port, saying why; a client that
// sent nothing at all (a port probe) is not a refusal and has none.

@Suite("pinning serve --client-ca: one line per refused client, always", .enabled(if: TestTools.python3Available))
struct ServeRefusalLogCLITests {
    @Test("no certificate, another CA, 70 certificates, a chain over 100 KiB, a client distrusting the server, plain HTTP: one line each")
    func oneLinePerRefusedClient() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-serve-refusals")
        defer { directory.remove() }
        let server = try TestChain(host: "localhost")
        let client = try TestChain(host: "device-1", ipAddresses: [], leafUsage: .clientAuth, rootName: "Refusal Client Root", intermediateName: "Refusal Client CA")
        let stranger = try TestChain(host: "device-2", ipAddresses: [], leafUsage: .clientAuth, rootName: "Stranger Root", intermediateName: "Stranger CA")
        let serverChain = try directory.write("server-chain.pem", TestPKI.pemBundle(server.presented))
        let serverKey = try directory.write("server.key", server.leaf.privateKeyPEM)
        let serverRoot = try directory.write("server-root.pem", server.root.certificatePEM)
        let clientRoot = try directory.write("client-root.pem", client.root.certificatePEM)
        try directory.write("client-chain.pem", TestPKI.pemBundle(client.presented))
        try directory.write("client.key", client.leaf.privateKeyPEM)
        try directory.write("stranger-chain.pem", TestPKI.pemBundle(stranger.presented))
        try directory.write("stranger.key", stranger.leaf.privateKeyPEM)
        try directory.write("stranger-root.pem", stranger.root.certificatePEM)
        // 70 certificates in all (the limit is 64), well under 100 KiB.
        let fillers = try (0..<68).map { try TestPKI.root("Filler \($0)").certificate }
        try directory.write("many-chain.pem", TestPKI.pemBundle(client.presented + fillers))
        // Under 64 certificates, over BoringSSL's 100 KiB Certificate message.
        let large = try (0..<30).map { try TestPKI.root("Large \($0) " + String(repeating: "x", count: 4000)).certificate }
        let huge = try directory.write("huge-chain.pem", TestPKI.pemBundle(client.presented + large))
        #expect(large.reduce(0) { $0 + $1.derBytes.count } > 110 * 1024, "the chain must exceed 100 KiB")
        _ = huge

        let serve = try await ServeProcess(["--cert", serverChain, "--key", serverKey, "--client-ca", clientRoot], in: directory)
        defer { serve.stop() }
        let script = try directory.write("slow_client.py", SlowClients.script)
        let run = try await TestTools.run("/usr/bin/python3", ["-u", script, "refusals", "\(serve.port)", serverRoot, directory.path], in: directory, timeout: 180)
        let cases = run.stdout.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
        #expect(cases.count == 8, "\(run)")
        func port(_ name: String) -> Int? { cases.first { $0["case"] as? String == name }?["port"] as? Int }
        #expect(cases.first { $0["case"] as? String == "good" }?["outcome"] as? String == "served", "the fixture's good client is served: \(run)")

        let expected: [(String, String)] = [
            ("noCertificate", "the client presented no certificate"),
            ("otherCA", ": ["),
            ("tooManyCertificates", "[tooManyCertificates]"),
            ("over100KiB", "larger than the TLS library reads"),
            // TLS 1.3 (Python's OpenSSL): the alert arrives unencrypted; under TLS 1.2 it is read as unknown_ca.
            ("distrustsServer", "this server's certificate"),
            ("plainHTTP", "the client did not speak TLS"),
        ]
        // Every refused client's line, within a bound generous for a loaded machine.
        let deadline = Date().addingTimeInterval(30)
        func lines(for port: Int) -> [Substring] {
            serve.subprocess.stderr.split(separator: "\n").filter { $0.contains("refused the client at 127.0.0.1:\(port):") }
        }
        while Date() < deadline, !expected.allSatisfy({ port($0.0).map { !lines(for: $0).isEmpty } ?? true }) {
            try await Task.sleep(for: .milliseconds(50))
        }
        for (name, words) in expected {
            let clientPort = try #require(port(name), "\(name) ran: \(run)")
            let found = lines(for: clientPort)
            #expect(found.count == 1, "\(name): exactly one line: \(serve.subprocess.stderr)")
            #expect(found.first?.contains(words) == true, "\(name): \(found) should say \(words)")
            #expect(found.first.map { !$0.contains("OPENSSL_internal") && !$0.contains(".swift:") } ?? true, "\(name): words, not internals: \(found)")
        }
        for name in ["good", "silent"] {
            let clientPort = try #require(port(name))
            #expect(lines(for: clientPort).isEmpty, "\(name) was not refused: \(serve.subprocess.stderr)")
        }
    }

    // Issue 28, item 5: without --client-ca, `serve` said nothing when a client's handshake failed, so whoever
    // debugged a client against it saw only the client's side. Now the client's alert is read from the records
    // (TLSAlertObserver) and said in words, as nginx logs a failed SSL handshake.
    @Test(
        "serve without --client-ca: a client refusing this server's certificate is one line with its alert, TLS 1.2 and 1.3; plain HTTP is one line; a trusting or silent client none",
        .enabled(if: CLI.hasOpenSSL))
    func plainServerSaysWhyAClientLeft() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-serve-plain")
        defer { directory.remove() }
        let server = try TestChain(host: "localhost")
        let serverChain = try directory.write("server-chain.pem", TestPKI.pemBundle(server.presented))
        let serverKey = try directory.write("server.key", server.leaf.privateKeyPEM)
        let serverRoot = try directory.write("server-root.pem", server.root.certificatePEM)
        let strangerRoot = try directory.write("stranger-root.pem", try TestPKI.root("Not This Server's Root").certificatePEM)
        let serve = try await ServeProcess(["--cert", serverChain, "--key", serverKey], in: directory)
        defer { serve.stop() }
        func lines() -> [Substring] {
            serve.subprocess.stderr.split(separator: "\n").filter { $0.contains("pinning: serve: the TLS handshake with the client at 127.0.0.1:") }
        }
        /// The lines that appeared after `count` lines, once at least one did (or a bound generous for a loaded machine).
        func newLines(after count: Int) async throws -> ArraySlice<Substring> {
            let deadline = Date().addingTimeInterval(20)
            while lines().count == count, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
            return lines().dropFirst(count)
        }
        func sClient(trusting roots: String, _ version: String) async throws -> Int32 {
            try await CLI.openssl(
                ["s_client", "-connect", "127.0.0.1:\(serve.port)", "-servername", "localhost", "-CAfile", roots, "-verify_return_error", version],
                stdin: "", stdoutPath: directory.path("s_client-\(UUID().uuidString).out"))
        }

        // A client that trusts the server, and one that connects and leaves without a byte: nothing to say.
        #expect(try await sClient(trusting: serverRoot, "-tls1_3") == 0)
        let probe = try await TestTools.run(
            "/usr/bin/python3", ["-c", "import socket; socket.create_connection(('127.0.0.1', \(serve.port))).close()"], in: directory)
        #expect(probe.status == 0, "\(probe)")

        for version in ["-tls1_2", "-tls1_3"] {
            let before = lines().count
            #expect(try await sClient(trusting: strangerRoot, version) != 0, "\(version): openssl must refuse a server it does not trust")
            let said = try await newLines(after: before)
            #expect(said.count == 1, "\(version): exactly one line: \(serve.subprocess.stderr)")
            // OpenSSL sends unknown_ca (48) for a chain to a root it does not have.
            #expect(said.first?.contains("the client refused this server's certificate: TLS alert unknown_ca (48)") == true, "\(version): \(said)")
            #expect(said.first.map { !$0.contains("OPENSSL_internal") && !$0.contains(".swift:") && !$0.contains("NIOSSL") } ?? false, "\(said)")
        }

        let before = lines().count
        // Plain HTTP to the HTTPS port; the server may answer or reset: either is fine for the client.
        let plainHTTP = try directory.write(
            "plain_http.py",
            """
            import socket, sys
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
            try:
                s.recv(100)
            except OSError:
                pass
            s.close()
            """)
        let http = try await TestTools.run("/usr/bin/python3", [plainHTTP, "\(serve.port)"], in: directory)
        #expect(http.status == 0, "\(http)")
        let said = try await newLines(after: before)
        #expect(said.count == 1, "plain HTTP: \(serve.subprocess.stderr)")
        #expect(said.first?.contains("did not speak TLS") == true, "\(said)")
        // Three clients failed their handshake: three lines, no more (the trusting and the silent client have none).
        #expect(lines().count == 3, "\(serve.subprocess.stderr)")
    }
}
