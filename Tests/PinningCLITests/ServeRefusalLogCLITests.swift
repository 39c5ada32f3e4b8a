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
}
