import ArgumentParser
import Foundation
import Pinning
import X509

extension PinningCommand {
    /// `pinning evaluate`: judges a chain as a server sends it against a security policy.
    ///
    /// This is the declaration argument-parser reads (help, completion scripts, refusals); the evaluation itself is
    /// ``EvaluationRequest``, plain values that ``HotEvaluate`` fills without constructing this command (its
    /// `@Option` property wrappers build argument-parser's definitions: help texts, name sets, transforms).
    struct Evaluate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "evaluate",
            abstract: "Evaluate a certificate chain against a pinning policy (AFSecurityPolicy semantics, hardened).",
            discussion: """
                Without --mode the mode is public-key when pins are given (--pin or --pin-sha256), else none. A pin is \
                sha256/BASE64 (curl's sha256//BASE64 is accepted too, and --pin-sha256 takes curl's \
                "sha256//A;sha256//B" list).

                With --config FILE the host pinning configuration decides instead (--host required); --mode, --pin, \
                --pin-sha256, --anchor, --anchors-only, --allow-invalid-certificates and --no-validate-domain-name \
                cannot be combined with it. --send-reports delivers pin failure reports before exiting.

                Exit status: 0 trusted, 1 not trusted, 2 bad input.
                """
        )

        @Option(name: .long, help: ArgumentHelp("The chain as the server sends it, leaf first (PEM bundle, DER or PKCS#7).", valueName: "file"))
        var chain: String

        @Option(name: .long, help: ArgumentHelp("DNS name or IP address the leaf must be valid for; without it no name is checked.", valueName: "name"))
        var host: String?

        @OptionGroup var policyOptions: PolicyOptions

        @OptionGroup var revocationOptions: RevocationOptions

        @Flag(name: .long, help: "Print the result as JSON.")
        var json = false

        @Option(
            name: .long, parsing: .unconditional,
            help: ArgumentHelp("The port connected to, 1 to 65535, for failure reports (with --config; default 443).", valueName: "port"),
            transform: NumericOption.port(allowingZero: false)
        )
        var port: Int = 443

        @Flag(name: .customLong("send-reports"), help: "With --config: deliver pin failure reports to the entry's reportURIs before exiting (a few seconds at most).")
        var sendReports = false

        /// The parsed options as plain values: what runs.
        var request: EvaluationRequest {
            EvaluationRequest(
                chain: self.chain,
                host: self.host,
                policy: self.policyOptions.values,
                revocation: self.revocationOptions.values,
                json: self.json,
                port: self.port,
                sendReports: self.sendReports
            )
        }

        /// Option combinations, refused before any file is read (``EvaluationRequest/validate()``).
        func validate() throws {
            try self.request.validate()
        }

        func run() async throws {
            try await self.request.run()
        }

        static func warn(_ message: String) {
            FileHandle.standardError.write(Data("pinning: warning: \(message)\n".utf8))
        }
    }
}

/// One `pinning evaluate`, as plain values: what the command line asked for, after every option's `transform`.
/// ``PinningCommand/Evaluate`` (argument-parser's reading) and ``HotEvaluate`` (the hand-written one) both make one,
/// and it runs the same either way.
struct EvaluationRequest {
    var chain: String
    var host: String?
    var policy = PolicyValues()
    var revocation = RevocationValues()
    var json = false
    var port = 443
    var sendReports = false

    /// Option combinations, refused before any file is read.
    func validate() throws {
        if self.policy.config != nil {
            try self.policy.checkNoConflictWithConfiguration()
            _ = try self.configurationHost()
        } else if self.sendReports {
            throw InputError("--send-reports needs --config")
        }
    }

    /// The host `--config` judges: required, as a configuration pins hosts.
    func configurationHost() throws(InputError) -> String {
        guard let host = self.host else {
            throw InputError("--config needs --host: the configuration pins hosts")
        }
        return host
    }

    func run() async throws {
        if let config = self.policy.config {
            try await self.runWithConfiguration(config)
            return
        }
        let inputs = try self.loadInputs()
        let verdict = await inputs.policy.evaluate(inputs.trust, forDomain: self.host)
        let report = EvaluationReport(verdict: verdict, trust: inputs.trust, policy: inputs.policy, host: self.host)
        try JSONOutput.print(report, json: self.json)
        if !verdict.isTrusted {
            throw ExitCode(1)
        }
    }

    struct Inputs {
        var trust: ServerTrust
        var policy: SecurityPolicy
    }

    func loadInputs() throws(InputError) -> Inputs {
        let presented = try InputLoading.certificates(self.chain, option: "--chain")
        let made = try self.policy.makePolicy(presented: presented, host: self.host)
        let policy = made.policy
        var trust = made.trust
        trust.revocation = try self.revocation.policy()
        return Inputs(trust: trust, policy: policy)
    }
}
