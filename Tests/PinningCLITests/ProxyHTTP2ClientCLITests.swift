import Foundation
import PinningTestSupport
import Testing

/// The intercepting proxy speaks HTTP/1.1 inside intercepted sessions (no h2 in its ALPN). A client that sends the
/// HTTP/2 preface anyway is logged in words, not with the parser's internal error name ("paused swift http parser
/// error": new-user trial 3), and `--help` says the limitation.
@Suite("pinning proxy: an HTTP/2 client inside an intercepted session", .enabled(if: curlAvailable))
struct ProxyHTTP2ClientCLITests {
    @Test("curl --http2 falls back to HTTP/1.1; --http2-prior-knowledge is logged as the client speaking HTTP/2; --help says so")
    func http2Client() async throws {
        let fixture = try await ProxyFixture()
        defer { fixture.stop() }
        let url = "https://api.test:\(fixture.upstreamPort)/h2"
        let fallback = try await fixture.curl(["--http2", "-x", "http://127.0.0.1:\(fixture.proxyPort)", "--cacert", fixture.caPath, url])
        #expect(fallback.status == 0 && fallback.stdout.hasPrefix("HTTP/1.1 200"), "\(fallback)")

        let words = "inside its TLS session the client spoke HTTP/2 (this proxy speaks HTTP/1.1 inside intercepted sessions)"
        // Up to five attempts: the connection's log line sometimes carries no failure at all (2 of 7 tries with a
        // debug build: the close seems to win a race with the parse error; noted in the issue, not fixed here), and
        // what is tested here is the words when it does.
        for _ in 0..<5 where !fixture.proxy.stderr.contains(words) {
            let prior = try await fixture.curl(["--http2-prior-knowledge", "-x", "http://127.0.0.1:\(fixture.proxyPort)", "--cacert", fixture.caPath, url])
            #expect(prior.status != 0, "\(prior)")
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline && !fixture.proxy.stderr.contains(words) {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        #expect(fixture.proxy.stderr.contains(words), "\(fixture.proxy.stderr)")
        #expect(!fixture.proxy.stderr.contains("parser error"), "\(fixture.proxy.stderr)")

        let help = try await Executable.pinning(["proxy", "--help"], in: fixture.directory)
        // argument-parser wraps the text: compared with its line breaks as spaces.
        let helpText = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(help.status == 0 && helpText.contains("Inside an intercepted session the proxy speaks HTTP/1.1 only"), "\(help)")
    }
}
