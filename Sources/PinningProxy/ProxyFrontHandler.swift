import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO

/// The first handler of a forward-proxy connection: reads one request and decides.
///
/// - `CONNECT host:port` to a host a configuration entry covers: intercepted (``InterceptHandler``).
/// - `CONNECT` to an unlisted host: a byte tunnel with `"unlistedHosts": "default"` (the client validates the
///   server itself, as without the proxy), `403` with `"reject"`.
/// - `GET /proxy.pac`, `/status`, `/metrics`: answered here. Any other path `400`, any other method `405`, and an
///   absolute-form request (`GET http://…`) `405`: the proxy is not an open relay.
final class ProxyFrontHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private enum Pending {
        case none
        case connect(host: String, port: Int)
        case local(HTTPRequestHead)
        case refuse(HTTPResponseStatus, String)
    }

    private let proxy: PinningProxy
    private let connection: ProxyConnection
    private let decoder: ByteToMessageHandler<HTTPRequestDecoder>
    private let encoder: HTTPResponseEncoder
    /// The request-head deadline around the decoder; it leaves with the decoder when the connection becomes a
    /// tunnel or an interception.
    private let deadline: (bytes: RequestHeadDeadline.Bytes, heads: RequestHeadDeadline.Heads)
    private var pending: Pending = .none
    /// Set once the connection became a tunnel or an interception: this handler is on its way out.
    private var handedOver = false

    init(
        proxy: PinningProxy, connection: ProxyConnection, decoder: ByteToMessageHandler<HTTPRequestDecoder>, encoder: HTTPResponseEncoder,
        deadline: (bytes: RequestHeadDeadline.Bytes, heads: RequestHeadDeadline.Heads)
    ) {
        self.proxy = proxy
        self.connection = connection
        self.decoder = decoder
        self.encoder = encoder
        self.deadline = deadline
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.handedOver else { return }
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.pending = Self.classify(head)
        case .body:
            break
        case .end:
            let pending = self.pending
            self.pending = .none
            self.act(context: context, on: pending)
        }
    }

    private static func classify(_ head: HTTPRequestHead) -> Pending {
        if head.method == .CONNECT {
            guard let (host, port) = Self.authority(head.uri) else {
                return .refuse(.badRequest, "CONNECT needs HOST:PORT, got \"\(head.uri)\": \(Self.authorityProblem(head.uri))")
            }
            return .connect(host: host, port: port)
        }
        guard head.uri.hasPrefix("/") else {
            return .refuse(
                .methodNotAllowed,
                "this proxy relays only CONNECT (for the hosts of its configuration) and serves /proxy.pac, /status and /metrics; it is not an open relay for \(head.method) \(head.uri)"
            )
        }
        guard head.method == .GET || head.method == .HEAD else {
            return .refuse(.methodNotAllowed, "\(head.method) \(head.uri): only GET is served here")
        }
        return .local(head)
    }

    /// `host:port`, `[v6]:port`; the port 1-65535.
    static func authority(_ text: String) -> (String, Int)? {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, host.count <= 253, let port = Int(portText), (1...65535).contains(port) else { return nil }
        guard host.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "/" && $0 != "@" }) else { return nil }
        return (String(host), port)
    }

    /// Why ``authority(_:)`` refused `text`, in words (the same checks, in its order).
    static func authorityProblem(_ text: String) -> String {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return "no \"]\" closes the IPv6 address" }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return "no :PORT after the IPv6 address" }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return "no :PORT" }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        if host.isEmpty { return "no host" }
        if host.count > 253 { return "the host is \(host.count) characters long; a host name has at most 253" }
        guard let port = Int(portText), (1...65535).contains(port) else { return "the port \"\(portText)\" is not a TCP port (1-65535)" }
        if !host.allSatisfy(\.isASCII) { return "the host is not ASCII; an internationalized name is sent as its A-label (xn--…)" }
        return "the host holds white space, \"/\" or \"@\""
    }

    private func act(context: ChannelHandlerContext, on pending: Pending) {
        switch pending {
        case .none:
            self.reply(context: context, .badRequest, "pinning proxy: no request\n")
        case .refuse(let status, let message):
            self.connection.kind = .refused
            self.reply(context: context, status, "pinning proxy: \(message)\n", failure: "\(status.code)")
        case .local(let head):
            self.serveLocal(context: context, head: head)
        case .connect(let host, let port):
            self.connect(context: context, host: host, port: port)
        }
    }

    // MARK: - The proxy's own paths

    private func serveLocal(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        self.connection.kind = .local
        self.connection.host = path
        switch path {
        case "/proxy.pac":
            let host = head.headers.first(name: "host")
            self.reply(context: context, .ok, self.proxy.pacScript(requestHost: host), contentType: "application/x-ns-proxy-autoconfig")
        case "/status":
            self.reply(context: context, .ok, self.proxy.statusJSON(), contentType: "application/json")
        case "/metrics":
            if let text = self.proxy.metricsText() {
                self.reply(context: context, .ok, text, contentType: "text/plain; version=0.0.4; charset=utf-8")
            } else {
                self.reply(context: context, .notFound, "pinning proxy: metrics are not exported here\n", failure: "404")
            }
        default:
            self.reply(context: context, .badRequest, "pinning proxy: \(path) is not served here (try /proxy.pac, /status or /metrics)\n", failure: "400")
        }
    }

    private func reply(
        context: ChannelHandlerContext,
        _ status: HTTPResponseStatus,
        _ body: String,
        contentType: String = "text/plain; charset=utf-8",
        headers: [(String, String)] = [],
        failure: String? = nil
    ) {
        self.handedOver = true
        self.connection.finish(verdict: .notJudged, failure: failure, message: failure == nil ? nil : body.trimmingCharacters(in: .whitespacesAndNewlines))
        HTTPReply.send(context: context, status: status, headers: headers, contentType: contentType, body: body, wrap: self.wrapOutboundOut, close: true)
    }

    // MARK: - CONNECT

    private func connect(context: ChannelHandlerContext, host: String, port: Int) {
        var name = host.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        self.connection.host = name
        self.connection.upstream = "\(name):\(port)"
        let policy = self.proxy.policy
        let configuration = policy.configuration
        if let entry = configuration.entry(forHost: name) {
            self.connection.entry = entry.key
            guard policy.authority.permits(name) else {
                // An IP-address entry: the local CA excludes every address, so it cannot vouch for one.
                self.connection.kind = .refused
                self.reply(
                    context: context, .forbidden,
                    "pinning proxy: \(host) is covered by \"\(entry.key)\", but the local CA vouches for DNS names only; reach it through a --tunnel\n",
                    headers: [("x-pinning-failure", "hostNotInterceptable")], failure: "hostNotInterceptable"
                )
                return
            }
            self.intercept(context: context, host: name, port: port, policy: policy)
            return
        }
        switch configuration.unlistedHosts {
        case .reject:
            self.connection.kind = .refused
            self.reply(
                context: context, .forbidden,
                "pinning proxy: \(host) is not in the configuration, and its unlistedHosts is \"reject\"\n",
                headers: [("x-pinning-failure", "hostNotAllowed")], failure: "hostNotAllowed"
            )
        case .default:
            self.passThrough(context: context, host: name, port: port)
        }
    }

    /// The client's own TLS is terminated here with a certificate from the local CA; its requests go to the
    /// upstream over a pinned connection (``InterceptHandler``).
    private func intercept(context: ChannelHandlerContext, host: String, port: Int, policy: PinningProxy.Policy) {
        let sslContext: NIOSSLContext
        do {
            sslContext = try policy.authority.serverContext(for: host)
        } catch {
            self.reply(context: context, .internalServerError, "pinning proxy: \(error.message)\n", failure: "localCA")
            return
        }
        self.connection.kind = .intercept
        self.handedOver = true
        do {
            let operations = context.pipeline.syncOperations
            try self.sendEstablished(context: context)
            // On the socket's side of TLS: the alerts the client sends (a client that does not trust the local CA)
            // are read as values for the log (InterceptHandler).
            try operations.addHandler(TLSAlertObserver.forServer())
            try operations.addHandler(NIOSSLServerHandler(context: sslContext))
            // The client's handshake with the local CA's certificate, and each request head inside it, have their
            // deadlines; a request that does not parse is answered in words (431 for a head over 80 KiB, 400
            // otherwise) and the connection closed, as on the plaintext side.
            try operations.addHandler(HandshakeDeadlineHandler(timeout: self.proxy.settings.handshakeTimeout))
            let deadline = RequestHeadDeadline.handlers(
                timeout: self.proxy.settings.requestHeadTimeout, idleBetweenRequestsCounts: false, server: "pinning proxy")
            try operations.addHandler(deadline.bytes)
            try operations.configureHTTPServerPipeline(position: .last, withPipeliningAssistance: true, withErrorHandling: false)
            // Right behind this session's decoder, ahead of the pipelining handler, which holds a head back while
            // the previous response is relayed (its wait is not the client's).
            let pipelining = try operations.handler(type: HTTPServerPipelineHandler.self)
            try operations.addHandler(deadline.heads, position: .before(pipelining))
            try operations.addHandler(HTTPParseErrorAnswer(server: "pinning proxy"))
            try operations.addHandler(InterceptHandler(proxy: self.proxy, connection: self.connection, host: host, port: port, policy: policy))
            self.leave(context: context)
        } catch {
            self.connection.finish(verdict: .error, failure: "internal", message: "cannot set up the interception: \(ConnectionFailureWords.words(error))")
            context.close(promise: nil)
        }
    }

    /// An unlisted host under `"unlistedHosts": "default"`: bytes both ways, the client's TLS untouched.
    private func passThrough(context: ChannelHandlerContext, host: String, port: Int) {
        self.connection.kind = .passthrough
        self.handedOver = true
        let channel = context.channel
        let connection = self.connection
        let proxy = self.proxy
        let downstreamGlue = GlueHandler(count: { connection.bytesUp += $0 })
        let upstreamGlue = GlueHandler(count: { connection.bytesDown += $0 })
        // The upstream channel is made on this connection's loop (the bootstrap's group), where both glues live.
        let glues = NIOLoopBound((downstream: downstreamGlue, upstream: upstreamGlue), eventLoop: context.eventLoop)
        let bootstrap = ClientBootstrap(group: context.eventLoop)
            .connectTimeout(proxy.settings.upstreamTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { upstream in
                upstream.eventLoop.makeCompletedFuture {
                    try upstream.pipeline.syncOperations.addHandler(glues.value.upstream)
                }
            }
        let connected: EventLoopFuture<any Channel>
        if let address = proxy.settings.resolve.address(host: host, port: port) {
            connected = bootstrap.connect(to: address)
        } else {
            connected = bootstrap.connect(host: host, port: port)
        }
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        let connectionBound = NIOLoopBound(connection, eventLoop: context.eventLoop)
        connected.whenComplete { result in
            let (handler, context) = bound.value
            let connection = connectionBound.value
            switch result {
            case .success:
                do {
                    try handler.sendEstablished(context: context)
                    let (downstreamGlue, upstreamGlue) = glues.value
                    try context.pipeline.syncOperations.addHandler(downstreamGlue)
                    downstreamGlue.pair(with: upstreamGlue)
                    channel.closeFuture.whenComplete { _ in connectionBound.value.finish(verdict: .notJudged) }
                    handler.leave(context: context)
                } catch {
                    connection.finish(verdict: .error, failure: "internal", message: ConnectionFailureWords.words(error))
                    channel.close(promise: nil)
                }
            case .failure(let error):
                handler.handedOver = false
                let words = ConnectionFailureWords.connectProblem(error, host: host, port: port)
                handler.reply(
                    context: context, .badGateway, "pinning proxy: \(words)\n",
                    headers: [("x-pinning-failure", "connectFailed")], failure: "connectFailed"
                )
            }
        }
    }

    /// `HTTP/1.1 200 Connection Established` and nothing else: written as bytes, past the response encoder
    /// (which would add body framing to a 200 without a length).
    private func sendEstablished(context: ChannelHandlerContext) throws {
        let operations = context.pipeline.syncOperations
        let encoderContext = try operations.context(handler: self.encoder)
        var buffer = context.channel.allocator.buffer(capacity: 64)
        buffer.writeString("HTTP/1.1 200 Connection Established\r\n\r\n")
        // Written at the encoder's place, so it goes to the socket as it is; then the encoder leaves (what
        // follows is TLS or raw bytes).
        encoderContext.writeAndFlush(NIOAny(buffer), promise: nil)
        operations.removeHandler(self.encoder, promise: nil)
    }

    /// Removes the request-head deadline, this handler and then the request decoder, whose unparsed bytes (a TLS
    /// ClientHello sent right behind the CONNECT) go on to the handlers that now follow.
    private func leave(context: ChannelHandlerContext) {
        let decoder = NIOLoopBound(self.decoder, eventLoop: context.eventLoop)
        let channel = context.channel
        // First: the deadline's handlers would take the bytes that follow for a request head.
        context.pipeline.syncOperations.removeHandler(self.deadline.heads, promise: nil)
        context.pipeline.syncOperations.removeHandler(self.deadline.bytes, promise: nil)
        context.pipeline.syncOperations.removeHandler(context: context).whenComplete { _ in
            channel.pipeline.syncOperations.removeHandler(decoder.value).whenFailure { _ in channel.close(promise: nil) }
        }
    }

    // MARK: - Events

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            self.connection.finish(verdict: .notJudged, failure: "idleTimeout", message: "idle for \(self.proxy.settings.idleTimeout)")
            context.close(promise: nil)
            return
        }
        if let expired = event as? ConnectionDeadlineExpired, !self.handedOver {
            // The deadline answers (408 when part of a head came) and closes.
            self.connection.finish(verdict: .notJudged, failure: expired.code, message: expired.description)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !self.handedOver else {
            context.fireErrorCaught(error)
            return
        }
        if let parse = error as? HTTPParserError, case .headerOverflow = parse {
            self.reply(context: context, .requestHeaderFieldsTooLarge, "pinning proxy: the request head is larger than 80 KiB\n", failure: "431")
        } else if let parse = error as? HTTPParserError {
            // An invalid target (a UTF-8 host after CONNECT) is said as such; anything else is not HTTP/1.1.
            let words: String
            if case .invalidURL = parse {
                words = HTTPParseErrorAnswer.answer(for: parse).words
            } else {
                words = "not an HTTP/1.1 request"
            }
            self.reply(context: context, .badRequest, "pinning proxy: \(words)\n", failure: "400")
        } else {
            self.connection.finish(verdict: .notJudged, failure: "error", message: ConnectionFailureWords.words(error))
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !self.handedOver {
            self.connection.finish(verdict: .notJudged)
        }
        context.fireChannelInactive()
    }
}
