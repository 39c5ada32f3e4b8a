import Foundation
import NIOHTTP1
import PinningCollector
import PinningTestSupport
import Testing

@Suite("Collector limits: memory under a flood of sources, 100,000 hosts, spreadsheet formulas in the CSV")
struct CollectorLimitsTests {
    @Test("the rate limiter keeps at most its maximum of sources; new sources beyond it share one bucket")
    func boundedSources() {
        let limiter = RateLimiter(perMinute: 10, maximumSources: 100)
        var allowed = 0
        for index in 0..<10_000 where limiter.take(1, source: "source-\(index)", now: 1000) == nil {
            allowed += 1
        }
        #expect(limiter.trackedSources <= 100)
        // 100 sources with a bucket each (10 tokens, one spent each), then the overflow bucket's 10 tokens.
        #expect(allowed == 110)
        // A minute later every bucket is full again: idle sources are dropped to make room.
        #expect(limiter.take(1, source: "late", now: 1061) == nil)
        #expect(limiter.trackedSources <= 100)
        // One source over its rate is told when to retry; a request bigger than the bucket waits a minute.
        #expect((limiter.take(10, source: "late", now: 1061) ?? 0) > 0)
        #expect(limiter.take(11, source: "other", now: 2000) == 60)
    }

    // A volume test: the same code paths as the other ingest tests, 100,000 times. It runs in the plain
    // `swift test`; under AddressSanitizer (CI's hardening pass, one test at a time) it would cost minutes for no
    // path the sanitizer does not already see.
    @Test(
        "100,000 hosts: stored, counted, and the API and dashboard answer with bounded pages",
        .disabled(if: ProcessInfo.processInfo.environment["PINNING_HARDENING_BUILD"] == "1", "a volume test; runs in the plain swift test"))
    func manyHosts() async throws {
        let collector = try await CollectorHarness { settings in
            settings.ratePerMinute = 1_000_000
        }
        defer { Task { await collector.stop() } }
        for chunk in 0..<100 {
            let reports = (0..<1000).map { "{\"hostname\":\"h\(chunk * 1000 + $0).many.test\"}" }
            let reply = try await collector.post(Data(("[" + reports.joined(separator: ",") + "]").utf8))
            #expect(reply.status == 204, "\(reply.body)")
        }
        let summary = try await collector.json("/api/summary")
        #expect(summary["hosts"] as? Int == 100_000)
        #expect(summary["reports"] as? Int == 100_000)
        #expect((try await collector.json("/api/hosts?limit=1000")["hosts"] as? [Any])?.count == 1000)
        #expect((try await collector.json("/api/hosts")["hosts"] as? [Any])?.count == 100)
        let page = try await collector.request(.GET, "/", authorized: true)
        #expect(page.status == 200)
        #expect(page.body.components(separatedBy: "class=\"host-row\"").count - 1 == 50)
        #expect(try await collector.request(.GET, "/api/hosts?limit=100000", authorized: true).status == 400)
    }

    @Test("a value a spreadsheet would run as a formula is written as text in the CSV, quotes doubled")
    func csvFormulas() async throws {
        let collector = try await CollectorHarness()
        defer { Task { await collector.stop() } }
        // A host name cannot start with `=` (refused on ingest), so the formula is in another field.
        #expect(
            try await collector.post(try ReportFixtures.json(["hostname": "formula.example.test", "app-platform": "=HYPERLINK(\"http://x\")", "app-bundle-id": "@SUM(1)", "app-version": "+1"])).status
                == 204)
        let csv = try await collector.request(.GET, "/api/reports.csv", authorized: true)
        #expect(csv.body.contains("\"'=HYPERLINK(\"\"http://x\"\")\""))
        #expect(csv.body.contains("\"'@SUM(1)\""))
        #expect(csv.body.contains("\"'+1\""))
        #expect(csv.header("Content-Type")?.hasPrefix("text/csv") == true)
    }
}
