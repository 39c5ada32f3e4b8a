import ArgumentParser
import Foundation

/// `pinning`: evaluate, inspect and pin certificates with swift-pinning.
///
/// Exit status across commands: 0 success (trusted), 1 not trusted, 2 bad input or usage, 3 connection/TLS/HTTP error.
@main
struct PinningCommand: AsyncParsableCommand {
    /// The version `pinning --version` prints: the one place it is written. swift-pinning has no release yet;
    /// raise this with each release.
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "pinning",
        abstract: "HTTPS trust control: evaluate chains against a pinning policy, inspect certificates, compute pins.",
        discussion: "Exit status: 0 trusted / success, 1 not trusted, 2 bad input (unreadable file, bad pin, bad date, bad option), 3 connection, TLS or HTTP error (check, serve).",
        version: PinningCommand.version,
        subcommands: [Evaluate.self, Check.self, Serve.self, Inspect.self, Pins.self, Config.self, PKI.self, Bench.self, Demo.self]
    )

    /// Parses and runs, mapping argument-parser's usage errors (its default exit status is 64) to our 2.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as InputError {
            FileHandle.standardError.write(Data("pinning: \(error.message)\n".utf8))
            Foundation.exit(2)
        } catch {
            let code = exitCode(for: error)
            if code == .success || code == ExitCode(1) || code == ExitCode(3) {
                exit(withError: error)
            }
            let message = fullMessage(for: error)
            if !message.isEmpty {
                FileHandle.standardError.write(Data((message + "\n").utf8))
            }
            Foundation.exit(2)
        }
    }
}

/// Bad input: printed as `pinning: MESSAGE` on stderr, exit status 2.
struct InputError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
