public import Pinning
public import X509

extension MutualTLSServer {
    /// How each client's chain is judged. Either rule uses the client CAs as the only anchors, the clientAuth
    /// purpose and the CRLs in force (``Configuration/revocation``); ``Configuration/clientCheck`` runs after
    /// either.
    public enum ClientRule: Sendable {
        /// Basic X.509 to the client CAs. When `pins` is not empty some certificate on the validated path must
        /// carry one of them (an allow-list of client SPKI pins). When `cache` is given, trusted verdicts are
        /// remembered (a device reconnecting, a resumed session): a hit never changes a verdict (see
        /// ``/Pinning/EvaluationCache``): the key holds the chain, the client CAs, the pins and the CRLs in force, and a
        /// hit counts only inside the validity of every certificate on the path. Nil validates every chain at
        /// every handshake, as NIOSSL's own verification does.
        case builtIn(pins: [Pin] = [], cache: EvaluationCache? = nil)
        /// Judges each client chain in place of the built-in rule: `evaluate(trust, forDomain: nil)`, where
        /// `trust` holds the presented chain, the client CAs as the only anchors, the clientAuth purpose and the
        /// CRLs in force. A ``/Pinning/SecurityPolicy`` (AFSecurityPolicy's modes, with certificate or key pins for
        /// clients) or a `CachingTrustEvaluator` wrapping one; a `PinningConfiguration` judges hosts and refuses
        /// every client (no host is given). It can narrow what the server accepts, not widen it: a chain it
        /// trusts without a path validated to an anchor is refused (``/Pinning/TrustFailure/Code/insecurePolicy``), and an
        /// evaluator that says it accepts such chains (``/Pinning/ServerTrustEvaluating/acceptsChainsWithoutValidatedPath``,
        /// a `SecurityPolicy` with `allowInvalidCertificates`) is refused when the server is made.
        case evaluator(any ServerTrustEvaluating)
    }

    /// Everything a ``MutualTLSServer`` is made from, as AsyncHTTPClient's `HTTPClient.Configuration` gathers a
    /// client's: set what you need, leave the rest.
    public struct Configuration: Sendable {
        /// The server's certificate chain (served in this order) and key.
        public var identity: TLSIdentity
        /// The CAs client certificates must chain to (the only anchors); must not be empty.
        public var clientCertificateAuthorities: [Certificate]
        /// How each client's chain is judged; the built-in rule with no pins and no cache by default.
        public var clientRule: ClientRule
        /// Extra checks on each client, at the full handshake and on each resumption; nil (the default) none.
        public var clientCheck: ClientCheck?
        /// CRLs to check client certificates against, read afresh for every handshake and every resumed session
        /// (so a client revoked since its session was made is refused on resuming it);
        /// ``RevocationSource/watching(_:mode:scope:interval:onReload:)`` re-reads them when the files change.
        /// Nil (the default) checks none.
        public var revocation: RevocationSource?
        /// Where to write each handshake's session secrets (NSS key log format), for decrypting a capture while
        /// debugging; nil (the default) writes nothing.
        public var keyLog: TLSKeyLog?
        /// The ALPN protocols offered, most preferred first (`["h2", "http/1.1"]` for a server that speaks both;
        /// an `ApplicationProtocolNegotiationHandler` after the handlers then sees the negotiated one, and only
        /// once the client is trusted); empty (the default) negotiates none.
        public var applicationProtocols: [String]

        /// A configuration with the server's identity, its client CAs and a client rule; nothing else set.
        public init(identity: TLSIdentity, clientCertificateAuthorities: [Certificate], clientRule: ClientRule = .builtIn()) {
            self.identity = identity
            self.clientCertificateAuthorities = clientCertificateAuthorities
            self.clientRule = clientRule
            self.clientCheck = nil
            self.revocation = nil
            self.keyLog = nil
            self.applicationProtocols = []
        }
    }

    /// A server configuration that cannot work as given.
    public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
        /// `invalidServerConfiguration`: the error's stable code (for logs, metrics and JSON; the words may change).
        public var code: String { "invalidServerConfiguration" }

        /// What is wrong, in words.
        public var problem: String

        /// The problem.
        public var description: String { self.problem }
    }

    // MARK: - The configuration's parts, as the server was made with them

    /// The server's certificate chain and key.
    public var identity: TLSIdentity { self.serverConfiguration.identity }
    /// The CAs client certificates must chain to (the only anchors).
    public var clientCertificateAuthorities: [Certificate] { self.serverConfiguration.clientCertificateAuthorities }
    /// How each client's chain is judged.
    public var clientRule: ClientRule { self.serverConfiguration.clientRule }
    /// See ``ClientCheck``.
    public var clientCheck: ClientCheck? { self.serverConfiguration.clientCheck }
    /// The CRLs client certificates are checked against; nil checks none.
    public var revocation: RevocationSource? { self.serverConfiguration.revocation }
    /// The built-in rule's client pins; empty with an evaluator.
    public var allowedClientPins: [Pin] {
        if case .builtIn(let pins, _) = self.clientRule { return pins }
        return []
    }
    /// The built-in rule's cache; nil with an evaluator (which may hold its own).
    public var evaluationCache: EvaluationCache? {
        if case .builtIn(_, let cache) = self.clientRule { return cache }
        return nil
    }
    /// The rule's evaluator; nil with the built-in rule.
    public var clientEvaluator: (any ServerTrustEvaluating)? {
        if case .evaluator(let evaluator) = self.clientRule { return evaluator }
        return nil
    }

    /// A template for each client's trust: ``clientSettings`` with no chain.
    @available(*, deprecated, message: "use clientSettings; each handshake pairs it with the presented chain (clientSettings.trust(for:))")
    public var clientTrust: ServerTrust { self.clientSettings.trust(for: []) }

    // MARK: - The earlier initialiser

    /// The parameter-list form of ``init(configuration:)``. Pins or a cache given beside an evaluator are
    /// refused (``ConfigurationError``): an evaluator replaces the built-in rule, so they would not be applied.
    @available(*, deprecated, message: "use init(configuration:) with a MutualTLSServer.Configuration (the client rule is one ClientRule: .builtIn(pins:cache:) or .evaluator(_:))")
    public init(
        identity: TLSIdentity,
        clientCertificateAuthorities: [Certificate],
        allowedClientPins: [Pin] = [],
        clientCheck: ClientCheck? = nil,
        keyLog: TLSKeyLog? = nil,
        revocation: RevocationSource? = nil,
        evaluationCache: EvaluationCache? = nil,
        applicationProtocols: [String] = [],
        clientEvaluator: (any ServerTrustEvaluating)? = nil
    ) throws {
        let rule: ClientRule
        if let clientEvaluator {
            guard allowedClientPins.isEmpty, evaluationCache == nil else {
                throw ConfigurationError(
                    problem: !allowedClientPins.isEmpty
                        ? "allowedClientPins and a clientEvaluator cannot be combined: put the pins in the evaluator (SecurityPolicy(pinningMode: .publicKey, pins:))"
                        : "evaluationCache and a clientEvaluator cannot be combined: wrap the policy in CachingTrustEvaluator(policy, cache:) instead"
                )
            }
            rule = .evaluator(clientEvaluator)
        } else {
            rule = .builtIn(pins: allowedClientPins, cache: evaluationCache)
        }
        var configuration = Configuration(identity: identity, clientCertificateAuthorities: clientCertificateAuthorities, clientRule: rule)
        configuration.clientCheck = clientCheck
        configuration.keyLog = keyLog
        configuration.revocation = revocation
        configuration.applicationProtocols = applicationProtocols
        try self.init(configuration: configuration)
    }
}
