public import Foundation
import NIOConcurrencyHelpers
public import NIOCore
public import NIOHTTP1
public import NIOPosix
public import NIOSSL
public import Pinning
public import X509

/// A compact HTTPS client (HTTP/1.1 on NIOHTTP1) whose every connection is a ``PinnedTLSClient`` handshake.
///
/// ```swift
/// let client = try PinnedHTTPClient(evaluator: SecurityPolicy(pinningMode: .publicKey, pins: pins))
/// defer { Task { await client.shutdown() } }
/// let response = try await client.get(URL(string: "https://api.example.com/v1/status")!)
/// print(response.status, response.bodyText)
/// ```
///
/// Enforcement is that of ``PinnedTLSClient``: the evaluator (a ``SecurityPolicy`` with a pin anywhere on the
/// path, `allowInvalidCertificates`, a host ``PinningConfiguration``, …) judges every handshake, and a refusal
/// is a ``PinningConnectionError`` with code ``PinningConnectionError/Code/untrusted`` carrying the
/// ``TrustFailure``.
///
/// - Connections are reused per host: idle keep-alive connections are pooled by host, port and the address
///   `resolve` gave (so a connection trusted for one name is never used for another).
/// - Redirects (301, 302, 303, 307, 308 with `Location`) are followed up to
///   ``PinnedHTTPClientConfiguration/maximumRedirects``; a new host means a new handshake, evaluated for that
///   host. A redirect away from `https` is refused.
/// - Timeouts: ``PinnedHTTPClientConfiguration/connectTimeout`` bounds TCP connect plus the TLS handshake,
///   ``PinnedHTTPClientConfiguration/requestTimeout`` bounds each request's response.
public final class PinnedHTTPClient: Sendable {
    /// Resolves a host and port to the address to connect to instead of DNS (as curl's `--resolve`); nil: DNS.
    public typealias Resolve = @Sendable (_ host: String, _ port: Int) -> SocketAddress?

    /// The TLS client every connection goes through.
    public let tls: PinnedTLSClient
    /// Timeouts, redirects, pool and size limits.
    public let configuration: PinnedHTTPClientConfiguration
    private let group: any EventLoopGroup
    private let pool: HTTPConnectionPool

    /// A client.
    ///
    /// - Parameters:
    ///   - evaluator: Decides trust for each handshake (for the host of each URL, redirects included).
    ///   - trust: Anchors, platform roots, validation time for each handshake's ``ServerTrust``.
    ///   - identity: The client identity for servers that request one (mutual TLS).
    ///   - tlsConfiguration: A base TLS configuration; see ``PinnedTLSClient/init(evaluator:trust:identity:configuration:)``.
    ///   - configuration: Timeouts, redirects and limits.
    ///   - group: The event loops; default NIO's shared singleton.
    /// - Throws: when NIOSSL cannot build the TLS context.
    public init(
        evaluator: any ServerTrustEvaluating,
        trust: ServerTrust = ServerTrust(certificates: []),
        identity: TLSIdentity? = nil,
        tlsConfiguration: TLSConfiguration? = nil,
        configuration: PinnedHTTPClientConfiguration = PinnedHTTPClientConfiguration(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        self.tls = try PinnedTLSClient(evaluator: evaluator, trust: trust, identity: identity, configuration: tlsConfiguration)
        self.configuration = configuration
        self.group = group
        self.pool = HTTPConnectionPool(maximumIdlePerKey: configuration.maximumIdleConnectionsPerHost)
    }

    /// How many TCP connections (with a trusted handshake) this client has opened.
    public var openedConnections: Int { self.pool.opened }

    /// GETs `url`, following redirects.
    ///
    /// - Parameters:
    ///   - url: An `https` URL.
    ///   - headers: Extra request headers (`Host`, `Connection` and `Content-Length` are the client's).
    ///     `Authorization`, `Proxy-Authorization` and `Cookie` are not sent after a redirect to another host or port.
    ///   - resolve: Addresses to use instead of DNS (also applied to redirect targets).
    /// - Returns: The final response, with the handshake of the connection that carried it.
    /// - Throws: ``PinningConnectionError``: ``PinningConnectionError/Code/untrusted`` with the ``TrustFailure``
    ///   when a server (the first or a redirect target) is refused; connection, timeout, HTTP and redirect codes
    ///   otherwise.
    public func get(
        _ url: URL,
        headers: HTTPHeaders = HTTPHeaders(),
        resolve: @escaping Resolve = { _, _ in nil }
    ) async throws(PinningConnectionError) -> PinnedHTTPResponse {
        var current = url
        var visited: [URL] = []
        var headers = headers
        let origin = try RequestTarget(url)
        while true {
            let target = try RequestTarget(current)
            if target.host.lowercased() != origin.host.lowercased() || target.port != origin.port {
                // As curl and browsers do: credentials meant for one origin are not sent to another.
                for name in Self.originBoundHeaders { headers.remove(name: name) }
            }
            let exchange = try await self.exchange(target, headers: headers, resolve: resolve)
            let response = PinnedHTTPResponse(
                url: current,
                status: exchange.head.status,
                headers: exchange.head.headers,
                body: exchange.body,
                bodyMayBeTruncated: exchange.bodyMayBeTruncated,
                handshake: exchange.handshake,
                redirects: visited
            )
            // maximumRedirects 0: redirects are the caller's business; the 3xx is the response.
            guard let location = Self.redirectLocation(exchange.head), self.configuration.maximumRedirects > 0 else {
                return response
            }
            guard let next = URL(string: location, relativeTo: current)?.absoluteURL else {
                throw PinningConnectionError(code: .httpFailed, host: target.host, message: "redirect to an unparseable Location \"\(location)\"")
            }
            guard next.scheme?.lowercased() == "https" else {
                throw PinningConnectionError(code: .tooManyRedirects, host: target.host, message: "refusing a redirect away from https to \(next.absoluteString)")
            }
            visited.append(current)
            guard visited.count <= self.configuration.maximumRedirects else {
                throw PinningConnectionError(code: .tooManyRedirects, host: target.host, message: "more than \(self.configuration.maximumRedirects) redirects (last to \(next.absoluteString))")
            }
            current = next
        }
    }

    /// Closes every pooled connection; later requests fail with ``PinningConnectionError/Code/invalidRequest``.
    /// Connections in use close when their request ends.
    public func shutdown() async {
        await withTaskGroup(of: Void.self) { group in
            for connection in self.pool.shutdown() {
                group.addTask { await connection.close() }
            }
        }
    }

    /// Request headers dropped when a redirect leaves the original host and port.
    static let originBoundHeaders = ["authorization", "proxy-authorization", "cookie"]

    static func redirectLocation(_ head: HTTPResponseHead) -> String? {
        switch head.status.code {
        case 301, 302, 303, 307, 308:
            return head.headers.first(name: "location")
        default:
            return nil
        }
    }

    /// One request on a pooled or new connection. A reused connection that the server closed while idle is
    /// replaced once (GET is idempotent).
    private func exchange(_ target: RequestTarget, headers: HTTPHeaders, resolve: Resolve) async throws(PinningConnectionError) -> HTTPExchange {
        let address = resolve(target.host, target.port)
        let key = HTTPConnectionPool.Key(host: target.host.lowercased(), port: target.port, address: address?.description)
        if self.pool.isShutDown {
            throw PinningConnectionError(code: .invalidRequest, host: target.host, message: "the client was shut down")
        }
        if let idle = self.pool.take(key) {
            do {
                return try await self.send(target, headers: headers, on: idle, key: key)
            } catch let error where error.code == .connectionClosed {
                // The server closed the idle connection: use a fresh one.
            }
        }
        let connection = try await self.connect(target, address: address)
        return try await self.send(target, headers: headers, on: connection, key: key)
    }

    private func connect(_ target: RequestTarget, address: SocketAddress?) async throws(PinningConnectionError) -> HTTPConnection {
        let maximumBodySize = self.configuration.maximumBodySize
        let events = ConnectionEvents()
        let connection = try await self.tls.connect(
            host: target.host,
            port: target.port,
            address: address,
            group: self.group,
            timeout: self.configuration.connectTimeout,
            configure: { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(HTTPResponseCollector(host: target.host, maximumBodySize: maximumBodySize, events: events))
                }
            }
        )
        self.pool.countOpened()
        return HTTPConnection(channel: connection.channel, handshake: connection.handshake, events: events)
    }

    private func send(_ target: RequestTarget, headers: HTTPHeaders, on connection: HTTPConnection, key: HTTPConnectionPool.Key) async throws(PinningConnectionError) -> HTTPExchange {
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target.pathAndQuery)
        head.headers = headers
        head.headers.replaceOrAdd(name: "host", value: target.hostHeader)
        head.headers.replaceOrAdd(name: "user-agent", value: self.configuration.userAgent)
        head.headers.remove(name: "connection")
        head.headers.remove(name: "content-length")
        let channel = connection.channel
        let timeout = self.configuration.requestTimeout
        let host = target.host
        let events = connection.events
        let collected: CollectedResponse
        do {
            collected = try await channel.eventLoop.flatSubmit { () -> EventLoopFuture<CollectedResponse> in
                let collector: HTTPResponseCollector
                do {
                    collector = try channel.pipeline.syncOperations.handler(type: HTTPResponseCollector.self)
                } catch {
                    // The connection closed before the request (a TLS 1.3 server's alert refusing our client
                    // certificate arrives right after the handshake): report what closed it.
                    return channel.eventLoop.makeFailedFuture(
                        events.failure ?? PinningConnectionError(code: .connectionClosed, host: host, message: "the server closed the connection before the request was sent", underlying: error)
                    )
                }
                let promise = channel.eventLoop.makePromise(of: CollectedResponse.self)
                collector.begin(promise)
                channel.write(HTTPClientRequestPart.head(head), promise: nil)
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                let bound = NIOLoopBound(collector, eventLoop: channel.eventLoop)
                let timer = channel.eventLoop.scheduleTask(in: timeout) {
                    bound.value.fail(PinningConnectionError(code: .timedOut, host: host, message: "no complete response within \(timeout)"))
                    channel.close(promise: nil)
                }
                promise.futureResult.whenComplete { _ in timer.cancel() }
                return promise.futureResult
            }.get()
        } catch {
            connection.closeInBackground()
            var failure =
                (error as? PinningConnectionError)
                ?? PinningConnectionError(code: .httpFailed, host: host, message: "the request failed", underlying: error)
            failure.handshake = connection.handshake
            throw failure
        }
        if collected.head.isKeepAlive && channel.isActive {
            if !self.pool.put(connection, for: key) {
                connection.closeInBackground()
            }
        } else {
            connection.closeInBackground()
        }
        return HTTPExchange(head: collected.head, body: collected.body, bodyMayBeTruncated: collected.bodyMayBeTruncated, handshake: connection.handshake)
    }
}

/// Settings of a ``PinnedHTTPClient``.
public struct PinnedHTTPClientConfiguration: Sendable, Hashable {
    /// Bound on the TCP connect plus the TLS handshake. Default 10 s.
    public var connectTimeout: TimeAmount
    /// Bound on each request, from sending it to the end of the response. Default 30 s.
    public var requestTimeout: TimeAmount
    /// How many redirects one ``PinnedHTTPClient/get(_:headers:resolve:)`` follows. Default 5; 0 returns the 3xx.
    public var maximumRedirects: Int
    /// Idle keep-alive connections kept per host, port and address. Default 8.
    public var maximumIdleConnectionsPerHost: Int
    /// Largest response body accepted. Default 16 MiB.
    public var maximumBodySize: Int
    /// The `User-Agent` header.
    public var userAgent: String

    /// The defaults, or the given values.
    public init(
        connectTimeout: TimeAmount = .seconds(10),
        requestTimeout: TimeAmount = .seconds(30),
        maximumRedirects: Int = 5,
        maximumIdleConnectionsPerHost: Int = 8,
        maximumBodySize: Int = 16 * 1024 * 1024,
        userAgent: String = "swift-pinning"
    ) {
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.maximumRedirects = maximumRedirects
        self.maximumIdleConnectionsPerHost = maximumIdleConnectionsPerHost
        self.maximumBodySize = maximumBodySize
        self.userAgent = userAgent
    }
}

/// A response of ``PinnedHTTPClient``.
public struct PinnedHTTPResponse: Sendable {
    /// The URL that answered (after redirects).
    public var url: URL
    /// The status.
    public var status: HTTPResponseStatus
    /// The response headers.
    public var headers: HTTPHeaders
    /// The body.
    public var body: [UInt8]
    /// True when the body was delimited only by the server closing the connection (no `Content-Length`, not
    /// chunked) and the server closed it without a TLS close_notify: the body is accepted, as curl, Python
    /// `requests` and Go do, but nothing proves it complete (an attacker on the path can cut such a body short
    /// by closing the TCP connection). A `Content-Length` or chunked body cut short that way is never a response:
    /// it is a ``PinningConnectionError`` with code ``PinningConnectionError/Code/httpFailed``.
    public var bodyMayBeTruncated: Bool
    /// The handshake of the connection that carried this response: the trusted chain and the peer.
    public var handshake: PinnedHandshake
    /// The URLs redirected from, in order (empty without redirects).
    public var redirects: [URL]

    /// The body as UTF-8 (invalid sequences replaced).
    public var bodyText: String { String(decoding: self.body, as: UTF8.self) }
    /// What the evaluator trusted, and on what basis.
    public var trustedChain: TrustedChain { self.handshake.trustedChain }
    /// The chain the server presented, leaf first, as sent.
    public var presentedChain: [Certificate] { self.handshake.trustedChain.presentedChain }
}

struct HTTPExchange: Sendable {
    var head: HTTPResponseHead
    var body: [UInt8]
    var bodyMayBeTruncated: Bool
    var handshake: PinnedHandshake
}

/// Scheme, host, port and path of an `https` URL.
struct RequestTarget: Sendable {
    var host: String
    var port: Int
    var pathAndQuery: String

    init(_ url: URL) throws(PinningConnectionError) {
        guard url.scheme?.lowercased() == "https" else {
            throw PinningConnectionError(code: .invalidRequest, host: nil, message: "\(url.absoluteString): only https URLs are supported")
        }
        guard var host = url.host, !host.isEmpty else {
            throw PinningConnectionError(code: .invalidRequest, host: nil, message: "\(url.absoluteString): no host")
        }
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        }
        let port = url.port ?? 443
        guard (1...65535).contains(port) else {
            throw PinningConnectionError(code: .invalidRequest, host: host, message: "\(url.absoluteString): port \(port) is not a TCP port")
        }
        self.host = host
        self.port = port
        var path = url.path(percentEncoded: true)
        if path.isEmpty { path = "/" }
        if let query = url.query(percentEncoded: true) { path += "?" + query }
        self.pathAndQuery = path
    }

    var hostHeader: String {
        let name = self.host.contains(":") ? "[\(self.host)]" : self.host
        return self.port == 443 ? name : "\(name):\(self.port)"
    }
}

/// A connection with a trusted handshake and HTTP/1.1 handlers.
struct HTTPConnection: Sendable {
    let channel: any Channel
    let handshake: PinnedHandshake
    /// What went wrong on the connection first, readable after its handlers are gone.
    let events: ConnectionEvents

    /// Starts closing without waiting: NIOSSL waits up to its shutdown timeout (5 s) for the peer's
    /// close_notify, which must not delay the caller's result.
    func closeInBackground() {
        self.channel.close(promise: nil)
    }

    func close() async {
        do {
            try await self.channel.close()
        } catch {
            // Already closed: nothing to release.
        }
    }
}

/// Idle connections by host, port and resolved address.
final class HTTPConnectionPool: Sendable {
    struct Key: Hashable, Sendable {
        var host: String
        var port: Int
        var address: String?
    }

    private struct State {
        var idle: [Key: [HTTPConnection]] = [:]
        var isShutDown = false
        var opened = 0
    }

    private let state = NIOLockedValueBox(State())
    private let maximumIdlePerKey: Int

    init(maximumIdlePerKey: Int) {
        self.maximumIdlePerKey = maximumIdlePerKey
    }

    var opened: Int { self.state.withLockedValue { $0.opened } }
    var isShutDown: Bool { self.state.withLockedValue { $0.isShutDown } }

    func countOpened() {
        self.state.withLockedValue { $0.opened += 1 }
    }

    /// An idle, still open connection for `key`. Closed ones found on the way are dropped.
    func take(_ key: Key) -> HTTPConnection? {
        self.state.withLockedValue { state in
            while var list = state.idle[key], let connection = list.popLast() {
                state.idle[key] = list
                if connection.channel.isActive { return connection }
            }
            return nil
        }
    }

    /// Keeps `connection` for reuse; false when the pool is shut down or full (the caller closes it).
    func put(_ connection: HTTPConnection, for key: Key) -> Bool {
        self.state.withLockedValue { state in
            guard !state.isShutDown, state.idle[key, default: []].count < self.maximumIdlePerKey else { return false }
            state.idle[key, default: []].append(connection)
            return true
        }
    }

    /// Marks the pool shut down and hands back every idle connection.
    func shutdown() -> [HTTPConnection] {
        self.state.withLockedValue { state in
            state.isShutDown = true
            let all = state.idle.values.flatMap { $0 }
            state.idle = [:]
            return all
        }
    }
}

struct CollectedResponse: Sendable {
    var head: HTTPResponseHead
    var body: [UInt8]
    var bodyMayBeTruncated: Bool
}

/// The first failure seen on a connection, kept outside the pipeline: NIO removes the handlers when the channel
/// closes, and a close before the request is sent (a TLS 1.3 server's alert right after the handshake) must
/// still be reported with its reason.
final class ConnectionEvents: Sendable {
    private let first = NIOLockedValueBox<PinningConnectionError?>(nil)

    var failure: PinningConnectionError? { self.first.withLockedValue { $0 } }

    func note(_ error: PinningConnectionError) {
        self.first.withLockedValue { if $0 == nil { $0 = error } }
    }
}

/// How a response body ends (RFC 9112 §6.3).
enum BodyFraming: Equatable {
    /// No body (1xx, 204, 304).
    case none
    /// `Transfer-Encoding: chunked`: ends with the terminal chunk.
    case chunked
    /// `Content-Length: n`.
    case length(Int)
    /// Neither: the body ends when the server closes the connection.
    case untilClose

    init(_ head: HTTPResponseHead) {
        let code = head.status.code
        if (100..<200).contains(code) || code == 204 || code == 304 {
            self = .none
        } else if head.headers[canonicalForm: "transfer-encoding"].contains(where: { $0.lowercased() == "chunked" }) {
            self = .chunked
        } else if let text = head.headers.first(name: "content-length"), let length = Int(text) {
            self = .length(length)
        } else {
            self = .untilClose
        }
    }
}

/// Collects one response at a time; fails the pending request on errors and on close.
///
/// A server that closes without a TLS close_notify (NIOSSL's `uncleanShutdown`), as many do after the last
/// response: what it means depends on the body's framing, as in curl, Python `requests` and Go.
/// - `Content-Length` fully received, or chunked up to the terminal chunk: the response is complete, and the
///   unclean close after it changes nothing.
/// - `Content-Length` or chunked, cut short: an error saying the response was cut short.
/// - Delimited by the close alone: accepted with ``PinnedHTTPResponse/bodyMayBeTruncated`` set, because
///   nothing can tell a complete body from a truncated one.
final class HTTPResponseCollector: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let host: String
    private let maximumBodySize: Int
    private let events: ConnectionEvents
    private var promise: EventLoopPromise<CollectedResponse>?
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []
    private var inactive = false
    /// The server closed the TCP connection without a TLS close_notify.
    private var uncleanShutdown = false

    init(host: String, maximumBodySize: Int, events: ConnectionEvents) {
        self.host = host
        self.maximumBodySize = maximumBodySize
        self.events = events
    }

    func begin(_ promise: EventLoopPromise<CollectedResponse>) {
        self.head = nil
        self.body = []
        if self.inactive {
            promise.fail(self.events.failure ?? PinningConnectionError(code: .connectionClosed, host: self.host, message: "the server closed the connection before the request was sent"))
            return
        }
        self.promise = promise
    }

    func fail(_ error: PinningConnectionError) {
        self.events.note(error)
        guard let promise = self.promise else { return }
        self.promise = nil
        promise.fail(error)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body(var buffer):
            guard self.body.count + buffer.readableBytes <= self.maximumBodySize else {
                self.fail(PinningConnectionError(code: .httpFailed, host: self.host, message: "the response body exceeds \(self.maximumBodySize) bytes"))
                context.close(promise: nil)
                return
            }
            self.body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard let promise = self.promise, let head = self.head else { return }
            self.promise = nil
            // The decoder ends an until-close body when the connection closes; the unclean close was reported
            // just before (NIOSSL fires uncleanShutdown, then channelInactive, on which the decoder finishes).
            let mayBeTruncated = self.uncleanShutdown && BodyFraming(head) == .untilClose
            promise.succeed(CollectedResponse(head: head, body: self.body, bodyMayBeTruncated: mayBeTruncated))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? NIOSSLError, error == .uncleanShutdown {
            // Not an error by itself: channelInactive follows, and the framing decides (see the type's comment).
            self.uncleanShutdown = true
            return
        }
        self.fail(self.mapped(error))
        context.close(promise: nil)
    }

    private func mapped(_ error: any Error) -> PinningConnectionError {
        if let error = error as? PinningConnectionError { return error }
        if let parserError = error as? HTTPParserError, let head = self.head, parserError == .invalidEOFState {
            return PinningConnectionError(code: .httpFailed, host: self.host, message: self.cutShort(head), underlying: error)
        }
        if let words = ConnectionFailureWords.httpProblem(error) {
            return PinningConnectionError(code: .httpFailed, host: self.host, message: words, underlying: error)
        }
        if let alert = ConnectionFailureWords.receivedAlert(in: error) {
            // TLS 1.3: the client's side of the handshake completes before the server has read our certificate,
            // so its refusal arrives now. Said as the server said it, every time.
            return PinningConnectionError(code: .handshakeFailed, host: self.host, message: "the server refused the handshake: \(alert)", underlying: error)
        }
        let words = ConnectionFailureWords.tlsProblem(error) ?? ConnectionFailureWords.socketProblem(error).map { "the connection failed: \($0)" }
        let stage = self.head == nil ? "the request failed before a response arrived" : "the response failed"
        return PinningConnectionError(code: .httpFailed, host: self.host, message: words.map { "\(stage): \($0)" } ?? stage, underlying: error)
    }

    /// Why a framed body that the close interrupted is refused.
    private func cutShort(_ head: HTTPResponseHead) -> String {
        let close = self.uncleanShutdown ? "closed the connection without a TLS close_notify" : "closed the connection"
        switch BodyFraming(head) {
        case .length(let length):
            return "the response was cut short: the server \(close) after \(self.body.count) of the \(length) body bytes its Content-Length announced"
        case .chunked:
            return "the response was cut short: the server \(close) before the last chunk of its chunked body (\(self.body.count) bytes received)"
        case .none, .untilClose:
            return "the response was cut short: the server \(close) mid-response"
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.inactive = true
        let close = self.uncleanShutdown ? " (without a TLS close_notify)" : ""
        if self.promise == nil {
            // Idle: a later request on this connection is told it closed (and a pooled one is replaced).
            self.events.note(PinningConnectionError(code: .connectionClosed, host: self.host, message: "the server closed the connection\(close)"))
        } else if self.head == nil {
            self.fail(PinningConnectionError(code: .connectionClosed, host: self.host, message: "the server closed the connection before responding\(close)"))
        } else {
            self.fail(PinningConnectionError(code: .httpFailed, host: self.host, message: "the server closed the connection mid-response\(close)"))
        }
        context.fireChannelInactive()
    }
}

@available(*, unavailable)
extension HTTPResponseCollector: Sendable {}
