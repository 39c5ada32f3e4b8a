import Foundation
import NIOHTTP1
import Pinning
import PinningCollector
import Testing

/// Report strings carrying ESC, CR/LF, NUL, DEL, C1, U+202E and non-ASCII letters, followed to every place the
/// collector writes them out as text. Ingest refuses such a host name (``HostNameTests``), so a host carrying them is
/// a row an older collector stored (``CollectorHarness/legacyReport(host:_:)``); the other fields are posted.
@Suite("Report text with control characters: the dashboard shows them escaped; the CSV, JSON and /metrics keep their framing")
struct HostileTextTests {
    static let host = "evil\u{1B}[2J\u{1B}]0;owned\u{07}\r\nFAKE LOG LINE\u{202E}moc.例é\u{85}\u{7F}.test"
    static let app = "app\u{1B}[31m\u{202E}red"

    @Test("ESC, CR, LF, NUL, DEL, C1 and bidi controls are written as \\u{…}; é and 例 are kept")
    func visibleText() {
        #expect(VisibleText.escaped("a\u{1B}[0m\r\n\u{0}\u{7F}\u{85}\u{9F}\u{202E}\u{2066}\u{2028}b") == "a\\u{1b}[0m\\u{d}\\u{a}\\u{0}\\u{7f}\\u{85}\\u{9f}\\u{202e}\\u{2066}\\u{2028}b")
        #expect(VisibleText.escaped("café 例え Ωμέγα 😀") == "café 例え Ωμέγα 😀")
        // Invisible format characters: a zero-width space would make a second "example.com" row look like the first.
        #expect(VisibleText.escaped("exam\u{200B}ple.com\u{FEFF}\u{AD}\u{2060}\u{E0041}") == "exam\\u{200b}ple.com\\u{feff}\\u{ad}\\u{2060}\\u{e0041}")
        // A sender's literal backslash-u text is told apart from an escaped control.
        #expect(VisibleText.escaped("a\\u{202e}b") == "a\\u{5c}u{202e}b")
    }

    @Test("the dashboard has none of them raw: hosts, apps and versions are shown escaped, the filter keeps the exact host")
    func dashboard() async throws {
        let fields = ["app-bundle-id": Self.app, "app-version": "1\u{1B}[0m", "app-platform": "i\u{202E}OS", "validation-result": "pin\u{1B}Mismatch"]
        let collector = try await CollectorHarness(legacy: [try CollectorHarness.legacyReport(host: Self.host, fields)])
        defer { Task { await collector.stop() } }
        let page = try await collector.request(.GET, "/", authorized: true)
        #expect(page.status == 200)
        for hidden in ["\u{1B}", "\u{202E}", "\u{85}", "\u{7F}", "\u{07}", "\r"] {
            #expect(!page.body.contains(hidden), "raw U+\(String(hidden.unicodeScalars.first!.value, radix: 16)) on the page")
        }
        let shown = "evil\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\u{d}\\u{a}FAKE LOG LINE\\u{202e}moc.例é\\u{85}\\u{7f}.test"
        #expect(page.body.contains("<h2>\(shown)</h2>"))
        #expect(page.body.contains("app\\u{1b}[31m\\u{202e}red"))
        #expect(page.body.contains("1\\u{1b}[0m"))
        #expect(page.body.contains("i\\u{202e}OS"))
        #expect(page.body.contains("pin\\u{1b}Mismatch 1"))
        // The link sends the exact host back, percent-encoded, and the filter finds it.
        #expect(page.body.contains("href=\"?host=evil%1B%5B2J%1B%5D0%3Bowned%07%0D%0AFAKE%20LOG%20LINE%E2%80%AEmoc.%E4%BE%8B%C3%A9%C2%85%7F.test\""))
        let encoded = try #require(Self.host.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")))
        let one = try await collector.request(.GET, "/?host=\(encoded)", authorized: true)
        #expect(one.body.contains("<h2>\(shown)</h2>"))
        // The hidden input sends the exact host back: C0 and DEL as references (a raw CR would come back as a LF).
        let value = "evil&#x1B;[2J&#x1B;]0;owned&#x7;&#xD;&#xA;FAKE LOG LINE\u{202E}moc.例é\u{85}&#x7F;.test"
        #expect(one.body.contains("<input type=\"hidden\" name=\"host\" value=\"\(value)\">"))
        for hidden in ["\u{1B}", "\u{07}", "\r", "\u{7F}"] {
            #expect(!one.body.contains(hidden))
        }
        // Markup in the asked-for host stays text in the value, as the template's escaping made it.
        let markup = try await collector.request(.GET, "/?host=%22%3E%3Cscript%3E%27%26x", authorized: true)
        #expect(markup.body.contains("<input type=\"hidden\" name=\"host\" value=\"&quot;&gt;&lt;script&gt;&#39;&amp;x\">"))
        #expect(!markup.body.contains("<script>"))
    }

    @Test("a NUL in a report string is refused, never stored")
    func nul() async throws {
        let collector = try await CollectorHarness()
        defer { Task { await collector.stop() } }
        let reply = try await collector.post(try ReportFixtures.json(["hostname": "a\u{0}b.test"]))
        #expect(reply.status == 400)
        #expect(!reply.body.contains("\u{0}"))
        #expect(try await collector.json("/api/summary")["reports"] as? Int == 0)
    }

    @Test("the CSV keeps one record per report: CR, LF, quotes and commas stay inside quoted fields")
    func csv() async throws {
        let quoted = "a\",\"b\r\n\"c,d\u{1B}"
        let collector = try await CollectorHarness(legacy: [
            try CollectorHarness.legacyReport(host: Self.host, ["app-bundle-id": Self.app]),
            try CollectorHarness.legacyReport(host: quoted, ["app-bundle-id": "\r=1+1"]),
        ])
        defer { Task { await collector.stop() } }
        let reply = try await collector.request(.GET, "/api/reports.csv", authorized: true)
        #expect(reply.status == 200)
        let records = try Self.parse(reply.body)
        #expect(records.count == 3)
        #expect(records.allSatisfy { $0.count == 20 })
        let hosts = Set(records.dropFirst().map { $0[4] })
        #expect(hosts == [Self.host, quoted])
        #expect(records.dropFirst().contains { $0[9] == "'\r=1+1" }, "the formula guard is kept")
    }

    @Test("JSON carries them encoded and exact; /metrics has no report text")
    func jsonAndMetrics() async throws {
        let collector = try await CollectorHarness(legacy: [try CollectorHarness.legacyReport(host: Self.host)])
        defer { Task { await collector.stop() } }
        #expect(try await collector.post(try ReportFixtures.json(["hostname": "posted.example.test", "app-bundle-id": Self.app])).status == 204)
        let reply = try await collector.request(.GET, "/api/reports", authorized: true)
        #expect(!reply.body.contains("\u{1B}") && !reply.body.contains("\r") && !reply.body.contains("\n"), "JSONEncoder escapes C0")
        let rows = try #require(try await collector.json("/api/reports")["reports"] as? [[String: Any]])
        #expect(rows.contains { $0["host"] as? String == Self.host })
        #expect(rows.contains { $0["appId"] as? String == Self.app })
        let metrics = try await collector.request(.GET, "/metrics")
        #expect(!metrics.body.contains("evil") && !metrics.body.contains("\u{1B}"))
    }

    /// RFC 4180, strictly: every field quoted (as the collector writes them), records ended by CRLF.
    static func parse(_ text: String) throws -> [[String]] {
        var records: [[String]] = []
        var record: [String] = []
        var scalars = Array(text.unicodeScalars)[...]
        while !scalars.isEmpty {
            guard scalars.popFirst() == "\"" else { throw CollectorTestError("a field does not start with a quote") }
            var field = String.UnicodeScalarView()
            while true {
                guard let scalar = scalars.popFirst() else { throw CollectorTestError("an unterminated field") }
                if scalar == "\"" {
                    if scalars.first == "\"" {
                        scalars.removeFirst()
                        field.append("\"")
                    } else {
                        break
                    }
                } else {
                    field.append(scalar)
                }
            }
            record.append(String(field))
            if scalars.first == "," {
                scalars.removeFirst()
            } else if scalars.prefix(2).elementsEqual(["\r", "\n"]) {
                scalars.removeFirst(2)
                records.append(record)
                record = []
            } else {
                throw CollectorTestError("a field is not followed by a comma or CRLF")
            }
        }
        return records
    }
}
