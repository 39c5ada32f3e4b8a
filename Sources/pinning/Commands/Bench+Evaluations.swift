import ArgumentParser
import Foundation
import Pinning

extension PinningCommand.Bench {
    /// `pinning bench [evaluations] --chain … [policy flags] [--iterations N] [--json]`.
    struct Evaluations: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "evaluations",
            abstract: "Evaluate one chain repeatedly in-process, with the same chain and policy flags as `pinning evaluate`.",
            discussion: """
                Without --at every evaluation validates at the moment it runs, and the cached figure includes the \
                expiry re-check each hit makes. The uncached figure keeps the process-wide memos (each \
                certificate's decoded facts, signatures verified on trusted paths) warm, as a client meeting the \
                same chain again does; --cold empties them before each uncached evaluation, untimed.

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
            name: .long, parsing: .unconditional,
            help: ArgumentHelp("Uncached evaluations to time, 1 to 10,000,000 (default 1000).", valueName: "n"),
            transform: NumericOption.integer(1...10_000_000)
        )
        var iterations: Int = 1000

        @Option(
            name: .customLong("cached-iterations"), parsing: .unconditional,
            help: ArgumentHelp("Cached evaluations to time, 1 to 1,000,000,000 (default 50 × --iterations).", valueName: "n"),
            transform: NumericOption.integer(1...1_000_000_000)
        )
        var cachedIterations: Int?

        @Flag(
            name: .long,
            help: "Empty the process-wide memos (certificate facts, verified signatures) before each uncached evaluation: the cost of a chain never seen before."
        )
        var cold = false

        @Flag(name: .long, help: "Print the result as JSON.")
        var json = false

        func validate() throws {
            guard self.options.config == nil else {
                throw InputError("--config: bench measures a security policy; give the policy flags of evaluate instead")
            }
        }

        func run() async throws {
            // Before anything is made: an interrupted bench removes what it made and stops its children.
            await BenchCleanup.installHandler()
            // Both counts were range-checked while parsing (NumericOption); 50 × 10,000,000 fits an Int.
            let cachedIterations = self.cachedIterations ?? self.iterations * 50
            let presented = try InputLoading.certificates(self.chain, option: "--chain")
            var inputs = try self.options.makePolicy(presented: presented, host: self.host)
            if self.options.at == nil {
                // "Now" for every evaluation, as a client does; evaluate's fixed instant would make every
                // cached hit skip the expiry re-check.
                inputs.trust.validationTime = nil
            }
            let start = PathBuildingCounters.snapshot
            let measurement = await EvaluationBenchmark(trust: inputs.trust, policy: inputs.policy, host: self.host)
                .run(iterations: self.iterations, cachedIterations: cachedIterations, coldMemos: self.cold)
            if let failure = measurement.failure {
                PinningCommand.Evaluate.warn("the chain is not trusted (\(failure.code)): untrusted verdicts are never cached, so the cached figure measures evaluation too")
            }
            let report = BenchReport(measurement: measurement, peakRSSBytes: ProcessMemory.peakResidentBytes(), pathBuilding: PathBuildingReport(since: start))
            if self.json {
                try JSONOutput.print(report)
            } else {
                print(report.humanReadable(iterations: self.iterations, cachedIterations: cachedIterations))
            }
        }
    }
}
