import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

@testable import PinningProxy

// PinningProxy's own suite (issue 28 item 6): the library's pieces without a running proxy. The proxy itself is
// driven end to end (curl, Python requests, headless Chromium, psql, AsyncHTTPClient) by PinningCLITests and
// PinningAsyncHTTPClientTests.

@Suite("PinningProxy: the library")
struct PinningProxyTests {
    static let pins = [
        "sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString(),
        "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString(),
    ]

    static func configuration(directory: TemporaryDirectory) throws -> PinningConfiguration {
        try PinningConfiguration(
            data: Data(
                #"{"version": 1, "domains": {"api.example.com": {"pins": ["\#(Self.pins[0])", "\#(Self.pins[1])"]}, "**.bücher.example": {"pins": ["\#(Self.pins[0])", "\#(Self.pins[1])"]}}}"#
                    .utf8),
            baseDirectory: directory.path)
    }

    @Test("a log record's text and JSON lines say the kind and verdict as they always did")
    func logLines() throws {
        var record = ProxyLogRecord(
            kind: .intercept, client: "127.0.0.1:5000", host: "api.example.com", upstream: "127.0.0.1:443", verdict: .untrusted,
            failure: "pinMismatch", entry: "api.example.com", bytesUp: 10, bytesDown: 20, requests: 1, durationMilliseconds: 7,
            message: #"the "pin" did not match"#)
        let text = record.line(json: false)
        #expect(text.hasPrefix("intercept client=127.0.0.1:5000 host=api.example.com upstream=127.0.0.1:443 entry=api.example.com verdict=untrusted failure=pinMismatch"))
        #expect(text.hasSuffix(#"message="the 'pin' did not match""#), "\(text)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(record.line(json: true).utf8)) as? [String: Any])
        #expect(json["kind"] as? String == "intercept" && json["verdict"] as? String == "untrusted")
        record.verdict = .notJudged
        record.kind = .refused
        #expect(record.line(json: false).contains("verdict=-") && record.line(json: false).hasPrefix("refused "))
    }

    @Test("a log record's host, upstream, failure and message are the peers': escaped in text, \\uXXXX in JSON with the values unchanged")
    func hostileLogLines() throws {
        let record = ProxyLogRecord(
            kind: .intercept, client: "127.0.0.1:5000", host: "evil\u{1B}[2J\u{202E}例.test", upstream: "127.0.0.1:443", verdict: .untrusted,
            failure: "pinMismatch", entry: nil, bytesUp: 0, bytesDown: 0, requests: 0, durationMilliseconds: 7,
            message: "untrusted: CN=x\u{1B}]0;owned\u{7}\r\nFAKE \"q\" \u{9B}é\\")
        #expect(
            record.line(json: false)
                == #"intercept client=127.0.0.1:5000 host=evil\u{1b}[2J\u{202e}例.test upstream=127.0.0.1:443 verdict=untrusted failure=pinMismatch requests=0 bytes_up=0 bytes_down=0 duration_ms=7 message="untrusted: CN=x\u{1b}]0;owned\u{7}\u{d} FAKE 'q' \u{9b}é\u{5c}""#
        )
        let json = record.line(json: true)
        #expect(!json.unicodeScalars.contains { [.control, .format].contains($0.properties.generalCategory) }, "\(json)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["host"] as? String == "evil\u{1B}[2J\u{202E}例.test")
        #expect(object["message"] as? String == "untrusted: CN=x\u{1B}]0;owned\u{7}\r\nFAKE \"q\" \u{9B}é\\")
    }

    @Test("the PAC file sends the configured hosts through the proxy in their A-label form, everything else DIRECT")
    func pacFile() throws {
        let directory = try TemporaryDirectory(prefix: "pinning-proxy-lib")
        defer { directory.remove() }
        let script = PACFile.script(entries: try Self.configuration(directory: directory).entries, proxy: "127.0.0.1:8080")
        #expect(script.contains("function FindProxyForURL"))
        #expect(script.contains("\"api.example.com\""))
        #expect(script.contains("xn--bcher-kva.example"), "\(script)")
        #expect(script.contains("PROXY 127.0.0.1:8080") && script.contains("DIRECT"))
    }

    @Test("a PAC string literal reads back as the text it was made from, a scalar above U+FFFF as a surrogate pair")
    func pacEscaping() throws {
        let text = "a\"b\\c\u{1}\u{7F}é例😀"
        let escaped = PACFile.escaped(text)
        #expect(escaped == #"a\"b\\c\u0001\u007f\u00e9\u4f8b\ud83d\ude00"#)
        #expect(escaped.unicodeScalars.allSatisfy { $0.isASCII && $0.value >= 0x20 })
        // Foundation's JSON reader, not ours: JSON's string escapes are JavaScript's for these characters.
        let decoded = try JSONSerialization.jsonObject(with: Data("\"\(escaped)\"".utf8), options: .fragmentsAllowed) as? String
        #expect(decoded == text)
    }

    @Test("the local CA is made once (key 0600), kept on the next load, and refuses a configuration that covers no name")
    func localCA() throws {
        let directory = try TemporaryDirectory(prefix: "pinning-proxy-lib")
        defer { directory.remove() }
        let coverage = try Self.configuration(directory: directory).entries.map(\.coverage)
        let made = try ProxyCertificateAuthority.load(directory: directory.path("ca"), coverage: coverage)
        let mode = try FileManager.default.attributesOfItem(atPath: directory.path("ca/ca.key"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let again = try ProxyCertificateAuthority.load(directory: directory.path("ca"), coverage: coverage)
        #expect(again.pin == made.pin)
        _ = try again.serverContext(for: "api.example.com")
        let none = #expect(throws: ProxyError.self) { try ProxyCertificateAuthority.load(directory: directory.path("other"), coverage: []) }
        #expect(none?.code == "proxySetupFailed")
    }
}
