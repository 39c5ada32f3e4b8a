import ArgumentParser
import Foundation
import PinningTestSupport
import Testing

@testable import pinning_collector

// `pinning-collector bench` (`pinning bench collector`): every count it takes, at its extremes. Before, none had a
// range: `--batch 0` divided by zero, `--samples -5` made an invalid range and `--concurrency 9223372036854775807`
// overflowed, each a trap (signal 4) that skipped every `defer`, so the child collectors it had started kept
// running and its temporary directory stayed. Now each is refused while parsing, before anything exists.
// The extremes are parsed in process as `CollectorCommand.main` parses them; one run of the built binary checks
// the refusal's words and status end to end, and one short real run that it leaves nothing behind.

@Suite("Collector bench: numeric options refused at their extremes")
struct CollectorBenchOptionTests {
    /// Each option, what it accepts, and values just outside.
    static let options: [(option: String, rejected: [String])] = [
        ("--reports", ["0", "-1", "10000001"]),
        ("--concurrency", ["0", "-1", "257", "1000"]),
        ("--batch", ["0", "-1", "10001"]),
        ("--stored", ["-1", "10000001"]),
        ("--samples", ["0", "-1", "-5", "100001"]),
        ("--flood-seconds", ["0", "-1", "3601"]),
        ("--commit-batch", ["0", "-1", "10001"]),
    ]
    /// Values no count accepts.
    static let extremes = [
        "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809", "1e308", "inf", "nan", "1.5", "abc", "",
    ]

    /// What `CollectorCommand.main` prints for `arguments` after `bench`, or nil when they parse.
    static func refusal(_ arguments: [String]) -> (message: String, exitCode: Int32)? {
        do {
            _ = try CollectorBench.parse(arguments)
            return nil
        } catch {
            return ("pinning bench collector: " + CollectorBench.fullMessage(for: error), CollectorBench.exitCode(for: error).rawValue)
        }
    }

    @Test("every count, every extreme: refused while parsing, naming the option and the range")
    func extremes() {
        for (option, rejected) in Self.options {
            for value in rejected + Self.extremes {
                // "--option=value" as well as "--option value": a negative value is the option's value either way.
                for arguments in [[option, value], ["\(option)=\(value)"]] {
                    guard let refusal = Self.refusal(arguments) else {
                        Issue.record("\(arguments) parsed")
                        continue
                    }
                    #expect(refusal.exitCode != 0, "\(arguments): \(refusal.message)")
                    let first = refusal.message.split(separator: "\n").first.map(String.init) ?? ""
                    #expect(first.contains("'\(option) <"), "\(arguments): \(refusal.message)")
                    // `--option=` with nothing after it is argument-parser's "Missing value for '--option <…>'".
                    let words = value.isEmpty && arguments.count == 1 ? ["Missing value for"] : ["use a whole number from", "not a whole number from"]
                    #expect(words.contains { first.contains($0) }, "\(arguments): \(refusal.message)")
                }
            }
        }
    }

    @Test("the ends of each range and the defaults still parse")
    func accepted() throws {
        let bench = try CollectorBench.parse([])
        #expect(bench.reports == 50_000 && bench.concurrency == 32 && bench.batch == 100 && bench.stored == 1_000_000)
        #expect(bench.samples == 50 && bench.floodSeconds == 10 && bench.commitBatch == 512)
        let low = try CollectorBench.parse([
            "--reports", "1", "--concurrency", "1", "--batch", "1", "--stored", "0", "--samples", "1", "--flood-seconds", "1", "--commit-batch", "1",
        ])
        #expect(low.reports == 1 && low.concurrency == 1 && low.batch == 1 && low.stored == 0 && low.samples == 1 && low.floodSeconds == 1 && low.commitBatch == 1)
        let high = try CollectorBench.parse([
            "--reports", "10000000", "--concurrency", "256", "--batch", "10000", "--stored", "10000000", "--samples", "100000", "--flood-seconds", "3600",
            "--commit-batch", "10000",
        ])
        #expect(high.reports == 10_000_000 && high.concurrency == 256 && high.batch == 10_000 && high.stored == 10_000_000)
        #expect(high.samples == 100_000 && high.floodSeconds == 3600 && high.commitBatch == 10_000)
    }

    /// Processes whose command line mentions `path` (the bench's children name their temporary directory).
    static func processes(mentioning path: String) -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { $0.allSatisfy(\.isNumber) }.compactMap { pid in
            // A process may end between the listing and the read: nothing to read is nothing found.
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
            let line = String(decoding: data.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
            return line.contains(path) ? "\(pid): \(line)" : nil
        }
    }

    @Test(
        "the built binary: --batch 0 is one refusal and exit 2, not a trap; a short run leaves no child and no directory",
        .enabled(if: CollectorBinaries.collector != nil, "pinning-collector is built by swift build"))
    func binary() async throws {
        let collector = try #require(CollectorBinaries.collector)
        let directory = try TemporaryDirectory(prefix: "pinning-collector-bench-options")
        defer { directory.remove() }
        // The bench makes its directory in the system's temporary directory: here, so that what it leaves is seen.
        let scratch = directory.path("tmp")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        let environment = ["TMPDIR": scratch]

        let refused = try await TestTools.run(collector, ["bench", "--phases", "ingest", "--reports", "10", "--batch", "0"], in: directory, environment: environment)
        #expect(refused.exited && refused.status == 2, "\(refused)")
        #expect(
            refused.stderr.hasPrefix("pinning bench collector: Error: The value '0' is invalid for '--batch <batch>': out of range; use a whole number from 1 to 10,000\n"),
            "\(refused)")
        #expect(!refused.stderr.contains("Fatal error") && !refused.stderr.contains("Backtrac"), "\(refused)")
        #expect(refused.stdout.isEmpty, "\(refused)")

        // A real phase at the low ends of the ranges: one child collector, stopped, and the directory removed.
        let run = try await TestTools.run(
            collector, ["bench", "--phases", "read", "--stored", "0", "--samples", "1"], in: directory, environment: environment, timeout: 300)
        #expect(run.exited && run.status == 0, "\(run)")
        #expect(run.stdout.contains("read /api/summary with 0 stored"), "\(run)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch).isEmpty, "left in \(scratch)")
        #expect(Self.processes(mentioning: scratch).isEmpty, "\(Self.processes(mentioning: scratch))")
    }
}
