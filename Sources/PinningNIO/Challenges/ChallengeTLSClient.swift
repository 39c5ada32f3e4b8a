public import NIOCore
public import NIOSSL
public import Pinning

/// A TLS client whose trust and client-certificate decisions go through a ``ChallengeHandler``, as an
/// AFNetworking session's do through its challenge blocks.
///
/// Per connection:
/// 1. The client-certificate challenge is asked first, while the connection's TLS configuration is built
///    (NIOSSL fixes the client certificate before the handshake). Its answer picks the identity, or cancels.
/// 2. The server-trust challenge is asked in the handshake's verification callback; its answer is mapped as
///    ``AuthenticationChallengeDisposition`` documents, and a refusal reaches the caller as a
///    ``PinningConnectionError``.
///
/// Enforcement is that of ``PinnedTLSClient`` (`.noHostnameVerification`, the callback replaces BoringSSL's
/// validation, a handshake without an evaluation on that connection is refused).
public struct ChallengeTLSClient: Sendable {
    /// Answers the challenges.
    public var handler: ChallengeHandler
    /// How each server-trust challenge's chain is judged: anchors, platform roots, purpose, profile, limits. Each
    /// challenge's ``/Pinning/ServerTrust`` is made from these settings and the presented chain.
    public var settings: TrustSettings
    /// A base TLS configuration (versions, ALPN); its certificate and key are replaced per connection.
    public var configuration: TLSConfiguration
    /// Where each connection's TLS context comes from: connections whose challenge picked the same identity share
    /// one context.
    package var contexts: ClientTLSContexts = .shared

    /// A client whose server-trust challenges carry each presented chain judged with `settings`
    /// (``/Pinning/TrustSettings``).
    public init(
        handler: ChallengeHandler,
        settings: TrustSettings = .default,
        configuration: TLSConfiguration = .makePinnedClientConfiguration()
    ) {
        self.handler = handler
        self.settings = settings
        self.configuration = configuration
    }

    /// A client judged with the settings of a ``/Pinning/ServerTrust`` template (its certificates are ignored).
    ///
    /// - Throws: ``FixedValidationTimeError`` when the template fixes ``/Pinning/ServerTrust/validationTime``.
    @available(*, deprecated, message: "pass settings: TrustSettings; a ServerTrust template can freeze the client's clock")
    public init(
        handler: ChallengeHandler,
        trust: ServerTrust,
        configuration: TLSConfiguration = .makePinnedClientConfiguration()
    ) throws {
        self.init(handler: handler, settings: try TrustSettings.ofTemplate(trust, for: "ChallengeTLSClient(trust:)"), configuration: configuration)
    }

    /// The settings as an empty ``/Pinning/ServerTrust`` (what the deprecated `trust:` form held).
    @available(*, deprecated, renamed: "settings")
    public var trust: ServerTrust { ServerTrust(certificates: [], settings: self.settings) }

    /// Asks the client-certificate challenge for `host`:`port` and returns a ``PinnedTLSClient`` for that one
    /// connection whose handshakes ask the server-trust challenge.
    ///
    /// - Parameters:
    ///   - host: The server's name, as the challenges and the evaluation see it.
    ///   - port: The server's port.
    ///   - requestOverride: This request's override, asked before the handler's.
    /// - Throws: ``PinningConnectionError`` when the client-certificate challenge is cancelled or answered with
    ///   the wrong credential, or the TLS configuration cannot be built.
    public func makeConnectionClient(
        host: String,
        port: Int,
        requestOverride: AuthenticationChallengeOverride? = nil
    ) async throws(PinningConnectionError) -> PinnedTLSClient {
        let handler = self.handler
        let space = ProtectionSpace(host: host, port: port, authenticationMethod: .clientCertificate)
        let answer = await handler.disposition(for: AuthenticationChallenge(protectionSpace: space), requestOverride: requestOverride)
        let identity = try handler.resolveClientCertificate(answer, host: host)
        var client: PinnedTLSClient
        do {
            var configuration = self.configuration
            configuration.certificateChain = []
            configuration.privateKey = nil
            client = try PinnedTLSClient(
                evaluator: handler.policy, settings: self.settings, identity: identity, configuration: configuration, keyLog: nil, contexts: self.contexts)
        } catch {
            throw PinningConnectionError(code: .handshakeFailed, host: host, message: "the TLS configuration cannot be built", underlying: error)
        }
        let settings = self.settings
        client.peerDecision = { name, presented in
            var trust = ServerTrust(certificates: presented, settings: settings)
            trust.port = port
            let challenge = AuthenticationChallenge(
                protectionSpace: ProtectionSpace(host: name, port: port, authenticationMethod: .serverTrust),
                serverTrust: trust
            )
            let disposition = await handler.disposition(for: challenge, requestOverride: requestOverride)
            return await handler.resolveServerTrust(disposition, trust: trust, host: name.lowercased())
        }
        return client
    }

    /// Connects to `host`:`port`, answering both challenges, and returns the trusted connection.
    ///
    /// - Parameters:
    ///   - host: The server's name (SNI, the name checked, the protection space's host).
    ///   - port: The port.
    ///   - address: Where to connect instead of resolving `host`.
    ///   - group: The event loop group.
    ///   - timeout: The bound on connecting plus the handshake.
    ///   - requestOverride: This request's challenge override.
    /// - Throws: ``PinningConnectionError``.
    public func connect(
        host: String,
        port: Int,
        address: SocketAddress? = nil,
        group: any EventLoopGroup,
        timeout: TimeAmount = .seconds(10),
        requestOverride: AuthenticationChallengeOverride? = nil
    ) async throws(PinningConnectionError) -> PinnedConnection {
        let client = try await self.makeConnectionClient(host: host, port: port, requestOverride: requestOverride)
        return try await client.connect(host: host, port: port, address: address, group: group, timeout: timeout)
    }
}
