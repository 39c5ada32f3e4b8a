import ArgumentParser
import Foundation
import Pinning

/// `pinning`: evaluate, inspect and pin certificates with swift-pinning.
///
/// Exit status across commands: 0 success (trusted), 1 not trusted, 2 bad input or usage, 3 connection/TLS/HTTP error.
@main
struct PinningCommand: AsyncParsableCommand {
    /// The version `pinning --version` prints: the core's ``SwiftPinning/version`` (the one place it is written,
    /// so the failure reports' `library-version` says the same).
    static let version = SwiftPinning.version

    static let configuration = CommandConfiguration(
        commandName: "pinning",
        abstract: "HTTPS trust control: evaluate chains against a pinning policy, inspect certificates, compute pins.",
        discussion: "Exit status: 0 trusted / success, 1 not trusted, 2 bad input (unreadable file, bad pin, bad date, bad option), 3 connection, TLS or HTTP error (check, serve).",
        version: PinningCommand.version,
        subcommands: [Evaluate.self, Check.self, Serve.self, Proxy.self, Inspect.self, Pins.self, Config.self, PKI.self, Bench.self, Demo.self, TUF.self, PinSet.self, Collector.self]
    )

    /// Parses and runs. Every refusal of the command line exits 2 (argument-parser's own default is 64): ours
    /// (``InputError``, thrown by an option's `transform`, a `validate()` or `run()`) as `pinning: MESSAGE`,
    /// argument-parser's (unknown option, missing value, a numeric option out of range) in its own words.
    static func main() async {
        var command: any ParsableCommand
        do {
            command = try parseCommandLine(Array(CommandLine.arguments.dropFirst()))
        } catch {
            Self.exit(refusing: error)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as InputError {
            Self.exit(refusing: error)
        } catch {
            let code = exitCode(for: error)
            if code == .success || code == ExitCode(1) || code == ExitCode(3) {
                exit(withError: error)
            }
            Self.exit(refusing: error)
        }
    }

    /// The command line as the executable reads it: `pinning evaluate …` first through ``HotEvaluate`` (its
    /// options alone), everything else, and every command line that parser does not take as an evaluation, through
    /// the whole command tree (`parseAsRoot`), whose answer (the command, or the refusal and its words) is final.
    static func parseCommandLine(_ arguments: [String]) throws -> any ParsableCommand {
        if let evaluate = HotEvaluate.parse(arguments) {
            return evaluate
        }
        return try parseAsRoot(arguments)
    }

    /// Prints why the command line or its input was refused and exits 2 (0 for `--help` and `--version`).
    static func exit(refusing error: any Error) -> Never {
        if InputError.wrapped(in: error) == nil, exitCode(for: error) == .success {
            exit(withError: error)
        }
        let message = Self.refusalMessage(for: error)
        if !message.isEmpty {
            FileHandle.standardError.write(Data((message + "\n").utf8))
        }
        Foundation.exit(2)
    }

    /// What ``exit(refusing:)`` prints on stderr (before its line break) for a refusal: ours as `pinning: MESSAGE`,
    /// argument-parser's in its own words. The CLI tests check parse-time refusals through this, in process.
    static func refusalMessage(for error: any Error) -> String {
        if let input = InputError.wrapped(in: error) {
            return "pinning: \(input.message)"
        }
        return fullMessage(for: error)
    }
}

/// `pinning evaluate …` read without the rest of the command tree (issue 31, the cold path: a script evaluates one
/// chain per process). For every command line, the whole tree's parse (`parseAsRoot`) also runs argument-parser's
/// two `--generate-completion-script` parsers and builds the tree of all thirteen subcommands; in a binary this
/// size, each first use of a generic type or dynamic cast there scans every protocol conformance record, and perf
/// put parsing at ~35% of `pinning evaluate`'s process time, the completion check alone at ~40% of that.
///
/// This root declares exactly `Evaluate`'s options (the same declarations, through `@OptionGroup`, which runs
/// `Evaluate.validate()` and its option groups' `validate()` as the subcommand's parse does) and names `pinning`
/// as its super-command (argument-parser's `_superCommandName`, the configuration it reads to leave the completion
/// check to the super-command). It only ever says yes: a command line it refuses, or reads as a request for help
/// (`--help`, `-h`), is read again by the whole tree, which gives the refusal, the help text, `--version` and
/// `--generate-completion-script` exactly as before. So the words, exit statuses and built-in flags are
/// argument-parser's own in every case; only a command line that is an evaluation skips the detour.
struct HotEvaluate: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "evaluate", _superCommandName: "pinning")

    @OptionGroup var evaluate: PinningCommand.Evaluate

    /// The evaluation `arguments` (after the executable's name) ask for, or nil when they are something else or
    /// are not accepted here (then the whole tree decides, and refuses in its own words).
    static func parse(_ arguments: [String]) -> PinningCommand.Evaluate? {
        guard arguments.first == PinningCommand.Evaluate.configuration.commandName else {
            return nil
        }
        do {
            // A request for help parses as argument-parser's help command, not as this root.
            return (try parseAsRoot(Array(arguments.dropFirst())) as? HotEvaluate)?.evaluate
        } catch {
            // Not decided here: the whole tree reads the same command line again and reports this refusal.
            return nil
        }
    }
}

/// Bad input: printed as `pinning: MESSAGE` on stderr, exit status 2.
struct InputError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

extension InputError {
    /// The ``InputError`` that `error` is or carries. argument-parser keeps an error thrown by a `transform` or a
    /// `validate()` inside its own error (an internal type, printed as "The value … is invalid for …" with the
    /// usage text); ours is found among the values that error stores, so it prints as any other bad input does.
    /// The search is bounded: argument-parser's error is a few levels deep (command error, parser error, payload).
    static func wrapped(in error: any Error) -> InputError? {
        func search(_ value: Any, depth: Int) -> InputError? {
            if let input = value as? InputError { return input }
            guard depth < 6 else { return nil }
            for child in Mirror(reflecting: value).children {
                if let found = search(child.value, depth: depth + 1) { return found }
            }
            return nil
        }
        return search(error, depth: 0)
    }
}
