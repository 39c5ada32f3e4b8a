import Foundation
import X509

extension EvaluationCache {
    /// Everything a verdict depends on besides the clock.
    struct Key: Hashable {
        var chain: [Certificate]
        var evaluator: EvaluatorIdentity
        var anchors: [Certificate]
        var anchorsOnly: Bool
        var rootSetID: Int
        var validationTime: Date?
        var purpose: TrustPurpose
        var profile: ValidationProfile
        var limits: TrustLimits
        /// The CRLs, mode and scope (compared by digest; see ``RevocationPolicy``).
        var revocation: RevocationPolicy?
        /// Computed once per look-up: a hit hashes the key once, although it touches the table twice (find, then
        /// record the use).
        private let digest: Int

        init(
            chain: [Certificate],
            evaluator: EvaluatorIdentity,
            anchors: [Certificate],
            anchorsOnly: Bool,
            rootSetID: Int,
            validationTime: Date?,
            purpose: TrustPurpose,
            profile: ValidationProfile,
            limits: TrustLimits,
            revocation: RevocationPolicy?
        ) {
            self.chain = chain
            self.evaluator = evaluator
            self.anchors = anchors
            self.anchorsOnly = anchorsOnly
            self.rootSetID = rootSetID
            self.validationTime = validationTime
            self.purpose = purpose
            self.profile = profile
            self.limits = limits
            self.revocation = revocation
            var hasher = Hasher()
            Self.combine(chain, into: &hasher)
            hasher.combine(evaluator)
            Self.combine(anchors, into: &hasher)
            hasher.combine(anchorsOnly)
            hasher.combine(rootSetID)
            hasher.combine(validationTime)
            hasher.combine(purpose)
            hasher.combine(profile)
            hasher.combine(limits)
            hasher.combine(revocation)
            self.digest = hasher.finalize()
        }

        /// Every field compared in full (the digest only short-cuts unequal keys): two keys are equal only when
        /// their certificates are byte for byte the same.
        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.digest == rhs.digest && lhs.chain == rhs.chain && lhs.evaluator == rhs.evaluator
                && lhs.anchors == rhs.anchors && lhs.anchorsOnly == rhs.anchorsOnly && lhs.rootSetID == rhs.rootSetID
                && lhs.validationTime == rhs.validationTime && lhs.purpose == rhs.purpose
                && lhs.profile == rhs.profile && lhs.limits == rhs.limits && lhs.revocation == rhs.revocation
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(self.digest)
        }

        /// Feeds a sample of each certificate to the hasher (``X509/Certificate/combineSample(into:)``). Nobody can
        /// fill the table with colliding entries: only trusted verdicts are stored. Hashing whole certificates was
        /// 38% of a hit.
        static func combine(_ certificates: [Certificate], into hasher: inout Hasher) {
            hasher.combine(certificates.count)
            for certificate in certificates { certificate.combineSample(into: &hasher) }
        }
    }

    /// The policy half of the key.
    enum EvaluatorIdentity: Hashable {
        case serverTrust(namePolicy: TrustNamePolicy, pins: PinRequirement?)
        case securityPolicy(
            domain: String?,
            mode: SecurityPolicy.PinningMode,
            pinnedCertificates: [Certificate],
            pins: [Pin],
            allowInvalidCertificates: Bool,
            validatesDomainName: Bool
        )
    }
}

extension Certificate {
    /// Feeds a sample of the certificate to `hasher`: the TBSCertificate's length, its first 64 bytes (which hold
    /// the serial number) and its last 64 (the end of the extensions, usually key identifiers or names), and the
    /// signature (the end of the whole DER, as PinningNIO's `ParsedCertificateMemo` samples it). For the tables
    /// keyed by whole certificates (the verdict cache, the facts memo, the verified-link memo): the hash only has
    /// to spread keys over the table; their equality compares every byte, so two certificates with the same sample
    /// merely share a bucket.
    ///
    /// The signature is what an issuer cannot choose: the end of the extensions is the issuer's to write, so
    /// without it a party whose certificates count as trusted could mint many certificates with one TBS sample
    /// (differing in the middle) and make the memos' probe chains run full comparisons. Any change to the TBS
    /// changes the signature. `Certificate.Signature`'s own hash is used, the public way to its bytes without a
    /// copy or a re-encoding: for ECDSA it hashes `r` and `s`, for RSA and Ed25519 the signature's `Data`.
    func combineSample(into hasher: inout Hasher) {
        let bytes = self.tbsCertificateBytes
        hasher.combine(bytes.count)
        bytes.prefix(64).withUnsafeBytes { hasher.combine(bytes: $0) }
        bytes.suffix(64).withUnsafeBytes { hasher.combine(bytes: $0) }
        hasher.combine(self.signature)
    }
}
