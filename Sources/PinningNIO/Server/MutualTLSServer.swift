package import Foundation
import NIOConcurrencyHelpers
public import NIOCore
public import NIOSSL
@_spi(FixedValidationTime) public import Pinning
public import X509

/// TLS for servers that require a client certificate and validate it with this package's evaluator.
///
/// <!-- snippet: given(serverIdentity: TLSIdentity, deviceCA: Certificate, group: any EventLoopGroup)
/// import NIOCore
/// import NIOPosix
/// import X509
/// -->
/// ```swift
/// let server = try MutualTLSServer(identity: serverIdentity, clientCertificateAuthorities: [deviceCA])
/// let bootstrap = ServerBootstrap(group: group).childChannelInitializer { channel in
///     channel.eventLoop.makeCompletedFuture {
///         try server.addHandlers(to: channel.pipeline.syncOperations)
///         // … HTTP handlers; they read the client with channel.pinningAuthenticatedPeer()
///     }
/// }
/// ```
///
/// Each client chain is judged under ``clientSettings`` (purpose ``/Pinning/TrustPurpose/clientAuthentication``, i.e.
/// extendedKeyUsage clientAuth, the configured client CAs as the only anchors, no name check) by one
/// ``ClientRule``: the built-in rule, with an optional allow-list of client SPKI pins (some certificate on the
/// validated path must carry one) and an optional verdict cache, or an evaluator of yours, handed the same
/// anchors, purpose and CRLs, which can narrow that but not widen it (a chain it trusts without a validated path
/// is refused). Options beyond the identity and the CAs go in a ``Configuration``.
///
/// NIOSSL settings: `.noHostnameVerification` (VERIFY_PEER | FAIL_IF_NO_PEER_CERT: a client without a
/// certificate is refused), `sendCANameList` (clients are told which CAs are accepted), the custom callback
/// replaces BoringSSL's validation.
///
/// Session resumption (TLS 1.3 tickets, TLS 1.2 session IDs and tickets): one `NIOSSLContext` per server, so
/// BoringSSL's session cache and ticket keys are shared by its connections and a returning client resumes
/// (as nginx with `ssl_verify_client` does). BoringSSL skips certificate verification on a resumed session,
/// so resumption must not skip our checks:
/// - at each full handshake the chain the client presented and our policy trusted is recorded, keyed to the
///   leaf certificate's DER (at most ``maximumRecordedClients``, oldest forgotten first);
/// - on a resumed session, ``PinningHandshakeHandler`` reads the client certificate the session carries (bound
///   to the session's secrets by the full handshake that created it) and the server decides it
///   again: the recorded chain (or the leaf alone when none is recorded) is validated anew at the current time
///   under the same policy (anchors, clientAuth, pins), then ``clientCheck`` runs. Only then is anything the
///   client sent passed on, with the re-validated identity as the channel's ``AuthenticatedPeer``; a refusal
///   closes the connection. A certificate that expired since the session was made is thus refused on resumption.
///
/// BoringSSL needs no session ID context for this: it compares the session's context with the connection's
/// (`ssl_session_is_context_valid` in `ssl/ssl_session.cc`), and both are empty. swift-nio-ssl offers no way to set
/// one (`SSL_CTX_set_session_id_context` is not exposed, and `CNIOBoringSSL` is not a product); the context
/// being per server already confines sessions to the server configuration that made them.
public struct MutualTLSServer: Sendable {
    /// Extra decision on each client after its chain was validated, at the full handshake and again on every
    /// resumed session: the place for deny-lists and checks of your own (CRLs are ``Configuration/revocation``'s
    /// job). Return nil to accept, or a reason to refuse (the connection is closed and the reason reported as
    /// ``PinningConnectionError/Code/refusedByCheck``).
    public typealias ClientCheck = @Sendable (_ peer: AuthenticatedPeer, _ resumedSession: Bool) async -> String?

    /// How many clients' trusted chains are remembered for re-validating their resumed sessions.
    public static let maximumRecordedClients = 10_000

    /// What the server was made with.
    public let serverConfiguration: Configuration
    /// How each client's chain is judged apart from the chain itself: the client CAs as the only anchors,
    /// client authentication. Each handshake pairs these with the presented chain and the CRLs in force.
    public let clientSettings: TrustSettings
    /// The TLS configuration of the server's context.
    public let configuration: TLSConfiguration
    /// The instant clients are judged at when no fixed validation time is set.
    let clock: @Sendable () -> Date
    /// The context every connection shares (its session cache and ticket keys), and the record of trusted chains.
    private let sessions: ServerSessions
    /// Hands each trusted path to NIOSSL with the client CAs already in its form.
    let handover: NIOSSLPathHandover

    /// A mutual-TLS server.
    ///
    /// <!-- snippet: given(serverIdentity: TLSIdentity, deviceCA: Certificate, revocation: RevocationSource)
    /// import Pinning
    /// import X509
    /// -->
    /// ```swift
    /// var configuration = MutualTLSServer.Configuration(identity: serverIdentity, clientCertificateAuthorities: [deviceCA])
    /// configuration.clientRule = .builtIn(cache: EvaluationCache())
    /// configuration.revocation = revocation
    /// configuration.clientCheck = { peer, _ in peer.subject.description.contains("retired") ? "a retired device" : nil }
    /// let server = try MutualTLSServer(configuration: configuration)
    /// ```
    ///
    /// Clients are judged at the time of each handshake. A fixed instant is for this package's tests only
    /// (a `package` initialiser), as ``/Pinning/TrustSettings`` keeps its fixed clock behind SPI for the same reason.
    ///
    /// - Throws: ``TLSIdentityError`` when there is no client CA or NIOSSL cannot use one; ``ConfigurationError``
    ///   when the rule's evaluator accepts chains without a validated path; NIOSSL errors when the TLS
    ///   configuration cannot be built.
    public init(configuration: Configuration) throws {
        try self.init(configuration: configuration, validationTime: nil, clock: { Date() })
    }

    /// A server with the built-in client rule or an evaluator of yours and nothing else configured: the same as
    /// ``init(configuration:)`` with a ``Configuration`` of these three.
    public init(identity: TLSIdentity, clientCertificateAuthorities: [Certificate], clientRule: ClientRule = .builtIn()) throws {
        try self.init(configuration: Configuration(identity: identity, clientCertificateAuthorities: clientCertificateAuthorities, clientRule: clientRule))
    }

    /// A server whose clients are judged at a fixed instant (`validationTime`) or at the instants `clock` gives
    /// (tests move time past a certificate's expiry between a full handshake and its resumption). A cache in the
    /// built-in rule judges at its own clock's instants: give it the same clock. An evaluator judges at
    /// `validationTime` when one is fixed, else at its own now (the clock is not consulted).
    package init(configuration: Configuration, validationTime: Date? = nil, clock: @escaping @Sendable () -> Date) throws {
        if case .evaluator(let evaluator) = configuration.clientRule, evaluator.acceptsChainsWithoutValidatedPath {
            throw ConfigurationError(
                problem: "a client evaluator with allowInvalidCertificates would let in clients that no client CA vouches for: a mutual-TLS server does not accept it"
            )
        }
        self.serverConfiguration = configuration
        self.clientSettings = TrustSettings(anchors: configuration.clientCertificateAuthorities, anchorsOnly: true, purpose: .clientAuthentication)
            .validatingAt(validationTime)
        var tls = try TLSConfiguration.makeMutualTLSServerConfiguration(
            identity: configuration.identity,
            clientCertificateAuthorities: configuration.clientCertificateAuthorities
        )
        tls.applicationProtocols = configuration.applicationProtocols
        var logged = configuration.keyLog?.applied(to: tls) ?? tls
        // The alert observers' secrets (``TLSAlertObserver``), then the key log's line as before.
        logged.keyLogCallback = TLSAlertSecrets.shared.keyLogCallback(forwardingTo: logged.keyLogCallback)
        self.configuration = logged
        self.clock = clock
        // Fails at configuration time, not at the first connection.
        self.sessions = ServerSessions(context: try NIOSSLContext(configuration: self.configuration))
        // The configuration above converted every client CA already, so this cannot fail.
        self.handover = NIOSSLPathHandover(
            anchors: try configuration.clientCertificateAuthorities.map { ($0, try NIOSSLCertificate(bytes: $0.derBytes, format: .der)) })
    }

    /// Validates a client chain as the handshake does (at the fixed validation time, or now).
    public func evaluateClient(_ presented: [Certificate]) async -> TrustEvaluation {
        let trust = self.clientTrust(for: presented)
        switch self.clientRule {
        case .evaluator(let evaluator):
            // The evaluator narrows, never widens: whatever it trusts must rest on a validated path.
            return await evaluator.evaluate(trust, forDomain: nil).requiringValidatedPath(whose: "a client chain")
        case .builtIn(let pins, let cache?):
            // The cache judges at its clock's now (or the fixed instant) and re-checks validity on every hit.
            return await trust.evaluate(.basicX509, pins: Self.requirement(pins), cache: cache)
        case .builtIn(let pins, nil):
            return await trust.evaluate(.basicX509, pins: Self.requirement(pins))
        }
    }

    /// ``evaluateClient(_:)``'s verdict for `presented`, answered on the event loop without a task (issue 31): the
    /// built-in rule's whole evaluation (through its cache, when it has one), which waits for nothing and is bounded
    /// by the evaluation's budget (``/Pinning/TrustLimits``), a built-in evaluator's (``/Pinning/SecurityPolicy``,
    /// ``/Pinning/CachingTrustEvaluator``), or another evaluator's immediate answer
    /// (``/Pinning/ServerTrustEvaluating/immediateEvaluation(_:forDomain:)``). Nil (the task decides) for an
    /// evaluator without one, or with a ``Configuration/clientCheck`` (which is async, and must run on every
    /// connection). A trusted verdict is recorded for the client's resumed sessions as
    /// ``decideClient(_:recordsSession:)`` does when `recordsSession`.
    func immediateClientDecision(_ presented: [Certificate], recordsSession: Bool) -> TrustEvaluation? {
        guard self.serverConfiguration.clientCheck == nil else { return nil }
        let trust = self.clientTrust(for: presented)
        let stored: TrustEvaluation?
        switch self.clientRule {
        case .evaluator(let evaluator):
            stored = evaluator.evaluationWithoutTask(trust, forDomain: nil)?.requiringValidatedPath(whose: "a client chain")
        case .builtIn(let pins, let cache?):
            stored = trust.evaluateSynchronously(.basicX509, pins: Self.requirement(pins), cache: cache)
        case .builtIn(let pins, nil):
            stored = trust.evaluateSynchronously(.basicX509, pins: Self.requirement(pins))
        }
        guard let evaluation = stored else { return nil }
        if recordsSession, case .trusted = evaluation, let leaf = presented.first {
            self.sessions.record(presented, for: leaf)
        }
        return evaluation
    }

    /// The trust a presented client chain is judged with: the client settings, the CRLs in force right now, and
    /// the instant (the fixed one, else the clock's; a cache judges at its own clock's).
    private func clientTrust(for presented: [Certificate]) -> ServerTrust {
        var trust = self.clientSettings.trust(for: presented)
        trust.revocation = self.serverConfiguration.revocation?.current
        if case .builtIn(_, nil) = self.clientRule, trust.validationTime == nil {
            trust.validationTime = self.clock()
        }
        return trust
    }

    private static func requirement(_ pins: [Pin]) -> PinRequirement? {
        pins.isEmpty ? nil : .publicKeys(pins)
    }

    /// Decides a client at a full handshake: the chain's validation, then ``Configuration/clientCheck``; a trusted
    /// chain is recorded for the client's resumed sessions when `recordsSession` (when this server's own handlers
    /// re-decide them; a framework's context that never resumes has nothing to record).
    func decideClient(_ presented: [Certificate], recordsSession: Bool) async -> PeerDecision {
        let decision = await self.decide(presented, resumed: false)
        if recordsSession, case .evaluation(.trusted) = decision, let leaf = presented.first {
            self.sessions.record(presented, for: leaf)
        }
        return decision
    }

    /// Decides the client of a resumed session again, from the leaf certificate the session carries: the chain
    /// recorded for that leaf at its full handshake (the leaf alone if none is recorded) is validated anew at the
    /// current time and under the current policy, then ``Configuration/clientCheck`` runs with `resumedSession`
    /// true.
    func decideResumedClient(_ leaf: Certificate) async -> PeerDecision {
        await self.decide(self.sessions.recordedChain(for: leaf) ?? [leaf], resumed: true)
    }

    private func decide(_ presented: [Certificate], resumed: Bool) async -> PeerDecision {
        let evaluation = await self.evaluateClient(presented)
        guard case .trusted(let chain) = evaluation, let clientCheck = self.serverConfiguration.clientCheck else {
            return .evaluation(evaluation)
        }
        let path = chain.path.isEmpty ? chain.presentedChain : chain.path
        guard let peer = AuthenticatedPeer(chain: path) else { return .evaluation(evaluation) }
        if let reason = await clientCheck(peer, resumed) {
            return .refused(PinningConnectionError(code: .refusedByCheck, host: nil, message: "the client \(peer.subject) was refused\(resumed ? " on resuming its session" : ""): \(reason)"))
        }
        return .evaluation(evaluation)
    }

    /// The NIOSSL server handler (on the server's shared context) and the ``PinningHandshakeHandler`` that must
    /// follow it.
    public func makeServerTLSHandlers() throws -> (NIOSSLServerHandler, PinningHandshakeHandler) {
        let verdict = HandshakeVerdict()
        let server = self
        let callback = PeerVerification.callback(
            verdict: verdict,
            immediate: { presented in server.immediateClientDecision(presented, recordsSession: true) },
            handover: self.handover,
            decision: { presented in await server.decideClient(presented, recordsSession: true) }
        )
        let tls = NIOSSLServerHandler(context: self.sessions.context, customVerificationCallbackWithMetadata: callback)
        let pinning = PinningHandshakeHandler(
            verdict: verdict,
            host: nil,
            immediateResumedSessionCheck: { leafDER in
                // Only a client recorded at its full handshake; anything else takes the full re-check.
                guard let chain = server.sessions.recordedChain(forDER: leafDER) else { return nil }
                return server.immediateClientDecision(chain, recordsSession: false).map(PeerDecision.evaluation)
            },
            resumedSessionCheck: { leaf in await server.decideResumedClient(leaf) }
        )
        return (tls, pinning)
    }

    /// NIOSSL's verification callback making this server's decision, for a server whose TLS handler a framework
    /// builds itself (Vapor's `customCertificateVerifyCallbackWithMetadata`): the client's chain judged as
    /// ``makeServerTLSHandlers()`` judges it (client CAs, clientAuth, the ``ClientRule``, CRLs, `clientCheck`),
    /// the validated path handed back as the verification metadata, `.failed`
    /// for any refusal.
    ///
    /// What it cannot do without ``PinningHandshakeHandler`` behind it: judge a *resumed* session again (NIOSSL
    /// does not call it then). Use it only with a server that never resumes sessions across connections. Vapor
    /// builds a new `NIOSSLContext` for every connection, so its sessions cannot be resumed (PinningVapor's tests
    /// check it with `openssl s_client -sess_in`); a server sharing one context must use ``addHandlers(to:)``.
    ///
    /// - Parameter onRefusal: Called with the reason of each client whose presented chain this server refuses
    ///   (for logs and metrics): `untrusted` with the ``/Pinning/TrustFailure``, `unreadablePeerCertificate`, or a
    ///   `clientCheck` refusal. NIOSSL calls the callback only when BoringSSL has a chain to verify, so a
    ///   handshake that BoringSSL fails by itself is not reported: no certificate when one is required, no
    ///   common version or cipher suite, a certificate message over its size limit, a client that leaves early,
    ///   or a CertificateVerify that fails after the chain was trusted.
    public func verificationCallback(
        onRefusal: (@Sendable (PinningConnectionError) -> Void)? = nil
    ) -> @Sendable ([NIOSSLCertificate], EventLoopPromise<NIOSSLVerificationResultWithMetadata>) -> Void {
        let server = self
        return { certificates, promise in
            let verdict = HandshakeVerdict()
            let decide = PeerVerification.callback(
                verdict: verdict,
                immediate: { presented in server.immediateClientDecision(presented, recordsSession: false) },
                handover: server.handover,
                decision: { presented in await server.decideClient(presented, recordsSession: false) }
            )
            guard let onRefusal else {
                decide(certificates, promise)
                return
            }
            let decided = promise.futureResult.eventLoop.makePromise(of: NIOSSLVerificationResultWithMetadata.self)
            decided.futureResult.whenComplete { result in
                if let refusal = verdict.refusal(host: nil) { onRefusal(refusal) }
                promise.completeWith(result)
            }
            decide(certificates, decided)
        }
    }

    /// Adds the mTLS handlers to a child channel's pipeline; returns the handshake outcome (the client).
    @discardableResult
    public func addHandlers(to pipeline: ChannelPipeline.SynchronousOperations) throws -> EventLoopFuture<PinnedHandshake> {
        let (tls, pinning) = try self.makeServerTLSHandlers()
        try pipeline.addHandlers(PinnedTLSClient.alertObservingHandlers(tls: tls, pinning: pinning, role: .server))
        guard let handshake = pinning.handshake else {
            throw PinningConnectionError(code: .handshakeFailed, host: nil, message: "the pinning handler was not added")
        }
        return handshake
    }
}

extension TLSConfiguration {
    /// A server configuration that requires a client certificate from one of `clientCertificateAuthorities`:
    /// `.noHostnameVerification` (VERIFY_PEER | FAIL_IF_NO_PEER_CERT), the CAs as trust roots and advertised
    /// (`sendCANameList`), TLS 1.2 or later. Use it with a handler whose custom verification callback applies
    /// the real policy, as ``MutualTLSServer`` does.
    ///
    /// - Throws: ``TLSIdentityError`` when `clientCertificateAuthorities` is empty or a CA cannot be converted.
    public static func makeMutualTLSServerConfiguration(
        identity: TLSIdentity,
        clientCertificateAuthorities: [Certificate]
    ) throws -> TLSConfiguration {
        guard !clientCertificateAuthorities.isEmpty else {
            throw TLSIdentityError(.noClientCA, origin: "clientCertificateAuthorities")
        }
        var authorities: [NIOSSLCertificate] = []
        for (index, authority) in clientCertificateAuthorities.enumerated() {
            do {
                authorities.append(try NIOSSLCertificate(bytes: authority.derBytes, format: .der))
            } catch {
                throw TLSIdentityError(
                    .unusableCertificate(index: index + 1), origin: "clientCertificateAuthorities", underlying: error)
            }
        }
        var configuration = TLSConfiguration.makeServerConfigurationWithMTLS(
            certificateChain: identity.certificateSources,
            privateKey: identity.privateKeySource,
            trustRoots: .certificates(authorities)
        )
        configuration.certificateVerification = .noHostnameVerification
        configuration.sendCANameList = true
        configuration.minimumTLSVersion = .tlsv12
        // BoringSSL's default would not let clients sign with Ed25519 or P-521 keys.
        configuration.verifySignatureAlgorithms = TLSConfiguration.pinningAcceptedSignatureAlgorithms
        return configuration
    }
}

/// A mutual-TLS server's shared context and the chains its policy trusted, by leaf certificate.
private final class ServerSessions: Sendable {
    let context: NIOSSLContext
    // The order is a ring buffer: once full, every new client drops the oldest in O(1).
    private let trusted = NIOLockedValueBox<(chains: [[UInt8]: [Certificate]], order: CircularBuffer<[UInt8]>)>(([:], []))

    init(context: NIOSSLContext) {
        self.context = context
    }

    /// Remembers the chain presented with `leaf` at a trusted full handshake.
    func record(_ chain: [Certificate], for leaf: Certificate) {
        let key = leaf.derBytes
        self.trusted.withLockedValue { state in
            if state.chains.updateValue(chain, forKey: key) == nil {
                state.order.append(key)
            }
            if state.order.count > MutualTLSServer.maximumRecordedClients {
                state.chains[state.order.removeFirst()] = nil
            }
        }
    }

    /// The chain recorded for exactly this leaf certificate, if any.
    func recordedChain(for leaf: Certificate) -> [Certificate]? {
        self.recordedChain(forDER: leaf.derBytes)
    }

    /// The chain recorded for the leaf certificate with exactly these DER bytes, if any.
    func recordedChain(forDER leaf: [UInt8]) -> [Certificate]? {
        self.trusted.withLockedValue { $0.chains[leaf] }
    }
}
