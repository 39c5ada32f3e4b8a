import Foundation
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

/// While a resumed session is checked again (``PinningHandshakeHandler``), what the peer sends waits: the server
/// stops reading, so it waits in the socket (TCP slows the peer), not in the server's memory.
@Suite("A resumed session's re-check holds the peer back, not its bytes", .enabled(if: TestTools.python3Available))
struct ResumedSessionHoldTests {
    /// A TLS 1.2 client (Python's ssl): a full handshake and a request, then the session resumed on a second
    /// connection, on which it sends up to 64 MiB as fast as the server takes them; after `SECONDS` it prints what it
    /// sent and leaves. Arguments: port, client chain (PEM), key, seconds.
    static let client = #"""
        import socket, ssl, sys, threading, time
        port, chain, key, seconds = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(chain, key)
        first = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)))
        first.sendall(b"GET / HTTP/1.0\r\n\r\n")
        while first.recv(4096):
            pass
        session = first.session
        first.close()
        second = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), session=session)
        print("REUSED %s" % second.session_reused, flush=True)
        sent = [0]
        def pump():
            chunk = b"x" * 65536
            try:
                while sent[0] < 64 * 1024 * 1024:
                    second.sendall(chunk)
                    sent[0] += len(chunk)
            except Exception:
                pass
        threading.Thread(target=pump, daemon=True).start()
        time.sleep(seconds)
        print("SENT %d" % sent[0], flush=True)
        """#

    @Test("a peer sending 64 MiB while its resumed session is re-checked (4 s) gets no further than the sockets' buffers")
    func peerHeldBack() async throws {
        let setup = try MutualTLSSetup()
        var configuration = MutualTLSServer.Configuration(
            identity: try setup.serverChain.leaf.tlsIdentity(chain: [setup.serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [setup.clientChain.root.certificate], clientRule: .builtIn())
        // The full handshake is accepted at once; a resumed session's check takes 4 s (a slow deny-list, say).
        configuration.clientCheck = { _, resumed in
            if resumed {
                do {
                    try await Task.sleep(for: .seconds(4))
                } catch {
                    return "cancelled"
                }
            }
            return nil
        }
        let server = try await ResumptionTestServer(MutualTLSServer(configuration: configuration))
        defer { Task { await server.stop() } }
        let directory = try TemporaryDirectory(prefix: "pinning-resumed-hold")
        defer { directory.remove() }
        let chain = try directory.write("client.pem", setup.clientChain.leaf.certificatePEM + setup.clientChain.intermediate.certificatePEM)
        let key = try directory.write("client.key", setup.clientChain.leaf.privateKeyPEM)
        let script = try directory.write("client.py", Self.client)
        let result = try await TestTools.run("/usr/bin/python3", ["-u", script, String(server.port), chain, key, "2.5"], in: directory, timeout: 60)
        let output = result.output
        #expect(output.contains("REUSED True"), "\(output)")
        let sent = try #require(output.split(separator: "\n").first { $0.hasPrefix("SENT ") }.flatMap { Int($0.dropFirst(5)) }, "\(output)")
        // The kernel's buffers on loopback (the client's send buffer, at most 4 MiB by default, and the server's
        // receive buffer, at most 6 MiB) and one read under way; a server reading on would have taken all 64 MiB.
        #expect(sent < 16 * 1024 * 1024, "the client sent \(sent) bytes while its session was being checked")
    }
}
