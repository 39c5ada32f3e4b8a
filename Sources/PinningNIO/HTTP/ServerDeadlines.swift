import Foundation
package import NIOCore
package import NIOHTTP1
import NIOTLS

// Deadlines a server puts on what a client must send, so that a client which dribbles or stalls cannot hold a
// connection (and one of a bounded number of slots) for as long as it likes: one for the TLS handshake, one for
// each HTTP/1 request head. Shared by `pinning serve` and `pinning proxy`; not public API.
//
// The request-head deadline follows Apache's mod_reqtimeout: for the first request of a connection it runs from the
// moment the connection is ready; for a later request of a kept-alive connection, from the first byte of its head
// (an idle kept-alive connection is the idle timeout's business), unless the server asks for idle time between
// requests to count too (a server without an idle timeout of its own).

/// Fired as a user inbound event when a deadline expired, just before the connection is closed, so that the
/// handlers behind can say why the client was cut off.
package struct ConnectionDeadlineExpired: Sendable, CustomStringConvertible {
    package enum Kind: Sendable {
        /// The TLS handshake (the client's chain judged included) did not complete in time.
        case handshake
        /// A request head did not arrive whole in time.
        case requestHead
    }

    package var kind: Kind
    package var timeout: TimeAmount
    /// Bytes of the request head that did arrive (requestHead only).
    package var bytesReceived: Int

    /// `tlsHandshakeTimeout` / `requestHeadTimeout`: how a log names it.
    package var code: String {
        switch self.kind {
        case .handshake: return "handshakeTimeout"
        case .requestHead: return "requestHeadTimeout"
        }
    }

    /// What the client did not do, in words.
    package var description: String {
        let seconds = Self.seconds(self.timeout)
        switch self.kind {
        case .handshake:
            return "the client did not complete its TLS handshake within \(seconds)"
        case .requestHead where self.bytesReceived == 0:
            return "the client sent no request within \(seconds)"
        case .requestHead:
            return "the client's request head did not arrive whole within \(seconds) (\(self.bytesReceived) byte\(self.bytesReceived == 1 ? "" : "s") of it did)"
        }
    }

    /// `10 s`, `0.5 s`.
    static func seconds(_ amount: TimeAmount) -> String {
        let value = Double(amount.nanoseconds) / 1e9
        return value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }
}

/// Closes a connection whose TLS handshake has not completed `timeout` after it became active. Goes right after
/// the TLS handlers (after ``PinningHandshakeHandler`` on a mutual-TLS server, which passes the handshake event on
/// only for a trusted client, so the time to judge the client's chain counts).
package final class HandshakeDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = NIOAny
    package typealias InboundOut = NIOAny

    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?
    private var over = false

    package init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { self.arm(context: context) }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        self.disarm()
    }

    package func channelActive(context: ChannelHandlerContext) {
        self.arm(context: context)
        context.fireChannelActive()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        self.disarm()
        context.fireChannelInactive()
    }

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls {
            self.disarm()
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func arm(context: ChannelHandlerContext) {
        guard self.timer == nil, !self.over else { return }
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        self.timer = context.eventLoop.scheduleTask(in: self.timeout) {
            let (handler, context) = bound.value
            handler.expire(context: context)
        }
    }

    private func disarm() {
        self.over = true
        self.timer?.cancel()
        self.timer = nil
    }

    private func expire(context: ChannelHandlerContext) {
        guard !self.over else { return }
        self.over = true
        self.timer = nil
        context.fireUserInboundEventTriggered(ConnectionDeadlineExpired(kind: .handshake, timeout: self.timeout, bytesReceived: 0))
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension HandshakeDeadlineHandler: Sendable {}

/// The request-head deadline of an HTTP/1 server connection, in two handlers around the request decoder (made by
/// ``handlers(timeout:idleBetweenRequestsCounts:server:)``): `bytes` goes right before it (it sees when a head
/// starts), `heads` right after it and after the response encoder (it sees when a head is complete, and which
/// responses are under way). On expiry the client gets `408 Request Timeout` when part of a head arrived and no
/// response is under way; the connection then closes.
package final class RequestHeadDeadline {
    private enum State {
        /// The first request of the connection: the deadline runs from the start.
        case awaitingFirstHead
        /// A head started (its first byte arrived): the deadline runs.
        case awaitingHead
        /// A head arrived; its body (if any) and response are under way: no deadline.
        case inRequest
        /// The last request ended: no deadline until the next byte (unless idle time counts).
        case betweenRequests
        case over
    }

    private let timeout: TimeAmount
    private let idleCounts: Bool
    private let server: String
    private var state = State.awaitingFirstHead
    private var receivedSinceArmed = 0
    private var timer: Scheduled<Void>?
    private var headsContext: ChannelHandlerContext?
    /// Requests whose response has not ended yet, and whether a response head went out without its end.
    private var unanswered = 0
    private var responseUnderWay = false

    private init(timeout: TimeAmount, idleBetweenRequestsCounts: Bool, server: String) {
        self.timeout = timeout
        self.idleCounts = idleBetweenRequestsCounts
        self.server = server
    }

    /// The two handlers of one connection's deadline.
    ///
    /// - Parameters:
    ///   - timeout: How long a request head may take.
    ///   - idleBetweenRequestsCounts: Whether the deadline of a kept-alive connection's next request runs from the
    ///     end of the last request (a server without an idle timeout of its own) rather than from the next head's
    ///     first byte.
    ///   - server: How the 408 body names the server (`pinning serve`).
    /// - Returns: `bytes`, to go right before the request decoder, and `heads`, right after it (and after the
    ///   response encoder). A connection that stops speaking HTTP (a CONNECT tunnel) removes both.
    package static func handlers(timeout: TimeAmount, idleBetweenRequestsCounts: Bool, server: String) -> (bytes: Bytes, heads: Heads) {
        let deadline = RequestHeadDeadline(timeout: timeout, idleBetweenRequestsCounts: idleBetweenRequestsCounts, server: server)
        return (Bytes(deadline: deadline), Heads(deadline: deadline))
    }

    fileprivate func ready() {
        if case .awaitingFirstHead = self.state { self.arm() }
    }

    fileprivate func received(_ count: Int) {
        switch self.state {
        case .betweenRequests:
            self.state = .awaitingHead
            self.receivedSinceArmed = count
            if self.timer == nil { self.arm() }
        case .awaitingHead, .awaitingFirstHead:
            self.receivedSinceArmed += count
        case .inRequest, .over:
            break
        }
    }

    fileprivate func headArrived() {
        self.unanswered += 1
        self.disarm(to: .inRequest)
    }

    fileprivate func requestEnded() {
        guard case .inRequest = self.state else { return }
        self.state = .betweenRequests
        self.receivedSinceArmed = 0
        if self.idleCounts { self.arm() }
    }

    fileprivate func wrote(_ part: HTTPServerResponsePart) {
        switch part {
        case .head(let head) where (100..<200).contains(head.status.code):
            break
        case .head:
            self.responseUnderWay = true
        case .body:
            break
        case .end:
            self.responseUnderWay = false
            self.unanswered = max(0, self.unanswered - 1)
        }
    }

    fileprivate func attached(_ context: ChannelHandlerContext?) {
        self.headsContext = context
        if context == nil { self.disarm(to: .over) }
    }

    private func arm() {
        guard let context = self.headsContext, context.channel.isActive else { return }
        self.timer?.cancel()
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.timer = context.eventLoop.scheduleTask(in: self.timeout) { bound.value.expire() }
    }

    private func disarm(to state: State) {
        self.state = state
        self.timer?.cancel()
        self.timer = nil
    }

    private func expire() {
        self.timer = nil
        guard let context = self.headsContext else { return }
        switch self.state {
        case .awaitingFirstHead, .awaitingHead, .betweenRequests: break
        case .inRequest, .over: return
        }
        let received = self.receivedSinceArmed
        self.state = .over
        let expired = ConnectionDeadlineExpired(kind: .requestHead, timeout: self.timeout, bytesReceived: received)
        context.fireUserInboundEventTriggered(expired)
        guard received > 0, self.unanswered == 0, !self.responseUnderWay else {
            // Nothing of a head to answer, or a response under way that a 408 would corrupt: just close.
            context.close(promise: nil)
            return
        }
        let body = "\(self.server): \(expired.description)\n"
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "text/plain; charset=utf-8")
        headers.add(name: "content-length", value: "\(body.utf8.count)")
        headers.add(name: "connection", value: "close")
        context.write(NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .requestTimeout, headers: headers))), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: body.utf8.count)
        buffer.writeString(body)
        context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(buffer))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Sees the bytes of request heads before the decoder.
    package final class Bytes: ChannelInboundHandler, RemovableChannelHandler {
        package typealias InboundIn = ByteBuffer
        package typealias InboundOut = ByteBuffer
        private let deadline: RequestHeadDeadline

        fileprivate init(deadline: RequestHeadDeadline) {
            self.deadline = deadline
        }

        package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            self.deadline.received(self.unwrapInboundIn(data).readableBytes)
            context.fireChannelRead(data)
        }
    }

    /// Sees complete heads and request ends after the decoder, and the responses going out.
    package final class Heads: ChannelDuplexHandler, RemovableChannelHandler {
        package typealias InboundIn = HTTPServerRequestPart
        package typealias InboundOut = HTTPServerRequestPart
        package typealias OutboundIn = HTTPServerResponsePart
        package typealias OutboundOut = HTTPServerResponsePart
        private let deadline: RequestHeadDeadline

        fileprivate init(deadline: RequestHeadDeadline) {
            self.deadline = deadline
        }

        package func handlerAdded(context: ChannelHandlerContext) {
            self.deadline.attached(context)
            if context.channel.isActive { self.deadline.ready() }
        }

        package func handlerRemoved(context: ChannelHandlerContext) {
            self.deadline.attached(nil)
        }

        package func channelActive(context: ChannelHandlerContext) {
            self.deadline.ready()
            context.fireChannelActive()
        }

        package func channelInactive(context: ChannelHandlerContext) {
            self.deadline.attached(nil)
            context.fireChannelInactive()
        }

        package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch self.unwrapInboundIn(data) {
            case .head: self.deadline.headArrived()
            case .body: break
            case .end: self.deadline.requestEnded()
            }
            context.fireChannelRead(data)
        }

        package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            self.deadline.wrote(self.unwrapOutboundIn(data))
            context.write(data, promise: promise)
        }
    }
}

@available(*, unavailable)
extension RequestHeadDeadline: Sendable {}

/// Answers a request the HTTP/1 decoder cannot parse, in words, and closes: `431` for a head over the decoder's
/// limit (80 KiB), `400` for anything else that is not HTTP/1.1. In place of NIO's `HTTPServerProtocolErrorHandler`,
/// which answers every parse error with an empty `400` and leaves the connection open. The error goes on to the
/// handlers behind, so they can log who did what.
package final class HTTPParseErrorAnswer: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias InboundOut = HTTPServerRequestPart
    package typealias OutboundIn = HTTPServerResponsePart
    package typealias OutboundOut = HTTPServerResponsePart

    private let server: String
    private var responseUnderWay = false
    private var answered = false

    /// `server`: how the body names the server (`pinning serve`).
    package init(server: String) {
        self.server = server
    }

    /// The status and words for a parse error: 431 for a head over the limit, else 400.
    package static func answer(for error: HTTPParserError) -> (status: HTTPResponseStatus, words: String) {
        if case .headerOverflow = error {
            return (.requestHeaderFieldsTooLarge, "the request head is larger than 80 KiB")
        }
        if case .invalidURL = error {
            // What a client most likely did: sent a name in UTF-8 (`CONNECT bücher.example:443`).
            return (.badRequest, "the request target is not a valid URL, path or HOST:PORT (\(Self.targetRule))")
        }
        return (.badRequest, "not an HTTP/1.1 request (\(Self.name(error)))")
    }

    /// What a request target may hold, for the words of an invalid one.
    static let targetRule = "only ASCII is sent there: an internationalized host name as its A-label, xn--…, a path percent-encoded"

    /// What the client sent, for a log line: "a request head larger than 80 KiB", "something that is not an
    /// HTTP/1.1 request (invalid method)".
    package static func whatTheClientSent(_ error: HTTPParserError) -> String {
        if case .headerOverflow = error { return "a request head larger than 80 KiB" }
        if case .invalidURL = error { return "a request target that is not a valid URL, path or HOST:PORT (\(Self.targetRule))" }
        if Self.isHTTP2Preface(error) { return "an HTTP/2 connection preface (this connection speaks HTTP/1.1)" }
        return "something that is not an HTTP/1.1 request (\(Self.name(error)))"
    }

    /// Whether the parse error is llhttp stopping at HTTP/2's connection preface (`PRI * HTTP/2.0`): llhttp pauses
    /// there (`HPE_PAUSED_H2_UPGRADE`), which NIO reports as `.paused`. NIO never pauses the parser otherwise (its
    /// other pause, for an Upgrade, is resumed inside the decoder), so `.paused` is the preface.
    package static func isHTTP2Preface(_ error: HTTPParserError) -> Bool {
        if case .paused = error { return true }
        return false
    }

    /// `invalidHTTPMethod` as `invalid HTTP method`: words at each capital, acronyms kept whole.
    private static func name(_ error: HTTPParserError) -> String {
        let text = "\(error)"
        var words: [String] = []
        var rest = text[...]
        while let range = rest.range(of: "[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", options: .regularExpression) {
            let word = String(rest[range])
            words.append(word.count > 1 && word == word.uppercased() ? word : word.lowercased())
            rest = rest[range.upperBound...]
        }
        return words.isEmpty ? text : words.joined(separator: " ")
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parse = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        if !self.answered && !self.responseUnderWay {
            self.answered = true
            let (status, words) = Self.answer(for: parse)
            let body = "\(self.server): \(words)\n"
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "text/plain; charset=utf-8")
            headers.add(name: "content-length", value: "\(body.utf8.count)")
            headers.add(name: "connection", value: "close")
            context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            var buffer = context.channel.allocator.buffer(capacity: body.utf8.count)
            buffer.writeString(body)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            let channel = context.channel
            context.writeAndFlush(self.wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        } else if !self.answered {
            // A response is under way: an answer now would corrupt it; the connection cannot go on.
            self.answered = true
            context.close(promise: nil)
        }
        context.fireErrorCaught(error)
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch self.unwrapOutboundIn(data) {
        case .head(let head) where (100..<200).contains(head.status.code): break
        case .head: self.responseUnderWay = true
        case .body: break
        case .end: self.responseUnderWay = false
        }
        context.write(data, promise: promise)
    }
}

@available(*, unavailable)
extension HTTPParseErrorAnswer: Sendable {}
