import SwiftASN1
import X509

/// Certificate-profile rules checked on every candidate path, after path building proved the signatures.
/// Each rule returns a problem sentence or nil; the first problem refuses the path.
struct ProfileChecks {
    var profile: ValidationProfile
    var purpose: TrustPurpose
    /// Pays for the one signature check the profile makes itself (is a self-issued certificate self-signed?).
    var budget: PathBuildingBudget? = nil

    /// The cap on name-constraint comparisons (constraints × names) per path. Checking thousands of
    /// constraints against thousands of names is quadratic; x509-limbo's `nc-dos` cases and Chrome both bound
    /// it. Deliberate: a path over the cap is refused, never waved through.
    static let maximumNameConstraintComparisons = 1 << 20

    /// The first problem of `path`, whose certificates' decoded facts are `facts` (one per certificate, in order).
    func firstProblem(in path: [Certificate], facts: [CertificateFacts]) -> (index: Int, problem: String)? {
        for index in path.indices {
            let isLeaf = index == 0
            let isAnchor = index == path.count - 1 && path.count > 1
            if let problem = self.problem(with: facts[index], isLeaf: isLeaf, isAnchor: isAnchor) {
                return (index, "certificate \(index) (\(path[index].subject)): \(problem)")
            }
        }
        if let problem = Self.nameConstraintProblem(in: path, facts: facts) {
            return (0, problem)
        }
        return nil
    }

    // MARK: - One certificate

    private func problem(with facts: CertificateFacts, isLeaf: Bool, isAnchor: Bool) -> String? {
        let basicConstraints: BasicConstraints?
        let keyUsage: KeyUsage?
        let sans: SubjectAlternativeNames?
        let nameConstraints: NameConstraints?
        let authorityKeyIdentifier: AuthorityKeyIdentifier?
        let subjectKeyIdentifier: SubjectKeyIdentifier?
        let extendedKeyUsage: ExtendedKeyUsage?
        let authorityInformationAccess: AuthorityInformationAccess?
        do {
            basicConstraints = try facts.basicConstraints.get()
            // Strict DER first; BER-tolerant for the padding quirks real roots carry (see LenientKeyUsage).
            keyUsage = try facts.keyUsage.get()
            sans = try facts.subjectAlternativeNames.get()
            nameConstraints = try facts.nameConstraints.get()
            authorityKeyIdentifier = try facts.authorityKeyIdentifier.get()
            subjectKeyIdentifier = try facts.subjectKeyIdentifier.get()
            extendedKeyUsage = try facts.extendedKeyUsage.get()
            authorityInformationAccess = try facts.authorityInformationAccess.get()
        } catch {
            return "an extension is malformed (\(error))"
        }
        let isCA: Bool
        if case .isCertificateAuthority = basicConstraints { isCA = true } else { isCA = false }

        // RFC 5280 §4.1.2.2: serial numbers are positive integers of at most 20 octets. Not applied to the
        // trust anchor: an anchor is trusted as configured (RFC 5280 §6.1.1), and long-lived roots in the
        // platform stores predate the rule (Starfield's G2 root has serial 0).
        if !isAnchor, let problem = facts.serialNumberProblem { return problem }

        // RFC 5280 §4.2.1.9: CAs mark basicConstraints critical. §4.2.1.3: keyCertSign only with cA.
        // Not applied to the trust anchor, like the serial rule: three roots Debian and Mozilla ship (Go Daddy
        // Class 2, Starfield Class 2, Chunghwa ePKI Root) mark it non-critical and could otherwise anchor nothing.
        if isCA, !isAnchor, facts.basicConstraintsExtension.isPresent, !facts.basicConstraintsExtension.isCritical {
            return "it is a CA but its basicConstraints extension is not critical (RFC 5280 §4.2.1.9)"
        }
        if let keyUsage, keyUsage.keyCertSign, !isCA {
            return "its keyUsage asserts keyCertSign but basicConstraints does not assert cA (RFC 5280 §4.2.1.3)"
        }
        if isLeaf, isCA, let keyUsage, !keyUsage.keyCertSign {
            return "it asserts cA but its keyUsage lacks keyCertSign (RFC 5280 §4.2.1.9)"
        }
        // RFC 5280 §4.1.2.6: a CA's subject is never empty.
        if isCA, facts.hasEmptySubject {
            return "it is a CA with an empty subject (RFC 5280 §4.1.2.6)"
        }
        // RFC 5280 §4.2.1.6: with an empty subject the SAN carries the identity and is critical.
        if facts.hasEmptySubject {
            guard facts.subjectAlternativeNameExtension.isCritical else {
                return "its subject is empty and its subjectAltName is missing or not critical (RFC 5280 §4.2.1.6)"
            }
        }
        // RFC 5280 §4.2.1.6: dNSNames use the preferred name syntax (letters, digits, hyphens; a leading "*."
        // wildcard label is the common extension).
        if let name = facts.firstDNSNameNotInPreferredSyntax {
            return "its subjectAltName \"\(name)\" is not a valid DNS name (RFC 5280 §4.2.1.6)"
        }
        // RFC 5280 §4.2.1.10: name constraints are critical, only in CA certificates, and never empty.
        if facts.nameConstraintsExtension.isPresent {
            // Deliberate: the Baseline Requirements allow a non-critical nameConstraints (so that old clients
            // that cannot process it still build paths), so only the RFC 5280 profile insists on critical.
            if !facts.nameConstraintsExtension.isCritical && self.profile == .rfc5280 {
                return "its nameConstraints extension is not critical (RFC 5280 §4.2.1.10)"
            }
            if !isCA { return "it carries nameConstraints but is not a CA (RFC 5280 §4.2.1.10)" }
            if let nameConstraints, nameConstraints.permittedSubtrees.isEmpty, nameConstraints.excludedSubtrees.isEmpty {
                return "its nameConstraints extension is empty (RFC 5280 §4.2.1.10)"
            }
            if let nameConstraints {
                for case .dnsName(let name) in nameConstraints.permittedSubtrees + nameConstraints.excludedSubtrees
                where name.hasPrefix(".") || name.hasSuffix(".") || name.contains("..") {
                    return "its nameConstraints holds the malformed dNSName \"\(name)\""
                }
            }
        }
        // RFC 5280 §4.2.1.11: policyConstraints is critical. (A critical one is refused earlier as unprocessed.)
        if facts.policyConstraintsExtension.isPresent, !facts.policyConstraintsExtension.isCritical {
            return "its policyConstraints extension is not critical (RFC 5280 §4.2.1.11)"
        }
        // RFC 5280 §4.2.2.1: an authorityInfoAccess extension holds at least one access description.
        if let authorityInformationAccess, Array(authorityInformationAccess).isEmpty {
            return "its authorityInfoAccess extension is empty (RFC 5280 §4.2.2.1)"
        }

        guard let publicSuffixList = self.profile.publicSuffixList else { return nil }
        return self.webPKIProblem(
            with: facts.certificate,
            facts: facts,
            isLeaf: isLeaf,
            isAnchor: isAnchor,
            isCA: isCA,
            sans: sans,
            publicSuffixList: publicSuffixList,
            authorityKeyIdentifier: authorityKeyIdentifier,
            subjectKeyIdentifier: subjectKeyIdentifier,
            extendedKeyUsage: extendedKeyUsage
        )
    }

    /// CA/Browser Forum Baseline Requirements (§7.1.2) for publicly trusted TLS certificates.
    private func webPKIProblem(
        with certificate: Certificate,
        facts: CertificateFacts,
        isLeaf: Bool,
        isAnchor: Bool,
        isCA: Bool,
        sans: SubjectAlternativeNames?,
        publicSuffixList: PublicSuffixList,
        authorityKeyIdentifier: AuthorityKeyIdentifier?,
        subjectKeyIdentifier: SubjectKeyIdentifier?,
        extendedKeyUsage: ExtendedKeyUsage?
    ) -> String? {
        let selfIssued = facts.isSelfIssued
        // A certificate that is not self-signed must name its issuer's key. The anchor is exempt: it is trusted as
        // configured (RFC 5280 §6.1.1), whatever it was issued as, so its own signature is not checked at all (the
        // answer could not change the verdict, and it would be a third signature check on every path).
        if !isAnchor {
            // The check is paid from the evaluation's budget; once the budget is spent the certificate is taken as
            // not self-signed, which only adds the authorityKeyIdentifier requirement (stricter, never laxer).
            let selfSigned =
                selfIssued && (self.budget?.takeSignatureCheck(by: certificate.publicKey) ?? true)
                && certificate.publicKey.isValidSignature(certificate.signature, for: certificate)
            if !selfSigned, authorityKeyIdentifier?.keyIdentifier == nil {
                return "it has no authorityKeyIdentifier keyIdentifier (RFC 5280 §4.2.1.1, CABF 7.1.2)"
            }
        }
        if let authorityKeyIdentifier {
            if authorityKeyIdentifier.keyIdentifier == nil {
                return "its authorityKeyIdentifier has no keyIdentifier (CABF 7.1.2)"
            }
            if authorityKeyIdentifier.authorityCertIssuer != nil || authorityKeyIdentifier.authorityCertSerialNumber != nil {
                return "its authorityKeyIdentifier names an issuer and serial (CABF 7.1.2)"
            }
            if isAnchor, selfIssued, let subjectKeyIdentifier,
                authorityKeyIdentifier.keyIdentifier != subjectKeyIdentifier.keyIdentifier
            {
                return "it is a self-signed root whose authorityKeyIdentifier differs from its subjectKeyIdentifier"
            }
        }
        if isCA && subjectKeyIdentifier == nil {
            return "it is a CA without a subjectKeyIdentifier (RFC 5280 §4.2.1.2, CABF 7.1.2)"
        }
        if isLeaf {
            guard let extendedKeyUsage else {
                return "it has no extendedKeyUsage extension (CABF 7.1.2.7.6)"
            }
            if extendedKeyUsage.contains(.any) {
                return "its extendedKeyUsage lists anyExtendedKeyUsage (CABF 7.1.2.7.10)"
            }
            if facts.extendedKeyUsageExtension.isCritical {
                return "its extendedKeyUsage extension is critical (CABF 7.1.2.7.6)"
            }
            if let sans {
                for case .dnsName(let name) in sans where name.hasPrefix("*.") {
                    if publicSuffixList.isPublicSuffix(String(name.dropFirst(2))) {
                        return "its wildcard \(name) spans a public suffix (CABF 3.2.2.6)"
                    }
                }
            }
            if facts.subjectAlternativeNameExtension.isCritical, !facts.hasEmptySubject {
                return "its subjectAltName is critical although the subject is not empty (CABF 7.1.2.7.12)"
            }
        }
        if isAnchor, extendedKeyUsage != nil {
            return "it is a root with an extendedKeyUsage extension (CABF 7.1.2.1.2)"
        }
        if let bits = RSAModulus.bitCount(certificate), bits % 8 != 0 {
            return "its RSA modulus is \(bits) bits, not a whole number of bytes (CABF 6.1.5)"
        }
        return nil
    }

    // CABF 7.1.4.3 (a common name must copy a SAN entry) is deliberately not checked. This evaluator never
    // reads the common name, so it cannot change a verdict; and enforcing it refuses hundreds of BetterTLS
    // name-constraint chains whose leaves carry a DNS-like common name outside their SANs (measured: 340
    // x509-limbo passes lost for 9 gained). The 9 webpki::cn cases are therefore recorded as known failures.

    static func serialNumberProblem(_ certificate: Certificate) -> String? {
        guard var serial = certificate.serialNumberContentBytes else {
            return "its serial number cannot be read"
        }
        if serial.first.map({ $0 & 0x80 != 0 }) ?? true {
            return "its serial number is negative or empty (RFC 5280 §4.1.2.2)"
        }
        if serial.first == 0 { serial.removeFirst() }
        if serial.isEmpty { return "its serial number is zero (RFC 5280 §4.1.2.2)" }
        if serial.count > 20 { return "its serial number is longer than 20 octets (RFC 5280 §4.1.2.2)" }
        return nil
    }

    // MARK: - Name constraints across the path

    /// Bounds the name-constraint work, and closes the wildcard gap of CVE-2025-61727: a leaf's `*.example.com`
    /// can stand for `bar.example.com`, so an excluded `bar.example.com` must refuse it even though the literal
    /// wildcard string is outside the excluded subtree.
    static func nameConstraintProblem(in path: [Certificate], facts: [CertificateFacts]) -> String? {
        guard !path.isEmpty else { return nil }
        let leafAlternativeNames: SubjectAlternativeNames?
        do {
            leafAlternativeNames = try facts[0].subjectAlternativeNames.get()
        } catch {
            return "the leaf's subjectAltName extension is malformed"
        }
        // The leaf's names are listed and counted only once an issuer has constraints to check them against
        // (most paths have none).
        var leafNames: (sans: [GeneralName], count: Int)?
        // By index, reading a certificate only where a sentence names it: iterating `zip(path, facts)` copied
        // every certificate of every candidate path (some twenty reference-counted buffers each) to look at facts.
        for index in path.indices.dropFirst() {
            let constraints: NameConstraints?
            do {
                constraints = try facts[index].nameConstraints.get()
            } catch {
                return "the nameConstraints of \(path[index].subject) are malformed"
            }
            guard let constraints else { continue }
            if leafNames == nil {
                let sans = Array(leafAlternativeNames ?? SubjectAlternativeNames())
                leafNames = (sans, sans.count + path[0].subject.reduce(0) { $0 + Array($1).count })
            }
            guard let (leafSANs, nameCount) = leafNames else { continue }
            let subtreeCount = constraints.permittedSubtrees.count + constraints.excludedSubtrees.count
            if subtreeCount * max(nameCount, 1) > Self.maximumNameConstraintComparisons {
                return "checking \(subtreeCount) name constraints of \(path[index].subject) against \(nameCount) names exceeds the limit of \(Self.maximumNameConstraintComparisons) comparisons"
            }
            for case .dnsName(let excluded) in constraints.excludedSubtrees {
                for case .dnsName(let name) in leafSANs where name.hasPrefix("*.") {
                    let wildcardParent = name.dropFirst(2).lowercased()
                    let excludedName = excluded.lowercased()
                    if let dot = excludedName.firstIndex(of: "."),
                        excludedName[excludedName.index(after: dot)...] == wildcardParent
                    {
                        return "the leaf's wildcard \(name) covers \(excluded), which \(path[index].subject) excludes"
                    }
                }
            }
        }
        return nil
    }
}

/// Reads an RSA public key's modulus size from the SubjectPublicKeyInfo.
enum RSAModulus {
    static func bitCount(_ certificate: Certificate) -> Int? {
        do {
            let spki = try DER.parse(certificate.subjectPublicKeyInfoDER)
            guard case .constructed(let parts) = spki.content else { return nil }
            var iterator = parts.makeIterator()
            guard let algorithm = iterator.next(), let key = iterator.next(),
                case .constructed(let algorithmParts) = algorithm.content,
                let oidNode = algorithmParts.first(where: { _ in true })
            else { return nil }
            let oid = try ASN1ObjectIdentifier(derEncoded: oidNode)
            guard oid == [1, 2, 840, 113549, 1, 1, 1] else { return nil }
            let bits = try ASN1BitString(derEncoded: key)
            let rsaKey = try DER.parse(bits.bytes)
            guard case .constructed(let numbers) = rsaKey.content, let modulusNode = numbers.first(where: { _ in true }),
                case .primitive(var modulus) = modulusNode.content
            else { return nil }
            while modulus.first == 0 { modulus = modulus.dropFirst() }
            guard let top = modulus.first else { return 0 }
            return (modulus.count - 1) * 8 + (8 - top.leadingZeroBitCount)
        } catch {
            return nil
        }
    }
}
