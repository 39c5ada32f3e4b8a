import ArgumentParser
import Foundation
import Pinning
import PinningNIO
import PinningPKI
import X509

extension PinningCommand.PKI {
    /// `pinning pki issue DIR (--intermediate NAME | --server NAME [--dns D]... [--ip A]... | --client NAME) …`.
    struct Issue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "issue",
            abstract: "Issue an intermediate CA, a server certificate or a client certificate.",
            discussion: """
                Issued by the root (DIR/root.pem) or by --issuer. A server certificate's common name is its first \
                --dns name (else its first --ip); with neither, NAME itself is the DNS name. Server and client \
                certificates also get DIR/NAME-chain.pem: the certificate and its intermediates, leaf first.
                """
        )

        @Argument(help: ArgumentHelp("The PKI directory made by `pinning pki init`.", valueName: "DIR"))
        var directory: String

        @Option(name: .long, help: ArgumentHelp("Issue an intermediate CA called NAME.", valueName: "NAME"))
        var intermediate: String?

        @Option(name: .long, help: ArgumentHelp("Issue a TLS server certificate (serverAuth) called NAME.", valueName: "NAME"))
        var server: String?

        @Option(name: .long, help: ArgumentHelp("Issue a TLS client certificate (clientAuth) called NAME.", valueName: "NAME"))
        var client: String?

        @Option(
            name: .customLong("dns"),
            help: ArgumentHelp(
                "A DNS subject alternative name of the server (repeatable); an internationalised name (bücher.example) is written in its ASCII form (xn--bcher-kva.example).",
                valueName: "D"))
        var dnsNames: [String] = []

        @Option(name: .customLong("ip"), help: ArgumentHelp("An IP subject alternative name of the server, IPv4 or IPv6 (repeatable).", valueName: "A"))
        var ipAddresses: [String] = []

        @Option(name: .long, help: ArgumentHelp("The issuing CA's name in DIR.", valueName: "NAME"))
        var issuer: String = "root"

        @OptionGroup var options: PKICreationOptions

        enum Role {
            case intermediate, server, client
            var label: String {
                switch self {
                case .intermediate: return "intermediate CA"
                case .server: return "server certificate"
                case .client: return "client certificate"
                }
            }
        }

        func role() throws(InputError) -> (Role, String) {
            let chosen: [(Role, String)] = [
                self.intermediate.map { (.intermediate, $0) },
                self.server.map { (.server, $0) },
                self.client.map { (.client, $0) },
            ].compactMap { $0 }
            guard chosen.count == 1, let only = chosen.first else {
                throw InputError("pass exactly one of --intermediate NAME, --server NAME, --client NAME")
            }
            if only.0 != .server, !self.dnsNames.isEmpty || !self.ipAddresses.isEmpty {
                throw InputError("--dns and --ip apply to --server only")
            }
            return only
        }

        func run() async throws {
            let (role, name) = try self.role()
            let option = role == .intermediate ? "--intermediate" : (role == .server ? "--server" : "--client")
            try PKIDirectory.checkName(name, option: option)
            try PKIDirectory.checkName(self.issuer, option: "--issuer")
            guard name != self.issuer else {
                throw InputError("\(option) \(name): a certificate cannot be its own issuer")
            }
            let pki = PKIDirectory(path: self.directory)
            let issuer = try pki.identity(self.issuer, option: "--issuer")
            try Self.checkCanIssue(issuer.certificate, name: self.issuer, role: role)
            let (dnsNames, ipAddresses) = try self.subjectAlternativeNames(role: role, name: name)

            let certificatePath = pki.certificatePath(name)
            let keyPath = pki.keyPath(name)
            let chainPath = pki.chainPath(name)
            let outputs = role == .intermediate ? [certificatePath, keyPath] : [certificatePath, keyPath, chainPath]
            try PKIDirectory.checkWritable(outputs, force: self.options.force)
            let intermediates = try pki.intermediates(above: issuer.certificate)
            let issuerChain = issuer.certificate.issuer == issuer.certificate.subject ? [] : [issuer.certificate] + intermediates

            let notValidAfter = try self.options.notValidAfter(defaultDays: role == .intermediate ? 1825 : 365, issuer: issuer.certificate)
            let issued: TestIdentity
            do {
                switch role {
                case .intermediate:
                    issued = try TestPKI.intermediate(name, issuer: issuer, key: self.options.key.testKeyType, notValidAfter: notValidAfter, maxPathLength: 0)
                case .server:
                    issued = try TestPKI.leaf(
                        dnsNames.first ?? ipAddresses.first ?? name, issuer: issuer, dnsNames: dnsNames, ipAddresses: ipAddresses,
                        usage: .serverAuth, key: self.options.key.testKeyType, notValidAfter: notValidAfter
                    )
                case .client:
                    issued = try TestPKI.leaf(
                        name, issuer: issuer, usage: .clientAuth, key: self.options.key.testKeyType,
                        notValidAfter: notValidAfter, includeSAN: false
                    )
                }
            } catch let error as TestPKIError where error.code == .invalidIPAddress {
                throw InputError("--ip: \(error.reason)")
            } catch {
                throw InputError("cannot issue \(name): \(PKIErrorWords.words(error))")
            }

            try PKIDirectory.write(issued, certificatePath: certificatePath, keyPath: keyPath)
            print("\(role.label) \"\(name)\" issued by \"\(self.issuer)\" (\(self.options.key.label), \(PKIOutput.validity(issued.certificate)))")
            PKIOutput.wrote(certificatePath: certificatePath, keyPath: keyPath)
            if role != .intermediate {
                let chain = [issued.certificate] + issuerChain
                try PKIDirectory.write(Array(TestPKI.pemBundle(chain).utf8), to: chainPath, mode: PKIDirectory.certificateMode)
                PKIOutput.wrote(chainPath, note: "\(chain.count) certificate\(chain.count == 1 ? "" : "s"), leaf first")
            }
            var rows: [(name: String, certificate: Certificate)] = [(name, issued.certificate)]
            rows.append((self.issuer, issuer.certificate))
            PKIOutput.pins(rows)
        }

        /// The issuer must be a CA allowed to sign certificates, with path length room for an intermediate.
        static func checkCanIssue(_ certificate: Certificate, name: String, role: Role) throws(InputError) {
            let constraints: BasicConstraints?
            let keyUsage: KeyUsage?
            do {
                constraints = try certificate.extensions.basicConstraints
                keyUsage = try certificate.extensions.keyUsage
            } catch {
                throw InputError("--issuer \(name): unreadable extensions: \(PKIErrorWords.words(error))")
            }
            guard case .isCertificateAuthority(let maxPathLength) = constraints else {
                throw InputError("--issuer \(name): \(certificate.subject) is not a CA (basic constraints cA is not TRUE)")
            }
            if let keyUsage, !keyUsage.keyCertSign {
                throw InputError("--issuer \(name): \(certificate.subject) may not sign certificates (no keyCertSign)")
            }
            if role == .intermediate, maxPathLength == 0 {
                throw InputError("--issuer \(name): path length 0 lets \(certificate.subject) issue leaves only, not intermediates")
            }
        }

        /// Servers: the given names, or NAME as the one DNS name. Every DNS name is checked here so a typo is an
        /// error rather than a certificate no client accepts.
        func subjectAlternativeNames(role: Role, name: String) throws(InputError) -> ([String], [String]) {
            guard role == .server else { return ([], []) }
            var dnsNames: [String] = []
            for dns in self.dnsNames {
                let ascii = try Self.asciiDNSName(dns, option: "--dns")
                guard Self.isDNSName(ascii) else {
                    throw InputError(
                        "--dns \(VisibleText.quoted(dns)): not a DNS name (ASCII letters, digits and '-' in dot-separated labels, or an internationalised name; '*.' only as the first label)"
                    )
                }
                dnsNames.append(ascii)
            }
            if dnsNames.isEmpty && self.ipAddresses.isEmpty {
                guard Self.isDNSName(name) else {
                    throw InputError("--server \(name): give --dns or --ip (\"\(name)\" is not a DNS name to use instead)")
                }
                return ([name], [])
            }
            return (dnsNames, self.ipAddresses)
        }

        /// `text` with an internationalised name in its A-labels (`bücher.example` → `xn--bcher-kva.example`, as
        /// certificates carry it), converted by the core's conversion that `check`, `--resolve`, `evaluate --host`
        /// and configuration keys go through (``PeerName``), so the certificate is issued for the name they look
        /// for. `xn--` labels are checked to be A-labels the same way. Any other ASCII text is returned as given
        /// for ``isDNSName(_:)`` to judge (NU3 entry 8: a U-label was refused here alone). `serve --bind` reads its host
        /// name this way too.
        static func asciiDNSName(_ text: String, option: String) throws(InputError) -> String {
            let isASCII = text.unicodeScalars.allSatisfy(\.isASCII)
            guard !isASCII || text.lowercased().contains("xn--") else { return text }
            // A trailing dot, or a wildcard over too few labels, is left for isDNSName to refuse in its words.
            guard !text.hasSuffix(".") else { return text }
            let wildcard = text.hasPrefix("*.")
            let name = wildcard ? String(text.dropFirst(2)) : text
            let canonical: String
            do {
                canonical = try PeerName(name).canonical
            } catch {
                throw InputError("\(option) \(VisibleText.quoted(text)): \(error.problem)")
            }
            guard !isASCII else { return text }
            return (wildcard ? "*." : "") + canonical
        }

        /// The core's dNSName syntax (RFC 1034 preferred name syntax, a leading `*` label allowed), plus what a
        /// name we mint must also be: at most 253 bytes, no trailing dot, and a wildcard over at least two labels
        /// (`*.example.com`, never `*.com`).
        static func isDNSName(_ text: String) -> Bool {
            guard !text.isEmpty, text.utf8.count <= 253, !text.hasSuffix(".") else { return false }
            if text.hasPrefix("*."), text.split(separator: ".", omittingEmptySubsequences: false).count <= 2 { return false }
            return DNSNameSyntax.isPreferredNameSyntax(text)
        }
    }
}
