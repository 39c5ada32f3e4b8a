import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Pinning
import PinningNIO
import X509

/// The HTTPS server behind `pinning serve` and `pinning demo`: serves exactly the identity's chain, with mutual
/// TLS through ``MutualTLSServer`` when client CAs are given; every GET gets the JSON reply of `serve`.
enum LocalHTTPSServer {
    /// The TLS configuration could not be built from the identity (bad input, not a listening problem).
    struct SetupError: Error {
        var underlying: any Error
    }

    /// How long a client has for its TLS handshake (its chain judged included) and for each HTTP/1 request head
    /// (the first from the end of the handshake, a later one from the end of the previous request: `serve` has no
    /// idle timeout of its own). Defaults no real client comes near: a handshake takes milliseconds, a head is
    /// sent at once.
    struct Deadlines: Sendable {
        var handshake: TimeAmount = .seconds(10)
        var requestHead: TimeAmount = .seconds(30)
    }

    /// Binds and starts accepting; the returned channel's `localAddress` has the port.
    static func start(
        identity: TLSIdentity,
        clientCertificateAuthorities: [Certificate],
        bind: String,
        port: Int,
        keyLog: TLSKeyLog? = nil,
        revocation: RevocationSource? = nil,
        logsRefusals: Bool = false,
        deadlines: Deadlines = Deadlines(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> any Channel {
        let tls: TLSSetup
        do {
            tls = try TLSSetup(identity: identity, clientCertificateAuthorities: clientCertificateAuthorities, keyLog: keyLog, revocation: revocation)
        } catch {
            throw SetupError(underlying: error)
        }
        let responder: SimpleHTTPResponder.Respond = { head, peer in PinningCommand.Serve.respond(head, peer: peer) }
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try tls.addHandlers(
                        to: channel.pipeline.syncOperations, remote: channel.remoteAddress, logsRefusals: logsRefusals, handshakeTimeout: deadlines.handshake)
                }.flatMap {
                    // HTTP/2 when the client offers h2 in ALPN, else HTTP/1.1 (also without ALPN). The choice is
                    // made on the handshake-completed event, which the pinning handler passes on only for a
                    // client the policy trusted.
                    channel.configureHTTP2SecureUpgrade(
                        h2ChannelConfigurator: { connection in
                            connection.configureHTTP2Pipeline(mode: .server) { stream in
                                stream.eventLoop.makeCompletedFuture {
                                    try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                                    try stream.pipeline.syncOperations.addHandler(SimpleHTTPResponder(respond: responder))
                                }
                            }.map { _ in () }
                        },
                        http1ChannelConfigurator: { connection in
                            connection.eventLoop.makeCompletedFuture {
                                try Self.addHTTP1Handlers(to: connection.pipeline.syncOperations, requestHeadTimeout: deadlines.requestHead, responder: responder)
                            }
                        }
                    )
                }
            }
            .bind(host: bind, port: port)
            .get()
    }

    /// HTTP/1.1 behind TLS: the request-head deadline around the decoder, parse errors answered in words (431 for
    /// a head over 80 KiB, 400 otherwise) and the connection closed after them, then the responder.
    static func addHTTP1Handlers(
        to pipeline: ChannelPipeline.SynchronousOperations, requestHeadTimeout: TimeAmount, responder: @escaping SimpleHTTPResponder.Respond
    ) throws {
        let deadline = RequestHeadDeadline.handlers(timeout: requestHeadTimeout, idleBetweenRequestsCounts: true, server: "pinning serve")
        try pipeline.addHandler(deadline.bytes)
        try pipeline.configureHTTPServerPipeline(withErrorHandling: false)
        let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
        try pipeline.addHandler(deadline.heads, position: .after(decoder))
        try pipeline.addHandler(HTTPParseErrorAnswer(server: "pinning serve"))
        try pipeline.addHandler(SimpleHTTPResponder(respond: responder))
    }

    /// What the server offers in ALPN, most preferred first.
    static let applicationProtocols = ["h2", "http/1.1"]
}

/// Plain TLS, or mutual TLS through ``MutualTLSServer`` when client CAs are given.
private struct TLSSetup: Sendable {
    private enum Mode: Sendable {
        case plain(NIOSSLContext)
        case mutual(MutualTLSServer)
    }

    private let mode: Mode

    init(identity: TLSIdentity, clientCertificateAuthorities: [Certificate], keyLog: TLSKeyLog?, revocation: RevocationSource?) throws {
        if clientCertificateAuthorities.isEmpty {
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: identity.certificateSources,
                privateKey: identity.privateKeySource
            )
            configuration.minimumTLSVersion = .tlsv12
            // The alert observers' secrets first (a TLS 1.3 client's alert is encrypted), then the key log as before.
            configuration.keyLogCallback = TLSAlertSecrets.shared.keyLogCallback(forwardingTo: keyLog?.callback)
            configuration.applicationProtocols = LocalHTTPSServer.applicationProtocols
            self.mode = .plain(try NIOSSLContext(configuration: configuration))
        } else {
            var mutual = MutualTLSServer.Configuration(identity: identity, clientCertificateAuthorities: clientCertificateAuthorities)
            mutual.keyLog = keyLog
            mutual.revocation = revocation
            mutual.applicationProtocols = LocalHTTPSServer.applicationProtocols
            self.mode = .mutual(try MutualTLSServer(configuration: mutual))
        }
    }

    /// `logsRefusals`: `serve` says on stderr why a client was refused (mutual TLS): one line per client whose
    /// handshake did not end trusted, whatever ended it (our policy, the TLS library, the client leaving, the
    /// handshake deadline); `demo` keeps its output to itself. Only a client that sent nothing at all is not
    /// logged (a port probe or a health check: nothing was refused).
    func addHandlers(to pipeline: ChannelPipeline.SynchronousOperations, remote: SocketAddress?, logsRefusals: Bool, handshakeTimeout: TimeAmount) throws {
        switch self.mode {
        case .plain(let context):
            guard logsRefusals else {
                try pipeline.addHandler(NIOSSLServerHandler(context: context))
                try pipeline.addHandler(HandshakeDeadlineHandler(timeout: handshakeTimeout))
                return
            }
            // Without client certificates nothing of ours judges the client, but a client may still refuse this
            // server (its certificate not trusted, no protocol in common): `serve` says so, with the alert the client
            // sent as a value read from the records (TLSAlertObserver), as nginx logs a failed SSL handshake.
            let watch = ClientWatch()
            try pipeline.addHandler(watch)
            try pipeline.addHandler(TLSAlertObserver.forServer())
            try pipeline.addHandler(NIOSSLServerHandler(context: context))
            try pipeline.addHandler(HandshakeDeadlineHandler(timeout: handshakeTimeout))
            try pipeline.addHandler(PlainHandshakeWatch(watch: watch, peer: Self.describe(remote)))
        case .mutual(let server):
            guard logsRefusals else {
                try server.addHandlers(to: pipeline)
                try pipeline.addHandler(HandshakeDeadlineHandler(timeout: handshakeTimeout))
                return
            }
            let watch = ClientWatch()
            try pipeline.addHandler(watch)
            let handshake = try server.addHandlers(to: pipeline)
            try pipeline.addHandler(HandshakeDeadlineHandler(timeout: handshakeTimeout))
            try pipeline.addHandler(DeadlineWatch(watch: watch))
            let peer = Self.describe(remote)
            let loopBound = NIOLoopBound(watch, eventLoop: pipeline.eventLoop)
            handshake.whenFailure { error in
                // Completed on the channel's event loop, as the watch's counts are kept.
                guard let line = Self.refusalLine(error, watch: loopBound.value) else { return }
                // The line quotes the client's certificate (its names): escaped, as every peer's text the CLI prints.
                FileHandle.standardError.write(Data("pinning: serve: refused the client at \(peer): \(VisibleText.escaped(line))\n".utf8))
            }
        }
    }

    /// A client's address as the refusal lines name it.
    static func describe(_ remote: SocketAddress?) -> String {
        remote.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? "a client"
    }

    /// Why a client's handshake did not end trusted, in words, or nil for a client that sent nothing.
    static func refusalLine(_ error: any Error, watch: ClientWatch) -> String? {
        if let expired = watch.expired {
            let judging = (error as? PinningConnectionError)?.message == PinningHandshakeHandler.closedWhileJudging
            return "\(expired.description)\(judging ? " (its certificate chain was still being judged)" : ""); the connection was closed"
        }
        guard let error = error as? PinningConnectionError else {
            return watch.bytesReceived == 0 ? nil : "the TLS handshake failed: \(ConnectionFailureWords.words(error))"
        }
        // A client our policy refused: the failure's code, so whoever runs the server sees why a device was turned
        // away (revoked, another CA, expired…).
        if let failure = error.trustFailure {
            return "[\(failure.code)] \(failure.reason)"
        }
        switch error.code {
        case .refusedByCheck:
            return error.message
        case .unreadablePeerCertificate:
            return "its certificate cannot be read: \(error.message)"
        case .connectionClosed where error.message == PinningHandshakeHandler.closedWhileJudging:
            return "it closed the connection while its certificate chain was being judged (\(watch.bytesReceived) bytes received)"
        default:
            guard watch.bytesReceived > 0 else { return nil }
            // The TLS library ended the handshake (no certificate, a certificate message over its limit, an alert
            // from the client, not TLS at all), or the client hung up: said from the server's side.
            let words = ConnectionFailureWords.clientHandshakeProblem(error) ?? error.message
            return "\(words) (\(watch.bytesReceived) bytes received)"
        }
    }
}

/// One client connection of `serve --client-ca`, as its refusal line needs it: the bytes the client sent (one that
/// sent none is not logged) and the deadline that cut it off, if one did. First in the pipeline; event-loop bound.
final class ClientWatch: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private(set) var bytesReceived = 0
    fileprivate(set) var expired: ConnectionDeadlineExpired?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.bytesReceived += self.unwrapInboundIn(data).readableBytes
        context.fireChannelRead(data)
    }
}

/// Behind the handshake deadline: tells the ``ClientWatch`` that the deadline cut the client off.
private final class DeadlineWatch: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    typealias InboundOut = NIOAny

    private let watch: ClientWatch

    init(watch: ClientWatch) {
        self.watch = watch
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let expired = event as? ConnectionDeadlineExpired {
            self.watch.expired = expired
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// `serve` without client CAs: one line on stderr for a client whose TLS handshake failed (it refused this server's
/// certificate, sent an alert, was not TLS, overran the handshake deadline, or hung up part way), with the alert it
/// sent when one is known. A client that sent nothing at all is not logged (a port probe). Last in the pipeline's
/// TLS part; event-loop bound.
private final class PlainHandshakeWatch: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    typealias InboundOut = NIOAny

    private let watch: ClientWatch
    private let peer: String
    /// Set once the handshake completed or a line was written: nothing more is said about this connection.
    private var settled = false

    init(watch: ClientWatch, peer: String) {
        self.watch = watch
        self.peer = peer
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls {
            self.settled = true
            // The observer ends and forgets the connection's secrets.
            (try? context.pipeline.syncOperations.handler(type: TLSAlertObserver.self))?.handshakeCompleted()
        }
        if let expired = event as? ConnectionDeadlineExpired {
            self.watch.expired = expired
            self.say("\(expired.description); the connection was closed")
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !self.settled, self.watch.bytesReceived > 0 {
            let words =
                ConnectionFailureWords.clientHandshakeProblem(error, alerts: TLSAlertObserver.alerts(of: context.channel))
                ?? "the TLS handshake failed: \(ConnectionFailureWords.words(error))"
            self.say("\(words) (\(self.watch.bytesReceived) bytes received)")
        }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !self.settled, self.watch.bytesReceived > 0 {
            self.say("the client closed the connection during the TLS handshake (\(self.watch.bytesReceived) bytes received)")
        }
        context.fireChannelInactive()
    }

    private func say(_ line: String) {
        guard !self.settled else { return }
        self.settled = true
        FileHandle.standardError.write(Data("pinning: serve: the TLS handshake with the client at \(self.peer) failed: \(VisibleText.escaped(line))\n".utf8))
    }
}
