import Foundation
import NIOCore
import Pinning
import PinningNIO
import PinningPKI
import PinningTestSupport
import Testing

/// ``TUFHTTPFetcher``'s limits over a chain of redirects, against a Python `http.server` on 127.0.0.1: the length cap
/// covers every body read, redirects' included, not each step alone.
@Suite("TUF fetcher: the length cap covers the whole redirect chain", .enabled(if: TestTools.python3Available))
struct TUFFetcherRedirectTests {
    /// `/file`: 300 bytes; `/moved`: a 302 to `/file` with a 300-byte body of its own. Prints `PORT n`.
    static let server = #"""
        import http.server
        class H(http.server.BaseHTTPRequestHandler):
            def log_message(s, *a): pass
            def do_GET(s):
                body = b"x" * 300
                if s.path == "/moved":
                    s.send_response(302); s.send_header("Location", "/file")
                elif s.path.startswith("/to?"):
                    s.send_response(302); s.send_header("Location", s.path[4:])
                elif s.path == "/short":
                    s.send_response(200); s.send_header("Content-Length", "300"); s.end_headers()
                    s.wfile.write(b"x" * 100); s.wfile.flush(); s.close_connection = True
                    return
                else:
                    s.send_response(200)
                s.send_header("Content-Length", str(len(body))); s.end_headers(); s.wfile.write(body)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        print("PORT %d" % server.server_address[1], flush=True)
        server.serve_forever()
        """#

    @Test("a 300-byte file fits a 500-byte cap; behind a redirect whose own body is 300 bytes, it does not")
    func lengthCapOverTheChain() async throws {
        let directory = try TemporaryDirectory(prefix: "tuf-fetcher-chain")
        defer { directory.remove() }
        let script = try directory.write("server.py", Self.server)
        let server = try await ServerProcess("/usr/bin/python3", ["-u", script], in: directory) { line in
            line.hasPrefix("PORT ") ? Int(line.dropFirst(5)) : nil
        }
        defer { server.stop() }
        let client = try PinnedHTTPClient(evaluator: SecurityPolicy.defaultEvaluation, group: testGroup)
        defer { Task { await client.shutdown() } }
        let fetcher = TUFHTTPFetcher(client: client, allowsPlainHTTP: true)
        let base = "http://127.0.0.1:\(server.port)"

        let direct = try await fetcher.fetch(try #require(URL(string: base + "/file")), maximumLength: 500)
        #expect(direct.count == 300)
        // Each step alone (300 bytes) is under the cap; the chain (600) is not.
        let moved = try #require(URL(string: base + "/moved"))
        do throws(TUFFetchError) {
            _ = try await fetcher.fetch(moved, maximumLength: 500)
            Issue.record("the chain's 600 bytes passed a 500-byte cap")
        } catch {
            #expect(error.kind == .failed, "\(error)")
            #expect(error.message.hasPrefix(base + "/file: "), "names the URL that failed, after the redirect: \(error)")
        }
        // With room for both bodies, the redirect is followed.
        let followed = try await fetcher.fetch(moved, maximumLength: 600)
        #expect(followed.count == 300)
    }

    /// Starts the server of ``server`` in `directory`.
    static func start(in directory: TemporaryDirectory) async throws -> ServerProcess {
        let script = try directory.write("server.py", Self.server)
        return try await ServerProcess("/usr/bin/python3", ["-u", script], in: directory) { line in
            line.hasPrefix("PORT ") ? Int(line.dropFirst(5)) : nil
        }
    }

    @Test("a redirect read over plain http stays on the same host: http at the same port or https; another host or port is refused unless opted in")
    func plainRedirectsStayOnTheHost() async throws {
        let directory = try TemporaryDirectory(prefix: "tuf-fetcher-plain-redirects")
        defer { directory.remove() }
        let server = try await Self.start(in: directory)
        defer { server.stop() }
        // A port nothing listens on, so that a redirect followed there fails differently from one refused.
        let other = try await Self.start(in: directory)
        defer { other.stop() }
        let client = try PinnedHTTPClient(evaluator: SecurityPolicy.defaultEvaluation, group: testGroup)
        defer { Task { await client.shutdown() } }
        let fetcher = TUFHTTPFetcher(client: client, allowsPlainHTTP: true)
        let base = "http://127.0.0.1:\(server.port)"

        // The same host and port, by a relative and an absolute Location: followed.
        #expect(try await fetcher.fetch(try #require(URL(string: base + "/to?/file")), maximumLength: 1000).count == 300)
        #expect(try await fetcher.fetch(try #require(URL(string: base + "/to?\(base)/file")), maximumLength: 1000).count == 300)
        // Another port of the same host (a server that would answer), another name of it, and another host: refused,
        // before any request is sent there.
        for away in ["http://127.0.0.1:\(other.port)/file", "http://localhost:\(server.port)/file", "http://127.0.0.2:\(server.port)/file", "https://localhost:\(server.port)/file"] {
            let url = try #require(URL(string: base + "/to?" + away))
            do throws(TUFFetchError) {
                _ = try await fetcher.fetch(url, maximumLength: 1000)
                Issue.record("a plain redirect to \(away) was followed")
            } catch {
                #expect(error.kind == .failed, "\(error)")
                #expect(error.message.contains("refusing a redirect from plain http to another host or port (\(away))"), "\(away): \(error)")
                #expect(!error.message.contains("\n"))
            }
        }
        // Opted in: another port is followed.
        let anywhere = TUFHTTPFetcher(client: client, allowsPlainHTTP: true, followsPlainRedirectsToOtherHosts: true)
        #expect(try await anywhere.fetch(try #require(URL(string: base + "/to?http://127.0.0.1:\(other.port)/file")), maximumLength: 1000).count == 300)
    }

    /// A TLS server whose every response is `HTTP/1.0 200` with a 300-byte body and no Content-Length, ended by
    /// closing the socket without a TLS close_notify: nothing tells a whole body from one cut short. Arguments:
    /// chain, key. Prints `PORT n`.
    static let closeDelimitedServer = #"""
        import socket, ssl, sys, threading
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[1], sys.argv[2])
        ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(16)
        print("PORT %d" % ls.getsockname()[1], flush=True)
        def serve(c):
            try:
                t = ctx.wrap_socket(c, server_side=True)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = t.recv(4096)
                    if not chunk: return
                    data += chunk
                t.sendall(b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * 300)
                # close() without unwrap(): no close_notify.
                t.close()
            except Exception:
                c.close()
        while True:
            c, _ = ls.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
        """#

    @Test("an https body ended only by a close without close_notify is refused as possibly cut short, in words, not handed to TUF")
    func closeDelimitedWithoutCloseNotify() async throws {
        let chain = try TestChain(host: "repo.example")
        let directory = try TemporaryDirectory(prefix: "tuf-fetcher-close-delimited")
        defer { directory.remove() }
        let certificate = try directory.write("chain.pem", TestPKI.pemBundle(chain.presented))
        let key = try directory.write("key.pem", chain.leaf.privateKeyPEM)
        let script = try directory.write("server.py", Self.closeDelimitedServer)
        let server = try await ServerProcess("/usr/bin/python3", ["-u", script, certificate, key], in: directory) { line in
            line.hasPrefix("PORT ") ? Int(line.dropFirst(5)) : nil
        }
        defer { server.stop() }
        let client = try PinnedHTTPClient(evaluator: SecurityPolicy.default, settings: TrustSettings(platformRoots: TrustRoots([chain.root.certificate])), group: testGroup)
        defer { Task { await client.shutdown() } }
        let fetcher = TUFHTTPFetcher(client: client) { _, port in try? SocketAddress(ipAddress: "127.0.0.1", port: port) }
        let url = try #require(URL(string: "https://repo.example:\(server.port)/timestamp.json"))
        do throws(TUFFetchError) {
            let bytes = try await fetcher.fetch(url, maximumLength: 1000)
            Issue.record("a body that may be cut short was handed on: \(bytes.count) bytes")
        } catch {
            #expect(error.kind == .failed)
            #expect(
                error.message
                    == "\(url.absoluteString): the response may have been cut short: the server closed the connection without a TLS close_notify, and its body had no Content-Length or chunked framing to show it was whole (300 bytes received)",
                "\(error)")
        }
    }

    @Test("a body cut short of its Content-Length is a fetch failure that says so, in words")
    func truncatedBody() async throws {
        let directory = try TemporaryDirectory(prefix: "tuf-fetcher-short")
        defer { directory.remove() }
        let server = try await Self.start(in: directory)
        defer { server.stop() }
        let client = try PinnedHTTPClient(evaluator: SecurityPolicy.defaultEvaluation, group: testGroup)
        defer { Task { await client.shutdown() } }
        let fetcher = TUFHTTPFetcher(client: client, allowsPlainHTTP: true)
        let url = try #require(URL(string: "http://127.0.0.1:\(server.port)/short"))
        do throws(TUFFetchError) {
            let bytes = try await fetcher.fetch(url, maximumLength: 1000)
            Issue.record("a body cut short was accepted: \(bytes.count) bytes")
        } catch {
            #expect(error.kind == .failed)
            #expect(
                error.message == "\(url.absoluteString): the response was cut short: the server closed the connection after 100 of the 300 body bytes its Content-Length announced",
                "\(error)")
        }
    }
}
