import Foundation
import Logging
import PinningCollector
import PinningTestSupport
import Testing

/// A real database with a hand on its transactions: it counts them (started and committed), can hold the next
/// one until released, and can refuse the statements that bind a chosen host, or every transaction, as a
/// database error would.
final class WatchedDatabase: SQLDatabase, @unchecked Sendable {
    struct Refused: Error, CustomStringConvertible {
        var description: String { "the test database refused the statement" }
    }

    let inner: any SQLDatabase
    private let lock = NSLock()
    private var holdNext = false
    private var released = false
    private var holding = false
    private var startedCount = 0
    private var committedCount = 0
    private var poison: String?
    private var failing = false

    init(_ inner: any SQLDatabase) { self.inner = inner }

    var kind: DatabaseKind { self.inner.kind }
    var started: Int { self.lock.withLock { self.startedCount } }
    var committed: Int { self.lock.withLock { self.committedCount } }
    var isHolding: Bool { self.lock.withLock { self.holding } }

    /// The next transaction waits, before its first statement, until ``release()``.
    func holdNextTransaction() { self.lock.withLock { (self.holdNext, self.released) = (true, false) } }
    func release() { self.lock.withLock { self.released = true } }
    /// Statements binding this host throw (nil: none do).
    func refuse(host: String?) { self.lock.withLock { self.poison = host } }
    /// Counts from here on (the migrations' transactions are not the writer's).
    func resetCounts() { self.lock.withLock { (self.startedCount, self.committedCount) = (0, 0) } }
    /// Every transaction throws before its first statement.
    func failEveryTransaction(_ fail: Bool) { self.lock.withLock { self.failing = fail } }

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        try await self.inner.query(sql, binds)
    }

    func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        let (hold, fail) = self.lock.withLock {
            self.startedCount += 1
            defer { self.holdNext = false }
            return (self.holdNext, self.failing)
        }
        if hold {
            self.lock.withLock { self.holding = true }
            while !self.lock.withLock({ self.released }) { try await Task.sleep(for: .milliseconds(2)) }
            self.lock.withLock { self.holding = false }
        }
        if fail { throw Refused() }
        let poison = self.lock.withLock { self.poison }
        let value = try await self.inner.transaction { session in try await body(Session(inner: session, poison: poison)) }
        self.lock.withLock { self.committedCount += 1 }
        return value
    }

    func close() async { await self.inner.close() }

    private struct Session: SQLSession {
        let inner: any SQLSession
        let poison: String?
        func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
            if let poison, binds.contains(.text(poison)) { throw Refused() }
            return try await self.inner.query(sql, binds)
        }
    }
}

/// A thread-safe list the concurrent submitters record into.
final class Recorded<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Value] = []
    func add(_ value: Value) { self.lock.withLock { self.values.append(value) } }
    var all: [Value] { self.lock.withLock { self.values } }
}

@Suite("Collector: group commit (one writer, one transaction for the requests waiting, 204 only after it)", .serialized)
struct GroupCommitTests {
    /// A writer on a real SQLite file behind a ``WatchedDatabase``, running until `body` returns.
    static func withWriter(capacity: Int = 20_000, _ body: (WatchedDatabase, IngestWriter, CollectorMetrics) async throws -> Void) async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-collector-group")
        defer { directory.remove() }
        let sqlite = try await SQLiteReportDatabase(path: directory.path("reports.db"), logger: Logger(label: "test"))
        let database = WatchedDatabase(sqlite)
        let store = ReportStore(database: database, deduplicationWindowMilliseconds: 3_600_000)
        try await store.migrate(now: 0)
        database.resetCounts()
        let metrics = CollectorMetrics()
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let writer = IngestWriter(store: store, metrics: metrics, logger: logger, capacity: capacity)
        let running = Task { try await writer.run() }
        do {
            try await body(database, writer, metrics)
        } catch {
            database.release()
            await writer.beginStopping()
            _ = try? await running.value
            await database.close()
            throw error
        }
        await writer.beginStopping()
        try await running.value
        await database.close()
    }

    static func item(_ host: String) throws -> IngestItem {
        try StoreScenarios.item(host, at: 1_795_000_000_000)
    }

    /// One sample of the writer's metrics (`collector_ingest_queue_reports`, …).
    static func metric(_ metrics: CollectorMetrics, _ name: String) -> Double? {
        for line in metrics.render().split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1))
        }
        return nil
    }

    static func integer(_ value: SQLValue) -> Int64? {
        if case .integer(let number) = value { return number }
        return nil
    }

    static func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw CollectorTestError("waited 60 s for \(what)") }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// Whether the row `outcome` names is visible on another connection (the reader): committed.
    static func isCommitted(_ outcome: IngestOutcome?, _ database: WatchedDatabase) async throws -> Bool {
        guard case .stored(let id)? = outcome else { return false }
        return try await database.query("SELECT COUNT(*) FROM reports WHERE id = ?", [.integer(id)]).first?.first.flatMap(Self.integer) == 1
    }

    @Test("20 requests waiting while a transaction runs are stored in one transaction; each returns only after its commit")
    func concurrentRequestsShareOneCommit() async throws {
        try await Self.withWriter { database, writer, metrics in
            database.holdNextTransaction()
            let first = Task { try await writer.submit([try Self.item("first.test")]) }
            try await Self.waitUntil("the first transaction to be held") { database.isHolding }
            // While it is held, 20 requests of one report each arrive.
            let answers = Recorded<(host: String, committedBefore: Int, visible: Bool)>()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        let host = "r\(index).group.test"
                        let outcomes = try await writer.submit([try Self.item(host)])
                        answers.add((host, database.committed, try await Self.isCommitted(outcomes.first, database)))
                    }
                }
                try await Self.waitUntil("21 reports queued") { Self.metric(metrics, "collector_ingest_queue_reports") == 21 }
                #expect(answers.all.isEmpty, "answered before anything committed")
                database.release()
                try await group.waitForAll()
            }
            let firstOutcome = try await first.value
            #expect(try await Self.isCommitted(firstOutcome.first, database))
            // The held transaction, then one for all twenty.
            #expect(database.started == 2)
            #expect(database.committed == 2)
            #expect(Self.metric(metrics, "collector_ingest_commits_total") == 2)
            let all = answers.all
            #expect(all.count == 20)
            for answer in all {
                #expect(answer.committedBefore == 2, "\(answer.host) answered before its commit")
                #expect(answer.visible, "\(answer.host) answered but not visible on another connection")
            }
            #expect(try await database.query("SELECT COUNT(*) FROM reports", []).first?.first.flatMap(Self.integer) == 21)
        }
    }

    @Test("a database error for one request's reports fails that request alone; the others of its batch are stored")
    func oneFailingRequest() async throws {
        try await Self.withWriter { database, writer, metrics in
            database.refuse(host: "poison.group.test")
            database.holdNextTransaction()
            let first = Task { try await writer.submit([try Self.item("first.test")]) }
            try await Self.waitUntil("the first transaction to be held") { database.isHolding }
            let answers = Recorded<(host: String, stored: Bool, error: String?)>()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for host in (0..<10).map({ "r\($0).group.test" }) + ["poison.group.test"] {
                    group.addTask {
                        do {
                            let outcomes = try await writer.submit([try Self.item(host)])
                            answers.add((host, try await Self.isCommitted(outcomes.first, database), nil))
                        } catch {
                            answers.add((host, false, "\(error)"))
                        }
                    }
                }
                try await Self.waitUntil("12 reports queued") { Self.metric(metrics, "collector_ingest_queue_reports") == 12 }
                database.release()
                try await group.waitForAll()
            }
            _ = try await first.value
            let all = answers.all
            #expect(all.count == 11)
            for answer in all {
                if answer.host == "poison.group.test" {
                    #expect(answer.error?.contains("refused the statement") == true, "\(answer)")
                } else {
                    #expect(answer.stored && answer.error == nil, "\(answer)")
                }
            }
            // The held one, the batch of eleven that failed, then each of the eleven alone.
            #expect(database.started == 13)
            #expect(Self.metric(metrics, "collector_storage_failures_total") == 1)
            #expect(try await database.query("SELECT COUNT(*) FROM reports", []).first?.first.flatMap(Self.integer) == 11)
        }
    }

    @Test("a database that fails every transaction answers each waiting request with its error; nothing is stored")
    func everyTransactionFails() async throws {
        try await Self.withWriter { database, writer, metrics in
            database.failEveryTransaction(true)
            let errors = Recorded<String>()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        do {
                            _ = try await writer.submit([try Self.item("r\(index).group.test")])
                            errors.add("stored")
                        } catch is IngestWriter.Refusal {
                            errors.add("refused as busy or stopping")
                        } catch {
                            errors.add("\(error)")
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(errors.all.count == 8)
            #expect(errors.all.allSatisfy { $0.contains("refused the statement") }, "\(errors.all)")
            #expect(Self.metric(metrics, "collector_storage_failures_total") == 8)
            #expect(Self.metric(metrics, "collector_ingest_commits_total") == 0)
            database.failEveryTransaction(false)
            #expect(try await database.query("SELECT COUNT(*) FROM reports", []).first?.first.flatMap(Self.integer) == 0)
        }
    }

    @Test("the queue is bounded: beyond its capacity a request is refused at once as busy, and what was queued is stored")
    func boundedQueue() async throws {
        try await Self.withWriter(capacity: 5) { database, writer, metrics in
            database.holdNextTransaction()
            let first = Task { try await writer.submit([try Self.item("first.test")]) }
            try await Self.waitUntil("the first transaction to be held") { database.isHolding }
            let queued = Task { try await writer.submit([try Self.item("a.group.test"), try Self.item("b.group.test"), try Self.item("c.group.test")]) }
            try await Self.waitUntil("4 reports queued") { Self.metric(metrics, "collector_ingest_queue_reports") == 4 }
            // 4 + 2 > 5: refused without waiting for the held transaction.
            await #expect(throws: IngestWriter.Refusal.busy) { try await writer.submit([try Self.item("d.group.test"), try Self.item("e.group.test")]) }
            database.release()
            #expect(try await first.value.count == 1)
            #expect(try await queued.value.count == 3)
            #expect(try await database.query("SELECT COUNT(*) FROM reports", []).first?.first.flatMap(Self.integer) == 4)
        }
    }

    @Test("over HTTP: concurrent POSTs of one report each are 204 after one commit; a database error answers 503 to the request it concerns, never 500")
    func overHTTP() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-collector-group-http")
        defer { directory.remove() }
        let sqlite = try await SQLiteReportDatabase(path: directory.path("reports.db"), logger: Logger(label: "test"))
        let database = WatchedDatabase(sqlite)
        let harness = try await CollectorHarness(opened: database)
        do {
            database.refuse(host: "poison.group.test")
            let hosts = (0..<12).map { "r\($0).group.test" } + ["poison.group.test"]
            let replies = Recorded<(host: String, status: Int, body: String, retryAfter: String?)>()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for host in hosts {
                    group.addTask {
                        let reply = try await harness.post(try ReportFixtures.json(["hostname": host, "validation-result": "pinMismatch"]))
                        replies.add((host, reply.status, reply.body, reply.header("Retry-After")))
                    }
                }
                try await group.waitForAll()
            }
            for reply in replies.all {
                if reply.host == "poison.group.test" {
                    #expect(reply.status == 503, "\(reply)")
                    #expect(reply.body.contains("could not be stored") && reply.retryAfter != nil, "\(reply)")
                } else {
                    #expect(reply.status == 204, "\(reply)")
                }
            }
            let stored = try await harness.json("/api/reports?limit=100")
            let storedHosts = Set(((stored["reports"] as? [[String: Any]]) ?? []).compactMap { $0["host"] as? String })
            #expect(storedHosts == Set(hosts.dropLast()))

            // Every transaction failing: each POST is 503 (the server's problem), none 500.
            database.failEveryTransaction(true)
            let statuses = Recorded<Int>()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<6 {
                    group.addTask {
                        statuses.add(try await harness.post(try ReportFixtures.json(["hostname": "down\(index).group.test"])).status)
                    }
                }
                try await group.waitForAll()
            }
            #expect(statuses.all == Array(repeating: 503, count: 6))
            database.failEveryTransaction(false)
        } catch {
            await harness.stop()
            await database.close()
            throw error
        }
        await harness.stop()
        await database.close()
    }
}
