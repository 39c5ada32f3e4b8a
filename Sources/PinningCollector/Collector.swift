import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
public import Logging
import NIOCore
import NIOSSL
import PinningNIO
import Prometheus
import SQLiteNIO
import ServiceLifecycle
public import UnixSignals
public import X509

/// Starts and runs a collector: opens the database and applies the migrations, then serves until a signal (or
/// the task's cancellation) and stops gracefully: the server first (no new request; requests in flight finish),
/// then retention, then the writer, which stores every report already accepted, then the database.
public struct Collector: Sendable {
    /// Why the collector did not start, with the exit status the command line gives it.
    public struct StartError: Error, CustomStringConvertible, Sendable {
        public var description: String
        /// 2 bad input (an option, a file, a database that is not ours), 3 cannot listen or cannot reach the
        /// database.
        public var exitStatus: Int32
    }

    public var listen: ListenAddress
    public var database: DatabaseURL
    public var settings: CollectorSettings
    public var anchors: [Certificate] = []
    /// `--tls-identity`: a PEM file holding the certificate chain (leaf first) and its unencrypted private key;
    /// nil serves plain HTTP.
    public var tlsIdentity: String?
    public var logger: Logger

    public init(listen: ListenAddress, database: DatabaseURL, settings: CollectorSettings, logger: Logger) {
        self.listen = listen
        self.database = database
        self.settings = settings
        self.logger = logger
    }

    /// Runs until one of `signals` (graceful) or cancellation.
    ///
    /// - Parameter started: Called once with the start-up line (`collector listening on http://HOST:PORT
    ///   (database: sqlite)`) and the bound port.
    public func run(signals: [UnixSignal] = [.sigterm, .sigint], started: @escaping @Sendable (String, Int) -> Void) async throws {
        let metrics = CollectorMetrics()
        let server = try self.serverBuilder()
        switch self.database {
        case .sqlite(let path):
            let database: SQLiteReportDatabase
            do {
                database = try await SQLiteReportDatabase(path: path, logger: self.logger)
            } catch let error as SQLiteReportDatabase.OpenError {
                // A directory, or a folder that is missing: said as it is, since SQLite never tried to open it.
                throw StartError(description: "--database sqlite:\(path): \(error.description)", exitStatus: 2)
            } catch {
                // SQLite's own message ("file is not a database"), without SQLiteNIO's enum case before it.
                let reason = (error as? SQLiteError)?.message ?? Self.words(error)
                throw StartError(description: "--database sqlite:\(path): cannot open the file (\(reason))", exitStatus: 2)
            }
            do {
                try await self.serve(database: database, metrics: metrics, server: server, signals: signals, started: started)
            } catch {
                await database.close()
                throw error
            }
            await database.close()
        case .postgres(let url):
            if let problem = await PostgresStartupCheck.problem(connectingTo: url, logger: self.logger) {
                throw StartError(description: "--database: \(problem)", exitStatus: 3)
            }
            let database = PostgresReportDatabase(
                url: url, writerTransactions: self.settings.writerTransactions, connectionWait: self.settings.databaseConnectionWait, logger: self.logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await database.run() }
                do {
                    try await self.serve(database: database, metrics: metrics, server: server, signals: signals, started: started)
                } catch {
                    group.cancelAll()
                    throw error
                }
                group.cancelAll()
            }
        }
    }

    /// Serves on a database the caller opened, runs (a PostgreSQL pool) and closes: the tests put a database that
    /// fails or holds its transactions under the routes this way. Otherwise as ``run(signals:started:)``.
    package func run(on database: any SQLDatabase, signals: [UnixSignal] = [], started: @escaping @Sendable (String, Int) -> Void) async throws {
        try await self.serve(database: database, metrics: CollectorMetrics(), server: try self.serverBuilder(), signals: signals, started: started)
    }

    /// Plain HTTP/1.1, or HTTPS with `--tls-identity` (its chain and key read and checked before anything else).
    ///
    /// The file is read by PinningNIO's identity loader, the one every client and server of the product uses: the
    /// same file limits, PEM rules and key-to-leaf check (BoringSSL's `X509_check_private_key`), and its words.
    /// Hummingbird would make the TLS context only when the server starts, where a key that is not the leaf's
    /// failed as "cannot listen" (exit 3); the check here refuses the file first, naming the option (exit 2). It
    /// is not made by building an `NIOSSLContext` and catching its refusal: swift-nio-ssl leaks the SSL_CTX when
    /// that initialiser throws (the suite's AddressSanitizer pass reported it; see `TLSIdentity.key(_:matches:)`).
    private func serverBuilder() throws -> HTTPServerBuilder {
        let requestHead = TimeAmount.nanoseconds(Int64(self.settings.requestHeadTimeout * 1e9))
        let handshake = TimeAmount.nanoseconds(Int64(self.settings.handshakeTimeout * 1e9))
        let tls = self.tlsIdentity != nil
        // HTTP/1.1 with the deadlines serve and proxy have (``DeadlineChannel``).
        let http1 = HTTPServerBuilder { responder in
            DeadlineChannel(base: HTTP1Channel(responder: responder), handshakeTimeout: tls ? handshake : nil, requestHeadTimeout: requestHead)
        }
        guard let path = self.tlsIdentity else { return http1 }
        let identity: TLSIdentity
        do {
            // One file holds both: the chain's CERTIFICATE blocks and the key's PRIVATE KEY block. Read once, and
            // the same bytes give both: a second read of a pipe or `<(…)` finds it empty, and a regular file
            // replaced between two reads would pair one version's chain with another's key.
            let bytes = try TLSIdentity.read(path)
            identity = try TLSIdentity.pem(certificateChain: bytes, privateKey: bytes, certificateOrigin: path, keyOrigin: path)
        } catch {
            if error.code == .noCertificateMatchingKey {
                throw StartError(description: "--tls-identity \(path): the private key is not the key of the first certificate (the leaf)", exitStatus: 2)
            }
            // The collector gives no passphrase (it has no option for one), so a passphrase failure can only be an
            // encrypted key: the loader's words ("no passphrase was given") would send the user looking for one.
            if error.code == .wrongPassphrase {
                throw StartError(
                    description: "--tls-identity \(path): the private key is encrypted; the collector needs an unencrypted key (it has no passphrase option)",
                    exitStatus: 2)
            }
            throw StartError(description: "--tls-identity \(path): \(error.problem)", exitStatus: 2)
        }
        let configuration = TLSConfiguration.makeServerConfiguration(certificateChain: identity.certificateSources, privateKey: identity.privateKeySource)
        do {
            return try .tls(http1, tlsConfiguration: configuration)
        } catch {
            throw StartError(description: "--tls-identity \(path): the certificate and key do not make a TLS server (\(Self.words(error)))", exitStatus: 2)
        }
    }

    private func serve(database: any SQLDatabase, metrics: CollectorMetrics, server: HTTPServerBuilder, signals: [UnixSignal], started: @escaping @Sendable (String, Int) -> Void) async throws {
        let store = ReportStore(database: database, deduplicationWindowMilliseconds: Int64(self.settings.deduplicationSeconds) * 1000)
        let salt: [UInt8]
        do {
            try await Self.withTimeout(seconds: 60, what: "the database") {
                try await store.migrate(now: Self.milliseconds(Date()))
            }
            salt = try await store.sourceSalt()
        } catch let error as StoreError {
            throw StartError(description: "--database: \(error.description)", exitStatus: 2)
        } catch {
            throw StartError(description: "--database: cannot prepare the \(database.kind.rawValue) database: \(Self.words(error))", exitStatus: 3)
        }
        let writer = IngestWriter(
            store: store, metrics: metrics, logger: self.logger, batchSize: self.settings.commitBatch, concurrentTransactions: self.settings.writerTransactions)
        let retention = RetentionService(writer: writer, days: self.settings.retentionDays, metrics: metrics, logger: self.logger)
        var settings = self.settings
        // Over HTTPS the dashboard's cookie is Secure.
        settings.secure = settings.secure || self.tlsIdentity != nil
        let routes = CollectorRoutes(settings: settings, store: store, writer: writer, metrics: metrics, sourceSalt: salt, anchors: KnownAuthorities(certificates: self.anchors))
        let kind = database.kind.rawValue
        let scheme = self.tlsIdentity == nil ? "http" : "https"
        let app = Application(
            router: routes.router(),
            server: server,
            configuration: .init(address: .hostname(self.listen.host, port: self.listen.port), serverName: nil),
            services: [writer, retention],
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                let host = self.listen.host.contains(":") ? "[\(self.listen.host)]" : self.listen.host
                started("collector listening on \(scheme)://\(host):\(port) (database: \(kind))", port)
            },
            logger: self.logger
        )
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: signals, logger: self.logger))
        do {
            try await group.run()
        } catch {
            let reason = SocketErrorWords.describe(error) ?? Self.words(error)
            throw StartError(description: "--listen \(self.listen.host):\(self.listen.port): \(reason)", exitStatus: 3)
        }
    }

    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// An error in words: NIO's and the drivers' descriptions, without Swift type names.
    static func words(_ error: any Error) -> String {
        let text = String(describing: error)
        return text.count > 300 ? String(text.prefix(300)) + "…" : text
    }

    struct Timeout: Error, CustomStringConvertible {
        var description: String
    }

    static func withTimeout(seconds: Int, what: String, _ body: @escaping @Sendable () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                throw Timeout(description: "\(what) did not answer within \(seconds) s")
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }
}

/// Deletes expired reports at start-up and then hourly, through the writer (never beside it).
struct RetentionService: Service {
    let writer: IngestWriter
    let days: Int
    let metrics: CollectorMetrics
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let cutoff = Collector.milliseconds(Date()) - Int64(self.days) * 86_400_000
                let metrics = self.metrics
                let logger = self.logger
                await self.writer.perform { store in
                    do {
                        let deleted = try await store.deleteReports(lastSeenBefore: cutoff)
                        if deleted > 0 {
                            metrics.retained.increment(by: deleted)
                            logger.info("retention: deleted \(deleted) reports last seen before \(ReportStore.time(cutoff))")
                        }
                    } catch is CancellationError {
                        // The collector is stopping (or never started: a --listen that failed cancels this first
                        // run): not a retention failure, and the reason is said once, by the caller.
                    } catch {
                        if Task.isCancelled { return }
                        logger.error("retention failed (it runs again in an hour): \(error)")
                    }
                }
                do {
                    try await Task.sleep(for: .seconds(3600))
                } catch {
                    return
                }
            }
        }
    }
}
