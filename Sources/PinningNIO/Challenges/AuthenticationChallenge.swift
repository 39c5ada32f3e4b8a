public import Pinning

/// One authentication challenge, as AFNetworking's session delegate receives them: a protection space and,
/// for server trust, the chain the server presented.
public struct AuthenticationChallenge: Sendable {
    /// Host, port and what is asked.
    public var protectionSpace: ProtectionSpace
    /// For ``ProtectionSpace/AuthenticationMethod/serverTrust``: the presented chain (leaf first) with the
    /// anchors and platform roots the client was configured with. Nil for client-certificate challenges.
    public var serverTrust: ServerTrust?
    /// How many times this challenge was asked on this connection (always 0: TLS asks once).
    public var previousFailureCount: Int { 0 }

    /// A challenge.
    public init(protectionSpace: ProtectionSpace, serverTrust: ServerTrust? = nil) {
        self.protectionSpace = protectionSpace
        self.serverTrust = serverTrust
    }
}

/// What a challenge handler answers with, with a credential (`NSURLCredential` for TLS).
public enum AuthenticationCredential: Sendable {
    /// For a server-trust challenge: "trust it". This is NOT a bypass: the connection is accepted only if the
    /// evaluation that applies to the host (the policy for configured hosts, default validation for others)
    /// trusted the chain. `NSURLCredential(forTrust:)` after `evaluateServerTrust:` succeeded.
    case serverTrust
    /// For a client-certificate challenge: present this identity.
    case clientIdentity(TLSIdentity)
}

/// The four answers to a challenge (`NSURLSessionAuthChallengeDisposition`).
///
/// How each maps onto a NIO connection:
///
/// | Disposition | Server trust (verification callback) | Client certificate (TLS configuration) |
/// |---|---|---|
/// | `useCredential(.serverTrust)` | accepted only if the applicable evaluation trusted the chain; otherwise refused with its ``/Pinning/TrustFailure`` (``PinningConnectionError/Code/untrusted``) | refused: ``PinningConnectionError/Code/invalidCredential`` |
/// | `useCredential(.clientIdentity(id))` | refused: ``PinningConnectionError/Code/invalidCredential`` | `id` is this connection's client certificate and key |
/// | `performDefaultHandling` | default validation: the platform roots (no custom anchors, no pins), host name checked; refused with its ``/Pinning/TrustFailure`` when it fails | no client certificate (a server that requires one refuses the handshake) |
/// | `cancelAuthenticationChallenge` | refused: ``PinningConnectionError/Code/challengeCancelled``, carrying the applicable evaluation's ``/Pinning/TrustFailure`` when that refused too (which is when the default handler cancels) | no connection is attempted: ``PinningConnectionError/Code/challengeCancelled`` |
/// | `rejectProtectionSpace` | refused: ``PinningConnectionError/Code/protectionSpaceRejected`` (there is no other space to try) | no client certificate, as URLSession continues without one |
///
/// Every path fails closed: no answer makes a chain trusted that the applicable evaluation refused.
public enum AuthenticationChallengeDisposition: Sendable {
    /// Use the credential (`NSURLSessionAuthChallengeUseCredential`).
    case useCredential(AuthenticationCredential)
    /// Do what the system would do (`NSURLSessionAuthChallengePerformDefaultHandling`).
    case performDefaultHandling
    /// Cancel: the connection fails (`NSURLSessionAuthChallengeCancelAuthenticationChallenge`).
    case cancelAuthenticationChallenge
    /// Reject this protection space (`NSURLSessionAuthChallengeRejectProtectionSpace`).
    case rejectProtectionSpace
}

/// An override of the default challenge handling: return a disposition to decide, or nil to let the next level
/// decide (per-request override, then per-client override, then ``ChallengeHandler``'s default).
public typealias AuthenticationChallengeOverride =
    @Sendable (AuthenticationChallenge) async -> AuthenticationChallengeDisposition?
