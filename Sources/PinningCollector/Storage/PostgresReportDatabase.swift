import Foundation
public import Logging
import NIOCore
import NIOSSL
import PostgresNIO

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

    /// The pool's size for `writerTransactions` writer transactions in flight: those plus ``readerConnections``.
    public static func maximumConnections(writerTransactions: Int) -> Int {
        max(1, writerTransactions) + Self.readerConnections
    }

    /// A pool for `postgres://USER[:PASSWORD]@HOST:PORT/DB` (the password may instead come from `PGPASSWORD`).
    /// `?sslmode=require` asks for TLS verified against the system's roots; without it the connection is
    /// plain, as for a server on the loopback or a private network.
    ///
    /// The pool holds `writerTransactions` connections for the ingest writer's transactions in flight
    /// (`--writer-transactions`) and ``readerConnections`` more, so the API, the dashboard, /metrics and retention
    /// always find a connection: with a fixed pool, eight writers held every connection and every read queued
    /// behind their commits.
    public init(url: DatabaseURL.Postgres, writerTransactions: Int = 1, logger: Logger) {
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
        try await Self.collect(try await self.client.query(Self.query(sql, binds), logger: self.logger))
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        try await self.client.withTransaction(logger: self.logger) { connection in
            try await body(Session(connection: connection, logger: self.logger))
        }
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
