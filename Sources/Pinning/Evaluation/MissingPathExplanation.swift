import SwiftASN1
import X509

/// Says why no path reached an anchor, when path building found no complete candidate at all.
///
/// `Verifier` reports nothing in that case, so we retrace the obvious path: from the leaf, follow presented
/// certificates whose subject is the current issuer and whose key verifies the current signature, and look at
/// where it stops.
struct MissingPathExplanation {
    var reason: String
    var details: [String] = []

    init(presented: [Certificate], anchors: [Certificate], handledCriticalExtensions: [ASN1ObjectIdentifier]) {
        for (index, certificate) in presented.enumerated() {
            if let oid = certificate.extensions.first(where: { $0.critical && !handledCriticalExtensions.contains($0.oid) })?.oid {
                if index == 0 {
                    self.reason = "the leaf carries a critical extension this validator does not process (\(oid)); it must be refused"
                    return
                }
                self.details.append("presented certificate \(index) (\(certificate.subject)) carries an unprocessed critical extension (\(oid)) and cannot be used")
            }
        }
        if anchors.isEmpty {
            self.reason = "there are no trust anchors to validate against"
            return
        }
        guard var tip = presented.first else {
            self.reason = "no certificate was presented"
            return
        }
        var path = [tip]
        var unused = Array(presented.dropFirst())
        while let next = unused.firstIndex(where: { $0.subject == tip.issuer && $0.publicKey.isValidSignature(tip.signature, for: tip) }) {
            tip = unused.remove(at: next)
            path.append(tip)
            if tip.subject == tip.issuer { break }
        }
        self.details.append("presented path: " + path.map { "\($0.subject)" }.joined(separator: " <- issued by "))

        let anchorsNamed = anchors.filter { $0.subject == tip.issuer }
        if anchorsNamed.contains(where: { $0.publicKey.isValidSignature(tip.signature, for: tip) }) {
            self.reason = "\(tip.subject) is issued by the trust anchor \(tip.issuer), but no path through it met the policy"
        } else if !anchorsNamed.isEmpty {
            self.reason = "the signature on \(tip.subject) does not verify with the key of the trust anchor \(tip.issuer)"
        } else if tip.subject == tip.issuer && tip.publicKey.isValidSignature(tip.signature, for: tip) {
            self.reason = "the chain ends at the self-signed \(tip.subject), which is not a trust anchor (\(anchors.count) \(anchors.count == 1 ? "anchor" : "anchors"))"
        } else if presented.contains(where: { $0.subject == tip.issuer && $0 != tip }) {
            self.reason = "the signature on \(tip.subject) does not verify with the key of the presented \(tip.issuer)"
        } else {
            self.reason = "the issuer \(tip.issuer) of \(tip.subject) is neither presented nor a trust anchor (\(anchors.count) \(anchors.count == 1 ? "anchor" : "anchors"))"
        }
    }
}
