import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import X509

let testGroup: MultiThreadedEventLoopGroup = .singleton

/// Answers every request with 200 and a body naming the client certificate's subject (or "anonymous").
final class HelloHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = self.unwrapInboundIn(data) else { return }
        let peer: AuthenticatedPeer?
        do {
            peer = try context.pipeline.syncOperations.pinningAuthenticatedPeer()
        } catch {
            peer = nil
        }
        let body = "hello \(peer?.subject ?? "anonymous")"
        var headers = HTTPHeaders()
        headers.add(name: "content-length", value: "\(body.utf8.count)")
        context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        context.write(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
    }
}

/// An HTTPS/1.1 server on 127.0.0.1: serves exactly `servedChain` (or the identity's chain), or requires a
/// client certificate through a ``MutualTLSServer``.
final class HTTPSTestServer: Sendable {
    let channel: any Channel
    var port: Int { self.channel.localAddress?.port ?? 0 }

    init(identity: TLSIdentity, servedChain: [Certificate]? = nil) async throws {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: identity.certificateSources,
            privateKey: identity.privateKeySource
        )
        if let servedChain {
            configuration.certificateChain = try servedChain.map {
                .certificate(try NIOSSLCertificate(bytes: $0.derBytes, format: .der))
            }
        }
        let context = try NIOSSLContext(configuration: configuration)
        self.channel = try await Self.bind { pipeline in
            try pipeline.addHandler(NIOSSLServerHandler(context: context))
        }
    }

    init(mutualTLS server: MutualTLSServer) async throws {
        self.channel = try await Self.bind { pipeline in
            try server.addHandlers(to: pipeline)
        }
    }

    private static func bind(tls: @escaping @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void) async throws -> any Channel {
        try await ServerBootstrap(group: testGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try tls(channel.pipeline.syncOperations)
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(HelloHandler())
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func stop() async {
        do {
            try await self.channel.close()
        } catch {}
    }
}
