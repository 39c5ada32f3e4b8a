import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOTLS
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

/// While a resumed session is checked again (``PinningHandshakeHandler``), what the peer sends waits: the server
/// stops reading, so it waits in the socket (TCP slows the peer), not in the server's memory.
@Suite("A resumed session's re-check holds the peer back, not its bytes", .enabled(if: TestTools.python3Available))
struct ResumedSessionHoldTests {
    /// A TLS 1.2 client (Python's ssl): a full handshake and a request, then the session resumed on a second
    /// connection, on which it sends up to `LIMIT` bytes as fast as the server takes them; after `SECONDS` it prints
    /// what it sent and leaves. Arguments: port, client chain (PEM), key, seconds, limit.
    static let client = #"""
        import socket, ssl, sys, threading, time
        port, chain, key, seconds, limit = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
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
                while sent[0] < limit:
                    second.sendall(chunk)
                    sent[0] += len(chunk)
            except Exception:
                pass
        threading.Thread(target=pump, daemon=True).start()
        time.sleep(seconds)
        print("SENT %d" % sent[0], flush=True)
        """#

    /// The most a loopback connection's kernel buffers can hold: the largest send buffer TCP autotuning gives the
    /// client (`tcp_wmem`'s maximum) and the largest receive buffer it gives the server (`tcp_rmem`'s maximum).
    /// Read from the running kernel, not assumed: these vary (4 MiB and 6 MiB by default; raised on many hosts).
    static func loopbackBufferMaxima() throws -> Int {
        func maximum(_ name: String) throws -> Int {
            let path = "/proc/sys/net/ipv4/\(name)"
            let text = try String(contentsOfFile: path, encoding: .utf8)
            let fields = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
            return try #require(fields.count == 3 ? Int(fields[2]) : nil, "\(path) reads \(text)")
        }
        return try maximum("tcp_wmem") + maximum("tcp_rmem")
    }

    @Test("a peer sending far more than the sockets' buffers while its resumed session is re-checked (4 s) gets no further than them")
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
        // What the kernel's buffers on loopback can take (the client's send buffer and the server's receive buffer at
        // their largest) and 6 MiB for the read under way and the client's chunk in flight; the client offers four
        // times that, all of which a server reading on would take.
        let bound = try Self.loopbackBufferMaxima() + 6 * 1024 * 1024
        let limit = 4 * bound
        let arguments = ["-u", script, String(server.port), chain, key, "2.5", String(limit)]
        let result = try await TestTools.run("/usr/bin/python3", arguments, in: directory, timeout: 60)
        let output = result.output
        #expect(output.contains("REUSED True"), "\(output)")
        let sent = try #require(output.split(separator: "\n").first { $0.hasPrefix("SENT ") }.flatMap { Int($0.dropFirst(5)) }, "\(output)")
        #expect(sent < bound, "the client sent \(sent) bytes (of \(limit) offered) while its session was being checked; the buffers hold \(bound)")
    }

    /// A TLS 1.2 client (Python's ssl): a full handshake and a request, then the session resumed on a second
    /// connection, on which it sends an HTTP request every 50 ms for `SECONDS` without ever sending close_notify (the
    /// server's close leaves NIOSSL waiting up to 5 s for it), prints what it sent and received, and leaves.
    /// Arguments: port, client chain (PEM), key, seconds.
    static let persistentClient = #"""
        import socket, ssl, sys, time
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
        raw = socket.create_connection(("127.0.0.1", port))
        second = ctx.wrap_socket(raw, session=session)
        print("REUSED %s" % second.session_reused, flush=True)
        second.setblocking(False)
        sent, received, end = 0, 0, time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                request = b"GET /after-refusal-%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % sent
                second.sendall(request)
                sent += 1
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
                pass
            except Exception as error:
                print("SEND-ERROR %r" % error, flush=True)
                break
            try:
                data = second.recv(65536)
                received += len(data)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                pass
            except Exception:
                pass
            time.sleep(0.05)
        print("SENT %d RECEIVED %d" % (sent, received), flush=True)
        # Leave without close_notify: the TCP connection is dropped under the TLS layer.
        raw.close()
        """#

    @Test("a peer whose resumed session is refused gets nothing to the application, even without close_notify")
    func refusedResumptionDeliversNothing() async throws {
        let setup = try MutualTLSSetup()
        var configuration = MutualTLSServer.Configuration(
            identity: try setup.serverChain.leaf.tlsIdentity(chain: [setup.serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [setup.clientChain.root.certificate], clientRule: .builtIn())
        // Trusted at the full handshake; revoked by the time the session is resumed.
        configuration.clientCheck = { _, resumed in resumed ? "revoked since the session was made" : nil }
        let server = try MutualTLSServer(configuration: configuration)
        let connections = NIOLockedValueBox<[InboundCounter.Seen]>([])
        let answered = NIOLockedValueBox<[String]>([])
        let http = try await LoopbackHTTPSServer(
            tls: { pipeline in
                _ = try server.addHandlers(to: pipeline)
                // Right behind the pinning handler: everything it passes on to the application is counted here.
                try pipeline.addHandler(InboundCounter(connections: connections))
            },
            respond: { head, _ in
                answered.withLockedValue { $0.append(head.uri) }
                return SimpleHTTPResponse(status: .ok, body: Array("hello\n".utf8))
            })
        defer { Task { await http.stop() } }
        let directory = try TemporaryDirectory(prefix: "pinning-resumed-refused")
        defer { directory.remove() }
        let chain = try directory.write("client.pem", setup.clientChain.leaf.certificatePEM + setup.clientChain.intermediate.certificatePEM)
        let key = try directory.write("client.key", setup.clientChain.leaf.privateKeyPEM)
        let script = try directory.write("client.py", Self.persistentClient)
        // 2.5 s of requests: well inside NIOSSL's 5 s wait for the peer's close_notify after the server's close.
        let result = try await TestTools.run("/usr/bin/python3", ["-u", script, String(http.port), chain, key, "2.5"], in: directory, timeout: 60)
        let output = result.output
        #expect(output.contains("REUSED True"), "\(output)")
        let sentLine = try #require(output.split(separator: "\n").first { $0.hasPrefix("SENT ") }, "\(output)")
        let fields = sentLine.split(separator: " ")
        let sent = try #require(fields.count == 4 ? Int(fields[1]) : nil, "\(output)")
        #expect(sent > 0, "the client sent no request on the resumed session: \(output)")
        // Both connections have closed on the server (the second when the client dropped it, or at NIOSSL's timeout).
        let deadline = ContinuousClock.now + .seconds(10)
        while connections.withLockedValue({ $0.count }) < 2, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let seen = connections.withLockedValue { $0 }
        #expect(seen.count == 2, "\(seen)")
        let refused = seen.filter { !$0.handshake }
        #expect(refused.count == 1, "exactly one connection (the resumed one) is refused: \(seen)")
        #expect(refused.allSatisfy { $0.bytes == 0 && $0.reads == 0 }, "the refused connection passed data on: \(seen)")
        #expect(answered.withLockedValue { $0 } == ["/"], "only the full handshake's request is answered: \(answered.withLockedValue { $0 })")
    }
}

/// Counts what reaches the application on one connection, and reports it when the connection closes.
final class InboundCounter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    struct Seen: Sendable, CustomStringConvertible {
        var handshake = false
        var reads = 0
        var bytes = 0
        var description: String { "(handshake: \(self.handshake), reads: \(self.reads), bytes: \(self.bytes))" }
    }

    private let connections: NIOLockedValueBox<[Seen]>
    private var seen = Seen()

    init(connections: NIOLockedValueBox<[Seen]>) {
        self.connections = connections
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls { self.seen.handshake = true }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.seen.reads += 1
        self.seen.bytes += Self.unwrapInboundIn(data).readableBytes
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let seen = self.seen
        self.connections.withLockedValue { $0.append(seen) }
        context.fireChannelInactive()
    }
}
