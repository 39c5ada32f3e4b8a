import ArgumentParser
import Foundation
import Logging
import Pinning
import PinningCollector
import X509

/// `pinning-collector` (run as `pinning collector …`, which hands over to this executable installed beside it).
@main
struct CollectorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pinning collector",
        abstract: "Receives pin failure reports (RFC 7469, TrustKit, swift-pinning), stores them in SQLite or PostgreSQL, and shows them on a dashboard.",
        discussion: """
            POST /reports takes one report or an array (no token): 204 stored, 400 malformed (one line saying why), 413 over --max-report-bytes, 429 over --rate (Retry-After), 503 busy or the database failing. Identical reports from one source within --dedup-window seconds are counted on one row.

            With the token (Authorization: Bearer TOKEN, or the cookie the dashboard's sign-in sets): GET / (the dashboard), /api/summary, /api/hosts, /api/reports, /api/reports.csv. Without it: GET /status (200 "status": "ok"; 503 "status": "unavailable" while the database does not answer) and /metrics. With PostgreSQL out of reach a request waits at most 3 s for a database connection, then gets 503.

            Deadlines (as pinning serve): with --tls-identity a connection is closed when its TLS handshake has not completed --handshake-timeout seconds after it was accepted (default 10), and when a request head has not arrived whole --request-head-timeout seconds after the connection was ready or the previous request ended (default 30; 408 Request Timeout when part of it came).

            Start-up line on stdout: `collector listening on http://HOST:PORT (database: sqlite|postgres)`. SIGINT or SIGTERM stop accepting, store every report already accepted, then exit 0.

            Exit status: 0 stopped by a signal, 2 bad input, 3 cannot listen or cannot reach the database.
            """
    )

    @Option(name: .long, help: ArgumentHelp("Where to listen (HOST:PORT; port 0 picks one).", valueName: "host:port"))
    var listen: String = "127.0.0.1:8090"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "sqlite:PATH or postgres://USER[:PASSWORD]@HOST:PORT/DB[?sslmode=require] (or PGPASSWORD). sslmode=require (or verify-full, the same) requires TLS and verifies the server's certificate against the system's trust roots and its name (or IP address), unlike libpq's require; no sslrootcert.",
            valueName: "url"))
    var database: String

    @Option(name: .customLong("token-file"), help: ArgumentHelp("A file whose first line is the API and dashboard token (16 characters or more).", valueName: "file"))
    var tokenFile: String

    @Option(name: .customLong("tls-identity"), help: ArgumentHelp("Serve HTTPS: a PEM file with the certificate chain (leaf first) and its unencrypted private key.", valueName: "file"))
    var tlsIdentity: String?

    @Option(name: .customLong("retention-days"), parsing: .unconditional, help: ArgumentHelp("Delete reports last seen more than this many days ago (1 to 36,500; hourly).", valueName: "days"))
    var retentionDays: String = "90"

    @Option(name: .customLong("max-report-bytes"), parsing: .unconditional, help: ArgumentHelp("The largest POST /reports body (1,024 to 16,777,216).", valueName: "bytes"))
    var maxReportBytes: String = "65536"

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Reports accepted per source a minute (N/min, 1 to 1,000,000).", valueName: "n/min"))
    var rate: String = "600/min"

    @Option(name: .customLong("dedup-window"), parsing: .unconditional, help: ArgumentHelp("Identical reports within this many seconds share a row (1 to 2,592,000).", valueName: "seconds"))
    var dedupWindow: String = "86400"

    @Option(name: .long, help: ArgumentHelp("CAs the team knows (PEM): a new key chaining to one is shown as a rotation.", valueName: "file"))
    var anchors: String?

    @Option(
        name: .customLong("commit-batch"), parsing: .unconditional,
        help: ArgumentHelp("The most reports stored in one transaction, gathered from the requests waiting (1 to 10,000; 1 commits each request alone).", valueName: "reports"))
    var commitBatch: String = "512"

    @Option(
        name: .customLong("writer-transactions"), parsing: .unconditional,
        help: ArgumentHelp(
            "PostgreSQL: the ingest writer's transactions in flight at once (1 to 8; SQLite has one writer and takes only 1). The connection pool is this plus 7, so reads (API, dashboard, retention) never wait behind the writers.",
            valueName: "n"))
    var writerTransactions: String = "1"

    @Option(
        name: .customLong("handshake-timeout"), parsing: .unconditional,
        help: ArgumentHelp(
            "With --tls-identity: close a connection whose TLS handshake has not completed this long after it was accepted (0.001 to 604,800; default 10).",
            valueName: "seconds"))
    var handshakeTimeout: String = "10"

    @Option(
        name: .customLong("request-head-timeout"), parsing: .unconditional,
        help: ArgumentHelp(
            "Close a connection whose request head has not arrived whole this long after it was ready or the previous request ended (0.001 to 604,800; default 30); 408 when part of it came.",
            valueName: "seconds"))
    var requestHeadTimeout: String = "30"

    // What --verbose adds is the info level: each retention run and what it deleted. It promised a line per request,
    // which the collector never wrote; such a line would carry the request's path, which is the sender's text, so
    // it would need the escaping the dashboard uses (VisibleText) before it could be added.
    @Flag(name: .long, help: "Log at the info level on stderr: each retention run and what it deleted, besides warnings and errors.")
    var verbose = false

    static func main() async {
        // The bound on waiting for a FIFO (--token-file, --anchors, --tls-identity), read here once: the core reads no environment.
        BoundedFileReader.setWaitSeconds(fromVariable: ProcessInfo.processInfo.environment[BoundedFileReader.waitVariable])
        // `pinning-collector bench …` (what `pinning bench collector` runs): the benchmark, not the server.
        if CommandLine.arguments.dropFirst().first == "bench" {
            let arguments = Array(CommandLine.arguments.dropFirst(2))
            do {
                let bench = try CollectorBench.parse(arguments)
                try await bench.run()
                BenchCleanup.shared.holdIfInterrupted()
                Foundation.exit(0)
            } catch let failure as BenchFailure {
                BenchCleanup.shared.holdIfInterrupted()
                // One line in words; the library's own text only with --verbose (NU3).
                var text = "pinning bench collector: \(failure.words)\n"
                if arguments.contains("--verbose"), let detail = failure.detail {
                    text += "pinning bench collector: detail: \(VisibleText.escaped(detail, limit: 2000))\n"
                }
                FileHandle.standardError.write(Data(text.utf8))
                Foundation.exit(2)
            } catch {
                BenchCleanup.shared.holdIfInterrupted()
                if exitCode(for: error) == .success { CollectorBench.exit(withError: error) }
                FileHandle.standardError.write(Data(("pinning bench collector: " + CollectorBench.fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
        }
        let command: CollectorCommand
        do {
            let parsed = try parseAsRoot()
            guard let collector = parsed as? CollectorCommand else {
                // `--help` and friends parse to ArgumentParser's own commands, which print and return.
                var other = parsed
                try other.run()
                Foundation.exit(0)
            }
            command = collector
        } catch {
            if exitCode(for: error) == .success { exit(withError: error) }
            // ArgumentParser's own words (the option, its help line, the usage), as every `pinning` command
            // prints them; exit 2 like them, not ArgumentParser's 64.
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
            Foundation.exit(2)
        }
        do {
            try await command.start()
        } catch let error as CollectorOptionError {
            Self.refuse(error.message)
        } catch let error as Collector.StartError {
            FileHandle.standardError.write(Data("pinning collector: \(error.description)\n".utf8))
            Foundation.exit(error.exitStatus)
        } catch {
            FileHandle.standardError.write(Data("pinning collector: \(error)\n".utf8))
            Foundation.exit(3)
        }
    }

    static func refuse(_ message: String) -> Never {
        FileHandle.standardError.write(Data("pinning collector: \(message)\n".utf8))
        Foundation.exit(2)
    }

    static func integer(_ text: String, option: String, range: ClosedRange<Int>) throws(CollectorOptionError) -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw CollectorOptionError("\(option) \(text): a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    /// `--handshake-timeout` and `--request-head-timeout`: the range and words of `pinning serve`'s and `proxy`'s.
    static func seconds(_ text: String, option: String) throws(CollectorOptionError) -> Double {
        let accepted = "use 0.001 to 604,800 seconds"
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)) else { throw CollectorOptionError("\(option) \(text): not a number; \(accepted)") }
        guard value.isFinite else { throw CollectorOptionError("\(option) \(text): not a finite number; \(accepted)") }
        guard (0.001...604_800).contains(value) else { throw CollectorOptionError("\(option) \(text): out of range; \(accepted)") }
        return value
    }

    func start() async throws {
        let listen = try ListenAddress.parse(self.listen)
        let database = try DatabaseURL.parse(self.database)
        var settings = CollectorSettings(token: try TokenFile.read(self.tokenFile))
        settings.retentionDays = try Self.integer(self.retentionDays, option: "--retention-days", range: 1...36_500)
        settings.maxReportBytes = try Self.integer(self.maxReportBytes, option: "--max-report-bytes", range: 1024...16_777_216)
        settings.ratePerMinute = try RateOption.parse(self.rate).perMinute
        settings.deduplicationSeconds = try Self.integer(self.dedupWindow, option: "--dedup-window", range: 1...2_592_000)
        settings.commitBatch = try Self.integer(self.commitBatch, option: "--commit-batch", range: 1...10_000)
        settings.writerTransactions = try Self.integer(self.writerTransactions, option: "--writer-transactions", range: 1...8)
        settings.handshakeTimeout = try Self.seconds(self.handshakeTimeout, option: "--handshake-timeout")
        settings.requestHeadTimeout = try Self.seconds(self.requestHeadTimeout, option: "--request-head-timeout")
        // SQLite has one writer whatever is asked; a larger number there would be ignored without a word.
        if case .sqlite = database, settings.writerTransactions != 1 {
            throw CollectorOptionError("--writer-transactions \(self.writerTransactions): SQLite has one writer; the option is for PostgreSQL")
        }
        // HTTPS: the dashboard's cookie is then Secure.
        settings.secure = self.tlsIdentity != nil
        var anchors: [Certificate] = []
        if let path = self.anchors {
            do throws(CertificateLoadingError) {
                anchors = try CertificateLoader.certificates(fromFile: path)
            } catch {
                throw CollectorOptionError("--anchors \(path): \(error.problem)")
            }
        }
        // Written by swift-log's StreamLogHandler on standard error, as before; DeferredLogHandler only spares
        // every request the formatting of its logger's metadata for messages that are not written.
        var logger = Logger(label: "pinning-collector") { DeferredLogHandler(label: $0) }
        logger.logLevel = self.verbose ? .info : .warning
        var collector = Collector(listen: listen, database: database, settings: settings, logger: logger)
        collector.anchors = anchors
        collector.tlsIdentity = self.tlsIdentity
        try await collector.run { line, _ in
            FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
    }
}
