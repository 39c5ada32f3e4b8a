import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
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

    /// Binds and starts accepting; the returned channel's `localAddress` has the port.
    static func start(
        identity: TLSIdentity,
        clientCertificateAuthorities: [Certificate],
        bind: String,
        port: Int,
        keyLog: TLSKeyLog? = nil,
        revocation: RevocationSource? = nil,
        logsRefusals: Bool = false,
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
                    try tls.addHandlers(to: channel.pipeline.syncOperations, remote: channel.remoteAddress, logsRefusals: logsRefusals)
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
                                try connection.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                                try connection.pipeline.syncOperations.addHandler(SimpleHTTPResponder(respond: responder))
                            }
                        }
                    )
                }
            }
            .bind(host: bind, port: port)
            .get()
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
            configuration.keyLogCallback = keyLog?.callback
            configuration.applicationProtocols = LocalHTTPSServer.applicationProtocols
            self.mode = .plain(try NIOSSLContext(configuration: configuration))
        } else {
            self.mode = .mutual(
                try MutualTLSServer(
                    identity: identity, clientCertificateAuthorities: clientCertificateAuthorities, keyLog: keyLog, revocation: revocation,
                    applicationProtocols: LocalHTTPSServer.applicationProtocols))
        }
    }

    /// `logsRefusals`: `serve` says on stderr why a client was refused; `demo` keeps its output to itself.
    func addHandlers(to pipeline: ChannelPipeline.SynchronousOperations, remote: SocketAddress?, logsRefusals: Bool) throws {
        switch self.mode {
        case .plain(let context):
            try pipeline.addHandler(NIOSSLServerHandler(context: context))
        case .mutual(let server):
            let handshake = try server.addHandlers(to: pipeline)
            guard logsRefusals else { return }
            let peer = remote.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? "a client"
            handshake.whenFailure { error in
                // A client our policy refused is one line on stderr, with the failure's code, so whoever runs
                // the server sees why a device was turned away (revoked, another CA, expired…). Clients that
                // merely hang up are not logged.
                guard let error = error as? PinningConnectionError else { return }
                let line: String
                if let failure = error.trustFailure {
                    line = "pinning: serve: refused the client at \(peer): [\(failure.code)] \(failure.reason)"
                } else if error.code == .refusedByCheck {
                    line = "pinning: serve: refused the client at \(peer): \(error.message)"
                } else {
                    return
                }
                FileHandle.standardError.write(Data((line + "\n").utf8))
            }
        }
    }
}
