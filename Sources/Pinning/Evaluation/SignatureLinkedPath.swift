import X509

/// The path through the presented certificates in which each certificate is signed by the next, starting at
/// the leaf. Only for explaining a refusal under `allowInvalidCertificates` (which certificates the leaf really
/// chains to); trust is never decided here, but by path validation with the pinned key as the anchor.
enum SignatureLinkedPath {
    /// The signature-linked path from the leaf, as far as it goes (for failure reports), or as far as `budget`
    /// pays for: each signature check is charged to the evaluation's budget, so a peer's many certificates of one
    /// name cannot make the explanation quadratic.
    static func longest(from presented: [Certificate], budget: PathBuildingBudget) -> [Certificate] {
        guard let leaf = presented.first else { return [] }
        var path = [leaf]
        var used = Set([0])
        while let next = Self.issuerIndex(of: path[path.count - 1], in: presented, excluding: used, budget: budget) {
            used.insert(next)
            path.append(presented[next])
        }
        return path
    }

    /// A presented certificate, not used yet, that is named as the issuer and whose key verifies the signature.
    /// A self-signed certificate ends the path: it is its own issuer.
    private static func issuerIndex(of certificate: Certificate, in presented: [Certificate], excluding used: Set<Int>, budget: PathBuildingBudget) -> Int? {
        presented.indices.first { index in
            !used.contains(index) && presented[index].subject == certificate.issuer
                && budget.takeSignatureCheck(by: presented[index].publicKey)
                && presented[index].publicKey.isValidSignature(certificate.signature, for: certificate)
        }
    }
}
