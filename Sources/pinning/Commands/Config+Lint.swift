import ArgumentParser
import Foundation
import Pinning
import PinningNIO
import X509

extension PinningCommand.Config {
    /// `pinning config lint FILE [--at RFC3339]`.
    struct Lint: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "lint",
            abstract: "Validate a host pinning configuration and warn about expired or soon-expiring pins.",
            discussion: """
                Entries with a clientIdentity have it loaded and checked: the files are read (with the passphrase from \
                passphraseEnv), the key must belong to the certificate, an extended key usage must include clientAuth, \
                and the certificate must be valid; one expiring within 30 days is a warning.

                Entries with revocation have each CRL checked: usable under RFC 5280 §5 (a CRL number, no unknown \
                critical extension, not delta or indirect), signed by one of the entry's anchors when one has the \
                CRL's issuer name (else a warning: it can only be checked against the intermediate a server \
                presents), and current: a nextUpdate in the past is a problem, one within 7 days a warning.

                Exit status: 0 valid (warnings, if any, are printed: pins that have expired or expire within 30 days), \
                2 invalid, listing every problem on stderr.
                """
        )

        @Argument(help: ArgumentHelp("The configuration file (JSON).", valueName: "file"))
        var file: String

        @Option(name: .long, help: ArgumentHelp("Judge expiry at this instant, RFC 3339 (default: now).", valueName: "RFC3339"))
        var at: String?

        func run() async throws {
            let time = try InputLoading.instant(self.at) ?? Date()
            let configuration: PinningConfiguration
            do {
                configuration = try PinningConfiguration(contentsOfFile: self.file)
            } catch {
                throw InputError(error.description)
            }
            let entries = configuration.entries.count
            var warnings = configuration.warnings(at: time)
            var identityProblems: [String] = []
            let environment = ProcessInfo.processInfo.environment
            for entry in configuration.entries {
                guard let source = entry.clientIdentity else { continue }
                do {
                    let identity = try TLSIdentity.load(source, entry: entry.key, environment: environment)
                    let (errors, soon) = identity.clientUseProblems(at: time)
                    identityProblems += errors.map { "domains[\"\(entry.key)\"].clientIdentity: \($0)" }
                    warnings += soon.map { "domains[\"\(entry.key)\"].clientIdentity: \($0)" }
                } catch {
                    identityProblems.append(error.description)
                }
            }
            for entry in configuration.entries {
                guard let revocation = entry.revocation else { continue }
                let (errors, notes) = Self.revocationProblems(revocation, entry: entry, at: time)
                identityProblems += errors
                warnings += notes
            }
            if !identityProblems.isEmpty {
                let count = identityProblems.count
                throw InputError(
                    "invalid pinning configuration \(self.file): \(count) problem\(count == 1 ? "" : "s")\n"
                        + identityProblems.map { "  " + $0 }.joined(separator: "\n")
                )
            }
            print(
                "\(self.file): valid; \(entries) entr\(entries == 1 ? "y" : "ies"), unlisted hosts \(configuration.unlistedHosts.rawValue)"
                    + (warnings.isEmpty ? "" : "; \(warnings.count) warning\(warnings.count == 1 ? "" : "s")")
            )
            for entry in configuration.entries {
                if entry.excludesSubdomainFromParentPolicy {
                    print("  \(entry.key): excluded from its parent's policy (not pinned; chain and name validated)")
                    continue
                }
                var traits = ["\(entry.pins.count) pin\(entry.pins.count == 1 ? "" : "s")"]
                traits.append(entry.enforce ? "enforced" : "report-only")
                if entry.includeSubdomains { traits.append("subdomains") }
                if let expires = entry.expires { traits.append("expires \(RFC3339.format(expires))") }
                if !entry.anchors.isEmpty {
                    traits.append("\(entry.anchors.count) anchor\(entry.anchors.count == 1 ? "" : "s")\(entry.anchorsOnly ? " only" : "")")
                }
                if !entry.reportURIs.isEmpty { traits.append("reports to \(entry.reportURIs.map(\.absoluteString).joined(separator: ", "))") }
                if entry.clientIdentity != nil { traits.append("client identity") }
                if let revocation = entry.revocation {
                    let count = revocation.crls.count
                    traits.append(
                        "revocation \(revocation.mode.rawValue)/\(revocation.scope.rawValue), \(count) CRL\(count == 1 ? "" : "s")"
                            + (revocation.fetch ? ", fetched from distribution points" : "")
                    )
                }
                print("  \(entry.key): \(traits.joined(separator: ", "))")
            }
            for warning in warnings {
                print("warning: \(warning)")
            }
        }

        /// What lint says about one entry's CRLs at `time`: problems (exit 2) and warnings.
        static func revocationProblems(_ revocation: RevocationPolicy, entry: PinningConfiguration.Entry, at time: Date) -> (errors: [String], warnings: [String]) {
            var errors: [String] = []
            var warnings: [String] = []
            let field = "domains[\"\(entry.key)\"].revocation"
            for crl in revocation.crls {
                let name = "CRL of \(crl.issuer)"
                if let unusable = crl.unusable {
                    errors.append("\(field): the \(name) cannot be used: \(unusable)")
                    continue
                }
                let issuers = entry.anchors.filter { $0.subject == crl.issuer }
                if issuers.isEmpty {
                    warnings.append(
                        "\(field): the \(name) is not from one of the entry's anchors; its signature is checked against the intermediate a server presents"
                    )
                } else {
                    var failures: [String] = []
                    for issuer in issuers {
                        do {
                            try crl.verifySignature(issuer: issuer)
                            failures = []
                            break
                        } catch {
                            failures.append(error.message)
                        }
                    }
                    if !failures.isEmpty {
                        errors.append("\(field): the \(name) is not signed by the entry's anchor: \(failures.joined(separator: "; "))")
                    }
                }
                if let next = crl.nextUpdate {
                    if next <= time {
                        errors.append("\(field): the \(name) is stale: its nextUpdate was \(RFC3339.format(next)); publish a new one")
                    } else if next.timeIntervalSince(time) <= 7 * 86400 {
                        let days = Int((next.timeIntervalSince(time) / 86400).rounded(.down))
                        warnings.append("\(field): the \(name) goes stale at \(RFC3339.format(next)), in \(days) day\(days == 1 ? "" : "s"); publish a new one before then")
                    }
                }
            }
            return (errors, warnings)
        }
    }
}
