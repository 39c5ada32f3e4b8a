import Crypto
import Foundation
import PinningTestSupport
import Testing
import X509

@testable import Pinning

/// A clock the test moves by hand.
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date

    init(_ start: Date) { self.current = start }

    var now: Date { self.lock.withLock { self.current } }

    func advance(by seconds: TimeInterval) {
        self.lock.withLock { self.current = self.current.addingTimeInterval(seconds) }
    }
}

/// What must be equal between a cached and an uncached evaluation: the verdict, its basis or failure code, and
/// the path that earned trust.
struct VerdictSummary: Equatable, CustomStringConvertible {
    var trusted: Bool
    var detail: String
    var path: [Certificate]

    init(_ evaluation: TrustEvaluation) {
        switch evaluation {
        case .trusted(let chain):
            self.trusted = true
            self.detail = chain.basis.description
            self.path = chain.path
        case .untrusted(let failure):
            self.trusted = false
            self.detail = "\(failure.code): \(failure.reason)"
            self.path = failure.failedPath ?? []
        }
    }

    var description: String { "\(self.trusted ? "trusted" : "untrusted") \(self.detail) [\(self.path.count)]" }
}

@Suite("EvaluationCache")
struct EvaluationCacheTests {
    static let t = TestPKI.referenceTime
    static let day: TimeInterval = 86400

    static func cache(clock: ManualClock, entries: Int = 16, ttl: Duration = .seconds(300)) -> EvaluationCache {
        EvaluationCache(maximumEntries: entries, timeToLive: ttl, clock: { clock.now })
    }

    static func trust(_ chain: TestChain, validationTime: Date? = nil) -> ServerTrust {
        ServerTrust(certificates: chain.presented, anchors: [chain.root.certificate], anchorsOnly: true, validationTime: validationTime)
    }

    @Test("A trusted verdict is stored and answered from the cache the second time")
    func hit() async throws {
        let chain = try TestChain(notValidBefore: Self.t - 30 * Self.day, notValidAfter: Self.t + 30 * Self.day)
        let clock = ManualClock(Self.t)
        let cache = Self.cache(clock: clock)
        let policy = SecurityPolicy.default
        let first = await policy.evaluate(Self.trust(chain), forDomain: "localhost", cache: cache)
        let second = await policy.evaluate(Self.trust(chain), forDomain: "localhost", cache: cache)
        #expect(first.isTrusted && second.isTrusted)
        #expect(VerdictSummary(first) == VerdictSummary(second))
        #expect(cache.statistics == EvaluationCache.Statistics(hits: 1, misses: 1, evictions: 0, expirations: 0))
        #expect(cache.count == 1)
        // Another host, another pin set or another anchor set is another key.
        _ = await policy.evaluate(Self.trust(chain), forDomain: "127.0.0.1", cache: cache)
        _ = await SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: chain.root.certificate)])
            .evaluate(Self.trust(chain), forDomain: "localhost", cache: cache)
        var withPlatform = Self.trust(chain)
        withPlatform.anchorsOnly = false
        withPlatform.platformRoots = TrustRoots([chain.root.certificate])
        _ = await policy.evaluate(withPlatform, forDomain: "localhost", cache: cache)
        #expect(cache.statistics.hits == 1)
        #expect(cache.count == 4)
    }

    @Test("A hit at now never outlives the earliest notAfter on the path")
    func expiryBound() async throws {
        let chain = try TestChain(notValidBefore: Self.t - 30 * Self.day, notValidAfter: Self.t + 3600)
        let clock = ManualClock(Self.t)
        // A time to live far longer than the certificates: only their validity may end the entry.
        let cache = Self.cache(clock: clock, ttl: .seconds(30 * 86400))
        let policy = SecurityPolicy.default
        #expect(await policy.evaluate(Self.trust(chain), forDomain: "localhost", cache: cache).isTrusted)
        clock.advance(by: 1800)
        #expect(await policy.evaluate(Self.trust(chain), forDomain: "localhost", cache: cache).isTrusted)
        #expect(cache.statistics.hits == 1)
        clock.advance(by: 3600)
        let expired = await policy.evaluate(Self.trust(chain), forDomain: "localhost", cache: cache)
        #expect(expired.failure?.code == .certificateExpired)
        #expect(cache.statistics.expirations == 1)
        #expect(cache.count == 0)
    }

    @Test("A hit never outlives the time to live")
    func timeToLive() async throws {
        let chain = try TestChain(notValidBefore: Self.t - 30 * Self.day, notValidAfter: Self.t + 30 * Self.day)
        let clock = ManualClock(Self.t)
        let cache = Self.cache(clock: clock, ttl: .seconds(60))
        let policy = SecurityPolicy.default
        _ = await policy.evaluate(Self.trust(chain), forDomain: "localhost", cache: cache)
        clock.advance(by: 59)
        _ = await policy.evaluate(Self.trust(chain), forDomain: "localhost", cache: cache)
        clock.advance(by: 2)
        let again = await policy.evaluate(Self.trust(chain), forDomain: "localhost", cache: cache)
        #expect(again.isTrusted)
        #expect(cache.statistics == EvaluationCache.Statistics(hits: 1, misses: 2, evictions: 0, expirations: 1))
    }

    @Test("An explicit validation time is part of the key; the certificate-mode standard path bounds the entry too")
    func explicitTimes() async throws {
        let chain = try TestChain(notValidBefore: Self.t - 30 * Self.day, notValidAfter: Self.t + 30 * Self.day)
        let clock = ManualClock(Self.t)
        let cache = Self.cache(clock: clock)
        let policy = SecurityPolicy.pinningMode(.certificate, pinnedCertificates: [chain.intermediate.certificate])
        let early = await policy.evaluate(Self.trust(chain, validationTime: Self.t), forDomain: "localhost", cache: cache)
        let late = await policy.evaluate(Self.trust(chain, validationTime: Self.t + 31 * Self.day), forDomain: "localhost", cache: cache)
        #expect(early.isTrusted)
        #expect(late.failure?.code == .certificateExpired)
        #expect(cache.count == 1)
        _ = await policy.evaluate(Self.trust(chain, validationTime: Self.t), forDomain: "localhost", cache: cache)
        #expect(cache.statistics.hits == 1)
    }

    @Test("Untrusted verdicts are never stored")
    func failuresNotCached() async throws {
        let chain = try TestChain(notValidBefore: Self.t - 30 * Self.day, notValidAfter: Self.t + 30 * Self.day)
        let clock = ManualClock(Self.t)
        let cache = Self.cache(clock: clock)
        for _ in 0..<3 {
            let verdict = await SecurityPolicy.default.evaluate(Self.trust(chain), forDomain: "wrong.example", cache: cache)
            #expect(verdict.failure?.code == .hostnameMismatch)
        }
        #expect(cache.count == 0)
        #expect(cache.statistics.misses == 3)
    }

    @Test("Least recently used out when full")
    func leastRecentlyUsed() async throws {
        let chain = try TestChain(notValidBefore: Self.t - 30 * Self.day, notValidAfter: Self.t + 30 * Self.day)
        let clock = ManualClock(Self.t)
        let cache = Self.cache(clock: clock, entries: 2)
        let policy = SecurityPolicy.default
        func evaluate(_ host: String) async { _ = await policy.evaluate(Self.trust(chain), forDomain: host, cache: cache) }
        await evaluate("localhost")  // miss: [localhost]
        await evaluate("127.0.0.1")  // miss: [localhost, 127.0.0.1]
        await evaluate("localhost")  // hit: 127.0.0.1 is now the least recently used
        await evaluate("::1")  // miss, evicts 127.0.0.1
        #expect(cache.statistics == EvaluationCache.Statistics(hits: 1, misses: 3, evictions: 1, expirations: 0))
        await evaluate("localhost")  // hit
        await evaluate("::1")  // hit
        await evaluate("127.0.0.1")  // miss again
        #expect(cache.statistics == EvaluationCache.Statistics(hits: 3, misses: 4, evictions: 2, expirations: 0))
        #expect(cache.count == 2)
    }

    @Test("CachingTrustEvaluator and ServerTrust's cached evaluation answer like the uncached ones")
    func wrappers() async throws {
        let chain = try TestChain(notValidBefore: Self.t - 30 * Self.day, notValidAfter: Self.t + 30 * Self.day)
        let clock = ManualClock(Self.t)
        let cache = Self.cache(clock: clock)
        let policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: chain.intermediate.certificate)])
        let evaluator = CachingTrustEvaluator(policy, cache: cache)
        for host in ["localhost", "localhost", "elsewhere.example"] {
            let cached = await evaluator.evaluate(Self.trust(chain), forDomain: host)
            let plain = await policy.evaluate(Self.trust(chain, validationTime: Self.t), forDomain: host)
            #expect(VerdictSummary(cached) == VerdictSummary(plain))
        }
        let requirement = PinRequirement.publicKeys([Pin(spkiOf: chain.root.certificate)])
        for _ in 0..<2 {
            let cached = await Self.trust(chain).evaluate(.ssl(host: "localhost"), pins: requirement, cache: cache)
            let plain = await Self.trust(chain, validationTime: Self.t).evaluate(.ssl(host: "localhost"), pins: requirement)
            #expect(VerdictSummary(cached) == VerdictSummary(plain))
        }
        #expect(cache.statistics.hits == 2)
    }

    @Test("immediateEvaluation: nil until a trusted verdict is stored, then that verdict, within the same bounds as a hit")
    func immediate() async throws {
        let chain = try TestChain(notValidBefore: Self.t - 30 * Self.day, notValidAfter: Self.t + 2 * Self.day)
        let clock = ManualClock(Self.t)
        let cache = Self.cache(clock: clock, ttl: .seconds(3600))
        let policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: chain.intermediate.certificate)])
        let evaluator = CachingTrustEvaluator(policy, cache: cache)
        // A plain policy never answers at once.
        #expect(policy.immediateEvaluation(Self.trust(chain), forDomain: "localhost") == nil)
        // Nothing stored yet: nil, and not counted as a miss (evaluate counts its own).
        #expect(evaluator.immediateEvaluation(Self.trust(chain), forDomain: "localhost") == nil)
        #expect(cache.statistics == EvaluationCache.Statistics())
        let evaluated = await evaluator.evaluate(Self.trust(chain), forDomain: "localhost")
        #expect(evaluated.isTrusted)
        let immediate = try #require(evaluator.immediateEvaluation(Self.trust(chain), forDomain: "localhost"))
        #expect(VerdictSummary(immediate) == VerdictSummary(evaluated))
        #expect(cache.statistics == EvaluationCache.Statistics(hits: 1, misses: 1))
        // Another host, or a policy with other pins, has no stored verdict.
        #expect(evaluator.immediateEvaluation(Self.trust(chain), forDomain: "127.0.0.1") == nil)
        let otherPins = CachingTrustEvaluator(SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: chain.root.certificate)]), cache: cache)
        #expect(otherPins.immediateEvaluation(Self.trust(chain), forDomain: "localhost") == nil)
        // Past the time to live, or past the leaf's notAfter: no immediate answer.
        clock.advance(by: 3601)
        #expect(evaluator.immediateEvaluation(Self.trust(chain), forDomain: "localhost") == nil)
        _ = await evaluator.evaluate(Self.trust(chain), forDomain: "localhost")
        #expect(evaluator.immediateEvaluation(Self.trust(chain), forDomain: "localhost") != nil)
        clock.advance(by: 2 * Self.day)
        #expect(evaluator.immediateEvaluation(Self.trust(chain), forDomain: "localhost") == nil)
        #expect(await evaluator.evaluate(Self.trust(chain), forDomain: "localhost").failure?.code == .certificateExpired)
    }

    @Test("The key hashes a sample of each certificate but compares every byte: same TBS sample, other bytes, other key")
    func keyComparesEveryByte() throws {
        let issuer = try TestChain().intermediate
        // Two leaves that differ only in their public key, which sits in the middle of the TBSCertificate: same
        // serial, names, validity, and a long subjectAltName (no key identifiers) filling the last 64 bytes.
        func leaf() throws -> Certificate {
            let key = Certificate.PrivateKey(P256.Signing.PrivateKey())
            return try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(bytes: [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]),
                publicKey: key.publicKey,
                notValidBefore: Self.t - Self.day,
                notValidAfter: Self.t + Self.day,
                issuer: issuer.certificate.subject,
                subject: try DistinguishedName { CommonName("a-rather-long-common-name-for-the-sample.example") },
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    SubjectAlternativeNames([.dnsName(String(repeating: "x", count: 60) + ".example")])
                },
                issuerPrivateKey: issuer.privateKey
            )
        }
        let first = try leaf()
        let second = try leaf()
        let a = Array(first.tbsCertificateBytes)
        let b = Array(second.tbsCertificateBytes)
        try #require(a.count == b.count && a.count > 128)
        #expect(a.prefix(64) == b.prefix(64) && a.suffix(64) == b.suffix(64))
        #expect(a != b)
        func key(_ certificate: Certificate) -> EvaluationCache.Key {
            EvaluationCache.Key(
                chain: [certificate],
                evaluator: .serverTrust(namePolicy: .basicX509, pins: nil),
                anchors: [],
                anchorsOnly: true,
                rootSetID: 0,
                validationTime: nil,
                purpose: .serverAuthentication,
                profile: .rfc5280,
                limits: .default,
                revocation: nil
            )
        }
        // Same TBS sample, yet different hashes: the sample takes in the signature too, which an issuer cannot make
        // the same for two different TBSCertificates (review 41, finding 13). And different keys, so one chain's
        // verdict can never answer for the other.
        #expect(key(first).hashValue != key(second).hashValue)
        #expect(key(first) != key(second))
        #expect(key(first) == key(first))
        var table: [EvaluationCache.Key: Int] = [key(first): 1]
        table[key(second)] = 2
        #expect(table.count == 2 && table[key(first)] == 1 && table[key(second)] == 2)
    }

    @Test("Cache on and off give the same verdict for every SecurityPolicy truth-table case", arguments: TruthTableCase.all)
    func truthTableEquivalence(_ testCase: TruthTableCase) async throws {
        let pki = try SecurityPolicyTruthTableTests.fixture.get()
        let policy = pki.policy(testCase)
        let uncached = VerdictSummary(await pki.evaluate(testCase))
        // A fixed validation time, as the table uses; then "now" from the cache's clock at the same instant.
        let cache = EvaluationCache(maximumEntries: 8, timeToLive: .seconds(300), clock: { TruthTablePKI.validationTime })
        var atNow = pki.trust(testCase.scenario)
        atNow.validationTime = nil
        for trust in [pki.trust(testCase.scenario), pki.trust(testCase.scenario), atNow, atNow] {
            let cached = VerdictSummary(await policy.evaluate(trust, forDomain: testCase.domain, cache: cache))
            #expect(cached == uncached, "\(testCase): cached \(cached), uncached \(uncached)")
        }
        if uncached.trusted {
            #expect(cache.statistics.hits == 2, "\(testCase)")
        } else {
            #expect(cache.count == 0, "\(testCase)")
        }
    }
}
