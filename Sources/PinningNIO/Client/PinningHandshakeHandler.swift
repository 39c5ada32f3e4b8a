import NIOConcurrencyHelpers
public import NIOCore
import NIOSSL
import NIOTLS
public import Pinning
import SwiftASN1
import X509

/// What the verification callback decided on one connection. Shared between the NIOSSL callback (which
/// completes off the event loop) and the ``PinningHandshakeHandler`` of the same channel.
final class HandshakeVerdict: Sendable {
    enum State: Sendable {
        case pending
        /// The peer's chain arrived and is being judged (in a task): a close now is the peer leaving while it
        /// was judged, not before it presented anything.
        case deciding
        case trusted(TrustedChain)
        case untrusted(TrustFailure)
        case unreadable(String)
        /// Refused for a reason that is not the policy's (an authentication challenge was cancelled or its
        /// protection space rejected).
        case refused(PinningConnectionError)
    }

    private let state = NIOLockedValueBox<State>(.pending)
    /// The task deciding this connection's peer, while it runs; `abandoned` once the connection went away.
    private let evaluation = NIOLockedValueBox<(task: Task<Void, Never>?, abandoned: Bool)>((nil, false))

    var current: State { self.state.withLockedValue { $0 } }

    /// Records that `task` is deciding this connection (``State/deciding``) and keeps it, so ``abandon()`` can
    /// cancel it. A task started after the connection went away is cancelled at once.
    func deciding(by task: Task<Void, Never>) {
        self.record(.deciding)
        let abandoned = self.evaluation.withLockedValue { evaluation in
            evaluation.task = task
            return evaluation.abandoned
        }
        if abandoned { task.cancel() }
    }

    /// The connection went away before its peer was decided: cancel the decision. Path building checks for
    /// cancellation at every issuer look-up and signature check (``TrustLimits``), so the evaluation stops there
    /// and refuses, and no CPU is spent on a peer that has gone (issue 27). Only a decision that runs in a task
    /// can be abandoned (a user's evaluator, a CRL fetch, a `clientCheck`): the built-in evaluators decide within
    /// NIOSSL's callback, before the connection can go.
    func abandon() {
        let task = self.evaluation.withLockedValue { evaluation in
            evaluation.abandoned = true
            return evaluation.task
        }
        task?.cancel()
    }

    func record(_ state: State) {
        self.state.withLockedValue { $0 = state }
    }

    /// The recorded refusal as an error naming `host`, or nil while pending or trusted.
    func refusal(host: String?) -> PinningConnectionError? {
        switch self.current {
        case .pending, .deciding, .trusted:
            return nil
        case .untrusted(let failure):
            return .untrusted(failure, host: host)
        case .unreadable(let problem):
            return PinningConnectionError(code: .unreadablePeerCertificate, host: host, message: problem)
        case .refused(let refusal):
            return refusal
        }
    }
}

/// What a verification decided: the policy's evaluation, or a refusal with its own error.
enum PeerDecision: Sendable {
    case evaluation(TrustEvaluation)
    case refused(PinningConnectionError)
}

/// How a trusted path is handed to NIOSSL as its verification metadata (for frameworks that read
/// `nioSSL_peerValidatedCertificateChain`, as Vapor does): from certificates already in BoringSSL's form, the
/// presented ones NIOSSL gave the callback and `anchors` (a server's client CAs, converted once when the server
/// is made). Only a certificate in neither is converted from its DER.
///
/// Nothing of ours reads the metadata (the trusted chain is recorded in the ``HandshakeVerdict``), so clients
/// hand nothing over.
struct NIOSSLPathHandover: Sendable {
    /// Anchors in NIOSSL's form.
    let anchors: [Certificate: NIOSSLCertificate]

    /// `anchors` in both forms (a server's client CAs).
    init(anchors: [(Certificate, NIOSSLCertificate)]) {
        self.anchors = Dictionary(anchors, uniquingKeysWith: { first, _ in first })
    }

    /// `path` in NIOSSL's form; `presented` is the chain NIOSSL gave the callback.
    func certificates(for path: [Certificate], presented: PresentedChain) throws -> [NIOSSLCertificate] {
        try path.map { certificate in
            // Certificate's == compares the encoded bytes it was parsed from.
            if let index = presented.certificates.firstIndex(of: certificate) { return presented.nioCertificates[index] }
            if let anchor = self.anchors[certificate] { return anchor }
            return try NIOSSLCertificate(bytes: certificate.derBytes, format: .der)
        }
    }
}

/// The chain a peer presented, parsed for the evaluator, each certificate beside the form NIOSSL handed over.
struct PresentedChain: Sendable {
    /// Parsed (see ``ServerTrust/presentedCertificates(fromDER:)``; an unreadable intermediate is dropped),
    /// through the process's ``ParsedCertificateMemo``.
    let certificates: [Certificate]
    /// NIOSSL's form of each of ``certificates``, in the same order: what NIOSSL handed the callback, or the same
    /// DER's object remembered in the ``ParsedCertificateMemo`` when the callback hands paths over.
    let nioCertificates: [NIOSSLCertificate]
    /// The DER each of ``certificates`` was parsed from, in the same order; nil for one the
    /// ``ParsedCertificateMemo`` holds already with all the callback needs (so a trusted handshake re-stores nothing
    /// it already holds).
    let der: [[UInt8]?]
}

/// Applies a trust decision to the chain a peer presented, records it, and answers NIOSSL.
enum PeerVerification {
    /// The callback for decisions that may refuse with their own error (challenges, mutual-TLS servers).
    /// `immediate` and `handover` are as for ``callback(verdict:immediate:handover:decide:)``.
    static func callback(
        verdict: HandshakeVerdict,
        immediate: (@Sendable ([Certificate]) -> TrustEvaluation?)? = nil,
        handover: NIOSSLPathHandover? = nil,
        decision: @escaping @Sendable ([Certificate]) async -> PeerDecision
    ) -> NIOSSLCustomVerificationCallbackWithMetadata {
        { certificates, promise in
            guard let presented = Self.presented(certificates, verdict: verdict, keepsNIOSSLForm: handover != nil) else {
                promise.succeed(.failed)
                return
            }
            if let evaluation = immediate?(presented.certificates) {
                promise.succeed(Self.conclude(evaluation, verdict: verdict, presented: presented, handover: handover))
                return
            }
            let task = promise.completeWithTaskOnEventLoop {
                switch await decision(presented.certificates) {
                case .evaluation(let evaluation):
                    return Self.conclude(evaluation, verdict: verdict, presented: presented, handover: handover)
                case .refused(let error):
                    verdict.record(.refused(error))
                    return .failed
                }
            }
            // The task runs in a later tick of the loop (EventLoopTaskExecutor), so it is recorded before it starts.
            verdict.deciding(by: task)
        }
    }

    /// The callback NIOSSL calls on every handshake. Any error or a refusal completes with `.failed` (fail
    /// closed); the reason is recorded in `verdict`.
    ///
    /// `immediate` may answer on the event loop without starting a task: a verdict that needs nothing to wait for
    /// (a built-in evaluator's whole evaluation, bounded by its budget, issue 31; an evaluator's
    /// ``ServerTrustEvaluating/immediateEvaluation(_:forDomain:)``, a cache hit). When it answers nil, `decide`
    /// runs in a task as usual. Both answers are recorded and concluded alike
    /// (``conclude(_:verdict:presented:handover:)``).
    ///
    /// `handover`: how NIOSSL is given the validated path as its metadata; nil gives it none (clients: nothing
    /// reads it there).
    static func callback(
        verdict: HandshakeVerdict,
        immediate: (@Sendable ([Certificate]) -> TrustEvaluation?)? = nil,
        handover: NIOSSLPathHandover? = nil,
        decide: @escaping @Sendable ([Certificate]) async -> TrustEvaluation
    ) -> NIOSSLCustomVerificationCallbackWithMetadata {
        // A decision that never refuses with its own error: the general callback above.
        Self.callback(verdict: verdict, immediate: immediate, handover: handover) { presented in
            .evaluation(await decide(presented))
        }
    }

    /// The presented chain parsed for the evaluator, or nil (recorded as unreadable) when the leaf does not parse.
    /// `keepsNIOSSLForm` (a callback that hands paths over): a certificate the memo holds in NIOSSL's form is
    /// handed over in that form, and one it holds without is marked to gain it (see ``ParsedCertificateMemo``).
    static func presented(_ certificates: [NIOSSLCertificate], verdict: HandshakeVerdict, keepsNIOSSLForm: Bool = false) -> PresentedChain? {
        do {
            let der = try certificates.map { try $0.toDERBytes() }
            // `parse` is called once per certificate, in order, so `position` names the one being parsed and
            // `handed` and `parsedDER` stay beside the certificates that parsed. A certificate already in the memo
            // is not looked up twice (here, then again to be stored).
            var position = 0
            var handed: [NIOSSLCertificate] = []
            var parsedDER: [[UInt8]?] = []
            let parsed = try ServerTrust.presentedCertificates(fromDER: der) { bytes in
                defer { position += 1 }
                let remembered = ParsedCertificateMemo.shared.entry(derEncoded: bytes)
                let certificate = try remembered?.certificate ?? Certificate(derEncoded: bytes)
                if keepsNIOSSLForm, let nio = remembered?.nio {
                    // Made by NIOSSL from byte-for-byte this DER at the handshake that remembered it.
                    handed.append(nio)
                    parsedDER.append(nil)
                } else {
                    handed.append(certificates[position])
                    parsedDER.append(remembered == nil || keepsNIOSSLForm ? bytes : nil)
                }
                return certificate
            }
            return PresentedChain(certificates: parsed, nioCertificates: handed, der: parsedDER)
        } catch {
            verdict.record(.unreadable("\(error)"))
            return nil
        }
    }

    /// Records `evaluation` and turns it into NIOSSL's answer: verified when trusted (with the validated path as
    /// metadata when there is a `handover`), `.failed` otherwise. The presented certificates on a trusted path
    /// are remembered parsed (``ParsedCertificateMemo``); a refused chain's never are.
    static func conclude(
        _ evaluation: TrustEvaluation,
        verdict: HandshakeVerdict,
        presented: PresentedChain,
        handover: NIOSSLPathHandover?
    ) -> NIOSSLVerificationResultWithMetadata {
        switch evaluation {
        case .untrusted(let failure):
            verdict.record(.untrusted(failure))
            return .failed
        case .trusted(let chain):
            // Only the presented certificates on the trusted path: a trusted peer may present extra certificates of
            // its own making, and those should not fill the memo either.
            let trustedPath = chain.path
            // With a handover, each is remembered in NIOSSL's form too (the object the path below hands over).
            let fresh = presented.der.indices.compactMap { index -> (der: [UInt8], certificate: Certificate, nio: NIOSSLCertificate?)? in
                guard let der = presented.der[index], trustedPath.contains(presented.certificates[index]) else { return nil }
                return (der: der, certificate: presented.certificates[index], nio: handover == nil ? nil : presented.nioCertificates[index])
            }
            if !fresh.isEmpty { ParsedCertificateMemo.shared.remember(fresh) }
            guard let handover else {
                verdict.record(.trusted(chain))
                return .certificateVerified(VerificationMetadata(nil))
            }
            let path = trustedPath.isEmpty ? chain.presentedChain : trustedPath
            do {
                let nio = try handover.certificates(for: path, presented: presented)
                verdict.record(.trusted(chain))
                return .certificateVerified(VerificationMetadata(NIOSSL.ValidatedCertificateChain(nio)))
            } catch {
                verdict.record(.unreadable("the trusted chain cannot be handed to NIOSSL: \(error)"))
                return .failed
            }
        }
    }
}

/// The outcome of a pinned handshake.
public struct PinnedHandshake: Sendable {
    /// The name the policy checked (nil on a server, which checks no name).
    public var host: String?
    /// What the evaluator trusted, and on what basis.
    public var trustedChain: TrustedChain
    /// The authenticated peer's identity.
    public var peer: AuthenticatedPeer
}

/// Sits right after the NIOSSL handler: turns NIOSSL's bare verification failure into a
/// ``PinningConnectionError`` carrying the policy's ``/Pinning/TrustFailure``, refuses a handshake that completed
/// without the policy having run on this connection, and keeps the authenticated peer for later handlers.
///
/// Errors after the handshake pass through unchanged.
public final class PinningHandshakeHandler: ChannelDuplexHandler, RemovableChannelHandler {
    /// Passes every inbound message through unchanged.
    public typealias InboundIn = NIOAny
    /// Passes every inbound message through unchanged.
    public typealias InboundOut = NIOAny
    /// Passes every outbound message through unchanged (only `read` requests are held back, while a resumed
    /// session is re-checked).
    public typealias OutboundIn = NIOAny

    /// Re-derives the peer of a resumed session from the certificate the session carries and decides it again
    /// under the current policy (a ``MutualTLSServer`` supplies it; nil: a resumed session is refused).
    typealias ResumedSessionCheck = @Sendable (_ leaf: Certificate) async -> PeerDecision

    private let verdict: HandshakeVerdict
    private let host: String?
    private let resumedSessionCheck: ResumedSessionCheck?
    /// Answers a resumed session's re-check on the event loop when it can (a remembered verdict), from the DER of
    /// the certificate the session carries; nil: ask ``resumedSessionCheck``.
    typealias ImmediateResumedSessionCheck = @Sendable (_ leafDER: [UInt8]) -> PeerDecision?

    private let immediateResumedSessionCheck: ImmediateResumedSessionCheck?
    private var promise: EventLoopPromise<PinnedHandshake>?
    /// The observer of this connection's records, between the socket and NIOSSL, when one was added: the alerts it
    /// read go into the failure (``PinningConnectionError/receivedAlert``, ``PinningConnectionError/sentAlert``).
    var alertObserver: TLSAlertObserver?
    private var result: Result<PinnedHandshake, PinningConnectionError>?
    /// While a resumed session is re-checked: the handshake event, and what arrived after it in its order (reads,
    /// read-complete signals, other events such as the peer's half-closure), delivered only once the peer is trusted.
    private var held: (event: Any, following: [HeldInbound])?
    /// A `read` asked for while inbound calls were held, passed on once they are released.
    private var readHeldBack = false
    /// Set once this handler refused the connection (``refuse(context:_:)``) or its handshake failed
    /// (``errorCaught(context:error:)`` before a result): from then on nothing inbound is passed
    /// on and no read is asked for. Closing does not end the inbound flow at once: NIOSSL answers our close with
    /// close_notify and then waits (its `shutdownTimeout`, 5 s by default) for the peer's, decrypting and handing on
    /// whatever records the peer sends meanwhile. Without this, a peer refused after the TLS handshake completed
    /// (a resumed session refused by the re-check, one over ``maximumHeldInbound``, or a completed handshake
    /// without our verdict) could keep sending requests to the application's handlers, behind us in the same
    /// pipeline, for those seconds by never sending close_notify. Fail closed: a refused peer reaches nothing.
    private var refused = false

    /// The most inbound calls held behind a resumed session's re-check; one more closes the connection (fail
    /// closed), so a peer cannot make the server keep what it sends for as long as the check takes. While the
    /// check runs no read is passed on (``read(context:)``), so what arrives is what the read under way brought:
    /// NIOSSL hands on its plaintext once per read (one `channelRead` and one `channelReadComplete`, each read
    /// being at most NIO's 4 socket reads of up to 64 KiB), plus the peer's half-closure or another event. A
    /// peer, however much it sends, therefore makes 2 or 3 of them; 64 leaves room for handlers in front of this
    /// one that read on their own, and still bounds what is kept (32 reads, at most 8 MiB).
    static let maximumHeldInbound = 64

    /// One inbound call held behind a resumed session's re-check.
    private enum HeldInbound {
        case read(NIOAny)
        case readComplete
        case event(Any)
    }

    init(
        verdict: HandshakeVerdict,
        host: String?,
        immediateResumedSessionCheck: ImmediateResumedSessionCheck? = nil,
        resumedSessionCheck: ResumedSessionCheck? = nil
    ) {
        self.verdict = verdict
        self.host = host
        self.immediateResumedSessionCheck = immediateResumedSessionCheck
        self.resumedSessionCheck = resumedSessionCheck
    }

    /// Completes when the handshake succeeded and the peer is trusted; fails with a
    /// ``PinningConnectionError`` otherwise. Available once the handler is in a pipeline.
    public var handshake: EventLoopFuture<PinnedHandshake>? { self.promise?.futureResult }

    /// The peer, once the handshake completed with a trusted peer.
    public var authenticatedPeer: AuthenticatedPeer? {
        if case .success(let handshake) = self.result { return handshake.peer }
        return nil
    }

    /// Starts tracking the handshake of this channel.
    public func handlerAdded(context: ChannelHandlerContext) {
        self.promise = context.eventLoop.makePromise(of: PinnedHandshake.self)
    }

    /// Fails the pending handshake result if the handler leaves before the handshake finished.
    public func handlerRemoved(context: ChannelHandlerContext) {
        self.finish(.failure(PinningConnectionError(code: .connectionClosed, host: self.host, message: "the pinning handler was removed before the handshake completed")))
    }

    /// On `handshakeCompleted`, succeeds only if our verification trusted this very connection. A handshake that
    /// completed without it (a resumed session: BoringSSL skips certificate verification) is refused, unless a
    /// resumed-session check is configured (mutual-TLS servers): then the peer certificate the session carries
    /// is decided again, under the current policy, before anything the peer sent is passed on.
    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Refused: the application has had the failure (errorCaught) and gets `channelInactive`; no event that
        // follows (a half-closure, a TLS event after the refusal) is passed on. See ``refused``.
        if self.refused { return }
        if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted = tlsEvent, self.result == nil, self.held == nil {
            self.alertObserver?.handshakeCompleted()
            switch self.verdict.current {
            case .trusted:
                self.conclude(context: context, event: event)
            case .pending:
                guard let check = self.resumedSessionCheck else {
                    // Our callback did not run on this connection and nothing can re-check it: never trusted.
                    self.refuse(context: context, self.mapped(nil))
                    return
                }
                self.recheckResumedSession(context: context, event: event, check: check)
            default:
                self.refuse(context: context, self.mapped(nil))
            }
            return
        }
        if self.held != nil {
            // Events that follow the handshake wait behind it, in order with the reads (an `inputClosed` dropped
            // here would leave the application waiting for the peer's end for ever).
            self.hold(.event(event), context: context)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Holds reads while a resumed session is re-checked; drops them once the connection is refused.
    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if self.refused {
            // What a refused peer sent while the connection closes is dropped, never passed on. See ``refused``.
            return
        }
        if self.held != nil {
            self.hold(.read(data), context: context)
            return
        }
        context.fireChannelRead(data)
    }

    /// Holds the read-complete signal while a resumed session is re-checked; drops it once the connection is refused.
    public func channelReadComplete(context: ChannelHandlerContext) {
        if self.refused { return }
        if self.held != nil {
            self.hold(.readComplete, context: context)
            return
        }
        context.fireChannelReadComplete()
    }

    /// Holds back reading while a resumed session is re-checked: the peer's bytes wait in the socket (TCP's flow
    /// control slows the peer), not in memory, until the peer is trusted.
    public func read(context: ChannelHandlerContext) {
        if self.refused {
            // Nothing a refused peer sends will be passed on, so none is asked for: the close (NIOSSL's
            // `shutdownTimeout` at the latest) ends the connection. See ``refused``.
            return
        }
        if self.held != nil {
            self.readHeldBack = true
            return
        }
        context.read()
    }

    /// Keeps `inbound` behind the re-check, or, past ``maximumHeldInbound``, drops everything held and closes.
    private func hold(_ inbound: HeldInbound, context: ChannelHandlerContext) {
        guard let count = self.held?.following.count else { return }
        guard count < Self.maximumHeldInbound else {
            self.held = nil
            self.refuse(
                context: context,
                PinningConnectionError(
                    code: .connectionClosed, host: self.host,
                    message: "the peer sent more than \(Self.maximumHeldInbound) reads and events while its resumed session was being checked again; closed"))
            return
        }
        self.held?.following.append(inbound)
    }

    /// Succeeds with the recorded trusted chain and passes the handshake event on; refuses otherwise.
    private func conclude(context: ChannelHandlerContext, event: Any) {
        guard case .trusted(let chain) = self.verdict.current else {
            self.refuse(context: context, self.mapped(nil))
            return
        }
        let path = chain.path.isEmpty ? chain.presentedChain : chain.path
        guard let peer = AuthenticatedPeer(chain: path) else {
            self.refuse(context: context, self.mapped(nil))
            return
        }
        self.finish(.success(PinnedHandshake(host: self.host, trustedChain: chain, peer: peer)))
        context.fireUserInboundEventTriggered(event)
    }

    /// A resumed session: no verification callback ran. Takes the client certificate the session carries (bound
    /// to the session by the full handshake that created it), decides it again with `check`, and only then
    /// lets the handshake event and the peer's data through.
    private func recheckResumedSession(context: ChannelHandlerContext, event: Any, check: @escaping ResumedSessionCheck) {
        let leafDER: [UInt8]
        let leaf: Certificate
        do {
            guard let certificate = try context.pipeline.syncOperations.nioSSL_peerCertificate() else {
                self.refuse(context: context, PinningConnectionError(code: .notEvaluated, host: self.host, message: "a resumed session carries no peer certificate; refused"))
                return
            }
            leafDER = try certificate.toDERBytes()
            self.held = (event, [])
            if let decision = self.immediateResumedSessionCheck?(leafDER) {
                // Answered from a remembered verdict for exactly these bytes: no parse, no task.
                Self.record(decision, in: self.verdict)
                self.releaseHeld(context: context)
                return
            }
            guard let parsed = try ServerTrust.presentedCertificates(fromDER: [leafDER]).first else {
                throw PinningConnectionError(code: .unreadablePeerCertificate, host: self.host, message: "the certificate of a resumed session cannot be read")
            }
            leaf = parsed
        } catch {
            self.held = nil
            self.refuse(context: context, PinningConnectionError(code: .unreadablePeerCertificate, host: self.host, message: "the certificate of a resumed session cannot be read", underlying: error))
            return
        }
        let decided = context.eventLoop.makePromise(of: PeerDecision.self)
        decided.completeWithTaskOnEventLoop { await check(leaf) }
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        let verdict = self.verdict
        decided.futureResult.whenSuccess { decision in
            let (handler, context) = bound.value
            Self.record(decision, in: verdict)
            handler.releaseHeld(context: context)
        }
    }

    /// Records a resumed session's decision as the handshake's verdict. (Unlike ``PeerVerification/conclude(_:verdict:presented:handover:)``
    /// nothing is handed to NIOSSL: its handshake is over, so the path is not converted for its metadata.)
    private static func record(_ decision: PeerDecision, in verdict: HandshakeVerdict) {
        switch decision {
        case .evaluation(.trusted(let chain)):
            verdict.record(.trusted(chain))
        case .evaluation(.untrusted(let failure)):
            verdict.record(.untrusted(failure))
        case .refused(let error):
            verdict.record(.refused(error))
        }
    }

    /// After a resumed session's re-check: trusted, deliver what was held; refused, drop it and close.
    private func releaseHeld(context: ChannelHandlerContext) {
        guard let held = self.held else { return }
        self.held = nil
        // Already failed (an error or a close while the check ran): nothing is delivered.
        guard self.result == nil else { return }
        guard case .trusted = self.verdict.current else {
            self.refuse(context: context, self.mapped(nil))
            return
        }
        self.conclude(context: context, event: held.event)
        for inbound in held.following {
            switch inbound {
            case .read(let data): context.fireChannelRead(data)
            case .readComplete: context.fireChannelReadComplete()
            case .event(let event): context.fireUserInboundEventTriggered(event)
            }
        }
        if self.readHeldBack {
            self.readHeldBack = false
            context.read()
        }
    }

    /// Replaces NIOSSL's bare verification error with a ``PinningConnectionError`` carrying the ``/Pinning/TrustFailure``.
    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard self.result == nil else {
            context.fireErrorCaught(error)
            return
        }
        // The handshake has failed: as after a refusal, nothing inbound is passed on from here (what was held
        // behind a re-check included), whatever NIOSSL still hands on while the connection closes. See ``refused``.
        self.refused = true
        self.held = nil
        self.readHeldBack = false
        let mapped = self.mapped(error)
        self.finish(.failure(mapped))
        context.fireErrorCaught(mapped)
    }

    /// A channel that closes before the handshake completed fails the handshake result.
    public func channelInactive(context: ChannelHandlerContext) {
        self.held = nil
        // The peer has gone: a decision still running for it is abandoned.
        self.verdict.abandon()
        if self.result == nil {
            var error = self.mapped(nil)
            if error.code == .notEvaluated {
                error = PinningConnectionError(code: .connectionClosed, host: self.host, message: "the connection closed before the TLS handshake completed")
            }
            self.finish(.failure(error))
        }
        context.fireChannelInactive()
    }

    /// Fails the handshake, tells the application, and closes; from here on nothing inbound is passed on.
    private func refuse(context: ChannelHandlerContext, _ error: PinningConnectionError) {
        self.refused = true
        self.held = nil
        self.readHeldBack = false
        self.finish(.failure(error))
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    /// What a connection fails with when it closes while the peer's chain is being judged (NIOSSL reports the close
    /// as a handshake failure, "EOF during handshake"): said apart, since such a peer did present a chain, and a
    /// server's log should say that it left (or was cut off) while judged rather than blame the TLS library.
    package static let closedWhileJudging = "the connection closed while the peer's certificate chain was being judged"

    /// The error to report, with the alerts read on the connection.
    private func mapped(_ error: (any Error)?) -> PinningConnectionError {
        let alerts = self.alertObserver?.alerts
        return self.mapped(error, alerts: alerts).with(alerts)
    }

    /// The error to report: the recorded policy decision wins over whatever NIOSSL said.
    private func mapped(_ error: (any Error)?, alerts: TLSAlertsSeen?) -> PinningConnectionError {
        if var refusal = self.verdict.refusal(host: self.host) {
            refusal.underlying = refusal.underlying ?? error
            return refusal
        }
        if case .deciding = self.verdict.current {
            // BoringSSL waits for the verification callback, so nothing but the connection closing can end the
            // handshake now.
            return PinningConnectionError(code: .connectionClosed, host: self.host, message: Self.closedWhileJudging, underlying: error)
        }
        if let error {
            if let already = error as? PinningConnectionError { return already }
            return PinningConnectionError(code: .handshakeFailed, host: self.host, message: ConnectionFailureWords.tlsProblem(error, alerts: alerts) ?? "the TLS handshake failed", underlying: error)
        }
        return PinningConnectionError(code: .notEvaluated, host: self.host, message: "the handshake completed without the trust policy being applied on this connection; refused")
    }

    private func finish(_ result: Result<PinnedHandshake, PinningConnectionError>) {
        guard self.result == nil else { return }
        self.result = result
        switch result {
        case .success(let handshake): self.promise?.succeed(handshake)
        case .failure(let error): self.promise?.fail(error)
        }
    }
}

@available(*, unavailable)
extension PinningHandshakeHandler: Sendable {}

extension ChannelPipeline.SynchronousOperations {
    /// The peer authenticated by this channel's pinned handshake, nil before (or without) one.
    public func pinningAuthenticatedPeer() throws -> AuthenticatedPeer? {
        try self.handler(type: PinningHandshakeHandler.self).authenticatedPeer
    }
}

extension Channel {
    /// The peer authenticated by this channel's pinned handshake (an mTLS server's client), nil before the
    /// handshake completed.
    public func pinningAuthenticatedPeer() -> EventLoopFuture<AuthenticatedPeer?> {
        self.eventLoop.submit {
            try self.pipeline.syncOperations.pinningAuthenticatedPeer()
        }
    }
}
