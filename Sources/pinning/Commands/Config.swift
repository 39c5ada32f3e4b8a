import ArgumentParser
import Foundation
import Pinning

extension PinningCommand {
    /// `pinning config`: work with host pinning configurations.
    struct Config: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "config",
            abstract: "Work with host pinning configuration files.",
            subcommands: [Lint.self, Export.self, Import.self]
        )
    }
}
