import ArgumentParser
import Foundation
import Pinning
import X509

extension PinningCommand {
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
            var refusals = InputLoading.Refusals()
            for file in self.files {
                // A pin is a hash of the SPKI: every well-formed certificate has one, supported for verification
                // or not (the reason goes to stderr, so stdout stays one pin per line). A file that cannot be read
                // or holds no certificate is reported after every other file's pins, as a broken entry is.
                let listing: CertificateListing
                do throws(InputError) {
                    listing = try InputLoading.listing(file)
                } catch {
                    refusals.add(error)
                    continue
                }
                for certificate in listing.certificates {
                    let pin = certificate.pin
                    if self.configEntry != nil {
                        if !pins.contains(pin) { pins.append(pin) }
                    } else {
                        // The subject is whoever made the certificate's (a file saved from a server): escaped, as
                        // inspect, check and evaluate show names.
                        print("\(pin)  \(VisibleText.escaped(certificate.info.subject))")
                    }
                    if let unsupported = certificate.unsupported {
                        FileHandle.standardError.write(Data("pinning: note: \(VisibleText.escaped(unsupported.description))\n".utf8))
                    }
                }
                refusals.add(listing.failures)
            }
            try refusals.report()
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
                // Only the pattern is the user's (the pins come from certificates, report-only needs one), but
                // an entry the configuration would refuse for any reason is not printed as ready to paste.
                let problems = error.problems.isEmpty ? [error.description] : error.problems.map(\.message)
                throw InputError("--config-entry: \"\(host)\": " + problems.joined(separator: "; "))
            }
            return entry
        }

        /// `text` as a JSON string literal, written by the package's one JSON writer (``TUFJSON``, which also writes
        /// `pinset status --json`): `"` and `\` escaped, control characters as `\n`, `\r`, `\t` or `\u00XX`, the
        /// rest as it is. A pin (base64) never needs escaping, and a host pattern the configuration accepts has no
        /// control character, so the entry printed is the same text a hand-written escaper gave.
        static func jsonString(_ text: String) -> String {
            String(decoding: TUFJSON.string(text).jsonBytes(), as: UTF8.self)
        }
    }
}
