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
    /// Anchors, platform roots and validation settings for each server-trust challenge's ``ServerTrust``.
    public var trust: ServerTrust
    /// A base TLS configuration (versions, ALPN); its certificate and key are replaced per connection.
    public var configuration: TLSConfiguration

    /// A client.
    public init(
        handler: ChallengeHandler,
        trust: ServerTrust = ServerTrust(certificates: []),
        configuration: TLSConfiguration = .makePinnedClientConfiguration()
    ) {
        self.handler = handler
        self.trust = trust
        self.configuration = configuration
    }

    /// A client whose server-trust challenges carry each presented chain judged with `settings` (the form to
    /// prefer: no presented chain, no fixed clock; see ``Pinning/TrustSettings``).
    public init(
        handler: ChallengeHandler,
        settings: TrustSettings,
        configuration: TLSConfiguration = .makePinnedClientConfiguration()
    ) {
        self.init(handler: handler, trust: ServerTrust(certificates: [], settings: settings), configuration: configuration)
    }

    /// Asks the client-certificate challenge for `host`:`port` and returns a ``PinnedTLSClient`` for that one
    /// connection whose handshakes ask the server-trust challenge.
    ///
    /// - Parameter requestOverride: This request's override, asked before the handler's.
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
            client = try PinnedTLSClient(evaluator: handler.policy, trust: self.trust, identity: identity, configuration: configuration)
        } catch {
            throw PinningConnectionError(code: .handshakeFailed, host: host, message: "the TLS configuration cannot be built", underlying: error)
        }
        let template = self.trust
        client.peerDecision = { name, presented in
            var trust = template
            trust.certificates = presented
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
