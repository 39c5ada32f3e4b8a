public import GRPCCore
public import GRPCNIOTransportHTTP2Posix
public import NIOCore
public import NIOPosix
public import NIOSSL
public import Pinning
public import PinningNIO

/// A gRPC client transport whose every connection is made by ``/PinningNIO/PinnedTLSClient``: the server's chain,
/// name, pins, configuration entries and revocation are judged by the product's policy before the first HTTP/2
/// frame is exchanged, on every connection the transport opens (reconnects included).
///
/// It is grpc-swift-nio-transport's own `HTTP2ClientTransport.Posix` (name resolution, load balancing,
/// keep-alive, back-off, compression) with its TLS left to us: `TransportSecurity.customSecure`, which the
/// transport documents for exactly this, and the handlers that ``/PinningNIO/PinnedTLSClient`` makes (the one
/// connection path every client of this package uses) put at the front of each new connection's pipeline
/// through `channelDebuggingCallbacks.onCreateTCPConnection`, the hook that `customSecure` names.
///
/// A refusal reaches the caller as an `RPCError` with code `.unavailable` whose message starts with
/// `certificate refused by the pinning policy:` and carries the ``/Pinning/TrustFailure``'s code and reason
/// (`…: pinMismatch: api.example.com: no certificate on the validated path matches a pin`); the transport's
/// own error stays its `cause`, and ``PinnedGRPCRefusal/find(in:)`` returns the full
/// ``/PinningNIO/PinningConnectionError``. Without `waitForReady` (gRPC's
/// default) the call fails as soon as the connection is refused; with it, the call waits as gRPC waits for
/// any unreachable server, and fails with the same message when its deadline passes.
///
/// <!-- snippet: given(pins: [Pin], settings: TrustSettings)
/// import GRPCCore
/// import Pinning
/// -->
/// ```swift
/// let transport = try PinnedGRPCClientTransport(
///     host: "api.example.com", port: 443,
///     evaluator: SecurityPolicy(pinningMode: .publicKey, pins: pins),
///     settings: settings  // what the chain is validated against: TrustSettings(anchors: [privateCA], anchorsOnly: true)
/// )
/// try await withGRPCClient(transport: transport) { client in
///     // Generated clients take it unchanged: Devices.Client(wrapping: client).
/// }
/// ```
///
/// To give a ``/PinningNIO/PinnedTLSClient`` of your own, use ``init(host:port:client:address:config:serviceConfig:eventLoopGroup:)``
/// and make its configuration with ``NIOSSL/TLSConfiguration/makePinnedGRPCClientConfiguration(identity:)``: gRPC
/// requires ALPN `h2`, and a client without it is refused when the transport is made.
///
/// - Important: Needs macOS 15, iOS 18, tvOS 18, watchOS 11 or visionOS 2 on Apple platforms, as grpc-swift 2's
///   own transports do, while swift-pinning declares macOS 13: mark the code that uses it
///   `@available(macOS 15.0, *)` or declare `.macOS(.v15)` in your package. Linux has no such limit.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
public struct PinnedGRPCClientTransport: ClientTransport {
    public typealias Bytes = GRPCNIOTransportBytes

    /// The name every server certificate is checked against (and sent as SNI when it is a DNS name).
    public let host: String
    /// The pinned TLS client whose handlers secure each connection.
    public let client: PinnedTLSClient
    private let base: HTTP2ClientTransport.Posix

    /// A transport to `host`:`port`, each connection secured by `client`.
    ///
    /// - Parameters:
    ///   - host: The server's name: resolved (unless `address` is given), checked by the policy, sent as SNI.
    ///   - port: The server's port.
    ///   - client: The pinned client. Make its configuration offer ALPN `h2`
    ///     (``NIOSSL/TLSConfiguration/makePinnedGRPCClientConfiguration(identity:)``): gRPC servers other than grpc-swift's require it.
    ///   - address: Where to connect instead of resolving `host` (as curl's `--resolve`); the policy still
    ///     checks `host`.
    ///   - config: grpc-swift-nio-transport's connection settings. Its `onCreateTCPConnection` callback, if
    ///     set, runs after the pinned handlers are added.
    ///   - serviceConfig: gRPC's service configuration (retries, timeouts, load balancing).
    ///   - eventLoopGroup: The event loops connections run on.
    /// - Throws: ``/PinningNIO/PinningConnectionError`` (`invalidRequest`) when `client` does not offer ALPN `h2`
    ///   (gRPC over TLS requires it, and a server that enforces it would refuse every connection with a bare
    ///   handshake failure); `RuntimeError` from the transport when `host` cannot be made into a target.
    public init(
        host: String,
        port: Int,
        client: PinnedTLSClient,
        address: NIOCore.SocketAddress? = nil,
        config: HTTP2ClientTransport.Posix.Config = .defaults,
        serviceConfig: ServiceConfig = ServiceConfig(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        guard client.configuration.applicationProtocols.contains("h2") else {
            throw PinningConnectionError(
                code: .invalidRequest, host: host,
                message: "the pinned client does not offer ALPN h2, which gRPC requires; make its configuration with TLSConfiguration.makePinnedGRPCClientConfiguration(identity:)"
            )
        }
        self.host = host
        self.client = client
        var config = config
        let theirs = config.channelDebuggingCallbacks.onCreateTCPConnection
        config.channelDebuggingCallbacks.onCreateTCPConnection = { channel in
            let secured = channel.eventLoop.makeCompletedFuture {
                let (handlers, _) = try client.makeClientTLSHandlerChain(host: host, port: port)
                // First in the pipeline: everything the transport added (HTTP/2, gRPC) sits behind TLS, and
                // the pinning handler holds every inbound byte until the policy trusted this connection.
                try channel.pipeline.syncOperations.addHandlers(handlers, position: .first)
            }
            guard let theirs else { return secured }
            return secured.flatMap { theirs(channel) }
        }
        self.base = try HTTP2ClientTransport.Posix(
            target: Self.target(host: host, port: port, address: address),
            transportSecurity: .customSecure,
            config: config,
            serviceConfig: serviceConfig,
            eventLoopGroup: eventLoopGroup
        )
    }

    /// A transport judged by `evaluator` with `settings`, presenting `identity` when the server asks for one.
    ///
    /// - Throws: when NIOSSL cannot build the TLS context (an unusable identity), or the target is invalid.
    public init(
        host: String,
        port: Int,
        evaluator: any ServerTrustEvaluating,
        settings: TrustSettings = .default,
        identity: TLSIdentity? = nil,
        address: NIOCore.SocketAddress? = nil,
        config: HTTP2ClientTransport.Posix.Config = .defaults,
        serviceConfig: ServiceConfig = ServiceConfig(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        let client = try PinnedTLSClient(
            evaluator: evaluator,
            settings: settings,
            identity: identity,
            configuration: .makePinnedGRPCClientConfiguration(identity: identity)
        )
        try self.init(
            host: host, port: port, client: client, address: address, config: config, serviceConfig: serviceConfig,
            eventLoopGroup: eventLoopGroup)
    }

    /// A transport whose every new connection is judged by the configuration `source` holds when its handshake
    /// happens (a ``/PinningNIO/PinSetUpdater`` following a signed pin set): ``/PinningNIO/PinnedTLSClient``'s
    /// ``/PinningNIO/PinnedTLSClient/init(configurationSource:settings:identity:configuration:keyLog:)``, offering
    /// ALPN `h2`. A newer configuration applies from the next connection the transport opens (after the server
    /// closes one, say at its maximum connection age, or after a failure); connections already open, and the RPCs
    /// on them, are left as they are. With no configuration yet every connection is refused.
    ///
    /// - Throws: as ``init(host:port:evaluator:settings:identity:address:config:serviceConfig:eventLoopGroup:)``.
    public init(
        host: String,
        port: Int,
        configurationSource source: any PinningConfigurationSource,
        settings: TrustSettings = .default,
        identity: TLSIdentity? = nil,
        address: NIOCore.SocketAddress? = nil,
        config: HTTP2ClientTransport.Posix.Config = .defaults,
        serviceConfig: ServiceConfig = ServiceConfig(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        let client = try PinnedTLSClient(
            configurationSource: source,
            settings: settings,
            identity: identity,
            configuration: .makePinnedGRPCClientConfiguration(identity: identity)
        )
        try self.init(
            host: host, port: port, client: client, address: address, config: config, serviceConfig: serviceConfig,
            eventLoopGroup: eventLoopGroup)
    }

    private static func target(host: String, port: Int, address: NIOCore.SocketAddress?) -> any ResolvableTarget {
        // NIO's `host` of an address is the name it was made from (often empty); `ipAddress` is the address.
        switch address {
        case .v4?:
            return .ipv4(address: address?.ipAddress ?? "", port: port)
        case .v6?:
            return .ipv6(address: address?.ipAddress ?? "", port: port)
        case .unixDomainSocket?:
            return .unixDomainSocket(path: address?.pathname ?? "")
        case nil:
            return .dns(host: host, port: port)
        }
    }

    public var retryThrottle: RetryThrottle? { self.base.retryThrottle }

    public func connect() async throws {
        try await self.base.connect()
    }

    public func beginGracefulShutdown() {
        self.base.beginGracefulShutdown()
    }

    public func config(forMethod descriptor: MethodDescriptor) -> MethodConfig? {
        self.base.config(forMethod: descriptor)
    }

    public func withStream<T: Sendable>(
        descriptor: MethodDescriptor,
        options: CallOptions,
        _ closure: (RPCStream<Inbound, Outbound>, ClientContext) async throws -> T
    ) async throws -> T {
        do {
            return try await self.base.withStream(descriptor: descriptor, options: options, closure)
        } catch let error as RPCError {
            throw Self.naming(PinnedGRPCRefusal.find(in: error), in: error)
        }
    }

    /// `error` with the pinning refusal found in its causes put first in its message, or `error` unchanged.
    static func naming(_ refusal: PinningConnectionError?, in error: RPCError) -> RPCError {
        guard let refusal else { return error }
        // `pinMismatch: device.local: no certificate on the validated path matches a pin`: the code first, as
        // `pinning check` prints it; the transport's own words stay in the cause.
        let reason: String
        if let failure = refusal.trustFailure {
            reason = "\(failure.code): \(failure.host.map { "\($0): " } ?? "")\(failure.reason)"
        } else {
            reason = refusal.description
        }
        // The cause is set after the error is made: GRPCCore's initialiser, given an RPCError cause of the same code,
        // appends the cause's message to ours ("… The server accepted the TCP connection but closed the connection
        // before completing the HTTP/2 connection preface."), which blames the server for what this client refused.
        var named = RPCError(code: error.code, message: "certificate refused by the pinning policy: \(reason).", metadata: error.metadata)
        named.cause = error
        return named
    }
}

/// Finds the pinning policy's refusal among the causes of a gRPC error.
public enum PinnedGRPCRefusal {
    /// The first ``/PinningNIO/PinningConnectionError`` in `error`'s chain of causes (RPCError's `cause`, the
    /// transport's own errors wrap the connection's failure), or nil when the failure was not a refusal.
    public static func find(in error: any Error) -> PinningConnectionError? {
        var current: (any Error)? = error
        // Bounded: a cause chain is a handful deep; a cycle cannot hang us.
        for _ in 0..<16 {
            switch current {
            case let refusal as PinningConnectionError:
                return refusal
            case let rpc as RPCError:
                current = rpc.cause
            case let runtime as RuntimeError:
                current = runtime.cause
            default:
                return nil
            }
        }
        return nil
    }
}

extension TLSConfiguration {
    /// ``/PinningNIO/NIOSSL/TLSConfiguration/makePinnedClientConfiguration(identity:)`` offering ALPN `h2`, as
    /// gRPC over TLS requires.
    public static func makePinnedGRPCClientConfiguration(identity: TLSIdentity? = nil) -> TLSConfiguration {
        var configuration = TLSConfiguration.makePinnedClientConfiguration(identity: identity)
        configuration.applicationProtocols = ["h2"]
        return configuration
    }
}
