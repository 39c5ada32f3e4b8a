public import HummingbirdCore
public import Logging
import NIOConcurrencyHelpers
public import NIOCore
public import PinningNIO

/// A Hummingbird child channel that puts a ``/PinningNIO/MutualTLSServer`` in front of a base channel (HTTP/1.1).
///
/// Why not HummingbirdTLS's `TLSChannel` with `customAsyncVerificationCallback`: that channel installs NIOSSL's
/// callback *without metadata*, so after the handshake only the client's leaf is reachable
/// (`nioSSL_peerCertificate()`), and the path our evaluator validated (leaf → intermediates → the client CA) is
/// lost. This channel installs ``/PinningNIO/MutualTLSServer``'s handlers instead: the metadata callback runs our
/// evaluator (clientAuth EKU, the client CAs as the only anchors, the optional SPKI allow-list), a fresh
/// `NIOSSLContext` per connection rules out session resumption skipping that check, and the handshake's
/// ``/PinningNIO/AuthenticatedPeer`` (the *validated* chain and the identity) is recorded for the connection,
/// where ``MutualTLSRequestContext`` picks it up for every request.
public struct MutualTLSChannel<BaseChannel: ServerChildChannel>: ServerChildChannel {
    /// The wrapped HTTP channel's connection value.
    public typealias Value = BaseChannel.Value

    /// The mTLS settings.
    public let server: MutualTLSServer
    /// The wrapped channel (HTTP/1.1).
    public var baseChannel: BaseChannel

    /// Wraps `baseChannel`.
    public init(_ baseChannel: BaseChannel, server: MutualTLSServer) {
        self.baseChannel = baseChannel
        self.server = server
    }

    /// Adds the mutual-TLS handlers (our client-certificate evaluator) in front of the HTTP channel's own.
    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let handshake = try self.server.addHandlers(to: channel.pipeline.syncOperations)
            // Completed on the event loop when the handshake succeeds, before any request bytes are decrypted,
            // so the client is known before the first request's context is built.
            handshake.whenSuccess { handshake in
                AuthenticatedClients.record(handshake.peer, for: channel)
            }
            channel.closeFuture.whenComplete { _ in
                AuthenticatedClients.forget(channel)
            }
        }.flatMap {
            self.baseChannel.setup(channel: channel, logger: logger)
        }
    }

    /// Serves the connection, recording its validated client for the request contexts while it is open.
    public func handle(value: BaseChannel.Value, logger: Logger) async {
        await self.baseChannel.handle(value: value, logger: logger)
    }
}

extension MutualTLSChannel: HTTPChannelHandler where BaseChannel: HTTPChannelHandler {
    /// The application's responder.
    public var responder: HTTPChannelHandler.Responder { self.baseChannel.responder }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 over mutual TLS: every client must present a certificate that ``/PinningNIO/MutualTLSServer``
    /// validates; handlers read it through ``MutualTLSRequestContext/client``.
    ///
    /// <!-- snippet: given(router: Router<MutualTLSRequestContext>, id: TLSIdentity, ca: Certificate)
    /// import Hummingbird
    /// import PinningNIO
    /// import X509
    /// -->
    /// ```swift
    /// let app = Application(router: router, server: .mutualTLS(server: try MutualTLSServer(identity: id, clientCertificateAuthorities: [ca])))
    /// ```
    ///
    /// - Parameters:
    ///   - server: The mTLS configuration.
    ///   - configuration: The HTTP/1.1 channel configuration.
    public static func mutualTLS(server: MutualTLSServer, configuration: HTTP1Channel.Configuration = .init()) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            MutualTLSChannel(HTTP1Channel(responder: responder, configuration: configuration), server: server)
        }
    }
}

/// The authenticated client of each open mTLS connection, keyed by channel; entries are removed when the
/// channel closes.
enum AuthenticatedClients {
    private static let clients = NIOLockedValueBox<[ObjectIdentifier: AuthenticatedPeer]>([:])

    static func record(_ peer: AuthenticatedPeer, for channel: any Channel) {
        self.clients.withLockedValue { $0[ObjectIdentifier(channel)] = peer }
    }

    static func forget(_ channel: any Channel) {
        _ = self.clients.withLockedValue { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    static func client(of channel: any Channel) -> AuthenticatedPeer? {
        self.clients.withLockedValue { $0[ObjectIdentifier(channel)] }
    }
}
