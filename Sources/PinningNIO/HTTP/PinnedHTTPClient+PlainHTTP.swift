public import Foundation
import NIOConcurrencyHelpers
public import NIOCore
public import NIOHTTP1
import NIOPosix

/// A response fetched over plain HTTP by ``PinnedHTTPClient/getPlainHTTP(_:headers:maximumBodySize:resolve:)``:
/// nothing authenticated the server or protected the bytes, so there is no handshake to show.
public struct PlainHTTPResponse: Sendable {
    /// The URL that answered.
    public var url: URL
    /// The HTTP version of the response.
    public var version: HTTPVersion
    /// The status.
    public var status: HTTPResponseStatus
    /// The response headers.
    public var headers: HTTPHeaders
    /// The body.
    public var body: [UInt8]
}

extension PinnedHTTPClient {
    /// GETs a plain `http://` URL: no TLS, so no evaluator is asked and nothing authenticates the server or
    /// protects the bytes in transit. Only for content whose integrity is established another way and where the
    /// server is not under the caller's control: TUF metadata (signed, versioned and expiring) and TUF targets
    /// (hashed in signed metadata) are the case this exists for; The Update Framework is designed to be safe over
    /// an untrusted transport, and repositories (and tuf-conformance's test server) are served over plain HTTP.
    ///
    /// The same timeouts and the same response handling as ``get(_:headers:maximumBodySize:resolve:)``, but one
    /// connection per request (`Connection: close`, never pooled beside TLS connections), and redirects are
    /// returned, not followed.
    ///
    /// - Parameters:
    ///   - url: An `http` URL (an `https` one is refused: use ``get(_:headers:maximumBodySize:resolve:)``).
    ///   - headers: Extra request headers (`Host`, `Connection` and `Content-Length` are the client's).
    ///   - maximumBodySize: The largest body accepted (nil: ``PinnedHTTPClientConfiguration/maximumBodySize``).
    ///   - resolve: An address to use instead of DNS.
    /// - Throws: ``PinningConnectionError`` (connection, timeout and HTTP codes).
    public func getPlainHTTP(
        _ url: URL,
        headers: HTTPHeaders = HTTPHeaders(),
        maximumBodySize: Int? = nil,
        resolve: @escaping Resolve = { _, _ in nil }
    ) async throws(PinningConnectionError) -> PlainHTTPResponse {
        let target = try RequestTarget(url, plainHTTP: true)
        if self.pool.isShutDown {
            throw PinningConnectionError(code: .invalidRequest, host: target.host, message: "the client was shut down")
        }
        let limit = maximumBodySize ?? self.configuration.maximumBodySize
        let events = ConnectionEvents()
        let host = target.host
        let address = resolve(target.host, target.port)
        let connectTimeout = self.configuration.connectTimeout
        let bootstrap = ClientBootstrap(group: self.group)
            .connectTimeout(connectTimeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try Self.addHTTP1Handlers(to: channel.pipeline.syncOperations, host: host, maximumBodySize: limit, events: events)
                }
            }
        var closing = self.requestHead(target, request: RequestLine(method: .GET, body: nil), headers: headers, dropping: ["content-length", "transfer-encoding"])
        closing.headers.replaceOrAdd(name: "connection", value: "close")
        let head = closing
        let timeout = self.configuration.requestTimeout
        let shown = address.map { ConnectionFailureWords.target(host, $0) } ?? host
        let connected = address.map { bootstrap.connect(to: $0) } ?? bootstrap.connect(host: target.host, port: target.port)
        // Connect, send and collect are one chain on the channel's event loop: the request is written the moment
        // the connection is up, not after this task is scheduled again. (On a loaded machine a task can wait many
        // seconds for a thread of the cooperative pool, and a server that saw a silent connection for that long
        // closed it.)
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
                channel.eventLoop.flatSubmit { () -> EventLoopFuture<CollectedResponse> in
                    let collector: HTTPResponseCollector
                    do {
                        collector = try channel.pipeline.syncOperations.handler(type: HTTPResponseCollector.self)
                    } catch {
                        return channel.eventLoop.makeFailedFuture(
                            events.failure
                                ?? PinningConnectionError(code: .connectionClosed, host: host, message: "the server closed the connection before the request was sent", underlying: error))
                    }
                    let promise = channel.eventLoop.makePromise(of: CollectedResponse.self)
                    collector.begin(promise, maximumBodySize: limit)
                    Self.write(head, body: nil, to: channel)
                    let bound = NIOLoopBound(collector, eventLoop: channel.eventLoop)
                    let timer = channel.eventLoop.scheduleTask(in: timeout) {
                        bound.value.fail(PinningConnectionError(code: .timedOut, host: host, message: "no complete response within \(PinnedTLSClient.words(timeout))"))
                        channel.close(promise: nil)
                    }
                    promise.futureResult.whenComplete { _ in timer.cancel() }
                    return promise.futureResult
                }
                .always { _ in channel.close(promise: nil) }
            }
        let collected: CollectedResponse
        do {
            collected = try await exchange.get()
        } catch {
            throw (error as? PinningConnectionError) ?? PinningConnectionError(code: .httpFailed, host: host, message: "the request failed", underlying: error)
        }
        return PlainHTTPResponse(url: url, version: collected.head.version, status: collected.head.status, headers: collected.head.headers, body: collected.body)
    }
}
