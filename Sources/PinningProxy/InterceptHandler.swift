import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import NIOTLS
import Pinning
import PinningNIO

/// Relays an intercepted client's HTTP requests to the upstream over a pinned connection and the responses back,
/// part by part (bodies stream; nothing is buffered whole).
///
/// One upstream connection per client connection, opened at the first request and kept while both sides keep
/// alive. A refused upstream is answered with `502 Bad Gateway`, `X-Pinning-Failure: CODE` (the TrustFailure
/// code, or the connection error's) and the failure's description as the body, then the connection closes.
///
/// A close-delimited response (HTTP/1.0 without Content-Length, or any response with neither a length nor chunked
/// framing, RFC 9112 §6.3 item 8) ends when the upstream closes. The proxy forwards it as it came and then closes
/// the client's connection (after the last byte is written), so the client sees the end the same way: as HTTP/1.1
/// requires of any proxy forwarding such a response, and what curl and browsers expect. It is not re-framed as a
/// complete body by the proxy itself. NIO's encoder frames an HTTP/1.1 head without a length as chunked, so the
/// last chunk is written only when the upstream's close ended the body cleanly (with or without close_notify);
/// after a reset the client's connection closes without it, and the log says `upstreamClosed`.
final class InterceptHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let proxy: PinningProxy
    private let connection: ProxyConnection
    private let host: String
    private let port: Int
    /// The policy the current upstream connection was made under.
    private var policy: PinningProxy.Policy
    private var context: ChannelHandlerContext?
    private var upstream: (any Channel)?
    private var connecting = false
    /// Request parts that arrived before the upstream connection was ready.
    private var buffered: [HTTPClientRequestPart] = []
    /// A refusal was answered: nothing more is relayed.
    private var refused = false
    /// The request being answered asked to close after its response.
    private var closeAfterResponse = false
    /// A request went to the upstream and its response head has not come back yet.
    private var awaitingResponseHead = false
    /// The methods of the requests whose final response heads have not come back, oldest first: a response to a
    /// HEAD has no body whatever its headers say.
    private var requestMethods: [HTTPMethod] = []
    /// The response being relayed ends when the upstream closes: the client's connection closes after it.
    private var responseIsCloseDelimited = false
    /// The last response was written whole and the proxy is closing the client's connection after it: an error the
    /// client's side reports now (a reset when the client closed first and our close_notify found no reader) is
    /// not the client's failure.
    private var closingAfterCompleteResponse = false
    /// The last error the upstream channel reported (a TLS alert after the handshake, say).
    private var upstreamError: (any Error)?
    /// Body bytes of the response being relayed.
    private var responseBodyBytes = 0
    private var verdict = ProxyLogRecord.Verdict.notJudged
    private var failure: String?
    private var message: String?

    init(proxy: PinningProxy, connection: ProxyConnection, host: String, port: Int, policy: PinningProxy.Policy) {
        self.proxy = proxy
        self.connection = connection
        self.host = host
        self.port = port
        self.policy = policy
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.refused else { return }
        switch self.unwrapInboundIn(data) {
        case .head(var head):
            self.connection.requests += 1
            let current = self.proxy.policy
            if current.generation != self.policy.generation {
                // Reloaded since the upstream connection was made: it is not reused. A removed pin or identity
                // stops working at the next request, not at the next client connection. No response is owed on
                // the old one here: NIO's pipelining handler holds a request head back until the previous
                // response has been written whole.
                self.policy = current
                self.upstream?.close(promise: nil)
                self.upstream = nil
            }
            self.closeAfterResponse = !head.isKeepAlive
            self.requestMethods.append(head.method)
            // Hop-by-hop headers meant for the proxy never reach the upstream.
            head.headers.remove(name: "proxy-connection")
            head.headers.remove(name: "proxy-authorization")
            self.forward(.head(head), context: context)
        case .body(let body):
            self.connection.bytesUp += body.readableBytes
            self.forward(.body(.byteBuffer(body)), context: context)
        case .end(let trailers):
            self.forward(.end(trailers), context: context)
        }
    }

    private func forward(_ part: HTTPClientRequestPart, context: ChannelHandlerContext) {
        if case .head = part { self.awaitingResponseHead = true }
        if let upstream = self.upstream {
            if case .end = part {
                upstream.writeAndFlush(part, promise: nil)
            } else {
                upstream.write(part, promise: nil)
            }
            return
        }
        self.buffered.append(part)
        if !self.connecting {
            self.connectUpstream(context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.upstream?.flush()
    }

    private func connectUpstream(context: ChannelHandlerContext) {
        self.connecting = true
        // Nothing more is read from the client until the upstream is there (its parts are buffered meanwhile).
        context.channel.setOption(.autoRead, value: false).whenFailure { _ in }
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        let proxy = self.proxy
        let host = self.host
        let port = self.port
        let policy = self.policy
        // On this connection's own event loop, not Swift's global cooperative pool (one thread per core): with the
        // pool kept busy by other work in the process (CPU-bound tasks, a blocking call), the upstream connection
        // waited behind it, nothing reached the client, and its read timeout fired (AsyncHTTPClient's 30 s, in
        // whole-suite runs on a loaded 2-core machine). The handshake's evaluation runs there already
        // (EventLoopTaskExecutor); the rest of the connection, futures awaited, never blocks the loop.
        Task(executorPreference: EventLoopTaskExecutor(loop)) {
            do throws(PinningConnectionError) {
                let pinned = try await proxy.connectUpstream(host: host, port: port, policy: policy, on: loop) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(UpstreamResponseRelay(intercept: bound))
                    }
                }
                loop.execute { bound.value.connected(pinned.channel) }
            } catch {
                loop.execute { bound.value.refuse(error) }
            }
        }
    }

    private func connected(_ channel: any Channel) {
        self.connecting = false
        guard let context = self.context, context.channel.isActive else {
            channel.close(promise: nil)
            return
        }
        self.upstream = channel
        self.verdict = self.verdict == .notJudged ? .trusted : self.verdict
        guard channel.isActive else {
            // The upstream closed between its handshake and now (a server refusing our client certificate).
            self.upstreamClosed(channel, midResponse: false)
            return
        }
        for part in self.buffered {
            channel.write(part, promise: nil)
        }
        self.buffered.removeAll()
        channel.flush()
        context.channel.setOption(.autoRead, value: true).whenFailure { _ in }
    }

    private func refuse(_ error: PinningConnectionError) {
        self.connecting = false
        self.refused = true
        self.buffered.removeAll()
        let code = PinningProxy.failureCode(error)
        self.verdict = error.trustFailure == nil ? .error : .untrusted
        self.failure = code
        // A trust failure in words, `[pinMismatch] …` (the host is the log line's and the body's headline), not its
        // Swift description `TrustFailure.pinMismatch: …`.
        self.message = error.trustFailure?.codeAndReason ?? error.message
        guard let context = self.context else { return }
        var body = "pinning proxy refused \(self.host):\(self.port)\n\n"
        if let failure = error.trustFailure {
            body += failure.multilineDescription(headline: failure.codeAndReason) + "\n"
        } else {
            body += "\(code): \(error.message)\n"
        }
        HTTPReply.send(
            context: context, status: .badGateway, headers: [("x-pinning-failure", code)], body: body, wrap: self.wrapOutboundOut,
            close: true
        )
    }

    // MARK: - From the upstream (same event loop)

    fileprivate func relay(_ part: HTTPClientResponsePart) {
        guard let context = self.context else { return }
        switch part {
        case .head(var head):
            self.awaitingResponseHead = false
            self.responseBodyBytes = 0
            let informational = (100..<200).contains(head.status.code) && head.status.code != 101
            let method = informational || self.requestMethods.isEmpty ? nil : self.requestMethods.removeFirst()
            self.responseIsCloseDelimited = !informational && Self.isCloseDelimited(head, method: method)
            if self.responseIsCloseDelimited {
                // Tell the client this connection ends with the response (RFC 9112 §9.6).
                head.headers.replaceOrAdd(name: "connection", value: "close")
            }
            context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        case .body(let body):
            self.connection.bytesDown += body.readableBytes
            self.responseBodyBytes += body.readableBytes
            context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        case .end(let trailers):
            if self.responseIsCloseDelimited, let error = self.upstreamError, !Self.isUncleanShutdown(error) {
                // The close that ended this body was a failure (a reset), not the server ending it. NIO's encoder
                // frames an HTTP/1.1 head without a length as chunked, so writing `.end` would send the last chunk
                // and vouch for a body the proxy knows was cut: the client's connection closes without it instead,
                // and the log says so. A close without close_notify is how many servers end such a body (curl
                // accepts it too), so that one completes the response as usual.
                self.upstream = nil
                if self.failure == nil {
                    self.failure = "upstreamClosed"
                    self.message =
                        "the upstream's connection failed in the middle of its response, which only its close could end (after \(self.responseBodyBytes) bytes of the body): \(ConnectionFailureWords.words(error)); the client's connection was closed"
                }
                context.flush()
                context.close(promise: nil)
                return
            }
            guard self.closeAfterResponse || self.responseIsCloseDelimited else {
                context.writeAndFlush(self.wrapOutboundOut(.end(trailers)), promise: nil)
                return
            }
            self.upstream?.close(promise: nil)
            self.upstream = nil
            // Closed once everything is written: a close with writes still pending would drop them.
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(self.wrapOutboundOut(.end(trailers)), promise: written)
            let channel = context.channel
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            written.futureResult.whenComplete { result in
                if case .success = result { bound.value.closingAfterCompleteResponse = true }
                channel.close(promise: nil)
            }
        }
    }

    /// NIOSSL's report of a close without close_notify.
    static func isUncleanShutdown(_ error: any Error) -> Bool {
        if let tls = error as? NIOSSLError, case .uncleanShutdown = tls { return true }
        return false
    }

    /// Whether a final response's body ends only when the upstream closes (RFC 9112 §6.3): it may have a body (not
    /// a HEAD's, a 1xx, 204 or 304) and has no Content-Length and no chunked coding last.
    static func isCloseDelimited(_ head: HTTPResponseHead, method: HTTPMethod?) -> Bool {
        guard method != .HEAD, method != .CONNECT, head.status.mayHaveResponseBody else { return false }
        if head.headers.contains(name: "content-length") { return false }
        let codings = head.headers[canonicalForm: "transfer-encoding"]
        return codings.last.map { $0.lowercased() != "chunked" } ?? true
    }

    fileprivate func relayFlush() {
        self.context?.flush()
    }

    /// The upstream closed: between responses the next request opens a new one; within a response the client
    /// connection closes too (the response cannot be completed).
    fileprivate func upstreamClosed(_ channel: any Channel, midResponse: Bool) {
        guard self.upstream === channel else { return }
        self.upstream = nil
        if self.awaitingResponseHead {
            // Closed before answering: a TLS 1.3 server that refuses our client certificate does so after our side
            // of the handshake completed. The client gets a 502 saying so rather than waiting.
            let words = self.upstreamError.map { ConnectionFailureWords.words($0) }
            let code: PinningConnectionError.Code = words == nil ? .connectionClosed : .handshakeFailed
            var message = "the upstream closed the connection before answering"
            if let words { message += ": \(words)" }
            if self.policy.identities[self.connection.entry ?? ""] == nil {
                message += " (did it require a client certificate? this entry has no clientIdentity)"
            }
            self.refuse(PinningConnectionError(code: code, host: self.host, message: message))
            return
        }
        if midResponse {
            // The upstream was trusted, but it cut its response short (a reset, a close before the length it
            // announced): the log says so, and the client's connection closes so it sees the response incomplete.
            if self.failure == nil {
                self.failure = "upstreamClosed"
                var message = "the upstream closed the connection in the middle of its response (after \(self.responseBodyBytes) bytes of the body)"
                if let error = self.upstreamError { message += ": \(ConnectionFailureWords.words(error))" }
                self.message = message + "; the client's connection was closed"
            }
            self.context?.close(promise: nil)
        }
    }

    fileprivate func upstreamFailed(_ error: any Error) {
        // NIOSSL reports a close without close_notify when the channel goes inactive, after the error that closed
        // it (a reset): the first error is the one that says what happened, and is kept.
        if let kept = self.upstreamError, !Self.isUncleanShutdown(kept), Self.isUncleanShutdown(error) { return }
        self.upstreamError = error
    }

    fileprivate func upstreamWritabilityChanged(_ writable: Bool) {
        // Backpressure: read from the client only as fast as the upstream takes it.
        self.context?.channel.setOption(.autoRead, value: writable).whenFailure { _ in }
    }

    fileprivate var clientIsWritable: Bool { self.context?.channel.isWritable ?? false }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.upstream?.setOption(.autoRead, value: context.channel.isWritable).whenFailure { _ in }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls {
            // The client's handshake with the local CA is done: its alert observer ends (and forgets the secrets).
            (try? context.pipeline.syncOperations.handler(type: TLSAlertObserver.self))?.handshakeCompleted()
        }
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
            return
        }
        if let expired = event as? ConnectionDeadlineExpired {
            // The client's handshake or a request head overran its deadline; the deadline's handler closes.
            if self.failure == nil {
                self.failure = expired.code
                self.message = expired.description
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Errors on the client's side of an intercepted connection, each logged as the client's doing: the
    /// upstream's own failures arrive through ``UpstreamResponseRelay`` and are logged as the upstream's.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A client that closes without close_notify (browsers do, between requests) did nothing wrong: every
        // response it got was complete, so it is not logged as a failure.
        if let tls = error as? NIOSSLError, case .uncleanShutdown = tls {
            context.close(promise: nil)
            return
        }
        if self.closingAfterCompleteResponse {
            context.close(promise: nil)
            return
        }
        if self.failure == nil {
            switch error {
            case let parse as HTTPParserError:
                // HTTPParseErrorAnswer (ahead of this handler) answered it: 431 or 400, in words, as the plaintext
                // port does.
                self.failure = "\(HTTPParseErrorAnswer.answer(for: parse).status.code)"
                if HTTPParseErrorAnswer.isHTTP2Preface(parse) {
                    // HTTP/2 is not offered in ALPN, so only a client with prior knowledge (gRPC, curl
                    // --http2-prior-knowledge) sends its preface here: said in words, not as the parser's error.
                    self.message = "inside its TLS session the client spoke HTTP/2 (this proxy speaks HTTP/1.1 inside intercepted sessions)"
                } else {
                    self.message = "inside its TLS session the client sent \(HTTPParseErrorAnswer.whatTheClientSent(parse))"
                }
            case is ByteToMessageDecoderError:
                // More bytes after a request that did not parse: the first error was the story.
                break
            default:
                // A TLS error with the client (it did not trust the local CA, say), or its connection failing.
                if let words = ConnectionFailureWords.clientHandshakeProblem(error, alerts: TLSAlertObserver.alerts(of: context.channel)) {
                    self.failure = "clientTLS"
                    self.message = words
                } else {
                    self.failure = "clientError"
                    self.message = "the client's connection failed: \(ConnectionFailureWords.words(error))"
                }
            }
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.upstream?.close(promise: nil)
        self.upstream = nil
        self.connection.finish(verdict: self.verdict, failure: self.failure, message: self.message)
        context.fireChannelInactive()
    }
}

/// On the upstream channel: hands each response part to the ``InterceptHandler`` of the client connection
/// (both channels share one event loop).
final class UpstreamResponseRelay: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let intercept: NIOLoopBound<InterceptHandler>
    private var midResponse = false

    init(intercept: NIOLoopBound<InterceptHandler>) {
        self.intercept = intercept
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = self.unwrapInboundIn(data)
        switch part {
        case .head: self.midResponse = true
        case .end: self.midResponse = false
        case .body: break
        }
        self.intercept.value.relay(part)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.intercept.value.relayFlush()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        self.intercept.value.upstreamWritabilityChanged(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.intercept.value.upstreamClosed(context.channel, midResponse: self.midResponse)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.intercept.value.upstreamFailed(error)
        context.close(promise: nil)
    }
}
