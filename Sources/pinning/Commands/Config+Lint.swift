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
                critical extension, not delta or indirect), signed by a CA the entry can reach (one of its anchors, \
                intermediates in an anchors file included, or a platform root for an entry without anchorsOnly; any \
                other issuer is a problem), and current: a nextUpdate in the past is a problem, one within 7 days a \
                warning. Each problem names the CRL file.

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
                    // The member holding the certificate at fault, as a load failure names its member.
                    let member: String
                    switch source.files {
                    case .pem: member = "certificate"
                    case .pkcs12: member = "pkcs12"
                    }
                    identityProblems += errors.map { "domains[\"\(entry.key)\"].clientIdentity.\(member): \($0)" }
                    warnings += soon.map { "domains[\"\(entry.key)\"].clientIdentity.\(member): \($0)" }
                } catch {
                    identityProblems.append(error.description)
                }
            }
            for entry in configuration.entries {
                guard let revocation = entry.revocation else { continue }
                let (errors, notes) = Self.revocationProblems(revocation, entry: entry, configurationFile: self.file, at: time)
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

        /// What lint says about one entry's CRLs at `time`: problems (exit 2) and warnings, each naming the file the
        /// CRL came from.
        ///
        /// A CRL must be signed by a CA the entry can reach (issue 14's "signed by an anchor or intermediate the entry
        /// can reach"; it used to be a warning): one of its anchors, or for an entry without anchorsOnly a platform
        /// root, or an intermediate whose certificate sits in a CRL file beside its CRL (PEM) and is itself signed by
        /// a CA the entry can reach. A CRL of any other issuer is refused: its signature cannot be checked, and
        /// nothing shows that a chain of the entry passes through its issuer (in hard mode it would answer no
        /// status at all).
        static func revocationProblems(
            _ revocation: RevocationPolicy, entry: PinningConfiguration.Entry, configurationFile: String, at time: Date,
            platformRoots: () -> [Certificate] = { TrustRoots.platform.certificates }
        ) -> (errors: [String], warnings: [String]) {
            var errors: [String] = []
            var warnings: [String] = []
            let sources = Self.crlSources(entry, configurationFile: configurationFile)
            var reachable = entry.anchors
            if !entry.anchorsOnly && revocation.crls.contains(where: { crl in !entry.anchors.contains { $0.subject == crl.issuer } }) {
                reachable += platformRoots()
            }
            // Intermediates given beside their CRLs count once a reachable CA is shown to have issued them (a few
            // rounds: an intermediate may hang below another given intermediate).
            var offered = sources.flatMap(\.certificates).filter { !reachable.contains($0) }
            for _ in 0..<8 {
                let issued = offered.filter { candidate in reachable.contains { $0.subject == candidate.issuer && $0.isIssuer(of: candidate) } }
                if issued.isEmpty { break }
                reachable += issued
                offered.removeAll { issued.contains($0) }
            }
            for crl in revocation.crls {
                let source = sources.first { $0.crls.contains(crl) }
                let field = "domains[\"\(entry.key)\"].revocation.crls" + (source.map { "[\($0.index)]: \($0.path)" } ?? "")
                let name = "CRL of \(crl.issuer)"
                if let unusable = crl.unusable {
                    errors.append("\(field): the \(name) cannot be used: \(unusable)")
                    continue
                }
                let issuers = reachable.filter { $0.subject == crl.issuer }
                if issuers.isEmpty {
                    let known = entry.anchorsOnly ? "the entry's anchors" : "the entry's anchors, the platform roots"
                    errors.append(
                        "\(field): the \(name) is not from a CA the entry can reach (none of \(known) or an intermediate they issued), so its signature cannot be checked; put the issuing CA's certificate in this file beside the CRL (PEM) if a CA of the entry issued it, or remove the CRL"
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

        /// One of the entry's CRL files as written: the CRLs it holds and the certificates beside them (PEM).
        struct CRLSource {
            var index: Int
            var path: String
            var crls: [CertificateRevocationList]
            var certificates: [Certificate]
        }

        /// The entry's CRL files, read again as the configuration read them (relative to the configuration file), so
        /// a problem can name the file its CRL came from.
        static func crlSources(_ entry: PinningConfiguration.Entry, configurationFile: String) -> [CRLSource] {
            let base = URL(fileURLWithPath: configurationFile).deletingLastPathComponent()
            return entry.revocationFiles.enumerated().map { index, path in
                let resolved = path.hasPrefix("/") ? path : base.appendingPathComponent(path).path
                let bytes = FileManager.default.contents(atPath: resolved).map { Array($0.prefix(CertificateRevocationList.maximumSize + 1)) } ?? []
                let crls: [CertificateRevocationList]
                switch Result(catching: { () throws(CRLError) -> [CertificateRevocationList] in try CertificateRevocationList.read(bytes) }) {
                case .success(let read): crls = read
                // The configuration read it a moment ago; if it changed since, the problem is named without its file.
                case .failure: crls = []
                }
                // A DER CRL holds nothing else; in PEM, certificate blocks may sit beside the CRL blocks.
                let certificates = CertificateLoader.inspect(from: bytes, origin: path).certificates.compactMap(\.certificate)
                return CRLSource(index: index, path: path, crls: crls, certificates: certificates)
            }
        }
    }
}
