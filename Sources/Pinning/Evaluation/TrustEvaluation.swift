public import Foundation
public import X509

/// The verdict of an evaluation: trusted, with the path that earned it, or untrusted, with why.
public enum TrustEvaluation: Sendable {
    /// The peer is trusted; the ``TrustedChain`` says on what basis and holds the path that earned it.
    case trusted(TrustedChain)
    /// The peer is not trusted; the ``TrustFailure`` says why, with the evidence.
    case untrusted(TrustFailure)

    /// Whether the peer is trusted.
    public var isTrusted: Bool {
        if case .trusted = self { return true }
        return false
    }

    /// The failure, when untrusted.
    public var failure: TrustFailure? {
        if case .untrusted(let failure) = self { return failure }
        return nil
    }

    /// Returns the trusted chain or throws the ``TrustFailure``.
    public func get() throws(TrustFailure) -> TrustedChain {
        switch self {
        case .trusted(let chain): return chain
        case .untrusted(let failure): throw failure
        }
    }
}

/// A chain that was trusted, and on what basis.
///
/// Only the evaluation that earned it makes one: its properties are read-only outside this module, so a caller
/// cannot relabel a verdict (change its ``basis`` or swap its ``path``).
public struct TrustedChain: Sendable {
    /// Why a chain was trusted.
    public struct Basis: Hashable, Sendable, CustomStringConvertible {
        enum Storage: String, Hashable, Sendable {
            case validatedPath
            case allowInvalidCertificates
            case pinOnSignatureLinkedPath
        }
        let storage: Storage

        /// A path from the leaf to a trust anchor met every rule (and carried a pin, when pins were required).
        public static let validatedPath = Basis(storage: .validatedPath)
        /// Nothing was validated: `allowInvalidCertificates` with pinning mode `none` accepts any chain.
        public static let allowInvalidCertificates = Basis(storage: .allowInvalidCertificates)
        /// The chain did not validate, `allowInvalidCertificates` let it through, and a pinned key sits on the
        /// path linked by signatures from the leaf.
        public static let pinOnSignatureLinkedPath = Basis(storage: .pinOnSignatureLinkedPath)

        /// The basis's name, e.g. `validatedPath`.
        public var description: String { self.storage.rawValue }
    }

    /// The chain as the peer presented it.
    public internal(set) var presentedChain: [Certificate]
    /// The validated path, leaf to anchor; nil when the chain was trusted without validation
    /// (see ``Basis``).
    package internal(set) var validatedChain: X509.ValidatedCertificateChain?
    /// For ``Basis/pinOnSignatureLinkedPath``: the signature-linked path that carried the pin.
    package internal(set) var linkedPath: [Certificate]?
    /// On what basis.
    public internal(set) var basis: Basis
    /// Warnings a reader should see (trust granted without validation, expired pin set, revocation status
    /// unknown in soft mode, …).
    public internal(set) var warnings: [String]
    /// The revocation status of each certificate in scope on ``path``; nil when the settings check no
    /// revocation (or nothing was validated).
    public internal(set) var revocation: RevocationReport?
    /// The settings the chain was judged under (anchors, roots, purpose, profile, limits, revocation): what a
    /// report of this verdict shows, without the caller rebuilding them. Nil only for a verdict made outside this
    /// package's evaluations.
    public internal(set) var settings: TrustSettings?
    /// The instant the chain was judged at (the fixed one, or the moment of evaluation; for a verdict answered
    /// from an ``EvaluationCache``, the moment it was answered). Nil only with ``settings``.
    public internal(set) var validationTime: Date?
    /// When every certificate on the paths that earned this verdict is valid; nil when no path was validated
    /// (the verdict does not depend on the clock). ``EvaluationCache`` bounds an entry's life by it.
    var validityWindow: ValidityWindow?

    init(
        presentedChain: [Certificate],
        validatedChain: X509.ValidatedCertificateChain?,
        linkedPath: [Certificate]? = nil,
        basis: Basis,
        warnings: [String] = [],
        revocation: RevocationReport? = nil
    ) {
        self.presentedChain = presentedChain
        self.validatedChain = validatedChain
        self.settings = nil
        self.validationTime = nil
        self.linkedPath = linkedPath
        self.basis = basis
        // Soft mode accepted an unknown status: say so on every verdict that rests on it.
        self.warnings = warnings + (revocation?.unknown ?? []).map { $0.summary + "; accepted because revocation mode is soft" }
        self.revocation = revocation
        var window = validatedChain.flatMap { ValidityWindow(path: $0) }
        if let revocation {
            // A verdict that checked CRLs holds only while each CRL is current (then a stale CRL, or a newer
            // one, must be looked at again).
            // (The signature-linked path of allowInvalidCertificates has no window of its own: its dates are
            // waived; its revocation is not.)
            window = revocation.window.map { $0.intersection(window) } ?? window
        }
        self.validityWindow = window
    }

    /// The path a pin or an anchor was found on, leaf first: the validated path, leaf to anchor
    /// (``Basis/validatedPath``), or the path linked by signatures from the leaf that carried the pin
    /// (``Basis/pinOnSignatureLinkedPath``); empty when nothing was validated (``Basis/allowInvalidCertificates``).
    public var path: [Certificate] {
        if let validatedChain { return Array(validatedChain) }
        return self.linkedPath ?? []
    }
}

extension TrustEvaluation {
    /// This verdict when it is untrusted or rests on a validated path; a refusal
    /// (``TrustFailure/Code/insecurePolicy``) when the chain was trusted without one
    /// (``TrustedChain/Basis/allowInvalidCertificates``, ``TrustedChain/Basis/pinOnSignatureLinkedPath``).
    ///
    /// For callers that hand the decision to an evaluator of the user's but must not accept a relaxation on
    /// their behalf: a mutual-TLS server judging clients with one (its client CAs must anchor every client).
    ///
    /// - Parameter whose: Whose chain it is, for the refusal's reason (`"a client chain"`).
    package func requiringValidatedPath(whose: String) -> TrustEvaluation {
        guard case .trusted(let chain) = self, chain.basis != .validatedPath else { return self }
        return .untrusted(
            TrustFailure(
                code: .insecurePolicy,
                reason: "\(whose) must be validated to an anchor, and the evaluator trusted it on the basis \(chain.basis) (allowInvalidCertificates), which is not accepted here",
                host: nil,
                validationTime: chain.validationTime ?? Date(),
                presentedChain: chain.presentedChain,
                settings: chain.settings
            )
        )
    }

    /// `trust` refused before it is evaluated, because no configuration can judge `host`
    /// (``TrustFailure/Code/hostNotAllowed``), at the trust's validation time (now when it has none). The failure
    /// records the caller's place, as if it had made the failure itself.
    static func hostNotAllowed(
        _ trust: ServerTrust,
        host: String?,
        reason: String,
        file: String = #fileID,
        line: Int = #line
    ) -> TrustEvaluation {
        .untrusted(
            TrustFailure(
                code: .hostNotAllowed,
                reason: reason,
                host: host,
                validationTime: trust.validationTime ?? Date(),
                presentedChain: trust.certificates,
                file: file,
                line: line
            )
        )
    }

    /// The trust as it was judged: the presented chain under the settings the verdict records, at its instant;
    /// nil for a verdict made outside this package's evaluations (which records no settings). What a report of
    /// the verdict shows, without the caller rebuilding the settings.
    package var judgedTrust: ServerTrust? {
        switch self {
        case .trusted(let chain):
            guard let settings = chain.settings else { return nil }
            var trust = ServerTrust(certificates: chain.presentedChain, settings: settings)
            trust.validationTime = chain.validationTime
            return trust
        case .untrusted(let failure):
            guard let settings = failure.settings else { return nil }
            var trust = ServerTrust(certificates: failure.presentedChain, settings: settings)
            trust.validationTime = failure.validationTime
            return trust
        }
    }

    /// This verdict with the settings and instant it was judged under recorded, unless an inner evaluation
    /// recorded them already (the innermost evaluation knows the exact settings it applied: a configuration
    /// entry's revocation policy combined with the client's, for one).
    func judged(under settings: TrustSettings, at time: Date) -> TrustEvaluation {
        switch self {
        case .trusted(var chain):
            guard chain.settings == nil else { return self }
            chain.settings = settings
            chain.validationTime = time
            return .trusted(chain)
        case .untrusted(var failure):
            guard failure.settings == nil else { return self }
            failure.settings = settings
            return .untrusted(failure)
        }
    }
}
