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

        @Option(name: .long, help: ArgumentHelp("The chain as the server sends it, leaf first (PEM bundle, DER or PKCS#7).", valueName: "file"))
        var chain: String

        @Option(name: .long, help: ArgumentHelp("DNS name or IP address the leaf must be valid for; without it no name is checked.", valueName: "name"))
        var host: String?

        @Option(name: .long, help: ArgumentHelp("Pinning mode: none, public-key or certificate.", valueName: "mode"))
        var mode: String?

        @Option(name: .long, help: ArgumentHelp("A pinned certificate file (any supported format; a bundle pins each certificate). Repeatable.", valueName: "file"))
        var pin: [String] = []

        @Option(name: .customLong("pin-sha256"), help: ArgumentHelp("An SPKI pin, sha256/BASE64. Repeatable.", valueName: "pin"))
        var pinSHA256: [String] = []

        @Option(name: .long, help: ArgumentHelp("A custom trust anchor file, added to the platform roots. Repeatable.", valueName: "file"))
        var anchor: [String] = []

        @Flag(name: .customLong("anchors-only"), help: "Trust only the --anchor certificates, not the platform roots.")
        var anchorsOnly = false

        @Option(name: .long, help: ArgumentHelp("A PEM bundle or directory that replaces the platform root store.", valueName: "file"))
        var roots: String?

        @Flag(name: .customLong("allow-invalid-certificates"), help: "Accept chains that do not validate (AFSecurityPolicy's allowInvalidCertificates). Unsafe.")
        var allowInvalidCertificates = false

        @Flag(name: .customLong("no-validate-domain-name"), help: "Do not check the host name (validatesDomainName = NO). Unsafe.")
        var noValidateDomainName = false

        @Option(name: .long, help: ArgumentHelp("The validation instant, RFC 3339 (default: now).", valueName: "RFC3339"))
        var at: String?

        @Option(name: .long, help: ArgumentHelp("Certificate profile: rfc5280 (default) or webpki.", valueName: "profile"))
        var profile: String?

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
            FileHandle.standardError.write(Data("pinning: warning: \(message)\n".utf8))
        }

        struct Inputs {
            var trust: ServerTrust
            var policy: SecurityPolicy
        }

        func loadInputs() throws(InputError) -> Inputs {
            let presented = try InputLoading.certificates(self.chain, option: "--chain")
            var pinnedCertificates: [Certificate] = []
            for path in self.pin {
                pinnedCertificates += try InputLoading.certificates(path, option: "--pin")
            }
            let pins = try InputLoading.pins(self.pinSHA256)
            var anchors: [Certificate] = []
            for path in self.anchor {
                anchors += try InputLoading.certificates(path, option: "--anchor")
            }
            let roots = try InputLoading.roots(self.roots)
            let time = try InputLoading.instant(self.at)
            var profile = ValidationProfile.rfc5280
            if let name = self.profile {
                guard let parsed = ValidationProfile(name) else {
                    throw InputError("--profile: unknown profile \"\(name)\"; use rfc5280 or webpki")
                }
                profile = parsed
            }
            let mode: SecurityPolicy.PinningMode
            switch self.mode {
            case nil:
                mode = (pinnedCertificates.isEmpty && pins.isEmpty) ? .none : .publicKey
            case "none":
                mode = .none
            case "public-key", "publicKey":
                mode = .publicKey
            case "certificate":
                mode = .certificate
            case let other?:
                throw InputError("--mode: unknown mode \"\(other)\"; use none, public-key or certificate")
            }
            if let host = self.host {
                do {
                    _ = try PeerName(host)
                } catch {
                    throw InputError("--host: \(error.description)")
                }
            }
            if mode == .none && !(pinnedCertificates.isEmpty && pins.isEmpty) {
                Self.warn("--mode none ignores the pins given with --pin/--pin-sha256; use --mode public-key or certificate to enforce them")
            }
            for skipped in roots?.skipped ?? [] {
                Self.warn("--roots: skipped \(skipped.description)")
            }
            var policy = SecurityPolicy(pinningMode: mode, pinnedCertificates: pinnedCertificates, pins: pins)
            policy.allowInvalidCertificates = self.allowInvalidCertificates
            policy.validatesDomainName = !self.noValidateDomainName
            let trust = ServerTrust(
                certificates: presented,
                anchors: anchors,
                anchorsOnly: self.anchorsOnly,
                platformRoots: roots,
                validationTime: time ?? Date(),
                profile: profile
            )
            return Inputs(trust: trust, policy: policy)
        }
    }
}
