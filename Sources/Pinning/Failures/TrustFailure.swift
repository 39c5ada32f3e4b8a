public import Foundation
public import X509

/// Why a peer was not trusted: the stage that failed and its evidence.
///
/// `description` fits on one log line; ``multilineDescription`` is for people (the CLI prints it).
/// Equality compares only ``code``.
public struct TrustFailure: Error, Sendable, CustomStringConvertible, Equatable {
    /// The stage that failed. New codes may be added; switch over them with a `default` that fails closed.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Storage: String, Hashable, Sendable {
            case noPeerCertificates
            case tooManyCertificates
            case invalidHost
            case noPathToAnchor
            case pathBuildingLimitExceeded
            case pathTooLong
            case certificateExpired
            case certificateNotYetValid
            case constraintViolation
            case keyUsage
            case extendedKeyUsage
            case hostnameMismatch
            case pinMismatch
            case insecurePolicy
            case hostNotAllowed
            case revoked
            case revocationUnknown
        }
        let storage: Storage

        /// The peer presented no certificate.
        public static let noPeerCertificates = Code(storage: .noPeerCertificates)
        /// The peer presented more certificates than the evaluator accepts (a resource limit).
        public static let tooManyCertificates = Code(storage: .tooManyCertificates)
        /// The expected host is neither a DNS name nor an IP address.
        public static let invalidHost = Code(storage: .invalidHost)
        /// No path leads from the leaf to a trust anchor (unknown issuer, bad signature, unhandled critical
        /// extension, or no anchors at all).
        public static let noPathToAnchor = Code(storage: .noPathToAnchor)
        /// Path building tried more candidate issuers than the limit allows (a resource limit).
        public static let pathBuildingLimitExceeded = Code(storage: .pathBuildingLimitExceeded)
        /// Every path is longer than the allowed depth.
        public static let pathTooLong = Code(storage: .pathTooLong)
        /// A certificate on the path had expired at the validation time.
        public static let certificateExpired = Code(storage: .certificateExpired)
        /// A certificate on the path was not yet valid at the validation time.
        public static let certificateNotYetValid = Code(storage: .certificateNotYetValid)
        /// basicConstraints, pathLen, name constraints or the certificate version ruled the path out.
        public static let constraintViolation = Code(storage: .constraintViolation)
        /// A keyUsage extension ruled the path out.
        public static let keyUsage = Code(storage: .keyUsage)
        /// An extendedKeyUsage extension ruled the path out (serverAuth/clientAuth missing).
        public static let extendedKeyUsage = Code(storage: .extendedKeyUsage)
        /// The leaf is not valid for the expected host.
        public static let hostnameMismatch = Code(storage: .hostnameMismatch)
        /// The path validated, but no certificate on it matches a pin.
        public static let pinMismatch = Code(storage: .pinMismatch)
        /// The security policy itself refuses: AFSecurityPolicy's guard against accepting invalid certificates
        /// while checking names without any pin.
        public static let insecurePolicy = Code(storage: .insecurePolicy)
        /// A host pinning configuration refuses the host outright: no entry matches it and unlisted hosts are
        /// rejected (`"unlistedHosts": "reject"` in the configuration), or no host was given at all.
        public static let hostNotAllowed = Code(storage: .hostNotAllowed)
        /// A certificate on the path is listed on a usable CRL from its issuer (``RevocationPolicy``).
        public static let revoked = Code(storage: .revoked)
        /// Revocation mode hard, and no usable CRL could say whether a certificate in scope is revoked (none
        /// given, stale, not yet valid, wrongly signed, or not usable under RFC 5280 §5).
        public static let revocationUnknown = Code(storage: .revocationUnknown)

        /// The code's name, e.g. `pinMismatch`.
        public var description: String { self.storage.rawValue }
    }

    /// One presented certificate as a failure report shows it.
    package struct PresentedCertificate: Sendable, Hashable {
        /// Position in the chain as presented (0 is the leaf).
        package var index: Int
        /// The subject distinguished name, e.g. `CN=api.example.com`.
        package var subject: String
        /// The issuer distinguished name.
        package var issuer: String
        /// The start of the validity period.
        package var notValidBefore: Date
        /// The end of the validity period.
        package var notValidAfter: Date
        /// The SPKI SHA-256 pin of its public key.
        package var pin: Pin
        /// Whether this certificate is on the validated path (false when no path validated).
        package var isOnValidatedPath: Bool
    }

    /// The failing stage.
    public internal(set) var code: Code
    /// What went wrong, specifically, in one sentence.
    public internal(set) var reason: String
    /// The host the peer had to prove, if any.
    public internal(set) var host: String?
    /// The validation instant.
    public internal(set) var validationTime: Date
    /// The chain as the peer presented it, leaf first.
    public internal(set) var presentedChain: [Certificate]
    /// The presented chain as the report shows it, each certificate with its pin, computed from
    /// ``presentedChain`` and ``validatedPath`` when read. (Computing it for every refusal, read or not, was 10% of
    /// a full x509-limbo run: two name descriptions and a digest per presented certificate.)
    package var presentedCertificates: [PresentedCertificate] {
        let onPath = Set((self.validatedPath ?? []).map(\.derBytes))
        return self.presentedChain.enumerated().map { index, certificate in
            PresentedCertificate(
                index: index,
                subject: certificate.subject.description,
                issuer: certificate.issuer.description,
                notValidBefore: certificate.notValidBefore,
                notValidAfter: certificate.notValidAfter,
                pin: Pin(spkiOf: certificate),
                isOnValidatedPath: onPath.contains(certificate.derBytes)
            )
        }
    }
    /// The path that validated when the failure came after validation (pin mismatch), else nil.
    public internal(set) var validatedPath: [Certificate]?
    /// The candidate path the failure was found on (leaf to anchor), when path building reached an anchor.
    public internal(set) var failedPath: [Certificate]?
    /// Which certificate of ``failedPath`` failed, when one did.
    public internal(set) var failedCertificateIndex: Int?
    /// For ``Code/hostnameMismatch``: the names the leaf carries (`DNS:…`, `IP:…`).
    public internal(set) var leafNames: [String]
    /// The pins that would have been accepted (for certificate pinning: the pinned certificates' key pins).
    public internal(set) var expectedPins: [Pin]
    /// Further evidence lines, e.g. which issuer was missing.
    public internal(set) var details: [String]
    /// For ``Code/revoked`` and ``Code/revocationUnknown``: the status of every certificate in scope on the path
    /// that failed.
    public internal(set) var revocation: RevocationReport?
    /// The settings the chain was judged under (anchors, roots, purpose, profile, limits, revocation); the instant
    /// is ``validationTime``. Nil only for a failure made outside this package's evaluations.
    public internal(set) var settings: TrustSettings?
    /// Where the failure was created: the source file (`#fileID`).
    package internal(set) var file: String
    /// Where the failure was created: the line in ``file``.
    package internal(set) var line: Int

    init(
        code: Code,
        reason: String,
        host: String?,
        validationTime: Date,
        presentedChain: [Certificate],
        validatedPath: [Certificate]? = nil,
        failedPath: [Certificate]? = nil,
        failedCertificateIndex: Int? = nil,
        leafNames: [String] = [],
        expectedPins: [Pin] = [],
        details: [String] = [],
        revocation: RevocationReport? = nil,
        settings: TrustSettings? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.settings = settings
        self.code = code
        self.reason = reason
        self.host = host
        self.validationTime = validationTime
        self.presentedChain = presentedChain
        self.validatedPath = validatedPath
        self.failedPath = failedPath
        self.failedCertificateIndex = failedCertificateIndex
        self.leafNames = leafNames
        self.expectedPins = expectedPins
        self.details = details
        self.revocation = revocation
        self.file = file
        self.line = line
    }

    /// Only ``code`` is compared.
    public static func == (lhs: TrustFailure, rhs: TrustFailure) -> Bool { lhs.code == rhs.code }
}
