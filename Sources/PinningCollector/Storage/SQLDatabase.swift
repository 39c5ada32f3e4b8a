import Foundation

/// A value bound to or read from a query: the collector stores only integers, text and NULL, so one set of
/// statements serves SQLite and PostgreSQL (`BIGINT` and `TEXT` columns in both).
public enum SQLValue: Sendable, Hashable {
    case integer(Int64)
    case text(String)
    case null

    init(_ value: String?) { self = value.map(SQLValue.text) ?? .null }
    init(_ value: Int64?) { self = value.map(SQLValue.integer) ?? .null }
    init(_ value: Int?) { self = value.map { .integer(Int64($0)) } ?? .null }
    init(_ value: Bool?) { self = value.map { .integer($0 ? 1 : 0) } ?? .null }

    var integer: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }
    var text: String? {
        if case .text(let value) = self { return value }
        return nil
    }
    var bool: Bool? { self.integer.map { $0 != 0 } }
}

/// One row, its columns in the order the statement selected them.
public typealias SQLRow = [SQLValue]

/// Which server holds the reports: what `/status` and the start-up line call it.
public enum DatabaseKind: String, Sendable {
    case sqlite
    case postgres
}

/// Runs statements inside one transaction, on one connection.
public protocol SQLSession: Sendable {
    /// Runs one statement. `sql` uses `?` placeholders, bound in order; values are always bound, never spliced
    /// into the text (parameterised queries only: report fields are attacker-controlled).
    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow]
}

/// How `count` rows split into statements of `sizes` rows (see ``SQLDatabase/statementSizes``).
func statementRowCounts(_ count: Int, sizes: [Int]) -> [Int] {
    var counts: [Int] = []
    var left = count
    for (index, size) in sizes.enumerated() where size > 0 {
        let last = index == sizes.count - 1
        while left >= size || (last && left > 0) {
            let rows = min(size, left)
            counts.append(rows)
            left -= rows
        }
    }
    // Sizes that end above 1 leave nothing behind (the last takes the rest); this keeps a malformed list safe.
    if left > 0 { counts.append(left) }
    return counts
}

/// One statement and its binds (`?` placeholders, bound in order).
public struct SQLStatement: Sendable {
    public var sql: String
    public var binds: [SQLValue]
    public init(_ sql: String, _ binds: [SQLValue]) {
        self.sql = sql
        self.binds = binds
    }
}

/// A database the collector can use: SQLite (``SQLiteReportDatabase``) or PostgreSQL (``PostgresReportDatabase``).
public protocol SQLDatabase: SQLSession {
    var kind: DatabaseKind { get }
    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T
    /// Runs one transaction whose statements are known in two rounds: `first`, then the statements `then` makes
    /// from the rows each of the first returned (in order), with the value the transaction returns. Committed
    /// when both rounds ran, rolled back when a statement or `then` throws. The ingest writer's path: SQLite runs
    /// it in one go on its writer connection, without leaving it between statements.
    func transaction<T: Sendable>(
        _ first: [SQLStatement], then: @escaping @Sendable ([[SQLRow]]) throws -> (statements: [SQLStatement], value: T)
    ) async throws -> T
    /// The row counts of the ingest path's multi-row statements, largest first: a batch's rows go into as many
    /// statements of the first size as fit, then of the next, and so on; the last size takes what is left (at
    /// most that many rows a statement). PostgreSQL: `[500]`, few long statements, each a round trip. SQLite:
    /// `[64, 16, 4, 1]`, so every statement has one of four texts per table and is prepared once and kept.
    var statementSizes: [Int] { get }
    /// Closes every connection.
    func close() async
}

extension SQLDatabase {
    public var statementSizes: [Int] { [500] }

    /// The two rounds through ``transaction(_:)``, one statement at a time.
    public func transaction<T: Sendable>(
        _ first: [SQLStatement], then: @escaping @Sendable ([[SQLRow]]) throws -> (statements: [SQLStatement], value: T)
    ) async throws -> T {
        try await self.transaction { session in
            var returned: [[SQLRow]] = []
            returned.reserveCapacity(first.count)
            for statement in first {
                returned.append(try await session.query(statement.sql, statement.binds))
            }
            let (statements, value) = try then(returned)
            for statement in statements {
                _ = try await session.query(statement.sql, statement.binds)
            }
            return value
        }
    }
}

/// The dialect differences, kept to the few lines that need them.
enum SQLDialect {
    /// PostgreSQL numbers its placeholders (`$1`); the statements here are written with `?`. The statements are
    /// this file's own constants (no `?` inside a literal), never text from a report.
    static func numberedPlaceholders(_ sql: String) -> String {
        var result = ""
        result.reserveCapacity(sql.utf8.count + 16)
        var index = 0
        for character in sql {
            if character == "?" {
                index += 1
                result += "$\(index)"
            } else {
                result.append(character)
            }
        }
        return result
    }
}
