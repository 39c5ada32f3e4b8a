import ArgumentParser
import Foundation
import Pinning
import X509

extension PinningCommand {
    /// `pinning inspect`: every certificate in the files with its facts, fingerprints and pin.
    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show every certificate in the files: subject, issuer, validity, SANs, key, usages, fingerprints, SPKI pin.",
            discussion: "Exit status: 0 success, 2 when a file is missing or holds no certificate."
        )

        @Argument(help: ArgumentHelp("Certificate files or directories (DER, PEM, PKCS#7).", valueName: "file"))
        var files: [String]

        @Flag(name: .long, help: "Print the facts as JSON.")
        var json = false

        struct Entry: Encodable {
            var file: String
            var index: Int
            var certificate: CertificateInfo
        }

        func run() async throws {
            var entries: [Entry] = []
            var failures: [CertificateLoadingError] = []
            for file in self.files {
                // Every well-formed certificate is listed, including those the verifier does not support; entries
                // that are not certificates are reported after the others, never instead of them.
                let listing = try InputLoading.listing(file)
                for (index, certificate) in listing.certificates.enumerated() {
                    entries.append(Entry(file: file, index: index, certificate: certificate.info))
                }
                failures += listing.failures
            }
            if self.json {
                try JSONOutput.print(entries)
            } else {
                for entry in entries {
                    print(Self.describe(entry))
                    print("")
                }
            }
            try InputLoading.reportFailures(failures)
        }

        static func describe(_ entry: Entry) -> String {
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
            for problem in info.problems { lines.append("  problem      \(problem)") }
            for reason in info.unsupportedForVerification { lines.append("  unsupported  \(reason)") }
            for note in info.notes { lines.append("  note         \(note)") }
            return lines.joined(separator: "\n")
        }
    }
}
