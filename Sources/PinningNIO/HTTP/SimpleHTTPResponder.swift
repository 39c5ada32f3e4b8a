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
            let peer = Self.authenticatedPeer(of: context.channel)
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

    /// The peer the pinned handshake of `channel` authenticated, or, for an HTTP/2 stream channel (whose
    /// pipeline has no TLS), of the connection channel it belongs to; nil when there is none (plain TLS).
    /// A parent is consulted only on this event loop: an HTTP/2 stream shares its connection's loop, while an
    /// HTTP/1 connection's parent is the listening socket, which has no pinning handler anyway.
    static func authenticatedPeer(of channel: any Channel) -> AuthenticatedPeer? {
        var current: (any Channel)? = channel
        while let candidate = current, candidate.eventLoop.inEventLoop {
            do {
                return try candidate.pipeline.syncOperations.pinningAuthenticatedPeer()
            } catch {
                // No pinning handler on this channel: try the connection it belongs to.
                current = candidate.parent
            }
        }
        return nil
    }
}

@available(*, unavailable)
extension SimpleHTTPResponder: Sendable {}
