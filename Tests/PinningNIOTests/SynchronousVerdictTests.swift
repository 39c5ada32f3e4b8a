import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
@_spi(FixedValidationTime) import Pinning
import PinningTestSupport
import Testing
import X509

@testable import PinningNIO

/// Issue 31: the built-in evaluators answer NIOSSL's verification callback on the event loop, in the callback's
/// own tick, without a task, when nothing needs to wait (no CRL to fetch, no `clientCheck`, not a custom
/// evaluator). Each test runs the same chain through that synchronous path and through the task path, and
/// requires the same answer to NIOSSL and the same recorded verdict.
@Suite("Verdicts answered on the event loop")
struct SynchronousVerdictTests {
    /// A custom evaluator: the wrapped one's `evaluate`, without an immediate answer, so it runs in a task.
    struct Custom: ServerTrustEvaluating {
        let base: any ServerTrustEvaluating
        func evaluate(_ trust: ServerTrust, forDomain domain: String?) async -> TrustEvaluation {
            await self.base.evaluate(trust, forDomain: domain)
        }
    }

    /// What one call of a verification callback gave.
    struct Outcome {
        /// Whether the promise was completed before the callback returned (no task).
        var answeredInTick: Bool
        var verified: Bool
        var recorded: String
    }

    static let instant = Date()
    static let loop = MultiThreadedEventLoopGroup.singleton.next()

    /// Calls the callback `make` builds (on the loop, as NIOSSL does) with `presented`; the verdict it recorded, in
    /// words that name every field a refusal or a trust carries.
    static func run(
        _ presented: [Certificate],
        _ make: @escaping @Sendable (HandshakeVerdict) -> NIOSSLCustomVerificationCallbackWithMetadata
    ) async throws -> Outcome {
        let verdict = HandshakeVerdict()
        let nio = try presented.map { try NIOSSLCertificate(bytes: Array($0.derBytes), format: .der) }
        let promise = Self.loop.makePromise(of: NIOSSLVerificationResultWithMetadata.self)
        let inTick = try await Self.loop.submit { () -> Bool in
            let answered = NIOLockedValueBox(false)
            promise.futureResult.whenComplete { _ in answered.withLockedValue { $0 = true } }
            make(verdict)(nio, promise)
            return answered.withLockedValue { $0 }
        }.get()
        let verified: Bool
        switch try await promise.futureResult.get() {
        case .certificateVerified: verified = true
        case .failed: verified = false
        }
        return Outcome(answeredInTick: inTick, verified: verified, recorded: Self.words(verdict.current))
    }

    static func words(_ state: HandshakeVerdict.State) -> String {
        switch state {
        case .pending: return "pending"
        case .deciding: return "deciding"
        case .trusted(let chain):
            return
                "trusted basis=\(chain.basis) path=\(chain.path.map(\.subject)) warnings=\(chain.warnings) time=\(String(describing: chain.validationTime)) revocation=\(chain.revocation.map { "\($0.certificates.map(\.summary))" } ?? "none")"
        case .untrusted(let failure):
            return
                "untrusted code=\(failure.code) reason=\(failure.reason) details=\(failure.details) validated=\(String(describing: failure.validatedPath?.map(\.subject))) failed=\(String(describing: failure.failedPath?.map(\.subject))) index=\(String(describing: failure.failedCertificateIndex)) names=\(failure.leafNames) pins=\(failure.expectedPins) time=\(failure.validationTime) at=\(failure.file):\(failure.line)"
        case .unreadable(let problem): return "unreadable \(problem)"
        case .refused(let error): return "refused \(error)"
        }
    }

    /// The outcome of `presented` for `host` through a client with `policy` (synchronous) and through the same
    /// policy as a custom evaluator (a task); both judged at one fixed instant.
    static func clientOutcomes(
        _ presented: [Certificate],
        host: String,
        policy: any ServerTrustEvaluating,
        settings: TrustSettings
    ) async throws -> (sync: Outcome, task: Outcome) {
        let fixed = settings.validatingAt(Self.instant)
        let direct = try PinnedTLSClient(evaluator: policy, settings: fixed)
        let custom = try PinnedTLSClient(evaluator: Custom(base: policy), settings: fixed)
        let sync = try await Self.run(presented) { direct.verificationCallback(verdict: $0, host: host, port: 443) }
        let task = try await Self.run(presented) { custom.verificationCallback(verdict: $0, host: host, port: 443) }
        return (sync, task)
    }

    @Test("A client's policy answers in the callback's tick with the verdict the task records: trusted and each refusal")
    func clientVerdictsMatch() async throws {
        let chain = try TestChain(host: "sync.example")
        let other = try TestChain(host: "sync.example", rootName: "Other Root")
        let expired = try TestChain(
            host: "sync.example",
            notValidBefore: Date().addingTimeInterval(-3 * 86_400),
            notValidAfter: Date().addingTimeInterval(-86_400)
        )
        let settings = TrustSettings(anchors: [chain.root.certificate, expired.root.certificate], anchorsOnly: true)
        let pinned = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: chain.intermediate.certificate)])
        let cases: [(String, [Certificate], String, any ServerTrustEvaluating, String?)] = [
            ("trusted, pinned", chain.presented, "sync.example", pinned, nil),
            ("trusted, not pinned", chain.presented, "sync.example", SecurityPolicy.default, nil),
            ("trusted through a cache", chain.presented, "sync.example", CachingTrustEvaluator(pinned), nil),
            ("pin mismatch", chain.presented, "sync.example", SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: other.intermediate.certificate)]), "pinMismatch"),
            ("certificate pin mismatch", chain.presented, "sync.example", SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [other.leaf.certificate]), "pinMismatch"),
            ("host name", chain.presented, "elsewhere.example", pinned, "hostnameMismatch"),
            ("no anchor", other.presented, "sync.example", SecurityPolicy.default, "noPathToAnchor"),
            ("expired", expired.presented, "sync.example", SecurityPolicy.default, "certificateExpired"),
        ]
        for (name, presented, host, policy, code) in cases {
            let (sync, task) = try await Self.clientOutcomes(presented, host: host, policy: policy, settings: settings)
            #expect(sync.answeredInTick, "\(name): the policy answered in a task")
            #expect(!task.answeredInTick, "\(name): the custom evaluator did not run in a task")
            #expect(sync.verified == (code == nil), "\(name): \(sync.recorded)")
            #expect(sync.verified == task.verified, "\(name)")
            #expect(sync.recorded == task.recorded, "\(name)")
            if let code { #expect(sync.recorded.hasPrefix("untrusted code=\(code) "), "\(name): \(sync.recorded)") }
        }
    }

    @Test("A revoked leaf is refused on the loop as in a task; a policy that fetches CRLs goes to the task")
    func revocation() async throws {
        let chain = try TestChain(host: "sync.example")
        let crl = try TestCRL(
            issuer: chain.intermediate,
            entries: [.init(serialNumber: chain.leaf.certificate.serialNumber, revocationDate: Self.instant.addingTimeInterval(-60), reason: .keyCompromise)],
            number: 1,
            thisUpdate: Self.instant.addingTimeInterval(-120),
            nextUpdate: Self.instant.addingTimeInterval(3600)
        )
        var settings = TrustSettings(anchors: [chain.root.certificate], anchorsOnly: true)
        settings.revocation = RevocationPolicy(crls: try CertificateRevocationList.read(crl.der), mode: .hard, scope: .leaf)
        let (sync, task) = try await Self.clientOutcomes(chain.presented, host: "sync.example", policy: SecurityPolicy.default, settings: settings)
        #expect(sync.answeredInTick)
        #expect(!sync.verified)
        #expect(sync.recorded.hasPrefix("untrusted code=revoked "), "\(sync.recorded)")
        #expect(sync.recorded == task.recorded)

        // Fetching from distribution points (none here): the fetcher runs first, in a task, and decides as before.
        settings.revocation = RevocationPolicy(crls: [], mode: .hard, scope: .leaf, fetch: true)
        let fetching = try await Self.clientOutcomes(chain.presented, host: "sync.example", policy: SecurityPolicy.default, settings: settings)
        #expect(!fetching.sync.answeredInTick, "a policy that fetches CRLs was answered without its fetch")
        #expect(!fetching.sync.verified)
        #expect(fetching.sync.recorded.hasPrefix("untrusted code=revocationUnknown "), "\(fetching.sync.recorded)")
        #expect(fetching.sync.recorded == fetching.task.recorded)
    }

    @Test("A same-subject mesh is refused on the loop within the budget, with the refusal the task records")
    func hostileMesh() async throws {
        let mesh = try SameSubjectMesh(keys: 8)
        let unrelated = try TestPKI.root("Unrelated Root CA")
        let settings = TrustSettings(anchors: [unrelated.certificate], anchorsOnly: true)
        let (sync, task) = try await Self.clientOutcomes(mesh.presented, host: "mesh.example", policy: SecurityPolicy.default, settings: settings)
        #expect(sync.answeredInTick)
        #expect(!sync.verified)
        #expect(sync.recorded.hasPrefix("untrusted code=pathBuildingLimitExceeded "), "\(sync.recorded)")
        #expect(sync.recorded == task.recorded)
    }

    /// A server judging at a fixed instant with `rule`, and `check` if given.
    static func server(_ setup: MutualTLSSetup, rule: MutualTLSServer.ClientRule, check: MutualTLSServer.ClientCheck? = nil) throws -> MutualTLSServer {
        var configuration = MutualTLSServer.Configuration(
            identity: setup.server.identity,
            clientCertificateAuthorities: [setup.clientChain.root.certificate],
            clientRule: rule
        )
        configuration.clientCheck = check
        return try MutualTLSServer(configuration: configuration, validationTime: Self.instant, clock: { Self.instant })
    }

    /// `presented` through `server`'s callback (its immediate decision first, as its handlers wire it), and through
    /// the task alone (its decision without the immediate one, as before issue 31).
    static func serverOutcomes(_ presented: [Certificate], server: MutualTLSServer) async throws -> (wired: Outcome, task: Outcome) {
        let wired = try await Self.run(presented) { verdict in
            PeerVerification.callback(
                verdict: verdict,
                immediate: { server.immediateClientDecision($0, recordsSession: false) },
                handover: server.handover,
                decision: { await server.decideClient($0, recordsSession: false) }
            )
        }
        let task = try await Self.run(presented) { verdict in
            PeerVerification.callback(verdict: verdict, handover: server.handover) { await server.decideClient($0, recordsSession: false) }
        }
        return (wired, task)
    }

    @Test(
        "An mTLS server's built-in rule answers in the callback's tick with the task's verdict; a clientCheck goes to the task",
        arguments: [false, true]
    )
    func serverVerdictsMatch(cached: Bool) async throws {
        let setup = try MutualTLSSetup()
        let stranger = try TestChain(host: "client-9", ipAddresses: [], leafUsage: .clientAuth, rootName: "Stranger Root")
        let serverAuthOnly = try TestPKI.leaf("client-8", issuer: setup.clientChain.intermediate, usage: .serverAuth)
        let clients: [(String, [Certificate], String?)] = [
            ("trusted", [setup.clientChain.leaf.certificate, setup.clientChain.intermediate.certificate], nil),
            ("no anchor", stranger.presented, "noPathToAnchor"),
            ("serverAuth only", [serverAuthOnly.certificate, setup.clientChain.intermediate.certificate], "extendedKeyUsage"),
        ]
        let cache = cached ? EvaluationCache() : nil
        let builtIn = try Self.server(setup, rule: .builtIn(cache: cache))
        let pinned = try Self.server(setup, rule: .builtIn(pins: [Pin(spkiOf: stranger.intermediate.certificate)]))
        for (name, presented, code) in clients {
            let (wired, task) = try await Self.serverOutcomes(presented, server: builtIn)
            #expect(wired.answeredInTick, "\(name): the built-in rule answered in a task")
            #expect(!task.answeredInTick)
            #expect(wired.verified == (code == nil), "\(name): \(wired.recorded)")
            #expect(wired.recorded == task.recorded, "\(name)")
            if let code { #expect(wired.recorded.hasPrefix("untrusted code=\(code) "), "\(name): \(wired.recorded)") }
        }
        // The trusted verdict answered on the loop filled the cache, and the task's was answered from it; refusals
        // are never kept.
        if let cache {
            #expect(cache.count == 1)
            #expect(cache.statistics.hits == 1)
        }
        let (mismatch, mismatchTask) = try await Self.serverOutcomes(clients[0].1, server: pinned)
        #expect(mismatch.answeredInTick)
        #expect(mismatch.recorded.hasPrefix("untrusted code=pinMismatch "), "\(mismatch.recorded)")
        #expect(mismatch.recorded == mismatchTask.recorded)

        // A clientCheck is async and runs on every connection: the task decides, and its refusal is recorded.
        let checked = try Self.server(setup, rule: .builtIn(cache: cache)) { peer, _ in "no \(peer.subject) today" }
        let (refused, _) = try await Self.serverOutcomes(clients[0].1, server: checked)
        #expect(!refused.answeredInTick)
        #expect(!refused.verified)
        #expect(refused.recorded.hasPrefix("refused "), "\(refused.recorded)")
    }

    @Test("An mTLS server's custom evaluator keeps its task unless it answers immediately")
    func serverCustomEvaluator() async throws {
        let setup = try MutualTLSSetup()
        let presented = [setup.clientChain.leaf.certificate, setup.clientChain.intermediate.certificate]
        let custom = try Self.server(setup, rule: .evaluator(Custom(base: SecurityPolicy.default)))
        let (wired, _) = try await Self.serverOutcomes(presented, server: custom)
        #expect(!wired.answeredInTick)
        #expect(wired.verified, "\(wired.recorded)")
        // SecurityPolicy opts in (its evaluation waits for nothing).
        let policy = try Self.server(setup, rule: .evaluator(SecurityPolicy.default))
        let (immediate, task) = try await Self.serverOutcomes(presented, server: policy)
        #expect(immediate.answeredInTick)
        #expect(immediate.verified, "\(immediate.recorded)")
        #expect(immediate.recorded == task.recorded)
    }
}
