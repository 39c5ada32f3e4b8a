import Foundation
import NIOConcurrencyHelpers
public import NIOCore
import NIOPosix
public import NIOSSL
public import Pinning
import X509

/// Puts TLS on NIO channels with a trust decision of ours on every handshake.
///
/// <!-- snippet: given(p: String, group: any EventLoopGroup)
/// import NIOCore
/// import Pinning
/// -->
/// ```swift
/// let policy = SecurityPolicy(pinningMode: .publicKey, pins: [try Pin("sha256/…")])
/// let client = try PinnedTLSClient(evaluator: policy, identity: try .pkcs12(file: "client.p12", passphrase: p))
/// let connection = try await client.connect(host: "api.example.com", port: 443, group: group)
/// ```
///
/// How it is enforced:
/// - NIOSSL's `customVerificationCallbackWithMetadata` hands every presented chain to the evaluator (a
///   ``/Pinning/SecurityPolicy``, a host configuration, anything ``/Pinning/ServerTrustEvaluating``). The callback replaces
///   BoringSSL's validation; any error in it refuses the handshake (fail closed).
/// - `certificateVerification` is always `.noHostnameVerification`: never `.none` (NIOSSL would skip the
///   callback) and never `.fullVerification` (NIOSSL's own name check accepts an IP SAN matching the socket
///   address for any DNS name); names are checked by the evaluator against `host`.
/// - A refusal reaches the caller as ``PinningConnectionError`` with code ``PinningConnectionError/Code/untrusted``
///   and the evaluator's ``/Pinning/TrustFailure``, through ``PinningHandshakeHandler``.
/// - Session resumption cannot skip the policy: NIOSSL offers no client session cache (every connection is a
///   full handshake, so the callback always runs), and ``PinningHandshakeHandler`` refuses any handshake that
///   completes without the callback having trusted that very connection. So clients with equal TLS settings share
///   one NIOSSL context (made in one place, `ClientTLSContexts`): the callback is each connection's own.
public struct PinnedTLSClient: Sendable {
    /// Decides trust for each handshake.
    public let evaluator: any ServerTrustEvaluating
    /// ``evaluator`` with ``RevocationFetchingEvaluator`` in front: CRLs are fetched when, and only when, the
    /// policy being applied asks for them (``Pinning/RevocationPolicy/fetch``); otherwise it passes through.
    let judge: any ServerTrustEvaluating
    /// How each handshake's chain is judged: anchors, platform roots, purpose, profile, limits. Each handshake
    /// builds its ``/Pinning/ServerTrust`` from these settings and the chain the server presents.
    public let settings: TrustSettings
    /// The client certificate and key presented when a server asks for one.
    public let identity: TLSIdentity?
    /// The TLS configuration the context was built from.
    public let configuration: TLSConfiguration
    /// The NIOSSL context, shared with every client of equal TLS settings (`ClientTLSContexts`).
    public let sslContext: NIOSSLContext
    /// When set (by ``ChallengeTLSClient``), decides each handshake instead of ``evaluator``: the server-trust
    /// challenge, which may refuse with its own error.
    var peerDecision: (@Sendable (_ host: String, _ presented: [Certificate]) async -> PeerDecision)?

    /// A client whose handshakes are judged by `evaluator` with `settings` (anchors, platform roots, purpose,
    /// profile, limits) applied to each chain the server presents (``/Pinning/TrustSettings``).
    ///
    /// - Parameters:
    ///   - evaluator: Decides trust for each handshake.
    ///   - settings: How each handshake's chain is judged; default the platform roots and server authentication.
    ///   - identity: The client identity for servers that request one.
    ///   - configuration: A base configuration (TLS versions, ciphers, ALPN); default
    ///     ``NIOSSL/TLSConfiguration/makePinnedClientConfiguration(identity:)``. Its certificate verification is
    ///     forced to `.noHostnameVerification` and the identity replaces its certificate chain and key.
    ///   - keyLog: Where to write each handshake's session secrets (NSS key log format), for decrypting a
    ///     capture while debugging; nil (the default) leaves the configuration's own callback, if any.
    /// - Throws: when NIOSSL cannot build the context.
    ///
    /// Clients with equal TLS settings (configuration, identity, key log) share one context
    /// (``sslContext``); the evaluator and the settings belong to each handshake, never to the context.
    public init(
        evaluator: any ServerTrustEvaluating,
        settings: TrustSettings = .default,
        identity: TLSIdentity? = nil,
        configuration: TLSConfiguration? = nil,
        keyLog: TLSKeyLog? = nil
    ) throws {
        try self.init(evaluator: evaluator, settings: settings, identity: identity, configuration: configuration, keyLog: keyLog, contexts: .shared)
    }

    /// As ``init(evaluator:settings:identity:configuration:keyLog:)``, the context taken from `contexts`.
    package init(
        evaluator: any ServerTrustEvaluating,
        settings: TrustSettings,
        identity: TLSIdentity?,
        configuration: TLSConfiguration?,
        keyLog: TLSKeyLog?,
        contexts: ClientTLSContexts
    ) throws {
        var configuration = configuration ?? .makePinnedClientConfiguration(identity: identity)
        configuration.certificateVerification = .noHostnameVerification
        // A caller's base configuration that leaves the algorithms to BoringSSL would not accept Ed25519 or
        // P-521 servers: give it ours. A list the caller chose is kept as is.
        if configuration.verifySignatureAlgorithms == nil {
            configuration.verifySignatureAlgorithms = TLSConfiguration.pinningAcceptedSignatureAlgorithms
        }
        if configuration.curves == nil {
            configuration.curves = TLSConfiguration.pinningGroups
        }
        if let identity {
            configuration.certificateChain = identity.certificateSources
            configuration.privateKey = identity.privateKeySource
        }
        // The key log is applied by the cache, which keys on it.
        let made = try contexts.context(for: configuration, keyLog: keyLog)
        self.evaluator = evaluator
        self.judge = RevocationFetchingEvaluator.wrapping(evaluator)
        self.settings = settings
        self.identity = identity
        self.configuration = made.configuration
        self.sslContext = made.context
    }

    /// A client whose every handshake is judged by the configuration `source` holds when the handshake happens
    /// (a ``PinSetUpdater`` following a signed pin set): a new configuration applies to the next connection, and
    /// connections already open are left as they are. With no configuration yet, every handshake is refused.
    ///
    /// - Parameters: as ``init(evaluator:settings:identity:configuration:keyLog:)``, the evaluator being
    ///   the core's `SourcedConfigurationEvaluator` (package) on `source`.
    public init(
        configurationSource source: any PinningConfigurationSource,
        settings: TrustSettings = .default,
        identity: TLSIdentity? = nil,
        configuration: TLSConfiguration? = nil,
        keyLog: TLSKeyLog? = nil
    ) throws {
        try self.init(
            evaluator: SourcedConfigurationEvaluator(source: source), settings: settings, identity: identity, configuration: configuration, keyLog: keyLog)
        self.configurationSource = source
    }

    /// The source the evaluator reads, when the client was made with one (clients that pool connections compare
    /// its generation to know a connection was trusted under an older configuration).
    public private(set) var configurationSource: (any PinningConfigurationSource)?

    /// A client judged with the settings of a ``/Pinning/ServerTrust`` template (its certificates are ignored).
    ///
    /// - Throws: ``FixedValidationTimeError`` when the template fixes ``/Pinning/ServerTrust/validationTime``: that would
    ///   freeze a long-lived client's clock. Otherwise as ``init(evaluator:settings:identity:configuration:keyLog:)``.
    @available(*, deprecated, message: "pass settings: TrustSettings; a ServerTrust template can freeze the client's clock")
    public init(
        evaluator: any ServerTrustEvaluating,
        trust: ServerTrust,
        identity: TLSIdentity? = nil,
        configuration: TLSConfiguration? = nil,
        keyLog: TLSKeyLog? = nil
    ) throws {
        try self.init(
            evaluator: evaluator,
            settings: try TrustSettings.ofTemplate(trust, for: "PinnedTLSClient(trust:)"),
            identity: identity,
            configuration: configuration,
            keyLog: keyLog
        )
    }

    /// The settings as an empty ``/Pinning/ServerTrust`` (what the deprecated `trust:` form held).
    @available(*, deprecated, renamed: "settings")
    public var trust: ServerTrust { ServerTrust(certificates: [], settings: self.settings) }

    /// The NIOSSL client handler and the ``PinningHandshakeHandler`` that must follow it, for `host`.
    ///
    /// Add both, in this order, right after the socket. Prefer ``addHandlers(to:host:port:)``.
    ///
    /// - Parameters:
    ///   - host: The server's name (DNS name or IP address): sent as SNI when it is a DNS name, and the name the
    ///     evaluator checks.
    ///   - port: The port connected to, handed to the evaluator in the trust (``/Pinning/ServerTrust/port``) for the
    ///     failure reports it builds; nil when unknown.
    public func makeClientTLSHandlers(host: String, port: Int? = nil) throws -> (NIOSSLClientHandler, PinningHandshakeHandler) {
        let verdict = HandshakeVerdict()
        let callback = self.verificationCallback(verdict: verdict, host: host, port: port)
        let tls = try NIOSSLClientHandler(
            context: self.sslContext,
            serverHostname: Self.isIPAddress(host) ? nil : host,
            customVerificationCallbackWithMetadata: callback
        )
        return (tls, PinningHandshakeHandler(verdict: verdict, host: host))
    }

    /// NIOSSL's verification callback for one connection to `host`, recording its decision in `verdict`: the
    /// evaluator's answer without a task when it has one (``/Pinning/SecurityPolicy`` and
    /// ``/Pinning/CachingTrustEvaluator`` evaluate on the event loop, issue 31; any evaluator's
    /// ``/Pinning/ServerTrustEvaluating/immediateEvaluation(_:forDomain:)``), else its evaluation in a task.
    func verificationCallback(verdict: HandshakeVerdict, host: String, port: Int?) -> NIOSSLCustomVerificationCallbackWithMetadata {
        let evaluator = self.judge
        let settings = self.settings
        if let peerDecision = self.peerDecision {
            return PeerVerification.callback(verdict: verdict) { presented in
                await peerDecision(host, presented)
            }
        }
        // Each handshake's trust is made from the settings and this chain: nothing of an earlier handshake, and
        // no instant but the settings' own (the current time, or a fixed one only through the SPI). The port
        // only reaches failure reports, never the verdict.
        @Sendable func trust(_ presented: [Certificate]) -> ServerTrust {
            var trust = ServerTrust(certificates: presented, settings: settings)
            trust.port = port
            return trust
        }
        return PeerVerification.callback(
            verdict: verdict,
            immediate: { presented in evaluator.evaluationWithoutTask(trust(presented), forDomain: host) },
            decide: { presented in await evaluator.evaluate(trust(presented), forDomain: host) }
        )
    }

    /// Adds the pinned TLS handlers for `host` (connected to on `port`, when known) to a pipeline and returns the
    /// handshake outcome.
    @discardableResult
    public func addHandlers(
        to pipeline: ChannelPipeline.SynchronousOperations,
        host: String,
        port: Int? = nil
    ) throws -> EventLoopFuture<PinnedHandshake> {
        let (tls, pinning) = try self.makeClientTLSHandlers(host: host, port: port)
        try pipeline.addHandlers(Self.alertObservingHandlers(tls: tls, pinning: pinning, role: .client))
        guard let handshake = pinning.handshake else {
            throw PinningConnectionError(code: .handshakeFailed, host: host, message: "the pinning handler was not added")
        }
        return handshake
    }

    /// `tls` and `pinning` with a ``TLSAlertObserver`` in front (on the socket's side of NIOSSL, where it sees the
    /// records), in the order to add them: the one way this module puts TLS on a connection, client or server.
    static func alertObservingHandlers(tls: NIOSSLHandler, pinning: PinningHandshakeHandler, role: TLSRecordObservation.Role) -> [any ChannelHandler] {
        let observer = TLSAlertObserver(role: role)
        pinning.alertObserver = observer
        return [observer, tls, pinning]
    }

    /// The handlers ``addHandlers(to:host:port:)`` adds, in order (a ``TLSAlertObserver``, NIOSSL's client handler and the
    /// ``PinningHandshakeHandler``), for a transport that places them itself; the handshake outcome is the last
    /// handler's ``PinningHandshakeHandler/handshake`` once added.
    public func makeClientTLSHandlerChain(host: String, port: Int? = nil) throws -> (handlers: [any ChannelHandler], pinning: PinningHandshakeHandler) {
        let (tls, pinning) = try self.makeClientTLSHandlers(host: host, port: port)
        return (Self.alertObservingHandlers(tls: tls, pinning: pinning, role: .client), pinning)
    }

    /// Connects to `host`, completes the TLS handshake and returns the trusted connection.
    ///
    /// - Parameters:
    ///   - host: The server's name, checked by the evaluator and sent as SNI.
    ///   - port: The port.
    ///   - address: Where to connect instead of resolving `host` (as curl's `--resolve`).
    ///   - group: The event loop group.
    ///   - timeout: The bound on connecting plus the handshake.
    ///   - configure: Further handlers to add after the TLS handlers (an HTTP codec, say).
    /// - Throws: ``PinningConnectionError``.
    public func connect(
        host: String,
        port: Int,
        address: SocketAddress? = nil,
        group: any EventLoopGroup,
        timeout: TimeAmount = .seconds(10),
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void> = { $0.eventLoop.makeSucceededVoidFuture() }
    ) async throws(PinningConnectionError) -> PinnedConnection {
        // The handshake's future is taken when the handlers are added: a refused handshake closes the channel
        // and removes the handlers, possibly before `connect` returns, and the future still carries the reason.
        let handshakeFuture = NIOLockedValueBox<EventLoopFuture<PinnedHandshake>?>(nil)
        // The channel, once made: every way out but a trusted connection closes it (closing one that never
        // connected, or is already closed, does nothing), so no path below can leave it open.
        let made = NIOLockedValueBox<(any Channel)?>(nil)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                made.withLockedValue { $0 = channel }
                do {
                    let handshake = try self.addHandlers(to: channel.pipeline.syncOperations, host: host, port: port)
                    handshakeFuture.withLockedValue { $0 = handshake }
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
                return configure(channel)
            }
        // One wait for the whole connection: once connected, the handshake's timer is started on the channel's loop
        // from the connect future's own callback (no task submitted to the loop, no second resumption of this task),
        // and the outcome says which step failed so each is reported as before (issue 31: each hop between the
        // caller's task and the loop cost ~10 µs of CPU per connection).
        let connected = address.map { bootstrap.connect(to: $0) } ?? bootstrap.connect(host: host, port: port)
        let outcome = connected.flatMap { channel -> EventLoopFuture<ConnectOutcome> in
            guard let future = handshakeFuture.withLockedValue({ $0 }) else {
                let error = PinningConnectionError(code: .handshakeFailed, host: host, message: "no handshake in progress")
                return channel.eventLoop.makeSucceededFuture(.handshake(channel, .failure(error)))
            }
            let timer = channel.eventLoop.scheduleTask(in: timeout) {
                channel.pipeline.fireErrorCaught(
                    PinningConnectionError(code: .timedOut, host: host, message: "the TLS handshake with \(host) port \(port) did not complete within \(Self.words(timeout))"))
                channel.close(promise: nil)
            }
            future.whenComplete { _ in timer.cancel() }
            return future.map { .handshake(channel, .success($0)) }.recover { .handshake(channel, .failure($0)) }
        }.recover { .connectFailed($0) }
        // `recover` leaves no failure (the outcome carries it); should one come all the same, it is the connection's,
        // and the channel (if one was made) is closed below with every other failure.
        let ended: ConnectOutcome
        do {
            ended = try await outcome.get()
        } catch {
            ended = .connectFailed(error)
        }
        switch ended {
        case .connectFailed(let error):
            made.withLockedValue { $0 }?.close(promise: nil)
            if let error = error as? PinningConnectionError { throw error }
            let shown = address.map { ConnectionFailureWords.target(host, $0) } ?? host
            if let error = error as? ChannelError, case .connectTimeout = error {
                throw PinningConnectionError(code: .timedOut, host: host, message: "cannot connect to \(shown) port \(port) within \(Self.words(timeout)): timed out", underlying: error)
            }
            throw PinningConnectionError(code: .connectFailed, host: host, message: ConnectionFailureWords.connectProblem(error, host: shown, port: port), underlying: error)
        case .handshake(let channel, .success(let handshake)):
            return PinnedConnection(channel: channel, handshake: handshake)
        case .handshake(let channel, .failure(let error)):
            channel.close(promise: nil)
            if let error = error as? PinningConnectionError { throw error }
            throw PinningConnectionError(code: .handshakeFailed, host: host, message: ConnectionFailureWords.tlsProblem(error) ?? "the TLS handshake failed", underlying: error)
        }
    }

    /// How ``connect(host:port:address:group:timeout:configure:)`` ended: the connection failed, or it was made and
    /// its handshake ended.
    private enum ConnectOutcome: Sendable {
        case connectFailed(any Error)
        case handshake(any Channel, Result<PinnedHandshake, any Error>)
    }

    /// `5 s`, `300 ms`: a time bound in words.
    static func words(_ amount: TimeAmount) -> String {
        let nanoseconds = amount.nanoseconds
        if nanoseconds % 1_000_000_000 == 0 { return "\(nanoseconds / 1_000_000_000) s" }
        if nanoseconds % 1_000_000 == 0 { return "\(nanoseconds / 1_000_000) ms" }
        return String(format: "%.3f s", Double(nanoseconds) / 1e9)
    }

    static func isIPAddress(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        do {
            _ = try SocketAddress(ipAddress: bare, port: 0)
            return true
        } catch {
            return false
        }
    }
}

/// An open connection whose peer the policy trusted.
public struct PinnedConnection: Sendable {
    /// The channel, with the TLS handlers in place. Close it when done.
    public let channel: any Channel
    /// What was trusted.
    public let handshake: PinnedHandshake
}

extension TLSConfiguration {
    /// The handshake signature algorithms a pinned connection accepts from its peer (a server's certificate
    /// key, or a client's on a ``MutualTLSServer``), most preferred first.
    ///
    /// BoringSSL's default list (`kVerifySignatureAlgorithms` in its `ssl/extensions.cc`) leaves out Ed25519
    /// and ECDSA P-521, so a server whose certificate has such a key could not be reached (the handshake fails
    /// with `NO_COMMON_SIGNATURE_ALGORITHMS`), although curl, OpenSSL, Go and the chain validation of this
    /// package accept them. This is BoringSSL's list in its order, plus ECDSA P-521/SHA-512 and Ed25519.
    /// RSA PKCS#1 with SHA-1 stays last, as in BoringSSL's list (TLS 1.2 servers that can do nothing else; TLS 1.3
    /// never uses it). RSASSA-PSS with an RSA-PSS *key* (`rsa_pss_pss_*`) is absent: BoringSSL cannot use
    /// such keys at all.
    public static let pinningAcceptedSignatureAlgorithms: [SignatureAlgorithm] = [
        .ecdsaSecp256R1Sha256,
        .rsaPssRsaeSha256,
        .rsaPkcs1Sha256,
        .ecdsaSecp384R1Sha384,
        .rsaPssRsaeSha384,
        .rsaPkcs1Sha384,
        .ecdsaSecp521R1Sha512,
        .rsaPssRsaeSha512,
        .rsaPkcs1Sha512,
        .ed25519,
        .rsaPkcs1Sha1,
    ]

    /// The key-exchange groups a pinned client offers: swift-nio-ssl's default (X25519MLKEM768, X25519, P-256,
    /// P-384) plus P-521 last. Under TLS 1.2 a server may only use an ECDSA certificate whose curve the client
    /// listed here, so without P-521 a server with a P-521 certificate answers `handshake_failure` ("no shared
    /// cipher" in OpenSSL's log), although curl and OpenSSL offer P-521. Listed last, it adds no key share.
    public static let pinningGroups: [NIOTLSCurve] = [.x25519_MLKEM768, .x25519, .secp256r1, .secp384r1, .secp521r1]

    /// A client configuration for pinned connections: certificate verification `.noHostnameVerification`
    /// (the evaluator checks names; the custom callback replaces BoringSSL's validation), TLS 1.2 or later, no
    /// trust roots of its own (if it is ever used without the pinning callback, nothing validates: fail
    /// closed), and the client identity when given.
    ///
    /// - Parameter identity: The client certificate chain and key, for servers that ask for one.
    public static func makePinnedClientConfiguration(identity: TLSIdentity? = nil) -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .noHostnameVerification
        configuration.minimumTLSVersion = .tlsv12
        configuration.trustRoots = .certificates([])
        configuration.verifySignatureAlgorithms = Self.pinningAcceptedSignatureAlgorithms
        configuration.curves = Self.pinningGroups
        if let identity {
            configuration.certificateChain = identity.certificateSources
            configuration.privateKey = identity.privateKeySource
        }
        return configuration
    }
}
