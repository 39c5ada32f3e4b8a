import ArgumentParser
import Foundation
import Pinning

extension PinningCommand {
    /// `pinning bench`: evaluations per second (uncached and cached), latency and peak memory; `pinning bench
    /// handshake`: loopback TLS handshakes per second.
    struct Bench: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "bench",
            abstract: "Measure evaluation throughput (uncached and cached) and loopback handshake throughput.",
            subcommands: [Evaluations.self, Handshake.self, Proxy.self, Revocation.self, Hostile.self, PinSet.self, Collector.self],
            defaultSubcommand: Evaluations.self
        )
    }
}
