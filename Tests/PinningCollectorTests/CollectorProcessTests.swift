import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import PinningTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The built executables (`swift build` puts them in .build/debug; `.ci/run` builds everything first).
enum CollectorBinaries {
    static func path(_ name: String) -> String? {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        var candidates = [root.appendingPathComponent(".build/debug/\(name)").path]
        let build = root.appendingPathComponent(".build")
        for triple in ((try? FileManager.default.contentsOfDirectory(atPath: build.path)) ?? []).sorted() where triple.contains("-") {
            candidates.append(build.appendingPathComponent("\(triple)/debug/\(name)").path)
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    static let collector = Self.path("pinning-collector")
    static let pinning = Self.path("pinning")
}

/// `pinning-collector` as a process: started, signalled, restarted.
final class CollectorProcess: @unchecked Sendable {
    let server: ServerProcess
    var port: Int { self.server.port }

    init(_ executable: String, _ arguments: [String], in directory: TemporaryDirectory) async throws {
        self.server = try await ServerProcess(executable, arguments, in: directory) { line in
            let prefix = "collector listening on http://127.0.0.1:"
            guard line.hasPrefix(prefix) else { return nil }
            return Int(line.dropFirst(prefix.count).prefix { $0.isNumber })
        }
    }

    /// SIGTERM, then waits (without SIGKILL) up to `seconds` for the process to exit; its status.
    func terminate(within seconds: Double = 60) async throws -> Int32 {
        kill(self.server.process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(seconds)
        while self.server.process.isRunning && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        guard !self.server.process.isRunning else {
            self.server.stop()
            throw CollectorTestError("still running \(seconds) s after SIGTERM: \(self.server.output)")
        }
        return self.server.process.terminationStatus
    }
}

@Suite("pinning collector as a process: options, signals, restarts, floods", .serialized)
struct CollectorProcessTests {
    let token = "process-token-0123456789abcdef"

    /// A client for the collector processes: generous bounds for a loaded machine, and a refused connection (after
    /// a SIGTERM or SIGKILL) is an answer, not something to retry for seconds.
    static func client() -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(30), read: .seconds(60))
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Every host the collector on `port` has stored, read through `/api/reports` page by page.
    func storedHosts(port: Int, client: HTTPClient) async throws -> Set<String> {
        var stored: Set<String> = []
        var cursor: String?
        repeat {
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/api/reports?limit=1000" + (cursor.map { "&cursor=\($0)" } ?? ""))
            request.headers.add(name: "Authorization", value: "Bearer \(self.token)")
            let response = try await client.execute(request, timeout: .seconds(60))
            let body = try await response.body.collect(upTo: 64 * 1024 * 1024)
            let page = try #require(try JSONSerialization.jsonObject(with: Data(String(buffer: body).utf8)) as? [String: Any])
            for row in page["reports"] as? [[String: Any]] ?? [] {
                if let host = row["host"] as? String { stored.insert(host) }
            }
            cursor = page["next"] as? String
        } while cursor != nil
        return stored
    }

    func setUp() throws -> (TemporaryDirectory, String) {
        let directory = try TemporaryDirectory(prefix: "pinning-collector-process")
        do {
            return (directory, try directory.write("token", self.token + "\n"))
        } catch {
            // No test holds it yet.
            directory.remove()
            throw error
        }
    }

    @Test("bad options: one line naming the option, exit 2", .enabled(if: CollectorBinaries.collector != nil, "pinning-collector is built by swift build"))
    func badOptions() async throws {
        let binary = try #require(CollectorBinaries.collector)
        let (directory, tokenFile) = try self.setUp()
        defer { directory.remove() }
        let shortToken = try directory.write("short", "abc\n")
        let database = "sqlite:" + directory.path("r.db")
        let cases: [([String], String)] = [
            (["--database", "mysql://x", "--token-file", tokenFile], "--database"),
            (["--database", "postgres://host/db", "--token-file", tokenFile], "--database: no user"),
            (["--database", database, "--token-file", directory.path("missing")], "--token-file"),
            (["--database", database, "--token-file", shortToken], "at least 16 characters"),
            (["--database", database, "--token-file", tokenFile, "--listen", "nowhere"], "--listen"),
            (["--database", database, "--token-file", tokenFile, "--rate", "5/hour"], "--rate"),
            (["--database", database, "--token-file", tokenFile, "--retention-days", "0"], "--retention-days"),
            (["--database", database, "--token-file", tokenFile, "--max-report-bytes", "10"], "--max-report-bytes"),
            (["--database", database, "--token-file", tokenFile, "--commit-batch", "0"], "--commit-batch"),
            (["--database", database, "--token-file", tokenFile, "--commit-batch", "many"], "--commit-batch"),
            (["--database", database, "--token-file", tokenFile, "--writer-transactions", "9"], "--writer-transactions"),
            // A negative number is the option's value (argument-parser once read "-5" as an option and said "Missing
            // value"): refused with the range.
            (["--database", database, "--token-file", tokenFile, "--dedup-window", "-5"], "--dedup-window -5: a whole number from 1 to 2592000"),
            (["--database", database, "--token-file", tokenFile, "--retention-days", "-1"], "--retention-days -1: a whole number from 1 to 36500"),
            (["--database", database, "--token-file", tokenFile, "--rate", "-5/min"], "--rate -5/min: N must be from 1"),
            (["--database", database, "--token-file", tokenFile, "--writer-transactions", "2"], "--writer-transactions 2: SQLite has one writer"),
            (["--database", database, "--token-file", tokenFile, "--anchors", directory.path("missing.pem")], "--anchors"),
            (["--database", "sqlite:" + directory.path("no/such/dir/r.db"), "--token-file", tokenFile], "--database sqlite:"),
            // One character, a directory or not, with a slash or not: Foundation's path function trapped (SIGILL).
            (["--database", "sqlite:d", "--token-file", tokenFile], "--database sqlite:d: the path is a directory, not a file"),
            (["--database", "sqlite:d/", "--token-file", tokenFile], "--database sqlite:d/: the path ends in /"),
            (["--database", "sqlite:n/", "--token-file", tokenFile], "--database sqlite:n/: the path ends in /"),
            (["--database", "sqlite:./d", "--token-file", tokenFile], "--database sqlite:./d: the path is a directory, not a file"),
        ]
        try FileManager.default.createDirectory(atPath: directory.path("d"), withIntermediateDirectories: false)
        for (arguments, expected) in cases {
            let result = try await TestTools.run(binary, arguments, in: directory, timeout: 60)
            #expect(result.status == 2, "\(arguments): \(result)")
            #expect(result.stderr.contains(expected), "\(arguments): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
    }

    @Test(
        "sqlite: with a one-character file name in the current directory: the collector starts and creates it",
        .enabled(if: CollectorBinaries.collector != nil && CollectorBinaries.pinning != nil, "both executables are built by swift build")
    )
    func oneCharacterDatabaseName() async throws {
        let (directory, tokenFile) = try self.setUp()
        defer { directory.remove() }
        // Both ways in: `pinning collector` (which hands over) and `pinning-collector`; each died with SIGILL before.
        for (binary, prefix) in [(try #require(CollectorBinaries.pinning), ["collector"]), (try #require(CollectorBinaries.collector), [])] {
            let process = try await CollectorProcess(binary, prefix + ["--listen", "127.0.0.1:0", "--database", "sqlite:x", "--token-file", tokenFile], in: directory)
            #expect(process.server.output.contains("(database: sqlite)"))
            #expect(try await process.terminate() == 0)
        }
        var isDirectory: ObjCBool = true
        #expect(FileManager.default.fileExists(atPath: directory.path("x"), isDirectory: &isDirectory) && !isDirectory.boolValue)
    }

    @Test(
        "pinning collector hands over to pinning-collector: the start-up line, then SIGTERM exits 0",
        .enabled(if: CollectorBinaries.collector != nil && CollectorBinaries.pinning != nil, "both executables are built by swift build")
    )
    func handover() async throws {
        let pinning = try #require(CollectorBinaries.pinning)
        let (directory, tokenFile) = try self.setUp()
        defer { directory.remove() }
        let process = try await CollectorProcess(pinning, ["collector", "--listen", "127.0.0.1:0", "--database", "sqlite:" + directory.path("r.db"), "--token-file", tokenFile], in: directory)
        #expect(process.server.output.contains("(database: sqlite)"))
        #expect(try await process.terminate() == 0)
        let help = try await TestTools.run(pinning, ["collector", "--help"], in: directory, timeout: 60)
        #expect(help.stdout.contains("--max-report-bytes"))
    }

    @Test(
        "a flood from one source is refused with 429 while /status keeps answering; every report answered 204 is stored, across a SIGTERM and a restart",
        .enabled(if: CollectorBinaries.collector != nil, "pinning-collector is built by swift build")
    )
    func floodStopRestart() async throws {
        let binary = try #require(CollectorBinaries.collector)
        let (directory, tokenFile) = try self.setUp()
        defer { directory.remove() }
        let arguments = ["--listen", "127.0.0.1:0", "--database", "sqlite:" + directory.path("r.db"), "--token-file", tokenFile, "--rate", "2000/min"]
        let first = try await CollectorProcess(binary, arguments, in: directory)
        let client = Self.client()
        defer { _ = client.shutdown() }

        func post(_ host: String, port: Int) async -> Int {
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/reports")
            request.method = .POST
            request.body = .bytes(ByteBuffer(string: "{\"hostname\":\"\(host)\",\"validation-result\":\"pinMismatch\"}"))
            do {
                return Int(try await client.execute(request, timeout: .seconds(60)).status.code)
            } catch {
                return 0
            }
        }

        // 3,000 reports from one source, 16 at a time, with a SIGTERM when a third are answered; /status asked
        // throughout. The rate (2,000 a minute) refuses the rest of the flood with 429.
        let accepted = NIOLockedHosts()
        let statuses = NIOLockedHosts()
        let stopped = StopFlag()
        let port = first.port
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<16 {
                group.addTask {
                    var index = worker
                    while index < 3000 && !stopped.isSet {
                        let host = "h\(index).flood.test"
                        let status = await post(host, port: port)
                        statuses.add("\(status)")
                        if status == 204 { accepted.add(host) }
                        index += 16
                    }
                }
            }
            group.addTask {
                // /status answers during the flood (bounded generously: this is a liveness check, not a speed
                // target; `pinning bench collector` measures its latency).
                for _ in 0..<5 {
                    var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/status")
                    request.method = .GET
                    let response = try await client.execute(request, timeout: .seconds(10))
                    #expect(response.status == .ok)
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            group.addTask {
                while statuses.count < 1000 { try await Task.sleep(for: .milliseconds(5)) }
                #expect(try await first.terminate() == 0)
                stopped.set()
            }
            try await group.waitForAll()
        }
        let counts = statuses.counts
        #expect(counts["429", default: 0] > 0 || counts["0", default: 0] > 0, "\(counts)")
        #expect(counts["500", default: 0] == 0)
        #expect(accepted.count > 0)

        // Restart on the same file: every host answered 204 is there.
        let second = try await CollectorProcess(binary, arguments, in: directory)
        defer { second.server.stop() }
        let stored = try await self.storedHosts(port: second.port, client: client)
        let missing = accepted.all.subtracting(stored)
        #expect(missing.isEmpty, "answered 204 but not stored: \(missing.sorted().prefix(10))")
        #expect(try await second.terminate() == 0)
    }

    @Test(
        "killed with SIGKILL while 16 clients post one report each, then restarted: every report answered 204 is stored (WAL, synchronous=NORMAL)",
        .enabled(if: CollectorBinaries.collector != nil, "pinning-collector is built by swift build")
    )
    func killedMidIngest() async throws {
        let binary = try #require(CollectorBinaries.collector)
        let (directory, tokenFile) = try self.setUp()
        defer { directory.remove() }
        let arguments = ["--listen", "127.0.0.1:0", "--database", "sqlite:" + directory.path("r.db"), "--token-file", tokenFile, "--rate", "1000000/min"]
        let first = try await CollectorProcess(binary, arguments, in: directory)
        let client = Self.client()
        defer { _ = client.shutdown() }
        let port = first.port
        let accepted = NIOLockedHosts()
        let answered = NIOLockedHosts()
        let stopped = StopFlag()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<16 {
                group.addTask {
                    var index = worker
                    while !stopped.isSet {
                        let host = "h\(index).kill.test"
                        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/reports")
                        request.method = .POST
                        request.body = .bytes(ByteBuffer(string: "{\"hostname\":\"\(host)\",\"validation-result\":\"pinMismatch\"}"))
                        // A connection the kill broke is no answer: only a 204 counts as accepted.
                        let status: Int
                        do {
                            status = Int(try await client.execute(request, timeout: .seconds(60)).status.code)
                        } catch {
                            status = 0
                        }
                        answered.add("\(status)")
                        if status == 204 { accepted.add(host) }
                        index += 16
                    }
                }
            }
            group.addTask {
                while answered.count < 1500 { try await Task.sleep(for: .milliseconds(2)) }
                // No graceful stop: the process dies between one commit and the next.
                kill(first.server.process.processIdentifier, SIGKILL)
                while first.server.process.isRunning { try await Task.sleep(for: .milliseconds(10)) }
                stopped.set()
            }
            try await group.waitForAll()
        }
        #expect(accepted.count >= 1000, "\(answered.counts)")
        #expect(answered.counts["500", default: 0] == 0)

        let second = try await CollectorProcess(binary, arguments, in: directory)
        defer { second.server.stop() }
        let stored = try await self.storedHosts(port: second.port, client: client)
        let missing = accepted.all.subtracting(stored)
        #expect(missing.isEmpty, "answered 204 but not stored after SIGKILL: \(missing.count) of \(accepted.count), e.g. \(missing.sorted().prefix(10))")
        #expect(try await second.terminate() == 0)
    }
}

/// Set once, read by many.
final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { self.lock.withLock { self.value = true } }
    var isSet: Bool { self.lock.withLock { self.value } }
}

/// A thread-safe set of strings with counts (the flood's workers record into it).
final class NIOLockedHosts: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [String] = []
    func add(_ value: String) { self.lock.withLock { self.values.append(value) } }
    var count: Int { self.lock.withLock { self.values.count } }
    var all: Set<String> { self.lock.withLock { Set(self.values) } }
    var counts: [String: Int] { self.lock.withLock { self.values.reduce(into: [:]) { $0[$1, default: 0] += 1 } } }
}
