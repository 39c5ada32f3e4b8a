import Foundation
import Testing

@testable import PinningNIO

/// What a report collector answers is the collector's: an outcome's one-line description, which `pinning check
/// --verbose`, `pinning evaluate --config --send-reports` and `pinning proxy` print on stderr, shows it escaped.
@Suite("Hostile report collector text")
struct HostileReportTextTests {
    @Test("an outcome's description escapes the collector's text (ESC, CR, LF, BEL, bidi, zero-width, a backslash before u); é and 例 are kept")
    func outcomeDescription() throws {
        let uri = try #require(URL(string: "https://collector.test/pins"))
        let outcome = HTTPPinFailureReporter.Outcome(
            uri: uri, delivered: false, attempts: 2, status: nil,
            message: "untrusted: CN=evil\u{1B}[2J\u{1B}]0;owned\u{7}\r\nFAKE LINE \u{202E}gpj.exe\u{200B} \\u{1b} é例")
        #expect(
            outcome.description
                == "not delivered to https://collector.test/pins after 2 attempts: untrusted: CN=evil\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\u{d}\\u{a}FAKE LINE \\u{202e}gpj.exe\\u{200b} \\u{5c}u{1b} é例"
        )
        // The raw text stays in `message` for a program that wants it.
        #expect(outcome.message.unicodeScalars.contains("\u{1B}"))
        let delivered = HTTPPinFailureReporter.Outcome(uri: uri, delivered: true, attempts: 1, status: 204, message: "HTTP 204")
        #expect(delivered.description == "delivered to https://collector.test/pins after 1 attempt: HTTP 204")
    }
}
