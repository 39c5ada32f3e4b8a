import ArgumentParser
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Pinning
import PinningCollector

#if canImport(Glibc)
    import Glibc
#endif

/// `pinning bench collector` (`pinning-collector bench`): ingest throughput into SQLite (and PostgreSQL with
/// `--postgres`), read latency with many stored reports, and behaviour under a flood. The collector runs as a
/// child process (this executable, serving), driven over the loopback by AsyncHTTPClient from this process.
struct CollectorBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pinning bench collector",
        abstract: "Measure the collector: ingest reports/s, dashboard and /api/summary latency with many stored reports, memory and /status under a flood.",
        discussion: "Build with -c release for figures worth quoting. Every phase runs its own collector process on a fresh database in a temporary directory."
    )

    // Every count is range-checked while parsing (BenchNumber), before a directory or a child exists: a value
    // outside its range used to trap mid-run (`--batch 0` divided by zero, `--samples -5` made an invalid range),
    // which skipped every `defer`, left the child collectors running and the temporary directory behind.
    @Option(name: .long, parsing: .unconditional, help: "Reports posted in each ingest phase (1 to 10,000,000).", transform: BenchNumber.integer(1...10_000_000))
    var reports: Int = 50_000

    // At most 256, as `pinning bench handshake` and `bench proxy`: the flood opens twice as many sockets, and 512
    // stays under the common limit of 1,024 open files; 1,000 already failed in the ingest phase there (EMFILE).
    @Option(
        name: .long, parsing: .unconditional, help: "Concurrent connections posting (1 to 256; the flood uses twice as many).", transform: BenchNumber.integer(1...256))
    var concurrency: Int = 32

    @Option(name: .customLong("batch"), parsing: .unconditional, help: "Reports per POST in the batched ingest phase (1 to 10,000).", transform: BenchNumber.integer(1...10_000))
    var batch: Int = 100

    @Option(
        name: .long, parsing: .unconditional, help: "Reports stored before the read-latency phase (written directly through the store; 0 to 10,000,000).",
        transform: BenchNumber.integer(0...10_000_000))
    var stored: Int = 1_000_000

    @Option(name: .long, parsing: .unconditional, help: "Requests per read path in the latency phase (1 to 100,000).", transform: BenchNumber.integer(1...100_000))
    var samples: Int = 50

    @Option(name: .customLong("flood-seconds"), parsing: .unconditional, help: "How long the flood lasts (1 to 3,600).", transform: BenchNumber.integer(1...3600))
    var floodSeconds: Int = 10

    @Option(name: .long, help: "Also measure ingest into this PostgreSQL database (postgres://USER@HOST:PORT/DB); its reports table is emptied first.")
    var postgres: String?

    // The collector's own range for --commit-batch (CollectorCommand.start): refused here, not by a child.
    @Option(
        name: .customLong("commit-batch"), parsing: .unconditional, help: "The collector's --commit-batch in the ingest phases (1 to 10,000; 1 commits each request alone).",
        transform: BenchNumber.integer(1...10_000))
    var commitBatch: Int = 512

    @Option(name: .long, help: "Phases to run: ingest, postgres, read, flood (comma-separated).")
    var phases: String = "ingest,postgres,read,flood"

    @Flag(name: .long, help: "With a failure, also print the library's own error text; show the database driver's log.")
    var verbose = false

    static let token = "bench-token-0123456789abcdef0123"
    static let knownPhases = ["ingest", "postgres", "read", "flood"]

    /// An unknown phase name was ignored, so `--phases ingset` measured nothing and said nothing (NU3). Checked
    /// first in ``run()``, not in ArgumentParser's `validate()`, which would wrap the refusal in its own error.
    func checkOptions() throws(BenchFailure) {
        for name in self.phases.split(separator: ",", omittingEmptySubsequences: false).map(String.init) where !Self.knownPhases.contains(name) {
            throw BenchFailure(
                "--phases: unknown phase \(VisibleText.quoted(name, limit: 40)); use \(Self.knownPhases.joined(separator: ", ")), comma-separated")
        }
        if let postgres = self.postgres {
            let parsed: DatabaseURL
            do {
                parsed = try DatabaseURL.parse(postgres)
            } catch {
                // The collector's words name its own option, --database; here the option is --postgres.
                let words = error.message.hasPrefix("--database: ") ? String(error.message.dropFirst("--database: ".count)) : error.message
                throw BenchFailure("--postgres \(VisibleText.quoted(postgres, limit: 200)): \(words)")
            }
            guard case .postgres = parsed else {
                throw BenchFailure("--postgres \(VisibleText.quoted(postgres, limit: 200)): not a postgres:// URL")
            }
        }
    }

    func run() async throws {
        try self.checkOptions()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pinning-collector-bench-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // SIGINT or SIGTERM mid-run: the children stopped and the directory removed (BenchCleanup), as the
        // `defer` below does on a normal end; a signal skipped it and left both behind (NU3).
        BenchCleanup.shared.begin(directory: directory)
        defer {
            try? FileManager.default.removeItem(atPath: directory)  // best effort: nothing to report it to on the way out
            BenchCleanup.shared.end()
        }
        let tokenFile = directory + "/token"
        try Data(Self.token.utf8).write(to: URL(fileURLWithPath: tokenFile))
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(30), read: .seconds(120))
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(8, self.concurrency * 2)
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        defer { _ = client.shutdown() }
        let phases = Set(self.phases.split(separator: ",").map(String.init))
        print("pinning bench collector: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(self.concurrency) connections")

        try await Self.phase("ingest") {
            guard phases.contains("ingest") else { return }
            let database = "sqlite:" + directory + "/ingest.db"
            try await self.ingest(label: "SQLite, one report per POST", database: database, perRequest: 1, tokenFile: tokenFile, client: client, directory: directory)
            try await self.ingest(
                label: "SQLite, \(self.batch) reports per POST", database: "sqlite:" + directory + "/ingest-batch.db", perRequest: self.batch, tokenFile: tokenFile, client: client,
                directory: directory)
        }
        try await Self.phase("postgres") {
            guard phases.contains("postgres"), let postgres = self.postgres else { return }
            try await self.ingest(label: "PostgreSQL, one report per POST", database: postgres, perRequest: 1, tokenFile: tokenFile, client: client, directory: directory, emptyFirst: true)
            try await self.ingest(
                label: "PostgreSQL, \(self.batch) reports per POST", database: postgres, perRequest: self.batch, tokenFile: tokenFile, client: client, directory: directory, emptyFirst: true)
        }
        try await Self.phase("read") {
            guard phases.contains("read") else { return }
            try await self.read(tokenFile: tokenFile, client: client, directory: directory)
        }
        try await Self.phase("flood") {
            guard phases.contains("flood") else { return }
            try await self.flood(tokenFile: tokenFile, client: client, directory: directory)
        }
    }

    /// Runs one phase; a failure that is not already a ``BenchFailure`` (AsyncHTTPClient's, PostgresNIO's, a file
    /// error) becomes one line in words naming the phase, the library's text kept for `--verbose`.
    static func phase(_ name: String, _ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let failure as BenchFailure {
            throw failure
        } catch {
            throw BenchFailure("the \(name) phase failed: \(Self.words(error))", detail: String(describing: error))
        }
    }

    /// What went wrong, without a library's type names.
    static func words(_ error: any Error) -> String {
        switch error {
        case is CancellationError: return "it was cancelled"
        case let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout:
            return "the child collector did not answer in time"
        case is HTTPClientError: return "a request to the child collector failed"
        case is CocoaError: return "a file could not be read or written"
        default: return "an unexpected error (--verbose shows it)"
        }
    }

    // MARK: Phases

    static func body(_ index: Int, count: Int) -> ByteBuffer {
        // Distinct reports (no two identical, so each is a row): 2,000 hosts, varying app versions and results.
        func one(_ index: Int) -> String {
            let result = ["pinMismatch", "pinMismatch", "pinMismatch", "hostnameMismatch", "noPathToAnchor"][index % 5]
            return """
                {"hostname":"h\(index % 2000).bench.test","port":443,"noted-hostname":"bench.test","validation-result":"\(result)","app-bundle-id":"com.example.app","app-version":"\(index)","date-time":"2026-11-26T00:00:00Z","known-pins":["pin-sha256=\\"d6qzRu9zOECb90Uez27xWltNsj0e1Md7GkYYkVoZWmM=\\""]}
                """
        }
        if count == 1 { return ByteBuffer(string: one(index)) }
        return ByteBuffer(string: "[" + (0..<count).map { one(index * count + $0) }.joined(separator: ",") + "]")
    }

    func ingest(label: String, database: String, perRequest: Int, tokenFile: String, client: HTTPClient, directory: String, emptyFirst: Bool = false) async throws {
        if emptyFirst, case .postgres(let url) = try DatabaseURL.parse(database) {
            try await Self.emptyPostgres(url, verbose: self.verbose)
        }
        let child = try await ChildCollector.start(
            ["--listen", "127.0.0.1:0", "--database", database, "--token-file", tokenFile, "--rate", "1000000/min", "--commit-batch", String(self.commitBatch)], directory: directory)
        defer { child.stop() }
        let requests = max(1, self.reports / perRequest)
        // Warm-up: connections and the first pages of the database.
        _ = try await Self.post(client: client, port: child.port, count: min(200, requests), concurrency: self.concurrency, offset: 10_000_000, perRequest: perRequest)
        let start = ContinuousClock.now
        let statuses = try await Self.post(client: client, port: child.port, count: requests, concurrency: self.concurrency, offset: 0, perRequest: perRequest)
        let seconds = Self.seconds(ContinuousClock.now - start)
        let accepted = statuses[204, default: 0] * perRequest
        // The writer's transactions, warm-up included: how many requests each commit gathered (group commit).
        let commits = try await Self.metric("collector_ingest_commits_total", client: client, port: child.port)
        let warmUp = min(200, requests)
        print(
            String(
                format: "ingest %@: %d reports in %.2f s = %.0f reports/s (%d requests; answers %@); collector peak RSS %.1f MiB; %.0f commits, %.1f requests each", label, accepted,
                seconds, Double(accepted) / seconds, requests, Self.answers(statuses),
                Double(child.peakResidentBytes()) / 1_048_576, commits, commits > 0 ? Double(requests + warmUp) / commits : 0)
        )
    }

    func read(tokenFile: String, client: HTTPClient, directory: String) async throws {
        let path = directory + "/read.db"
        let seedStart = ContinuousClock.now
        try await Self.seed(path: path, count: self.stored)
        print(String(format: "read: %d reports stored through the store in %.1f s", self.stored, Self.seconds(ContinuousClock.now - seedStart)))
        let child = try await ChildCollector.start(["--listen", "127.0.0.1:0", "--database", "sqlite:" + path, "--token-file", tokenFile], directory: directory)
        defer { child.stop() }
        for path in ["/api/summary", "/", "/api/hosts", "/api/reports"] {
            var latencies: [Double] = []
            for _ in 0..<(self.samples + 3) {
                var request = HTTPClientRequest(url: "http://127.0.0.1:\(child.port)\(path)")
                request.headers.add(name: "Authorization", value: "Bearer \(Self.token)")
                let start = ContinuousClock.now
                let response = try await client.execute(request, timeout: .seconds(120))
                _ = try await response.body.collect(upTo: 64 * 1024 * 1024)
                guard response.status == .ok else { throw BenchFailure("read: the child collector answered GET \(path) with \(response.status)") }
                latencies.append(Self.seconds(ContinuousClock.now - start) * 1000)
            }
            latencies.removeFirst(3)
            latencies.sort()
            print(
                String(
                    format: "read %@ with %d stored: p50 %.1f ms, p95 %.1f ms, max %.1f ms (%d requests, one at a time)", path, self.stored, Self.percentile(latencies, 0.5),
                    Self.percentile(latencies, 0.95),
                    latencies.last ?? 0, latencies.count))
        }
    }

    func flood(tokenFile: String, client: HTTPClient, directory: String) async throws {
        let child = try await ChildCollector.start(["--listen", "127.0.0.1:0", "--database", "sqlite:" + directory + "/flood.db", "--token-file", tokenFile], directory: directory)
        defer { child.stop() }
        let before = child.residentBytes()
        let deadline = ContinuousClock.now + .seconds(self.floodSeconds)
        let port = child.port
        let concurrency = self.concurrency * 2
        let statusLatencies = LatencyBox()
        let statuses = try await withThrowingTaskGroup(of: [Int: Int].self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    var counts: [Int: Int] = [:]
                    var index = worker
                    while ContinuousClock.now < deadline {
                        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/reports")
                        request.method = .POST
                        request.body = .bytes(Self.body(index, count: 1))
                        let code: Int
                        do {
                            code = Int(try await client.execute(request, timeout: .seconds(30)).status.code)
                        } catch {
                            code = 0
                        }
                        counts[code, default: 0] += 1
                        index += concurrency
                    }
                    return counts
                }
            }
            group.addTask {
                while ContinuousClock.now < deadline {
                    let start = ContinuousClock.now
                    let response = try await client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/status"), timeout: .seconds(30))
                    _ = try await response.body.collect(upTo: 4096)
                    statusLatencies.add(Self.seconds(ContinuousClock.now - start) * 1000)
                    try await Task.sleep(for: .milliseconds(100))
                }
                return [:]
            }
            var total: [Int: Int] = [:]
            for try await counts in group { total.merge(counts, uniquingKeysWith: +) }
            return total
        }
        let latencies = statusLatencies.sorted
        print(
            String(
                format: "flood from one source for %d s over %d connections: answers %@; /status p50 %.1f ms, max %.1f ms (%d samples); collector RSS %.1f MiB before, %.1f MiB peak",
                self.floodSeconds, concurrency, Self.answers(statuses), Self.percentile(latencies, 0.5), latencies.last ?? 0,
                latencies.count, Double(before) / 1_048_576, Double(child.peakResidentBytes()) / 1_048_576))
    }

    // MARK: Helpers

    /// One unlabelled sample of the collector's `/metrics` (0 when it is absent).
    static func metric(_ name: String, client: HTTPClient, port: Int) async throws -> Double {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/metrics")
        request.method = .GET
        let response = try await client.execute(request, timeout: .seconds(30))
        let text = String(buffer: try await response.body.collect(upTo: 1 << 20))
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        return 0
    }

    static func post(client: HTTPClient, port: Int, count: Int, concurrency: Int, offset: Int, perRequest: Int) async throws -> [Int: Int] {
        let next = Counter()
        return try await withThrowingTaskGroup(of: [Int: Int].self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var counts: [Int: Int] = [:]
                    while let index = next.take(below: count) {
                        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/reports")
                        request.method = .POST
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.body = .bytes(Self.body(offset + index, count: perRequest))
                        let response = try await client.execute(request, timeout: .seconds(120))
                        counts[Int(response.status.code), default: 0] += 1
                    }
                    return counts
                }
            }
            var total: [Int: Int] = [:]
            for try await counts in group { total.merge(counts, uniquingKeysWith: +) }
            return total
        }
    }

    /// Stores `count` reports through the store (the writer's own path, in batches), spread over the last six
    /// days, 2,000 hosts and 50,000 sources, each with a served chain of two keys.
    static func seed(path: String, count: Int) async throws {
        let database = try await SQLiteReportDatabase(path: path, logger: Logger(label: "bench"))
        let store = ReportStore(database: database, deduplicationWindowMilliseconds: 86_400_000)
        do {
            try await store.migrate(now: 0)
            let parser = ReportParser()
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            var templates: [NormalizedReport] = []
            for index in 0..<50 {
                let body = Self.body(index, count: 1)
                templates.append(try parser.parse(Array(buffer: body))[0])
            }
            var written = 0
            while written < count {
                let size = min(5000, count - written)
                var items: [IngestItem] = []
                items.reserveCapacity(size)
                for offset in 0..<size {
                    let index = written + offset
                    var report = templates[index % templates.count]
                    report.host = "h\(index % 2000).bench.test"
                    report.appVersion = String(index)
                    items.append(IngestItem(report: report, receivedAt: now - Int64(index % 518_400) * 1000, sourceHash: "source-\(index % 50_000)"))
                }
                _ = try await store.ingest(items)
                written += size
            }
        } catch {
            await database.close()
            throw error
        }
        await database.close()
    }

    /// How long the PostgreSQL phase waits for the database before it gives up.
    static let postgresSeconds = 15

    /// Empties the reports table, first checking in one direct connection that the database answers. PostgresNIO's
    /// pool retries a connection that fails for ever, printing each `PSQLError`: an unreachable `--postgres`
    /// hung the bench (NU3). The check says why in words (the collector's own start-up check), and the whole is
    /// bounded by ``postgresSeconds``.
    static func emptyPostgres(_ url: DatabaseURL.Postgres, verbose: Bool) async throws {
        let logger = {
            var logger = Logger(label: "bench")
            logger.logLevel = verbose ? .info : .critical
            return logger
        }()
        let target = "--postgres \(url.host):\(url.port)/\(url.database)"
        let seconds = Self.postgresSeconds
        try await Self.within(seconds: seconds, else: BenchFailure("\(target): the database did not answer within \(seconds) s")) {
            if let problem = await PostgresStartupCheck.problem(connectingTo: url) {
                throw BenchFailure("\(target): \(problem)")
            }
            let database = PostgresReportDatabase(url: url, logger: logger)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await database.run() }
                defer { group.cancelAll() }
                do {
                    try await ReportStore(database: database, deduplicationWindowMilliseconds: 1000).migrate(now: 0)
                    _ = try await database.query("DELETE FROM report_pins", [])
                    _ = try await database.query("DELETE FROM reports", [])
                } catch let error as BenchFailure {
                    throw error
                } catch {
                    throw BenchFailure("\(target): the reports table could not be emptied", detail: String(describing: error))
                }
            }
        }
    }

    /// `body`, or `failure` once `seconds` have passed (`body` is then cancelled, and not waited for: a driver that
    /// ignores cancellation must not hold the bench, which then exits).
    static func within(seconds: Int, else failure: BenchFailure, _ body: @escaping @Sendable () async throws -> Void) async throws {
        let resumed = LockedValueBox(false)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            @Sendable func finish(_ result: Result<Void, any Error>) {
                let first = resumed.withLockedValue { done in
                    defer { done = true }
                    return !done
                }
                if first { continuation.resume(with: result) }
            }
            let work = Task {
                do {
                    try await body()
                    finish(.success(()))
                } catch {
                    finish(.failure(error))
                }
            }
            Task {
                // Cancelled only with the bench itself; either way the bound is over.
                try? await Task.sleep(for: .seconds(seconds))
                work.cancel()
                finish(.failure(failure))
            }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The HTTP statuses answered and how often, `204×500 429×12`, by status (0 for a request that failed).
    static func answers(_ statuses: [Int: Int]) -> String {
        statuses.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " ")
    }

    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)]
    }
}

/// The next index to post, shared by the workers.
struct Counter: Sendable {
    private let next = LockedValueBox(0)
    func take(below limit: Int) -> Int? {
        self.next.withLockedValue { value in
            guard value < limit else { return nil }
            defer { value += 1 }
            return value
        }
    }
}

/// Latencies the workers measured.
struct LatencyBox: Sendable {
    private let values = LockedValueBox<[Double]>([])
    func add(_ value: Double) { self.values.withLockedValue { $0.append(value) } }
    var sorted: [Double] { self.values.withLockedValue { $0.sorted() } }
}

/// This executable, serving, as a child process.
final class ChildCollector: Sendable {
    let process: Process
    let port: Int

    private init(process: Process, port: Int) {
        self.process = process
        self.port = port
    }

    static func start(_ arguments: [String], directory: String) async throws -> ChildCollector {
        let process = Process()
        process.executableURL = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = arguments
        let output = directory + "/collector-\(UUID().uuidString).out"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        BenchCleanup.shared.add(process)
        try? handle.close()  // the child has its own descriptor; ours is not needed either way
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline && process.isRunning {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("collector listening on http://127.0.0.1:") }) {
                let port = Int(line.dropFirst("collector listening on http://127.0.0.1:".count).prefix { $0.isNumber }) ?? 0
                return ChildCollector(process: process, port: port)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""  // the output is only quoted; none is fine
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        BenchCleanup.shared.remove(process)
        // The child's own refusal (one line in words, `pinning collector: …`), not its whole output.
        let reason = text.split(separator: "\n").last(where: { $0.hasPrefix("pinning collector: ") }).map { String($0.dropFirst("pinning collector: ".count)) }
        throw BenchFailure("the child collector did not start: \(reason ?? "no start-up line within 120 s")", detail: text)
    }

    func stop() {
        defer { BenchCleanup.shared.remove(self.process) }
        guard self.process.isRunning else { return }
        self.process.terminate()
        self.process.waitUntilExit()
    }

    /// VmRSS / VmHWM from /proc (Linux); 0 elsewhere.
    func residentBytes() -> Int { self.status("VmRSS:") }
    func peakResidentBytes() -> Int { self.status("VmHWM:") }

    private func status(_ key: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(self.process.processIdentifier)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key) })
        else { return 0 }
        let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return kilobytes * 1024
    }
}

/// The bench's counts, parsed as `pinning`'s numeric options are (its `NumericOption`, which this executable
/// cannot import: both are executables): a whole number in `range`, or a refusal whose words argument-parser
/// prints after the option's name, exit 2 (`CollectorCommand.main`).
enum BenchNumber {
    struct Refusal: Error, CustomStringConvertible {
        var description: String
    }

    static func integer(_ range: ClosedRange<Int>) -> @Sendable (String) throws -> Int {
        { text in
            let accepted = "a whole number from \(Self.format(range.lowerBound)) to \(Self.format(range.upperBound))"
            guard let value = Int(text.trimmingCharacters(in: .whitespaces)) else {
                throw Refusal(description: "not \(accepted)")
            }
            guard range.contains(value) else {
                throw Refusal(description: "out of range; use \(accepted)")
            }
            return value
        }
    }

    /// `10000000` as `10,000,000`, as the help texts write it.
    static func format(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var grouped = ""
        for (offset, digit) in digits.enumerated() {
            if offset > 0, (digits.count - offset) % 3 == 0 { grouped.append(",") }
            grouped.append(digit)
        }
        return value < 0 ? "-" + grouped : grouped
    }
}

/// A failure of the benchmark: one line in words, and the library's own text for `--verbose`.
struct BenchFailure: Error, CustomStringConvertible {
    var words: String
    var detail: String?

    init(_ words: String, detail: String? = nil) {
        self.words = words
        self.detail = detail
    }

    var description: String { self.words }
}

/// What a signal must not leave behind: the child collectors and the temporary directory. SIGINT and SIGTERM
/// are caught while the bench runs; the handler stops the children (SIGTERM, then SIGKILL after 5 s), removes the
/// directory and exits with 128 + the signal's number, as the shell reports a process the signal ended.
final class BenchCleanup: Sendable {
    static let shared = BenchCleanup()

    private struct State {
        var directory: String?
        var children: [Process] = []
        var interrupted = false
        var sources = Sources()
    }

    /// The signal sources, kept alive while the bench runs. Only touched under the lock, and a dispatch source
    /// may be cancelled from any thread.
    private struct Sources: @unchecked Sendable {
        var list: [any DispatchSourceSignal] = []
    }

    private let state = LockedValueBox(State())

    func begin(directory: String) {
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in self.interrupted(by: number) }
            source.resume()
            sources.append(source)
        }
        self.state.withLockedValue {
            $0.directory = directory
            $0.sources = Sources(list: sources)
        }
    }

    func end() {
        let sources = self.state.withLockedValue { state -> [any DispatchSourceSignal] in
            state.directory = nil
            defer { state.sources = Sources() }
            return state.sources.list
        }
        for source in sources { source.cancel() }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }

    func add(_ process: Process) { self.state.withLockedValue { $0.children.append(process) } }
    func remove(_ process: Process) { self.state.withLockedValue { $0.children.removeAll { $0 === process } } }

    /// Called before the bench exits by itself: once a signal has arrived, the handler ends the process (with
    /// 128 + the signal), so the run's own ending, which the stopped children may have caused ("the child
    /// collector did not start"), waits for it rather than exit first with another status.
    func holdIfInterrupted() {
        guard self.state.withLockedValue({ $0.interrupted }) else { return }
        while true { sleep(1) }
    }

    private func interrupted(by number: Int32) {
        let (directory, children) = self.state.withLockedValue { state in
            state.interrupted = true
            return (state.directory, state.children)
        }
        for child in children where child.isRunning { child.terminate() }
        let deadline = Date().addingTimeInterval(5)
        for child in children {
            while child.isRunning && Date() < deadline { usleep(20_000) }
            if child.isRunning { kill(child.processIdentifier, SIGKILL) }
        }
        if let directory {
            try? FileManager.default.removeItem(atPath: directory)  // best effort on the way out; exiting either way
        }
        let name = number == SIGINT ? "SIGINT" : "SIGTERM"
        FileHandle.standardError.write(Data("pinning bench collector: stopped by \(name); the child collectors are stopped and the temporary directory removed\n".utf8))
        Foundation.exit(128 + number)
    }
}
