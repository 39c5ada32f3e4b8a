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
        // The bound on waiting for a FIFO's writer or reader, read here once: the core reads no environment.
        BoundedFileReader.setWaitSeconds(fromVariable: ProcessInfo.processInfo.environment[BoundedFileReader.waitVariable])
        if let refusal = Self.argumentNotUTF8(CommandLine.unsafeArgv, count: Int(CommandLine.argc)) {
            FileHandle.standardError.write(Data("pinning: \(refusal)\n".utf8))
            Foundation.exit(2)
        }
        let parsed: ParsedCommandLine
        do {
            parsed = try parseCommandLine(Array(CommandLine.arguments.dropFirst()))
        } catch {
            Self.exit(refusing: error)
        }
        do {
            switch parsed {
            case .evaluation(let request):
                // The hot path (issue 31): plain values, no command constructed, and no cast to a protocol below,
                // whose first use scans every protocol conformance record of the binary.
                try await request.run()
            case .command(let command):
                if var asyncCommand = command as? any AsyncParsableCommand {
                    try await asyncCommand.run()
                } else {
                    var command = command
                    try command.run()
                }
            }
        } catch {
            // An interrupted bench fails once its children are killed: its handler ends the process instead.
            BenchCleanup.waitIfInterrupted()
            Self.exit(after: error)
        }
        BenchCleanup.waitIfInterrupted()
    }

    /// Why the command line is refused when an argument is not UTF-8, or nil when every one is.
    ///
    /// `CommandLine.arguments` decodes each argument as UTF-8, replacing bytes that are not with U+FFFD: a file
    /// name `a\xFF.pem` would become another name, `a\u{FFFD}.pem`, and be read, or for `--keylog` and `--out`
    /// created, under it (the session keys once went to a file nobody asked for). The raw bytes are compared
    /// instead, and any argument that is not valid UTF-8 is refused before anything is read or written: failing
    /// closed, since a name is either the file the user meant or none. The argument is shown escaped by
    /// VisibleText's byte rules (UTF-8 characters such as `é` kept, control characters as `\u{…}`, each byte that is
    /// not UTF-8 as `\xNN`: `a\xFF.pem`), with the argument before it (the option whose value it is, usually).
    static func argumentNotUTF8(_ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>, count: Int) -> String? {
        var previous: String?
        for index in 1..<max(count, 1) {
            guard let pointer = argv[index] else { break }
            guard let text = String(validatingCString: pointer) else {
                let shown = DirectoryListing.escaped(UnsafeRawBufferPointer(start: pointer, count: strlen(pointer)))
                let after = previous.map { " (after \($0))" } ?? ""
                let named = "argument \(index), \(shown)\(after),"
                return "\(named) is not valid UTF-8; file names and other arguments must be UTF-8 (the name would otherwise be changed, and another file read or written)"
            }
            previous = text
        }
        return nil
    }

    /// Exits after `run()` threw `error`: ours (``InputError``) as bad input, exit 2; a verdict or a connection
    /// failure (exit codes 0, 1 and 3) as argument-parser's `exit(withError:)` ends it; anything else as a refusal.
    static func exit(after error: any Error) -> Never {
        if let input = error as? InputError {
            Self.exit(refusing: input)
        }
        if let code = error as? ExitCode {
            // `pinning evaluate`'s "not trusted" on the hot path. argument-parser's `exit(withError:)` prints nothing
            // for an `ExitCode` and exits with it, but first renders the whole command tree's usage text, which it
            // then discards; so ours exits with the same status directly (2 for any code that is not 0, 1 or 3, as
            // `exit(refusing:)` gives, also without words).
            Foundation.exit(Self.isVerdict(code) ? code.rawValue : 2)
        }
        if Self.isVerdict(exitCode(for: error)) {
            exit(withError: error)
        }
        Self.exit(refusing: error)
    }

    /// Whether a command ended with one of its own statuses (trusted 0, not trusted 1, could not connect 3) rather
    /// than a refusal of its input.
    private static func isVerdict(_ code: ExitCode) -> Bool {
        code == .success || code == ExitCode(1) || code == ExitCode(3)
    }

    /// A command line as the executable reads it: an evaluation in plain values, or any other command.
    enum ParsedCommandLine {
        /// `pinning evaluate …` as ``HotEvaluate`` reads it.
        case evaluation(EvaluationRequest)
        /// What the whole command tree (argument-parser) read.
        case command(any ParsableCommand)
    }

    /// The command line as the executable reads it: `pinning evaluate …` first through ``HotEvaluate`` (its
    /// options alone, into plain values), everything else, and every command line that reader does not take as
    /// an evaluation, through the whole command tree (`parseAsRoot`), whose answer (the command, or the refusal
    /// and its words) is final.
    static func parseCommandLine(_ arguments: [String]) throws -> ParsedCommandLine {
        if let request = HotEvaluate.parse(arguments) {
            return .evaluation(request)
        }
        if let unknown = Self.unknownHelpTopic(arguments) {
            throw unknown
        }
        return .command(try parseAsRoot(arguments))
    }

    /// `pinning help NAME…` naming a subcommand that does not exist, refused in one line. argument-parser's `help`
    /// skips the names it does not find and prints the help of the last one it did, the top level's for `pinning
    /// help nonexist`, with exit status 0, where `pinning nonexist` is refused with 2: a typo looked like an answer.
    static func unknownHelpTopic(_ arguments: [String]) -> InputError? {
        guard arguments.first == "help" else { return nil }
        var commands = Self.configuration.subcommands
        var path = ["pinning"]
        for name in arguments.dropFirst() where !name.hasPrefix("-") {
            var found: (any ParsableCommand.Type)?
            for command in commands where command._commandName == name || command.configuration.aliases.contains(name) {
                found = command
                break
            }
            guard let command = found else {
                var known: [String] = []
                for command in commands { known.append(command._commandName) }
                let choices = known.isEmpty ? "\(path.joined(separator: " ")) has no subcommands" : "use one of \(known.joined(separator: ", "))"
                return InputError("help: unknown subcommand \"\(VisibleText.escaped(name))\" of \(path.joined(separator: " ")); \(choices)")
            }
            commands = command.configuration.subcommands
            path.append(command._commandName)
        }
        return nil
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
