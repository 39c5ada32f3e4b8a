public import Foundation
public import X509

/// How a peer's chain is judged, apart from the chain itself: anchors, platform roots, purpose, profile and
/// limits. Configurations, clients and servers hold one of these; each handshake pairs it with the chain the
/// peer presented to make a ``ServerTrust`` (``trust(for:)``).
///
/// <!-- snippet: given(companyRoot: Certificate, policy: SecurityPolicy)
/// import PinningNIO
/// import X509
/// -->
/// ```swift
/// let settings = TrustSettings(anchors: [companyRoot], anchorsOnly: true)
/// let client = try PinnedTLSClient(evaluator: policy, settings: settings)
/// ```
///
/// There is deliberately no public validation clock here. Settings live as long as the client or server that
/// holds them, and a fixed instant held that long would keep accepting certificates after they expire. To
/// evaluate one chain at a chosen instant (as `openssl verify -attime` does), set
/// ``ServerTrust/validationTime`` on that one ``ServerTrust``. Tests and tools that need a whole client to
/// run at a fixed instant use `validatingAt(_:)` behind `@_spi(FixedValidationTime)`, as swift-certificates
/// keeps its dangerous switches (`@_spi(DisableValidityCheck)`) behind SPI.
public struct TrustSettings: Sendable {
    /// Custom trust anchors (`SecTrustSetAnchorCertificates`).
    public var anchors: [Certificate]
    /// When true only ``anchors`` are trusted; when false (the default) they are added to the platform roots.
    ///
    /// - Note: Apple's `SecTrustSetAnchorCertificates` switches to anchors-only as a side effect, and callers
    ///   have been surprised by it (Alamofire#3166). Here adding anchors never drops the platform roots; say
    ///   `anchorsOnly = true` to trust only them (`SecTrustSetAnchorCertificatesOnly`).
    public var anchorsOnly: Bool
    /// The platform roots; nil means the operating system's store (``TrustRoots/platform``), loaded on first use.
    public var platformRoots: TrustRoots?
    /// What the leaf must be good for: server authentication (the default) or client authentication.
    public var purpose: TrustPurpose
    /// The certificate profile paths must conform to: ``ValidationProfile/rfc5280`` (default) or
    /// ``ValidationProfile/webPKI(publicSuffixList:)``.
    public var profile: ValidationProfile
    /// Resource limits that bound the work a hostile chain can cause.
    public var limits: TrustLimits
    /// Whether certificates on the validated path are checked against CRLs; nil (the default) checks nothing.
    /// See ``RevocationPolicy``.
    public var revocation: RevocationPolicy?
    /// A fixed validation instant for every evaluation made with these settings; nil (always, unless set
    /// through the SPI) means the moment of each evaluation.
    @_spi(FixedValidationTime) public var validationTime: Date?

    /// Settings with the given anchors, roots, purpose, profile and limits; evaluations use the current time.
    public init(
        anchors: [Certificate] = [],
        anchorsOnly: Bool = false,
        platformRoots: TrustRoots? = nil,
        purpose: TrustPurpose = .serverAuthentication,
        profile: ValidationProfile = .rfc5280,
        limits: TrustLimits = .default,
        revocation: RevocationPolicy? = nil
    ) {
        self.revocation = revocation
        self.anchors = anchors
        self.anchorsOnly = anchorsOnly
        self.platformRoots = platformRoots
        self.purpose = purpose
        self.profile = profile
        self.limits = limits
        self.validationTime = nil
    }

    /// The platform roots, server authentication, the RFC 5280 profile and the default limits.
    public static let `default` = TrustSettings()

    /// A copy that evaluates every chain at `instant` instead of the current time. For tests and for tools
    /// that replay a past handshake; a long-lived client or server must never use it (it would keep accepting
    /// expired certificates).
    @_spi(FixedValidationTime)
    public func validatingAt(_ instant: Date?) -> TrustSettings {
        var copy = self
        copy.validationTime = instant
        return copy
    }

    /// These settings applied to `certificates`, the chain a peer presented (leaf first).
    public func trust(for certificates: [Certificate]) -> ServerTrust {
        ServerTrust(certificates: certificates, settings: self)
    }
}
