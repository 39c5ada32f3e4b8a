import Foundation
import GRDB
public import Logging

/// SQLite through GRDB (the system's libsqlite3), as a `DatabasePool`: one writer connection, which only the
/// ingest writer, retention and the migrations use, one at a time, and up to two reader connections for the API
/// and the dashboard. The file is in WAL mode, so readers never wait for the writer.
///
/// The ingest writer's transactions (``transaction(_:then:)``) run whole on the writer connection's own queue:
/// every statement prepared once and kept (GRDB's statement cache), none of them a hop to another thread and
/// back. This process opens the file through this one SQLite library only (SQLite's documentation warns that two
/// copies of the library in one process, each with the file open, can corrupt it: POSIX locks are per process).
public final class SQLiteReportDatabase: SQLDatabase {
    public var kind: DatabaseKind { .sqlite }
    /// Statements of 64, 16, 4 or 1 rows: SQLite has no round trip to save, and with four sizes each of the
    /// ingest path's statements has one of four texts, prepared once and kept. Rows a statement rather than one
    /// statement a row: each execution costs GRDB's own checks and the arguments' conversion besides SQLite's.
    public var statementSizes: [Int] { [64, 16, 4, 1] }
    private let pool: DatabasePool
    /// The transactions made of several accesses to the writer (``transaction(_:)``) hold it from BEGIN to
    /// COMMIT: no other write may run in between.
    private let turns = WriteTurns()

    /// Opens (creating if needed) the database file.
    ///
    /// WAL with `synchronous=NORMAL` (GRDB's pool sets both): COMMIT returns once the transaction's pages are
    /// written to the WAL file (in the kernel's page cache), and the WAL is fsynced at each checkpoint rather than
    /// at each commit. A report answered `204` therefore survives the collector crashing or being killed (SIGKILL
    /// included: the kernel holds what was written), which is the collector's guarantee and what the process
    /// tests check. It does not survive the machine losing power or the kernel crashing before the next
    /// checkpoint: the database then opens as of an earlier commit (SQLite's documentation: durability is lost,
    /// consistency is not). `FULL` fsynced the WAL on every commit, which with one report per POST bounded ingest
    /// by the disk's flush latency.
    public init(path: String, logger: Logger) async throws {
        // A folder that does not exist is refused here, in words, rather than by sqlite3_open_v2 and its vaguer
        // "unable to open database file".
        let folder = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if !folder.isEmpty, !(FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory) && isDirectory.boolValue) {
            throw OpenError(description: "the folder \(folder) does not exist")
        }
        var configuration = Configuration()
        // As with SQLite's own defaults: the schema declares no foreign keys, and double-quoted text is an
        // identifier, never a string (GRDB's default; the statements are shared with PostgreSQL, where it is so).
        configuration.foreignKeysEnabled = false
        // ``transaction(_:)`` opens a transaction in one access to the writer and commits it in a later one.
        configuration.allowsUnsafeTransactions = true
        configuration.busyMode = .timeout(10)
        configuration.maximumReaderCount = 2
        configuration.label = "collector"
        configuration.prepareDatabase { db in
            if db.configuration.readonly {
                // The readers' page cache (64 MiB) and memory-mapped reads (256 MiB): the API's aggregates over
                // a million rows read their covering indexes from memory after the first request.
                try db.execute(sql: "PRAGMA cache_size=-65536")
                try db.execute(sql: "PRAGMA mmap_size=268435456")
            } else {
                // The writer's page cache (64 MiB, against SQLite's default 2 MiB): each stored report inserts
                // into indexes keyed by hashes (reports_identity, reports_source), whose pages are spread over the
                // whole file; with a million rows a small cache rereads them for every batch.
                //
                // Statement journals in memory (`temp_store=MEMORY`): every upsert keeps, until it ends, the
                // pages it changed as they were before it, so that a constraint failure half-way undoes only that
                // statement (SQLite's statement journal). By default that journal spills to a temporary file
                // past 64 KiB; kept in memory, it is bounded by the pages one statement changes. The database
                // file and its WAL are unaffected: durability is as before.
                try db.execute(sql: "PRAGMA cache_size=-65536")
                try db.execute(sql: "PRAGMA temp_store=MEMORY")
            }
        }
        self.pool = try DatabasePool(path: path, configuration: configuration)
    }

    struct OpenError: Error, CustomStringConvertible {
        var description: String
    }

    public func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        try await withCheckedThrowingContinuation { continuation in
            // GRDB's callback form, not its async one: an async access throws when the task that awaits it is
            // cancelled, and a read that started must finish as it did before.
            self.pool.asyncRead { database in
                continuation.resume(with: Result { try Self.run(try database.get(), sql, binds) })
            }
        }
    }

    public func transaction<T: Sendable>(
        _ first: [SQLStatement], then: @escaping @Sendable ([[SQLRow]]) throws -> (statements: [SQLStatement], value: T)
    ) async throws -> T {
        try await self.turns.take {
            try await self.write { db in
                var value: T?
                // Rolled back by GRDB when a statement or `then` throws.
                try db.inTransaction(.immediate) {
                    // Kept prepared: the ingest path's statements have a few texts only (``statementSizes``).
                    let returned = try first.map { try Self.run(db, $0.sql, $0.binds, keep: true) }
                    let second = try then(returned)
                    for statement in second.statements {
                        _ = try Self.run(db, statement.sql, statement.binds, keep: true)
                    }
                    value = second.value
                    return .commit
                }
                guard let value else { throw StoreError("the transaction committed without its value") }
                return value
            }
        }
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        try await self.turns.take {
            try await self.write { db in try db.execute(sql: "BEGIN IMMEDIATE") }
            do {
                let value = try await body(Session(database: self))
                try await self.write { db in try db.execute(sql: "COMMIT") }
                return value
            } catch {
                // The rollback's own failure is secondary: the body's error is the one to report. SQLite may
                // have rolled back already (some errors end the transaction), hence the check.
                try? await self.write { db in
                    if db.isInsideTransaction { try db.execute(sql: "ROLLBACK") }
                }
                throw error
            }
        }
    }

    public func close() async {
        // A failed close leaves nothing to do at shutdown; SQLite's WAL is checkpointed by the next open.
        try? self.pool.close()
    }

    /// One access to the writer connection, on its queue. GRDB's callback form, not its async one: an async
    /// access throws when the task that awaits it is cancelled, and the ingest writer drains its queue after a
    /// cancellation too (every report accepted is stored).
    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            self.pool.asyncWriteWithoutTransaction { db in
                continuation.resume(with: Result { try body(db) })
            }
        }
    }

    private struct Session: SQLSession {
        let database: SQLiteReportDatabase
        func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
            try await self.database.write { db in try SQLiteReportDatabase.run(db, sql, binds) }
        }
    }

    /// Runs one statement; `keep`: prepared once and kept in GRDB's cache (only statements whose texts are few),
    /// otherwise prepared for this use (the reads', retention's and migrations' texts vary with their lists).
    static func run(_ db: Database, _ sql: String, _ binds: [SQLValue], keep: Bool = false) throws -> [SQLRow] {
        let statement = keep ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
        // The existential form of StatementArguments' initializer: its generic one maps the values through a key
        // path, unspecialised across the module boundary, which was a tenth of the collector's CPU.
        let values: [(any DatabaseValueConvertible)?] = binds.map { value in
            switch value {
            case .integer(let number): return number
            case .text(let text): return text
            case .null: return nil
            }
        }
        try statement.setArguments(StatementArguments(values))
        guard statement.columnCount > 0 else {
            try statement.execute()
            return []
        }
        var rows: [SQLRow] = []
        let cursor = try Row.fetchCursor(statement)
        while let row = try cursor.next() {
            var values: SQLRow = []
            values.reserveCapacity(row.count)
            for index in 0..<row.count {
                let value: DatabaseValue = row[index]
                switch value.storage {
                case .int64(let number): values.append(.integer(number))
                case .string(let text): values.append(.text(text))
                case .double(let number): values.append(Int64(exactly: number.rounded()).map(SQLValue.integer) ?? .null)
                case .blob, .null: values.append(.null)
                }
            }
            rows.append(values)
        }
        return rows
    }
}

/// Turns at the writer, first come first served: ``take(_:)`` runs its body once the previous one has ended.
private actor WriteTurns {
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func take<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if self.busy {
            await withCheckedContinuation { self.waiting.append($0) }
        } else {
            self.busy = true
        }
        defer {
            if self.waiting.isEmpty {
                self.busy = false
            } else {
                self.waiting.removeFirst().resume()
            }
        }
        return try await body()
    }
}
