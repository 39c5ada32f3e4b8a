import Foundation
import SwiftASN1
import X509

/// What the policy stages read from one certificate, decoded once: its extensions, whether it is self-issued, its
/// serial-number rule and (on first use) its SPKI pin.
///
/// Before, every stage of ``ChainPolicy`` (basic constraints, RFC 5280 profile, key usage, extended key usage,
/// name constraints, the host name) looked up and decoded the extensions it needed itself, so one evaluation decoded
/// a leaf's subjectAltName three times and an issuer's keyUsage twice, and every evaluation decoded the
/// intermediate and the root afresh. OpenSSL keeps the decoded extensions on the certificate object
/// (`ossl_x509v3_cache_extensions`); `Certificate` is swift-certificates' value type, so the facts live beside it
/// (``CertificateFactsTable`` for one evaluation, ``CertificateFactsMemo`` across evaluations).
///
/// Each extension keeps its decoding outcome, error included, so every stage reports a malformed extension in the
/// same words as when it decoded the extension itself. Facts are a pure function of the certificate's bytes:
/// never a verdict.
final class CertificateFacts: Sendable {
    /// One extension's presence and criticality, by OID.
    struct Criticality: Sendable {
        /// Whether the extension is present.
        var isPresent: Bool
        /// Whether it is present and marked critical.
        var isCritical: Bool

        init(_ ext: Certificate.Extension?) {
            self.isPresent = ext != nil
            self.isCritical = ext?.critical ?? false
        }
    }

    let basicConstraints: Result<BasicConstraints?, any Error>
    /// The effective keyUsage (strict DER first, then BER-tolerant; see ``LenientKeyUsage``).
    let keyUsage: Result<KeyUsage?, LenientKeyUsage.DecodingError>
    let extendedKeyUsage: Result<ExtendedKeyUsage?, any Error>
    let subjectAlternativeNames: Result<SubjectAlternativeNames?, any Error>
    let nameConstraints: Result<NameConstraints?, any Error>
    let authorityKeyIdentifier: Result<AuthorityKeyIdentifier?, any Error>
    let subjectKeyIdentifier: Result<SubjectKeyIdentifier?, any Error>
    let authorityInformationAccess: Result<AuthorityInformationAccess?, any Error>

    let basicConstraintsExtension: Criticality
    let subjectAlternativeNameExtension: Criticality
    let nameConstraintsExtension: Criticality
    let extendedKeyUsageExtension: Criticality
    /// policyConstraints (2.5.29.36).
    let policyConstraintsExtension: Criticality

    /// Subject equals issuer (RFC 5280's "self-issued").
    let isSelfIssued: Bool
    /// Whether the subject is the empty sequence.
    let hasEmptySubject: Bool
    /// ``ProfileChecks/serialNumberProblem(_:)``.
    let serialNumberProblem: String?
    /// The first dNSName of the subjectAltName extension that is not in the preferred name syntax
    /// (``DNSNameSyntax/isPreferredNameSyntax(_:)``); nil when every one is, or the extension is absent or malformed.
    let firstDNSNameNotInPreferredSyntax: String?
    /// `notValidBefore` and `notValidAfter` as instants (swift-certificates converts its time fields on each read).
    let notValidBefore: Date
    let notValidAfter: Date

    /// The extensions the stages read, in the order ``init(_:)`` compares them: basicConstraints, keyUsage,
    /// extendedKeyUsage, subjectAltName, nameConstraints, authorityKeyIdentifier, subjectKeyIdentifier,
    /// authorityInfoAccess and policyConstraints (RFC 5280 §4.2.1.11, 2.5.29.36, which swift-certificates names
    /// no constant for).
    ///
    /// Each OID is paired with the field it fills, so the table's order decides only the order of comparisons.
    private enum ReadExtension {
        case basicConstraints, keyUsage, extendedKeyUsage, subjectAlternativeNames, nameConstraints
        case authorityKeyIdentifier, subjectKeyIdentifier, authorityInformationAccess, policyConstraints
    }
    private static let readExtensions: [(oid: ASN1ObjectIdentifier, field: ReadExtension)] = [
        (.X509ExtensionID.basicConstraints, .basicConstraints),
        (.X509ExtensionID.keyUsage, .keyUsage),
        (.X509ExtensionID.extendedKeyUsage, .extendedKeyUsage),
        (.X509ExtensionID.subjectAlternativeName, .subjectAlternativeNames),
        (.X509ExtensionID.nameConstraints, .nameConstraints),
        (.X509ExtensionID.authorityKeyIdentifier, .authorityKeyIdentifier),
        (.X509ExtensionID.subjectKeyIdentifier, .subjectKeyIdentifier),
        (.X509ExtensionID.authorityInformationAccess, .authorityInformationAccess),
        ([2, 5, 29, 36], .policyConstraints),
    ]

    /// The certificate these are the facts of.
    let certificate: Certificate
    /// The SPKI pin, computed on first use (only pinning policies ask for it).
    private let pin = LockedValueBox<Pin?>(nil)

    init(_ certificate: Certificate) {
        // One pass over the extensions finds every one the stages read (a certificate's extensions have distinct
        // OIDs: swift-certificates refuses duplicates when it parses), instead of a linear look-up per extension
        // and per criticality. Each is then decoded exactly as `Certificate.Extensions`' accessors decode it
        // (`self[oid:].map { try .init($0) }`).
        var basicConstraints: Certificate.Extension?
        var keyUsage: Certificate.Extension?
        var extendedKeyUsage: Certificate.Extension?
        var subjectAlternativeNames: Certificate.Extension?
        var nameConstraints: Certificate.Extension?
        var authorityKeyIdentifier: Certificate.Extension?
        var subjectKeyIdentifier: Certificate.Extension?
        var authorityInformationAccess: Certificate.Extension?
        var policyConstraints: Certificate.Extension?
        // The OIDs from one table of ours, each with its field: a `switch` over `.X509ExtensionID` constants called
        // one accessor per case (and copied its OID) for every extension of every certificate.
        let read = Self.readExtensions
        for ext in certificate.extensions {
            guard let field = read.first(where: { $0.oid == ext.oid })?.field else { continue }
            switch field {
            case .basicConstraints: basicConstraints = ext
            case .keyUsage: keyUsage = ext
            case .extendedKeyUsage: extendedKeyUsage = ext
            case .subjectAlternativeNames: subjectAlternativeNames = ext
            case .nameConstraints: nameConstraints = ext
            case .authorityKeyIdentifier: authorityKeyIdentifier = ext
            case .subjectKeyIdentifier: subjectKeyIdentifier = ext
            case .authorityInformationAccess: authorityInformationAccess = ext
            case .policyConstraints: policyConstraints = ext
            }
        }
        self.certificate = certificate
        self.basicConstraints = Result { try basicConstraints.map { try BasicConstraints($0) } }
        self.keyUsage = Result { () throws(LenientKeyUsage.DecodingError) in
            try LenientKeyUsage.decoded(keyUsageExtension: keyUsage)?.usage
        }
        self.extendedKeyUsage = Result { try extendedKeyUsage.map { try ExtendedKeyUsage($0) } }
        self.subjectAlternativeNames = Result { try subjectAlternativeNames.map { try SubjectAlternativeNames($0) } }
        self.nameConstraints = Result { try nameConstraints.map { try NameConstraints($0) } }
        self.authorityKeyIdentifier = Result { try authorityKeyIdentifier.map { try AuthorityKeyIdentifier($0) } }
        self.subjectKeyIdentifier = Result { try subjectKeyIdentifier.map { try SubjectKeyIdentifier($0) } }
        self.authorityInformationAccess = Result { try authorityInformationAccess.map { try AuthorityInformationAccess($0) } }
        self.basicConstraintsExtension = Criticality(basicConstraints)
        self.subjectAlternativeNameExtension = Criticality(subjectAlternativeNames)
        self.nameConstraintsExtension = Criticality(nameConstraints)
        self.extendedKeyUsageExtension = Criticality(extendedKeyUsage)
        self.policyConstraintsExtension = Criticality(policyConstraints)
        self.isSelfIssued = certificate.subject == certificate.issuer
        self.hasEmptySubject = certificate.subject.isEmpty
        self.serialNumberProblem = ProfileChecks.serialNumberProblem(certificate)
        var notPreferred: String?
        if case .success(let sans?) = self.subjectAlternativeNames {
            for case .dnsName(let name) in sans where !DNSNameSyntax.isPreferredNameSyntax(name) {
                notPreferred = name
                break
            }
        }
        self.firstDNSNameNotInPreferredSyntax = notPreferred
        self.notValidBefore = certificate.notValidBefore
        self.notValidAfter = certificate.notValidAfter
    }

    /// Whether basicConstraints decodes and asserts cA (a malformed extension is not a CA).
    var isCertificateAuthority: Bool {
        if case .success(.isCertificateAuthority?) = self.basicConstraints { return true }
        return false
    }

    /// ``Pin/init(spkiOf:)`` of the certificate, computed once.
    var spkiPin: Pin {
        if let pin = self.pin.withLockedValue({ $0 }) { return pin }
        // Computed outside the lock; two threads may compute the same pin once each, which is harmless.
        let pin = Pin(spkiOf: self.certificate)
        self.pin.withLockedValue { $0 = pin }
        return pin
    }
}

/// The facts of the certificates one evaluation meets, each decoded once: from the process's
/// ``CertificateFactsMemo`` when a trusted path already carried the certificate, else decoded here.
///
/// Path building calls the policy serially, but the policy must be `Sendable`, so the table is a locked
/// reference shared by the policy's copies (as ``CandidateLog`` is). Bounded by what the evaluation may meet: the
/// presented certificates (at most ``TrustLimits/maximumPresentedCertificates``) and the anchors path building
/// offers.
final class CertificateFactsTable: Sendable {
    private let memo: CertificateFactsMemo
    /// `fresh`: decoded by this evaluation rather than found in the memo.
    private let known = LockedValueBox<[(facts: CertificateFacts, fresh: Bool)]>([])

    init(memo: CertificateFactsMemo = .shared) {
        self.memo = memo
    }

    /// The facts of `certificate`.
    func facts(of certificate: Certificate) -> CertificateFacts {
        // A path holds a handful of certificates, usually the very values (same storage) looked up before, so
        // `==` answers from the buffers' identity.
        if let local = self.known.withLockedValue({ list in list.first(where: { $0.facts.certificate == certificate })?.facts }) {
            return local
        }
        let remembered = self.memo.facts(of: certificate)
        let facts = remembered ?? CertificateFacts(certificate)
        self.known.withLockedValue { $0.append((facts, remembered == nil)) }
        return facts
    }

    /// Hands the facts this evaluation decoded for the certificates of a path that met every rule to the process's
    /// memo (see ``CertificateFactsMemo`` for why only those); facts that came from the memo are not stored again.
    func remember(_ path: some Sequence<Certificate>) {
        let fresh = self.known.withLockedValue { $0.filter(\.fresh).map(\.facts) }
        guard !fresh.isEmpty else { return }
        self.memo.remember(path.compactMap { certificate in fresh.first(where: { $0.certificate == certificate }) })
    }
}

/// Certificate facts across evaluations, by the certificate's exact bytes: the intermediate and the root of a
/// server (or of a fleet of devices) arrive on every handshake, so their facts are decoded once per process.
///
/// Only facts, never a verdict: a hit returns what ``CertificateFacts/init(_:)`` returned for byte-for-byte the
/// same certificate (the dictionary compares whole certificates), and every evaluation still runs every stage
/// on them. Filled only from paths a policy trusted (``CertificateFactsTable/remember(_:)``), so a peer cannot
/// churn it with certificates of its making. Bounded: at most ``capacity`` certificates, the oldest forgotten
/// first.
final class CertificateFactsMemo: Sendable {
    /// The memo every evaluation of the process shares.
    static let shared = CertificateFactsMemo(capacity: 2048)

    /// A certificate hashed by a sample of its bytes (as ``EvaluationCache`` keys are): its length, the first 64
    /// bytes of its TBSCertificate (the serial number) and the last 64; equality compares every byte. Hashing
    /// whole certificates would cost more than decoding the facts of a small one. Held by reference, the sample
    /// hashed once (``SampledKey``).
    private typealias Key = SampledKey<Certificate>

    private static func key(_ certificate: Certificate) -> Key {
        Key(certificate) { certificate, hasher in certificate.combineSample(into: &hasher) }
    }

    /// The most certificates remembered.
    let capacity: Int
    private let memo: LockedValueBox<BoundedMemo<Key, CertificateFacts>>

    init(capacity: Int) {
        self.capacity = capacity
        self.memo = LockedValueBox(BoundedMemo(capacity: capacity))
    }

    /// The facts remembered for exactly this certificate, or nil.
    func facts(of certificate: Certificate) -> CertificateFacts? {
        let key = Self.key(certificate)
        return self.memo.withLockedValue { $0[key] }
    }

    /// Remembers the facts of certificates on a trusted path.
    func remember(_ entries: [CertificateFacts]) {
        guard !entries.isEmpty else { return }
        self.memo.withLockedValue { memo in
            for facts in entries {
                memo.remember(facts, for: Self.key(facts.certificate))
            }
        }
    }

    /// How many certificates are remembered now.
    var count: Int { self.memo.withLockedValue { $0.count } }

    /// Forgets every certificate's facts (a benchmark's first sighting; never needed for correctness).
    func forgetAll() {
        self.memo.withLockedValue { $0.removeAll() }
    }
}

/// The process-wide memos evaluations share: the facts decoded from each certificate and the verified links.
/// They hold work, never verdicts, so emptying them changes no result, only what the next evaluation costs.
package enum ProcessMemos {
    /// Empties both, so the next evaluation decodes every certificate's facts and verifies every signature again:
    /// what a chain never seen before costs (`pinning bench evaluations --cold`).
    package static func forgetAll() {
        CertificateFactsMemo.shared.forgetAll()
        VerifiedLinkMemo.shared.forgetAll()
    }
}
