import Foundation
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
}
