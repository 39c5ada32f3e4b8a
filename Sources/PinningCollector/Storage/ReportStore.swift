import Foundation
import Pinning

/// A report accepted for storage, with what the collector adds: when and from whom (hashed) it arrived.
public struct IngestItem: Sendable {
    public var report: NormalizedReport
    /// Milliseconds since 1970 when the collector received it.
    public var receivedAt: Int64
    /// SHA-256 of the source address (with the collector's salt): distinct sources are countable, addresses are
    /// not stored.
    public var sourceHash: String

    public init(report: NormalizedReport, receivedAt: Int64, sourceHash: String) {
        self.report = report
        self.receivedAt = receivedAt
        self.sourceHash = sourceHash
    }
}

/// What happened to one ingested report.
public enum IngestOutcome: Sendable, Equatable {
    /// A new row.
    case stored(id: Int64)
    /// An identical report within the window: its row's count went up.
    case deduplicated(id: Int64)
}

/// `GET /api/summary`.
public struct CollectorSummary: Sendable, Equatable, Codable {
    public var reports: Int64
    public var occurrences: Int64
    public var hosts: Int64
    public var sources: Int64

    public init(reports: Int64, occurrences: Int64, hosts: Int64, sources: Int64) {
        self.reports = reports
        self.occurrences = occurrences
        self.hosts = hosts
        self.sources = sources
    }
}

/// One host of `GET /api/hosts`.
public struct HostSummary: Sendable, Equatable, Codable {
    public struct ServedPin: Sendable, Equatable, Codable {
        public var pin: String
        public var sources: Int64
        public var occurrences: Int64
        /// Whether the pin is among the host's known pins.
        public var known: Bool
        /// The chain position it was served at (0 is the leaf).
        public var position: Int64
        /// The id of the newest report that served it (its chain is how the dashboard judges the key).
        public var exampleReport: Int64
    }
    public var host: String
    public var reports: Int64
    public var occurrences: Int64
    public var lastSeen: String
    public var results: [String: Int64]
    public var servedPins: [ServedPin]
    public var knownPins: [String]
    public var enforced: Int64
    public var reportOnly: Int64
}

/// One row of `GET /api/reports` and the CSV.
public struct StoredReport: Sendable, Equatable, Codable {
    public var id: Int64
    public var receivedAt: String
    public var lastSeen: String
    public var dateTime: String?
    public var host: String
    public var port: Int64?
    public var notedHost: String?
    public var result: String
    public var enforced: Bool?
    public var appId: String?
    public var appVersion: String?
    public var platform: String?
    public var platformVersion: String?
    public var libraryVersion: String?
    public var pinsetVersion: String?
    public var format: String
    public var servedPins: [String]
    public var validatedPins: [String]
    public var knownPins: [String]
    public var occurrences: Int64

    /// Every key is written, null ones included (the API's documented shape).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.id, forKey: .id)
        try container.encode(self.receivedAt, forKey: .receivedAt)
        try container.encode(self.lastSeen, forKey: .lastSeen)
        try container.encode(self.dateTime, forKey: .dateTime)
        try container.encode(self.host, forKey: .host)
        try container.encode(self.port, forKey: .port)
        try container.encode(self.notedHost, forKey: .notedHost)
        try container.encode(self.result, forKey: .result)
        try container.encode(self.enforced, forKey: .enforced)
        try container.encode(self.appId, forKey: .appId)
        try container.encode(self.appVersion, forKey: .appVersion)
        try container.encode(self.platform, forKey: .platform)
        try container.encode(self.platformVersion, forKey: .platformVersion)
        try container.encode(self.libraryVersion, forKey: .libraryVersion)
        try container.encode(self.pinsetVersion, forKey: .pinsetVersion)
        try container.encode(self.format, forKey: .format)
        try container.encode(self.servedPins, forKey: .servedPins)
        try container.encode(self.validatedPins, forKey: .validatedPins)
        try container.encode(self.knownPins, forKey: .knownPins)
        try container.encode(self.occurrences, forKey: .occurrences)
    }
}

/// Filters of `GET /api/reports`.
public struct ReportQuery: Sendable, Equatable {
    public var host: String?
    public var result: String?
    public var app: String?
    public var since: Int64?
    public var limit: Int = 100
    /// Rows with an id below this one (the previous page's `next`).
    public var before: Int64?
    public init() {}
}

/// Every statement the collector runs, written once for both databases (bound values only).
public struct ReportStore: Sendable {
    public let database: any SQLDatabase
    /// Identical reports within one window of this length are counted on one row.
    public let deduplicationWindow: Int64

    public init(database: any SQLDatabase, deduplicationWindowMilliseconds: Int64) {
        self.database = database
        self.deduplicationWindow = max(1, deduplicationWindowMilliseconds)
    }

    /// Creates or updates the schema; refuses a database written by a newer collector.
    public func migrate(now: Int64) async throws {
        try await Migrations.apply(to: self.database, now: now)
        let rows = try await self.database.query("SELECT CAST(MAX(version) AS BIGINT) FROM collector_migrations", [])
        let version = rows.first?.first?.integer ?? 0
        guard version <= Migrations.latest else {
            throw StoreError("the database's schema is version \(version), newer than this collector's \(Migrations.latest): upgrade the collector")
        }
        try await self.normaliseStoredHosts()
    }

    /// Rewrites the host of rows stored before hosts were normalised (82f178d: `EXAMPLE.com.`, `例え.テスト`) to the
    /// form every host is now stored and looked up in (``ReportParser/hostName(_:key:label:)``), and recomputes
    /// those hosts' rollups, so that `?host=example.com` finds such a row and the host list shows one host, not two.
    /// Run at every open, after the migrations (a row an older collector sharing the database wrote later is
    /// rewritten at the next open); idempotent: with every host in its form it reads the hosts of `rollup_hosts`
    /// (one row per host) and writes nothing.
    ///
    /// A stored host that is not a host name (markup, spaces: refused since) is kept as written: `?host=` matches
    /// such a text as written. What is not rewritten: `noted_host`, `raw` (the report as sent) and the
    /// de-duplication fingerprint, so an identical report arriving now starts a row of its own rather than adding
    /// to the old one.
    ///
    /// - Returns: The stored hosts rewritten (old text → new), sorted by the old text.
    @discardableResult
    public func normaliseStoredHosts() async throws -> [(from: String, to: String)] {
        // Read outside a transaction first: the common case (nothing to rewrite) takes no lock. And read from
        // `rollup_hosts` (one row per host), not `reports`: `SELECT DISTINCT host FROM reports` walks the whole
        // `reports_host` index, every row, at every open (millions of rows on a long-lived collector).
        //
        // The rollup is a sound witness: it holds every host that has rows. Migration 2 filled it from `reports`;
        // since then, ingest adds or raises a host's row in the transaction that stores its report, and retention
        // deletes a host's row only in the transaction that deletes its rows, re-adding it when rows are left
        // (a collector from before the rollups still writing to a migrated database would leave `summary` and the
        // host list wrong as well: the rollups are the store's record of its hosts). So a stored host in an old
        // form has its text in the rollup too, and a rollup with none has nothing to rewrite.
        //
        // The table is made by migration 2, which `migrate` applies before calling this; called on a database
        // without it (not migrated that far), the scan of `reports` is the check, as before.
        let hasRollup = !(try await self.database.query("SELECT version FROM collector_migrations WHERE version = 2", [])).isEmpty
        let witness = hasRollup ? "SELECT host FROM rollup_hosts" : "SELECT DISTINCT host FROM reports"
        guard !Self.renames(try await self.database.query(witness, [])).isEmpty else { return [] }
        let kind = self.database.kind
        return try await self.database.transaction { session in
            if kind == .postgres {
                // Two collectors opening one database at once: the second waits here, then finds nothing to do;
                // ingest (which writes `reports` and then the rollups) waits for the rewrite, so no rollup row is
                // added for a host while its rows are recomputed. SQLite's transactions are already one at a time.
                _ = try await session.query("LOCK TABLE reports IN SHARE ROW EXCLUSIVE MODE", [])
            }
            // Under the lock, from the rows themselves (the rollup said there is something to do: this scan is
            // made once, when there is).
            let renames = Self.renames(try await session.query("SELECT DISTINCT host FROM reports", []))
            guard !renames.isEmpty else { return [] }
            for rename in renames {
                _ = try await session.query("UPDATE reports SET host = ? WHERE host = ?", [.text(rename.to), .text(rename.from)])
            }
            // Every rollup row of the old and the new names, recomputed over the hours the new names' rows span
            // (which hold every row the old names had).
            let names = Array(Set(renames.flatMap { [$0.from, $0.to] })).sorted().map(SQLValue.text)
            let newNames = Array(Set(renames.map(\.to))).sorted().map(SQLValue.text)
            try await Self.recomputeNewest(in: session, table: "rollup_hosts", key: "host", names: names)
            var start = 0
            var span: (first: Int64, last: Int64)?
            while start < newNames.count {
                let chunk = Array(newNames[start..<min(newNames.count, start + Self.rowsPerInsert)])
                let list = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
                let row = try await session.query(
                    "SELECT CAST(MIN(received_at) AS BIGINT), CAST(MAX(received_at) AS BIGINT) FROM reports WHERE host IN (\(list))", chunk
                ).first
                if let first = row?.first?.integer, let last = row?.last?.integer {
                    span = (min(span?.first ?? first, first), max(span?.last ?? last, last))
                }
                start += chunk.count
            }
            if let span {
                try await HostRollups.recompute(session, hosts: names, hours: span.first / HostRollups.hour, span.last / HostRollups.hour)
            }
            return renames
        }
    }

    /// The stored hosts (rows of one text column) not in the normalised form, with that form; a text that is not a
    /// host name is left out (kept as written).
    static func renames(_ rows: [SQLRow]) -> [(from: String, to: String)] {
        var renames: [(from: String, to: String)] = []
        for case let text? in rows.map({ $0.first?.text }) {
            let normalised: String
            do {
                normalised = try ReportParser.hostName(text, key: "hostname", label: "a stored report")
            } catch {
                // Not a host name: such a row stays as written (its refusal is what the parser says now).
                continue
            }
            if normalised != text { renames.append((text, normalised)) }
        }
        return renames.sorted { $0.from.utf8.lexicographicallyPrecedes($1.from.utf8) }
    }

    /// The salt of the source hashes: made once (32 random bytes from the system's generator) and kept in the
    /// database, so distinct sources are counted alike across restarts and by every collector sharing it.
    public func sourceSalt() async throws -> [UInt8] {
        if let text = try await self.database.query("SELECT value FROM collector_settings WHERE name = 'source_salt'", []).first?.first?.text,
            let data = Data(base64Encoded: text), data.count == 32
        {
            return Array(data)
        }
        var generator = SystemRandomNumberGenerator()
        let salt = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let stored = try await self.database.transaction { session -> String? in
            _ = try await session.query(
                "INSERT INTO collector_settings (name, value) VALUES ('source_salt', ?) ON CONFLICT (name) DO NOTHING",
                [.text(Data(salt).base64EncodedString())]
            )
            return try await session.query("SELECT value FROM collector_settings WHERE name = 'source_salt'", []).first?.first?.text
        }
        guard let stored, let data = Data(base64Encoded: stored), data.count == 32 else {
            throw StoreError("collector_settings.source_salt is not 32 bytes of base64")
        }
        return Array(data)
    }

    // MARK: Ingest

    /// The upsert of a batch's rows, `rows` groups of binds (``upsertColumns`` each). A row stands for the
    /// batch's reports that share a fingerprint and window (combined in memory first: PostgreSQL refuses an
    /// `ON CONFLICT DO UPDATE` that touches one row twice in a statement), with their count and their newest
    /// receipt time. Each row returned names its key: the order of a multi-row `RETURNING` is not defined
    /// (SQLite's documentation says so), so rows are matched to reports by key, never by position.
    static func upsert(rows: Int) -> String {
        let group = "(" + Array(repeating: "?", count: Self.upsertColumns).joined(separator: ", ") + ")"
        return """
            INSERT INTO reports (fingerprint, window_start, received_at, last_seen_at, occurrences, format, date_time, host, port,
                noted_host, include_subdomains, enforced, result, app_id, app_version, platform, platform_version, library_version,
                pinset_version, pins_expiration, device_hash, source_hash, served_pins, validated_pins, known_pins, served_chain,
                validated_chain, raw)
            VALUES \(Array(repeating: group, count: rows).joined(separator: ", "))
            ON CONFLICT (fingerprint, window_start) DO UPDATE SET occurrences = reports.occurrences + excluded.occurrences,
                last_seen_at = CASE WHEN excluded.last_seen_at > reports.last_seen_at THEN excluded.last_seen_at ELSE reports.last_seen_at END
            RETURNING id, occurrences, received_at, fingerprint, window_start
            """
    }

    /// Binds per row of ``upsert(rows:)``.
    static let upsertColumns = 28

    /// The width of a `rollup_hours` bucket.
    static let hour: Int64 = 3_600_000

    /// Rows per multi-row INSERT (at most 28 binds a row: far below SQLite's and PostgreSQL's bind limits).
    static let rowsPerInsert = 500

    /// `table`'s newest `received_at` for each of `names` (its `key` column), recomputed from the rows in `reports`
    /// (a name with no rows left is no longer counted), in chunks of ``rowsPerInsert``: retention and the host
    /// migration both recompute it this way.
    static func recomputeNewest(in session: any SQLSession, table: String, key: String, names: [SQLValue]) async throws {
        var start = 0
        while start < names.count {
            let chunk = Array(names[start..<min(names.count, start + Self.rowsPerInsert)])
            let list = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
            _ = try await session.query("DELETE FROM \(table) WHERE \(key) IN (\(list))", chunk)
            _ = try await session.query(
                "INSERT INTO \(table) (\(key), last_received_at) SELECT \(key), MAX(received_at) FROM reports WHERE \(key) IN (\(list)) GROUP BY \(key)", chunk)
            start += chunk.count
        }
    }

    /// What identifies a stored row: identical reports within one window share it.
    struct RowKey: Hashable {
        var fingerprint: String
        var windowStart: Int64
    }

    /// The reports of a batch that share one ``RowKey``.
    struct BatchRow {
        var key: RowKey
        /// The first of them (batch order): its fields are the row's, its receipt time the row's `received_at`.
        var first: Int
        var count: Int64
        var lastSeen: Int64
    }

    /// Stores a batch in one transaction (the ingest writer's group commit): the batch's reports upserted as a
    /// few multi-row statements, then its pins and its changes to the rollup tables, all in the same
    /// transaction.
    ///
    /// The outcome is what storing the reports one at a time, in batch order, gives: the first report of a new
    /// row is `stored`, every other one `deduplicated` onto its row, each counted once in `occurrences`, with
    /// `last_seen_at` the newest receipt time.
    public func ingest(_ items: [IngestItem]) async throws -> [IngestOutcome] {
        let window = self.deduplicationWindow
        return try await self.database.transaction { session in
            // Identical reports combined, rows in the order of their first report (so ids grow in batch order).
            var rows: [BatchRow] = []
            var rowOfKey: [RowKey: Int] = [:]
            var rowOfItem: [Int] = []
            rowOfItem.reserveCapacity(items.count)
            for (index, item) in items.enumerated() {
                let key = RowKey(fingerprint: item.report.fingerprint(source: item.sourceHash), windowStart: item.receivedAt / window * window)
                if let row = rowOfKey[key] {
                    rows[row].count += 1
                    rows[row].lastSeen = max(rows[row].lastSeen, item.receivedAt)
                    rowOfItem.append(row)
                } else {
                    rowOfKey[key] = rows.count
                    rowOfItem.append(rows.count)
                    rows.append(BatchRow(key: key, first: index, count: 1, lastSeen: item.receivedAt))
                }
            }

            // What the database holds for each key after the upsert: (id, occurrences, received_at).
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            var stored: [RowKey: (id: Int64, occurrences: Int64, firstReceived: Int64)] = [:]
            stored.reserveCapacity(rows.count)
            var start = 0
            while start < rows.count {
                let chunk = rows[start..<min(rows.count, start + Self.rowsPerInsert)]
                var binds: [SQLValue] = []
                binds.reserveCapacity(chunk.count * Self.upsertColumns)
                for row in chunk {
                    try Self.appendUpsertBinds(of: items[row.first], key: row.key, occurrences: row.count, lastSeen: row.lastSeen, encoder: encoder, to: &binds)
                }
                for returned in try await session.query(Self.upsert(rows: chunk.count), binds) {
                    guard returned.count == 5, let id = returned[0].integer, let occurrences = returned[1].integer, let firstReceived = returned[2].integer,
                        let fingerprint = returned[3].text, let windowStart = returned[4].integer
                    else {
                        throw StoreError("the database returned an unexpected row for an upsert")
                    }
                    stored[RowKey(fingerprint: fingerprint, windowStart: windowStart)] = (id, occurrences, firstReceived)
                }
                start += chunk.count
            }

            var outcomes: [IngestOutcome] = []
            outcomes.reserveCapacity(items.count)
            var pinRows: [SQLValue] = []
            var rollup = RollupChange()
            var hostRollup = HostRollups.Change()
            for (index, item) in items.enumerated() {
                let row = rows[rowOfItem[index]]
                guard let found = stored[row.key] else {
                    throw StoreError("the database returned no row for an upsert")
                }
                let (id, firstReceived) = (found.id, found.firstReceived)
                // A row this statement inserted holds exactly the batch's count (a row already stored had at
                // least one occurrence before): only then is the row's first report of the batch a new row.
                guard index == row.first, found.occurrences == row.count else {
                    // Counted on the existing row, in the hour that row was first received.
                    rollup.add(bucket: firstReceived / Self.hour, reports: 0, occurrences: 1)
                    hostRollup.add(item, id: id, firstReceived: firstReceived, stored: false)
                    outcomes.append(.deduplicated(id: id))
                    continue
                }
                let report = item.report
                rollup.add(bucket: item.receivedAt / Self.hour, reports: 1, occurrences: 1)
                rollup.received(host: report.host, source: item.sourceHash, at: item.receivedAt)
                hostRollup.add(item, id: id, firstReceived: item.receivedAt, stored: true)
                for (role, pins) in [("served", report.servedPins), ("validated", report.validatedPins), ("known", report.knownPins)] {
                    for (position, pin) in pins.enumerated() {
                        pinRows += [.integer(id), .text(role), .integer(Int64(position)), .text(pin)]
                    }
                }
                outcomes.append(.stored(id: id))
            }
            try await Self.insertRows(session, "INSERT INTO report_pins (report_id, role, position, pin) VALUES ", columns: 4, pinRows, conflict: "")
            try await rollup.apply(session)
            try await hostRollup.apply(session)
            return outcomes
        }
    }

    /// The binds of one row of ``upsert(rows:)``, in its column order.
    static func appendUpsertBinds(of item: IngestItem, key: RowKey, occurrences: Int64, lastSeen: Int64, encoder: JSONEncoder, to binds: inout [SQLValue]) throws {
        let report = item.report
        binds += [
            .text(key.fingerprint),
            .integer(key.windowStart),
            .integer(item.receivedAt),
            .integer(lastSeen),
            .integer(occurrences),
            .text(report.format.rawValue),
            SQLValue(report.dateTime.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }),
            .text(report.host),
            SQLValue(report.port),
            SQLValue(report.notedHost),
            SQLValue(report.includeSubdomains),
            SQLValue(report.enforced),
            .text(report.result),
            SQLValue(report.appId),
            SQLValue(report.appVersion),
            SQLValue(report.platform),
            SQLValue(report.platformVersion),
            SQLValue(report.libraryVersion),
            SQLValue(report.pinsetVersion),
            SQLValue(report.pinsExpiration),
            SQLValue(report.deviceHash),
            .text(item.sourceHash),
            .text(report.servedPins.joined(separator: ",")),
            .text(report.validatedPins.joined(separator: ",")),
            .text(report.knownPins.joined(separator: ",")),
            .text(try Self.chainJSON(report.servedChain, encoder)),
            .text(try Self.chainJSON(report.validatedChain, encoder)),
            .text(report.raw),
        ]
    }

    /// A chain as the `served_chain` and `validated_chain` columns hold it: JSON from `encoder` (keys sorted,
    /// slashes unescaped).
    static func chainJSON(_ chain: [ReportedCertificate], _ encoder: JSONEncoder) throws -> String {
        // An empty chain (TrustKit sends no served chain, RFC 7469 reports may send neither) is the text the
        // encoder writes for it, without running the encoder.
        if chain.isEmpty { return "[]" }
        return String(decoding: try encoder.encode(chain), as: UTF8.self)
    }

    /// Runs `prefix` with as many `(?, …)` groups as `values` holds rows, `rowsPerInsert` rows a statement.
    static func insertRows(_ session: any SQLSession, _ prefix: String, columns: Int, _ values: [SQLValue], conflict: String) async throws {
        let group = "(" + Array(repeating: "?", count: columns).joined(separator: ", ") + ")"
        var start = 0
        while start < values.count {
            let end = min(values.count, start + Self.rowsPerInsert * columns)
            let rows = (end - start) / columns
            let sql = prefix + Array(repeating: group, count: rows).joined(separator: ", ") + conflict
            _ = try await session.query(sql, Array(values[start..<end]))
            start = end
        }
    }

    /// A batch's changes to the rollup tables, added up in memory so that each key is written once a batch (a
    /// multi-row upsert may not touch one row twice in PostgreSQL), in sorted order (two collectors sharing a
    /// PostgreSQL database lock the rows in the same order).
    struct RollupChange {
        var buckets: [Int64: (reports: Int64, occurrences: Int64)] = [:]
        var hosts: [String: Int64] = [:]
        var sources: [String: Int64] = [:]

        mutating func add(bucket: Int64, reports: Int64, occurrences: Int64) {
            let current = self.buckets[bucket] ?? (0, 0)
            self.buckets[bucket] = (current.reports + reports, current.occurrences + occurrences)
        }

        mutating func received(host: String, source: String, at time: Int64) {
            self.hosts[host] = max(self.hosts[host] ?? time, time)
            self.sources[source] = max(self.sources[source] ?? time, time)
        }

        func apply(_ session: any SQLSession) async throws {
            var buckets: [SQLValue] = []
            for (bucket, change) in self.buckets.sorted(by: { $0.key < $1.key }) {
                buckets += [.integer(bucket), .integer(change.reports), .integer(change.occurrences)]
            }
            try await ReportStore.insertRows(
                session, "INSERT INTO rollup_hours (bucket, reports, occurrences) VALUES ", columns: 3, buckets,
                conflict: " ON CONFLICT (bucket) DO UPDATE SET reports = rollup_hours.reports + excluded.reports, occurrences = rollup_hours.occurrences + excluded.occurrences")
            for (table, key, newest) in [("rollup_hosts", "host", self.hosts), ("rollup_sources", "source_hash", self.sources)] {
                var rows: [SQLValue] = []
                for (name, time) in newest.sorted(by: { $0.key < $1.key }) { rows += [.text(name), .integer(time)] }
                try await ReportStore.insertRows(
                    session, "INSERT INTO \(table) (\(key), last_received_at) VALUES ", columns: 2, rows,
                    conflict: """
                         ON CONFLICT (\(key)) DO UPDATE SET last_received_at = CASE WHEN excluded.last_received_at > \(table).last_received_at \
                        THEN excluded.last_received_at ELSE \(table).last_received_at END
                        """)
            }
        }
    }

    // MARK: Retention

    /// Deletes the reports last seen before `cutoff`, in batches so that ingest is never held up for long.
    ///
    /// - Returns: How many reports were deleted.
    public func deleteReports(lastSeenBefore cutoff: Int64, batch: Int = 5000) async throws -> Int64 {
        var deleted: Int64 = 0
        while true {
            let count = try await self.database.transaction { session -> Int64 in
                let ids = try await session.query("SELECT id FROM reports WHERE last_seen_at < ? ORDER BY id LIMIT ?", [.integer(cutoff), .integer(Int64(batch))])
                    .compactMap { $0.first?.integer }
                guard let first = ids.first, let last = ids.last else { return 0 }
                let range: [SQLValue] = [.integer(first), .integer(last), .integer(cutoff)]
                // What the rollup tables lose with these rows, read before they go.
                let buckets = try await session.query(
                    "SELECT CAST(received_at / 3600000 AS BIGINT), COUNT(*), CAST(SUM(occurrences) AS BIGINT) FROM reports WHERE id >= ? AND id <= ? AND last_seen_at < ? GROUP BY received_at / 3600000",
                    range)
                let hosts = try await session.query("SELECT DISTINCT host FROM reports WHERE id >= ? AND id <= ? AND last_seen_at < ?", range).compactMap { $0.first }
                let sources = try await session.query("SELECT DISTINCT source_hash FROM reports WHERE id >= ? AND id <= ? AND last_seen_at < ?", range).compactMap { $0.first }
                _ = try await session.query(
                    "DELETE FROM report_pins WHERE report_id >= ? AND report_id <= ? AND report_id IN (SELECT id FROM reports WHERE last_seen_at < ?)",
                    [.integer(first), .integer(last), .integer(cutoff)])
                _ = try await session.query("DELETE FROM reports WHERE id >= ? AND id <= ? AND last_seen_at < ?", [.integer(first), .integer(last), .integer(cutoff)])
                for row in buckets where row.count == 3 {
                    guard let bucket = row[0].integer, let reports = row[1].integer, let occurrences = row[2].integer else { continue }
                    _ = try await session.query(
                        "UPDATE rollup_hours SET reports = reports - ?, occurrences = occurrences - ? WHERE bucket = ?", [.integer(reports), .integer(occurrences), .integer(bucket)])
                }
                _ = try await session.query("DELETE FROM rollup_hours WHERE reports <= 0", [])
                let hours = buckets.compactMap { $0.first?.integer }
                if let firstHour = hours.min(), let lastHour = hours.max() {
                    try await HostRollups.recompute(session, hosts: hosts, hours: firstHour, lastHour)
                }
                // The newest received_at of each host and source that lost rows, recomputed from the rows left
                // (through reports_host and reports_source); one with no rows left is no longer counted.
                try await Self.recomputeNewest(in: session, table: "rollup_hosts", key: "host", names: hosts)
                try await Self.recomputeNewest(in: session, table: "rollup_sources", key: "source_hash", names: sources)
                return Int64(ids.count)
            }
            deleted += count
            if count < batch { return deleted }
        }
    }

    // MARK: Reads

    /// Stored reports, their occurrences, distinct hosts and distinct sources among the reports received at or
    /// after `since` (all of them without one), from the rollup tables: whole hours from `rollup_hours`, the
    /// part of an hour before the first whole one from `reports` itself (through the covering index
    /// `reports_received`), and the distinct counts as the hosts and sources whose newest report is that recent.
    public func summary(since: Int64?) async throws -> CollectorSummary {
        // received_at is the collector's own clock (never before 1970), so an earlier `since` asks for everything.
        let from = max(0, since ?? 0)
        let firstWholeHour = from / Self.hour + (from % Self.hour == 0 ? 0 : 1)
        let (edgeEnd, overflow) = firstWholeHour.multipliedReportingOverflow(by: Self.hour)
        let hours =
            try await self.database.query(
                "SELECT CAST(COALESCE(SUM(reports), 0) AS BIGINT), CAST(COALESCE(SUM(occurrences), 0) AS BIGINT) FROM rollup_hours WHERE bucket >= ?",
                [.integer(firstWholeHour)]
            ).first ?? []
        let edge =
            try await self.database.query(
                "SELECT COUNT(*), CAST(COALESCE(SUM(occurrences), 0) AS BIGINT) FROM reports WHERE received_at >= ? AND received_at < ?",
                [.integer(from), .integer(overflow ? Int64.max : edgeEnd)]
            ).first ?? []
        let hosts = try await self.database.query("SELECT COUNT(*) FROM rollup_hosts WHERE last_received_at >= ?", [.integer(from)]).first ?? []
        let sources = try await self.database.query("SELECT COUNT(*) FROM rollup_sources WHERE last_received_at >= ?", [.integer(from)]).first ?? []
        func value(_ row: SQLRow, _ index: Int) -> Int64 { index < row.count ? (row[index].integer ?? 0) : 0 }
        return CollectorSummary(
            reports: value(hours, 0) + value(edge, 0),
            occurrences: value(hours, 1) + value(edge, 1),
            hosts: value(hosts, 0),
            sources: value(sources, 0)
        )
    }

    /// The summary counted over the stored rows themselves, as it was before the rollup tables: what the tests
    /// compare ``summary(since:)`` with.
    public func summaryFromRows(since: Int64?) async throws -> CollectorSummary {
        let rows = try await self.database.query(
            "SELECT COUNT(*), CAST(COALESCE(SUM(occurrences), 0) AS BIGINT), COUNT(DISTINCT host), COUNT(DISTINCT source_hash) FROM reports WHERE received_at >= ?",
            [.integer(since ?? Int64.min)]
        )
        let row = rows.first ?? []
        func value(_ index: Int) -> Int64 { index < row.count ? (row[index].integer ?? 0) : 0 }
        return CollectorSummary(reports: value(0), occurrences: value(1), hosts: value(2), sources: value(3))
    }

    /// The hosts with the most occurrences first.
    ///
    /// `servedPins` are the keys the server presented: the served chain's, or, for a report without one (TrustKit
    /// sends only `validated-certificate-chain`, which is the server's chain as the device validated it), the
    /// validated chain's.
    public func hosts(since: Int64?, limit: Int, host: String? = nil) async throws -> [HostSummary] {
        try await HostRollups.hosts(self.database, since: since, limit: limit, host: host)
    }

    /// The host list counted over the stored rows themselves, as it was before the host rollups: what the tests
    /// compare ``hosts(since:limit:host:)`` with.
    public func hostsFromRows(since: Int64?, limit: Int, host: String? = nil) async throws -> [HostSummary] {
        let since = since ?? Int64.min
        var filter = "received_at >= ?"
        var binds: [SQLValue] = [.integer(since)]
        if let host {
            filter += " AND host = ?"
            binds.append(.text(host))
        }
        let base = try await self.database.query(
            """
            SELECT host, COUNT(*), CAST(SUM(occurrences) AS BIGINT), CAST(MAX(last_seen_at) AS BIGINT),
                CAST(SUM(CASE WHEN enforced = 1 THEN occurrences ELSE 0 END) AS BIGINT),
                CAST(SUM(CASE WHEN enforced = 0 THEN occurrences ELSE 0 END) AS BIGINT)
            FROM reports WHERE \(filter) GROUP BY host ORDER BY 3 DESC, host LIMIT ?
            """,
            binds + [.integer(Int64(max(1, limit)))]
        )
        var hosts: [HostSummary] = base.compactMap(Self.hostTotals)
        guard !hosts.isEmpty else { return [] }
        let names = hosts.map(\.host)
        let inList = Array(repeating: "?", count: names.count).joined(separator: ", ")
        let hostBinds: [SQLValue] = [.integer(since)] + names.map(SQLValue.text)
        var index: [String: Int] = [:]
        for (position, summary) in hosts.enumerated() { index[summary.host] = position }

        for row in try await self.database.query(
            "SELECT host, result, CAST(SUM(occurrences) AS BIGINT) FROM reports WHERE received_at >= ? AND host IN (\(inList)) GROUP BY host, result",
            hostBinds
        ) {
            guard row.count == 3, let host = row[0].text, let result = row[1].text, let position = index[host] else { continue }
            hosts[position].results[result] = row[2].integer ?? 0
        }
        for row in try await self.database.query(
            """
            SELECT r.host, p.pin, CAST(MIN(p.position) AS BIGINT), COUNT(DISTINCT r.source_hash), CAST(SUM(r.occurrences) AS BIGINT), CAST(MAX(r.id) AS BIGINT)
            FROM report_pins p JOIN reports r ON r.id = p.report_id
            WHERE (p.role = 'served' OR (p.role = 'validated' AND r.served_pins = '')) AND r.received_at >= ? AND r.host IN (\(inList))
            GROUP BY r.host, p.pin ORDER BY 5 DESC, p.pin
            """,
            hostBinds
        ) {
            guard row.count == 6, let host = row[0].text, let pin = row[1].text, let position = index[host] else { continue }
            hosts[position].servedPins.append(
                HostSummary.ServedPin(
                    pin: pin,
                    sources: row[3].integer ?? 0,
                    occurrences: row[4].integer ?? 0,
                    known: false,
                    position: row[2].integer ?? 0,
                    exampleReport: row[5].integer ?? 0
                )
            )
        }
        for row in try await self.database.query(
            """
            SELECT DISTINCT r.host, p.pin FROM report_pins p JOIN reports r ON r.id = p.report_id
            WHERE p.role = 'known' AND r.received_at >= ? AND r.host IN (\(inList)) ORDER BY r.host, p.pin
            """,
            hostBinds
        ) {
            guard row.count == 2, let host = row[0].text, let pin = row[1].text, let position = index[host] else { continue }
            hosts[position].knownPins.append(pin)
        }
        for position in hosts.indices {
            let known = Set(hosts[position].knownPins)
            for pinIndex in hosts[position].servedPins.indices {
                hosts[position].servedPins[pinIndex].known = known.contains(hosts[position].servedPins[pinIndex].pin)
            }
        }
        return hosts
    }

    static let reportColumns = """
        id, received_at, last_seen_at, date_time, host, port, noted_host, result, enforced, app_id, app_version, platform,
        platform_version, library_version, pinset_version, format, served_pins, validated_pins, known_pins, occurrences
        """

    /// A page of reports, newest first, and the cursor of the next page.
    public func reports(_ query: ReportQuery) async throws -> (reports: [StoredReport], next: Int64?) {
        // Each filter: its condition and the value bound to it, nil when the query does not set it.
        let filters: [(condition: String, value: SQLValue?)] = [
            ("host = ?", query.host.map(SQLValue.text)),
            ("result = ?", query.result.map(SQLValue.text)),
            ("app_id = ?", query.app.map(SQLValue.text)),
            ("received_at >= ?", query.since.map(SQLValue.integer)),
            ("id < ?", query.before.map(SQLValue.integer)),
        ]
        let set = filters.filter { $0.value != nil }
        let conditions = set.map(\.condition)
        let binds = set.compactMap(\.value)
        let limit = max(1, query.limit)
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let rows = try await self.database.query(
            "SELECT \(Self.reportColumns) FROM reports \(filter) ORDER BY id DESC LIMIT ?",
            binds + [.integer(Int64(limit + 1))]
        )
        var reports = rows.prefix(limit).compactMap(Self.storedReport)
        let next = rows.count > limit ? reports.last?.id : nil
        if reports.count > limit { reports.removeLast(reports.count - limit) }
        return (reports, next)
    }

    /// The chains of one report (the dashboard's judgement of a new key).
    public func chains(reportID: Int64) async throws -> (served: [ReportedCertificate], validated: [ReportedCertificate])? {
        let rows = try await self.database.query("SELECT served_chain, validated_chain FROM reports WHERE id = ?", [.integer(reportID)])
        guard let row = rows.first, row.count == 2, let served = row[0].text, let validated = row[1].text else { return nil }
        let decoder = JSONDecoder()
        return (
            try decoder.decode([ReportedCertificate].self, from: Data(served.utf8)),
            try decoder.decode([ReportedCertificate].self, from: Data(validated.utf8))
        )
    }

    /// Occurrences per bucket (of `bucket` milliseconds) for one host since `since`, by the hour a row was first
    /// received (a de-duplicated row's later occurrences count in its first bucket).
    public func series(host: String, since: Int64, bucket: Int64) async throws -> [Int64: Int64] {
        let rows = try await self.database.query(
            "SELECT CAST(received_at / ? AS BIGINT), CAST(SUM(occurrences) AS BIGINT) FROM reports WHERE host = ? AND received_at >= ? GROUP BY 1",
            [.integer(bucket), .text(host), .integer(since)]
        )
        var series: [Int64: Int64] = [:]
        for row in rows where row.count == 2 {
            if let key = row[0].integer { series[key] = row[1].integer ?? 0 }
        }
        return series
    }

    /// Apps and versions affected, per host: "app version (platform)" → occurrences.
    public func apps(host: String, since: Int64) async throws -> [(app: String, version: String, platform: String, library: String, occurrences: Int64)] {
        let rows = try await self.database.query(
            """
            SELECT COALESCE(app_id, ''), COALESCE(app_version, ''), COALESCE(platform, ''), COALESCE(library_version, ''), CAST(SUM(occurrences) AS BIGINT)
            FROM reports WHERE host = ? AND received_at >= ? GROUP BY 1, 2, 3, 4 ORDER BY 5 DESC LIMIT 20
            """,
            [.text(host), .integer(since)]
        )
        return rows.compactMap { row in
            guard row.count == 5 else { return nil }
            return (row[0].text ?? "", row[1].text ?? "", row[2].text ?? "", row[3].text ?? "", row[4].integer ?? 0)
        }
    }

    /// The number of stored rows (metrics, tests).
    public func count() async throws -> Int64 {
        try await self.database.query("SELECT COUNT(*) FROM reports", []).first?.first?.integer ?? 0
    }

    static func storedReport(_ row: SQLRow) -> StoredReport? {
        guard row.count == 20, let id = row[0].integer, let host = row[4].text, let result = row[7].text, let format = row[15].text else { return nil }
        func pins(_ value: SQLValue) -> [String] {
            guard let text = value.text, !text.isEmpty else { return [] }
            return text.split(separator: ",").map(String.init)
        }
        return StoredReport(
            id: id,
            receivedAt: Self.time(row[1].integer ?? 0),
            lastSeen: Self.time(row[2].integer ?? 0),
            dateTime: row[3].integer.map(Self.time),
            host: host,
            port: row[5].integer,
            notedHost: row[6].text,
            result: result,
            enforced: row[8].bool,
            appId: row[9].text,
            appVersion: row[10].text,
            platform: row[11].text,
            platformVersion: row[12].text,
            libraryVersion: row[13].text,
            pinsetVersion: row[14].text,
            format: format,
            servedPins: pins(row[16]),
            validatedPins: pins(row[17]),
            knownPins: pins(row[18]),
            occurrences: row[19].integer ?? 0
        )
    }

    /// RFC 3339, UTC, millisecond precision.
    /// `2026-11-28T05:34:02.123Z`: the stored milliseconds as the API, the CSV and the dashboard show them, in the
    /// proleptic Gregorian calendar that `since` is read in (Foundation's ISO 8601 style switched to the Julian
    /// calendar before 1582-10-15, so the dashboard sent back `0001-01-03` for `0001-01-01`, and it truncated
    /// the fraction through a `Double`: 123 ms as `.122`).
    static func time(_ milliseconds: Int64) -> String {
        RFC3339.format(milliseconds: milliseconds)
    }
}

/// A storage problem, in words.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}

extension ReportStore {
    /// A host's totals from a row of (host, reports, occurrences, last seen, enforced, report-only), as both the
    /// host list from the rows and the one from the rollups select them; results and pins are filled in after.
    static func hostTotals(_ row: SQLRow) -> HostSummary? {
        guard row.count == 6, let host = row[0].text else { return nil }
        return HostSummary(
            host: host,
            reports: row[1].integer ?? 0,
            occurrences: row[2].integer ?? 0,
            lastSeen: Self.time(row[3].integer ?? 0),
            results: [:],
            servedPins: [],
            knownPins: [],
            enforced: row[4].integer ?? 0,
            reportOnly: row[5].integer ?? 0
        )
    }
}
