public import Pinning
import X509

/// AFNetworking's challenge handling for NIO connections: the policy for server trust and the client identity
/// for client-certificate requests, each only for the hosts it is configured for, with per-client and
/// per-request overrides.
///
/// <!-- snippet: given(pins: [Pin], deviceIdentity: TLSIdentity)
/// import Pinning
/// -->
/// ```swift
/// var handler = ChallengeHandler(
///     policy: SecurityPolicy(pinningMode: .publicKey, pins: pins), policyHosts: .only(["api.example.com"]),
///     identity: deviceIdentity, identityHosts: .only(["api.example.com"])
/// )
/// handler.override = { challenge in
///     challenge.protectionSpace.host == "legacy.example.com" ? .cancelAuthenticationChallenge : nil
/// }
/// ```
///
/// The default answers:
/// - Server trust, host in ``policyHosts``: the policy evaluates the chain (with the client's anchors);
///   `useCredential(.serverTrust)` when it trusts it, `cancelAuthenticationChallenge` otherwise (as
///   AFURLSessionManager does).
/// - Server trust, any other host: `performDefaultHandling`: the chain must validate against the platform
///   roots with the name checked. Never "trust anything".
/// - Client certificate, host in ``identityHosts`` and an identity configured: `useCredential(.clientIdentity)`.
/// - Client certificate, any other host: `performDefaultHandling` (no certificate is sent).
///
/// See ``AuthenticationChallengeDisposition`` for how every answer maps onto the connection.
public struct ChallengeHandler: Sendable {
    /// Which hosts a setting applies to.
    public enum Hosts: Sendable, Hashable {
        /// Every host.
        case all
        /// Only these hosts (exact names or IP addresses, case-insensitive).
        case only(Set<String>)

        /// Whether `host` is covered.
        public func contains(_ host: String) -> Bool {
            switch self {
            case .all: return true
            case .only(let hosts): return hosts.contains { $0.lowercased() == host.lowercased() }
            }
        }
    }

    /// The policy applied to server trust for ``policyHosts``.
    public var policy: any ServerTrustEvaluating
    /// The hosts the policy applies to; others get default handling.
    public var policyHosts: Hosts
    /// The identity presented to client-certificate challenges of ``identityHosts``.
    public var identity: TLSIdentity?
    /// The hosts the identity is presented to; others get no client certificate.
    public var identityHosts: Hosts
    /// The per-client override (AFNetworking's `sessionDidReceiveAuthenticationChallenge` block); nil answers
    /// fall through to the default.
    public var override: AuthenticationChallengeOverride?

    /// A handler.
    ///
    /// - Parameters:
    ///   - policy: The server-trust policy for `policyHosts`.
    ///   - policyHosts: Where the policy applies (default: every host).
    ///   - identity: A client identity.
    ///   - identityHosts: Where the identity is presented (default: nowhere; name the hosts, so a client
    ///     certificate never goes to a host it was not meant for).
    ///   - override: The per-client override.
    public init(
        policy: any ServerTrustEvaluating = SecurityPolicy.default,
        policyHosts: Hosts = .all,
        identity: TLSIdentity? = nil,
        identityHosts: Hosts = .only([]),
        override: AuthenticationChallengeOverride? = nil
    ) {
        self.policy = policy
        self.policyHosts = policyHosts
        self.identity = identity
        self.identityHosts = identityHosts
        self.override = override
    }

    /// The answer: the per-request override, else the per-client override, else ``defaultDisposition(for:)``.
    public func disposition(
        for challenge: AuthenticationChallenge,
        requestOverride: AuthenticationChallengeOverride? = nil
    ) async -> AuthenticationChallengeDisposition {
        if let requestOverride, let answer = await requestOverride(challenge) { return answer }
        if let override = self.override, let answer = await override(challenge) { return answer }
        return await self.defaultDisposition(for: challenge)
    }

    /// The default answer (see the type's documentation).
    public func defaultDisposition(for challenge: AuthenticationChallenge) async -> AuthenticationChallengeDisposition {
        let space = challenge.protectionSpace
        if space.authenticationMethod == .clientCertificate {
            if let identity = self.identity, self.identityHosts.contains(space.host) {
                return .useCredential(.clientIdentity(identity))
            }
            return .performDefaultHandling
        }
        guard self.policyHosts.contains(space.host) else { return .performDefaultHandling }
        guard let trust = challenge.serverTrust else { return .cancelAuthenticationChallenge }
        if case .trusted = await self.policy.evaluate(trust, forDomain: space.host) {
            return .useCredential(.serverTrust)
        }
        return .cancelAuthenticationChallenge
    }

    /// The evaluation whose verdict a server-trust answer stands on: the policy for ``policyHosts``, default
    /// validation (platform roots only, name checked, no pins) for other hosts.
    public func applicableEvaluation(for trust: ServerTrust, host: String) async -> TrustEvaluation {
        if self.policyHosts.contains(host) {
            return await self.policy.evaluate(trust, forDomain: host)
        }
        return await Self.defaultEvaluation(trust, host: host)
    }

    /// What `performDefaultHandling` means for server trust: the system's validation, that is the platform
    /// roots (the client's custom anchors belong to its policy, so they are dropped), the name checked, no pins.
    public static func defaultEvaluation(_ trust: ServerTrust, host: String) async -> TrustEvaluation {
        var system = trust
        system.anchors = []
        system.anchorsOnly = false
        return await SecurityPolicy.default.evaluate(system, forDomain: host)
    }

    /// Maps a server-trust answer onto the connection (the table in ``AuthenticationChallengeDisposition``).
    func resolveServerTrust(
        _ disposition: AuthenticationChallengeDisposition,
        trust: ServerTrust,
        host: String
    ) async -> PeerDecision {
        switch disposition {
        case .useCredential(.serverTrust):
            // Never a bypass: "use the trust" stands on the applicable evaluation.
            return .evaluation(await self.applicableEvaluation(for: trust, host: host))
        case .useCredential(.clientIdentity):
            return .refused(PinningConnectionError(code: .invalidCredential, host: host, message: "a client identity is no answer to a server-trust challenge; refused"))
        case .performDefaultHandling:
            return .evaluation(await Self.defaultEvaluation(trust, host: host))
        case .cancelAuthenticationChallenge:
            // Keep the reason when the applicable evaluation refused too (the default handler cancels exactly
            // then), so the caller sees why, not just "cancelled".
            var error = PinningConnectionError(code: .challengeCancelled, host: host, message: "the server-trust challenge was cancelled")
            if case .untrusted(let failure) = await self.applicableEvaluation(for: trust, host: host) {
                error.trustFailure = failure
                error.message += ": \(failure.description)"
            }
            return .refused(error)
        case .rejectProtectionSpace:
            return .refused(PinningConnectionError(code: .protectionSpaceRejected, host: host, message: "the server-trust protection space was rejected; there is no other to try"))
        }
    }

    /// Maps a client-certificate answer onto the connection: the identity to configure, or a refusal.
    func resolveClientCertificate(
        _ disposition: AuthenticationChallengeDisposition,
        host: String
    ) throws(PinningConnectionError) -> TLSIdentity? {
        switch disposition {
        case .useCredential(.clientIdentity(let identity)):
            return identity
        case .useCredential(.serverTrust):
            throw PinningConnectionError(code: .invalidCredential, host: host, message: "server trust is no answer to a client-certificate challenge; not connecting")
        case .performDefaultHandling, .rejectProtectionSpace:
            return nil
        case .cancelAuthenticationChallenge:
            throw PinningConnectionError(code: .challengeCancelled, host: host, message: "the client-certificate challenge was cancelled; not connecting")
        }
    }
}
