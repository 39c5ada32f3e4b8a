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
}
