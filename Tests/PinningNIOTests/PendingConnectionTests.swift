import Foundation
import NIOCore
import NIOHTTP1
import Pinning
import PinningTestSupport
import Testing

@testable import PinningNIO

/// A connection being made that other requests join (``PinnedHTTPClient`` with `.automatic`, which waits to learn
/// whether the server speaks HTTP/2) belongs to none of them: one request's shortened time must not cut it short
/// for the others.
@Suite("PinnedHTTPClient: a pending connection outlives the time of the request that started it", .enabled(if: TestTools.python3Available))
struct PendingConnectionTests {
    /// A TLS server (HTTP/1.1 in ALPN) that waits 1 s before each handshake, then answers one request with `ok`.
    /// Prints `PORT n`.
    static let slowHandshakeServer = #"""
        import socket, ssl, sys, threading, time
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[1], sys.argv[2])
        ctx.set_alpn_protocols(["http/1.1"])
        ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(16)
        print("PORT %d" % ls.getsockname()[1], flush=True)
        def serve(c):
            try:
                time.sleep(1.0)
                t = ctx.wrap_socket(c, server_side=True)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = t.recv(4096)
                    if not chunk: return
                    data += chunk
                t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                t.close()
            except Exception:
                c.close()
        while True:
            c, _ = ls.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
        """#

    @Test("a request whose time runs out while it waits for the connection fails alone; another waiting for the same connection gets its answer")
    func shortenedTimeDoesNotLeak() async throws {
        let chain = try TestChain(host: "api.example.com")
        let directory = try TemporaryDirectory(prefix: "pinning-pending-connection")
        defer { directory.remove() }
        let certificate = try directory.write("chain.pem", TestPKI.pemBundle(chain.presented))
        let key = try directory.write("key.pem", chain.leaf.privateKeyPEM)
        let script = try directory.write("server.py", Self.slowHandshakeServer)
        let server = try await ServerProcess("/usr/bin/python3", ["-u", script, certificate, key], in: directory) { line in
            line.hasPrefix("PORT ") ? Int(line.dropFirst(5)) : nil
        }
        defer { server.stop() }
        let client = try PinnedHTTPClient(
            evaluator: SecurityPolicy.default, settings: TrustSettings(platformRoots: TrustRoots([chain.root.certificate])),
            configuration: PinnedHTTPClientConfiguration(connectTimeout: .seconds(10), httpVersions: .automatic), group: testGroup)
        defer { Task { await client.shutdown() } }
        let target = try RequestTarget(try #require(URL(string: "https://api.example.com:\(server.port)/")))
        let loopback: PinnedHTTPClient.Resolve = { _, port in try? SocketAddress(ipAddress: "127.0.0.1", port: port) }

        // The first request has 400 ms left of its chain (the end of a redirect chain): it starts the connection.
        let short = Task { () async throws -> HTTPExchange in
            try await client.exchange(
                target, request: PinnedHTTPClient.RequestLine(method: .GET, body: nil, deadline: .now() + .milliseconds(400)), headers: HTTPHeaders(),
                resolve: loopback)
        }
        try await Task.sleep(for: .milliseconds(100))
        // The second has the whole connect timeout (10 s) and joins the connection the first started.
        let whole = try await client.exchange(target, request: PinnedHTTPClient.RequestLine(method: .GET, body: nil), headers: HTTPHeaders(), resolve: loopback)
        #expect(whole.head.status == .ok)
        #expect(whole.body == Array("ok".utf8))
        let shortResult = await short.result
        switch shortResult {
        case .success(let exchange): Issue.record("the 400 ms request was answered after a 1 s handshake: \(exchange.head.status)")
        case .failure(let error): #expect((error as? PinningConnectionError)?.code == .timedOut, "\(error)")
        }
    }
}
