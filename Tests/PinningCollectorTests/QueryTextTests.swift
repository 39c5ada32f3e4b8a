import Foundation
import NIOHTTP1
import PinningCollector
import Testing

/// Query text the databases would refuse, and instants the dashboard sends back (new-user trial 3, 2026-11-28).
@Suite("Query parameters with NUL; the dashboard's since echoed as given")
struct QueryTextTests {
    /// Every read path and the text parameters that reach a statement, each with a NUL: 400 and one line naming
    /// the parameter, on either storage (PostgreSQL refuses NUL in text; the collector answered it with an empty 500).
    static func nulRefused(_ collector: CollectorHarness) async throws {
        let cases: [(path: String, parameter: String)] = [
            ("/api/reports?host=a%00b", "host"),
            ("/api/reports?app=a%00b", "app"),
            ("/api/reports?result=a%00b", "result"),
            ("/api/reports.csv?app=x%00", "app"),
            ("/api/reports.csv?host=%00", "host"),
            ("/api/hosts?host=a%00", "host"),
            ("/?host=a%00b", "host"),
        ]
        for (path, parameter) in cases {
            let reply = try await collector.request(.GET, path, authorized: true)
            #expect(reply.status == 400, "\(path): \(reply.status) \(reply.body)")
            #expect(reply.body == "\(parameter): contains a NUL character (%00), which no stored text has\n", "\(path)")
        }
        // Bytes that are not UTF-8 reach no statement as such: the query text is decoded with U+FFFD for them,
        // which both databases store and compare; the answer is an empty result, as for any unknown host.
        for path in ["/api/reports?host=%FF%FE", "/api/reports?app=%C3", "/api/hosts?host=%ED%A0%80", "/?host=%FF"] {
            let reply = try await collector.request(.GET, path, authorized: true)
            #expect(reply.status == 200, "\(path): \(reply.status) \(reply.body)")
        }
        // The collector still answers afterwards.
        #expect(try await collector.request(.GET, "/api/reports?host=a", authorized: true).status == 200)
    }

    @Test("SQLite: a NUL in host, app or result is 400 naming the parameter; non-UTF-8 bytes are an empty result")
    func nulOnSQLite() async throws {
        let collector = try await CollectorHarness()
        defer { Task { await collector.stop() } }
        try await Self.nulRefused(collector)
    }

    @Test(
        "the dashboard echoes since as given: proleptic Gregorian before 1582-10-15, milliseconds rounded, not truncated",
        arguments: [
            ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z"),
            ("1000-06-15T12:00:00Z", "1000-06-15T12:00:00.000Z"),
            ("1582-10-10T00:00:00Z", "1582-10-10T00:00:00.000Z"),
            ("1583-01-01T00:00:00Z", "1583-01-01T00:00:00.000Z"),
            ("2026-11-28T05:34:02.1234Z", "2026-11-28T05:34:02.123Z"),
            ("2026-11-28T05:34:02.9996Z", "2026-11-28T05:34:03.000Z"),
            ("1969-12-31T23:59:59.5Z", "1969-12-31T23:59:59.500Z"),
            ("2026-11-28T07:34:02.001+02:00", "2026-11-28T05:34:02.001Z"),
        ])
    func sinceEchoed(given: String, shown: String) async throws {
        let collector = try await CollectorHarness()
        defer { Task { await collector.stop() } }
        let encoded = given.replacingOccurrences(of: "+", with: "%2B")
        let page = try await collector.request(.GET, "/?since=\(encoded)", authorized: true)
        #expect(page.status == 200)
        #expect(page.body.contains("value=\"\(shown)\""), "\(given)")
        // Sent back as shown, it is the same instant again.
        let again = try await collector.request(.GET, "/?since=\(shown)", authorized: true)
        #expect(again.body.contains("value=\"\(shown)\""), "\(shown)")
    }
}
