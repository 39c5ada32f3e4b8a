import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import PinningNIO

/// Hummingbird's HTTP/1 channel with the deadlines `pinning serve` and `pinning proxy` put on their clients
/// (PinningNIO's `ServerDeadlines`): over HTTPS the TLS handshake must complete within the handshake timeout of the
/// connection being accepted, and each request head must arrive whole within the request-head timeout, for the
/// first request from the connection being ready, for a later one from the end of the previous request (the
/// collector has no idle timeout of its own, so idle time between requests counts, as for `pinning serve`). A
/// head that started but did not finish gets `408 Request Timeout` in words; then the connection is closed.
/// Without them a client that sent half a request head held its connection for good.
struct DeadlineChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    /// Over HTTPS only (nil over plain HTTP): the handler goes right after the TLS handler `TLSChannel` adds first.
    let handshakeTimeout: TimeAmount?
    let requestHeadTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let deadline = RequestHeadDeadline.handlers(timeout: self.requestHeadTimeout, idleBetweenRequestsCounts: true, server: "pinning collector")
        let heads = NIOLoopBound(deadline.heads, eventLoop: channel.eventLoop)
        let handshakeTimeout = self.handshakeTimeout
        return channel.eventLoop.makeCompletedFuture {
            if let handshakeTimeout {
                try channel.pipeline.syncOperations.addHandler(HandshakeDeadlineHandler(timeout: handshakeTimeout))
            }
            // Before the request decoder Hummingbird adds next: it sees when a head starts.
            try channel.pipeline.syncOperations.addHandler(deadline.bytes)
        }.flatMap {
            self.base.setup(channel: channel, logger: logger)
        }.flatMapThrowing { value in
            // Right after the decoder (and the response encoder before it): it sees complete heads and responses.
            let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(heads.value, position: .after(decoder))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await self.base.handle(value: value, logger: logger)
    }
}
