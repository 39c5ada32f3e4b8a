import SwiftASN1
import X509

/// Says why no path reached an anchor, when path building found no complete candidate at all.
///
/// Path building reports nothing in that case, so we retrace the obvious path: from the leaf, follow presented
/// certificates whose subject is the current issuer and whose key verifies the current signature, and look at
/// where it stops. Its signature checks are paid from the evaluation's budget: once it is spent, the retrace
/// stops where it is and says so (a peer's 64 certificates of one name would otherwise cost 64 × 64 checks).
struct MissingPathExplanation {
    var reason: String
    var details: [String] = []

    init(presented: [Certificate], anchors: [Certificate], handledCriticalExtensions: [ASN1ObjectIdentifier], budget: PathBuildingBudget) {
        /// A signature check within the budget; false when it does not verify or cannot be paid for.
        func verifies(_ issuer: Certificate, _ subject: Certificate) -> Bool {
            budget.takeSignatureCheck(by: issuer.publicKey) && issuer.publicKey.isValidSignature(subject.signature, for: subject)
        }
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
        while let next = unused.firstIndex(where: { $0.subject == tip.issuer && verifies($0, tip) }) {
            tip = unused.remove(at: next)
            path.append(tip)
            if tip.subject == tip.issuer { break }
        }
        self.details.append("presented path: " + path.map { "\($0.subject)" }.joined(separator: " <- issued by "))

        let anchorsNamed = anchors.filter { $0.subject == tip.issuer }
        if anchorsNamed.contains(where: { verifies($0, tip) }) {
            self.reason = "\(tip.subject) is issued by the trust anchor \(tip.issuer), but no path through it met the policy"
        } else if !anchorsNamed.isEmpty {
            self.reason = "the signature on \(tip.subject) does not verify with the key of the trust anchor \(tip.issuer)"
        } else if tip.subject == tip.issuer && verifies(tip, tip) {
            self.reason = "the chain ends at the self-signed \(tip.subject), which is not a trust anchor (\(anchors.count) \(anchors.count == 1 ? "anchor" : "anchors"))"
        } else if presented.contains(where: { $0.subject == tip.issuer && $0 != tip }) {
            self.reason = "the signature on \(tip.subject) does not verify with the key of the presented \(tip.issuer)"
        } else {
            self.reason = "the issuer \(tip.issuer) of \(tip.subject) is neither presented nor a trust anchor (\(anchors.count) \(anchors.count == 1 ? "anchor" : "anchors"))"
        }
        // A check the budget could not pay for proved nothing: say only what is known.
        if budget.isExhausted {
            self.reason = "no path reaches a trust anchor (\(anchors.count) \(anchors.count == 1 ? "anchor" : "anchors")); the explanation stopped at the evaluation's bound of signature checks"
        }
    }
}
