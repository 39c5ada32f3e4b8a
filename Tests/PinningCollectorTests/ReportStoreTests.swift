import Foundation
import Logging
import Pinning
import PinningCollector
import PinningTestSupport
import Testing

/// The store's behaviour, run against each database: a real SQLite file, and a real PostgreSQL server on the
/// loopback (skipped, never passed, without Debian's postgresql).
enum StoreScenarios {
    static func item(_ host: String, at milliseconds: Int64, source: String = "source-a", result: String = "pinMismatch") throws -> IngestItem {
        let body = try ReportFixtures.json(["hostname": host, "port": 443, "validation-result": result])
        let report = try #require(try ReportParser().parse(Array(body)).first)
        return IngestItem(report: report, receivedAt: milliseconds, sourceHash: source)
    }

    /// Migrations, de-duplication windows, retention, paging and the salt, on one database.
    static func run(_ database: any SQLDatabase) async throws {
        let store = ReportStore(database: database, deduplicationWindowMilliseconds: 3_600_000)
        try await store.migrate(now: 0)
        // Applying them again changes nothing.
        try await store.migrate(now: 0)
        let salt = try await store.sourceSalt()
        #expect(salt.count == 32)
        #expect(try await store.sourceSalt() == salt)

        let hour: Int64 = 3_600_000
        let base: Int64 = 1_795_000_000_000 / hour * hour
        // Same report, same source, same window: one row. Another source or another window: rows of their own.
        let outcomes = try await store.ingest([
            try Self.item("a.test", at: base + 1),
            try Self.item("a.test", at: base + 2),
            try Self.item("a.test", at: base + 3, source: "source-b"),
            try Self.item("a.test", at: base + hour + 1),
            try Self.item("b.test", at: base + 5, result: "hostnameMismatch"),
        ])
        guard case .stored(let first) = outcomes[0], case .deduplicated(let again) = outcomes[1] else {
            Issue.record("outcomes: \(outcomes)")
            return
        }
        #expect(first == again)
        #expect(outcomes.filter { if case .stored = $0 { return true } else { return false } }.count == 4)

        let summary = try await store.summary(since: nil)
        #expect(summary == CollectorSummary(reports: 4, occurrences: 5, hosts: 2, sources: 2))
        #expect(try await store.summary(since: base + hour) == CollectorSummary(reports: 1, occurrences: 1, hosts: 1, sources: 1))
        // The rollup tables answer as counting the rows does, for a `since` on an hour, inside one, and before
        // everything.
        try await Self.expectRollupsMatchRows(store, base: base)

        let hosts = try await store.hosts(since: nil, limit: 10)
        #expect(hosts.map(\.host) == ["a.test", "b.test"])
        #expect(hosts.first?.occurrences == 4)
        #expect(hosts.last?.results == ["hostnameMismatch": 1])

        // Paging: newest first, the cursor is the last id, the last page says nil.
        var query = ReportQuery()
        query.limit = 3
        let page = try await store.reports(query)
        #expect(page.reports.count == 3)
        let cursor = try #require(page.next)
        query.before = cursor
        let rest = try await store.reports(query)
        #expect(rest.reports.count == 1)
        #expect(rest.next == nil)
        #expect(Set((page.reports + rest.reports).map(\.id)).count == 4)

        // Retention: rows last seen before the cutoff go, with their pins.
        let deleted = try await store.deleteReports(lastSeenBefore: base + hour, batch: 2)
        #expect(deleted == 3)
        #expect(try await store.count() == 1)
        // Retention takes its rows out of the rollups: one report (b.test's window is gone, a.test's second hour
        // stays), one host, one source.
        #expect(try await store.summary(since: nil) == CollectorSummary(reports: 1, occurrences: 1, hosts: 1, sources: 1))
        try await Self.expectRollupsMatchRows(store, base: base)

        // A de-duplicated report received in a later hour counts in its row's hour, as the rows do; a host and a
        // source reappearing after retention are counted again.
        _ = try await store.ingest([
            try Self.item("a.test", at: base + hour + 7),
            try Self.item("a.test", at: base + 2 * hour + 9, source: "source-b"),
            try Self.item("b.test", at: base + 3 * hour, source: "source-c"),
        ])
        #expect(try await store.summary(since: nil) == CollectorSummary(reports: 3, occurrences: 4, hosts: 2, sources: 3))
        try await Self.expectRollupsMatchRows(store, base: base)
    }

    static func expectRollupsMatchRows(_ store: ReportStore, base: Int64, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let hour: Int64 = 3_600_000
        for since in [nil, 0, base - 1, base, base + 2, base + 4, base + hour - 1, base + hour, base + hour + 1, base + 2 * hour + 9, base + 3 * hour, base + 5 * hour] as [Int64?] {
            let fromRollups = try await store.summary(since: since)
            let fromRows = try await store.summaryFromRows(since: since)
            #expect(fromRollups == fromRows, "since \(since.map(String.init) ?? "nil")", sourceLocation: sourceLocation)
        }
    }
}

@Suite("Collector storage on a real SQLite file")
struct SQLiteStoreTests {
    @Test("migrations, de-duplication windows, retention, paging")
    func scenarios() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-collector-store")
        defer { directory.remove() }
        let database = try await SQLiteReportDatabase(path: directory.path("reports.db"), logger: Logger(label: "test"))
        do {
            try await StoreScenarios.run(database)
        } catch {
            await database.close()
            throw error
        }
        await database.close()
    }

    @Test("a database written by a newer collector is refused, not altered")
    func newerSchema() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-collector-store")
        defer { directory.remove() }
        let database = try await SQLiteReportDatabase(path: directory.path("reports.db"), logger: Logger(label: "test"))
        defer { Task { await database.close() } }
        let store = ReportStore(database: database, deduplicationWindowMilliseconds: 1000)
        try await store.migrate(now: 0)
        _ = try await database.transaction { session in
            try await session.query("INSERT INTO collector_migrations (version, applied_at) VALUES (?, ?)", [.integer(999), .integer(0)])
        }
        await #expect(throws: StoreError.self) { try await store.migrate(now: 0) }
    }
}
