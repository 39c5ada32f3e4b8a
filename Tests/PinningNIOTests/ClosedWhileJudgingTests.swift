import Foundation
import NIOCore
import NIOPosix
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

// Issue 27, item 2: a client that left while its chain was being judged failed the server's handshake as a bare
// TLS failure ("EOF during handshake", said as if the server had closed), so `pinning serve` logged nothing for it.
// The handshake now fails with connectionClosed and PinningHandshakeHandler.closedWhileJudging, which a server's
// log can name.

@Suite("MutualTLSServer: a client that leaves while its chain is judged", .enabled(if: opensslAvailable))
struct ClosedWhileJudgingTests {
    @Test("the handshake fails with connectionClosed, saying the connection closed while the chain was being judged")
    func clientLeavesWhileJudged() async throws {
        let serverChain = try TestChain(host: "device.local", rootName: "Judging Server Root")
        let clientChain = try TestChain(host: "client-3", ipAddresses: [], leafUsage: .clientAuth, rootName: "Judging Client Root", intermediateName: "Judging Client CA")
        let judged = TestFlag()
        var configuration = MutualTLSServer.Configuration(
            identity: try serverChain.leaf.tlsIdentity(chain: [serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [clientChain.root.certificate])
        configuration.clientCheck = { _, _ in
            // A decision that would accept, but only after the client has left: it waits for the test to kill
            // the client and then for its own cancellation (the server abandons it when the connection goes
            // inactive), or 120 s. A fixed 5 s sleep raced the test on CI's loaded machine: the test's polling
            // task woke after the decision had accepted, so the handshake succeeded before the client was killed.
            judged.set()
            let deadline = ContinuousClock.now + .seconds(120)
            while !Task.isCancelled && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
            return nil
        }
        let server = try MutualTLSServer(configuration: configuration)
        let testServer = try await MutualTLSTestServer(server)
        // openssl s_client, killed once the server is judging it: the kernel closes its socket at once. (A NIO
        // client's close would first wait for the server's close_notify, which a server busy judging never sends.)
        let directory = try TemporaryDirectory(prefix: "pinning-closed-while-judged")
        defer { directory.remove() }
        let leaf = try directory.write("client.pem", clientChain.leaf.certificatePEM)
        let intermediate = try directory.write("client-ca.pem", clientChain.intermediate.certificatePEM)
        let key = try directory.write("client.key", clientChain.leaf.privateKeyPEM)
        let serverRoot = try directory.write("server-root.pem", serverChain.root.certificatePEM)
        let client = Process()
        client.executableURL = URL(fileURLWithPath: TestTools.opensslPath)
        client.arguments = [
            "s_client", "-connect", "127.0.0.1:\(testServer.port)", "-servername", "device.local", "-cert", leaf, "-cert_chain", intermediate,
            "-key", key, "-CAfile", serverRoot,
        ]
        let stdin = Pipe()
        client.standardInput = stdin
        client.standardOutput = FileHandle.nullDevice
        client.standardError = FileHandle.nullDevice
        try client.run()
        defer {
            if client.isRunning { kill(client.processIdentifier, SIGKILL) }
            client.waitUntilExit()
        }
        let deadline = Date().addingTimeInterval(30)
        while !judged.isSet && Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(judged.isSet, "the server started judging the client")
        kill(client.processIdentifier, SIGKILL)
        client.waitUntilExit()
        let outcome = await testServer.nextOutcome(within: 150)
        guard case .failure(let error) = outcome else {
            Issue.record("expected a failed handshake, got \(String(describing: outcome))")
            return
        }
        #expect(error.code == .connectionClosed, "\(error)")
        #expect(error.message == PinningHandshakeHandler.closedWhileJudging, "\(error)")
        await testServer.stop()
    }
}
