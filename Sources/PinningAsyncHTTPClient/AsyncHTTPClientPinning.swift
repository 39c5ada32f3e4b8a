public import AsyncHTTPClient
import Foundation
public import NIOCore
public import NIOSSL
public import Pinning
public import PinningNIO
public import X509

/// Pinning for AsyncHTTPClient: everything AsyncHTTPClient allows, and a precise list of what it does not.
///
/// <!-- snippet: given(leafPin: Pin, backupLeafPin: Pin, companyRoot: Certificate, passphrase: String)
/// import AsyncHTTPClient
/// import NIOCore
/// import NIOPosix
/// import Pinning
/// import PinningNIO
/// import X509
/// -->
/// ```swift
/// let pinning = try AsyncHTTPClientPinning(
///     host: "api.example.com",
///     policy: SecurityPolicy(pinningMode: .publicKey, pins: [leafPin, backupLeafPin]),
///     settings: TrustSettings(anchors: [companyRoot], anchorsOnly: true),
///     identity: try .pkcs12(file: "client.p12", passphrase: passphrase)
/// )
/// let client = HTTPClient(eventLoopGroup: .singletonMultiThreadedEventLoopGroup,
///                         configuration: try pinning.makeHTTPClientConfiguration())
/// let response = try await client.execute(HTTPClientRequest(url: "https://api.example.com/"), timeout: .seconds(10))
/// ```
///
/// AsyncHTTPClient builds its TLS handler itself (`NIOSSLClientHandler(context:serverHostname:)`) and offers no
/// certificate-verification callback, so the whole chain can never reach our evaluator. What is enforced, and how:
///
/// | What | How | Enforced |
/// |---|---|---|
/// | Chain to the anchors | `trustRoots`: the ``/Pinning/ServerTrust`` anchors (only them when `anchorsOnly`), else the platform roots plus the anchors; BoringSSL validates the chain | yes (by BoringSSL) |
/// | Host name | NIOSSL's name check is off (`.noHostnameVerification`: it accepts an IP SAN equal to the socket address for any DNS name); after the handshake our evaluator checks the leaf's SANs against ``host`` | yes |
/// | Leaf validity period, serverAuth EKU | our evaluator, on the leaf | yes |
/// | SPKI pin of the **leaf** (``/Pinning/SecurityPolicy/PinningMode/publicKey``) | our evaluator, on the leaf | yes |
/// | Pinned **leaf** certificate (``/Pinning/SecurityPolicy/PinningMode/certificate``) | our evaluator: the leaf must be a pinned certificate; a self-signed pinned leaf is added to `trustRoots` | yes |
/// | Client identity | `certificateChain`/`privateKey` from ``/PinningNIO/TLSIdentity`` (not Ed25519: refused, ``AsyncHTTPClientPinningError/Code/unsupportedIdentity``) | yes |
/// | A refusal is immediate | `connectionPool.retryConnectionEstablishment = false` | yes |
///
/// What AsyncHTTPClient does **not** let us enforce:
/// - **SPKI pins of intermediates or roots.** After the handshake only the leaf is reachable
///   (`nioSSL_peerCertificate()`); the path BoringSSL built is not. Such a pin can never match, so every
///   connection is refused with ``/Pinning/TrustFailure/Code/pinMismatch``: it fails closed, never open, but it
///   does not work. A pin string does not say whose key it is, so this cannot be detected up front. Pin leaf
///   keys (with a backup leaf key), or use ``/PinningNIO/PinnedTLSClient``, which sees the validated path.
/// - **Pinned intermediate certificates** (a CA certificate that is not self-signed, in either pinning mode):
///   refused at configuration time with ``AsyncHTTPClientPinningError/Code/unenforceablePin``.
/// - **Pinned root certificates** (self-signed CAs) cannot be told apart from a device's own self-signed
///   certificate, so they are accepted: in public-key mode the root's key is matched against the leaf only and
///   every connection is refused; in certificate mode the connection is accepted only when that root directly
///   signed the leaf (checked), and refused when an intermediate sits in between.
/// - **``/Pinning/SecurityPolicy/allowInvalidCertificates``**: it would need `certificateVerification = .none`,
///   which turns all verification off. Refused with ``AsyncHTTPClientPinningError/Code/unenforceablePolicy``.
/// - **Our path validation** (profile, limits, name constraints as our core applies them, signature-linked
///   paths): the chain is validated by BoringSSL against the same anchors, not by our core.
/// - **Hosts other than ``host``**: the debug initializers receive only the channel, not the request's host,
///   so the leaf is checked against ``host``. A request (or a redirect) to another host is refused with
///   ``/Pinning/TrustFailure/Code/hostnameMismatch`` unless the certificate also covers ``host``; redirects are
///   therefore disallowed in the configuration this type builds. Use one client per host.
/// - **A per-request `HTTPClientRequest.tlsConfiguration`**: it replaces the trust roots (and could turn
///   verification off); the leaf check still runs, but the chain is then validated by that configuration.
///   Never set one on requests sent through a pinned client.
/// - **Session resumption**: AsyncHTTPClient's NIOSSL context keeps no client session cache, and the leaf
///   check runs on every new connection, resumed or not.
public struct AsyncHTTPClientPinning: Sendable {
    /// The one host this client talks to: the name the leaf must be valid for.
    public let host: String
    /// The policy applied to the leaf after each handshake.
    public let policy: SecurityPolicy
    /// Anchors and platform roots (turned into `trustRoots`), purpose, profile, limits: how each connection's
    /// leaf is judged.
    public let settings: TrustSettings
    /// The client certificate and key presented when a server asks for one.
    public let identity: TLSIdentity?

    /// Checks that AsyncHTTPClient can enforce `policy` and keeps the settings.
    ///
    /// - Parameters:
    ///   - host: The server's DNS name or IP address; every connection's leaf is checked against it.
    ///   - policy: The policy (see the type's documentation for what is enforced).
    ///   - settings: Anchors (`anchorsOnly` for a private PKI) and platform roots; default the platform roots.
    ///   - identity: An optional client identity for mutual TLS.
    /// - Throws: ``AsyncHTTPClientPinningError``: ``AsyncHTTPClientPinningError/Code/unenforceablePin`` for a
    ///   pinned CA certificate, ``AsyncHTTPClientPinningError/Code/unenforceablePolicy`` for
    ///   `allowInvalidCertificates`, ``AsyncHTTPClientPinningError/Code/noAnchors`` for anchors-only trust
    ///   without anchors.
    public init(
        host: String,
        policy: SecurityPolicy,
        settings: TrustSettings = .default,
        identity: TLSIdentity? = nil
    ) throws(AsyncHTTPClientPinningError) {
        let trust = settings
        if policy.allowInvalidCertificates {
            throw AsyncHTTPClientPinningError(
                code: .unenforceablePolicy,
                message: "allowInvalidCertificates would need certificateVerification = .none, which disables all verification in AsyncHTTPClient; use PinnedTLSClient"
            )
        }
        if policy.pinningMode != .none {
            // A CA that is not self-signed is an intermediate: never reachable. A self-signed certificate may be
            // the server's own (a device's `openssl req -x509` certificate carries CA:TRUE) and is allowed: as the
            // leaf it is checked; as a root it is only ever matched when it directly signed the leaf (the leaf-only
            // view validates the leaf against it), and otherwise every connection is refused.
            for certificate in policy.pinnedCertificates where Self.isCertificateAuthority(certificate) && certificate.subject != certificate.issuer {
                throw AsyncHTTPClientPinningError(
                    code: .unenforceablePin,
                    message:
                        "the pinned certificate \(certificate.subject) is a CA; only the leaf is reachable after an AsyncHTTPClient handshake, so it could never be checked; pin the leaf or use PinnedTLSClient"
                )
            }
        }
        if trust.anchorsOnly && trust.anchors.isEmpty && !(policy.pinningMode == .certificate && !policy.pinnedCertificates.isEmpty) {
            throw AsyncHTTPClientPinningError(code: .noAnchors, message: "anchors-only trust without anchors trusts nothing")
        }
        if let identity, CertificateInfo(identity.leaf).keyType == "Ed25519" {
            // AsyncHTTPClient keys its TLS contexts (and connection pools) by NIOSSL's `bestEffortHash` of the
            // configuration, which DER-encodes the private key with a `try!`; BoringSSL cannot encode an Ed25519
            // key that way, so the first request would stop the process. Refused here instead.
            throw AsyncHTTPClientPinningError(
                code: .unsupportedIdentity,
                message:
                    "the client identity \(identity.origin) has an Ed25519 key, which AsyncHTTPClient cannot use (its TLS context cache cannot encode the key); use PinnedHTTPClient, or an ECDSA or RSA identity"
            )
        }
        self.host = host
        self.policy = policy
        self.settings = settings
        self.identity = identity
    }

    /// Checks that AsyncHTTPClient can enforce `policy` and keeps the settings of a ``/Pinning/ServerTrust`` template (its
    /// certificates are ignored).
    ///
    /// - Throws: as ``init(host:policy:settings:identity:)``, and ``AsyncHTTPClientPinningError/Code/fixedValidationTime``
    ///   when the template fixes ``/Pinning/ServerTrust/validationTime`` (it would freeze the client's clock).
    @available(*, deprecated, message: "pass settings: TrustSettings; a ServerTrust template can freeze the client's clock")
    public init(
        host: String,
        policy: SecurityPolicy,
        trust: ServerTrust,
        identity: TLSIdentity? = nil
    ) throws(AsyncHTTPClientPinningError) {
        let settings: TrustSettings
        do {
            settings = try TrustSettings.ofTemplate(trust, for: "AsyncHTTPClientPinning(trust:)")
        } catch {
            throw AsyncHTTPClientPinningError(code: .fixedValidationTime, message: error.description)
        }
        try self.init(host: host, policy: policy, settings: settings, identity: identity)
    }

    /// The settings as an empty ``/Pinning/ServerTrust`` (what the deprecated `trust:` form held).
    @available(*, deprecated, renamed: "settings")
    public var trust: ServerTrust { ServerTrust(certificates: [], settings: self.settings) }

    /// The TLS configuration: trust roots from ``trust`` (plus self-signed pinned certificates in
    /// certificate mode), `.noHostnameVerification`, TLS 1.2 or later, the client identity.
    ///
    /// - Throws: ``AsyncHTTPClientPinningError/Code/invalidTLSConfiguration`` when NIOSSL cannot load a certificate.
    public func makeTLSConfiguration() throws(AsyncHTTPClientPinningError) -> TLSConfiguration {
        // The pinned clients' base configuration (PinningNIO): TLS 1.2 or later, the signature algorithms and
        // groups that reach Ed25519 and P-521 servers, the identity. Its trust roots are replaced below.
        var configuration = TLSConfiguration.makePinnedClientConfiguration(identity: self.identity)
        // Never .fullVerification: NIOSSL's name check accepts a certificate whose IP SAN equals the socket's
        // address for any DNS name. Never .none: that validates nothing. Names are checked on the leaf by us.
        configuration.certificateVerification = .noHostnameVerification
        var extra = self.settings.anchors
        if self.policy.pinningMode == .certificate {
            // AFSecurityPolicy's certificate mode makes the pinned certificates anchors. BoringSSL only accepts a
            // self-signed certificate as a root, so only those are added; a CA-issued pinned leaf still chains
            // to the other anchors, and the leaf check requires it to be one of the pinned certificates.
            extra += self.policy.pinnedCertificates.filter { $0.subject == $0.issuer }
        }
        let extraRoots = try Self.nio(extra)
        if self.settings.anchorsOnly {
            configuration.trustRoots = .certificates(extraRoots)
        } else if let platform = self.settings.platformRoots {
            configuration.trustRoots = .certificates(try Self.nio(platform.certificates) + extraRoots)
        } else {
            configuration.trustRoots = .default
            if !extraRoots.isEmpty {
                configuration.additionalTrustRoots = [.certificates(extraRoots)]
            }
        }
        return configuration
    }

    /// An AsyncHTTPClient configuration that enforces this pinning: ``makeTLSConfiguration()``, the leaf check in
    /// both connection debug initializers, `retryConnectionEstablishment = false` (a refusal fails the request
    /// at once instead of after seconds of retries), redirects disallowed (the leaf is checked against
    /// ``host`` only).
    ///
    /// - Parameter base: Other settings (timeouts, proxy, decompression); its TLS configuration, debug
    ///   initializers, retry and redirect settings are replaced.
    public func makeHTTPClientConfiguration(
        base: HTTPClient.Configuration = HTTPClient.Configuration()
    ) throws(AsyncHTTPClientPinningError) -> HTTPClient.Configuration {
        var configuration = base
        configuration.tlsConfiguration = try self.makeTLSConfiguration()
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.redirectConfiguration = .disallow
        let check = self.connectionCheck()
        configuration.http1_1ConnectionDebugInitializer = check
        configuration.http2ConnectionDebugInitializer = check
        return configuration
    }

    /// The check both debug initializers run: reads the leaf from the channel's NIOSSL handler, applies
    /// ``evaluateLeaf(_:)``, and on refusal closes the channel and fails with a ``/PinningNIO/PinningConnectionError``
    /// carrying the ``/Pinning/TrustFailure``.
    public func connectionCheck() -> @Sendable (any Channel) -> EventLoopFuture<Void> {
        let pinning = self
        return { channel in
            let promise = channel.eventLoop.makePromise(of: Void.self)
            channel.nioSSL_peerCertificate().whenComplete { result in
                // On the channel's event loop, not the cooperative pool: see PinningNIO's EventLoopTaskExecutor.
                Task(executorPreference: EventLoopTaskExecutor(channel.eventLoop)) {
                    do {
                        try await pinning.verify(result)
                        promise.succeed()
                    } catch {
                        promise.fail(error)
                    }
                }
            }
            return promise.futureResult.flatMap {
                // The check is asynchronous; if the server closed the connection meanwhile (a TLS 1.3 server
                // refusing our certificate after our handshake completed), report it now. Handing AHC a connection
                // that is already closed left its request waiting past its own deadline. This runs on the
                // channel's event loop, where AHC continues, so nothing can close it in between.
                guard channel.isActive else {
                    return channel.eventLoop.makeFailedFuture(
                        PinningConnectionError(
                            code: .connectionClosed, host: pinning.host,
                            message: "the server closed the connection during the TLS handshake (did it require a client certificate?)"
                        ))
                }
                return channel.eventLoop.makeSucceededVoidFuture()
            }.flatMapError { error in
                channel.close(promise: nil)
                return channel.eventLoop.makeFailedFuture(error)
            }
        }
    }

    func verify(_ peer: Result<NIOSSLCertificate?, any Error>) async throws(PinningConnectionError) {
        let leaf: Certificate
        do {
            guard let certificate = try peer.get() else {
                throw PinningConnectionError(code: .unreadablePeerCertificate, host: self.host, message: "the server presented no certificate")
            }
            guard let parsed = try ServerTrust.presentedCertificates(fromDER: [try certificate.toDERBytes()]).first else {
                throw PinningConnectionError(code: .unreadablePeerCertificate, host: self.host, message: "the server's certificate cannot be read")
            }
            leaf = parsed
        } catch let error as PinningConnectionError {
            throw error
        } catch {
            throw PinningConnectionError(code: .unreadablePeerCertificate, host: self.host, message: "the server's certificate cannot be read", underlying: error)
        }
        if case .untrusted(let failure) = await self.evaluateLeaf(leaf) {
            throw PinningConnectionError.untrusted(failure, host: self.host)
        }
    }

    /// The leaf-only view: BoringSSL has already validated the chain to the configured roots, so the leaf stands
    /// in for that path as its own (only) anchor; the policy then checks the name, the validity period, the
    /// serverAuth EKU and the pins on that one certificate.
    ///
    /// - Warning: Called on a leaf that did not come out of a handshake validated against ``makeTLSConfiguration()``,
    ///   this checks no chain at all.
    public func evaluateLeaf(_ leaf: Certificate) async -> TrustEvaluation {
        var trust = ServerTrust(certificates: [leaf], settings: self.settings)
        trust.anchors = [leaf]
        trust.anchorsOnly = true
        return await self.policy.evaluate(trust, forDomain: self.host)
    }

    static func isCertificateAuthority(_ certificate: Certificate) -> Bool {
        do {
            if let constraints = try certificate.extensions.basicConstraints, case .isCertificateAuthority = constraints {
                return true
            }
        } catch {
            // A malformed basicConstraints is no evidence of a leaf: treat it as a CA (refuse the pin).
            return true
        }
        return false
    }

    static func nio(_ certificates: [Certificate]) throws(AsyncHTTPClientPinningError) -> [NIOSSLCertificate] {
        var converted: [NIOSSLCertificate] = []
        for certificate in certificates {
            do {
                converted.append(try NIOSSLCertificate(bytes: certificate.derBytes, format: .der))
            } catch {
                throw AsyncHTTPClientPinningError(code: .invalidTLSConfiguration, message: "NIOSSL cannot load \(certificate.subject): \(error)")
            }
        }
        return converted
    }
}
