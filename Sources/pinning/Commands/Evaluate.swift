import ArgumentParser
import Foundation
import Pinning
import X509

extension PinningCommand {
    /// `pinning evaluate`: judges a chain as a server sends it against a security policy.
    struct Evaluate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Evaluate a certificate chain against a pinning policy (AFSecurityPolicy semantics, hardened).",
            discussion: """
                Exit status: 0 trusted, 1 not trusted, 2 bad input.
                Without --mode the mode is public-key when pins are given (--pin or --pin-sha256), else none.
                With --config FILE the host pinning configuration decides instead (--host required); --mode, --pin,
                --pin-sha256, --anchor, --anchors-only, --allow-invalid-certificates and --no-validate-domain-name
                cannot be combined with it. --send-reports delivers pin failure reports before exiting.
                """
        )

        @OptionGroup var options: PolicyOptions

        @Flag(name: .long, help: "Print the result as JSON.")
        var json = false

        @Option(name: .long, help: ArgumentHelp("A host pinning configuration (JSON) that decides instead of the flags.", valueName: "file"))
        var config: String?

        @Option(name: .long, help: ArgumentHelp("The port connected to, for failure reports (with --config; default 443).", valueName: "port"))
        var port: Int = 443

        @Flag(name: .customLong("send-reports"), help: "With --config: deliver pin failure reports to the entry's reportURIs before exiting (a few seconds at most).")
        var sendReports = false

        func run() async throws {
            if let config = self.config {
                try await self.runWithConfiguration(config)
                return
            }
            if self.sendReports {
                throw InputError("--send-reports needs --config")
            }
            let inputs = try self.loadInputs()
            let verdict = await inputs.policy.evaluate(inputs.trust, forDomain: self.host)
            let report = EvaluationReport(verdict: verdict, trust: inputs.trust, policy: inputs.policy, host: self.host)
            if self.json {
                try JSONOutput.print(report)
            } else {
                print(report.humanReadable)
            }
            if !verdict.isTrusted {
                throw ExitCode(1)
            }
        }

        static func warn(_ message: String) {
            PolicyOptions.warn(message)
        }

        var chain: String { self.options.chain }
        var host: String? { self.options.host }
        var mode: String? { self.options.mode }
        var pin: [String] { self.options.pin }
        var pinSHA256: [String] { self.options.pinSHA256 }
        var anchor: [String] { self.options.anchor }
        var anchorsOnly: Bool { self.options.anchorsOnly }
        var roots: String? { self.options.roots }
        var allowInvalidCertificates: Bool { self.options.allowInvalidCertificates }
        var noValidateDomainName: Bool { self.options.noValidateDomainName }
        var at: String? { self.options.at }
        var profile: String? { self.options.profile }

        func loadInputs() throws(InputError) -> PolicyOptions.Inputs {
            try self.options.loadInputs()
        }
    }
}
