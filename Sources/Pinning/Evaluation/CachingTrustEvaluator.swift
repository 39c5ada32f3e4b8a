// ``ServerTrust`` and ``SecurityPolicy`` evaluations through an ``EvaluationCache``, and the evaluator that
// wraps a policy with one.

extension ServerTrust {
    /// ``evaluate(_:pins:)`` through `cache`: a trusted verdict for the same chain, name rule, pins and anchors
    /// is reused while it still holds (see ``EvaluationCache``); anything else is evaluated.
    ///
    /// - Parameters:
    ///   - namePolicy: as for ``evaluate(_:pins:)``.
    ///   - pins: as for ``evaluate(_:pins:)``.
    ///   - cache: the cache to consult and fill.
    public func evaluate(_ namePolicy: TrustNamePolicy, pins: PinRequirement? = nil, cache: EvaluationCache) async -> TrustEvaluation {
        self.evaluateSynchronously(namePolicy, pins: pins, cache: cache)
    }

    /// ``evaluate(_:pins:cache:)`` without suspending: the same look-up, evaluation and fill (issue 31).
    package func evaluateSynchronously(_ namePolicy: TrustNamePolicy, pins: PinRequirement? = nil, cache: EvaluationCache) -> TrustEvaluation {
        cache.verdict(for: self, evaluator: .serverTrust(namePolicy: namePolicy, pins: pins)) { trust in
            trust.evaluateSynchronously(namePolicy, pins: pins)
        }
    }
}

extension SecurityPolicy {
    /// ``evaluate(_:forDomain:)`` through `cache`: a trusted verdict for the same chain, domain, policy and
    /// anchors is reused while it still holds (see ``EvaluationCache``); anything else is evaluated.
    ///
    /// - Parameters:
    ///   - serverTrust: the chain and how to judge it.
    ///   - domain: as for ``evaluate(_:forDomain:)``.
    ///   - cache: the cache to consult and fill.
    public func evaluate(_ serverTrust: ServerTrust, forDomain domain: String?, cache: EvaluationCache) async -> TrustEvaluation {
        self.evaluateSynchronously(serverTrust, forDomain: domain, cache: cache)
    }

    /// ``evaluate(_:forDomain:cache:)`` without suspending: the same look-up, evaluation and fill (issue 31).
    package func evaluateSynchronously(_ serverTrust: ServerTrust, forDomain domain: String?, cache: EvaluationCache) -> TrustEvaluation {
        cache.verdict(for: serverTrust, evaluator: self.cacheIdentity(forDomain: domain)) { trust in
            self.evaluateSynchronously(trust, forDomain: domain)
        }
    }

    /// The policy half of a cache key.
    func cacheIdentity(forDomain domain: String?) -> EvaluationCache.EvaluatorIdentity {
        .securityPolicy(
            domain: domain,
            mode: self.pinningMode,
            pinnedCertificates: self.pinnedCertificates,
            pins: self.pins,
            allowInvalidCertificates: self.allowInvalidCertificates,
            validatesDomainName: self.validatesDomainName
        )
    }
}

/// A ``SecurityPolicy`` that answers repeated evaluations of the same chain from an ``EvaluationCache``: hand it
/// to a connection adapter in place of the policy.
public struct CachingTrustEvaluator: ServerTrustEvaluating {
    /// The policy that decides on a miss.
    package var policy: SecurityPolicy
    /// The shared cache.
    package let cache: EvaluationCache

    /// Wraps `policy`; share `cache` between the evaluators of one process.
    public init(_ policy: SecurityPolicy, cache: EvaluationCache = EvaluationCache()) {
        self.policy = policy
        self.cache = cache
    }

    /// The wrapped policy's ``SecurityPolicy/allowInvalidCertificates``.
    public var acceptsChainsWithoutValidatedPath: Bool { self.policy.allowInvalidCertificates }

    /// Answers from the cache when an entry for this chain, host and policy is still valid; otherwise asks the
    /// wrapped evaluator and keeps a trusted verdict. Untrusted verdicts are never cached.
    public func evaluate(_ trust: ServerTrust, forDomain domain: String?) async -> TrustEvaluation {
        self.policy.evaluateSynchronously(trust, forDomain: domain, cache: self.cache)
    }

    /// A cache hit for this chain, domain and policy that still counts, or nil (then ``evaluate(_:forDomain:)``
    /// decides). Never evaluates; this package's connection adapters run the whole evaluation on the event loop
    /// by other means.
    public func immediateEvaluation(_ trust: ServerTrust, forDomain domain: String?) -> TrustEvaluation? {
        self.cache.storedVerdict(for: trust, evaluator: self.policy.cacheIdentity(forDomain: domain))
    }
}

extension CachingTrustEvaluator: EvaluatingWithoutWaiting {
    /// What ``evaluate(_:forDomain:)`` answers: a cache hit that still counts, else the wrapped policy's
    /// evaluation, kept when trusted.
    package func evaluateWithoutWaiting(_ trust: ServerTrust, forDomain domain: String?) -> TrustEvaluation? {
        self.policy.evaluateSynchronously(trust, forDomain: domain, cache: self.cache)
    }
}
