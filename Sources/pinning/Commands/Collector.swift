import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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

        /// `pinning-collector` in the directory of the running executable (symbolic links resolved).
        static func collectorPath() -> String {
            let executable = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
            return executable.resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("pinning-collector").path
        }

        func run() throws {
            try Self.handOver(self.arguments)
        }

        /// Replaces this process with `pinning-collector ARGUMENTS`; returns only by throwing.
        static func handOver(_ arguments: [String]) throws {
            let path = Self.collectorPath()
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw InputError(
                    "collector: \(path) is not there; the collector is its own executable: build it with `swift build --product pinning-collector` and install it beside pinning"
                )
            }
            let argv = [path] + arguments
            var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
            cArguments.append(nil)
            fflush(nil)
            execv(path, cArguments)
            let reason = String(cString: strerror(errno))
            for pointer in cArguments { free(pointer) }
            throw InputError("collector: cannot run \(path): \(reason)")
        }
    }
}
