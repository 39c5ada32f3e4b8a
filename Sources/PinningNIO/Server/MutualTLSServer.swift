public import Foundation
public import NIOCore
public import NIOSSL
public import Pinning
public import X509

/// TLS for servers that require a client certificate and validate it with this package's evaluator.
///
/// ```swift
/// let server = try MutualTLSServer(identity: serverIdentity, clientCertificateAuthorities: [deviceCA])
/// ServerBootstrap(group: group).childChannelInitializer { channel in
///     channel.eventLoop.makeCompletedFuture {
///         try server.addHandlers(to: channel.pipeline.syncOperations)
///         // … HTTP handlers; they read the client with channel.pinningAuthenticatedPeer()
///     }
/// }
/// ```
///
/// Each client chain is judged by ``ServerTrust`` with purpose ``TrustPurpose/clientAuthentication``
/// (extendedKeyUsage clientAuth), the configured client CAs as the only anchors, no name check, and, when
/// given, an allow-list of client SPKI pins (some certificate on the validated path must carry one).
///
/// NIOSSL settings: `.noHostnameVerification` (VERIFY_PEER | FAIL_IF_NO_PEER_CERT: a client without a
/// certificate is refused), `sendCANameList` (clients are told which CAs are accepted), the custom callback
/// replaces BoringSSL's validation.
///
/// Session resumption: BoringSSL skips client-certificate verification when it resumes a session, and its
/// session cache and ticket keys belong to the `SSL_CTX`. Each connection therefore gets a fresh
/// `NIOSSLContext`, so no ticket or session from an earlier connection can ever be accepted; as a second
/// line, ``PinningHandshakeHandler`` refuses a handshake that completes without the validation having
/// run on that connection.
public struct MutualTLSServer: Sendable {
    /// The server's certificate chain and key.
    public let identity: TLSIdentity
    /// The CAs client certificates must chain to (the only anchors).
    public let clientCertificateAuthorities: [Certificate]
    /// When not empty, some certificate on the client's validated path must carry one of these pins.
    public let allowedClientPins: [Pin]
    /// The template for each client's ``ServerTrust``.
    public let clientTrust: ServerTrust
    /// The TLS configuration each connection's context is built from.
    public let configuration: TLSConfiguration

    /// A mutual-TLS server configuration.
    ///
    /// - Parameters:
    ///   - identity: The server's certificate chain (served in this order) and key.
    ///   - clientCertificateAuthorities: The client CAs; must not be empty.
    ///   - allowedClientPins: An optional allow-list of client SPKI pins (empty: any client of those CAs).
    ///   - validationTime: Fixed validation instant (tests); nil is the handshake time.
    /// - Throws: ``TLSIdentityError`` when there is no client CA or NIOSSL cannot use one; NIOSSL errors when the
    ///   configuration cannot be built.
    public init(
        identity: TLSIdentity,
        clientCertificateAuthorities: [Certificate],
        allowedClientPins: [Pin] = [],
        validationTime: Date? = nil
    ) throws {
        self.identity = identity
        self.clientCertificateAuthorities = clientCertificateAuthorities
        self.allowedClientPins = allowedClientPins
        self.clientTrust = ServerTrust(
            certificates: [],
            anchors: clientCertificateAuthorities,
            anchorsOnly: true,
            validationTime: validationTime,
            purpose: .clientAuthentication
        )
        self.configuration = try TLSConfiguration.makeMutualTLSServerConfiguration(
            identity: identity,
            clientCertificateAuthorities: clientCertificateAuthorities
        )
        // Fail at configuration time, not at the first connection.
        _ = try NIOSSLContext(configuration: self.configuration)
    }

    /// Validates a client chain as the handshake does.
    public func evaluateClient(_ presented: [Certificate]) async -> TrustEvaluation {
        var trust = self.clientTrust
        trust.certificates = presented
        return await trust.evaluate(.basicX509, pins: self.allowedClientPins.isEmpty ? nil : .publicKeys(self.allowedClientPins))
    }

    /// The NIOSSL server handler (on a fresh context) and the ``PinningHandshakeHandler`` that must follow it.
    public func makeServerTLSHandlers() throws -> (NIOSSLServerHandler, PinningHandshakeHandler) {
        let context = try NIOSSLContext(configuration: self.configuration)
        let verdict = HandshakeVerdict()
        let server = self
        let callback = PeerVerification.callback(verdict: verdict) { presented in
            await server.evaluateClient(presented)
        }
        let tls = NIOSSLServerHandler(context: context, customVerificationCallbackWithMetadata: callback)
        return (tls, PinningHandshakeHandler(verdict: verdict, host: nil))
    }

    /// Adds the mTLS handlers to a child channel's pipeline; returns the handshake outcome (the client).
    @discardableResult
    public func addHandlers(to pipeline: ChannelPipeline.SynchronousOperations) throws -> EventLoopFuture<PinnedHandshake> {
        let (tls, pinning) = try self.makeServerTLSHandlers()
        try pipeline.addHandler(tls)
        try pipeline.addHandler(pinning)
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
            throw TLSIdentityError(code: .noCertificate, origin: "clientCertificateAuthorities", problem: "a mutual-TLS server needs at least one client CA")
        }
        var authorities: [NIOSSLCertificate] = []
        for authority in clientCertificateAuthorities {
            do {
                authorities.append(try NIOSSLCertificate(bytes: authority.derBytes, format: .der))
            } catch {
                throw TLSIdentityError(code: .corruptFile, origin: "clientCertificateAuthorities", problem: "NIOSSL cannot load \(authority.subject): \(error)")
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
        return configuration
    }
}
