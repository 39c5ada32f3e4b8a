import Foundation
import X509

extension TrustFailure {
    /// One line for logs: `TrustFailure.pinMismatch: api.example.com: …`.
    public var description: String {
        "TrustFailure.\(self.code): \(self.host ?? "(no host checked)"): \(self.reason)"
    }

    /// The failure for people in one line, without the type's name: `[pinMismatch] no certificate on the validated
    /// path matches a pin`, as `pinning check` writes its reason (the caller names the host). ``description`` stays
    /// the documented log form (Docs/BadInput.md §7); the CLI and the proxy print this one.
    package var codeAndReason: String {
        "[\(self.code)] \(self.reason)"
    }

    /// The failure for people: the verdict, the reason, its evidence, the presented chain with each
    /// certificate's pin, the validated path and the expected pins.
    public var multilineDescription: String {
        self.multilineDescription(headline: self.description)
    }

    /// ``multilineDescription`` with `headline` as its first line (the proxy's 502 body starts with
    /// ``codeAndReason``).
    package func multilineDescription(headline: String) -> String {
        var lines = [headline]
        for detail in self.details {
            lines.append("  \(detail)")
        }
        if !self.leafNames.isEmpty {
            lines.append("  leaf names  \(self.leafNames.joined(separator: ", "))")
        }
        lines.append("  validated at \(RFC3339.format(self.validationTime))")
        if !self.expectedPins.isEmpty {
            lines.append("  expected pins:")
            for pin in self.expectedPins {
                lines.append("    \(pin)")
            }
        }
        lines.append("  presented chain:")
        for certificate in self.presentedCertificates {
            let marker = certificate.isOnValidatedPath ? " (on validated path)" : ""
            lines.append("    [\(certificate.index)] \(certificate.subject)\(marker)")
            lines.append("        issuer \(certificate.issuer)")
            lines.append(
                "        valid  \(RFC3339.format(certificate.notValidBefore)) to \(RFC3339.format(certificate.notValidAfter))"
            )
            lines.append("        pin    \(certificate.pin)")
        }
        if let path = self.validatedPath {
            lines.append("  validated path:")
            for (index, certificate) in path.enumerated() {
                lines.append("    [\(index)] \(certificate.subject)  \(Pin(spkiOf: certificate))")
            }
        } else if let path = self.failedPath {
            lines.append("  refused path:")
            for (index, certificate) in path.enumerated() {
                let marker = index == self.failedCertificateIndex ? "  <- fails" : ""
                lines.append("    [\(index)] \(certificate.subject)  \(Pin(spkiOf: certificate))\(marker)")
            }
        }
        return lines.joined(separator: "\n")
    }
}
