import X509

/// Paths through the presented certificates in which each certificate is signed by the next, starting at the
/// leaf. Used only when `allowInvalidCertificates` lets a chain that does not validate reach pin matching:
/// then a pin may match only a certificate the leaf really chains to.
enum SignatureLinkedPath {
    /// The first signature-linked path from the leaf whose last certificate satisfies `requirement`.
    /// `presented` is the leaf first, then candidate issuers: the presented certificates and the client's
    /// anchors (anchors are the client's own, so linking to one is as good as linking to a presented CA).
    static func find(from presented: [Certificate], limit: TrustLimits, where requirement: PinRequirement) -> [Certificate]? {
        guard let leaf = presented.first else { return nil }
        var path = [leaf]
        var used = Set([0])
        while true {
            if requirement.isSatisfied(by: path[path.count - 1]) { return path }
            guard let next = Self.issuerIndex(of: path[path.count - 1], in: presented, excluding: used) else { return nil }
            used.insert(next)
            path.append(presented[next])
        }
    }

    /// The signature-linked path from the leaf, as far as it goes (for failure reports).
    static func longest(from presented: [Certificate], limit: TrustLimits) -> [Certificate] {
        guard let leaf = presented.first else { return [] }
        var path = [leaf]
        var used = Set([0])
        while let next = Self.issuerIndex(of: path[path.count - 1], in: presented, excluding: used) {
            used.insert(next)
            path.append(presented[next])
        }
        return path
    }

    /// A presented certificate, not used yet, that is named as the issuer and whose key verifies the signature.
    /// A self-signed certificate ends the path: it is its own issuer.
    private static func issuerIndex(of certificate: Certificate, in presented: [Certificate], excluding used: Set<Int>) -> Int? {
        presented.indices.first { index in
            !used.contains(index) && presented[index].subject == certificate.issuer
                && presented[index].publicKey.isValidSignature(certificate.signature, for: certificate)
        }
    }
}
