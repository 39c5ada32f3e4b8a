import ArgumentParser

extension PinningCommand {
    /// `pinning collector …`: hands over to the `pinning-collector` executable installed beside `pinning`.
    ///
    /// The collector links an HTTP server, SQLite, PostgreSQL and templates that the rest of the CLI never needs;
    /// keeping them in an executable of their own keeps the `pinning` binary's size and start-up as they were.
    /// The hand-over is `execv`: the collector replaces this process (same pid, stdin/stdout/stderr and signals),
    /// with every argument after `collector` passed on untouched, `--help` included.
    struct Collector: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "collector",
            abstract: "Receive pin failure reports into SQLite or PostgreSQL and show them on a dashboard (runs pinning-collector).",
            discussion: """
                Runs the `pinning-collector` executable from the directory this `pinning` executable is in (`swift build` \
                puts both in .build/debug or .build/release; install both into the same directory). `pinning collector --help` \
                prints its options.

                pinning collector --listen 127.0.0.1:8090 --database sqlite:PATH | postgres://USER@HOST:PORT/DB --token-file FILE \
                [--retention-days 90] [--max-report-bytes 65536] [--rate N/min]
                """
        )

        @Argument(parsing: .captureForPassthrough, help: "The collector's options.")
        var arguments: [String] = []

        func run() throws {
            try Self.handOver(self.arguments)
        }

        /// Replaces this process with `pinning-collector ARGUMENTS`; returns only by throwing.
        static func handOver(_ arguments: [String]) throws {
            try Companion.handOver(to: Companion.collector, command: "collector", arguments: arguments)
        }
    }
}
