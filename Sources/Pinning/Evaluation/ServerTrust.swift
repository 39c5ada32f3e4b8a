public import Foundation
public import X509

/// A peer's certificate chain together with how to judge it: the counterpart of a `SecTrust`.
///
/// What was presented (``certificates``) is kept apart from how it is judged (its settings, a
/// ``TrustSettings`` that a client, server or configuration holds for all its connections). The settings'
/// fields can be read and set through this value too.
///
/// <!-- snippet: given(presented: [Certificate], companyRoot: Certificate)
/// import X509
/// -->
/// ```swift
/// var trust = ServerTrust(certificates: presented)          // leaf first
/// trust.anchors = [companyRoot]                             // added to the platform roots
/// let verdict = await trust.evaluate(.ssl(host: "api.example.com"))
/// ```
public struct ServerTrust: Sendable {
    /// The chain as the peer presented it: leaf first, the rest in any order; duplicates and unrelated extras
    /// are tolerated (path building picks what it needs).
    public var certificates: [Certificate]
    /// How the chain is judged: anchors, platform roots, purpose, profile, limits.
    package var settings: TrustSettings
    /// The validation instant of this one evaluation (`SecTrustSetVerifyDate`); nil means the moment of
    /// evaluation.
    public var validationTime: Date?
    /// The port the connection was made to, when the caller knows it (the client path sets it for each
    /// handshake); nil means unknown. It never changes a verdict: a ``PinningConfiguration`` puts it into the
    /// failure reports it builds, and assumes 443 when it is nil.
    public var port: Int?

    /// Custom trust anchors (`SecTrustSetAnchorCertificates`); see ``TrustSettings/anchors``.
    public var anchors: [Certificate] {
        get { self.settings.anchors }
        set { self.settings.anchors = newValue }
    }
    /// When true only ``anchors`` are trusted; when false (the default) they are added to the platform roots.
    /// See ``TrustSettings/anchorsOnly``.
    public var anchorsOnly: Bool {
        get { self.settings.anchorsOnly }
        set { self.settings.anchorsOnly = newValue }
    }
    /// The platform roots; nil means the operating system's store (``TrustRoots/platform``), loaded on first use.
    public var platformRoots: TrustRoots? {
        get { self.settings.platformRoots }
        set { self.settings.platformRoots = newValue }
    }
    /// What the leaf must be good for: server authentication (the default) or client authentication.
    package var purpose: TrustPurpose {
        get { self.settings.purpose }
        set { self.settings.purpose = newValue }
    }
    /// The certificate profile paths must conform to: ``ValidationProfile/rfc5280`` (default) or
    /// ``ValidationProfile/webPKI(publicSuffixList:)``.
    package var profile: ValidationProfile {
        get { self.settings.profile }
        set { self.settings.profile = newValue }
    }
    /// Resource limits that bound the work a hostile chain can cause.
    package var limits: TrustLimits {
        get { self.settings.limits }
        set { self.settings.limits = newValue }
    }
    /// Revocation checking; see ``TrustSettings/revocation``.
    package var revocation: RevocationPolicy? {
        get { self.settings.revocation }
        set { self.settings.revocation = newValue }
    }

    /// A trust for `certificates`, leaf first.
    public init(
        certificates: [Certificate],
        anchors: [Certificate] = [],
        anchorsOnly: Bool = false,
        platformRoots: TrustRoots? = nil,
        validationTime: Date? = nil,
        purpose: TrustPurpose = .serverAuthentication,
        profile: ValidationProfile = .rfc5280,
        limits: TrustLimits = .default
    ) {
        self.certificates = certificates
        self.settings = TrustSettings(
            anchors: anchors,
            anchorsOnly: anchorsOnly,
            platformRoots: platformRoots,
            purpose: purpose,
            profile: profile,
            limits: limits
        )
        self.validationTime = validationTime
    }

    /// `certificates` (leaf first) judged by `settings`; the validation instant is the settings' fixed one if
    /// they have one (`validatingAt(_:)`, behind `@_spi(FixedValidationTime)`), else the moment of evaluation.
    package init(certificates: [Certificate], settings: TrustSettings) {
        self.certificates = certificates
        self.settings = settings
        self.validationTime = settings.validationTime
    }

    /// The anchors this trust validates against: ``anchors``, plus the platform roots unless ``anchorsOnly``.
    var effectiveAnchors: [Certificate] {
        self.anchorSet.certificates
    }

    /// ``effectiveAnchors`` with their certificate store, built once per distinct set (see ``AnchorSet``).
    var anchorSet: AnchorSet {
        if self.anchorsOnly { return AnchorSet.of(roots: nil, anchors: self.anchors) }
        return AnchorSet.of(roots: (self.platformRoots ?? .platform).certificates, anchors: self.anchors)
    }

    /// Validates the chain (RFC 5280 path building to an anchor, key usages, and the name rule), optionally
    /// requiring a pin on the validated path. This is `SecTrustEvaluateWithError` with a policy.
    ///
    /// - Parameters:
    ///   - namePolicy: ``TrustNamePolicy/ssl(host:)`` checks the host; ``TrustNamePolicy/basicX509`` checks none.
    ///   - pins: when given, some certificate on the validated path must satisfy it.
    public func evaluate(_ namePolicy: TrustNamePolicy, pins: PinRequirement? = nil) async -> TrustEvaluation {
        self.evaluateSynchronously(namePolicy, pins: pins)
    }

    /// ``evaluate(_:pins:)`` without suspending: the same validation, the same verdict (issue 31), for a connection
    /// adapter that answers on the event loop. Its work is bounded by the evaluation's budget (``TrustLimits``).
    package func evaluateSynchronously(_ namePolicy: TrustNamePolicy, pins: PinRequirement? = nil) -> TrustEvaluation {
        let time = self.validationTime ?? Date()
        let validation = PathValidation(trust: self, validationTime: time)
        let result = validation.validate(
            anchors: self.anchorSet,
            namePolicy: namePolicy,
            pins: pins,
            expectedPins: pins.map { $0.reportedPins } ?? []
        )
        switch result {
        case .success(let path):
            return TrustEvaluation.trusted(
                TrustedChain(
                    presentedChain: self.certificates,
                    validatedChain: path,
                    basis: .validatedPath,
                    revocation: validation.revocationReport(for: Array(path))
                )
            ).judged(under: self.settings, at: time)
        case .failure(let failure):
            return TrustEvaluation.untrusted(failure).judged(under: self.settings, at: time)
        }
    }
}

/// Which name the leaf must be valid for (`SecPolicyCreateSSL` versus `SecPolicyCreateBasicX509`).
public enum TrustNamePolicy: Hashable, Sendable {
    /// The leaf must be valid for this DNS name or IP address.
    case ssl(host: String)
    /// No name is checked: basic X.509 validation only.
    case basicX509
}

/// Bounds on the work one evaluation may do, so a hostile peer cannot make us work without limit (see
/// `PathBuildingBudget` for how they are applied).
public struct TrustLimits: Hashable, Sendable {
    /// The most certificates a peer may present. Default 64 (real chains have 2 to 4; path-building test
    /// suites send up to 36).
    public var maximumPresentedCertificates: Int
    /// The most intermediate CAs between the leaf and the anchor. Self-issued intermediates (a CA re-keying
    /// under its own name) do not count, as with RFC 5280's pathLenConstraint. Default 8.
    public var maximumIntermediates: Int
    /// The most issuer look-ups path building may make. Default 1,024.
    public var maximumIssuerLookups: Int
    /// The most signature checks one evaluation may make, counted in P-256 verifications: a check with a
    /// costlier key (P-384, P-521, RSA above 2,048 bits) counts as several, so the bound holds in CPU time.
    /// Default 100 (rustls/webpki's figure; a real chain needs 2 to 4).
    public var maximumSignatureChecks: Int
    /// The most certificates of one name tried as the issuer of one certificate. Default 16 (a real chain has
    /// one, a cross-signed CA two or three).
    public var maximumIssuerCandidates: Int

    /// The defaults.
    public static let `default` = TrustLimits(maximumPresentedCertificates: 64, maximumIntermediates: 8, maximumIssuerLookups: 1024)

    /// Limits with the given values.
    public init(
        maximumPresentedCertificates: Int,
        maximumIntermediates: Int,
        maximumIssuerLookups: Int,
        maximumSignatureChecks: Int = 100,
        maximumIssuerCandidates: Int = 16
    ) {
        self.maximumPresentedCertificates = maximumPresentedCertificates
        self.maximumIntermediates = maximumIntermediates
        self.maximumIssuerLookups = maximumIssuerLookups
        self.maximumSignatureChecks = maximumSignatureChecks
        self.maximumIssuerCandidates = maximumIssuerCandidates
    }

    /// What one signature check by `key` counts against ``maximumSignatureChecks``, in P-256 verifications.
    package static func signatureCheckCost(of key: Certificate.PublicKey) -> Int {
        PathBuildingBudget.cost(of: key)
    }
}

extension PinRequirement {
    /// The SPKI pins a report lists as expected.
    var reportedPins: [Pin] {
        switch self.storage {
        case .publicKeys(let pins): return pins.sorted()
        case .certificates: return []
        }
    }
}
