import Foundation
import Testing

/// `pinning evaluate …` is read first by its own parser (HotEvaluate, issue 31's cold path) and only then, when
/// that parser does not take it, by the whole command tree. These tests hold the two readings side by side: every
/// evaluation reads the same option values both ways, and every other command line (a refusal, `--help`,
/// `--version`, a completion request) is left to the whole tree, so its words and exit status are unchanged.
@Suite struct HotEvaluateCLITests {
    /// Evaluations written in each form argument-parser accepts: `--name value`, `--name=value`, repeated options,
    /// flags, option groups (policy, revocation).
    static let evaluations: [[String]] = [
        ["evaluate", "--chain", "chain.pem"],
        ["evaluate", "--chain=chain.pem", "--roots", "root.pem", "--host", "bench.example"],
        ["evaluate", "--host", "bench.example", "--chain", "chain.pem", "--roots=root.pem", "--json"],
        ["evaluate", "--chain", "chain.pem", "--pin-sha256", "sha256/AAAA", "--pin-sha256", "sha256//BBBB;sha256//CCCC", "--mode", "public-key"],
        ["evaluate", "--chain", "chain.pem", "--pin", "a.cer", "--pin", "b.cer", "--mode", "certificate", "--allow-invalid-certificates"],
        ["evaluate", "--chain", "chain.p7b", "--host", "10.0.0.7", "--anchor", "fleet-root.pem", "--anchors-only", "--at", "2030-06-01T00:00:00Z", "--json"],
        ["evaluate", "--chain", "chain.pem", "--no-validate-domain-name", "--profile", "webpki"],
        ["evaluate", "--chain", "chain.pem", "--crl", "a.crl", "--crl", "b.crl", "--revocation", "hard", "--revocation-scope", "chain"],
        ["evaluate", "--chain", "chain.pem", "--host", "api.example.com", "--config", "pinning.json", "--port", "8443", "--send-reports"],
        ["evaluate", "--chain", "chain.pem", "--host", "api.example.com", "--config=pinning.json"],
        // Spellings the hand-written reader must take as argument-parser does (issue 31 item 4).
        ["evaluate", "--chain=", "chain.pem", "--host=", "a.example", "--json="],
        ["evaluate", "--chain=-", "--host=-x", "--roots=--json", "--at=a=b"],
        ["evaluate", "--chain", "", "--host", ""],
        ["evaluate", "--chain", "a.pem", "--chain", "b.pem", "--host", "a.example", "--host=b.example"],
        ["evaluate", "--chain", "chain.pem", "--port", "8443", "--port=1", "--json", "--json"],
        ["evaluate", "--chain", "chain.pem", "--mode", "none", "--mode=publicKey", "--profile", "WebPKI", "--profile=RFC5280"],
        ["evaluate", "--chain", "chain.pem", "--revocation=soft", "--revocation-scope=leaf", "--crl=c.crl", "--crl", "d.crl"],
        ["evaluate", "--chain", "chain.pem", "--"],
        ["evaluate", "--chain", "help", "--host", "evaluate", "--roots", "version=1"],
        ["evaluate", "--chain", "chain.pem", "--anchor", "a.pem", "--anchor=b.pem", "--anchors-only", "--anchors-only"],
        ["evaluate", "--chain", "chain.pem", "--host", "api.example.com", "--config", "pinning.json", "--send-reports", "--port", "65535"],
    ]

    @Test(arguments: evaluations)
    func anEvaluationReadsTheSameBothWays(_ arguments: [String]) {
        let readings = InProcessCLI.evaluateReadings(arguments)
        #expect(readings.tree != nil, "the whole tree refuses \(arguments): \(InProcessCLI.parse(arguments, wholeTreeOnly: true))")
        #expect(readings.hot != nil, "HotEvaluate does not take \(arguments)")
        #expect(readings.hot == readings.tree)
    }

    /// Refusals, help, the version and completion requests: HotEvaluate declines them all, and what the executable
    /// prints and its exit status are the whole tree's, word for word.
    static let leftToTheTree: [[String]] = [
        ["evaluate"],
        ["evaluate", "--chain"],
        ["evaluate", "--chain", "chain.pem", "--port", "0"],
        ["evaluate", "--chain", "chain.pem", "--port", "seventy"],
        ["evaluate", "--chain", "chain.pem", "--send-reports"],
        ["evaluate", "--chain", "chain.pem", "--config", "pinning.json"],
        ["evaluate", "--chain", "chain.pem", "--config", "pinning.json", "--host", "a.example", "--mode", "none"],
        ["evaluate", "--chain", "chain.pem", "--mode", "sometimes"],
        ["evaluate", "--chain", "chain.pem", "--frobnicate"],
        ["evaluate", "--chain", "chain.pem", "extra"],
        ["evaluate", "--chain", "chain.pem", "--", "--json"],
        ["evaluate", "--help"],
        ["evaluate", "-h"],
        ["evaluate", "--chain", "chain.pem", "--help"],
        ["evaluate", "--version"],
        ["evaluate", "--generate-completion-script", "bash"],
        ["evaluate", "--generate-completion-script"],
        ["evaluate", "--experimental-dump-help"],
        ["evaluate", "---completion", "--", "--chain", "0", "0"],
        ["evaluate", "--", "--chain", "chain.pem"],
        ["evaluate", "--chain", "chain.pem", "--json=true"],
        ["evaluate", "--chain", "chain.pem", "--host", "--json"],
        ["evaluate", "--chain", "chain.pem", "--host", "-x"],
        ["evaluate", "--chain", "chain.pem", "--port=0"],
        ["evaluate", "--chain", "chain.pem", "--profile", "x509"],
        ["evaluate", "--chain", "chain.pem", "--revocation", "maybe"],
        ["evaluate", "--chain", "chain.pem", "--revocation-scope=all"],
        ["evaluate", "--chain", "chain.pem", "--Chain", "x"],
        ["evaluate", "--chain", "chain.pem", "-chain", "x"],
        ["evaluate", "--chain", "chain.pem", "---json"],
        ["evaluate", "--chain", "chain.pem", "--=x"],
        ["evaluate", "--chain", "chain.pem", "--mode", "none", "--mode", "sometimes"],
        ["evaluate", "--chain", "chain.pem", "--config", "c.json", "--host", "a.example", "--pin-sha256", "sha256/AAAA"],
        ["evaluate", "--chain", "chain.pem", "--host", "a.example", "--send-reports", "--json"],
    ]

    @Test(arguments: leftToTheTree)
    func everythingElseIsTheWholeTreesAnswer(_ arguments: [String]) {
        #expect(InProcessCLI.evaluateReadings(arguments).hot == nil, "HotEvaluate took \(arguments)")
        let now = InProcessCLI.parse(arguments)
        let before = InProcessCLI.parse(arguments, wholeTreeOnly: true)
        #expect(now.status == before.status)
        #expect(now.stdout == before.stdout)
        #expect(now.stderr == before.stderr)
    }

    /// Other subcommands never reach HotEvaluate, even when an argument is the word `evaluate`.
    @Test func otherSubcommandsAreTheWholeTrees() {
        for arguments in [["inspect", "evaluate"], ["pins", "evaluate"], ["--version"], ["help", "evaluate"]] {
            #expect(InProcessCLI.evaluateReadings(arguments).hot == nil)
            let now = InProcessCLI.parse(arguments)
            let before = InProcessCLI.parse(arguments, wholeTreeOnly: true)
            #expect(now.status == before.status && now.stdout == before.stdout && now.stderr == before.stderr)
        }
    }
    /// The reader's vocabulary is `evaluate`'s: the long options argument-parser's help for the command lists under
    /// OPTIONS (less its built-in `--help`, and `--version` where the help lists it), each a flag exactly where the help shows no value, and the command's name.
    @Test func theReaderKnowsEveryOptionOfEvaluateAndNoOther() {
        let names = InProcessCLI.evaluateCommandNames
        #expect(names.reader == names.declared)
        let help = InProcessCLI.evaluateHelp
        var listed: [String: Bool] = [:]  // name: is a flag
        var inOptions = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("OPTIONS:") {
                inOptions = true
                continue
            }
            // Option lines: "  --chain <file>  The chain…", "  --json  Print…", "  -h, --help  Show…".
            guard inOptions, line.hasPrefix("  -") else { continue }
            let synopsis = line.dropFirst(2).components(separatedBy: "  ")[0].split(separator: " ")
            let isFlag = !synopsis.contains { $0.hasPrefix("<") }
            for word in synopsis where word.hasPrefix("--") {
                listed[String(word.dropFirst(2).filter { $0 != "," })] = isFlag
            }
        }
        #expect(listed.removeValue(forKey: "help") == true)
        listed.removeValue(forKey: "version")
        let ours = Dictionary(uniqueKeysWithValues: InProcessCLI.evaluateReaderOptions.map { ($0.name, $0.isFlag) })
        #expect(listed == ours)
        #expect(listed.count == 19)
    }

    /// The value lists of the enumerated options (help texts, refusals, completion scripts) are argument-parser's
    /// own, computed without its key path (the cold path's start-up).
    @Test func enumeratedValuesAreArgumentParsersList() {
        for list in InProcessCLI.enumeratedValueLists {
            #expect(!list.ours.isEmpty, "\(list.type)")
            #expect(list.ours == list.argumentParsers, "\(list.type)")
        }
    }

    /// The differential test: thousands of command lines generated from `evaluate`'s options, their spellings
    /// (`--name value`, `--name=value`), values that convert and values that do not, repetitions, `--`, words
    /// argument-parser treats specially (`-`, `-x`, `--help`, `--version`, empty words) and words it refuses.
    /// Each is either declined by the reader, or read by it exactly (every field, option groups included) as
    /// argument-parser reads it. The reader declines an evaluation argument-parser takes only where a value is a
    /// separate word beginning with `-` (argument-parser takes `-` alone as a value); the counts show both
    /// readings are exercised.
    @Test func generatedCommandLinesReadTheSameOrAreDeclined() {
        var random = SplitMix64(seed: 31_4)
        var accepted = 0
        var declinedByBoth = 0
        var declinedEvaluations: [[String]] = []
        let total = 1_500
        for _ in 0..<total {
            let arguments = Self.generatedCommandLine(&random)
            let readings = InProcessCLI.evaluateReadings(arguments)
            if let hot = readings.hot {
                accepted += 1
                #expect(hot == readings.tree, "\(arguments)")
            } else if readings.tree != nil {
                declinedEvaluations.append(arguments)
            } else {
                declinedByBoth += 1
            }
        }
        // Both outcomes occur often enough for the comparison to mean something.
        #expect(accepted >= total / 5, "only \(accepted) of \(total) taken")
        #expect(declinedByBoth >= total / 5, "only \(declinedByBoth) of \(total) refused")
        for arguments in declinedEvaluations {
            #expect(arguments.contains("-"), "an evaluation the reader declines: \(arguments)")
        }
    }

    /// A command line beginning `evaluate`: `--chain` most of the time, then up to eight more words.
    static func generatedCommandLine(_ random: inout SplitMix64) -> [String] {
        let options = InProcessCLI.evaluateReaderOptions
        let oddWords = [
            "--", "-", "", "-x", "-h", "--help", "--version", "--frobnicate", "--Chain", "-chain", "---json", "--=x", "extra",
            "help", "--generate-completion-script", "--experimental-dump-help", "--json=true", "--send-reports=",
        ]
        var words = ["evaluate"]
        var parts: [[String]] = []
        if random.next(100) < 85 {
            parts.append(Self.option("chain", isFlag: false, &random))
        }
        for _ in 0..<random.next(9) {
            switch random.next(100) {
            case 0..<85:
                let option = options[random.next(options.count)]
                parts.append(Self.option(option.name, isFlag: option.isFlag, &random))
            default:
                parts.append([oddWords[random.next(oddWords.count)]])
            }
        }
        // `--config` needs `--host` to pass `validate()`; give it one often, so such lines are compared too.
        if parts.contains(where: { $0.first?.hasPrefix("--config") == true }), random.next(100) < 70 {
            parts.append(Self.option("host", isFlag: false, &random))
        }
        for index in parts.indices.reversed() where index > 0 {
            parts.swapAt(index, random.next(index + 1))
        }
        for part in parts { words += part }
        return words
    }

    /// One option as `--name`, `--name value` or `--name=value`, with a value that converts most of the time.
    static func option(_ name: String, isFlag: Bool, _ random: inout SplitMix64) -> [String] {
        let flag = "--\(name)"
        if isFlag {
            return random.next(100) < 90 ? [flag] : ["\(flag)="]
        }
        let good: [String]
        switch name {
        case "port": good = ["443", "8443", "1", "65535"]
        case "mode": good = ["none", "public-key", "publicKey", "certificate"]
        case "profile": good = ["rfc5280", "webpki", "WebPKI", "RFC5280"]
        case "revocation": good = ["hard", "soft"]
        case "revocation-scope": good = ["leaf", "chain"]
        default: good = ["chain.pem", "a.example", "sha256/AAAA", "2030-06-01T00:00:00Z", "a=b", "évaluer", "help", "evaluate"]
        }
        let bad = ["", "-", "-x", "--json", "---x", "0", "65536", "seventy", " 443", "1e3", "sometimes", "x509", "maybe"]
        let value = random.next(100) < 88 ? good[random.next(good.count)] : bad[random.next(bad.count)]
        switch random.next(100) {
        case 0..<5: return [flag]  // the value missing
        case 5..<10: return ["\(flag)="]  // argument-parser's `--name=`, read as `--name`: the next word, if any
        case 10..<40: return ["\(flag)=\(value)"]
        default: return [flag, value]
        }
    }
}

/// A small deterministic generator (SplitMix64), so a failing command line is found again on every run.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound`.
    mutating func next(_ bound: Int) -> Int {
        Int(self.next() % UInt64(bound))
    }
}
