import NIOCore
import Pinning
import PinningNIO

/// A `--tunnel` connection: once the upstream is reached over pinned (mutual) TLS, judged by the entry that
/// covers the tunnel's host, bytes flow both ways (``GlueHandler``). A refused upstream closes the client
/// connection and is logged with its reason.
final class TunnelHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let proxy: PinningProxy
    private let connection: ProxyConnection
    private let tunnel: ProxySettings.Tunnel
    /// What the client sent before the upstream was ready. autoRead is off from `handlerAdded`, so nothing should
    /// arrive; but a client may speak first (psql's startup packet, an HTTP request), and should a read be
    /// delivered anyway, its bytes are kept and passed on once the tunnel is joined rather than dropped by the
    /// pipeline's tail. At most one read's worth, since nothing more is read until then.
    private var early: [ByteBuffer] = []

    init(proxy: PinningProxy, connection: ProxyConnection, tunnel: ProxySettings.Tunnel) {
        self.proxy = proxy
        self.connection = connection
        self.tunnel = tunnel
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Nothing is read from the client until the upstream is trusted.
        context.channel.setOption(.autoRead, value: false).whenFailure { _ in }
        if context.channel.isActive { self.reachUpstream(context: context) }
    }

    /// The upstream is reached once the client's channel is active, never from the child initializer: an
    /// accepted channel is registered and activated a few event-loop hops after its initializer ran, and an
    /// upstream reached in between (8 tunnels opened at once on a busy 2-core machine did it, about one run of
    /// `bench proxy` in eight) found the client's channel not yet active, gave up silently, and left the client
    /// waiting on a connection nobody read.
    func channelActive(context: ChannelHandlerContext) {
        self.reachUpstream(context: context)
        context.fireChannelActive()
    }

    private var started = false

    private func reachUpstream(context: ChannelHandlerContext) {
        guard !self.started else { return }
        self.started = true
        let policy = self.proxy.policy
        self.connection.entry = policy.configuration.entry(forHost: self.tunnel.host)?.key
        let connection = self.connection
        let downstreamGlue = GlueHandler(count: { connection.bytesUp += $0 })
        let upstreamGlue = GlueHandler(count: { connection.bytesDown += $0 })
        let loop = context.eventLoop
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: loop)
        // The upstream channel is made on the same loop (connectUpstream's `on:`).
        let upstreamGlueBound = NIOLoopBound(upstreamGlue, eventLoop: loop)
        let downstreamGlueBound = NIOLoopBound(downstreamGlue, eventLoop: loop)
        let proxy = self.proxy
        let tunnel = self.tunnel
        // The connection's bookkeeping lives on the client's loop; the task below only carries it back there.
        let connectionBound = NIOLoopBound(connection, eventLoop: loop)
        // On the client's event loop, not the global cooperative pool, where the upstream connection waited behind
        // whatever kept the pool busy (InterceptHandler says more).
        Task(executorPreference: EventLoopTaskExecutor(loop)) {
            do throws(PinningConnectionError) {
                let pinned = try await proxy.connectUpstream(host: tunnel.host, port: tunnel.port, policy: policy, on: loop) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(upstreamGlueBound.value)
                    }
                }
                loop.execute {
                    let (handler, context) = bound.value
                    guard context.channel.isActive else {
                        // The client left while the upstream was being reached: said in the log, not silently.
                        connectionBound.value.finish(verdict: .notJudged, failure: "clientClosed", message: "the client closed the connection before the upstream was ready")
                        pinned.channel.close(promise: nil)
                        return
                    }
                    do {
                        let downstreamGlue = downstreamGlueBound.value
                        try context.pipeline.syncOperations.addHandler(downstreamGlue)
                        downstreamGlue.pair(with: upstreamGlueBound.value)
                        context.channel.closeFuture.whenComplete { _ in connectionBound.value.finish(verdict: .trusted) }
                        // The client's first bytes, read before the upstream was trusted, go on now, in order.
                        let early = handler.early
                        handler.early = []
                        for buffer in early { context.fireChannelRead(NIOAny(buffer)) }
                        if !early.isEmpty { context.fireChannelReadComplete() }
                        context.pipeline.syncOperations.removeHandler(handler, promise: nil)
                        context.channel.setOption(.autoRead, value: true).whenFailure { _ in }
                    } catch {
                        connectionBound.value.finish(verdict: .error, failure: "internal", message: ConnectionFailureWords.words(error))
                        context.close(promise: nil)
                        pinned.channel.close(promise: nil)
                    }
                }
            } catch {
                loop.execute {
                    let (_, context) = bound.value
                    connectionBound.value.finish(
                        verdict: error.trustFailure == nil ? .error : .untrusted, failure: PinningProxy.failureCode(error),
                        message: error.trustFailure?.codeAndReason ?? error.message
                    )
                    context.close(promise: nil)
                }
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.early.append(self.unwrapInboundIn(data))
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
    /// Bytes read before the two sides were paired (an upstream that speaks first, as MySQL or SMTP servers do,
    /// may send its greeting as soon as its handshake ends, before the client side is joined on the event loop);
    /// passed on by ``pair(with:)`` instead of being dropped for want of a partner.
    private var unpaired: [ByteBuffer] = []
    /// Counts the bytes this side reads.
    private let count: (Int) -> Void

    init(count: @escaping (Int) -> Void) {
        self.count = count
    }

    /// Pairs two handlers (both on one event loop).
    func pair(with other: GlueHandler) {
        self.partner = other
        other.partner = self
        self.forwardUnpaired()
        other.forwardUnpaired()
    }

    private func forwardUnpaired() {
        guard !self.unpaired.isEmpty, let partnerContext = self.partner?.context else { return }
        let buffers = self.unpaired
        self.unpaired = []
        for buffer in buffers { partnerContext.write(self.wrapOutboundOut(buffer), promise: nil) }
        partnerContext.flush()
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
        guard let partnerContext = self.partner?.context else {
            self.unpaired.append(buffer)
            return
        }
        partnerContext.write(self.wrapOutboundOut(buffer), promise: nil)
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
