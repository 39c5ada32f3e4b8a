import ArgumentParser
import Foundation
import Testing

@testable import pinning

// Command lines parsed IN PROCESS, exactly as the `pinning` executable parses them before it runs anything
// (argument-parser's `parseAsRoot`: every option's `transform`, then every `validate()`), and refused with the
// words and exit status its `main` uses (``PinningCommand/refusalMessage(for:)``, exit 2). For tests of
// refusals that happen while parsing: hundreds of them cost a few milliseconds here, where each binary launch
// costs a process start (and, under AddressSanitizer, LeakSanitizer's scan at exit). The suites keep at least
// one real binary run per subcommand for the same refusals, and everything that needs a real peer or file.
//
// The tests reach the executable target's types with `@testable import pinning` (SwiftPM builds an executable
// module that a test target depends on so that tests can link it); the command definitions stay where they are.
// Only this file imports the module, so the CLI's internal names cannot collide with the tests' own.
enum InProcessCLI {
    /// What the binary would answer to `arguments` when parsing refuses them (exit 2, one message on stderr), or
    /// to `--help`/`--version` (exit 0, the text on stdout). A command line that parses is returned as status -1
    /// with a note instead: in process nothing is run, so a test expecting a refusal fails and says why.
    static func parse(_ arguments: [String]) -> CLIRun {
        do {
            let command = try PinningCommand.parseAsRoot(arguments)
            return CLIRun(
                arguments: arguments, status: -1, stdout: "",
                stderr: "parsed in process as \(type(of: command)); the binary would have run it\n")
        } catch {
            // The same decision as PinningCommand.exit(refusing:).
            if InputError.wrapped(in: error) == nil, PinningCommand.exitCode(for: error) == .success {
                return CLIRun(arguments: arguments, status: 0, stdout: PinningCommand.fullMessage(for: error) + "\n", stderr: "")
            }
            let message = PinningCommand.refusalMessage(for: error)
            return CLIRun(arguments: arguments, status: 2, stdout: "", stderr: message.isEmpty ? "" : message + "\n")
        }
    }
}
