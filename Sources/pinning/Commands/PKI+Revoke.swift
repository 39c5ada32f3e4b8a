import ArgumentParser
import Foundation
import Pinning
import PinningPKI
import X509

/// `--reason`: the CRL reason codes a private PKI's operator chooses between (RFC 5280 §5.3.1).
enum RevocationReasonArgument: String, EnumeratedArgument {
    case keyCompromise
    case affiliationChanged
    case superseded
    case cessationOfOperation
    case certificateHold

    static let valueKind = "reason"

    var reason: TestCRL.Reason {
        switch self {
        case .keyCompromise: return .keyCompromise
        case .affiliationChanged: return .affiliationChanged
        case .superseded: return .superseded
        case .cessationOfOperation: return .cessationOfOperation
        case .certificateHold: return .certificateHold
        }
    }
}

/// What `pki revoke` records for one CA, in `DIR/ISSUER.revocations.json`: the revoked certificates and the
/// number of the last CRL written (RFC 5280 §5.2.3: each CRL's number is greater than the last).
struct RevocationRecord: Codable, Equatable {
    struct Revoked: Codable, Equatable {
        var name: String
        /// The serial number, hex, as `openssl x509 -serial` prints it.
        var serial: String
        /// RFC 3339.
        var revocationDate: String
        var reason: String?
    }

    var crlNumber: Int = 0
    var revoked: [Revoked] = []

    static func path(_ pki: PKIDirectory, issuer: String) -> String { pki.file(issuer + ".revocations.json") }

    static func load(_ pki: PKIDirectory, issuer: String) throws(InputError) -> RevocationRecord {
        let path = Self.path(pki, issuer: issuer)
        guard FileManager.default.fileExists(atPath: path) else { return RevocationRecord() }
        do {
            return try JSONDecoder().decode(RevocationRecord.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw InputError("\(path): not a revocation record written by `pinning pki revoke` (\(PKIErrorWords.words(error)))")
        }
    }

    func save(_ pki: PKIDirectory, issuer: String) throws(InputError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do {
            data = try encoder.encode(self)
        } catch {
            throw InputError("cannot encode the revocation record: \(PKIErrorWords.words(error))")
        }
        try PKIDirectory.write(Array(data) + [0x0A], to: Self.path(pki, issuer: issuer), mode: PKIDirectory.certificateMode)
    }
}

extension PinningCommand.PKI {
    /// `pinning pki revoke DIR NAME`: records a revocation for the next `pki crl`.
    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke",
            abstract: "Record that DIR/NAME.pem is revoked; `pinning pki crl` then lists it.",
            discussion: """
                The revocation is recorded in DIR/ISSUER.revocations.json, ISSUER being the CA in DIR that issued \
                NAME (found by name and signature). Nothing is published until `pinning pki crl` writes the CRL.
                """
        )

        @Argument(help: ArgumentHelp("The PKI directory.", valueName: "DIR"))
        var directory: String

        @Argument(help: ArgumentHelp("The certificate to revoke (DIR/NAME.pem).", valueName: "NAME"))
        var name: String

        @Option(
            name: .long,
            help: ArgumentHelp(
                "Why: keyCompromise, affiliationChanged, superseded, cessationOfOperation or certificateHold (default: none given, as openssl ca).",
                valueName: "reason"),
            transform: RevocationReasonArgument.parser(option: "--reason"))
        var reason: RevocationReasonArgument?

        @Option(name: .long, help: ArgumentHelp("When it was revoked, RFC 3339 (default: now).", valueName: "RFC3339"))
        var at: String?

        func run() async throws {
            try PKIDirectory.checkName(self.name, option: "NAME")
            let pki = PKIDirectory(path: self.directory)
            let certificate = try pki.certificate(self.name, option: "NAME")
            guard let issuer = pki.issuerName(of: certificate) else {
                throw InputError("NAME \(self.name): no CA in \(self.directory) issued it (its issuer is \(certificate.issuer))")
            }
            guard issuer != self.name else {
                throw InputError("NAME \(self.name): a self-signed root cannot be revoked by a CRL it signs; remove it from the trust stores instead")
            }
            let date = try InputLoading.instant(self.at) ?? Date()
            var record = try RevocationRecord.load(pki, issuer: issuer)
            let serial = HexText.digits(certificate.serialNumber.bytes, uppercase: true)
            if let existing = record.revoked.first(where: { $0.serial == serial }) {
                throw InputError("NAME \(self.name): already revoked on \(existing.revocationDate) (serial \(serial))")
            }
            record.revoked.append(
                RevocationRecord.Revoked(name: self.name, serial: serial, revocationDate: RFC3339.format(date), reason: self.reason?.rawValue))
            try record.save(pki, issuer: issuer)
            print("revoked \"\(self.name)\" (serial \(serial)) issued by \"\(issuer)\"\(self.reason.map { ", reason \($0.rawValue)" } ?? "")")
            PKIOutput.wrote(RevocationRecord.path(pki, issuer: issuer))
            print("next: pinning pki crl \(self.directory) --issuer \(issuer)")
        }
    }

    /// `pinning pki crl DIR`: writes the CA's CRL, PEM and DER.
    struct CRL: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "crl",
            abstract: "Write the CRL of a CA in DIR: DIR/ISSUER.crl.pem (PEM) and DIR/ISSUER.crl (DER).",
            discussion: """
                Lists every certificate `pinning pki revoke` recorded for the CA, with an authority key identifier \
                and a CRL number one greater than the last (RFC 5280 §5). `openssl crl -verify` and `openssl verify \
                -crl_check` accept it. The default validity is 7 days: short, as a private PKI can republish at will.
                """
        )

        @Argument(help: ArgumentHelp("The PKI directory.", valueName: "DIR"))
        var directory: String

        @Option(name: .long, help: ArgumentHelp("The CA whose CRL to write (default root).", valueName: "NAME"))
        var issuer: String = "root"

        @Option(
            name: .long, parsing: .unconditional, help: ArgumentHelp("Days until nextUpdate, 1 to 3650 (default 7).", valueName: "N"),
            transform: NumericOption.integer(1...3650, what: "number of days"))
        var days: Int = 7

        func run() async throws {
            try PKIDirectory.checkName(self.issuer, option: "--issuer")
            let pki = PKIDirectory(path: self.directory)
            let issuer = try pki.identity(self.issuer, option: "--issuer")
            // RFC 5280 §4.2.1.3: a CRL issuer whose certificate has keyUsage must assert cRLSign (and verifiers
            // refuse its CRLs otherwise), so refuse here instead of writing a CRL nobody accepts.
            let keyUsage: KeyUsage?
            do {
                keyUsage = try issuer.certificate.extensions.keyUsage
            } catch {
                throw InputError("--issuer \(self.issuer): its keyUsage extension cannot be read: \(PKIErrorWords.words(error))")
            }
            if let keyUsage, !keyUsage.cRLSign {
                throw InputError("--issuer \(self.issuer): its keyUsage has no cRLSign, so it cannot sign a CRL")
            }
            var record = try RevocationRecord.load(pki, issuer: self.issuer)
            var entries: [TestCRL.Entry] = []
            for revoked in record.revoked {
                guard let serial = Self.serialNumber(hex: revoked.serial) else {
                    throw InputError(
                        "\(RevocationRecord.path(pki, issuer: self.issuer)): the entry for \(revoked.name) has a bad serial or date (serial \"\(VisibleText.escaped(revoked.serial))\": not an even number of hex digits)"
                    )
                }
                let date: Date
                do {
                    date = try RFC3339.read(revoked.revocationDate)
                } catch {
                    // The reader's words say what is wrong ("day 30 does not exist: …"), as `--at`'s refusal does.
                    throw InputError(
                        "\(RevocationRecord.path(pki, issuer: self.issuer)): the entry for \(revoked.name) has a bad serial or date (revocationDate \"\(VisibleText.escaped(revoked.revocationDate))\": \(error.description))"
                    )
                }
                let reason = try revoked.reason.map { name throws(InputError) in
                    guard let argument = RevocationReasonArgument(rawValue: name) else {
                        throw InputError("\(RevocationRecord.path(pki, issuer: self.issuer)): unknown reason \"\(name)\" for \(revoked.name)")
                    }
                    return argument.reason
                }
                entries.append(TestCRL.Entry(serialNumber: serial, revocationDate: date, reason: reason))
            }
            record.crlNumber += 1
            let now = Date()
            let crl: TestCRL
            do {
                crl = try TestCRL(
                    issuer: issuer, entries: entries, number: record.crlNumber, thisUpdate: now,
                    nextUpdate: now.addingTimeInterval(Double(self.days) * 86400))
            } catch {
                throw InputError("--issuer \(self.issuer): cannot sign the CRL: \(PKIErrorWords.words(error))")
            }
            let pemPath = pki.file(self.issuer + ".crl.pem")
            let derPath = pki.file(self.issuer + ".crl")
            try PKIDirectory.write(Array(crl.pem.utf8), to: pemPath, mode: PKIDirectory.certificateMode)
            try PKIDirectory.write(crl.der, to: derPath, mode: PKIDirectory.certificateMode)
            // The number is saved only once the CRL is written: a failure never skips a number silently.
            try record.save(pki, issuer: self.issuer)
            print(
                "CRL of \"\(self.issuer)\": number \(record.crlNumber), \(entries.count) revoked, next update \(RFC3339.format(now.addingTimeInterval(Double(self.days) * 86400)))"
            )
            PKIOutput.wrote(pemPath)
            PKIOutput.wrote(derPath, note: "DER")
        }

        /// The serial as recorded: hex, two digits a byte, as `openssl x509 -serial` prints it.
        static func serialNumber(hex: String) -> Certificate.SerialNumber? {
            let digits = hex.replacingOccurrences(of: ":", with: "")
            guard !digits.isEmpty, digits.count % 2 == 0, digits.allSatisfy(\.isHexDigit) else { return nil }
            var bytes: [UInt8] = []
            var index = digits.startIndex
            while index < digits.endIndex {
                let next = digits.index(index, offsetBy: 2)
                guard let byte = UInt8(digits[index..<next], radix: 16) else { return nil }
                bytes.append(byte)
                index = next
            }
            return Certificate.SerialNumber(bytes: bytes)
        }
    }
}
