import ArgumentParser
import Foundation
import Pinning
import PinningNIO

#if canImport(Glibc)
    import Glibc
#endif

/// The benches' clock: monotonic nanoseconds (`DispatchTime`'s uptime), and the time passed since a reading in
/// the unit a figure is given in.
enum BenchClock {
    static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    static func seconds(since start: UInt64) -> Double { Double(Self.now - start) / 1e9 }

    static func milliseconds(since start: UInt64) -> Double { Double(Self.now - start) / 1e6 }

    static func microseconds(since start: UInt64) -> Double { Double(Self.now - start) / 1e3 }
}

/// A bench that fails once it has started: one line on standard error, `pinning: bench NAME: WORDS`, and exit
/// status 1. The bench's own failures (those `ownWords` gives text for) are already in words; anything else (a
/// socket, TLS) is said by ``ConnectionFailureWords``, never in a NIO or BoringSSL error's own text.
enum BenchRun {
    static func report<Report>(_ name: String, ownWords: (any Error) -> String?, run: () async throws -> Report) async throws -> Report {
        do {
            return try await run()
        } catch {
            let words = ownWords(error) ?? ConnectionFailureWords.words(error)
            FileHandle.standardError.write(Data("pinning: bench \(name): \(words)\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// Times one evaluation repeated, without and with an ``EvaluationCache``.
struct EvaluationBenchmark {
    var trust: ServerTrust
    var policy: SecurityPolicy
    var host: String?

    struct Measurement {
        var evaluationsPerSecond: Double
        var cachedEvaluationsPerSecond: Double
        var p50Microseconds: Double
        var p99Microseconds: Double
        var failure: TrustFailure?
    }

    /// `coldMemos`: every uncached evaluation starts with the process-wide memos emptied (``ProcessMemos``), so
    /// it decodes every certificate and verifies every signature, as for a chain never seen before; the emptying
    /// is not timed. Otherwise the memos stay warm, as in a client that meets the same chain again.
    func run(iterations: Int, cachedIterations: Int, coldMemos: Bool = false) async -> Measurement {
        // One untimed evaluation loads the platform roots and builds the anchor store.
        let first = await self.policy.evaluate(self.trust, forDomain: self.host)
        var latencies = LatencyHistogram()
        var timed: UInt64 = 0
        for _ in 0..<iterations {
            if coldMemos { ProcessMemos.forgetAll() }
            let before = BenchClock.now
            _ = await self.policy.evaluate(self.trust, forDomain: self.host)
            let elapsed = BenchClock.now - before
            latencies.record(elapsed)
            timed += elapsed
        }
        let uncachedSeconds = Double(timed) / 1e9

        let cache = EvaluationCache()
        _ = await self.policy.evaluate(self.trust, forDomain: self.host, cache: cache)
        let cachedStarted = BenchClock.now
        for _ in 0..<cachedIterations {
            _ = await self.policy.evaluate(self.trust, forDomain: self.host, cache: cache)
        }
        let cachedSeconds = BenchClock.seconds(since: cachedStarted)

        return Measurement(
            evaluationsPerSecond: Double(iterations) / max(uncachedSeconds, 1e-9),
            cachedEvaluationsPerSecond: Double(cachedIterations) / max(cachedSeconds, 1e-9),
            p50Microseconds: latencies.percentile(0.50) / 1000,
            p99Microseconds: latencies.percentile(0.99) / 1000,
            failure: first.failure
        )
    }
}

/// Latencies in a fixed-size log-linear histogram (32,768 buckets, 256 KB, whatever the iteration count; up to 18 minutes),
/// so that the benchmark's own bookkeeping does not grow with the run: keeping every sample made the peak RSS
/// of 10^6 evaluations 12 MB larger than that of 10^4 (an 8 MB array plus the sort's buffer).
/// Values below 2,048 ns are exact; above, each bucket spans 1/1024 of its power of two (0.1% resolution).
struct LatencyHistogram {
    private static let subBuckets = 1024
    private var counts = [UInt64](repeating: 0, count: 32 * 1024)
    private(set) var total: UInt64 = 0

    static func bucket(_ nanoseconds: UInt64) -> Int {
        guard nanoseconds >= 2 * UInt64(Self.subBuckets) else { return Int(nanoseconds) }
        let shift = (63 - nanoseconds.leadingZeroBitCount) - 10
        return Self.subBuckets * (shift + 1) + Int(nanoseconds >> UInt64(shift)) - Self.subBuckets
    }

    /// The smallest value that falls in `bucket`.
    static func lowerBound(_ bucket: Int) -> UInt64 {
        guard bucket >= 2 * Self.subBuckets else { return UInt64(bucket) }
        let shift = bucket / Self.subBuckets - 1
        return UInt64(bucket - Self.subBuckets * shift) << UInt64(shift)
    }

    mutating func record(_ nanoseconds: UInt64) {
        self.counts[min(Self.bucket(nanoseconds), self.counts.count - 1)] += 1
        self.total += 1
    }

    /// The nearest-rank percentile in nanoseconds (the lower bound of the bucket holding that rank); 0 when empty.
    func percentile(_ fraction: Double) -> Double {
        guard self.total > 0 else { return 0 }
        let rank = UInt64(max(1, (fraction * Double(self.total)).rounded(.up)))
        var seen: UInt64 = 0
        for (bucket, count) in self.counts.enumerated() where count > 0 {
            seen += count
            if seen >= rank { return Double(Self.lowerBound(bucket)) }
        }
        return Double(Self.lowerBound(self.counts.count - 1))
    }
}

/// How the bench reports round their figures and take medians, in one place.
extension Double {
    /// This value to `places` decimal places (1 to 3), as the reports give their figures.
    func rounded(places: Int) -> Double {
        let scale = Foundation.pow(10, Double(places))
        return (self * scale).rounded() / scale
    }
}

extension [Double] {
    /// The median (the mean of the middle two for an even count); 0 when empty.
    var median: Double {
        let sorted = self.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
}

/// `pinning bench --json` output.
struct BenchReport: Encodable {
    var evaluationsPerSecond: Double
    var cachedEvaluationsPerSecond: Double
    var p50Microseconds: Double
    var p99Microseconds: Double
    var peakRSSBytes: Int
    /// What path building did during the run (issue 31).
    var pathBuilding: PathBuildingReport

    init(measurement: EvaluationBenchmark.Measurement, peakRSSBytes: Int, pathBuilding: PathBuildingReport) {
        self.evaluationsPerSecond = measurement.evaluationsPerSecond.rounded(places: 1)
        self.cachedEvaluationsPerSecond = measurement.cachedEvaluationsPerSecond.rounded(places: 1)
        self.p50Microseconds = measurement.p50Microseconds.rounded(places: 1)
        self.p99Microseconds = measurement.p99Microseconds.rounded(places: 1)
        self.peakRSSBytes = peakRSSBytes
        self.pathBuilding = pathBuilding
    }

    func humanReadable(iterations: Int, cachedIterations: Int) -> String {
        let ratio = self.evaluationsPerSecond > 0 ? self.cachedEvaluationsPerSecond / self.evaluationsPerSecond : 0
        return [
            String(format: "uncached  %12.1f evaluations/s  (%ld iterations; p50 %.1f µs, p99 %.1f µs)", self.evaluationsPerSecond, iterations, self.p50Microseconds, self.p99Microseconds),
            String(format: "cached    %12.1f evaluations/s  (%ld iterations; %.1f× uncached)", self.cachedEvaluationsPerSecond, cachedIterations, ratio),
            "peak RSS  \(self.peakRSSBytes) bytes",
            self.pathBuilding.humanReadable,
        ].joined(separator: "\n")
    }
}

/// Path building's work during a bench run (issue 31), for `--json` as `pathBuilding`: signatures verified, links
/// the verified-link memo answered instead (`linkMemoHits`), evaluations the work budget refused, and the links
/// the memo held at the end.
struct PathBuildingReport: Encodable {
    var signaturesVerified: Int
    var linkMemoHits: Int
    var budgetRefusals: Int
    var linksHeld: Int

    /// The work done since `start` (a `PathBuildingCounters.snapshot` taken before the run).
    init(since start: PathBuildingCounters.Snapshot) {
        let counts = PathBuildingCounters.snapshot.since(start)
        self.signaturesVerified = counts.signaturesVerified
        self.linkMemoHits = counts.signaturesRemembered
        self.budgetRefusals = counts.budgetRefusals
        self.linksHeld = counts.linksHeld
    }

    var humanReadable: String {
        "path building: \(self.signaturesVerified) signatures verified, \(self.linkMemoHits) answered by the verified-link memo, \(self.budgetRefusals) budget refusals"
    }
}

/// The process's memory figures from /proc/self/status (Linux); 0 where unavailable.
enum ProcessMemory {
    /// VmHWM: the peak resident set size, in bytes.
    static func peakResidentBytes() -> Int { self.statusField("VmHWM:") }

    /// VmRSS: the current resident set size, in bytes.
    static func residentBytes() -> Int { self.statusField("VmRSS:") }

    /// The bytes `malloc` has handed out and not had back, over all its arenas, from glibc's `malloc_info` totals
    /// (the arenas' current size less their free chunks, plus mapped large blocks); 0 where unavailable. Unlike the
    /// resident set, it does not depend on where the allocator places new blocks among pages freed earlier, so it
    /// shows a leak by itself. (`malloc.h` is not part of Swift's Glibc module, so the function is looked up.)
    static func heapInUseBytes() -> Int {
        #if canImport(Glibc)
            typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
            guard let symbol = dlsym(nil, "malloc_info") else { return 0 }
            let mallocInfo = unsafeBitCast(symbol, to: MallocInfo.self)
            var buffer: UnsafeMutablePointer<CChar>?
            var size = 0
            guard let stream = open_memstream(&buffer, &size) else { return 0 }
            let status = mallocInfo(0, stream)
            fclose(stream)
            defer { free(buffer) }
            guard status == 0, let buffer else { return 0 }
            let text = String(cString: buffer)
            // The totals over all arenas follow the last arena's element: `<total type="KIND" count="N" size="BYTES"/>`
            // for the free chunks (fast, rest) and the mapped blocks (mmap), and `<system type="current" size="BYTES"/>`.
            guard let totals = text.range(of: "</heap>", options: .backwards)?.upperBound else { return 0 }
            func number(after marker: String, then field: String) -> Int? {
                guard let element = text.range(of: marker, range: totals..<text.endIndex),
                    let start = text.range(of: field, range: element.upperBound..<text.endIndex)
                else { return nil }
                return Int(text[start.upperBound...].prefix { $0.isNumber })
            }
            guard let current = number(after: "<system type=\"current\"", then: "size=\""),
                let fast = number(after: "<total type=\"fast\"", then: "size=\""),
                let rest = number(after: "<total type=\"rest\"", then: "size=\""),
                let mapped = number(after: "<total type=\"mmap\"", then: "size=\"")
            else { return 0 }
            return current - fast - rest + mapped
        #else
            return 0
        #endif
    }

    /// VmRSS of another process (`pinning bench proxy` measures the proxy and stunnel it started).
    static func residentBytes(pid: Int32) -> Int { self.statusField("VmRSS:", file: "/proc/\(pid)/status") }

    private static func statusField(_ name: String, file: String = "/proc/self/status") -> Int {
        // Read to the end: /proc files report a size of 0, so FileManager.contents(atPath:) returns nothing.
        guard let handle = FileHandle(forReadingAtPath: file) else { return 0 }
        defer { handle.closeFile() }
        let data = handle.readDataToEndOfFile()
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where line.hasPrefix(name) {
            // "VmHWM:\t   12345 kB": a tab, then padding.
            let fields = line.dropFirst(name.count).split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let value = fields.first.flatMap({ Int($0) }) else { return 0 }
            return fields.count > 1 && fields[1] == "kB" ? value * 1024 : value
        }
        return 0
    }
}

/// Waiting for a child process without `Process.waitUntilExit()`, whose weak-reference side table Foundation
/// never frees (LeakSanitizer reports it in CI's ASan stage).
enum ChildProcess {
    static let openssl = "/usr/bin/openssl"

    /// Runs `executable` to its end and returns what it wrote on stdout and stderr (read to the end first, so a
    /// chatty child never blocks on a full pipe).
    static func output(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        BenchCleanup.started(process)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        BenchCleanup.ended(process)
        return String(decoding: data, as: UTF8.self)
    }

    /// Polls until `process` has exited, every 0.2 ms (a timed `openssl crl` run loses at most that much).
    static func waitForExit(_ process: Process) {
        while process.isRunning {
            usleep(200)
        }
    }
}
