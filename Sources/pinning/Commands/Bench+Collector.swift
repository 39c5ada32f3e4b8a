import ArgumentParser

extension PinningCommand.Bench {
    /// `pinning bench collector`: the collector's benchmark, run by the `pinning-collector` executable (`bench`),
    /// which links the collector; this binary does not.
    struct Collector: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "collector",
            abstract: "Measure the report collector: ingest reports/s into SQLite (and PostgreSQL), read latency with 1,000,000 stored reports, a flood (runs pinning-collector bench).",
            discussion: "Runs `pinning-collector bench` from the directory of this executable; `pinning bench collector --help` prints its options."
        )

        @Argument(parsing: .captureForPassthrough, help: "The benchmark's options.")
        var arguments: [String] = []

        func run() throws {
            try PinningCommand.Collector.handOver(["bench"] + self.arguments)
        }
    }
}
