import Foundation
public import X509

/// AFNetworking's `AFSecurityPolicy`, Swift-shaped and hardened: how a client decides whether to trust a
/// server.
///
/// <!-- snippet: given(chain: [Certificate])
/// import X509
/// -->
/// ```swift
/// let policy = SecurityPolicy(pinningMode: .publicKey, pins: [try Pin("sha256/…"), try Pin("sha256/…")])
/// let verdict = await policy.evaluate(ServerTrust(certificates: chain), forDomain: "api.example.com")
/// ```
///
/// The evaluation follows `-[AFSecurityPolicy evaluateServerTrust:forDomain:]` step for step (see
/// ``evaluate(_:forDomain:)``), with one deliberate difference: pins are matched only against the validated
/// path, never against whatever the server chose to send.
public struct SecurityPolicy: Sendable {
    /// How the server's chain is compared with what the client knows (`AFSSLPinningMode`).
    public enum PinningMode: String, Hashable, Sendable, CaseIterable {
        /// No pinning: the chain must validate against the trust anchors.
        case none
        /// Some certificate on the validated path must carry a pinned public key (or SPKI pin).
        case publicKey
        /// The chain must validate with the pinned certificates as the only anchors.
        case certificate
    }

    /// The pinning mode.
    public var pinningMode: PinningMode
    /// The pinned certificates. Setting them derives ``pinnedPublicKeys``.
    public var pinnedCertificates: [Certificate] {
        didSet { self.pinnedPublicKeys = Self.keys(of: self.pinnedCertificates) }
    }
    /// The SPKI pins of the pinned certificates' keys (AFSecurityPolicy's `pinnedPublicKeys`), derived.
    public private(set) var pinnedPublicKeys: [Pin]
    /// Further SPKI SHA-256 pins, honoured in ``PinningMode/publicKey`` mode (keys you hold no certificate for,
    /// such as a backup key).
    public var pins: [Pin]
    /// Whether to trust a server whose chain does not validate (expired, self-signed, unknown issuer).
    /// Default false.
    ///
    /// - Warning: With ``PinningMode/none`` this accepts any certificate at all. Keep it false in production;
    ///   to trust a private CA or a self-signed device, add it as an anchor of the ``ServerTrust`` or pin it.
    public var allowInvalidCertificates: Bool
    /// Whether the certificate's names must cover the domain. Default true.
    ///
    /// - Warning: Turning it off lets any certificate that validates (or carries a pin) speak for any host.
    public var validatesDomainName: Bool

    /// A policy with the given mode and pins; `allowInvalidCertificates` false, `validatesDomainName` true.
    public init(pinningMode: PinningMode, pinnedCertificates: [Certificate] = [], pins: [Pin] = []) {
        self.pinningMode = pinningMode
        self.pinnedCertificates = pinnedCertificates
        self.pinnedPublicKeys = Self.keys(of: pinnedCertificates)
        self.pins = pins
        self.allowInvalidCertificates = false
        self.validatesDomainName = true
    }

    /// AFSecurityPolicy's `defaultPolicy`: no pinning, invalid certificates refused, names checked.
    public static var `default`: SecurityPolicy { SecurityPolicy(pinningMode: .none) }

    /// AFSecurityPolicy's `policyWithPinningMode:`.
    ///
    /// Deliberate deviation: AFNetworking fills the pinned certificates with every `.cer` in the main bundle;
    /// implicit pin inputs pick up stale or unrelated certificates (AFNetworking#3575), so here there are
    /// none until you pass them, for example from ``CertificateLoader/certificates(inDirectory:)``.
    public static func pinningMode(_ mode: PinningMode) -> SecurityPolicy {
        SecurityPolicy(pinningMode: mode)
    }

    /// AFSecurityPolicy's `policyWithPinningMode:withPinnedCertificates:`.
    public static func pinningMode(_ mode: PinningMode, pinnedCertificates: [Certificate]) -> SecurityPolicy {
        SecurityPolicy(pinningMode: mode, pinnedCertificates: pinnedCertificates)
    }

    /// AFSecurityPolicy's `certificatesInBundle:`: every `.cer`, `.crt`, `.der` and `.pem` file in a directory
    /// (not recursive, sorted by name), to pass as pinned certificates. Name the directory explicitly; a stale
    /// or unrelated file in it becomes a pin.
    ///
    /// - Throws: ``CertificateLoadingError`` naming the file that is not a certificate, or the directory when it
    ///   holds none.
    public static func certificates(inDirectory path: String) throws(CertificateLoadingError) -> [Certificate] {
        try CertificateLoader.certificates(inDirectory: path)
    }

    /// Every public key pin this policy accepts in public-key mode.
    package var acceptedPins: [Pin] {
        var all = self.pinnedPublicKeys
        for pin in self.pins where !all.contains(pin) { all.append(pin) }
        return all
    }

    /// AFSecurityPolicy's step-1 test: certificate mode counts pinned certificates, public-key mode counts
    /// every accepted key pin, mode none has no pins.
    private var hasPinsForMode: Bool {
        switch self.pinningMode {
        case .none: return false
        case .certificate: return !self.pinnedCertificates.isEmpty
        case .publicKey: return !self.acceptedPins.isEmpty
        }
    }

    private static func keys(of certificates: [Certificate]) -> [Pin] {
        var pins: [Pin] = []
        for certificate in certificates {
            let pin = Pin(spkiOf: certificate)
            if !pins.contains(pin) { pins.append(pin) }
        }
        return pins
    }
}

extension SecurityPolicy {
    /// Decides whether to trust `serverTrust` for `domain`, in AFSecurityPolicy's order:
    ///
    /// 1. A domain is given, ``allowInvalidCertificates`` and ``validatesDomainName`` are both on, and the
    ///    mode is ``PinningMode/none`` or there are no pins: untrusted (``TrustFailure/Code/insecurePolicy``).
    ///    A self-signed certificate needs pinning when names are checked.
    /// 2. The name rule is the domain when ``validatesDomainName`` (and a domain is given), else none.
    /// 3. Mode ``PinningMode/none``: trusted iff ``allowInvalidCertificates`` or the chain validates against the
    ///    trust's anchors. For the pinning modes, a chain that does not validate is untrusted unless
    ///    ``allowInvalidCertificates``.
    /// 4. Mode ``PinningMode/certificate``: validate again with the pinned certificates as the only anchors;
    ///    trusted iff that validates and a pinned certificate (DER equality) is on that path.
    /// 5. Mode ``PinningMode/publicKey``: trusted iff a pinned key is on the path.
    ///
    /// Hardening (a deliberate deviation from AFNetworking): in step 5 a pin counts only on the validated path,
    /// found during path building, so a chain that appends the genuine pinned certificate after an attacker's
    /// leaf never passes (the CVE-2016-2402 class). When ``allowInvalidCertificates`` lets an unvalidated chain
    /// reach step 5, the pinned key takes the trust anchor's place and the path is validated again with every
    /// rule but the dates (so an end-entity certificate under a pinned CA can never act as an issuer).
    /// AFNetworking compares keys over whatever chain the trust object holds, which the appended-certificate
    /// attack defeats in exactly that configuration.
    public func evaluate(_ serverTrust: ServerTrust, forDomain domain: String?) async -> TrustEvaluation {
        self.evaluateSynchronously(serverTrust, forDomain: domain)
    }

    /// ``evaluate(_:forDomain:)`` without suspending: the same steps, the same verdict (issue 31). Path building
    /// waits for nothing, and its work is bounded by the evaluation's budget (``TrustLimits``), so a connection
    /// adapter may run it on the event loop that asked (`EvaluatingWithoutWaiting`).
    package func evaluateSynchronously(_ serverTrust: ServerTrust, forDomain domain: String?) -> TrustEvaluation {
        let time = serverTrust.validationTime ?? Date()
        return self.evaluate(serverTrust, forDomain: domain, at: time).judged(under: serverTrust.settings, at: time)
    }

    /// The steps of ``evaluate(_:forDomain:)`` at `time`.
    private func evaluate(_ serverTrust: ServerTrust, forDomain domain: String?, at time: Date) -> TrustEvaluation {
        let validation = PathValidation(trust: serverTrust, validationTime: time)
        let expected = self.pinningMode == .none ? [] : self.acceptedPins

        // Step 1.
        if let domain, self.allowInvalidCertificates, self.validatesDomainName, !self.hasPinsForMode {
            return .untrusted(
                validation.failure(
                    .insecurePolicy,
                    "allowInvalidCertificates with validatesDomainName needs pinning (mode \(self.pinningMode.rawValue), nothing pinned for it): a certificate that does not validate can only be trusted through a pin",
                    host: domain,
                    expectedPins: expected
                )
            )
        }

        // Step 2.
        let namePolicy: TrustNamePolicy
        if self.validatesDomainName, let domain {
            namePolicy = .ssl(host: domain)
        } else {
            namePolicy = .basicX509
        }

        switch self.pinningMode {
        case .none:
            return self.evaluateWithoutPinning(serverTrust, validation: validation, namePolicy: namePolicy)
        case .certificate:
            return self.evaluateCertificatePinning(serverTrust, validation: validation, namePolicy: namePolicy)
        case .publicKey:
            return self.evaluatePublicKeyPinning(serverTrust, validation: validation, namePolicy: namePolicy)
        }
    }

    /// Step 3 for mode none.
    private func evaluateWithoutPinning(
        _ trust: ServerTrust,
        validation: PathValidation,
        namePolicy: TrustNamePolicy
    ) -> TrustEvaluation {
        if self.allowInvalidCertificates {
            return .trusted(
                TrustedChain(
                    presentedChain: trust.certificates,
                    validatedChain: nil,
                    basis: .allowInvalidCertificates,
                    // Nothing was validated, so there is no path whose issuers could vouch for a CRL: revocation
                    // is not checked either, and the verdict says so rather than implying a check.
                    warnings: ["trusted without validation: allowInvalidCertificates is on and nothing is pinned"]
                        + (trust.revocation == nil ? [] : ["revocation was not checked: no path was validated"])
                )
            )
        }
        let result = validation.validate(
            anchors: trust.anchorSet,
            namePolicy: namePolicy,
            pins: nil,
            expectedPins: []
        )
        return Self.verdict(result, trust: trust, validation: validation)
    }

    /// Steps 3 and 4 for certificate pinning.
    private func evaluateCertificatePinning(
        _ trust: ServerTrust,
        validation: PathValidation,
        namePolicy: TrustNamePolicy
    ) -> TrustEvaluation {
        let expected = self.acceptedPins
        // The standard path counts toward how long the verdict holds: both validations must still pass.
        var standardWindow: ValidityWindow?
        var standardPath: [Certificate]?
        if !self.allowInvalidCertificates {
            let standard = validation.validate(
                anchors: trust.anchorSet,
                namePolicy: namePolicy,
                pins: nil,
                expectedPins: expected
            )
            switch standard {
            case .success(let path):
                standardWindow = ValidityWindow(path: path)
                standardPath = Array(path)
            case .failure(let failure):
                return .untrusted(failure)
            }
        }
        guard !self.pinnedCertificates.isEmpty else {
            return .untrusted(
                validation.failure(
                    .pinMismatch,
                    "certificate pinning with no pinned certificates trusts nothing",
                    host: Self.host(namePolicy)
                )
            )
        }
        // Step 4: the pinned certificates are the only anchors; the path must end at (and so contain) one.
        let pinned = validation.validate(
            anchors: AnchorSet.of(roots: nil, anchors: self.pinnedCertificates),
            namePolicy: namePolicy,
            pins: .certificates(self.pinnedCertificates),
            expectedPins: expected
        )
        switch pinned {
        case .success(let path):
            // Revocation was checked on both paths (each ran the revocation stage); the verdict reports the
            // standard path's statuses when there is one, since a pinned leaf that is its own anchor has none.
            var chain = TrustedChain(
                presentedChain: trust.certificates,
                validatedChain: path,
                basis: .validatedPath,
                revocation: validation.revocationReport(for: standardPath ?? Array(path))
            )
            if let standardWindow {
                chain.validityWindow = standardWindow.intersection(chain.validityWindow)
            }
            return .trusted(chain)
        case .failure(var failure):
            if failure.code == .noPathToAnchor {
                failure.code = .pinMismatch
                failure.details.insert(failure.reason, at: 0)
                failure.reason =
                    self.pinnedCertificates.count == 1
                    ? "no path from the leaf reaches the pinned certificate"
                    : "no path from the leaf reaches one of the \(self.pinnedCertificates.count) pinned certificates"
            }
            return .untrusted(failure)
        }
    }

    /// Steps 3 and 5 for public-key pinning.
    private func evaluatePublicKeyPinning(
        _ trust: ServerTrust,
        validation: PathValidation,
        namePolicy: TrustNamePolicy
    ) -> TrustEvaluation {
        let accepted = self.acceptedPins
        guard !accepted.isEmpty else {
            return .untrusted(
                validation.failure(
                    .pinMismatch,
                    "public-key pinning with no pinned keys trusts nothing",
                    host: Self.host(namePolicy)
                )
            )
        }
        let requirement = PinRequirement.publicKeys(accepted)
        let validated = validation.validate(
            anchors: trust.anchorSet,
            namePolicy: namePolicy,
            pins: requirement,
            expectedPins: accepted
        )
        guard case .failure(let failure) = validated else {
            return Self.verdict(validated, trust: trust, validation: validation)
        }
        // Failures that are about the input itself stay failures whatever the policy allows.
        guard self.allowInvalidCertificates, failure.code != .tooManyCertificates, failure.code != .noPeerCertificates,
            failure.code != .invalidHost
        else {
            return .untrusted(failure)
        }
        // allowInvalidCertificates: the chain need not validate, but the pin must sit on the path that the
        // leaf's signatures actually link (through presented certificates and the client's own anchors), not
        // merely somewhere in what the server sent.
        //
        // Deliberate deviation from AFNetworking, which checks no name in this configuration: when
        // validatesDomainName is on, the leaf must still be valid for the domain. Otherwise anyone holding any
        // certificate under a pinned CA key could speak for every host.
        if case .ssl(let host) = namePolicy, let leaf = trust.certificates.first {
            do {
                let name = try PeerName(host)
                if let mismatch = HostnameCheck.check(leaf, against: name) {
                    var failure = validation.failure(
                        .hostnameMismatch,
                        mismatch.problem,
                        host: host,
                        expectedPins: accepted,
                        details: ["the chain does not validate either: \(failure.code): \(failure.reason)"]
                    )
                    failure.leafNames = mismatch.presentedNames
                    return .untrusted(failure)
                }
            } catch {
                return .untrusted(validation.failure(.invalidHost, error.description, host: host))
            }
        }
        return self.evaluatePinAsAnchor(
            trust,
            validation: validation,
            namePolicy: namePolicy,
            requirement: requirement,
            accepted: accepted,
            invalidBecause: failure
        )
    }

    /// `allowInvalidCertificates` in public-key mode: the pinned key takes the trust anchor's place.
    ///
    /// The relaxation waives exactly two things, the trust anchor and the dates, and nothing else. So the path
    /// is built again, by the same path building and the same ``ChainPolicy`` as every other evaluation, with
    ///
    /// - as the only anchors, the certificates that carry a pinned key: the client's own trust anchors and,
    ///   for keys no anchor carries, the presented certificates (not the policy's pinned certificates, as in
    ///   AFNetworking, which compares keys over the server's chain: pinning a certificate the server does not
    ///   send never adds it to the path);
    /// - the client's other anchors as further candidate issuers (a pinned root may be reached through one);
    /// - the validity stage off.
    ///
    /// Every other rule holds: each issuer below the pinned key must be a CA, assert keyCertSign when it
    /// carries keyUsage, respect every pathLenConstraint and name constraint above it, and the path must meet
    /// the depth limit, the profile, the extended key usages and the host name. (Before, the path was linked by
    /// names and signatures only, so an end-entity certificate issued under a pinned CA could vouch for any
    /// host.)
    ///
    /// The anchor's own certificate: RFC 5280 §6.1.1(d) models a trust anchor as a name and a key, its
    /// constraints optional. A certificate among the client's anchors is its own statement and is used in
    /// preference. A presented one is used with the constraints it carries (they can only refuse more); what
    /// it could omit is bounded by the pinned key itself: every certificate below it must carry that key's
    /// signature, so nothing below the anchor can be forged.
    private func evaluatePinAsAnchor(
        _ trust: ServerTrust,
        validation: PathValidation,
        namePolicy: TrustNamePolicy,
        requirement: PinRequirement,
        accepted: [Pin],
        invalidBecause failure: TrustFailure
    ) -> TrustEvaluation {
        var anchors: [Certificate] = []
        var ownPins = Set<Pin>()
        for certificate in trust.effectiveAnchors where requirement.isSatisfied(by: certificate) && !anchors.contains(certificate) {
            anchors.append(certificate)
            ownPins.insert(Pin(spkiOf: certificate))
        }
        for certificate in trust.certificates
        where requirement.isSatisfied(by: certificate) && !ownPins.contains(Pin(spkiOf: certificate))
            && !anchors.contains(certificate)
        {
            anchors.append(certificate)
        }
        let otherIssuers = trust.effectiveAnchors.filter { !requirement.isSatisfied(by: $0) }
        let notValidated = "the chain does not validate either: \(failure.code): \(failure.reason)"

        guard !anchors.isEmpty else {
            var mismatch = validation.failure(
                .pinMismatch,
                "no pinned key is on the path linked by signatures from the leaf",
                host: Self.host(namePolicy),
                expectedPins: accepted,
                details: [notValidated]
            )
            mismatch.failedPath = SignatureLinkedPath.longest(from: trust.certificates + trust.effectiveAnchors, budget: validation.budget)
            return .untrusted(mismatch)
        }
        // Not from the shared anchor-set cache: these sets are per chain and would evict the platform's.
        let linked = validation.validate(
            anchors: AnchorSet(anchors),
            namePolicy: namePolicy,
            pins: requirement,
            expectedPins: accepted,
            additionalIssuers: otherIssuers,
            checksValidity: false
        )
        switch linked {
        case .success(let chain):
            return .trusted(
                TrustedChain(
                    presentedChain: trust.certificates,
                    validatedChain: nil,
                    linkedPath: Array(chain),
                    basis: .pinOnSignatureLinkedPath,
                    warnings: [
                        "the chain did not validate (\(failure.code): \(failure.reason)); trusted because allowInvalidCertificates is on and a pinned key anchors a path that meets every rule but the dates"
                    ],
                    revocation: validation.revocationReport(for: Array(chain))
                )
            )
        case .failure(var refusal):
            if refusal.code == .noPathToAnchor {
                refusal.code = .pinMismatch
                refusal.details.insert(refusal.reason, at: 0)
                refusal.reason = "no pinned key is on the path linked by signatures from the leaf"
                refusal.failedPath = SignatureLinkedPath.longest(from: trust.certificates + trust.effectiveAnchors, budget: validation.budget)
            } else {
                refusal.details.append("allowInvalidCertificates waives the trust anchor and the dates, not this rule")
            }
            refusal.details.append(notValidated)
            return .untrusted(refusal)
        }
    }

    private static func host(_ namePolicy: TrustNamePolicy) -> String? {
        if case .ssl(let host) = namePolicy { return host }
        return nil
    }

    private static func verdict(
        _ result: Result<X509.ValidatedCertificateChain, TrustFailure>,
        trust: ServerTrust,
        validation: PathValidation
    ) -> TrustEvaluation {
        switch result {
        case .success(let chain):
            return .trusted(
                TrustedChain(
                    presentedChain: trust.certificates,
                    validatedChain: chain,
                    basis: .validatedPath,
                    revocation: validation.revocationReport(for: Array(chain))
                )
            )
        case .failure(let failure):
            return .untrusted(failure)
        }
    }
}
