public import GRPCCore
public import GRPCNIOTransportHTTP2Posix
import NIOConcurrencyHelpers
public import NIOCore
public import NIOPosix
import NIOSSL
public import Pinning
public import PinningNIO
public import X509

/// A mutual-TLS gRPC server transport: every connection is accepted through ``PinningNIO/MutualTLSServer``'s
/// handlers (the client's chain judged against the client CAs with the clientAuth purpose, the optional pins,
/// CRLs, `clientCheck`, resumed sessions checked again), then served by grpc-swift-nio-transport's HTTP/2
/// server (`HTTP2ServerTransport.Custom`, which takes the listener from us for exactly this).
///
/// A client that is refused never reaches a service: its handshake fails and the connection closes. Services
/// read the validated client with ``GRPCCore/ServerContext/authenticatedClient``.
///
/// Why not `HTTP2ServerTransport.Posix` with its `customVerificationCallback`: it shares one TLS context per
/// listener, so a client resuming a session skips the callback, and the validated chain is then absent (the
/// transport falls back to the unvalidated leaf of the session). Through ``PinningNIO/MutualTLSServer`` a
/// resumed session is judged again (an expired or revoked device cannot resume), and refusals carry the
/// policy's reason in ``/PinningNIO/PinningConnectionError``.
///
/// <!-- snippet: given(identity: TLSIdentity, deviceCA: Certificate, services: [any RegistrableRPCService])
/// import GRPCCore
/// import PinningNIO
/// import X509
/// -->
/// ```swift
/// let transport = MutualTLSGRPCServerTransport(
///     host: "0.0.0.0", port: 8443,
///     server: try MutualTLSServer.makeGRPC(identity: identity, clientCertificateAuthorities: [deviceCA])  // offers ALPN h2
/// )
/// try await GRPCServer(transport: transport, services: services).serve()   // until beginGracefulShutdown()
/// ```
///
/// - Important: Needs macOS 15, iOS 18, tvOS 18, watchOS 11 or visionOS 2 on Apple platforms, as grpc-swift 2's
///   own transports do, while swift-pinning declares macOS 13: mark the code that uses it
///   `@available(macOS 15.0, *)` or declare `.macOS(.v15)` in your package. Linux has no such limit.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
public final class MutualTLSGRPCServerTransport: ListeningServerTransport {
    public typealias Bytes = GRPCNIOTransportBytes

    /// The mutual-TLS settings every connection is accepted with.
    public let server: MutualTLSServer
    private let listener: Listener
    private let base: HTTP2ServerTransport.Custom<Listener>

    /// A transport listening on `host`:`port` (port 0 picks a free port; read ``listeningAddress``).
    ///
    /// - Parameters:
    ///   - host: The address to bind.
    ///   - port: The port to bind.
    ///   - server: The mutual-TLS settings. It must offer ALPN `h2`
    ///     (``PinningNIO/MutualTLSServer/makeGRPC(configuration:)``
    ///     does): gRPC clients other than grpc-swift's require it.
    ///   - config: grpc-swift-nio-transport's HTTP/2 and RPC settings.
    ///   - eventLoopGroup: The event loops connections run on.
    public init(
        host: String,
        port: Int,
        server: MutualTLSServer,
        config: HTTP2ServerTransport.Custom<Listener>.Config = .defaults,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.server = server
        self.listener = Listener(host: host, port: port, server: server, eventLoopGroup: eventLoopGroup)
        self.base = HTTP2ServerTransport.Custom(listenerFactory: self.listener, config: config)
    }

    /// The bound address, once the transport listens.
    public var listeningAddress: GRPCNIOTransportCore.SocketAddress {
        get async throws {
            let bound = try await self.listener.bound.get()
            switch bound {
            case .v4:
                return .ipv4(host: bound.ipAddress ?? "", port: bound.port ?? 0)
            case .v6:
                return .ipv6(host: bound.ipAddress ?? "", port: bound.port ?? 0)
            case .unixDomainSocket:
                return .unixDomainSocket(path: bound.pathname ?? "")
            }
        }
    }

    public func configure(context: GRPCServerContext) {
        self.base.configure(context: context)
    }

    public func listen(
        streamHandler: @escaping @Sendable (RPCStream<Inbound, Outbound>, ServerContext) async -> Void
    ) async throws {
        let clients = self.listener.clients
        try await self.base.listen { stream, context in
            var context = context
            context.transportSpecific = MutualTLSGRPCContext(client: clients.client(forRemotePeer: context.remotePeer))
            await streamHandler(stream, context)
        }
    }

    public func beginGracefulShutdown() {
        self.base.beginGracefulShutdown()
    }

    /// Binds the listening socket; each accepted connection gets ``PinningNIO/MutualTLSServer``'s handlers, then
    /// the gRPC pipeline.
    public struct Listener: HTTP2ServerTransport.ListenerFactory {
        public let eventLoopGroup: any EventLoopGroup
        let host: String
        let port: Int
        let server: MutualTLSServer
        let clients = ConnectedClients()
        private let boundPromise: EventLoopPromise<NIOCore.SocketAddress>

        init(host: String, port: Int, server: MutualTLSServer, eventLoopGroup: any EventLoopGroup) {
            self.eventLoopGroup = eventLoopGroup
            self.host = host
            self.port = port
            self.server = server
            self.boundPromise = eventLoopGroup.any().makePromise()
        }

        var bound: EventLoopFuture<NIOCore.SocketAddress> { self.boundPromise.futureResult }

        public func makeListeningChannel(
            listenerConfigurator: HTTP2ServerTransport.ListenerConfigurator,
            connectionConfigurator: HTTP2ServerTransport.ConnectionConfigurator
        ) async throws -> NIOAsyncChannel<HTTP2ServerTransport.ConnectionConfigurator.ConnectionChannel, Never> {
            let server = self.server
            let clients = self.clients
            do {
                let channel = try await ServerBootstrap(group: self.eventLoopGroup)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .serverChannelInitializer { channel in listenerConfigurator.configure(channel: channel) }
                    .bind(host: self.host, port: self.port) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            let handshake = try server.addHandlers(to: channel.pipeline.syncOperations)
                            // Completed on the event loop when the handshake succeeds, before any HTTP/2 frame
                            // is read, so the client is known before its first stream starts.
                            handshake.whenSuccess { handshake in
                                clients.record(handshake.peer, for: channel)
                            }
                            channel.closeFuture.whenComplete { _ in clients.forget(channel) }
                        }.flatMap {
                            connectionConfigurator.configure(channel: channel, tls: .configured(requireALPN: false))
                        }
                    }
                if let address = channel.channel.localAddress {
                    self.boundPromise.succeed(address)
                } else {
                    self.boundPromise.fail(PinningConnectionError(code: .connectFailed, host: self.host, message: "the listening socket has no address"))
                }
                return channel
            } catch {
                self.boundPromise.fail(error)
                throw error
            }
        }
    }
}

/// What a ``MutualTLSGRPCServerTransport`` tells each RPC about its connection.
public struct MutualTLSGRPCContext: ServerContext.TransportSpecific {
    /// The client the handshake authenticated (the validated chain, leaf first).
    public var client: AuthenticatedPeer?
}

extension ServerContext {
    /// The client ``MutualTLSGRPCServerTransport`` authenticated on this RPC's connection, or nil on any other
    /// transport.
    public var authenticatedClient: AuthenticatedPeer? {
        (self.transportSpecific as? MutualTLSGRPCContext)?.client
    }
}

/// The authenticated client of each open connection, by the remote address as gRPC names it in
/// `ServerContext.remotePeer` (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`): the custom transport gives services
/// no other handle on their connection. Entries are removed when the connection closes; a connection's address
/// is unique while it is open.
final class ConnectedClients: Sendable {
    private let clients = NIOLockedValueBox<[String: AuthenticatedPeer]>([:])

    static func peerName(_ address: NIOCore.SocketAddress?) -> String? {
        // gRPC formats `remotePeer` from NIO's `host` of the address, as here (Channel+AddressInfo.swift in
        // grpc-swift-nio-transport); for an accepted connection that is the textual IP address.
        switch address {
        case .v4(let v4)?:
            return address?.port.map { "ipv4:\(v4.host):\($0)" }
        case .v6(let v6)?:
            return address?.port.map { "ipv6:[\(v6.host)]:\($0)" }
        case .unixDomainSocket?, nil:
            return nil
        }
    }

    func record(_ peer: AuthenticatedPeer, for channel: any Channel) {
        guard let name = Self.peerName(channel.remoteAddress) else { return }
        self.clients.withLockedValue { $0[name] = peer }
    }

    func forget(_ channel: any Channel) {
        guard let name = Self.peerName(channel.remoteAddress) else { return }
        _ = self.clients.withLockedValue { $0.removeValue(forKey: name) }
    }

    func client(forRemotePeer name: String) -> AuthenticatedPeer? {
        self.clients.withLockedValue { $0[name] }
    }
}

extension MutualTLSServer {
    /// A mutual-TLS server for gRPC: ``/PinningNIO/MutualTLSServer/init(configuration:)`` with ALPN `h2` (whatever
    /// `configuration.applicationProtocols` says: gRPC is HTTP/2 only).
    public static func makeGRPC(configuration: Configuration) throws -> MutualTLSServer {
        var configuration = configuration
        configuration.applicationProtocols = ["h2"]
        return try MutualTLSServer(configuration: configuration)
    }

    /// ``makeGRPC(configuration:)`` with a ``/PinningNIO/MutualTLSServer/Configuration`` of these three.
    public static func makeGRPC(identity: TLSIdentity, clientCertificateAuthorities: [Certificate], clientRule: ClientRule = .builtIn()) throws -> MutualTLSServer {
        try self.makeGRPC(configuration: Configuration(identity: identity, clientCertificateAuthorities: clientCertificateAuthorities, clientRule: clientRule))
    }

    /// The parameter-list form of ``makeGRPC(configuration:)``.
    @available(*, deprecated, message: "use makeGRPC(configuration:) with a MutualTLSServer.Configuration")
    public static func makeGRPC(
        identity: TLSIdentity,
        clientCertificateAuthorities: [Certificate],
        allowedClientPins: [Pin] = [],
        clientCheck: ClientCheck? = nil,
        revocation: RevocationSource? = nil,
        evaluationCache: EvaluationCache? = nil
    ) throws -> MutualTLSServer {
        var configuration = Configuration(
            identity: identity, clientCertificateAuthorities: clientCertificateAuthorities, clientRule: .builtIn(pins: allowedClientPins, cache: evaluationCache))
        configuration.clientCheck = clientCheck
        configuration.revocation = revocation
        return try self.makeGRPC(configuration: configuration)
    }
}
