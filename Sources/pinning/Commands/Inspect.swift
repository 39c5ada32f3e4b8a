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

    /// `pinning pins`: just the SPKI pins, one line per certificate.
    struct Pins: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pins",
            abstract: "Print the SPKI SHA-256 pin of every certificate in the files (sha256/BASE64, then the subject)."
        )

        @Argument(help: ArgumentHelp("Certificate files or directories (DER, PEM, PKCS#7).", valueName: "file"))
        var files: [String]

        @Option(
            name: .customLong("config-entry"),
            help: ArgumentHelp("Print a ready-to-paste host pinning configuration entry for this host pattern, with every pin.", valueName: "host")
        )
        var configEntry: String?

        func run() async throws {
            var pins: [Pin] = []
            var failures: [CertificateLoadingError] = []
            for file in self.files {
                // A pin is a hash of the SPKI: every well-formed certificate has one, supported for verification
                // or not (the reason goes to stderr, so stdout stays one pin per line).
                let listing = try InputLoading.listing(file)
                for certificate in listing.certificates {
                    let pin = certificate.pin
                    if self.configEntry != nil {
                        if !pins.contains(pin) { pins.append(pin) }
                    } else {
                        print("\(pin)  \(certificate.info.subject)")
                    }
                    if let unsupported = certificate.unsupported {
                        FileHandle.standardError.write(Data("pinning: note: \(unsupported.description)\n".utf8))
                    }
                }
                failures += listing.failures
            }
            try InputLoading.reportFailures(failures)
            guard let host = self.configEntry else { return }
            print(try Self.entry(host: host, pins: pins))
            if pins.count < 2 {
                FileHandle.standardError.write(
                    Data("pinning: warning: an enforced entry needs at least two distinct pins; add a backup key's pin (or set \"enforce\": false)\n".utf8)
                )
            }
        }

        /// `"HOST": { "pins": [ … ] }`, checked by parsing it as a configuration (pattern and pins).
        static func entry(host: String, pins: [Pin]) throws(InputError) -> String {
            let quotedHost = Self.jsonString(host)
            let pinLines = pins.map { "    \(Self.jsonString($0.description))" }.joined(separator: ",\n")
            let entry = "\(quotedHost): {\n  \"pins\": [\n\(pinLines)\n  ]\n}"
            // Validate the pattern the same way the configuration will (report-only so one pin is enough here).
            let probe = "{\"version\": 1, \"domains\": {\(quotedHost): {\"pins\": [\(pins.map { Self.jsonString($0.description) }.joined(separator: ", "))], \"enforce\": false}}}"
            do {
                _ = try PinningConfiguration(data: Data(probe.utf8), baseDirectory: "/", origin: "--config-entry")
            } catch {
                let problems = error.problems.filter { $0.kind == .invalidPattern }
                if !problems.isEmpty {
                    throw InputError("--config-entry: \"\(host)\": " + problems.map(\.message).joined(separator: "; "))
                }
            }
            return entry
        }

        static func jsonString(_ text: String) -> String {
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
    }
}
