import Foundation
public import Logging
import NIOCore
import NIOPosix
import Pinning
import SQLiteNIO

/// SQLite through SQLiteNIO (its own SQLite amalgamation: nothing to install). Two connections: one writer, which
/// only the ingest writer and retention use, one at a time (``IngestWriter`` serialises them), and one reader for
/// the API and the dashboard. The file is in WAL mode, so readers never wait for the writer.
public final class SQLiteReportDatabase: SQLDatabase {
    public var kind: DatabaseKind { .sqlite }
    private let writer: SQLiteConnection
    private let reader: SQLiteConnection
    /// Where SQLite's blocking calls run: two threads of this database's own (the writer's and the reader's), not
    /// NIO's process-wide pool, which has one thread per core and serves every other user in the process too.
    /// Queued there behind another database's long statements (in a fresh-clone CI run, the suite's 100,000-host
    /// collector), even the start-up migration overran its 60 s bound.
    private let threadPool: NIOThreadPool

    /// Opens (creating if needed) the database file.
    ///
    /// WAL with `synchronous=NORMAL`: COMMIT returns once the transaction's pages are written to the WAL file
    /// (in the kernel's page cache), and the WAL is fsynced at each checkpoint rather than at each commit. A report
    /// answered `204` therefore survives the collector crashing or being killed (SIGKILL included: the kernel
    /// holds what was written), which is the collector's guarantee and what the process tests check. It does not
    /// survive the machine losing power or the kernel crashing before the next checkpoint: the database then opens
    /// as of an earlier commit (SQLite's documentation: durability is lost, consistency is not). `FULL` fsynced
    /// the WAL on every commit, which with one report per POST bounded ingest by the disk's flush latency.
    public init(path: String, logger: Logger) async throws {
        // A directory, or a folder that does not exist, is refused here, in words, rather than by sqlite3_open_v2:
        // besides its vaguer message ("unable to open database file", and SQLiteNIO's "Failed to open to SQLite
        // database at …" for a directory), SQLiteNIO 1.13.2 does not close the handle SQLite allocates for a
        // failed open (SQLiteConnection.openInternal), which LeakSanitizer reports.
        if let problem = Self.problem(withPath: path) {
            throw OpenError(description: problem)
        }
        let threadPool = NIOThreadPool(numberOfThreads: 2)
        threadPool.start()
        self.threadPool = threadPool
        do {
            self.writer = try await SQLiteConnection.open(storage: .file(path: path), threadPool: threadPool, logger: logger, on: MultiThreadedEventLoopGroup.singleton.any())
        } catch {
            threadPool.shutdownGracefully { _ in }
            throw error
        }
        do {
            // The writer's page cache (64 MiB, against SQLite's default 2 MiB): each stored report inserts into
            // indexes keyed by hashes (reports_identity, reports_source), whose pages are spread over the whole
            // file; with a million rows a small cache rereads them for every batch.
            //
            // Statement journals in memory (`temp_store=MEMORY`): every multi-row upsert keeps, until it ends, the
            // pages it changed as they were before it, so that a constraint failure half-way undoes only that
            // statement (SQLite's statement journal). By default that journal spills to a temporary file past
            // 64 KiB, which a batch of even a dozen reports passes (each report touches index pages spread over
            // the file): a write system call per page, about 4% of the collector's CPU with one report per POST.
            // Kept in memory, it is bounded by the pages one statement changes (a batch is at most
            // `--commit-batch` reports). The database file and its WAL are unaffected: durability is as before.
            let pragmas = ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA busy_timeout=10000", "PRAGMA cache_size=-65536", "PRAGMA temp_store=MEMORY"]
            for pragma in pragmas {
                _ = try await self.writer.query(pragma, [])
            }
            self.reader = try await SQLiteConnection.open(storage: .file(path: path), threadPool: threadPool, logger: logger, on: MultiThreadedEventLoopGroup.singleton.any())
            // The reader's page cache (64 MiB) and memory-mapped reads (256 MiB): the API's aggregates over a
            // million rows read their covering indexes from memory after the first request.
            for pragma in ["PRAGMA busy_timeout=10000", "PRAGMA cache_size=-65536", "PRAGMA mmap_size=268435456"] {
                _ = try await self.reader.query(pragma, [])
            }
        } catch {
            try? await self.writer.close()
            threadPool.shutdownGracefully { _ in }
            throw error
        }
    }

    deinit {
        // NIOThreadPool must be shut down before it goes; a second shutdown (after close()) does nothing.
        self.threadPool.shutdownGracefully { _ in }
    }

    /// A path the collector refuses before SQLite opens it, in words: `--database sqlite:PATH`'s fault.
    package struct OpenError: Error, CustomStringConvertible {
        package var description: String
    }

    /// Why `path` cannot be the database file, in words, or nil when SQLite may open (or create) it: a path ending
    /// in `/` or naming a directory, or a file whose folder does not exist or is not a folder.
    ///
    /// The folder is the text before the last `/`, found here by hand: Foundation's
    /// `NSString.deletingLastPathComponent` stops the process (an illegal instruction, SIGILL) when the path is one
    /// character, with or without slashes after it (`x`, `d/`), in the swift-corelibs-foundation of Swift 6.3.
    /// No `/` is a file in the current directory.
    package static func problem(withPath path: String) -> String? {
        if path.hasSuffix("/") { return "the path ends in /, so it names a directory, not a file" }
        if case .success(let status) = BoundedFileReader.status(atPath: path, followingLinks: true) {
            // Anything else that is there (a file, a link to one, a device) is SQLite's to judge.
            return status.isDirectory ? "the path is a directory, not a file" : nil
        }
        // Nothing there (or nothing stat(2) may look at): the file would be created, so its folder must be one.
        guard let slash = path.lastIndex(of: "/") else { return nil }
        let folder = slash == path.startIndex ? "/" : String(path[..<slash])
        switch BoundedFileReader.status(atPath: folder, followingLinks: true) {
        case .success(let status):
            return status.isDirectory ? nil : "\(folder) is not a folder"
        case .failure(let error) where error.code == ENOENT:
            return "the folder \(folder) does not exist"
        case .failure:
            // EACCES and the like: SQLite's open says it.
            return nil
        }
    }

    public func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        try await Self.run(self.reader, sql, binds)
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        let session = Session(connection: self.writer)
        _ = try await self.writer.query("BEGIN IMMEDIATE", [])
        do {
            let value = try await body(session)
            _ = try await self.writer.query("COMMIT", [])
            return value
        } catch {
            // The rollback's own failure is secondary: the body's error is the one to report.
            _ = try? await self.writer.query("ROLLBACK", [])
            throw error
        }
    }

    public func close() async {
        // In a task of its own: closing happens on the way out of a cancelled task too (the collector stopped by
        // cancellation), and SQLiteNIO's close must still run. A failed close leaves nothing to do at shutdown;
        // SQLite's WAL is checkpointed by the next open.
        let reader = self.reader
        let writer = self.writer
        let threadPool = self.threadPool
        await Task {
            try? await reader.close()
            try? await writer.close()
            // Only once both connections are closed: their close runs on this pool.
            threadPool.shutdownGracefully { _ in }
        }.value
    }

    private struct Session: SQLSession {
        let connection: SQLiteConnection
        func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
            try await SQLiteReportDatabase.run(self.connection, sql, binds)
        }
    }

    static func run(_ connection: SQLiteConnection, _ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        let data: [SQLiteData] = binds.map { value in
            switch value {
            case .integer(let number): return .integer(SQLiteInt64(number))
            case .text(let text): return .text(text)
            case .null: return .null
            }
        }
        let rows = try await connection.query(sql, data)
        return rows.map { row in
            row.columns.map { column in
                switch column.data {
                case .integer(let number): return .integer(Int64(number))
                case .text(let text): return .text(text)
                case .float(let number): return Int64(exactly: number.rounded()).map(SQLValue.integer) ?? .null
                case .blob, .null: return .null
                }
            }
        }
    }
}
