public import NIOCore
import NIOConcurrencyHelpers
import NIOSSL
import NIOTLS
public import Pinning
import X509

/// What the verification callback decided on one connection. Shared between the NIOSSL callback (which
/// completes off the event loop) and the ``PinningHandshakeHandler`` of the same channel.
final class HandshakeVerdict: Sendable {
    enum State: Sendable {
        case pending
        case trusted(TrustedChain)
        case untrusted(TrustFailure)
        case unreadable(String)
        /// Refused for a reason that is not the policy's (an authentication challenge was cancelled or its
        /// protection space rejected).
        case refused(PinningConnectionError)
    }

    private let state = NIOLockedValueBox<State>(.pending)

    var current: State { self.state.withLockedValue { $0 } }

    func record(_ state: State) {
        self.state.withLockedValue { $0 = state }
    }
}

/// What a verification decided: the policy's evaluation, or a refusal with its own error.
enum PeerDecision: Sendable {
    case evaluation(TrustEvaluation)
    case refused(PinningConnectionError)
}

/// Applies a trust decision to the chain a peer presented, records it, and answers NIOSSL.
enum PeerVerification {
    /// The callback for decisions that may refuse with their own error (challenges).
    static func callback(
        verdict: HandshakeVerdict,
        decision: @escaping @Sendable ([Certificate]) async -> PeerDecision
    ) -> NIOSSLCustomVerificationCallbackWithMetadata {
        { certificates, promise in
            guard let presented = Self.presented(certificates, verdict: verdict) else {
                promise.succeed(.failed)
                return
            }
            promise.completeWithTask {
                switch await decision(presented) {
                case .evaluation(let evaluation):
                    return Self.conclude(evaluation, verdict: verdict)
                case .refused(let error):
                    verdict.record(.refused(error))
                    return .failed
                }
            }
        }
    }

    /// The callback NIOSSL calls on every handshake. Any error or a refusal completes with `.failed` (fail
    /// closed); the reason is recorded in `verdict`.
    ///
    /// `immediate` may answer on the event loop without starting a task: an evaluator's remembered verdict for
    /// this very chain (``ServerTrustEvaluating/immediateEvaluation(_:forDomain:)``, a cache hit). When it
    /// answers nil, `decide` runs in a task as usual.
    static func callback(
        verdict: HandshakeVerdict,
        immediate: (@Sendable ([Certificate]) -> TrustEvaluation?)? = nil,
        decide: @escaping @Sendable ([Certificate]) async -> TrustEvaluation
    ) -> NIOSSLCustomVerificationCallbackWithMetadata {
        { certificates, promise in
            guard let presented = Self.presented(certificates, verdict: verdict) else {
                promise.succeed(.failed)
                return
            }
            if let evaluation = immediate?(presented) {
                promise.succeed(Self.conclude(evaluation, verdict: verdict))
                return
            }
            promise.completeWithTask {
                Self.conclude(await decide(presented), verdict: verdict)
            }
        }
    }

    /// The presented chain parsed for the evaluator, or nil (recorded as unreadable) when the leaf does not parse.
    static func presented(_ certificates: [NIOSSLCertificate], verdict: HandshakeVerdict) -> [Certificate]? {
        do {
            let der = try certificates.map { try $0.toDERBytes() }
            return try ServerTrust.presentedCertificates(fromDER: der)
        } catch {
            verdict.record(.unreadable("\(error)"))
            return nil
        }
    }

    /// Records `evaluation` and turns it into NIOSSL's answer: the validated path as metadata when trusted,
    /// `.failed` otherwise.
    static func conclude(_ evaluation: TrustEvaluation, verdict: HandshakeVerdict) -> NIOSSLVerificationResultWithMetadata {
        switch evaluation {
        case .untrusted(let failure):
            verdict.record(.untrusted(failure))
            return .failed
        case .trusted(let chain):
            let path = chain.path.isEmpty ? chain.presentedChain : chain.path
            do {
                let nio = try path.map { try NIOSSLCertificate(bytes: $0.derBytes, format: .der) }
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
/// ``PinningConnectionError`` carrying the policy's ``TrustFailure``, refuses a handshake that completed
/// without the policy having run on this connection, and keeps the authenticated peer for later handlers.
///
/// Errors after the handshake pass through unchanged.
public final class PinningHandshakeHandler: ChannelInboundHandler, RemovableChannelHandler {
    /// Passes every inbound message through unchanged.
    public typealias InboundIn = NIOAny
    /// Passes every inbound message through unchanged.
    public typealias InboundOut = NIOAny

    private let verdict: HandshakeVerdict
    private let host: String?
    private var promise: EventLoopPromise<PinnedHandshake>?
    private var result: Result<PinnedHandshake, PinningConnectionError>?

    init(verdict: HandshakeVerdict, host: String?) {
        self.verdict = verdict
        self.host = host
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

    /// On `handshakeCompleted`, succeeds only if our verification trusted this very connection; a handshake that
    /// completed without it (a resumed session) is refused.
    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tlsEvent = event as? TLSUserEvent, case .handshakeCompleted = tlsEvent, self.result == nil {
            switch self.verdict.current {
            case .trusted(let chain):
                let path = chain.path.isEmpty ? chain.presentedChain : chain.path
                if let peer = AuthenticatedPeer(chain: path) {
                    self.finish(.success(PinnedHandshake(host: self.host, trustedChain: chain, peer: peer)))
                    context.fireUserInboundEventTriggered(event)
                    return
                }
                self.refuse(context: context, self.mapped(nil))
            default:
                // The handshake completed but our callback did not trust this connection (a resumed session
                // skips certificate verification): never treat that as trusted.
                self.refuse(context: context, self.mapped(nil))
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Replaces NIOSSL's bare verification error with a ``PinningConnectionError`` carrying the ``TrustFailure``.
    public func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard self.result == nil else {
            context.fireErrorCaught(error)
            return
        }
        let mapped = self.mapped(error)
        self.finish(.failure(mapped))
        context.fireErrorCaught(mapped)
    }

    /// A channel that closes before the handshake completed fails the handshake result.
    public func channelInactive(context: ChannelHandlerContext) {
        if self.result == nil {
            var error = self.mapped(nil)
            if error.code == .notEvaluated {
                error = PinningConnectionError(code: .connectionClosed, host: self.host, message: "the connection closed before the TLS handshake completed")
            }
            self.finish(.failure(error))
        }
        context.fireChannelInactive()
    }

    private func refuse(context: ChannelHandlerContext, _ error: PinningConnectionError) {
        self.finish(.failure(error))
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    /// The error to report: the recorded policy decision wins over whatever NIOSSL said.
    private func mapped(_ error: (any Error)?) -> PinningConnectionError {
        switch self.verdict.current {
        case .untrusted(let failure):
            var mapped = PinningConnectionError.untrusted(failure, host: self.host)
            mapped.underlying = error
            return mapped
        case .unreadable(let problem):
            return PinningConnectionError(code: .unreadablePeerCertificate, host: self.host, message: problem, underlying: error)
        case .refused(var refusal):
            refusal.underlying = refusal.underlying ?? error
            return refusal
        case .pending, .trusted:
            if let error {
                if let already = error as? PinningConnectionError { return already }
                return PinningConnectionError(code: .handshakeFailed, host: self.host, message: "the TLS handshake failed", underlying: error)
            }
            return PinningConnectionError(code: .notEvaluated, host: self.host, message: "the handshake completed without the trust policy being applied on this connection; refused")
        }
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
