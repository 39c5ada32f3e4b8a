import Foundation
import Logging
import Pinning
import PinningCollector
import PinningTestSupport
import Testing
import X509

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

        try await Self.hostRollups(store, base: base)
        try await Self.batchMatchesOneAtATime(store, base: base)
        try await Self.rawStoredAsSent(store, base: base)
        try await Self.oldHostForms(store, base: base)
    }

    /// Rows an earlier collector stored with the host as sent (before hosts were normalised) are rewritten at the
    /// next open, their rollups with them; a host that is not a host name stays as written; a second open
    /// changes nothing.
    static func oldHostForms(_ store: ReportStore, base: Int64) async throws {
        let hour: Int64 = 3_600_000
        // Written as an old collector wrote them: the parser's report with the host text as the report sent it.
        func old(_ host: String, at milliseconds: Int64, source: String) throws -> IngestItem {
            var item = try Self.item("old-form.placeholder", at: milliseconds, source: source)
            item.report.host = host
            return item
        }
        _ = try await store.ingest([
            try old("OLD-Form.Example.", at: base + 5 * hour + 1, source: "o1"),
            try old("old-form.example.", at: base + 30 * hour + 2, source: "o2"),
            try old("例え.テスト", at: base + 6 * hour, source: "o3"),
            try old("<b>not a host</b>", at: base + 6 * hour + 5, source: "o4"),
        ])
        _ = try await store.ingest([try Self.item("old-form.example", at: base + 7 * hour, source: "o5")])
        var query = ReportQuery()
        query.host = "old-form.example"
        #expect(try await store.reports(query).reports.count == 1, "before the open, only the new row is found")

        // The next open (what the collector runs at start).
        try await store.migrate(now: 0)
        #expect(try await store.reports(query).reports.count == 3, "every row of the host is found by its one form")
        query.host = "xn--r8jz45g.xn--zckzah"
        #expect(try await store.reports(query).reports.count == 1)
        query.host = "<b>not a host</b>"
        #expect(try await store.reports(query).reports.count == 1, "what is not a host name is kept as written")
        let listed = try await store.hosts(since: nil, limit: 100).map(\.host)
        #expect(listed.filter { $0.lowercased().hasPrefix("old-form.example") } == ["old-form.example"], "\(listed)")
        #expect((try await store.hosts(since: nil, limit: 1, host: "old-form.example")).first?.reports == 3)
        // The rollups say what the rows say, for every host and since.
        for since in [nil, base, base + 6 * hour, base + 24 * hour, base + 31 * hour] as [Int64?] {
            #expect(try await store.hosts(since: since, limit: 100) == (try await store.hostsFromRows(since: since, limit: 100)), "since \(since.map(String.init) ?? "nil")")
            for host in ["old-form.example", "xn--r8jz45g.xn--zckzah", "OLD-Form.Example."] {
                #expect(
                    try await store.hosts(since: since, limit: 1, host: host) == (try await store.hostsFromRows(since: since, limit: 1, host: host)),
                    "\(host), since \(since.map(String.init) ?? "nil")")
            }
            #expect(try await store.summary(since: since) == (try await store.summaryFromRows(since: since)))
        }
        // The next open's check reads `rollup_hosts` (not every row of `reports`): after the rewrite it names no
        // host in an old form, so that open finds nothing to do without taking the lock.
        let rolled = try await store.database.query("SELECT host FROM rollup_hosts", []).compactMap { row -> String? in
            guard case .text(let text)? = row.first else { return nil }
            return text
        }
        #expect(rolled.contains("old-form.example") && rolled.contains("<b>not a host</b>"), "\(rolled)")
        #expect(!rolled.contains("OLD-Form.Example.") && !rolled.contains("old-form.example.") && !rolled.contains("例え.テスト"), "\(rolled)")
        #expect(try await store.normaliseStoredHosts().isEmpty)
        // At the next open: nothing left to rewrite, nothing changes.
        let before = try await store.hosts(since: nil, limit: 100)
        try await store.migrate(now: 0)
        #expect(try await store.hosts(since: nil, limit: 100) == before)
        #expect(try await store.hostsFromRows(since: nil, limit: 100) == before)
    }

    /// Reports whose text tests the raw column: non-ASCII as UTF-8 and as escapes, every escape JSON has, a string
    /// holding `,]}[{` and ending in an escaped backslash, numbers Foundation would rewrite, keys out of order,
    /// whitespace (spaces, tabs, CR LF) inside and around them.
    static let rawTexts: [String] = [
        #"{"hostname":"raw1.test", "note":"é 日本 😀 \u00e9\ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t \u0000","port":443}"#,
        #"{ "port" : 8443 ,"hostname" : "raw2.test" , "odd" : "a,]}[{\\" , "n":1.50e+2 ,"big":12345678901234567890, "z":[ {"k":[]} , null,true ] }"#,
        "{\r\n\t\"hostname\":\"raw3.test\",\r\n\t\"validation-result\":\"pinMismatch\"\r\n}",
    ]

    /// A body holding ``rawTexts`` as an array, with whitespace between them and around the array.
    static var rawBody: String {
        " \t\r\n[ " + Self.rawTexts[0] + " ,\n\t" + Self.rawTexts[1] + "\r\n,\t" + Self.rawTexts[2] + " \n]\n "
    }

    /// Each report's text is stored byte for byte as it was sent, on either database.
    static func rawStoredAsSent(_ store: ReportStore, base: Int64) async throws {
        let reports = try ReportParser().parse(Array(Self.rawBody.utf8))
        let outcomes = try await store.ingest(reports.map { IngestItem(report: $0, receivedAt: base + 11, sourceHash: "source-raw") })
        #expect(outcomes.count == Self.rawTexts.count)
        for (outcome, sent) in zip(outcomes, Self.rawTexts) {
            guard case .stored(let id) = outcome else {
                Issue.record("not stored: \(outcome)")
                continue
            }
            let row = try await store.database.query("SELECT raw FROM reports WHERE id = ?", [.integer(id)]).first
            var raw: String?
            if case .text(let text)? = row?.first { raw = text }
            #expect(raw.map { Array($0.utf8) } == Array(sent.utf8), "stored \(raw ?? "nothing") for \(sent)")
        }
    }

    /// A batch is stored as storing its reports one at a time, in order, stores them: identical reports inside
    /// the batch (new rows and rows already stored, receipt times out of order) get the same outcomes, the same
    /// rows with the same counts, first and last receipt times, and the same rollups. The batch writes hosts
    /// `x.test`; the same reports one at a time write `y.test` (the fingerprint covers the host, so neither sees
    /// the other's rows).
    static func batchMatchesOneAtATime(_ store: ReportStore, base: Int64) async throws {
        let hour: Int64 = 3_600_000
        // (host suffix, received at, source, result)
        let earlier: [(String, Int64, String, String)] = [("r1", base + 1, "s1", "pinMismatch"), ("r4", base + 2, "s2", "pinMismatch")]
        let batch: [(String, Int64, String, String)] = [
            ("r1", base + 5, "s1", "pinMismatch"),  // onto a stored row
            ("r2", base + 7, "s1", "pinMismatch"),  // a new row
            ("r2", base + 3, "s1", "pinMismatch"),  // onto the new row, received earlier: last seen stays base + 7
            ("r1", base + 4, "s1", "pinMismatch"),  // onto the stored row again, earlier than the first time
            ("r3", base + hour + 2, "s1", "noPathToAnchor"),
            ("r2", base + hour + 1, "s1", "pinMismatch"),  // the next window: a row of its own
            ("r3", base + hour + 9, "s1", "noPathToAnchor"),
            ("r2", base + 8, "s2", "pinMismatch"),  // another source: a row of its own
            ("r4", base + 9, "s2", "pinMismatch"),
            ("r4", base + 6, "s2", "pinMismatch"),
        ]
        func items(_ list: [(String, Int64, String, String)], host: String) throws -> [IngestItem] {
            try list.map { try Self.item("\($0.0).\(host)", at: $0.1, source: $0.2, result: $0.3) }
        }
        _ = try await store.ingest(try items(earlier, host: "x.test"))
        for item in try items(earlier, host: "y.test") { _ = try await store.ingest([item]) }
        let together = try await store.ingest(try items(batch, host: "x.test"))
        var alone: [IngestOutcome] = []
        for item in try items(batch, host: "y.test") { alone += try await store.ingest([item]) }

        // The same outcomes, row for row: stored or not, and which reports share a row.
        func shape(_ outcomes: [IngestOutcome]) -> [String] {
            var order: [Int64] = []
            return outcomes.map { outcome in
                let (kind, id): (String, Int64) =
                    switch outcome {
                    case .stored(let id): ("stored", id)
                    case .deduplicated(let id): ("deduplicated", id)
                    }
                if !order.contains(id) { order.append(id) }
                return "\(kind) row \(order.firstIndex(of: id) ?? -1)"
            }
        }
        #expect(shape(together) == shape(alone), "\(together) against \(alone)")
        #expect(together.count == batch.count)
        // New rows get ids in batch order.
        let storedIDs = together.compactMap { if case .stored(let id) = $0 { return id } else { return nil } }
        #expect(storedIDs == storedIDs.sorted() && storedIDs.count == 4, "\(together)")

        // The same rows: first receipt, last seen, occurrences, per host and result, oldest first.
        func rows(_ host: String) async throws -> [String] {
            var query = ReportQuery()
            query.limit = 100
            return try await store.reports(query).reports.filter { $0.host.hasSuffix("." + host) }.sorted { $0.id < $1.id }.map {
                "\($0.host.prefix(2)) \($0.receivedAt) \($0.lastSeen) \($0.occurrences) \($0.result)"
            }
        }
        let batchRows = try await rows("x.test")
        #expect(batchRows.count == 6)
        #expect(batchRows == (try await rows("y.test")))
        try await Self.expectRollupsMatchRows(store, base: base)
        for since in [nil, base, base + 4, base + hour, base + hour + 2] as [Int64?] {
            #expect(try await store.hosts(since: since, limit: 20) == (try await store.hostsFromRows(since: since, limit: 20)), "since \(since.map(String.init) ?? "nil")")
        }
        let summary = try await store.summary(since: nil)
        #expect(summary.reports == 12 && summary.occurrences == 24, "\(summary)")
    }

    /// A report with chains, known pins and enforce-pinning, from a PKI made here.
    static func chainItem(
        _ host: String, at milliseconds: Int64, source: String, served: [Certificate], validated: [Certificate] = [], known: [Certificate],
        enforce: Bool?, result: String = "pinMismatch"
    ) throws -> IngestItem {
        var object: [String: Any] = [
            "hostname": host, "port": 443, "validation-result": result,
            "known-pins": known.map { "pin-sha256=\"\(Pin(spkiOf: $0).base64)\"" },
        ]
        if !served.isEmpty { object["served-certificate-chain"] = served.map(ReportFixtures.pem) }
        if !validated.isEmpty { object["validated-certificate-chain"] = validated.map(ReportFixtures.pem) }
        if let enforce { object["enforce-pinning"] = enforce }
        let report = try #require(try ReportParser().parse(Array(try ReportFixtures.json(object))).first)
        return IngestItem(report: report, receivedAt: milliseconds, sourceHash: source)
    }

    /// The host rollups (migration 3) answer `/api/hosts` as counting the rows does: served keys (and the
    /// validated chain's for a report without a served one), known pins, results, enforced against report-only,
    /// distinct sources, de-duplicated occurrences in a later hour and day, for `since` on and inside days and
    /// hours, before and after retention, and after more reports arrive.
    static func hostRollups(_ store: ReportStore, base: Int64) async throws {
        let hour: Int64 = 3_600_000
        let day: Int64 = 86_400_000
        let dayBase = (base / day + 3) * day
        let fixtures = try ReportFixtures(host: "api.test")
        let genuine = fixtures.genuine.presented
        let intercepting = fixtures.intercepting.presented
        let known = [fixtures.genuine.intermediate.certificate, fixtures.genuine.root.certificate]
        _ = try await store.ingest([
            try Self.chainItem("api.test", at: dayBase - 2 * hour + 5, source: "s1", served: intercepting, known: known, enforce: true),
            try Self.chainItem("api.test", at: dayBase - 2 * hour + 10, source: "s1", served: intercepting, known: known, enforce: true),
            try Self.chainItem("api.test", at: dayBase - hour + 1, source: "s2", served: intercepting, known: known, enforce: true),
            try Self.chainItem("api.test", at: dayBase + hour / 2, source: "s2", served: genuine, known: known, enforce: false),
            try Self.chainItem(
                "api.test", at: dayBase + hour + 10, source: "s3", served: [], validated: fixtures.intercepting.all, known: known, enforce: nil, result: "hostnameMismatch"),
        ])
        _ = try await store.ingest([
            // The report-only one again, two hours and then a day later: counted on its row, in its first hour.
            try Self.chainItem("api.test", at: dayBase + 2 * hour, source: "s2", served: genuine, known: known, enforce: false),
            try Self.chainItem("cdn.test", at: dayBase + day + 3 * hour, source: "s1", served: [fixtures.intercepting.leaf.certificate], known: [known[0]], enforce: true),
            try Self.chainItem("api.test", at: dayBase + day + 3 * hour + 5, source: "s4", served: intercepting, known: known, enforce: true),
        ])
        let sinces: [Int64?] = [
            nil, 0, dayBase - 2 * hour, dayBase - 2 * hour + 7, dayBase - hour, dayBase - 1, dayBase, dayBase + 1, dayBase + hour / 2, dayBase + hour / 2 + 1,
            dayBase + hour + 10, dayBase + day - 1, dayBase + day, dayBase + day + 3 * hour + 1, dayBase + day + 3 * hour + 6, dayBase + 10 * day, Int64.max, Int64.min,
        ]
        let sample = try await store.hosts(since: nil, limit: 10)
        #expect(sample.map(\.host).contains("api.test") && sample.map(\.host).contains("cdn.test"), "\(sample)")
        let api = try #require(sample.first { $0.host == "api.test" })
        #expect(api.servedPins.contains { $0.sources > 1 }, "a key served to several sources: \(api)")
        #expect(api.knownPins.count == 2 && api.reportOnly > 0 && api.enforced > 0 && api.results.count == 2, "\(api)")
        try await Self.expectHostRollupsMatchRows(store, sinces)

        // Retention up to the first hour of dayBase: the day before goes (both its hours), and within dayBase only
        // the report-only row stays of its hour (it was seen again later).
        let deleted = try await store.deleteReports(lastSeenBefore: dayBase + hour, batch: 2)
        #expect(deleted >= 3, "\(deleted)")
        try await Self.expectHostRollupsMatchRows(store, sinces)

        // More reports for hours and days emptied by retention, and a de-duplication of a kept row.
        _ = try await store.ingest([
            try Self.chainItem("api.test", at: dayBase + 2 * hour + 1, source: "s2", served: genuine, known: known, enforce: false),
            try Self.chainItem("api.test", at: dayBase - hour + 3, source: "s5", served: genuine, known: known, enforce: true),
            try Self.chainItem("edge.test", at: dayBase + day + 4 * hour, source: "s5", served: genuine, known: [], enforce: nil),
        ])
        try await Self.expectHostRollupsMatchRows(store, sinces)
        // Retention of everything left: the rollups are empty too.
        _ = try await store.deleteReports(lastSeenBefore: Int64.max, batch: 3)
        #expect(try await store.hosts(since: nil, limit: 10).isEmpty)
        try await Self.expectHostRollupsMatchRows(store, sinces)
    }

    static func expectHostRollupsMatchRows(_ store: ReportStore, _ sinces: [Int64?], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        for since in sinces {
            let label = "since \(since.map(String.init) ?? "nil")"
            #expect(try await store.hosts(since: since, limit: 10) == (try await store.hostsFromRows(since: since, limit: 10)), "\(label)", sourceLocation: sourceLocation)
            #expect(try await store.hosts(since: since, limit: 1) == (try await store.hostsFromRows(since: since, limit: 1)), "\(label), limit 1", sourceLocation: sourceLocation)
            for host in ["api.test", "cdn.test", "nowhere.test"] {
                #expect(
                    try await store.hosts(since: since, limit: 1, host: host) == (try await store.hostsFromRows(since: since, limit: 1, host: host)), "\(label), \(host)",
                    sourceLocation: sourceLocation)
            }
        }
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
