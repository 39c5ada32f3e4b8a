import NIOSSL
import Pinning
public import PinningNIO
public import Vapor
import X509

/// Whether a Vapor server asks every client for a certificate or accepts clients without one.
public enum ClientCertificateMode: Sendable {
    /// The TLS handshake fails for a client without a valid certificate (nginx's `ssl_verify_client on`).
    case require
    /// A client may connect without a certificate; one that presents a certificate is judged by the policy and
    /// refused at the handshake when the policy refuses it (nginx's `ssl_verify_client optional`). Put
    /// ``MutualTLSMiddleware`` on the routes that need a client.
    case allow
}

extension HTTPServer.Configuration {
    /// Serves TLS with `server`'s identity and judges client certificates with `server`'s policy: the client CAs
    /// as the only anchors, the clientAuth purpose, the optional pins (or the server's `clientEvaluator`), CRLs and
    /// `clientCheck`. The validated
    /// client is then ``Vapor/Request/authenticatedClient`` in every handler.
    ///
    /// It uses Vapor's own TLS server: `tlsConfiguration` is `server.configuration` and
    /// `customCertificateVerifyCallbackWithMetadata` is ``/PinningNIO/MutualTLSServer/verificationCallback(onRefusal:)``,
    /// whose validated path Vapor keeps for the request (`Request.peerCertificateChain`). Vapor makes a new TLS
    /// context for every connection, so no session is ever resumed and every connection is judged in full.
    ///
    /// The server speaks HTTP/1.1 (`supportVersions` becomes `[.one]`): Vapor does not hand the client's chain to
    /// HTTP/2 requests (it looks for the TLS handler on the stream's channel). Setting HTTP/2 back afterwards
    /// fails closed: HTTP/2 requests then have no ``Vapor/Request/authenticatedClient``.
    ///
    /// <!-- snippet: given(app: Application, identity: TLSIdentity, deviceCA: Certificate)
    /// import PinningNIO
    /// import Vapor
    /// import X509
    /// -->
    /// ```swift
    /// app.http.server.configuration.useMutualTLS(try MutualTLSServer(identity: identity, clientCertificateAuthorities: [deviceCA]))
    /// app.grouped(MutualTLSMiddleware()).get("me") { req in req.authenticatedClient!.subject }
    /// ```
    ///
    /// - Parameters:
    ///   - server: The identity and client policy.
    ///   - mode: Whether a certificate is required at the handshake (default) or only judged when presented.
    ///   - onRefusal: Called once for each client whose presented certificate chain the policy refuses, with the
    ///     reason: `untrusted` and its ``/Pinning/TrustFailure`` (another CA, expired, revoked, no clientAuth, a pin
    ///     missing, refused by `clientCheck` or the `clientEvaluator`), or `unreadablePeerCertificate` for a leaf
    ///     that cannot be parsed. It hears only of chains that reach the policy. It is not called for handshakes
    ///     that BoringSSL fails before it hands a chain to the policy: a client without a certificate under
    ///     ``ClientCertificateMode/require``, no TLS version or cipher suite in common, a certificate message over
    ///     BoringSSL's size limit, a client that leaves mid-handshake. It is also not called for a client whose
    ///     chain was trusted but that then fails to prove it holds the key (its CertificateVerify is checked after
    ///     the policy). All of these fail the handshake; no handler runs. Vapor closes such connections without
    ///     saying why.
    public mutating func useMutualTLS(
        _ server: MutualTLSServer,
        mode: ClientCertificateMode = .require,
        onRefusal: (@Sendable (PinningConnectionError) -> Void)? = nil
    ) {
        var tls = server.configuration
        switch mode {
        case .require:
            // VERIFY_PEER | FAIL_IF_NO_PEER_CERT, as MutualTLSServer sets it.
            tls.certificateVerification = .noHostnameVerification
        case .allow:
            // VERIFY_PEER only: a certificate that is presented still goes through the callback below.
            tls.certificateVerification = .optionalVerification
        }
        self.tlsConfiguration = tls
        // HTTP/1.1 only: Vapor (4.122) reads the validated chain for a request from the TLS handler of the
        // request's own channel, and an HTTP/2 request's channel is a stream whose pipeline has none, so every
        // HTTP/2 request would arrive without its client (and MutualTLSMiddleware would answer 403 to every
        // device speaking h2). A client offering h2 and http/1.1 in ALPN gets http/1.1.
        self.supportVersions = [.one]
        self.customCertificateVerifyCallback = nil
        self.customCertificateVerifyCallbackWithMetadata = server.verificationCallback(onRefusal: onRefusal)
    }
}

extension Request {
    /// The client the TLS handshake authenticated on this request's connection (its validated chain, leaf first),
    /// or nil when the client presented no certificate (``ClientCertificateMode/allow``) or the server does not
    /// use ``Vapor/HTTPServer/Configuration/useMutualTLS(_:mode:onRefusal:)``.
    ///
    /// Only a chain our verification callback returned is ever here: Vapor fills `peerCertificateChain` from the
    /// callback's metadata alone, never from an unverified certificate.
    public var authenticatedClient: AuthenticatedPeer? {
        guard let chain = self.peerCertificateChain else { return nil }
        return AuthenticatedPeer(validatedChain: Array(chain))
    }
}

/// Answers 403 Forbidden to requests whose connection has no authenticated client, and to clients `allow`
/// refuses. For routes that need a device when the server runs with ``ClientCertificateMode/allow``, or as a
/// second line behind ``ClientCertificateMode/require``.
public struct MutualTLSMiddleware: AsyncMiddleware {
    /// Decides whether an authenticated client may use the routes (an allow-list of subjects, say); nil allows
    /// every authenticated client.
    public let allow: (@Sendable (AuthenticatedPeer) -> Bool)?

    /// A middleware requiring an authenticated client, optionally one that `allow` accepts.
    public init(allow: (@Sendable (AuthenticatedPeer) -> Bool)? = nil) {
        self.allow = allow
    }

    public func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
        guard let client = request.authenticatedClient else {
            throw Abort(.forbidden, reason: "a client certificate is required")
        }
        if let allow, !allow(client) {
            throw Abort(.forbidden, reason: "the client \(client.subject) is not allowed here")
        }
        return try await next.respond(to: request)
    }
}
