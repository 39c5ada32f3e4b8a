public import Foundation
import X509

/// A bounded, thread-safe cache of *trusted* verdicts, so that evaluating the same chain for the same host under
/// the same policy again (many connections to one server) costs a dictionary look-up instead of path building
/// and signature checks.
///
/// ```swift
/// let cache = EvaluationCache()                                   // share it across connections
/// let verdict = await policy.evaluate(trust, forDomain: "api.example.com", cache: cache)
/// // or wrap the policy for a connection adapter:
/// let evaluator = CachingTrustEvaluator(policy, cache: cache)
/// ```
///
/// What makes an entry, and when it stops counting:
/// - The key is everything the verdict depends on: the presented chain (DER, in order), the host or name rule,
///   the policy (mode, pinned certificates, pins, `allowInvalidCertificates`, `validatesDomainName`, or the pin
///   requirement), the anchors (custom anchors, `anchorsOnly` and the platform root set), purpose, profile,
///   limits, and the validation time when one is fixed (``ServerTrust/validationTime``). Evaluations at "now"
///   share one key and are re-checked on every hit.
/// - A hit at "now" counts only while now lies inside every validity period on the paths that earned the verdict
///   (the latest `notBefore` to the earliest `notAfter`), and no longer than ``timeToLive`` after it was stored.
/// - At most ``maximumEntries`` entries are kept; the least recently used one goes first.
///
/// Failures are never cached. A rejection can be caused by the clock (not yet valid, expired), and the failure
/// path is the rare one (and the one an attacker drives), so caching it would trade a correctness risk for
/// nothing measurable. Each rejection is evaluated afresh and carries its full ``TrustFailure``.
///
/// The cache never changes a verdict: a hit returns the verdict the uncached evaluation gave for the same key,
/// and only while that verdict's time bounds still hold.
public final class EvaluationCache: @unchecked Sendable {
    /// The most entries kept.
    public let maximumEntries: Int
    /// The longest an entry counts after it was stored, whatever the certificates' validity.
    public let timeToLive: Duration

    private let clock: @Sendable () -> Date
    // Guards everything below. Hashing a key and evaluating happen outside it.
    private let lock = NSLock()
    private var entries: [Key: Entry] = [:]
    private var useCounter: UInt64 = 0
    private var rootSets: [(roots: TrustRoots, id: Int)] = []
    private var nextRootSetID = 1
    private var counters = Statistics()

    /// A cache of at most `maximumEntries` verdicts, each counting for at most `timeToLive`.
    ///
    /// - Parameters:
    ///   - maximumEntries: the size bound (least recently used out); at least 1. Default 1,024.
    ///   - timeToLive: the age bound of an entry. Default 5 minutes.
    public convenience init(maximumEntries: Int = 1024, timeToLive: Duration = .seconds(300)) {
        self.init(maximumEntries: maximumEntries, timeToLive: timeToLive, clock: { Date() })
    }

    /// A cache with an injected clock; evaluations at "now" through this cache use it as the validation time.
    @_spi(Testing)
    public init(maximumEntries: Int, timeToLive: Duration, clock: @escaping @Sendable () -> Date) {
        self.maximumEntries = max(1, maximumEntries)
        self.timeToLive = timeToLive
        self.clock = clock
    }

    /// Hits, misses and evictions so far.
    public struct Statistics: Hashable, Sendable {
        /// Look-ups answered from the cache.
        public var hits = 0
        /// Look-ups that evaluated (nothing stored, or the entry no longer counted).
        public var misses = 0
        /// Entries dropped to stay within ``EvaluationCache/maximumEntries``.
        public var evictions = 0
        /// Entries dropped on look-up because their time bounds had passed.
        public var expirations = 0

        /// Counts with the given values.
        public init(hits: Int = 0, misses: Int = 0, evictions: Int = 0, expirations: Int = 0) {
            self.hits = hits
            self.misses = misses
            self.evictions = evictions
            self.expirations = expirations
        }
    }

    /// Hits, misses and evictions so far.
    public var statistics: Statistics {
        self.lock.withLock { self.counters }
    }

    /// The number of entries held.
    public var count: Int {
        self.lock.withLock { self.entries.count }
    }

    /// Drops every entry.
    public func removeAll() {
        self.lock.withLock { self.entries.removeAll() }
    }

    // MARK: - Internals

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
            limits: TrustLimits
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
            self.digest = hasher.finalize()
        }

        /// Every field compared in full (the digest only short-cuts unequal keys): two keys are equal only when
        /// their certificates are byte for byte the same.
        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.digest == rhs.digest && lhs.chain == rhs.chain && lhs.evaluator == rhs.evaluator
                && lhs.anchors == rhs.anchors && lhs.anchorsOnly == rhs.anchorsOnly && lhs.rootSetID == rhs.rootSetID
                && lhs.validationTime == rhs.validationTime && lhs.purpose == rhs.purpose
                && lhs.profile == rhs.profile && lhs.limits == rhs.limits
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(self.digest)
        }

        /// Feeds a sample of each certificate's TBSCertificate to the hasher: its length, its first 64 bytes (which
        /// hold the serial number) and its last 64 (the end of the extensions, usually key identifiers or names).
        /// The hash only has to spread keys over the table; equality compares every byte, so two different
        /// chains with the same sample merely share a bucket. Nobody can fill the table with colliding entries:
        /// only trusted verdicts are stored. Hashing whole certificates was 38% of a hit.
        static func combine(_ certificates: [Certificate], into hasher: inout Hasher) {
            hasher.combine(certificates.count)
            for certificate in certificates {
                let bytes = certificate.tbsCertificateBytes
                hasher.combine(bytes.count)
                bytes.prefix(64).withUnsafeBytes { hasher.combine(bytes: $0) }
                bytes.suffix(64).withUnsafeBytes { hasher.combine(bytes: $0) }
            }
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

    struct Entry {
        var verdict: TrustedChain
        var window: ValidityWindow?
        var storedAt: Date
        var lastUse: UInt64
    }

    /// Evaluates through the cache: a stored trusted verdict that still counts, else `evaluate` at the fixed
    /// validation time or the cache clock's now, storing a trusted result.
    func verdict(
        for trust: ServerTrust,
        evaluator: EvaluatorIdentity,
        evaluate: (ServerTrust) async -> TrustEvaluation
    ) async -> TrustEvaluation {
        let now = self.clock()
        let key = self.key(for: trust, evaluator: evaluator)
        if let stored = self.hit(key, for: trust, now: now, countingMiss: true) {
            return stored
        }
        let time = trust.validationTime ?? now
        var fixed = trust
        fixed.validationTime = time
        let verdict = await evaluate(fixed)
        if case .trusted(let chain) = verdict {
            self.store(chain, for: key, now: now)
        }
        return verdict
    }

    /// The stored trusted verdict for this evaluation if it still counts, else nil; never evaluates. A nil here
    /// is not counted as a miss: the caller goes on to ``verdict(for:evaluator:evaluate:)``, which counts it.
    func storedVerdict(for trust: ServerTrust, evaluator: EvaluatorIdentity) -> TrustEvaluation? {
        self.hit(self.key(for: trust, evaluator: evaluator), for: trust, now: self.clock(), countingMiss: false)
    }

    /// The stored verdict for `key` as this evaluation's answer (with the chain as presented this time), or nil.
    private func hit(_ key: Key, for trust: ServerTrust, now: Date, countingMiss: Bool) -> TrustEvaluation? {
        guard var chain = self.lookUp(key, validationTime: trust.validationTime ?? now, now: now, countingMiss: countingMiss) else {
            return nil
        }
        chain.presentedChain = trust.certificates
        return .trusted(chain)
    }

    private func key(for trust: ServerTrust, evaluator: EvaluatorIdentity) -> Key {
        Key(
            chain: trust.certificates,
            evaluator: evaluator,
            anchors: trust.anchors,
            anchorsOnly: trust.anchorsOnly,
            rootSetID: trust.anchorsOnly ? 0 : self.rootSetID(trust.platformRoots),
            validationTime: trust.validationTime,
            purpose: trust.purpose,
            profile: trust.profile,
            limits: trust.limits
        )
    }

    private func lookUp(_ key: Key, validationTime: Date, now: Date, countingMiss: Bool) -> TrustedChain? {
        self.lock.lock()
        defer { self.lock.unlock() }
        guard let index = self.entries.index(forKey: key) else {
            if countingMiss { self.counters.misses += 1 }
            return nil
        }
        let entry = self.entries.values[index]
        let fresh = now < entry.storedAt.addingTimeInterval(self.timeToLive.timeInterval)
        let inWindow = entry.window.map { $0.contains(validationTime) } ?? true
        guard fresh, inWindow else {
            self.entries.remove(at: index)
            self.counters.expirations += 1
            if countingMiss { self.counters.misses += 1 }
            return nil
        }
        self.useCounter &+= 1
        // In place through the index: no second hash or probe.
        self.entries.values[index].lastUse = self.useCounter
        self.counters.hits += 1
        return entry.verdict
    }

    private func store(_ chain: TrustedChain, for key: Key, now: Date) {
        self.lock.lock()
        defer { self.lock.unlock() }
        if self.entries[key] == nil, self.entries.count >= self.maximumEntries {
            // Least recently used out. A linear scan, paid only when a miss inserts into a full cache, next to
            // the path validation that miss just did.
            if let oldest = self.entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
                self.entries[oldest] = nil
                self.counters.evictions += 1
            }
        }
        self.useCounter &+= 1
        self.entries[key] = Entry(verdict: chain, window: chain.validityWindow, storedAt: now, lastUse: self.useCounter)
    }

    /// A small number for a platform root set, so the key does not hash a hundred roots on every look-up.
    /// Root sets compare with `==`, which is immediate for the same stored array (``TrustRoots/platform`` and a
    /// reused value). Ids are never reused: a forgotten set's entries simply become unreachable.
    private func rootSetID(_ roots: TrustRoots?) -> Int {
        guard let roots else { return 0 }
        self.lock.lock()
        defer { self.lock.unlock() }
        if let known = self.rootSets.first(where: { $0.roots == roots }) {
            return known.id
        }
        let id = self.nextRootSetID
        self.nextRootSetID += 1
        self.rootSets.append((roots, id))
        if self.rootSets.count > 16 { self.rootSets.removeFirst() }
        return id
    }
}

/// The span of time in which every certificate on the paths behind a verdict is valid.
struct ValidityWindow: Hashable, Sendable {
    var notBefore: Date
    var notAfter: Date

    init(notBefore: Date, notAfter: Date) {
        self.notBefore = notBefore
        self.notAfter = notAfter
    }

    /// The window of a path; nil for an empty one.
    init?(path: some Sequence<Certificate>) {
        var notBefore: Date?
        var notAfter: Date?
        for certificate in path {
            notBefore = max(notBefore ?? certificate.notValidBefore, certificate.notValidBefore)
            notAfter = min(notAfter ?? certificate.notValidAfter, certificate.notValidAfter)
        }
        guard let notBefore, let notAfter else { return nil }
        self.init(notBefore: notBefore, notAfter: notAfter)
    }

    /// Both windows at once.
    func intersection(_ other: ValidityWindow?) -> ValidityWindow {
        guard let other else { return self }
        return ValidityWindow(notBefore: max(self.notBefore, other.notBefore), notAfter: min(self.notAfter, other.notAfter))
    }

    /// Strictly inside: a hit exactly at a boundary is re-evaluated rather than trusted from the cache.
    func contains(_ time: Date) -> Bool {
        self.notBefore < time && time < self.notAfter
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        let parts = self.components
        return TimeInterval(parts.seconds) + TimeInterval(parts.attoseconds) / 1e18
    }
}

extension ServerTrust {
    /// ``evaluate(_:pins:)`` through `cache`: a trusted verdict for the same chain, name rule, pins and anchors
    /// is reused while it still holds (see ``EvaluationCache``); anything else is evaluated.
    ///
    /// - Parameters:
    ///   - namePolicy: as for ``evaluate(_:pins:)``.
    ///   - pins: as for ``evaluate(_:pins:)``.
    ///   - cache: the cache to consult and fill.
    public func evaluate(_ namePolicy: TrustNamePolicy, pins: PinRequirement? = nil, cache: EvaluationCache) async -> TrustEvaluation {
        await cache.verdict(for: self, evaluator: .serverTrust(namePolicy: namePolicy, pins: pins)) { trust in
            await trust.evaluate(namePolicy, pins: pins)
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
        await cache.verdict(for: serverTrust, evaluator: self.cacheIdentity(forDomain: domain)) { trust in
            await self.evaluate(trust, forDomain: domain)
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
    public var policy: SecurityPolicy
    /// The shared cache.
    public let cache: EvaluationCache

    /// Wraps `policy`; share `cache` between the evaluators of one process.
    public init(_ policy: SecurityPolicy, cache: EvaluationCache = EvaluationCache()) {
        self.policy = policy
        self.cache = cache
    }

    /// Answers from the cache when an entry for this chain, host and policy is still valid; otherwise asks the
    /// wrapped evaluator and keeps a trusted verdict. Untrusted verdicts are never cached.
    public func evaluate(_ trust: ServerTrust, forDomain domain: String?) async -> TrustEvaluation {
        await self.policy.evaluate(trust, forDomain: domain, cache: self.cache)
    }

    /// A cache hit for this chain, domain and policy that still counts, or nil (then ``evaluate(_:forDomain:)``
    /// decides). Connection adapters use it to answer a repeated handshake on the event loop.
    public func immediateEvaluation(_ trust: ServerTrust, forDomain domain: String?) -> TrustEvaluation? {
        self.cache.storedVerdict(for: trust, evaluator: self.policy.cacheIdentity(forDomain: domain))
    }
}
