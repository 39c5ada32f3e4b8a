import Foundation

/// The per-host rollups of migration 3, which `GET /api/hosts` and the dashboard's host list read instead of
/// grouping every stored report by host (2.5 s of CPU with 1,000,000 reports in SQLite).
///
/// Each table holds, per host and per bucket of first receipt (`received_at`), what the host list shows: stored
/// rows, occurrences, enforced and report-only occurrences and the newest `last_seen_at`
/// (`rollup_host_buckets`); occurrences per result code (`rollup_host_results`); occurrences, the first chain
/// position and the newest report of each served or known pin (`rollup_host_pins`); and stored rows per served
/// pin and source (`rollup_pin_sources`), from which distinct sources are counted. Every table keeps two widths
/// of bucket, hours and days (`width` is the bucket's length in milliseconds).
///
/// A `since` is answered exactly: whole days from the day rows, the whole hours before the first whole day from
/// the hour rows, and the part of an hour before the first whole hour from `reports` itself. Ingest adds to both
/// widths in its transaction. Retention recomputes the hours it touched from the rows left, and those hours'
/// days from the hour rows, in its transaction.
enum HostRollups {
    static let hour: Int64 = 3_600_000
    static let day: Int64 = 86_400_000
    static let widths: [Int64] = [Self.hour, Self.day]

    /// Which pins of a stored report are the "served" keys: the served chain's, or, for a report without one
    /// (TrustKit sends only the validated chain, which is the server's chain as the device validated it), the
    /// validated chain's. `p` is `report_pins`, `r` is `reports`.
    static let servedCondition = "(p.role = 'served' OR (p.role = 'validated' AND r.served_pins = ''))"

    // MARK: Schema

    static let tables = [
        """
        CREATE TABLE rollup_host_buckets (
            width BIGINT NOT NULL, bucket BIGINT NOT NULL, host TEXT NOT NULL,
            reports BIGINT NOT NULL, occurrences BIGINT NOT NULL, enforced BIGINT NOT NULL, report_only BIGINT NOT NULL,
            last_seen_at BIGINT NOT NULL,
            PRIMARY KEY (width, bucket, host)
        )
        """,
        """
        CREATE TABLE rollup_host_results (
            host TEXT NOT NULL, width BIGINT NOT NULL, bucket BIGINT NOT NULL, result TEXT NOT NULL, occurrences BIGINT NOT NULL,
            PRIMARY KEY (host, width, bucket, result)
        )
        """,
        """
        CREATE TABLE rollup_host_pins (
            host TEXT NOT NULL, width BIGINT NOT NULL, bucket BIGINT NOT NULL, role TEXT NOT NULL, pin TEXT NOT NULL,
            occurrences BIGINT NOT NULL, position BIGINT NOT NULL, report_id BIGINT NOT NULL,
            PRIMARY KEY (host, width, bucket, role, pin)
        )
        """,
        """
        CREATE TABLE rollup_pin_sources (
            host TEXT NOT NULL, width BIGINT NOT NULL, bucket BIGINT NOT NULL, pin TEXT NOT NULL, source_hash TEXT NOT NULL,
            row_count BIGINT NOT NULL,
            PRIMARY KEY (host, width, bucket, pin, source_hash)
        )
        """,
    ]

    /// The hour rows computed from `reports` (restricted by `filter`, a condition on `r`), then nothing else.
    static func hourStatements(filter: String) -> [String] {
        let h = Self.hour
        return [
            """
            INSERT INTO rollup_host_buckets (width, bucket, host, reports, occurrences, enforced, report_only, last_seen_at)
            SELECT \(h), r.received_at / \(h), r.host, COUNT(*), SUM(r.occurrences),
                SUM(CASE WHEN r.enforced = 1 THEN r.occurrences ELSE 0 END), SUM(CASE WHEN r.enforced = 0 THEN r.occurrences ELSE 0 END),
                MAX(r.last_seen_at)
            FROM reports r WHERE \(filter) GROUP BY r.received_at / \(h), r.host
            """,
            """
            INSERT INTO rollup_host_results (host, width, bucket, result, occurrences)
            SELECT r.host, \(h), r.received_at / \(h), r.result, SUM(r.occurrences)
            FROM reports r WHERE \(filter) GROUP BY r.host, r.received_at / \(h), r.result
            """,
            """
            INSERT INTO rollup_host_pins (host, width, bucket, role, pin, occurrences, position, report_id)
            SELECT r.host, \(h), r.received_at / \(h), 'served', p.pin, SUM(r.occurrences), MIN(p.position), MAX(r.id)
            FROM report_pins p JOIN reports r ON r.id = p.report_id WHERE \(Self.servedCondition) AND \(filter)
            GROUP BY r.host, r.received_at / \(h), p.pin
            """,
            """
            INSERT INTO rollup_host_pins (host, width, bucket, role, pin, occurrences, position, report_id)
            SELECT r.host, \(h), r.received_at / \(h), 'known', p.pin, SUM(r.occurrences), MIN(p.position), MAX(r.id)
            FROM report_pins p JOIN reports r ON r.id = p.report_id WHERE p.role = 'known' AND \(filter)
            GROUP BY r.host, r.received_at / \(h), p.pin
            """,
            """
            INSERT INTO rollup_pin_sources (host, width, bucket, pin, source_hash, row_count)
            SELECT r.host, \(h), r.received_at / \(h), p.pin, r.source_hash, COUNT(DISTINCT r.id)
            FROM report_pins p JOIN reports r ON r.id = p.report_id WHERE \(Self.servedCondition) AND \(filter)
            GROUP BY r.host, r.received_at / \(h), p.pin, r.source_hash
            """,
        ]
    }

    /// The day rows computed from the hour rows (restricted by `filter`, a condition on the hour rows' `host` and
    /// `bucket`, an hour number).
    static func dayStatements(filter: String) -> [String] {
        let (h, d) = (Self.hour, Self.day)
        let perDay = d / h
        return [
            """
            INSERT INTO rollup_host_buckets (width, bucket, host, reports, occurrences, enforced, report_only, last_seen_at)
            SELECT \(d), bucket / \(perDay), host, SUM(reports), SUM(occurrences), SUM(enforced), SUM(report_only), MAX(last_seen_at)
            FROM rollup_host_buckets WHERE width = \(h) AND \(filter) GROUP BY bucket / \(perDay), host
            """,
            """
            INSERT INTO rollup_host_results (host, width, bucket, result, occurrences)
            SELECT host, \(d), bucket / \(perDay), result, SUM(occurrences)
            FROM rollup_host_results WHERE width = \(h) AND \(filter) GROUP BY host, bucket / \(perDay), result
            """,
            """
            INSERT INTO rollup_host_pins (host, width, bucket, role, pin, occurrences, position, report_id)
            SELECT host, \(d), bucket / \(perDay), role, pin, SUM(occurrences), MIN(position), MAX(report_id)
            FROM rollup_host_pins WHERE width = \(h) AND \(filter) GROUP BY host, bucket / \(perDay), role, pin
            """,
            """
            INSERT INTO rollup_pin_sources (host, width, bucket, pin, source_hash, row_count)
            SELECT host, \(d), bucket / \(perDay), pin, source_hash, SUM(row_count)
            FROM rollup_pin_sources WHERE width = \(h) AND \(filter) GROUP BY host, bucket / \(perDay), pin, source_hash
            """,
        ]
    }

    static let tableNames = ["rollup_host_buckets", "rollup_host_results", "rollup_host_pins", "rollup_pin_sources"]

    /// Migration 3's statements: the tables, and the rollups of the reports already stored.
    static var migration: [String] {
        Self.tables + Self.hourStatements(filter: "1 = 1") + Self.dayStatements(filter: "1 = 1")
    }

    // MARK: Ingest

    /// A batch's changes, added up in memory so that each key is written once a batch (a multi-row upsert may not
    /// touch one row twice in PostgreSQL), in sorted order (two collectors sharing a PostgreSQL database lock rows
    /// in the same order). The keys compare field by field (a comparison of tuples was generic over their
    /// elements, copying and destroying each tuple it compared: the sorts were about 13% of the batched ingest's
    /// samples, now about 4%).
    struct Change {
        struct HostKey: Hashable, Comparable {
            var width: Int64, bucket: Int64, host: String
            static func < (a: Self, b: Self) -> Bool {
                if a.width != b.width { return a.width < b.width }
                if a.bucket != b.bucket { return a.bucket < b.bucket }
                return a.host < b.host
            }
        }
        struct HostTotals {
            var reports: Int64 = 0, occurrences: Int64 = 0, enforced: Int64 = 0, reportOnly: Int64 = 0, lastSeen: Int64 = .min
        }
        struct ResultKey: Hashable, Comparable {
            var host: String, width: Int64, bucket: Int64, result: String
            static func < (a: Self, b: Self) -> Bool {
                if a.host != b.host { return a.host < b.host }
                if a.width != b.width { return a.width < b.width }
                if a.bucket != b.bucket { return a.bucket < b.bucket }
                return a.result < b.result
            }
        }
        struct PinKey: Hashable, Comparable {
            var host: String, width: Int64, bucket: Int64, role: String, pin: String
            static func < (a: Self, b: Self) -> Bool {
                if a.host != b.host { return a.host < b.host }
                if a.width != b.width { return a.width < b.width }
                if a.bucket != b.bucket { return a.bucket < b.bucket }
                if a.role != b.role { return a.role < b.role }
                return a.pin < b.pin
            }
        }
        struct PinTotals {
            var occurrences: Int64 = 0, position: Int64 = .max, reportID: Int64 = .min
        }
        struct SourceKey: Hashable, Comparable {
            var host: String, width: Int64, bucket: Int64, pin: String, source: String
            static func < (a: Self, b: Self) -> Bool {
                if a.host != b.host { return a.host < b.host }
                if a.width != b.width { return a.width < b.width }
                if a.bucket != b.bucket { return a.bucket < b.bucket }
                if a.pin != b.pin { return a.pin < b.pin }
                return a.source < b.source
            }
        }

        var hosts: [HostKey: HostTotals] = [:]
        var results: [ResultKey: Int64] = [:]
        var pins: [PinKey: PinTotals] = [:]
        var sources: [SourceKey: Int64] = [:]

        /// One ingested report: a new row (`stored`) or one more occurrence of the row `id`, which was first
        /// received at `firstReceived` (the bucket it counts in, as the rows do).
        mutating func add(_ item: IngestItem, id: Int64, firstReceived: Int64, stored: Bool) {
            let report = item.report
            let served = report.servedPins.isEmpty ? report.validatedPins : report.servedPins
            for width in HostRollups.widths {
                let bucket = firstReceived / width
                let key = HostKey(width: width, bucket: bucket, host: report.host)
                var totals = self.hosts[key] ?? HostTotals()
                totals.reports += stored ? 1 : 0
                totals.occurrences += 1
                totals.enforced += report.enforced == true ? 1 : 0
                totals.reportOnly += report.enforced == false ? 1 : 0
                totals.lastSeen = max(totals.lastSeen, item.receivedAt)
                self.hosts[key] = totals
                self.results[ResultKey(host: report.host, width: width, bucket: bucket, result: report.result), default: 0] += 1
                // One occurrence per pin row, as the join of report_pins with reports counts them.
                for (role, list) in [("served", served), ("known", report.knownPins)] {
                    for (position, pin) in list.enumerated() {
                        let pinKey = PinKey(host: report.host, width: width, bucket: bucket, role: role, pin: pin)
                        var pinTotals = self.pins[pinKey] ?? PinTotals()
                        pinTotals.occurrences += 1
                        pinTotals.position = min(pinTotals.position, Int64(position))
                        pinTotals.reportID = max(pinTotals.reportID, id)
                        self.pins[pinKey] = pinTotals
                    }
                }
                if stored {
                    for pin in Set(served) {
                        self.sources[SourceKey(host: report.host, width: width, bucket: bucket, pin: pin, source: item.sourceHash), default: 0] += 1
                    }
                }
            }
        }

        func apply(_ session: any SQLSession) async throws {
            var rows: [SQLValue] = []
            for (key, totals) in self.hosts.sorted(by: { $0.key < $1.key }) {
                rows += [
                    .integer(key.width), .integer(key.bucket), .text(key.host), .integer(totals.reports), .integer(totals.occurrences), .integer(totals.enforced),
                    .integer(totals.reportOnly), .integer(totals.lastSeen),
                ]
            }
            try await ReportStore.insertRows(
                session, "INSERT INTO rollup_host_buckets (width, bucket, host, reports, occurrences, enforced, report_only, last_seen_at) VALUES ", columns: 8, rows,
                conflict: """
                     ON CONFLICT (width, bucket, host) DO UPDATE SET reports = rollup_host_buckets.reports + excluded.reports, \
                    occurrences = rollup_host_buckets.occurrences + excluded.occurrences, enforced = rollup_host_buckets.enforced + excluded.enforced, \
                    report_only = rollup_host_buckets.report_only + excluded.report_only, \
                    last_seen_at = CASE WHEN excluded.last_seen_at > rollup_host_buckets.last_seen_at THEN excluded.last_seen_at ELSE rollup_host_buckets.last_seen_at END
                    """)
            rows = []
            for (key, occurrences) in self.results.sorted(by: { $0.key < $1.key }) {
                rows += [.text(key.host), .integer(key.width), .integer(key.bucket), .text(key.result), .integer(occurrences)]
            }
            try await ReportStore.insertRows(
                session, "INSERT INTO rollup_host_results (host, width, bucket, result, occurrences) VALUES ", columns: 5, rows,
                conflict: " ON CONFLICT (host, width, bucket, result) DO UPDATE SET occurrences = rollup_host_results.occurrences + excluded.occurrences")
            rows = []
            for (key, totals) in self.pins.sorted(by: { $0.key < $1.key }) {
                rows += [
                    .text(key.host), .integer(key.width), .integer(key.bucket), .text(key.role), .text(key.pin), .integer(totals.occurrences), .integer(totals.position),
                    .integer(totals.reportID),
                ]
            }
            try await ReportStore.insertRows(
                session, "INSERT INTO rollup_host_pins (host, width, bucket, role, pin, occurrences, position, report_id) VALUES ", columns: 8, rows,
                conflict: """
                     ON CONFLICT (host, width, bucket, role, pin) DO UPDATE SET occurrences = rollup_host_pins.occurrences + excluded.occurrences, \
                    position = CASE WHEN excluded.position < rollup_host_pins.position THEN excluded.position ELSE rollup_host_pins.position END, \
                    report_id = CASE WHEN excluded.report_id > rollup_host_pins.report_id THEN excluded.report_id ELSE rollup_host_pins.report_id END
                    """)
            rows = []
            for (key, count) in self.sources.sorted(by: { $0.key < $1.key }) {
                rows += [.text(key.host), .integer(key.width), .integer(key.bucket), .text(key.pin), .text(key.source), .integer(count)]
            }
            try await ReportStore.insertRows(
                session, "INSERT INTO rollup_pin_sources (host, width, bucket, pin, source_hash, row_count) VALUES ", columns: 6, rows,
                conflict: " ON CONFLICT (host, width, bucket, pin, source_hash) DO UPDATE SET row_count = rollup_pin_sources.row_count + excluded.row_count")
        }
    }

    // MARK: Retention

    /// After retention deleted rows of `hosts` first received in the hours `first...last`: those hours of those
    /// hosts recomputed from the rows left, then the days holding them from the hour rows. Recomputing rather than
    /// subtracting keeps the newest report of a pin and its first position right when the row that set them went.
    static func recompute(_ session: any SQLSession, hosts: [SQLValue], hours first: Int64, _ last: Int64) async throws {
        let perDay = Self.day / Self.hour
        let (firstDay, lastDay) = (first / perDay, last / perDay)
        var start = 0
        while start < hosts.count {
            let chunk = Array(hosts[start..<min(hosts.count, start + ReportStore.rowsPerInsert)])
            let list = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
            for table in Self.tableNames {
                _ = try await session.query(
                    "DELETE FROM \(table) WHERE width = \(Self.hour) AND bucket >= ? AND bucket <= ? AND host IN (\(list))", [.integer(first), .integer(last)] + chunk)
            }
            let rows = "r.host IN (\(list)) AND r.received_at >= ? AND r.received_at < ?"
            for statement in Self.hourStatements(filter: rows) {
                _ = try await session.query(statement, chunk + [.integer(first * Self.hour), .integer((last + 1) * Self.hour)])
            }
            for table in Self.tableNames {
                _ = try await session.query(
                    "DELETE FROM \(table) WHERE width = \(Self.day) AND bucket >= ? AND bucket <= ? AND host IN (\(list))", [.integer(firstDay), .integer(lastDay)] + chunk)
            }
            for statement in Self.dayStatements(filter: "host IN (\(list)) AND bucket >= ? AND bucket < ?") {
                _ = try await session.query(statement, chunk + [.integer(firstDay * perDay), .integer((lastDay + 1) * perDay)])
            }
            start += chunk.count
        }
    }

    // MARK: Reads

    /// How a `since` splits into what each source answers: day rows from `firstDay`, hour rows in
    /// `firstHour..<dayHours`, and `reports` in `from..<rowsEnd`.
    struct Segments {
        var firstDay: Int64
        var firstHour: Int64
        var dayHours: Int64
        var from: Int64
        var rowsEnd: Int64

        init(since: Int64?) {
            // received_at is the collector's own clock (never before 1970), so an earlier `since` asks for
            // everything; one beyond year 9999 asks for nothing, and keeps the products below in range.
            let from = min(max(0, since ?? 0), 253_402_300_800_000)
            self.from = from
            self.firstDay = from / HostRollups.day + (from % HostRollups.day == 0 ? 0 : 1)
            self.firstHour = from / HostRollups.hour + (from % HostRollups.hour == 0 ? 0 : 1)
            self.dayHours = self.firstDay * (HostRollups.day / HostRollups.hour)
            self.rowsEnd = self.firstHour * HostRollups.hour
        }

        /// `columns` of `table`'s day and hour rows in range, each row restricted by `condition` (bound by
        /// `conditionBinds`), as two SELECTs joined by UNION ALL, and their binds.
        func rollups(_ columns: String, from table: String, where condition: String, _ conditionBinds: [SQLValue]) -> (sql: String, binds: [SQLValue]) {
            let sql = """
                SELECT \(columns) FROM \(table) WHERE width = \(HostRollups.day) AND bucket >= ? AND \(condition)
                UNION ALL SELECT \(columns) FROM \(table) WHERE width = \(HostRollups.hour) AND bucket >= ? AND bucket < ? AND \(condition)
                """
            return (sql, [.integer(self.firstDay)] + conditionBinds + [.integer(self.firstHour), .integer(self.dayHours)] + conditionBinds)
        }

        /// The binds of `r.received_at >= ? AND r.received_at < ?`: the rows of the partial hour.
        var rowBinds: [SQLValue] { [.integer(self.from), .integer(self.rowsEnd)] }
    }

    /// The hosts with the most occurrences first (at most `limit`, or only `host`), from the rollups.
    static func hosts(_ database: any SQLDatabase, since: Int64?, limit: Int, host: String?) async throws -> [HostSummary] {
        let segments = Segments(since: since)
        let hostCondition = host == nil ? "1 = 1" : "host = ?"
        let hostBinds: [SQLValue] = host.map { [.text($0)] } ?? []
        let rollups = segments.rollups("host, reports, occurrences, last_seen_at, enforced, report_only", from: "rollup_host_buckets", where: hostCondition, hostBinds)
        let base = try await database.query(
            """
            SELECT host, CAST(SUM(reports) AS BIGINT), CAST(SUM(occurrences) AS BIGINT), CAST(MAX(last_seen_at) AS BIGINT), CAST(SUM(enforced) AS BIGINT),
                CAST(SUM(report_only) AS BIGINT)
            FROM (
                \(rollups.sql)
                UNION ALL SELECT r.host, 1, r.occurrences, r.last_seen_at, CASE WHEN r.enforced = 1 THEN r.occurrences ELSE 0 END,
                    CASE WHEN r.enforced = 0 THEN r.occurrences ELSE 0 END
                FROM reports r WHERE r.received_at >= ? AND r.received_at < ? AND \(host == nil ? "1 = 1" : "r.host = ?")
            ) AS segments
            GROUP BY host ORDER BY 3 DESC, host LIMIT ?
            """,
            rollups.binds + segments.rowBinds + hostBinds + [.integer(Int64(max(1, limit)))]
        )
        var hosts: [HostSummary] = base.compactMap(ReportStore.hostTotals)
        guard !hosts.isEmpty else { return [] }
        var index: [String: Int] = [:]
        for (position, summary) in hosts.enumerated() { index[summary.host] = position }
        let names = hosts.map { SQLValue.text($0.host) }
        let list = Array(repeating: "?", count: names.count).joined(separator: ", ")

        let results = segments.rollups("host, result, occurrences", from: "rollup_host_results", where: "host IN (\(list))", names)
        for row in try await database.query(
            """
            SELECT host, result, CAST(SUM(occurrences) AS BIGINT) FROM (
                \(results.sql)
                UNION ALL SELECT r.host, r.result, r.occurrences FROM reports r WHERE r.received_at >= ? AND r.received_at < ? AND r.host IN (\(list))
            ) AS segments GROUP BY host, result
            """,
            results.binds + segments.rowBinds + names
        ) {
            guard row.count == 3, let host = row[0].text, let result = row[1].text, let position = index[host] else { continue }
            hosts[position].results[result] = row[2].integer ?? 0
        }

        var sources: [String: [String: Int64]] = [:]
        let pinSources = segments.rollups("host, pin, source_hash", from: "rollup_pin_sources", where: "host IN (\(list))", names)
        for row in try await database.query(
            """
            SELECT host, pin, COUNT(DISTINCT source_hash) FROM (
                \(pinSources.sql)
                UNION ALL SELECT r.host, p.pin, r.source_hash FROM report_pins p JOIN reports r ON r.id = p.report_id
                WHERE \(Self.servedCondition) AND r.received_at >= ? AND r.received_at < ? AND r.host IN (\(list))
            ) AS segments GROUP BY host, pin
            """,
            pinSources.binds + segments.rowBinds + names
        ) {
            guard row.count == 3, let host = row[0].text, let pin = row[1].text else { continue }
            sources[host, default: [:]][pin] = row[2].integer ?? 0
        }

        let pins = segments.rollups("host, role, pin, occurrences, position, report_id", from: "rollup_host_pins", where: "host IN (\(list))", names)
        for row in try await database.query(
            """
            SELECT host, role, pin, CAST(SUM(occurrences) AS BIGINT), CAST(MIN(position) AS BIGINT), CAST(MAX(report_id) AS BIGINT) FROM (
                \(pins.sql)
                UNION ALL SELECT r.host, 'served', p.pin, r.occurrences, p.position, r.id FROM report_pins p JOIN reports r ON r.id = p.report_id
                WHERE \(Self.servedCondition) AND r.received_at >= ? AND r.received_at < ? AND r.host IN (\(list))
                UNION ALL SELECT r.host, 'known', p.pin, r.occurrences, p.position, r.id FROM report_pins p JOIN reports r ON r.id = p.report_id
                WHERE p.role = 'known' AND r.received_at >= ? AND r.received_at < ? AND r.host IN (\(list))
            ) AS segments GROUP BY host, role, pin
            ORDER BY CASE WHEN role = 'known' THEN 0 ELSE SUM(occurrences) END DESC, pin
            """,
            pins.binds + segments.rowBinds + names + segments.rowBinds + names
        ) {
            guard row.count == 6, let host = row[0].text, let role = row[1].text, let pin = row[2].text, let position = index[host] else { continue }
            // Known pins come in the database's order of the pin text, as the served ones after their counts.
            if role == "known" {
                hosts[position].knownPins.append(pin)
            } else {
                hosts[position].servedPins.append(
                    HostSummary.ServedPin(
                        pin: pin,
                        sources: sources[host]?[pin] ?? 0,
                        occurrences: row[3].integer ?? 0,
                        known: false,
                        position: row[4].integer ?? 0,
                        exampleReport: row[5].integer ?? 0
                    )
                )
            }
        }
        for position in hosts.indices {
            let known = Set(hosts[position].knownPins)
            for pinIndex in hosts[position].servedPins.indices {
                hosts[position].servedPins[pinIndex].known = known.contains(hosts[position].servedPins[pinIndex].pin)
            }
        }
        return hosts
    }
}
