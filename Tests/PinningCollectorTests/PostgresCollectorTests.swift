import Foundation
import Logging
import NIOHTTP1
import Pinning
import PinningCollector
import PinningTestSupport
import Testing

@Suite("Collector on a real PostgreSQL server on the loopback", .serialized, .enabled(if: PostgresCluster.available, "needs Debian's postgresql"))
struct PostgresCollectorTests {
    @Test("the same migrations, de-duplication, retention and paging as on SQLite")
    func storeScenarios() async throws {
        let cluster = try await PostgresCluster()
        defer { cluster.stop() }
        let url = try DatabaseURL.parse(cluster.url)
        guard case .postgres(let postgres) = url else {
            Issue.record("parsed as \(url)")
            return
        }
        let database = PostgresReportDatabase(url: postgres, logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await database.run() }
            defer { group.cancelAll() }
            try await StoreScenarios.run(database)
        }
    }

    @Test("over HTTP: each format stored, SQL metacharacters verbatim, /status says postgres; the reports are there after a restart")
    func http() async throws {
        let cluster = try await PostgresCluster()
        defer { cluster.stop() }
        let fixtures = try ReportFixtures()
        let hostile = "x'); DROP TABLE reports; -- \" ? $1 \\ <b>"
        do {
            let collector = try await CollectorHarness(database: try DatabaseURL.parse(cluster.url))
            #expect(try await collector.post(try ReportFixtures.json(fixtures.trustKit())).status == 204)
            #expect(try await collector.post(try ReportFixtures.json(fixtures.trustKit())).status == 204)
            #expect(try await collector.post(try ReportFixtures.json(fixtures.rfc7469(host: "www.example.test"))).status == 204)
            #expect(try await collector.post(try fixtures.pinning(host: "ours.example.test")).status == 204)
            #expect(try await collector.post(try ReportFixtures.json(["hostname": hostile, "app-bundle-id": hostile, "pinset-version": 42])).status == 204)
            #expect(try await collector.post(Data("{\"hostname\":\"a\\u0000b\"}".utf8)).status == 400)
            let status = try await collector.request(.GET, "/status")
            #expect(status.body.contains("\"database\":\"postgres\""))
            await collector.stop()
        }
        // A new collector on the same database: everything answered 204 is there.
        let collector = try await CollectorHarness(database: try DatabaseURL.parse(cluster.url))
        defer { Task { await collector.stop() } }
        let summary = try await collector.json("/api/summary")
        #expect(summary["reports"] as? Int == 4)
        #expect(summary["occurrences"] as? Int == 5)
        #expect(summary["hosts"] as? Int == 4)
        let rows = try #require(try await collector.json("/api/reports?app=\(hostile.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")")["reports"] as? [[String: Any]])
        #expect(rows.first?["host"] as? String == hostile)
        #expect(rows.first?["pinsetVersion"] as? String == "42")
        let hosts = try #require(try await collector.json("/api/hosts?limit=10")["hosts"] as? [[String: Any]])
        let api = try #require(hosts.first { $0["host"] as? String == "api.example.test" })
        #expect(api["occurrences"] as? Int == 2)
        #expect((api["knownPins"] as? [String])?.count == 2)
        let page = try await collector.request(.GET, "/", authorized: true)
        #expect(page.status == 200)
        #expect(page.body.contains("<svg class=\"chart\""))
    }
}
