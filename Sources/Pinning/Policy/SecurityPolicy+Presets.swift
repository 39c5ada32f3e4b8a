public import X509

/// Alamofire-style presets, so a policy reads as what it does: `.defaultEvaluation`, `.publicKeys(pins)`,
/// `.publicKeys(in: certificates)`, `.pinnedCertificates(certificates)`.
///
/// <!-- snippet: given(primary: Pin, backup: Pin)
/// import PinningNIO
/// -->
/// ```swift
/// let client = try PinnedTLSClient(evaluator: SecurityPolicy.publicKeys([primary, backup]))
/// ```
///
/// Every preset fails closed: it validates the chain and the host name, and a pinning preset with nothing to
/// pin trusts nothing (``TrustFailure/Code/pinMismatch``). There is deliberately no counterpart to
/// Alamofire's `DisabledTrustEvaluator` (trust everything): a preset that turns evaluation off cannot keep
/// these semantics. To trust a private CA or a self-signed device, add it as an anchor or pin it.
extension SecurityPolicy {
    /// Alamofire's `DefaultTrustEvaluator`: no pins; the chain must validate against the trust's anchors and
    /// the leaf must be valid for the host. The same policy as ``default``.
    public static var defaultEvaluation: SecurityPolicy { SecurityPolicy(pinningMode: .none) }

    /// Alamofire's `PublicKeysTrustEvaluator` with SPKI pins: the chain and the host name must validate, and
    /// some certificate on the validated path must carry one of `pins`.
    ///
    /// - Parameter pins: The accepted SPKI SHA-256 pins; include a backup. Empty: nothing is trusted.
    public static func publicKeys(_ pins: [Pin]) -> SecurityPolicy {
        SecurityPolicy(pinningMode: .publicKey, pins: pins)
    }

    /// Alamofire's `PublicKeysTrustEvaluator(keys:)`: as ``publicKeys(_:)`` with the public keys of
    /// `certificates` as the pins.
    ///
    /// - Parameter certificates: Certificates whose keys are pinned (a CA's, say, or the server's next
    ///   certificate). Empty: nothing is trusted.
    public static func publicKeys(in certificates: [Certificate]) -> SecurityPolicy {
        SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: certificates)
    }

    /// Alamofire's `PinnedCertificatesTrustEvaluator`: the chain must validate against the platform roots and
    /// the trust's anchors, and again with `certificates` as the only anchors; the host name must match.
    ///
    /// - Parameter certificates: The pinned certificates (DER equality). Empty: nothing is trusted.
    public static func pinnedCertificates(_ certificates: [Certificate]) -> SecurityPolicy {
        SecurityPolicy(pinningMode: .certificate, pinnedCertificates: certificates)
    }
}
