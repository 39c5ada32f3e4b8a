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

    /// The outcome of `presented` for `host` through a client with `policy` (synchronous) and through
    /// `taskPolicy` (the same policy when not given) as a custom evaluator (a task); both judged at one fixed
    /// instant.
    static func clientOutcomes(
        _ presented: [Certificate],
        host: String,
        policy: any ServerTrustEvaluating,
        taskPolicy: (any ServerTrustEvaluating)? = nil,
        settings: TrustSettings
    ) async throws -> (sync: Outcome, task: Outcome) {
        let fixed = settings.validatingAt(Self.instant)
        let direct = try PinnedTLSClient(evaluator: policy, settings: fixed)
        let custom = try PinnedTLSClient(evaluator: Custom(base: taskPolicy ?? policy), settings: fixed)
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

        // Through a cache: each path has its own (with one shared, the task was answered from what the loop had
        // stored). Each evaluates once and stores the trusted verdict; the second time each is answered from its
        // own cache, with the verdict it evaluated.
        let loopCache = CachingTrustEvaluator(pinned)
        let taskCache = CachingTrustEvaluator(pinned)
        var first: (sync: Outcome, task: Outcome)?
        for round in 1...2 {
            let (sync, task) = try await Self.clientOutcomes(chain.presented, host: "sync.example", policy: loopCache, taskPolicy: taskCache, settings: settings)
            #expect(sync.answeredInTick, "round \(round): the cache answered in a task")
            #expect(!task.answeredInTick, "round \(round)")
            #expect(sync.verified, "round \(round): \(sync.recorded)")
            #expect(sync.recorded == task.recorded, "round \(round)")
            if let first {
                #expect(sync.recorded == first.sync.recorded && task.recorded == first.task.recorded, "a hit changed the verdict")
            }
            first = first ?? (sync, task)
            for (path, evaluator) in [("loop", loopCache), ("task", taskCache)] {
                #expect(evaluator.cache.count == 1, "round \(round), \(path)")
                #expect(
                    evaluator.cache.statistics == EvaluationCache.Statistics(hits: round - 1, misses: 1),
                    "round \(round), \(path): \(String(describing: evaluator.cache.statistics))")
            }
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
    /// the task alone (its decision without the immediate one, as before issue 31), of `taskServer` when given (a
    /// server of its own, so that a cache the first run filled cannot answer the second).
    static func serverOutcomes(
        _ presented: [Certificate], server: MutualTLSServer, taskServer: MutualTLSServer? = nil
    ) async throws -> (wired: Outcome, task: Outcome) {
        let wired = try await Self.run(presented) { verdict in
            PeerVerification.callback(
                verdict: verdict,
                immediate: { server.immediateClientDecision($0, recordsSession: false) },
                handover: server.handover,
                decision: { await server.decideClient($0, recordsSession: false) }
            )
        }
        let other = taskServer ?? server
        let task = try await Self.run(presented) { verdict in
            PeerVerification.callback(verdict: verdict, handover: other.handover) { await other.decideClient($0, recordsSession: false) }
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
        // Each path has a server and a cache of its own: with one cache, the task's run was answered from what the
        // loop's run had stored, and the comparison held one evaluation against itself.
        let wiredCache = cached ? EvaluationCache() : nil
        let taskCache = cached ? EvaluationCache() : nil
        let builtIn = try Self.server(setup, rule: .builtIn(cache: wiredCache))
        let builtInTask = try Self.server(setup, rule: .builtIn(cache: taskCache))
        let pinned = try Self.server(setup, rule: .builtIn(pins: [Pin(spkiOf: stranger.intermediate.certificate)]))
        var trustedRecorded = ""
        for (name, presented, code) in clients {
            let (wired, task) = try await Self.serverOutcomes(presented, server: builtIn, taskServer: builtInTask)
            #expect(wired.answeredInTick, "\(name): the built-in rule answered in a task")
            #expect(!task.answeredInTick)
            #expect(wired.verified == (code == nil), "\(name): \(wired.recorded)")
            #expect(wired.recorded == task.recorded, "\(name)")
            if let code { #expect(wired.recorded.hasPrefix("untrusted code=\(code) "), "\(name): \(wired.recorded)") }
            if code == nil { trustedRecorded = wired.recorded }
        }
        if let wiredCache, let taskCache {
            // Each path evaluated every client itself (three misses, no hit) and kept the trusted verdict alone;
            // refusals are never kept.
            for (path, cache) in [("loop", wiredCache), ("task", taskCache)] {
                #expect(cache.count == 1, "\(path)")
                #expect(cache.statistics == EvaluationCache.Statistics(hits: 0, misses: 3), "\(path): \(String(describing: cache.statistics))")
            }
            // The trusted client again: each path is answered from its own cache, with the verdict it evaluated.
            let (wired, task) = try await Self.serverOutcomes(clients[0].1, server: builtIn, taskServer: builtInTask)
            #expect(wired.answeredInTick)
            #expect(wired.verified, "\(wired.recorded)")
            #expect(wired.recorded == task.recorded)
            #expect(wired.recorded == trustedRecorded, "a hit changed the verdict: \(wired.recorded)")
            for (path, cache) in [("loop", wiredCache), ("task", taskCache)] {
                #expect(cache.statistics == EvaluationCache.Statistics(hits: 1, misses: 3), "\(path): \(String(describing: cache.statistics))")
            }
        }
        let (mismatch, mismatchTask) = try await Self.serverOutcomes(clients[0].1, server: pinned)
        #expect(mismatch.answeredInTick)
        #expect(mismatch.recorded.hasPrefix("untrusted code=pinMismatch "), "\(mismatch.recorded)")
        #expect(mismatch.recorded == mismatchTask.recorded)

        // A clientCheck is async and runs on every connection: the task decides, and its refusal is recorded.
        let checked = try Self.server(setup, rule: .builtIn(cache: cached ? EvaluationCache() : nil)) { peer, _ in "no \(peer.subject) today" }
        let (refused, _) = try await Self.serverOutcomes(clients[0].1, server: checked)
        #expect(!refused.answeredInTick)
        #expect(!refused.verified)
        #expect(refused.recorded.hasPrefix("refused "), "\(refused.recorded)")
    }

    /// Whether each call of a server's clock came from inside a task: the built-in rule without a cache reads the
    /// clock once per decision, so the calls say where each decision was made.
    final class ClockCalls: Sendable {
        let now: TestClock
        private let calls = NIOLockedValueBox<[Bool]>([])
        init(_ now: Date) { self.now = TestClock(now) }
        func read() -> Date {
            let inTask = withUnsafeCurrentTask { $0 != nil }
            self.calls.withLockedValue { $0.append(inTask) }
            return self.now.now
        }
        /// The calls since the last `take()`, each true when made inside a task.
        func take() -> [Bool] {
            self.calls.withLockedValue { calls in
                defer { calls = [] }
                return calls
            }
        }
    }

    @Test(
        "A resumed TLS 1.2 session is re-decided on the loop, without a task, with the verdict the task gives: trusted while the client certificate is valid, refused once it has expired",
        .enabled(if: opensslAvailable)
    )
    func resumedSession() async throws {
        let setup = try MutualTLSSetup()
        let now = Date()
        let leaf = try TestPKI.leaf(
            "client-soon", issuer: setup.clientChain.intermediate, dnsNames: ["client-soon"], usage: .clientAuth,
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(86400))
        let directory = try TemporaryDirectory(prefix: "pinning-sync-resume")
        defer { directory.remove() }
        let cert = try directory.write("client.pem", leaf.certificatePEM)
        let intermediates = try directory.write("intermediates.pem", setup.clientChain.intermediate.certificatePEM)
        let key = try directory.write("client.key", leaf.privateKeyPEM)

        /// One server's three connections (full handshake, resumption while valid, resumption once expired): the
        /// outcomes, and for each whether its decision was made in a task.
        func connections(clientCheck: MutualTLSServer.ClientCheck?) async throws -> [(Result<PinnedHandshake, PinningConnectionError>?, [Bool])] {
            let clock = ClockCalls(now)
            var configuration = MutualTLSServer.Configuration(
                identity: setup.server.identity, clientCertificateAuthorities: [setup.clientChain.root.certificate], clientRule: .builtIn())
            configuration.clientCheck = clientCheck
            let server = try await ResumptionTestServer(MutualTLSServer(configuration: configuration, clock: { clock.read() }))
            defer { Task { await server.stop() } }
            let session = directory.path("session-\(clientCheck == nil ? "loop" : "task").pem")
            var results: [(Result<PinnedHandshake, PinningConnectionError>?, [Bool])] = []
            for round in 0..<3 {
                if round == 2 { clock.now.now = now.addingTimeInterval(2 * 86400) }
                let output = try await MutualTLSTests.sessionProbe(
                    port: server.port, cert: cert, intermediates: intermediates, key: key, version: "-tls1_2", session: session, reuse: round > 0)
                #expect(output.contains(round == 0 ? "New," : "Reused,"), "round \(round): \(output.prefix(3000))")
                results.append((await server.log.nextOutcome(), clock.take()))
            }
            return results
        }

        let loop = try await connections(clientCheck: nil)
        // A clientCheck (async, accepting everyone here) sends every decision to the task.
        let task = try await connections(clientCheck: { _, _ in nil })
        for (round, ((loopOutcome, loopCalls), (taskOutcome, taskCalls))) in zip(loop, task).enumerated() {
            #expect(!loopCalls.isEmpty && !loopCalls.contains(true), "round \(round): the loop's server decided in a task: \(loopCalls)")
            #expect(!taskCalls.isEmpty && !taskCalls.contains(false), "round \(round): the task's server decided without one: \(taskCalls)")
            switch (loopOutcome, taskOutcome) {
            case (.success(let onLoop)?, .success(let inTask)?) where round < 2:
                #expect(onLoop.peer.subject == "CN=client-soon")
                #expect(onLoop.peer.certificateChain == [leaf.certificate, setup.clientChain.intermediate.certificate, setup.clientChain.root.certificate])
                #expect(onLoop.peer.certificateChain == inTask.peer.certificateChain, "round \(round)")
                #expect(onLoop.trustedChain.basis == inTask.trustedChain.basis, "round \(round)")
            case (.failure(let onLoop)?, .failure(let inTask)?) where round == 2:
                #expect(onLoop.trustFailure?.code == .certificateExpired, "\(onLoop.debugDescription)")
                #expect(onLoop.trustFailure?.reason == inTask.trustFailure?.reason, "\(onLoop.debugDescription) / \(inTask.debugDescription)")
                #expect(onLoop.message == inTask.message)
            default:
                Issue.record("round \(round): loop \(String(describing: loopOutcome)), task \(String(describing: taskOutcome))")
            }
        }
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
