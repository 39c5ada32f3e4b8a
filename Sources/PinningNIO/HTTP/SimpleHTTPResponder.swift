package import NIOCore
package import NIOHTTP1

/// A response for ``SimpleHTTPResponder``.
package struct SimpleHTTPResponse: Sendable {
    package var status: HTTPResponseStatus
    package var headers: HTTPHeaders
    package var body: [UInt8]

    package init(status: HTTPResponseStatus, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Answers each request of an HTTP/1.1 server pipeline with what `respond` returns (nil: never answer), and
/// hands it the peer a pinned handshake authenticated on this channel (an mTLS client), if any.
///
/// Shared by `pinning serve` and the loopback tests; not public API.
package final class SimpleHTTPResponder: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias OutboundOut = HTTPServerResponsePart

    package typealias Respond = @Sendable (HTTPRequestHead, AuthenticatedPeer?) -> SimpleHTTPResponse?

    private let respond: Respond
    private var head: HTTPRequestHead?

    package init(respond: @escaping Respond) {
        self.respond = respond
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            let peer: AuthenticatedPeer?
            do {
                peer = try context.pipeline.syncOperations.pinningAuthenticatedPeer()
            } catch {
                // No pinning handler on this channel (plain TLS): no authenticated client.
                peer = nil
            }
            guard var response = self.respond(head, peer) else { return }
            response.headers.replaceOrAdd(name: "content-length", value: "\(response.body.count)")
            if !head.isKeepAlive {
                response.headers.replaceOrAdd(name: "connection", value: "close")
            }
            let responseHead = HTTPResponseHead(version: head.version, status: response.status, headers: response.headers)
            context.write(self.wrapOutboundOut(.head(responseHead)), promise: nil)
            var buffer = context.channel.allocator.buffer(capacity: response.body.count)
            buffer.writeBytes(response.body)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            let keepAlive = head.isKeepAlive
            let loopBoundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(self.wrapOutboundOut(.end(nil))).whenComplete { _ in
                if !keepAlive { loopBoundContext.value.close(promise: nil) }
            }
        }
    }
}

@available(*, unavailable)
extension SimpleHTTPResponder: Sendable {}
