import NIOCore
import NIOHTTP1
import NIOPosix

/// The module's one HTTP/1.1 exchange: writing a request and collecting its response (``HTTPResponseCollector``:
/// framing, the size cap, the words of every failure) within a timeout. ``PinnedHTTPClient`` runs it on its pinned,
/// pooled connections and on plain `http` connections; failure reports (``HTTPPinFailureReporter``) and CRL
/// downloads (``CRLFetcher``) go through that client, so all of them speak HTTP the same way.
enum HTTP1Exchange {
    /// The request head: the caller's headers with `Host` and `User-Agent` set and `dropping` removed (the exchange
    /// frames the request itself), `Content-Length` for a body, and `Connection: close` when the connection will
    /// not carry another request.
    static func head(
        _ target: RequestTarget, request: PinnedHTTPClient.RequestLine, headers: HTTPHeaders, userAgent: String, dropping: [String]
    ) -> HTTPRequestHead {
        var head = HTTPRequestHead(version: .http1_1, method: request.method, uri: target.pathAndQuery)
        head.headers = headers
        head.headers.replaceOrAdd(name: "host", value: target.hostHeader)
        head.headers.replaceOrAdd(name: "user-agent", value: userAgent)
        for name in dropping {
            head.headers.remove(name: name)
        }
        // The body is sent whole, so its length is known: Content-Length (HTTP/2 allows it too, RFC 9113 §8.2.2).
        if let body = request.body {
            head.headers.replaceOrAdd(name: "content-length", value: String(body.count))
        }
        return head
    }

    /// Writes the request: its head, the body if any, the end.
    static func write(_ head: HTTPRequestHead, body: [UInt8]?, to channel: any Channel) {
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if let body, !body.isEmpty {
            channel.write(HTTPClientRequestPart.body(.byteBuffer(channel.allocator.buffer(bytes: body))), promise: nil)
        }
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
    }

    /// Sends `head` and the request's body on `channel` (whose pipeline ends with the HTTP/1 client codec and an
    /// ``HTTPResponseCollector``) and collects the response; after `timeout` without a complete one (or, for a
    /// status-only request, without a head), fails with ``PinningConnectionError/Code/timedOut`` and closes the
    /// channel. Runs on the channel's event loop: the request is written the moment this is called.
    static func run(
        _ head: HTTPRequestHead, request: PinnedHTTPClient.RequestLine, on channel: any Channel, events: ConnectionEvents, host: String, timeout: TimeAmount
    ) -> EventLoopFuture<CollectedResponse> {
        channel.eventLoop.flatSubmit { () -> EventLoopFuture<CollectedResponse> in
            let collector: HTTPResponseCollector
            do {
                collector = try channel.pipeline.syncOperations.handler(type: HTTPResponseCollector.self)
            } catch {
                // The connection closed before the request (a TLS 1.3 server's alert refusing our client
                // certificate arrives right after the handshake): report what closed it.
                return channel.eventLoop.makeFailedFuture(
                    events.failure
                        ?? PinningConnectionError(code: .connectionClosed, host: host, message: "the server closed the connection before the request was sent", underlying: error)
                )
            }
            let promise = channel.eventLoop.makePromise(of: CollectedResponse.self)
            collector.begin(promise, maximumBodySize: request.maximumBodySize, statusOnly: request.statusOnly)
            Self.write(head, body: request.body, to: channel)
            let bound = NIOLoopBound(collector, eventLoop: channel.eventLoop)
            let timer = channel.eventLoop.scheduleTask(in: timeout) {
                bound.value.fail(PinningConnectionError(code: .timedOut, host: host, message: "no complete response within \(PinnedTLSClient.words(timeout))"))
                channel.close(promise: nil)
            }
            promise.futureResult.whenComplete { _ in timer.cancel() }
            return promise.futureResult
        }
    }

    /// One request over plain HTTP on a connection of its own (`Connection: close`, never pooled): no TLS, so
    /// nothing authenticates the server or protects the bytes. Connect, send and collect are one chain on the
    /// channel's event loop: the request is written the moment the connection is up, not after the calling task is
    /// scheduled again. (On a loaded machine a task can wait many seconds for a thread of the cooperative pool, and a
    /// server that saw a silent connection for that long closed it.)
    static func plain(
        _ target: RequestTarget,
        request: PinnedHTTPClient.RequestLine,
        headers: HTTPHeaders,
        address: SocketAddress?,
        configuration: PinnedHTTPClientConfiguration,
        group: any EventLoopGroup
    ) async throws(PinningConnectionError) -> CollectedResponse {
        let host = target.host
        let events = ConnectionEvents()
        let limit = request.maximumBodySize ?? configuration.maximumBodySize
        let connectTimeout = request.bounded(configuration.connectTimeout)
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(connectTimeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try PinnedHTTPClient.addHTTP1Handlers(to: channel.pipeline.syncOperations, host: host, maximumBodySize: limit, events: events)
                }
            }
        var closing = Self.head(target, request: request, headers: headers, userAgent: configuration.userAgent, dropping: ["content-length", "transfer-encoding"])
        closing.headers.replaceOrAdd(name: "connection", value: "close")
        let head = closing
        let timeout = request.bounded(configuration.requestTimeout)
        let shown = address.map { ConnectionFailureWords.target(host, $0) } ?? host
        let connected = address.map { bootstrap.connect(to: $0) } ?? bootstrap.connect(host: host, port: target.port)
        let exchange =
            connected
            .flatMapErrorThrowing { error -> any Channel in
                if let error = error as? ChannelError, case .connectTimeout = error {
                    throw PinningConnectionError(
                        code: .timedOut, host: host, message: "cannot connect to \(shown) port \(target.port) within \(PinnedTLSClient.words(connectTimeout)): timed out",
                        underlying: error)
                }
                throw PinningConnectionError(code: .connectFailed, host: host, message: ConnectionFailureWords.connectProblem(error, host: shown, port: target.port), underlying: error)
            }
            .flatMap { channel -> EventLoopFuture<CollectedResponse> in
                Self.run(head, request: request, on: channel, events: events, host: host, timeout: timeout)
                    .always { _ in channel.close(promise: nil) }
            }
        do {
            return try await exchange.get()
        } catch {
            throw (error as? PinningConnectionError) ?? PinningConnectionError(code: .httpFailed, host: host, message: "the request failed", underlying: error)
        }
    }
}
