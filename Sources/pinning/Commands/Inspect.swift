import ArgumentParser
import Foundation
import Pinning
import X509

extension PinningCommand {
    /// `pinning inspect`: every certificate in the files with its facts, fingerprints and pin.
    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "inspect",
            abstract: "Show every certificate in the files: subject, issuer, validity, SANs, key, usages, fingerprints, SPKI pin.",
            discussion: "Exit status: 0 success, 2 when a file is missing or holds no certificate."
        )

        @Argument(help: ArgumentHelp("Certificate files or directories (DER, PEM, PKCS#7), or CRL files (DER or PEM).", valueName: "file"))
        var files: [String]

        @Flag(name: .long, help: "Print the facts as JSON.")
        var json = false

        @Flag(name: .long, help: "With a problem, also show the parsing library's own text (as --json does).")
        var verbose = false

        struct Entry: Encodable {
            var file: String
            var index: Int
            var certificate: CertificateInfo
        }

        /// A CRL's facts (issue 14): `inspect` shows them when a file is a certificate revocation list.
        struct CRLEntry: Encodable {
            struct Revoked: Encodable {
                var serial: String
                var revocationDate: String
                var reason: String?
            }

            var file: String
            var index: Int
            var issuer: String
            var thisUpdate: String
            var nextUpdate: String?
            var crlNumber: String?
            var signatureAlgorithm: String
            var revokedCount: Int
            var revoked: [Revoked]
            var unusable: String?

            init(file: String, index: Int, crl: CertificateRevocationList) {
                func hex(_ bytes: [UInt8]) -> String { HexText.digits(bytes, uppercase: true) }
                self.file = file
                self.index = index
                self.issuer = "\(crl.issuer)"
                self.thisUpdate = RFC3339.format(crl.thisUpdate)
                self.nextUpdate = crl.nextUpdate.map(RFC3339.format)
                self.crlNumber = crl.crlNumber.map(hex)
                self.signatureAlgorithm = "\(crl.signatureAlgorithmOID)"
                self.revokedCount = crl.entries.count
                self.revoked = crl.entries.map { Revoked(serial: hex($0.serialNumber), revocationDate: RFC3339.format($0.revocationDate), reason: $0.reason.map { "\($0)" }) }
                self.unusable = crl.unusable
            }
        }

        /// The CRLs in `bytes` (read from `file`), or nil when they are not a CRL file (certificates, anything else).
        static func revocationLists(_ file: String, bytes: [UInt8]) throws(InputError) -> [CertificateRevocationList]? {
            if String(decoding: bytes.prefix(1 << 20), as: UTF8.self).contains("-----BEGIN X509 CRL-----") {
                do {
                    return try CertificateRevocationList.read(bytes)
                } catch {
                    throw InputError("\(file): not a usable CRL file: \(error.message)")
                }
            }
            // DER: a certificate never reads as a CRL (its to-be-signed part starts with a version tag or a serial
            // that is not the CRL version), so a DER file that reads as one is one.
            return try? [CertificateRevocationList(derEncoded: bytes)]
        }

        func run() async throws {
            var entries: [Entry] = []
            var crls: [CRLEntry] = []
            var refusals = InputLoading.Refusals()
            for file in self.files {
                // Every well-formed certificate is listed, including those the verifier does not support; entries
                // that are not certificates, and files that hold no certificate or cannot be read, are reported
                // after the others, never instead of them.
                let listing: CertificateListing
                do throws(InputError) {
                    var isDirectory: ObjCBool = false
                    if FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory), isDirectory.boolValue {
                        listing = try InputLoading.listing(file)
                    } else {
                        // Read once, by the reader every file option uses: a FIFO or <(…) has no second reading (the
                        // CRL test and the certificate listing once read it twice, and the second read waited forever).
                        let bytes = try InputLoading.bytes(file, maximumSize: CertificateRevocationList.maximumSize)
                        if let lists = try Self.revocationLists(file, bytes: bytes) {
                            crls += lists.enumerated().map { CRLEntry(file: file, index: $0.offset, crl: $0.element) }
                            continue
                        }
                        listing = try InputLoading.listing(bytes, origin: file)
                    }
                } catch {
                    refusals.add(error)
                    continue
                }
                for (index, certificate) in listing.certificates.enumerated() {
                    entries.append(Entry(file: file, index: index, certificate: certificate.info))
                }
                refusals.add(listing.failures)
            }
            if self.json {
                if crls.isEmpty {
                    try JSONOutput.print(entries)
                } else {
                    // Only when a CRL was given: the certificates as always, and the CRLs beside them.
                    struct Both: Encodable {
                        var certificates: [Entry]
                        var crls: [CRLEntry]
                    }
                    try JSONOutput.print(Both(certificates: entries, crls: crls))
                }
            } else {
                for entry in entries {
                    print(Self.describe(entry, verbose: self.verbose))
                    print("")
                }
                for crl in crls {
                    print(Self.describe(crl))
                    print("")
                }
            }
            try refusals.report()
        }

        static func describe(_ crl: CRLEntry) -> String {
            var lines = ["\(crl.file) [\(crl.index)] certificate revocation list"]
            lines.append("  issuer       \(crl.issuer)")
            lines.append("  this update  \(crl.thisUpdate)")
            lines.append("  next update  \(crl.nextUpdate ?? "(none)")")
            lines.append("  CRL number   \(crl.crlNumber.map { "0x" + $0 } ?? "(none)")")
            lines.append("  signature    \(crl.signatureAlgorithm)")
            lines.append("  revoked      \(crl.revokedCount)")
            for revoked in crl.revoked.prefix(50) {
                lines.append("    \(revoked.serial)  \(revoked.revocationDate)\(revoked.reason.map { "  \($0)" } ?? "")")
            }
            if crl.revoked.count > 50 { lines.append("    … \(crl.revoked.count - 50) more (--json lists all)") }
            if let unusable = crl.unusable { lines.append("  unusable     \(unusable)") }
            // The issuer's name is whoever made the file's: shown escaped (VisibleText), as check and evaluate show
            // certificate names, so no name can reach the terminal raw or forge a line.
            return lines.map(VisibleText.escaped).joined(separator: "\n")
        }

        /// The text form. A problem is in words; the parsing library's own text (swift-asn1's "Invalid bytes for
        /// ASN1IA5String") is added only with `verbose`, as `--json` carries it (NU3).
        static func describe(_ entry: Entry, verbose: Bool = false) -> String {
            let info = entry.certificate
            var lines = ["\(entry.file) [\(entry.index)]"]
            lines.append("  subject      \(info.subject)")
            lines.append("  issuer       \(info.issuer)")
            lines.append("  serial       \(info.serialNumber)")
            lines.append("  valid        \(RFC3339.format(info.notValidBefore)) to \(RFC3339.format(info.notValidAfter))")
            if !info.subjectAlternativeNames.isEmpty {
                lines.append("  names        " + info.subjectAlternativeNames.map { "\($0.kind):\($0.value)" }.joined(separator: ", "))
            }
            lines.append("  key          \(info.keyType) \(info.keySize) bits")
            lines.append("  signature    \(info.signatureAlgorithm)")
            if let constraints = info.basicConstraints {
                lines.append("  CA           \(constraints.isCA ? "yes" : "no")" + (constraints.pathLength.map { ", path length \($0)" } ?? ""))
            } else {
                lines.append("  CA           no (no basicConstraints)")
            }
            if let usage = info.keyUsage { lines.append("  key usage    \(usage.joined(separator: ", "))") }
            if let usage = info.extendedKeyUsage { lines.append("  ext. usage   \(usage.joined(separator: ", "))") }
            lines.append("  self-signed  \(info.isSelfSigned ? "yes" : "no")")
            lines.append("  SHA-1        \(info.sha1Fingerprint)")
            lines.append("  SHA-256      \(info.sha256Fingerprint)")
            lines.append("  pin          \(info.spkiPin)")
            for problem in verbose ? info.problems : info.problemsInWords { lines.append("  problem      \(problem)") }
            for reason in info.unsupportedForVerification { lines.append("  unsupported  \(reason)") }
            for note in info.notes { lines.append("  note         \(note)") }
            // Names (subject, issuer, subjectAltName values) are whoever made the certificate's: a certificate saved
            // from a server is the server's text. Shown escaped (VisibleText), as check and evaluate show them.
            return lines.map(VisibleText.escaped).joined(separator: "\n")
        }
    }
}
