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

/// The database could not be reached: no connection within the bound (a server that is down, or one that does
/// not answer), or the connection was lost. Requests answer `503` with one line; `/status` says `unavailable`.
public struct DatabaseUnavailable: Error, CustomStringConvertible, Sendable {
    /// What happened, in words (for the log at warning level).
    public var description: String
    /// The driver's own text, type names and all: logged only at the info level (`--verbose`).
    public var detail: String?

    public init(_ description: String, detail: String? = nil) {
        self.description = description
        self.detail = detail
    }
}

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

/// A database the collector can use: SQLite (``SQLiteReportDatabase``) or PostgreSQL (``PostgresReportDatabase``).
public protocol SQLDatabase: SQLSession {
    var kind: DatabaseKind { get }
    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T
    /// Closes every connection.
    func close() async
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
