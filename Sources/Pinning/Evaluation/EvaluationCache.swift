package import Foundation
import X509

/// A bounded, thread-safe cache of *trusted* verdicts, so that evaluating the same chain for the same host under
/// the same policy again (many connections to one server) costs a dictionary look-up instead of path building
/// and signature checks.
///
/// <!-- snippet: given(policy: SecurityPolicy, trust: ServerTrust) -->
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
///   (the latest `notBefore` to the earliest `notAfter`), and no longer than `timeToLive` after it was stored.
/// - At most `maximumEntries` entries are kept; the least recently used one goes first.
///
/// Failures are never cached. A rejection can be caused by the clock (not yet valid, expired), and the failure
/// path is the rare one (and the one an attacker drives), so caching it would trade a correctness risk for
/// nothing measurable. Each rejection is evaluated afresh and carries its full ``TrustFailure``.
///
/// The cache never changes a verdict: a hit returns the verdict the uncached evaluation gave for the same key,
/// and only while that verdict's time bounds still hold.
public final class EvaluationCache: Sendable {
    /// The most entries kept.
    package let maximumEntries: Int
    /// The longest an entry counts after it was stored, whatever the certificates' validity.
    package let timeToLive: Duration

    private let clock: @Sendable () -> Date
    /// Everything that changes. Hashing a key and evaluating happen outside the lock.
    private struct State {
        var entries: [Key: Entry] = [:]
        var useCounter: UInt64 = 0
        var rootSets: [(roots: TrustRoots, id: Int)] = []
        var nextRootSetID = 1
        var counters = Statistics()
    }

    private let state = LockedValueBox(State())

    /// A cache of at most `maximumEntries` verdicts, each counting for at most `timeToLive`.
    ///
    /// - Parameters:
    ///   - maximumEntries: the size bound (least recently used out); at least 1. Default 1,024.
    ///   - timeToLive: the age bound of an entry. Default 5 minutes.
    public convenience init(maximumEntries: Int = 1024, timeToLive: Duration = .seconds(300)) {
        self.init(maximumEntries: maximumEntries, timeToLive: timeToLive, clock: { Date() })
    }

    /// A cache with an injected clock; evaluations at "now" through this cache use it as the validation time.
    package init(maximumEntries: Int, timeToLive: Duration, clock: @escaping @Sendable () -> Date) {
        self.maximumEntries = max(1, maximumEntries)
        self.timeToLive = timeToLive
        self.clock = clock
    }

    /// Hits, misses and evictions so far.
    package struct Statistics: Hashable, Sendable {
        /// Look-ups answered from the cache.
        package var hits = 0
        /// Look-ups that evaluated (nothing stored, or the entry no longer counted).
        package var misses = 0
        /// Entries dropped to stay within ``EvaluationCache/maximumEntries``.
        package var evictions = 0
        /// Entries dropped on look-up because their time bounds had passed.
        package var expirations = 0

        /// Counts with the given values.
        package init(hits: Int = 0, misses: Int = 0, evictions: Int = 0, expirations: Int = 0) {
            self.hits = hits
            self.misses = misses
            self.evictions = evictions
            self.expirations = expirations
        }
    }

    /// Hits, misses and evictions so far.
    package var statistics: Statistics {
        self.state.withLockedValue { $0.counters }
    }

    /// The number of entries held.
    package var count: Int {
        self.state.withLockedValue { $0.entries.count }
    }

    /// Drops every entry.
    package func removeAll() {
        self.state.withLockedValue { $0.entries.removeAll() }
    }

    // MARK: - Internals

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
        evaluate: (ServerTrust) -> TrustEvaluation
    ) -> TrustEvaluation {
        let now = self.clock()
        let key = self.key(for: trust, evaluator: evaluator)
        if let stored = self.hit(key, for: trust, now: now, countingMiss: true) {
            return stored
        }
        let time = trust.validationTime ?? now
        var fixed = trust
        fixed.validationTime = time
        let verdict = evaluate(fixed)
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
        // Judged now, from the stored verdict: the settings are the stored ones (equal, by the key).
        chain.validationTime = trust.validationTime ?? now
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
            limits: trust.limits,
            revocation: trust.revocation
        )
    }

    private func lookUp(_ key: Key, validationTime: Date, now: Date, countingMiss: Bool) -> TrustedChain? {
        let timeToLive = self.timeToLive.timeInterval
        return self.state.withLockedValue { state -> TrustedChain? in
            guard let index = state.entries.index(forKey: key) else {
                if countingMiss { state.counters.misses += 1 }
                return nil
            }
            let entry = state.entries.values[index]
            let fresh = now < entry.storedAt.addingTimeInterval(timeToLive)
            let inWindow = entry.window.map { $0.contains(validationTime) } ?? true
            guard fresh, inWindow else {
                state.entries.remove(at: index)
                state.counters.expirations += 1
                if countingMiss { state.counters.misses += 1 }
                return nil
            }
            state.useCounter &+= 1
            // In place through the index: no second hash or probe.
            state.entries.values[index].lastUse = state.useCounter
            state.counters.hits += 1
            return entry.verdict
        }
    }

    private func store(_ chain: TrustedChain, for key: Key, now: Date) {
        let maximumEntries = self.maximumEntries
        self.state.withLockedValue { state in
            if state.entries[key] == nil, state.entries.count >= maximumEntries {
                // Least recently used out. A linear scan, paid only when a miss inserts into a full cache, next
                // to the path validation that miss just did.
                if let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
                    state.entries[oldest] = nil
                    state.counters.evictions += 1
                }
            }
            state.useCounter &+= 1
            state.entries[key] = Entry(verdict: chain, window: chain.validityWindow, storedAt: now, lastUse: state.useCounter)
        }
    }

    /// A small number for a platform root set, so the key does not hash a hundred roots on every look-up.
    /// Root sets compare with `==`, which is immediate for the same stored array (``TrustRoots/platform`` and a
    /// reused value). Ids are never reused: a forgotten set's entries simply become unreachable.
    private func rootSetID(_ roots: TrustRoots?) -> Int {
        guard let roots else { return 0 }
        return self.state.withLockedValue { state in
            if let known = state.rootSets.first(where: { $0.roots == roots }) {
                return known.id
            }
            let id = state.nextRootSetID
            state.nextRootSetID += 1
            state.rootSets.append((roots, id))
            if state.rootSets.count > 16 { state.rootSets.removeFirst() }
            return id
        }
    }
}
