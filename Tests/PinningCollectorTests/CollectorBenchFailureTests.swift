import Foundation
import PinningTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// NU3: `pinning-collector bench` (`pinning bench collector`) with an unreachable `--postgres` retried for ever,
// printing PostgresNIO's `PSQLError` lines; `--phases` ignored names it did not know; a failure printed library
// internals; and SIGINT or SIGTERM left the child collectors running and the temporary directory behind. Each is
// checked on the built binary, with its temporary directory pointed at one the test owns.

@Suite("Collector bench: failures in words, bounded, and nothing left behind", .serialized)
struct CollectorBenchFailureTests {
    struct Scratch {
        let directory: TemporaryDirectory
        let tmp: String
        var environment: [String: String] { ["TMPDIR": self.tmp] }

        init() throws {
            self.directory = try TemporaryDirectory(prefix: "pinning-collector-bench-failures")
            self.tmp = self.directory.path("tmp")
            try FileManager.default.createDirectory(atPath: self.tmp, withIntermediateDirectories: true)
        }

        var leftovers: [String] { (try? FileManager.default.contentsOfDirectory(atPath: self.tmp)) ?? [] }

        /// Stops any process a failing run left (they name the scratch directory), then removes it.
        func remove() {
            for line in CollectorBenchOptionTests.processes(mentioning: self.tmp) {
                if let pid = Int32(line.prefix { $0.isNumber }) { kill(pid, SIGKILL) }
            }
            self.directory.remove()
        }
    }

    @Test(
        "--phases with an unknown name: one line, exit 2, nothing made",
        .enabled(if: CollectorBinaries.collector != nil, "pinning-collector is built by swift build"))
    func unknownPhase() async throws {
        let collector = try #require(CollectorBinaries.collector)
        let scratch = try Scratch()
        defer { scratch.remove() }
        let run = try await TestTools.run(
            collector, ["bench", "--phases", "ingset", "--reports", "1"], in: scratch.directory, environment: scratch.environment, timeout: 60)
        #expect(run.exited && run.status == 2, "\(run)")
        #expect(
            run.stderr == "pinning bench collector: --phases: unknown phase \"ingset\"; use ingest, postgres, read, flood, comma-separated\n", "\(run)")
        #expect(run.stdout.isEmpty, "\(run)")
        #expect(scratch.leftovers.isEmpty, "\(scratch.leftovers)")
    }

    @Test(
        "--postgres that nothing answers: one line in words within seconds, exit 2, no driver text",
        .enabled(if: CollectorBinaries.collector != nil, "pinning-collector is built by swift build"))
    func unreachablePostgres() async throws {
        let collector = try #require(CollectorBinaries.collector)
        let scratch = try Scratch()
        defer { scratch.remove() }
        // Port 1 on the loopback: nothing listens there, so every connection is refused at once. Before, the bench
        // retried for ever (the 60 s timeout here kills it).
        let run = try await TestTools.run(
            collector, ["bench", "--phases", "postgres", "--postgres", "postgres://u@127.0.0.1:1/db", "--reports", "1"], in: scratch.directory,
            environment: scratch.environment, timeout: 60)
        #expect(run.exited && run.status == 2, "\(run)")
        let lines = run.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(run)")
        #expect(run.stderr.hasPrefix("pinning bench collector: --postgres 127.0.0.1:1/db: cannot connect to 127.0.0.1:1: connection refused"), "\(run)")
        #expect(!run.output.contains("PSQLError") && !run.output.contains("NIO"), "\(run)")
        #expect(scratch.leftovers.isEmpty, "\(scratch.leftovers)")

        // With --verbose the words are the same; nothing hangs either.
        let verbose = try await TestTools.run(
            collector, ["bench", "--phases", "postgres", "--postgres", "postgres://u@127.0.0.1:1/db", "--reports", "1", "--verbose"], in: scratch.directory,
            environment: scratch.environment, timeout: 60)
        #expect(verbose.exited && verbose.status == 2, "\(verbose)")
        #expect(verbose.stderr.contains("connection refused"), "\(verbose)")
    }

    @Test(
        "SIGINT and SIGTERM mid-run: the child collector stopped, the temporary directory removed",
        .enabled(if: CollectorBinaries.collector != nil, "pinning-collector is built by swift build"),
        arguments: [SIGINT, SIGTERM])
    func signalled(_ number: Int32) async throws {
        let collector = try #require(CollectorBinaries.collector)
        let scratch = try Scratch()
        defer { scratch.remove() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: collector)
        // The flood phase: one child collector, running for a minute unless stopped.
        process.arguments = ["bench", "--phases", "flood", "--flood-seconds", "60", "--concurrency", "1"]
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = scratch.tmp
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: scratch.directory.path)
        process.standardOutput = FileHandle.nullDevice
        let stderrPath = scratch.directory.path("stderr")
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let stderr = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        defer { try? stderr.close() }  // the child has its own copy; ours only needs closing
        process.standardError = stderr
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        // Wait for the child collector (its command line names the scratch directory).
        let deadline = Date().addingTimeInterval(120)
        while CollectorBenchOptionTests.processes(mentioning: scratch.tmp).isEmpty && process.isRunning && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        try #require(!CollectorBenchOptionTests.processes(mentioning: scratch.tmp).isEmpty, "no child collector started")
        kill(process.processIdentifier, number)
        let stop = Date().addingTimeInterval(30)
        while process.isRunning && Date() < stop { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!process.isRunning, "the bench did not stop")
        if !process.isRunning { #expect(process.terminationStatus == 128 + number, "\(process.terminationStatus)") }
        // The children are stopped by the time the bench exits.
        #expect(CollectorBenchOptionTests.processes(mentioning: scratch.tmp).isEmpty, "\(CollectorBenchOptionTests.processes(mentioning: scratch.tmp))")
        #expect(scratch.leftovers.isEmpty, "left in \(scratch.tmp): \(scratch.leftovers)")
        let text = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""  // only shown on failure
        #expect(text.contains("stopped by \(number == SIGINT ? "SIGINT" : "SIGTERM")"), "\(text)")
    }
}
