import ArgumentParser
import Foundation
import Pinning
import PinningNIO
import PinningPKI
import X509

extension PinningCommand {
    /// `pinning pki`: a correct private test PKI in a few commands, replacing hand-typed openssl recipes.
    struct PKI: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pki",
            abstract: "Create a test PKI: a root CA, intermediates, server and client certificates, PKCS#12 exports.",
            discussion: """
                Files in DIR: NAME.pem (certificate), NAME.key (PKCS#8 private key, mode 0600) and, for server and \
                client certificates, NAME-chain.pem (the certificate and its intermediates, as a server sends them). \
                Existing files are never replaced without --force. For tests and private deployments; every \
                certificate gets a random 20-byte serial, subject and authority key identifiers, and the key usages \
                of its role.
                """,
            subcommands: [Init.self, Issue.self, Export.self]
        )
    }
}

/// `--key ec|rsa`.
enum PKIKeyType: String, ExpressibleByArgument, CaseIterable {
    case ec
    case rsa

    var testKeyType: TestKeyType {
        switch self {
        case .ec: return .p256
        case .rsa: return .rsa2048
        }
    }

    var label: String {
        switch self {
        case .ec: return "EC P-256"
        case .rsa: return "RSA 2048"
        }
    }
}

/// Options every creating command shares.
struct PKICreationOptions: ParsableArguments {
    @Option(name: .long, help: "The key type: ec (P-256, the default) or rsa (2048 bits).")
    var key: PKIKeyType = .ec

    @Option(
        name: .long,
        help: ArgumentHelp("Validity in days, 1 to 36500 (default: 3650 for a root, 1825 for an intermediate, 365 for a leaf; never beyond the issuer).", valueName: "N"),
        transform: NumericOption.integer(1...36500, what: "number of days")
    )
    var days: Int?

    @Flag(name: .long, help: "Replace existing files.")
    var force = false

    /// The end of validity: `--days` from now, else `defaultDays` cut back to the issuer's end.
    func notValidAfter(defaultDays: Int, issuer: Certificate?) throws(InputError) -> Date {
        let now = Date(timeIntervalSince1970: Foundation.floor(Date().timeIntervalSince1970))
        if let days {
            let end = now.addingTimeInterval(Double(days) * 86400)
            if let issuer, end > issuer.notValidAfter {
                throw InputError("--days \(days): the certificate would outlive its issuer \(issuer.subject), valid until \(RFC3339.format(issuer.notValidAfter))")
            }
            return end
        }
        let end = now.addingTimeInterval(Double(defaultDays) * 86400)
        if let issuer, end > issuer.notValidAfter {
            return issuer.notValidAfter
        }
        return end
    }
}

/// Output shared by the creating commands.
enum PKIOutput {
    static func wrote(_ path: String, note: String = "") {
        print("  wrote \(path)\(note.isEmpty ? "" : "  (\(note))")")
    }

    /// One line per certificate: its pin, file name and subject.
    static func pins(_ rows: [(name: String, certificate: Certificate)]) {
        print("pins (SPKI SHA-256):")
        let width = rows.map(\.name.count).max() ?? 0
        for row in rows {
            let name = row.name.padding(toLength: width, withPad: " ", startingAt: 0)
            print("  \(Pin(spkiOf: row.certificate).description)  \(name)  \(row.certificate.subject)")
        }
    }

    static func validity(_ certificate: Certificate) -> String {
        "valid until \(RFC3339.format(certificate.notValidAfter))"
    }
}

extension PinningCommand.PKI {
    /// `pinning pki init DIR [--name NAME] [--key ec|rsa] [--days N]`.
    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a root CA: DIR/NAME.pem and DIR/NAME.key."
        )

        @Argument(help: ArgumentHelp("The PKI directory (created when missing).", valueName: "DIR"))
        var directory: String

        @Option(name: .long, help: "The root's file name and common name.")
        var name: String = "root"

        @OptionGroup var options: PKICreationOptions

        func run() async throws {
            try PKIDirectory.checkName(self.name, option: "--name")
            let pki = PKIDirectory(path: self.directory)
            let certificatePath = pki.certificatePath(self.name)
            let keyPath = pki.keyPath(self.name)
            try pki.create()
            try PKIDirectory.checkWritable([certificatePath, keyPath], force: self.options.force)
            let notValidAfter = try self.options.notValidAfter(defaultDays: 3650, issuer: nil)
            let root: TestIdentity
            do {
                // Unlimited path length: the root may issue intermediates that issue intermediates.
                root = try TestPKI.root(self.name, key: self.options.key.testKeyType, notValidAfter: notValidAfter)
            } catch {
                throw InputError("cannot create the root \(self.name): \(error)")
            }
            try PKIDirectory.write(Array(root.privateKeyPEM.utf8), to: keyPath, mode: PKIDirectory.keyMode)
            try PKIDirectory.write(Array(root.certificatePEM.utf8), to: certificatePath, mode: PKIDirectory.certificateMode)
            print("root CA \"\(self.name)\" (\(self.options.key.label), \(PKIOutput.validity(root.certificate)))")
            PKIOutput.wrote(certificatePath)
            PKIOutput.wrote(keyPath, note: "mode 0600")
            PKIOutput.pins([(self.name, root.certificate)])
        }
    }

    /// `pinning pki issue DIR (--intermediate NAME | --server NAME [--dns D]... [--ip A]... | --client NAME) …`.
    struct Issue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
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

        @Option(name: .customLong("dns"), help: ArgumentHelp("A DNS subject alternative name of the server (repeatable).", valueName: "D"))
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
                throw InputError("cannot issue \(name): \(error)")
            }

            try PKIDirectory.write(Array(issued.privateKeyPEM.utf8), to: keyPath, mode: PKIDirectory.keyMode)
            try PKIDirectory.write(Array(issued.certificatePEM.utf8), to: certificatePath, mode: PKIDirectory.certificateMode)
            print("\(role.label) \"\(name)\" issued by \"\(self.issuer)\" (\(self.options.key.label), \(PKIOutput.validity(issued.certificate)))")
            PKIOutput.wrote(certificatePath)
            PKIOutput.wrote(keyPath, note: "mode 0600")
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
                throw InputError("--issuer \(name): unreadable extensions: \(error)")
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
            for dns in self.dnsNames where !Self.isDNSName(dns) {
                throw InputError("--dns \"\(dns)\": not a DNS name (letters, digits and '-' in dot-separated labels; '*.' only as the first label)")
            }
            if self.dnsNames.isEmpty && self.ipAddresses.isEmpty {
                guard Self.isDNSName(name) else {
                    throw InputError("--server \(name): give --dns or --ip (\"\(name)\" is not a DNS name to use instead)")
                }
                return ([name], [])
            }
            return (self.dnsNames, self.ipAddresses)
        }

        static func isDNSName(_ text: String) -> Bool {
            guard !text.isEmpty, text.utf8.count <= 253 else { return false }
            var labels = text.split(separator: ".", omittingEmptySubsequences: false)
            if labels.first == "*" && labels.count > 2 {
                labels.removeFirst()
            }
            let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
            return labels.allSatisfy { label in
                !label.isEmpty && label.count <= 63 && label.allSatisfy { allowed.contains($0) }
                    && !label.hasPrefix("-") && !label.hasSuffix("-")
            }
        }
    }

    /// `pinning pki export DIR NAME --p12 OUT (--passphrase-env VAR | --passphrase-file FILE) [--legacy]`.
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Export a certificate, its key and intermediates as PKCS#12 (.p12).",
            discussion: """
                The default encryption is AES-256-CBC with PBKDF2-HMAC-SHA256; --legacy writes \
                pbeWithSHAAnd3-KeyTripleDES-CBC, which older tools need (macOS before 10.15, Windows before Server \
                2019, Java 8 before 8u301, OpenSSL 1.0). Both use an HMAC-SHA1 MAC. The file is written with mode 0600 \
                and read back before the command succeeds.
                """
        )

        @Argument(help: ArgumentHelp("The PKI directory.", valueName: "DIR"))
        var directory: String

        @Argument(help: ArgumentHelp("The certificate to export (DIR/NAME.pem, DIR/NAME.key).", valueName: "NAME"))
        var name: String

        @Option(name: .customLong("p12"), help: ArgumentHelp("The PKCS#12 file to write.", valueName: "OUT"))
        var output: String

        @OptionGroup var passphraseOptions: PassphraseOptions

        @Flag(name: .long, help: "Write the 3DES form older tools need instead of AES-256.")
        var legacy = false

        @Flag(name: .long, help: "Replace an existing OUT.")
        var force = false

        /// Any UTF-8 passphrase but the empty one (a PKCS#12 file without a passphrase protects nothing).
        func passphrase() throws(InputError) -> String {
            guard let passphrase = try self.passphraseOptions.passphrase() else {
                throw InputError("pass exactly one of --passphrase-env VAR, --passphrase-file FILE")
            }
            guard !passphrase.isEmpty else {
                if let variable = self.passphraseOptions.environment {
                    throw InputError("--passphrase-env \(variable): the environment variable is empty")
                }
                throw InputError("--passphrase-file \(self.passphraseOptions.file ?? ""): the first line is empty")
            }
            return passphrase
        }

        func run() async throws {
            try PKIDirectory.checkName(self.name, option: "NAME")
            let passphrase = try self.passphrase()
            let pki = PKIDirectory(path: self.directory)
            let identity = try pki.identity(self.name, option: "NAME")
            try PKIDirectory.checkWritable([self.output], force: self.force)
            let intermediates = try pki.intermediates(above: identity.certificate)
            let chain = [identity.certificate] + intermediates
            let bytes: [UInt8]
            do {
                bytes = try PKCS12Writer.serialize(
                    certificateChain: chain,
                    privateKeyPEM: identity.privateKeyPEM,
                    passphrase: passphrase,
                    friendlyName: self.name,
                    encryption: self.legacy ? .legacy3DES : .aes256
                )
            } catch {
                throw InputError("\(self.name): cannot write PKCS#12: \(error.description)")
            }
            // Read it back the way applications will, before anyone relies on it.
            let loaded: TLSIdentity
            do {
                loaded = try TLSIdentity.pkcs12(bytes: bytes, passphrase: passphrase, origin: self.output)
            } catch {
                throw InputError("\(self.output): the written PKCS#12 does not load back: \(error)")
            }
            guard loaded.leaf == identity.certificate, loaded.certificateChain.count == chain.count else {
                throw InputError("\(self.output): the written PKCS#12 loads back with a different chain")
            }
            try PKIDirectory.write(bytes, to: self.output, mode: PKIDirectory.keyMode)
            let form = self.legacy ? "legacy: pbeWithSHAAnd3-KeyTripleDES-CBC" : "AES-256-CBC, PBKDF2-HMAC-SHA256"
            print("PKCS#12 \"\(self.name)\" (\(form); key and \(chain.count) certificate\(chain.count == 1 ? "" : "s"))")
            PKIOutput.wrote(self.output, note: "mode 0600")
            PKIOutput.pins([(self.name, identity.certificate)])
        }
    }
}
