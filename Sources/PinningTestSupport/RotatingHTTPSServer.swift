import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
public import PinningNIO

/// An HTTPS server on 127.0.0.1 whose key can be rotated while it runs (new connections get the new identity,
/// open ones keep theirs), for tests of clients that follow a pin set. `GET /long…` is answered only once
/// ``releaseLongRequests()`` was called (a long-running request); any other path at once with `hello PATH`.
public final class RotatingHTTPSServer: Sendable {
    private let channel: any Channel
    private let context: NIOLockedValueBox<NIOSSLContext>
    private let state = NIOLockedValueBox(LongRequests())

    struct LongRequests {
        var started = 0
        var released = false
    }

    /// The port it listens on.
    public var port: Int { self.channel.localAddress?.port ?? 0 }
    /// How many `/long` requests have arrived.
    public var longRequestsStarted: Int { self.state.withLockedValue { $0.started } }

    public init(identity: TLSIdentity) async throws {
        let context = NIOLockedValueBox(try Self.context(identity))
        self.context = context
        let state = self.state
        self.channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context.withLockedValue { $0 }))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(Responder(state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    /// New connections present `identity` from now on.
    public func rotate(to identity: TLSIdentity) throws {
        let next = try Self.context(identity)
        self.context.withLockedValue { $0 = next }
    }

    /// Lets every `/long` request, waiting or to come, be answered.
    public func releaseLongRequests() {
        self.state.withLockedValue { $0.released = true }
    }

    public func stop() async {
        do { try await self.channel.close() } catch {}
    }

    private static func context(_ identity: TLSIdentity) throws -> NIOSSLContext {
        try NIOSSLContext(configuration: .makeServerConfiguration(certificateChain: identity.certificateSources, privateKey: identity.privateKeySource))
    }

    private final class Responder: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let state: NIOLockedValueBox<LongRequests>
        private let uri = NIOLockedValueBox("")

        init(state: NIOLockedValueBox<LongRequests>) { self.state = state }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch self.unwrapInboundIn(data) {
            case .head(let head):
                self.uri.withLockedValue { $0 = head.uri }
            case .body:
                break
            case .end:
                let uri = self.uri.withLockedValue { $0 }
                if uri.hasPrefix("/long") {
                    self.state.withLockedValue { $0.started += 1 }
                    self.answerWhenReleased(context: context, uri: uri)
                } else {
                    Self.answer(context: context, "hello \(uri)")
                }
            }
        }

        private func answerWhenReleased(context: ChannelHandlerContext, uri: String) {
            if self.state.withLockedValue({ $0.released }) {
                Self.answer(context: context, "done \(uri)")
                return
            }
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .milliseconds(20)) {
                let (handler, context) = bound.value
                guard context.channel.isActive else { return }
                handler.answerWhenReleased(context: context, uri: uri)
            }
        }

        private static func answer(context: ChannelHandlerContext, _ text: String) {
            var head = HTTPResponseHead(version: .http1_1, status: .ok)
            head.headers.add(name: "content-length", value: String(text.utf8.count))
            context.write(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
            context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(context.channel.allocator.buffer(string: text)))), promise: nil)
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
        }
    }
}
