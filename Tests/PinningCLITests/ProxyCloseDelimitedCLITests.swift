import Foundation
import Pinning
import PinningTestSupport
import Testing

// A user's report: through `pinning proxy`, a response whose body ends when the upstream closes (HTTP/1.0 with no
// Content-Length, `openssl s_server -www`) arrived whole but never ended: the proxy kept the client's connection open,
// so curl waited until its --max-time. Now the client's connection closes after such a response, and a response cut
// short of its Content-Length is still logged failure=upstreamClosed.

@Suite("pinning proxy ends a close-delimited response", .enabled(if: TestTools.python3Available && curlAvailable))
struct ProxyCloseDelimitedCLITests {
    @Test("HTTP/1.0 and HTTP/1.1 bodies that end at the upstream's close end for curl and Python requests; one cut short of its length is upstreamClosed")
    func closeDelimited() async throws {
        let setup = try ProxyBlameCLITests.Setup()
        defer { setup.directory.remove() }
        let upstream = try await setup.pythonUpstream("close_upstream.py", Self.closeUpstream)
        defer { upstream.stop() }
        let (proxy, port, ca) = try await setup.proxy(upstreamPort: upstream.port)
        defer { proxy.kill() }
        let base = "https://api.test:\(upstream.port)"

        for path in ["/http10", "/http11"] {
            // --max-time 20: before the fix curl got the whole body, then waited for an end that never came (exit 28).
            let headers = setup.directory.path("headers\(path.dropFirst()).txt")
            let result = try await TestTools.run(
                curlPath,
                [
                    "-sS", "--max-time", "20", "-x", "http://127.0.0.1:\(port)", "--cacert", ca, "-o", "/dev/null", "-D", headers, "-w",
                    "%{http_code} %{size_download}", base + path,
                ], in: setup.directory, timeout: 60)
            #expect(result.status == 0, "\(path): \(result) / \(proxy.stderr)")
            #expect(result.stdout == "200 200000", "\(path): \(result)")
            // The proxy tells the client that its connection ends with this response (RFC 9112 §9.6).
            let head = try String(contentsOfFile: headers, encoding: .utf8).lowercased()
            #expect(head.contains("\r\nconnection: close\r\n"), "\(path): \(head)")
        }

        if pythonRequestsAvailable {
            let client = try setup.directory.write(
                "client.py",
                """
                import sys, requests
                proxy, ca, base = sys.argv[1:4]
                for path in ("/http10", "/http11"):
                    response = requests.get(base + path, proxies={"https": proxy}, verify=ca, timeout=20)
                    print(path, response.status_code, len(response.content))
                """)
            let result = try await TestTools.run(
                "/usr/bin/python3", [client, "http://127.0.0.1:\(port)", ca, base], in: setup.directory,
                environment: ["NO_PROXY": "", "no_proxy": ""], timeout: 90)
            #expect(result.status == 0, "\(result)")
            #expect(result.stdout.contains("/http10 200 200000") && result.stdout.contains("/http11 200 200000"), "\(result)")
        }

        // A body cut short of its Content-Length by a clean close is still the upstream's failure.
        let short = try await TestTools.run(
            curlPath, ["-sS", "--max-time", "20", "-x", "http://127.0.0.1:\(port)", "--cacert", ca, "-o", "/dev/null", base + "/short"],
            in: setup.directory, timeout: 60)
        #expect(short.status != 0 && short.status != 28, "curl sees the response cut short, at once: \(short)")

        // A close-delimited HTTP/1.1 body ended by a reset: the client gets no last chunk, so it sees the body cut
        // short, and the log says upstreamClosed (before, NIO's chunked framing ended it as if complete).
        let reset = try await TestTools.run(
            curlPath, ["-sS", "--max-time", "20", "-x", "http://127.0.0.1:\(port)", "--cacert", ca, "-o", "/dev/null", base + "/reset11"],
            in: setup.directory, timeout: 60)
        #expect(reset.status != 0 && reset.status != 28, "curl sees the reset body cut short, at once: \(reset)")

        let deadline = Date().addingTimeInterval(10)
        var lines: [Substring] = []
        let expected = pythonRequestsAvailable ? 6 : 4
        while Date() < deadline {
            lines = proxy.stderr.split(separator: "\n").filter { $0.hasPrefix("intercept ") }
            if lines.count >= expected { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(lines.count == expected, "one line per client connection: \(proxy.stderr)")
        let cut = lines.filter { $0.contains("failure=") }
        #expect(cut.count == 2, "only the short and the reset bodies are failures: \(lines)")
        #expect(cut.allSatisfy { $0.contains("verdict=trusted failure=upstreamClosed") }, "\(lines)")
        #expect(lines.allSatisfy { $0.contains("verdict=trusted") }, "\(lines)")
    }

    /// A TLS server answering /http10 with HTTP/1.0 and no Content-Length, /http11 with HTTP/1.1, no length and
    /// `Connection: close` (200,000 bytes each, then a close without close_notify, as many servers do), /reset11 as
    /// /http11 with 1,000 bytes ended by a TCP reset, and /short with a Content-Length of 100,000 and 1,000 bytes
    /// before a clean close.
    static let closeUpstream = #"""
        import socket, ssl, struct, sys, threading, time
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[1], sys.argv[2])
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        print("PORT %d" % listener.getsockname()[1], flush=True)

        def serve(raw):
            try:
                conn = context.wrap_socket(raw, server_side=True)
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                path = head.split(b" ")[1]
                if path == b"/http10":
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"a" * 200000)
                elif path == b"/http11":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n" + b"b" * 200000)
                elif path == b"/reset11":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n" + b"d" * 1000)
                    time.sleep(0.5)
                    # A reset, not a close: SO_LINGER with a zero timeout.
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"c" * 1000)
                conn.close()
            except Exception as error:
                print("error %r" % error, file=sys.stderr, flush=True)

        while True:
            raw, _ = listener.accept()
            threading.Thread(target=serve, args=(raw,), daemon=True).start()
        """#
}
