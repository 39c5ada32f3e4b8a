import ArgumentParser
import Foundation
import Pinning
import PinningProxy
import Testing
import X509

@testable import pinning

// Command lines parsed IN PROCESS, exactly as the `pinning` executable parses them before it runs anything
// (`PinningCommand.parseCommandLine`: argument-parser runs every option's `transform`, then every `validate()`;
// `evaluate` goes first through its own parser, HotEvaluate, then the whole tree), and refused with the
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
    /// `wholeTreeOnly`: parse with argument-parser's `parseAsRoot` alone, as the executable did before HotEvaluate,
    /// so a test can hold the two readings side by side.
    static func parse(_ arguments: [String], wholeTreeOnly: Bool = false) -> CLIRun {
        do {
            let parsed: PinningCommand.ParsedCommandLine =
                try wholeTreeOnly ? .command(PinningCommand.parseAsRoot(arguments)) : PinningCommand.parseCommandLine(arguments)
            let what: String
            switch parsed {
            case .evaluation: what = "an evaluation (HotEvaluate)"
            case .command(let command): what = "\(type(of: command))"
            }
            return CLIRun(
                arguments: arguments, status: -1, stdout: "",
                stderr: "parsed in process as \(what); the binary would have run it\n")
        } catch {
            // The same decision as PinningCommand.exit(refusing:).
            if InputError.wrapped(in: error) == nil, PinningCommand.exitCode(for: error) == .success {
                return CLIRun(arguments: arguments, status: 0, stdout: PinningCommand.fullMessage(for: error) + "\n", stderr: "")
            }
            let message = PinningCommand.refusalMessage(for: error)
            return CLIRun(arguments: arguments, status: 2, stdout: "", stderr: message.isEmpty ? "" : message + "\n")
        }
    }

    /// `pinning evaluate …` as HotEvaluate reads it and as the whole command tree reads it, each written out field
    /// by field (`dump` of the ``EvaluationRequest`` each makes: every option's parsed value, option groups
    /// included), or nil where that parser does not
    /// read it as an evaluation (a refusal, or a request for help or the version).
    static func evaluateReadings(_ arguments: [String]) -> (hot: String?, tree: String?) {
        func written(_ request: EvaluationRequest?) -> String? {
            guard let request else { return nil }
            var text = ""
            dump(request, to: &text)
            return text
        }
        let tree: PinningCommand.Evaluate?
        do {
            tree = try PinningCommand.parseAsRoot(arguments) as? PinningCommand.Evaluate
        } catch {
            tree = nil
        }
        // What the executable runs either way: HotEvaluate's plain values as they stand; argument-parser's
        // command's options as the plain values `Evaluate.run()` runs.
        return (written(HotEvaluate.parse(arguments)), written(tree?.request))
    }
    /// The options HotEvaluate's reader knows, as typed after `--`, each with whether it is a flag.
    static var evaluateReaderOptions: [(name: String, isFlag: Bool)] {
        HotEvaluate.Name.allCases.map { ($0.rawValue, $0.isFlag) }
    }

    /// The subcommand name HotEvaluate's reader looks for, and the one `Evaluate` declares.
    static var evaluateCommandNames: (reader: String, declared: String?) {
        (HotEvaluate.commandName, PinningCommand.Evaluate.configuration.commandName)
    }

    /// argument-parser's help text for `pinning evaluate`, on lines as wide as it needs.
    static var evaluateHelp: String {
        PinningCommand.Evaluate.helpMessage(columns: 10_000)
    }
    /// For every enumerated option type: its `allValueStrings` (ours, a plain map of the raw values) and what
    /// argument-parser's default for a `CaseIterable` `RawRepresentable` type computes
    /// (`allCases.map(\.rawValue.defaultValueDescription)`), which ours replaces.
    static var enumeratedValueLists: [(type: String, ours: [String], argumentParsers: [String])] {
        func lists<T: EnumeratedArgument & RawRepresentable>(_ type: T.Type) -> (String, [String], [String])
        where T.RawValue == String {
            ("\(type)", T.allValueStrings, T.allCases.map(\.rawValue.defaultValueDescription))
        }
        return [
            lists(PinningModeArgument.self), lists(ProfileArgument.self), lists(RevocationModeArgument.self),
            lists(RevocationScopeArgument.self), lists(TLSVersionArgument.self), lists(ExportFormatArgument.self),
            lists(ImportFormatArgument.self), lists(BenchKeyArgument.self), lists(KeyTypeArgument.self),
            lists(RevocationReasonArgument.self),
        ]
    }

    /// `pinning check ARGUMENTS`' client identity loaded in process as the command loads it before connecting
    /// (`Check.loadIdentity()`, after parsing): nil when it loads, else the line the binary prints for its
    /// refusal (exit 2). Nil too when the arguments do not parse as `check` (the test then fails on the nil).
    static func checkIdentityRefusal(_ arguments: [String]) -> String? {
        let parsed: PinningCommand.Check
        do {
            guard let check = try PinningCommand.parseAsRoot(["check", "https://localhost:1/"] + arguments) as? PinningCommand.Check else {
                return nil
            }
            parsed = check
        } catch {
            return "did not parse: \(PinningCommand.refusalMessage(for: error))"
        }
        do {
            _ = try parsed.loadIdentity()
            return nil
        } catch {
            return PinningCommand.refusalMessage(for: error)
        }
    }
}

// `pinning proxy --tunnel SPEC` as the command reads it at start-up.
extension InProcessCLI {
    /// The upstream host and port `--tunnel spec` forwards to, or the line the binary prints refusing it (exit 2).
    static func tunnelUpstream(_ spec: String) -> (host: String?, port: Int?, refusal: String?) {
        do {
            let tunnel = try PinningCommand.Proxy.tunnel(spec, allowRemote: false)
            return (tunnel.host, tunnel.port, nil)
        } catch {
            return (nil, nil, PinningCommand.refusalMessage(for: error))
        }
    }
}

// The evaluation report's pieces (issue 31's cold path), next to what they replaced.
extension InProcessCLI {
    /// Each date as the reports now print it (`ReportDate`) and as Foundation's `ISO8601FormatStyle` prints it
    /// (`RFC3339.format`, which the reports used before).
    static func reportDates(_ dates: [Date]) -> [(ours: String, foundation: String)] {
        dates.map { (ReportDate.format($0), RFC3339.format($0)) }
    }

    /// A certificate line of `pinning evaluate`'s report, as the report now builds it and as it was built before
    /// (from `CertificateInfo`, with the synthesized encoding): its text fields and its JSON under `JSONOutput`'s
    /// settings, each with the date strategy of its time (`ReportDate` now, `RFC3339.format` before).
    static func reportLines(_ certificates: [Certificate]) throws -> [(ours: [String], before: [String])] {
        struct LineBefore: Encodable {
            var index: Int
            var subject: String
            var issuer: String
            var notValidBefore: Date
            var notValidAfter: Date
            var spkiPin: String
            var sha256Fingerprint: String
            var onValidatedPath: Bool?
        }
        func encoder(_ format: @escaping @Sendable (Date) -> String) -> JSONEncoder {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            encoder.dateEncodingStrategy = .custom { date, encoder in
                var container = encoder.singleValueContainer()
                try container.encode(format(date))
            }
            return encoder
        }
        let now = encoder { ReportDate.format($0) }
        let before = encoder { RFC3339.format($0) }
        var result: [(ours: [String], before: [String])] = []
        for (index, certificate) in certificates.enumerated() {
            let onPath: Bool? = [nil, true, false][index % 3]
            let line = EvaluationReport.CertificateLine(index: index, certificate: certificate, onValidatedPath: onPath)
            let info = CertificateInfo(certificate)
            let old = LineBefore(
                index: index, subject: info.subject, issuer: info.issuer, notValidBefore: info.notValidBefore,
                notValidAfter: info.notValidAfter, spkiPin: info.spkiPin, sha256Fingerprint: info.sha256Fingerprint,
                onValidatedPath: onPath)
            result.append(
                (
                    [
                        line.subject, line.issuer, ReportDate.format(line.notValidBefore), ReportDate.format(line.notValidAfter),
                        line.spkiPin, String(decoding: try now.encode(line), as: UTF8.self),
                    ],
                    [
                        old.subject, old.issuer, RFC3339.format(old.notValidBefore), RFC3339.format(old.notValidAfter),
                        old.spkiPin, String(decoding: try before.encode(old), as: UTF8.self),
                    ]
                ))
        }
        return result
    }
}

extension InProcessCLI {
    /// Each name as the report now writes it and as swift-certificates describes it (`String(describing:)`, which
    /// `CertificateInfo` used).
    static func reportNames(_ names: [DistinguishedName]) -> [(ours: String, x509: String)] {
        names.map { (EvaluationReport.CertificateLine.name($0), String(describing: $0)) }
    }
}

extension InProcessCLI {
    /// `pinning check`'s text report for a response whose redirect, status line's reason and body the server wrote.
    static func checkText(url: String, finalURL: String, status: Int, reasonPhrase: String, body: String, error: String?) -> String {
        var report = CheckReport(url: url)
        report.finalURL = finalURL
        report.status = status
        report.reasonPhrase = reasonPhrase
        report.body = body
        report.error = error
        return report.humanReadable
    }

    /// One of `pinning proxy`'s JSON log lines (`--log-format json`: reports, pin set events).
    static func proxyJSONLine(_ fields: [String: String]) -> String {
        PinningCommand.Proxy.jsonLine(fields)
    }
}

extension InProcessCLI {
    /// What `pinning check ARGUMENTS` would connect to, as its `run()` reads the URL and the `--resolve` entries before
    /// anything else: the URL and each entry as `host:port` (sorted), or the one line the binary would print for a
    /// refusal (exit 2). Nothing is connected to.
    static func checkTarget(_ arguments: [String]) -> (url: String?, resolve: [String], refusal: String?) {
        do {
            guard let check = try PinningCommand.parseAsRoot(["check"] + arguments) as? PinningCommand.Check else {
                return (nil, [], "not parsed as check")
            }
            let url = try check.parsedURL()
            let resolve = try check.parsedResolve().keys.map { "\($0.host):\($0.port)" }.sorted()
            return (url.absoluteString, resolve, nil)
        } catch {
            return (nil, [], PinningCommand.refusalMessage(for: error))
        }
    }
}

extension InProcessCLI {
    /// What `pinning serve --bind TEXT` listens on: the host name or address handed to bind, or the refusal's words.
    static func bindHost(_ text: String) -> (host: String?, refusal: String?) {
        do {
            return (try PinningCommand.Serve.bindAddress(text, port: 8443).host, nil)
        } catch {
            return (nil, error.message)
        }
    }
}
