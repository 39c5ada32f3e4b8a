import NIOCore
import Pinning
import PinningNIO

/// A `--tunnel` connection: once the upstream is reached over pinned (mutual) TLS, judged by the entry that
/// covers the tunnel's host, bytes flow both ways (``GlueHandler``). A refused upstream closes the client
/// connection and is logged with its reason.
final class TunnelHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let proxy: PinningProxy
    private let connection: ProxyConnection
    private let tunnel: ProxySettings.Tunnel

    init(proxy: PinningProxy, connection: ProxyConnection, tunnel: ProxySettings.Tunnel) {
        self.proxy = proxy
        self.connection = connection
        self.tunnel = tunnel
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Nothing is read from the client until the upstream is trusted.
        context.channel.setOption(.autoRead, value: false).whenFailure { _ in }
        let policy = self.proxy.policy
        self.connection.entry = policy.configuration.entry(forHost: self.tunnel.host)?.key
        let connection = self.connection
        let downstreamGlue = GlueHandler(count: { connection.bytesUp += $0 })
        let upstreamGlue = GlueHandler(count: { connection.bytesDown += $0 })
        let loop = context.eventLoop
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
        // The upstream channel is made on the same loop (connectUpstream's `on:`).
        let upstreamGlueBound = NIOLoopBound(upstreamGlue, eventLoop: loop)
        let proxy = self.proxy
        let tunnel = self.tunnel
        Task {
            do throws(PinningConnectionError) {
                let pinned = try await proxy.connectUpstream(host: tunnel.host, port: tunnel.port, policy: policy, on: loop) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(upstreamGlueBound.value)
                    }
                }
                loop.execute {
                    let (handler, context) = bound.value
                    guard context.channel.isActive else {
                        pinned.channel.close(promise: nil)
                        return
                    }
                    do {
                        try context.pipeline.syncOperations.addHandler(downstreamGlue)
                        downstreamGlue.pair(with: upstreamGlueBound.value)
                        context.channel.closeFuture.whenComplete { _ in connection.finish(verdict: "trusted") }
                        context.pipeline.syncOperations.removeHandler(handler, promise: nil)
                        context.channel.setOption(.autoRead, value: true).whenFailure { _ in }
                    } catch {
                        connection.finish(verdict: "error", failure: "internal", message: "\(error)")
                        context.close(promise: nil)
                        pinned.channel.close(promise: nil)
                    }
                }
            } catch {
                loop.execute {
                    let (_, context) = bound.value
                    connection.finish(
                        verdict: error.trustFailure == nil ? "error" : "untrusted", failure: PinningProxy.failureCode(error),
                        message: error.message
                    )
                    context.close(promise: nil)
                }
            }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// Joins two channels: what one reads, the other writes, with backpressure (a side reads only while its partner
/// can take more). When either closes, both close.
final class GlueHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var partner: GlueHandler?
    private var context: ChannelHandlerContext?
    private var readPending = false
    /// Counts the bytes this side reads.
    private let count: (Int) -> Void

    init(count: @escaping (Int) -> Void) {
        self.count = count
    }

    /// Pairs two handlers (both on one event loop).
    func pair(with other: GlueHandler) {
        self.partner = other
        other.partner = self
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.partner = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = self.unwrapInboundIn(data)
        self.count(buffer.readableBytes)
        self.partner?.context?.write(self.wrapOutboundOut(buffer), promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.partner?.context?.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.partner?.context?.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
        self.partner?.context?.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let partner = self.partner, partner.readPending {
            partner.readPending = false
            partner.context?.read()
        }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if let partner = self.partner, let partnerContext = partner.context, !partnerContext.channel.isWritable {
            self.readPending = true
            return
        }
        context.read()
    }
}
