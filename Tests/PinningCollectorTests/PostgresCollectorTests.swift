import Foundation
import Logging
import NIOHTTP1
import Pinning
import PinningCollector
import PinningTestSupport
import Testing

@Suite("Collector on a real PostgreSQL server on the loopback", .serialized, .enabled(if: PostgresCluster.available, "needs Debian's postgresql"))
struct PostgresCollectorTests {
    @Test("the same migrations, de-duplication, retention and paging as on SQLite")
    func storeScenarios() async throws {
        let cluster = try await PostgresCluster()
        defer { cluster.stop() }
        let url = try DatabaseURL.parse(cluster.url)
        guard case .postgres(let postgres) = url else {
            Issue.record("parsed as \(url)")
            return
        }
        // A minute for a connection: the full suite's load made a first one take more than the default 3 s.
        let database = PostgresReportDatabase(url: postgres, connectionWait: .seconds(60), logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await database.run() }
            defer { group.cancelAll() }
            try await StoreScenarios.run(database)
        }
    }

    @Test("--writer-transactions 8: the pool keeps connections for reads while eight writer transactions are open")
    func readsBesideEightWriters() async throws {
        let cluster = try await PostgresCluster()
        defer { cluster.stop() }
        guard case .postgres(let postgres) = try DatabaseURL.parse(cluster.url) else {
            Issue.record("not parsed as PostgreSQL")
            return
        }
        let database = PostgresReportDatabase(url: postgres, writerTransactions: 8, connectionWait: .seconds(60), logger: Logger(label: "test"))
        #expect(database.maximumConnections == 8 + PostgresReportDatabase.readerConnections)
        actor Gate {
            var entered = 0
            var isOpen = false
            func enter() { self.entered += 1 }
            func open() { self.isOpen = true }
        }
        let gate = Gate()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await database.run() }
            defer { group.cancelAll() }
            try await withThrowingTaskGroup(of: Void.self) { writers in
                // Eight transactions holding their connections, as eight writer batches waiting on their commits.
                for _ in 0..<8 {
                    writers.addTask {
                        try await database.transaction { session in
                            _ = try await session.query("SELECT 1", [])
                            await gate.enter()
                            while !(await gate.isOpen) { try await Task.sleep(for: .milliseconds(10)) }
                        }
                    }
                }
                var polls = 0
                while await gate.entered < 8 && polls < 12_000 {
                    try await Task.sleep(for: .milliseconds(10))
                    polls += 1
                }
                #expect(await gate.entered == 8, "the eight writer transactions did not all start")
                // A read beside them; the bound only ends a read that would otherwise wait for the writers forever.
                let answered = try await withThrowingTaskGroup(of: Bool.self) { reads in
                    reads.addTask {
                        _ = try await database.query("SELECT 1", [])
                        return true
                    }
                    reads.addTask {
                        try await Task.sleep(for: .seconds(60))
                        return false
                    }
                    let first = try await reads.next() ?? false
                    // The writers go before the read task is awaited: without a connection it waits for theirs.
                    await gate.open()
                    reads.cancelAll()
                    return first
                }
                #expect(answered, "a read waited behind the writer transactions: the pool had no connection for it")
                try await writers.waitForAll()
            }
        }
    }

    @Test("over HTTP: each format stored, SQL metacharacters verbatim, /status says postgres; the reports are there after a restart")
    func http() async throws {
        let cluster = try await PostgresCluster()
        defer { cluster.stop() }
        let fixtures = try ReportFixtures()
        let hostile = "x'); DROP TABLE reports; -- \" ? $1 \\ <b>"
        do {
            let collector = try await CollectorHarness(database: try DatabaseURL.parse(cluster.url))
            #expect(try await collector.post(try ReportFixtures.json(fixtures.trustKit())).status == 204)
            #expect(try await collector.post(try ReportFixtures.json(fixtures.trustKit())).status == 204)
            #expect(try await collector.post(try ReportFixtures.json(fixtures.rfc7469(host: "www.example.test"))).status == 204)
            #expect(try await collector.post(try fixtures.pinning(host: "ours.example.test")).status == 204)
            #expect(try await collector.post(try ReportFixtures.json(["hostname": "hostile.example.test", "app-bundle-id": hostile, "pinset-version": 42])).status == 204)
            #expect(try await collector.post(Data("{\"hostname\":\"a\\u0000b\"}".utf8)).status == 400)
            let status = try await collector.request(.GET, "/status")
            #expect(status.body.contains("\"database\":\"postgres\""))
            await collector.stop()
        }
        // A new collector on the same database: everything answered 204 is there.
        let collector = try await CollectorHarness(database: try DatabaseURL.parse(cluster.url))
        defer { Task { await collector.stop() } }
        let summary = try await collector.json("/api/summary")
        #expect(summary["reports"] as? Int == 4)
        #expect(summary["occurrences"] as? Int == 5)
        #expect(summary["hosts"] as? Int == 4)
        let rows = try #require(try await collector.json("/api/reports?app=\(hostile.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")")["reports"] as? [[String: Any]])
        #expect(rows.first?["host"] as? String == "hostile.example.test")
        #expect(rows.first?["appId"] as? String == hostile)
        #expect(rows.first?["pinsetVersion"] as? String == "42")
        let hosts = try #require(try await collector.json("/api/hosts?limit=10")["hosts"] as? [[String: Any]])
        let api = try #require(hosts.first { $0["host"] as? String == "api.example.test" })
        #expect(api["occurrences"] as? Int == 2)
        #expect((api["knownPins"] as? [String])?.count == 2)
        let page = try await collector.request(.GET, "/", authorized: true)
        #expect(page.status == 200)
        #expect(page.body.contains("<svg class=\"chart\""))
    }

    @Test("two transactions in flight (--writer-transactions 2): 200 concurrent POSTs, each report four times, are all 204 and counted once each; after a restart too")
    func transactionsInFlight() async throws {
        let cluster = try await PostgresCluster()
        defer { cluster.stop() }
        let statuses = Recorded<Int>()
        do {
            let collector = try await CollectorHarness(database: try DatabaseURL.parse(cluster.url)) { $0.writerTransactions = 2 }
            // Identical reports in batches committing side by side: each waits on the other's rows where they
            // meet, and a deadlock between two batches is retried request by request, never answered 500.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let body = try ReportFixtures.json(["hostname": "c\(index % 50).flight.test", "validation-result": "pinMismatch"])
                        statuses.add(try await collector.post(body).status)
                    }
                }
                try await group.waitForAll()
            }
            await collector.stop()
        }
        #expect(statuses.all.count == 200)
        #expect(statuses.all.allSatisfy { $0 == 204 }, "\(statuses.all.filter { $0 != 204 })")
        let collector = try await CollectorHarness(database: try DatabaseURL.parse(cluster.url))
        defer { Task { await collector.stop() } }
        let summary = try await collector.json("/api/summary")
        #expect(summary["reports"] as? Int == 50)
        #expect(summary["occurrences"] as? Int == 200)
        #expect(summary["hosts"] as? Int == 50)
        let hosts = try #require(try await collector.json("/api/hosts?limit=100")["hosts"] as? [[String: Any]])
        #expect(hosts.count == 50 && hosts.allSatisfy { $0["occurrences"] as? Int == 4 && $0["reports"] as? Int == 1 })
    }

    @Test("a NUL in a query parameter is 400 naming it, as on SQLite, never an empty 500")
    func nulInQuery() async throws {
        let cluster = try await PostgresCluster()
        defer { cluster.stop() }
        let collector = try await CollectorHarness(database: try DatabaseURL.parse(cluster.url))
        defer { Task { await collector.stop() } }
        try await QueryTextTests.nulRefused(collector)
    }

    @Test("PostgreSQL stopped mid-run: /status 503 unavailable, reads 503 in words, a POST answered within seconds; all recover when it is back")
    func databaseDown() async throws {
        let cluster = try await PostgresCluster()
        defer { cluster.stop() }
        // The product's wait for a connection, not the harness's minute.
        let collector = try await CollectorHarness(database: try DatabaseURL.parse(cluster.url)) { $0.databaseConnectionWait = .seconds(3) }
        defer { Task { await collector.stop() } }
        #expect(try await collector.post(try ReportFixtures.json(["hostname": "before.down.test"])).status == 204)
        let up = try await collector.request(.GET, "/status")
        #expect(up.status == 200)
        #expect(up.body.contains("\"status\":\"ok\"") && up.body.contains("\"database\":\"postgres\"") && up.body.contains("\"uptime\":"), "\(up.body)")

        cluster.stopServer()
        // Not a speed target: the bound on waiting for a connection is a few seconds, and the product's own report
        // senders give up after 2 to 5 s; before it, the first POST waited 67 s for the pool's circuit breaker.
        let clock = ContinuousClock()
        let started = clock.now
        let post = try await collector.post(try ReportFixtures.json(["hostname": "during.down.test"]))
        let waited = clock.now - started
        #expect(post.status == 503, "\(post.body)")
        #expect(post.body == "the reports could not be stored; retry later\n")
        #expect(waited < .seconds(30), "the POST was answered after \(waited)")
        let status = try await collector.request(.GET, "/status")
        #expect(status.status == 503, "\(status.body)")
        #expect(status.body.contains("\"status\":\"unavailable\""), "\(status.body)")
        #expect(status.body.contains("\"database\":\"postgres\"") && status.body.contains("\"uptime\":"), "\(status.body)")
        #expect(status.body.contains("\"databaseState\":\"unreachable\""), "\(status.body)")
        for path in ["/api/summary", "/api/hosts", "/api/reports", "/api/reports.csv", "/"] {
            let reply = try await collector.request(.GET, path, authorized: true)
            #expect(reply.status == 503, "\(path): \(reply.status) \(reply.body)")
            #expect(reply.body == "the database is unreachable; retry later\n", "\(path)")
            #expect(reply.header("Retry-After") != nil, "\(path)")
        }

        try await cluster.startServer()
        // It recovers by itself: the pool connects again once the server is back.
        var recovered = false
        for _ in 0..<120 where !recovered {
            let reply = try await collector.request(.GET, "/status")
            recovered = reply.status == 200 && reply.body.contains("\"databaseState\":\"reachable\"")
            if !recovered { try await Task.sleep(for: .milliseconds(500)) }
        }
        #expect(recovered, "/status did not come back to 200 within 60 s of the database's return")
        var stored = 0
        for _ in 0..<60 where stored != 204 {
            stored = try await collector.post(try ReportFixtures.json(["hostname": "after.down.test"])).status
            if stored != 204 { try await Task.sleep(for: .milliseconds(500)) }
        }
        #expect(stored == 204)
        let summary = try await collector.json("/api/summary")
        #expect(summary["hosts"] as? Int == 2, "\(summary)")
    }
}

/// The test clusters' port: chosen free, but another test may bind it before the server does. A start that finds
/// it taken tries another port instead of failing the test that wanted a database.
@Suite("PostgresCluster: a port taken before the server binds it", .enabled(if: PostgresCluster.available, "needs Debian's postgresql"))
struct PostgresClusterPortTests {
    @Test("the first port offered is held by another socket: the cluster starts on the next")
    func portClash() async throws {
        // A listening socket on a free loopback port, held for the whole start.
        let held = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(held >= 0)
        defer { close(held) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(held, $0, length) == 0 && getsockname(held, $0, &length) == 0 }
        }
        try #require(bound && listen(held, 1) == 0)
        let taken = Int(UInt16(bigEndian: address.sin_port))
        var offered: [Int] = []
        let cluster = try await PostgresCluster(ports: {
            let port = offered.isEmpty ? taken : try PostgresCluster.unusedLoopbackPort()
            offered.append(port)
            return port
        })
        defer { cluster.stop() }
        #expect(offered.first == taken && offered.count >= 2, "\(offered)")
        #expect(cluster.port != taken && cluster.port == offered.last)
    }
}
