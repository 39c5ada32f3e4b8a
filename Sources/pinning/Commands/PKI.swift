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
            subcommands: [Init.self, Issue.self, Export.self, Revoke.self, CRL.self]
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
        name: .long, parsing: .unconditional,
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

    /// The two lines for a certificate and its key, as ``PKIDirectory/write(_:certificatePath:keyPath:)`` wrote them.
    static func wrote(certificatePath: String, keyPath: String) {
        self.wrote(certificatePath)
        self.wrote(keyPath, note: "mode 0600")
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
