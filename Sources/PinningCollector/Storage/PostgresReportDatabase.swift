import Foundation
public import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// PostgreSQL through PostgresNIO's connection pool (`PostgresClient`), whose `run()` is a task of the
/// collector's service group.
public final class PostgresReportDatabase: SQLDatabase {
    public var kind: DatabaseKind { .postgres }
    let client: PostgresClient
    private let logger: Logger
    /// The pool's size: ``maximumConnections(writerTransactions:)``.
    public let maximumConnections: Int

    /// Connections kept beyond the writer's for everything else (7: the pool of 8 there always was, with one
    /// writer).
    public static let readerConnections = 7

    /// How long a statement waits for a connection from the pool before the database counts as unreachable
    /// (``DatabaseUnavailable``, a `503`). Without a bound, while the server was down, every statement waited for
    /// the pool's connection attempts until its circuit breaker tripped, about a minute: the first POST got its
    /// 503 after 67 s, though the product's own report senders give up after 2 s (`check`) or 5 s (the proxy).
    /// Connections to a server that is up are made in milliseconds; 3 s (the default) leaves room for a slow
    /// network and TLS. On a machine loaded far beyond its cores a first connection can take longer: that
    /// request is then answered 503 (retry) too.
    public let connectionWait: Duration

    /// The pool's size for `writerTransactions` writer transactions in flight: those plus ``readerConnections``.
    public static func maximumConnections(writerTransactions: Int) -> Int {
        max(1, writerTransactions) + Self.readerConnections
    }

    /// A pool for `postgres://USER[:PASSWORD]@HOST:PORT/DB` (the password may instead come from `PGPASSWORD`).
    /// `?sslmode=require` (or `verify-full`) asks for TLS verified against the system's roots, the certificate
    /// naming the host (or, for an IP address, holding it); without it the connection is plain, as for a server
    /// on the loopback or a private network.
    ///
    /// The pool holds `writerTransactions` connections for the ingest writer's transactions in flight
    /// (`--writer-transactions`) and ``readerConnections`` more, so the API, the dashboard, /metrics and retention
    /// always find a connection: with a fixed pool, eight writers held every connection and every read queued
    /// behind their commits.
    public init(url: DatabaseURL.Postgres, writerTransactions: Int = 1, connectionWait: Duration = .seconds(3), logger: Logger) {
        self.connectionWait = connectionWait
        let tls: PostgresClient.Configuration.TLS = url.requireTLS ? .require(.makeClientConfiguration()) : .disable
        var configuration = PostgresClient.Configuration(
            host: url.host,
            port: url.port,
            username: url.user,
            password: url.password,
            database: url.database,
            tls: tls
        )
        self.maximumConnections = Self.maximumConnections(writerTransactions: writerTransactions)
        configuration.options.maximumConnections = self.maximumConnections
        self.client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.logger = logger
    }

    /// Runs the pool until the service group stops it.
    public func run() async {
        await self.client.run()
    }

    public func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        let logger = self.logger
        return try await self.withConnection { connection in
            try await Self.collect(try await connection.query(Self.query(sql, binds), logger: logger))
        }
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        let logger = self.logger
        return try await withoutActuallyEscaping(body) { body in
            try await self.withConnection { connection in
                try await connection.withTransaction(logger: logger) { connection in
                    try await body(Session(connection: connection, logger: logger))
                }
            }
        }
    }

    /// Whether a connection was leased (set inside the pool's closure, read by the wait's timer).
    private final class Leased: Sendable {
        private let flag = Mutex(false)
        func set() { self.flag.withLock { $0 = true } }
        var isSet: Bool { self.flag.withLock { $0 } }
    }

    /// Runs `body` on a connection of the pool, waiting at most ``connectionWait`` for one: past it the lease is
    /// cancelled (the pool withdraws the request) and ``DatabaseUnavailable`` is thrown. A statement that got its
    /// connection in time runs as long as it takes. The pool's and the connection's errors that mean the server
    /// is out of reach become ``DatabaseUnavailable`` too; any other (the server refused the statement) is
    /// thrown as it is.
    private func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let leased = Leased()
        let wait = self.connectionWait
        let client = self.client
        do {
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask {
                    try await client.withConnection { connection in
                        leased.set()
                        return try await body(connection)
                    }
                }
                group.addTask {
                    try await Task.sleep(for: wait)
                    return nil
                }
                defer { group.cancelAll() }
                while let result = try await group.next() {
                    if let value = result { return value }
                    // The wait is over: a statement that has its connection goes on.
                    guard leased.isSet else {
                        throw DatabaseUnavailable("no connection to the database within \(Self.seconds(wait)) (the server is down, unreachable or not answering)")
                    }
                }
                // Not reached: the statement's task returns or throws.
                throw CancellationError()
            }
        } catch let error as DatabaseUnavailable {
            throw error
        } catch  where !leased.isSet {
            // The pool gave no connection (its connection attempts failed until its circuit breaker tripped, or it
            // is shutting down): nothing reached the server, so it is out of reach, whatever the pool's error.
            throw DatabaseUnavailable(
                "no connection to the database could be made (the server is down or unreachable; the collector keeps trying)", detail: String(reflecting: error))
        } catch {
            throw Self.unavailable(error) ?? error
        }
    }

    /// `3 s`.
    private static func seconds(_ duration: Duration) -> String {
        "\(duration.components.seconds) s"
    }

    /// ``DatabaseUnavailable`` for an error on a leased connection that means the server went out of reach (the
    /// connection was lost), with the driver's text as its detail; nil for anything else.
    static func unavailable(_ error: any Error) -> DatabaseUnavailable? {
        if let transaction = error as? PostgresTransactionError {
            for inner in [transaction.beginError, transaction.closureError, transaction.commitError] {
                if let inner, let unavailable = Self.unavailable(inner) { return unavailable }
            }
            return nil
        }
        if let psql = error as? PSQLError {
            switch psql.code {
            case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed:
                return DatabaseUnavailable("the connection to the database was lost", detail: String(reflecting: psql))
            default:
                return nil
            }
        }
        return nil
    }

    public func close() async {
        // The pool stops with its run() task (the service group's graceful shutdown).
    }

    /// Used only inside the transaction's closure, which holds the leased connection.
    private struct Session: SQLSession {
        let connection: PostgresConnection
        let logger: Logger
        func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
            try await PostgresReportDatabase.collect(try await self.connection.query(PostgresReportDatabase.query(sql, binds), logger: self.logger))
        }
    }

    static func query(_ sql: String, _ binds: [SQLValue]) -> PostgresQuery {
        var bindings = PostgresBindings(capacity: binds.count)
        for value in binds {
            switch value {
            case .integer(let number): bindings.append(number)
            case .text(let text): bindings.append(text)
            case .null: bindings.appendNull()
            }
        }
        return PostgresQuery(unsafeSQL: SQLDialect.numberedPlaceholders(sql), binds: bindings)
    }

    static func collect(_ rows: PostgresRowSequence) async throws -> [SQLRow] {
        var result: [SQLRow] = []
        for try await row in rows {
            var values: SQLRow = []
            for cell in row {
                guard cell.bytes != nil else {
                    values.append(.null)
                    continue
                }
                switch cell.dataType {
                case .int8, .int4, .int2:
                    values.append(.integer(try cell.decode(Int64.self)))
                default:
                    values.append(.text(try cell.decode(String.self)))
                }
            }
            result.append(values)
        }
        return result
    }
}
