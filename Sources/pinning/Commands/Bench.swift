import ArgumentParser
import Foundation
import Pinning

extension PinningCommand {
    /// `pinning bench`: evaluations per second (uncached and cached), latency and peak memory; `pinning bench
    /// handshake`: loopback TLS handshakes per second.
    struct Bench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Measure evaluation throughput (uncached and cached) and loopback handshake throughput.",
            subcommands: [Evaluations.self, Handshake.self],
            defaultSubcommand: Evaluations.self
        )
    }
}

extension PinningCommand.Bench {
    /// `pinning bench [evaluations] --chain … [policy flags] [--iterations N] [--json]`.
    struct Evaluations: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "evaluations",
            abstract: "Evaluate one chain repeatedly in-process, with the same chain and policy flags as `pinning evaluate`.",
            discussion: """
                Without --at every evaluation validates at the moment it runs, and the cached figure includes the \
                expiry re-check each hit makes.

                JSON keys: evaluationsPerSecond, cachedEvaluationsPerSecond, p50Microseconds, p99Microseconds \
                (uncached latency), peakRSSBytes (VmHWM).
                """
        )

        @Option(name: .long, help: ArgumentHelp("The chain as the server sends it, leaf first (PEM bundle, DER or PKCS#7).", valueName: "file"))
        var chain: String

        @Option(name: .long, help: ArgumentHelp("DNS name or IP address the leaf must be valid for; without it no name is checked.", valueName: "name"))
        var host: String?

        @OptionGroup var options: PolicyOptions

        @Option(
            name: .long,
            help: ArgumentHelp("Uncached evaluations to time, 1 to 10,000,000 (default 1000).", valueName: "n"),
            transform: NumericOption.integer(1...10_000_000)
        )
        var iterations: Int = 1000

        @Option(
            name: .customLong("cached-iterations"),
            help: ArgumentHelp("Cached evaluations to time, 1 to 1,000,000,000 (default 50 × --iterations).", valueName: "n"),
            transform: NumericOption.integer(1...1_000_000_000)
        )
        var cachedIterations: Int?

        @Flag(name: .long, help: "Print the result as JSON.")
        var json = false

        func run() async throws {
            // Both counts were range-checked while parsing (NumericOption); 50 × 10,000,000 fits an Int.
            let cachedIterations = self.cachedIterations ?? self.iterations * 50
            guard self.options.config == nil else {
                throw InputError("--config: bench measures a security policy; give the policy flags of evaluate instead")
            }
            let presented = try InputLoading.certificates(self.chain, option: "--chain")
            var inputs = try self.options.makePolicy(presented: presented, host: self.host)
            if self.options.at == nil {
                // "Now" for every evaluation, as a client does; evaluate's fixed instant would make every
                // cached hit skip the expiry re-check.
                inputs.trust.validationTime = nil
            }
            let measurement = await EvaluationBenchmark(trust: inputs.trust, policy: inputs.policy, host: self.host)
                .run(iterations: self.iterations, cachedIterations: cachedIterations)
            if let failure = measurement.failure {
                PinningCommand.Evaluate.warn("the chain is not trusted (\(failure.code)): untrusted verdicts are never cached, so the cached figure measures evaluation too")
            }
            let report = BenchReport(measurement: measurement, peakRSSBytes: ProcessMemory.peakResidentBytes())
            if self.json {
                try JSONOutput.print(report)
            } else {
                print(report.humanReadable(iterations: self.iterations, cachedIterations: cachedIterations))
            }
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

    func run(iterations: Int, cachedIterations: Int) async -> Measurement {
        // One untimed evaluation loads the platform roots and builds the anchor store.
        let first = await self.policy.evaluate(self.trust, forDomain: self.host)
        var latencies = LatencyHistogram()
        let started = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<iterations {
            let before = DispatchTime.now().uptimeNanoseconds
            _ = await self.policy.evaluate(self.trust, forDomain: self.host)
            latencies.record(DispatchTime.now().uptimeNanoseconds - before)
        }
        let uncachedSeconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9

        let cache = EvaluationCache()
        _ = await self.policy.evaluate(self.trust, forDomain: self.host, cache: cache)
        let cachedStarted = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<cachedIterations {
            _ = await self.policy.evaluate(self.trust, forDomain: self.host, cache: cache)
        }
        let cachedSeconds = Double(DispatchTime.now().uptimeNanoseconds - cachedStarted) / 1e9

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

/// `pinning bench --json` output.
struct BenchReport: Encodable {
    var evaluationsPerSecond: Double
    var cachedEvaluationsPerSecond: Double
    var p50Microseconds: Double
    var p99Microseconds: Double
    var peakRSSBytes: Int

    init(measurement: EvaluationBenchmark.Measurement, peakRSSBytes: Int) {
        self.evaluationsPerSecond = Self.rounded(measurement.evaluationsPerSecond)
        self.cachedEvaluationsPerSecond = Self.rounded(measurement.cachedEvaluationsPerSecond)
        self.p50Microseconds = Self.rounded(measurement.p50Microseconds)
        self.p99Microseconds = Self.rounded(measurement.p99Microseconds)
        self.peakRSSBytes = peakRSSBytes
    }

    static func rounded(_ value: Double) -> Double { (value * 10).rounded() / 10 }

    func humanReadable(iterations: Int, cachedIterations: Int) -> String {
        let ratio = self.evaluationsPerSecond > 0 ? self.cachedEvaluationsPerSecond / self.evaluationsPerSecond : 0
        return [
            String(format: "uncached  %12.1f evaluations/s  (%ld iterations; p50 %.1f µs, p99 %.1f µs)", self.evaluationsPerSecond, iterations, self.p50Microseconds, self.p99Microseconds),
            String(format: "cached    %12.1f evaluations/s  (%ld iterations; %.1f× uncached)", self.cachedEvaluationsPerSecond, cachedIterations, ratio),
            "peak RSS  \(self.peakRSSBytes) bytes",
        ].joined(separator: "\n")
    }
}

/// The process's memory figures from /proc/self/status (Linux); 0 where unavailable.
enum ProcessMemory {
    /// VmHWM: the peak resident set size, in bytes.
    static func peakResidentBytes() -> Int { self.statusField("VmHWM:") }

    /// VmRSS: the current resident set size, in bytes.
    static func residentBytes() -> Int { self.statusField("VmRSS:") }

    private static func statusField(_ name: String) -> Int {
        // Read to the end: /proc files report a size of 0, so FileManager.contents(atPath:) returns nothing.
        guard let handle = FileHandle(forReadingAtPath: "/proc/self/status") else { return 0 }
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
