import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Pinning
import X509

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
    private let defaultMaximumBodySize: Int
    /// The cap of the response being collected (a request may set its own).
    private var maximumBodySize: Int
    private let events: ConnectionEvents
    private var promise: EventLoopPromise<CollectedResponse>?
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []
    private var inactive = false
    /// The server closed the TCP connection without a TLS close_notify.
    private var uncleanShutdown = false
    /// The request wants the status and headers only: the response completes at its head, and the body that
    /// follows is not read (the exchange closes the connection).
    private var statusOnly = false

    init(host: String, maximumBodySize: Int, events: ConnectionEvents) {
        self.host = host
        self.defaultMaximumBodySize = maximumBodySize
        self.maximumBodySize = maximumBodySize
        self.events = events
    }

    func begin(_ promise: EventLoopPromise<CollectedResponse>, maximumBodySize: Int? = nil, statusOnly: Bool = false) {
        self.head = nil
        self.body = []
        self.maximumBodySize = maximumBodySize ?? self.defaultMaximumBodySize
        self.statusOnly = statusOnly
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
            // A body announced by Content-Length within the cap is collected into one allocation.
            if !self.statusOnly, let length = head.headers.first(name: "content-length").flatMap({ Int($0) }), length > 0, length <= self.maximumBodySize {
                self.body.reserveCapacity(length)
            }
            if self.statusOnly, let promise = self.promise {
                self.promise = nil
                promise.succeed(CollectedResponse(head: head, body: [], bodyMayBeTruncated: false))
            }
        case .body(let buffer):
            guard !self.statusOnly else { return }
            guard self.body.count + buffer.readableBytes <= self.maximumBodySize else {
                var error = PinningConnectionError(code: .httpFailed, host: self.host, message: "the response body exceeds \(self.maximumBodySize) bytes")
                error.exceededBodyLimit = self.maximumBodySize
                self.fail(error)
                context.close(promise: nil)
                return
            }
            buffer.withUnsafeReadableBytes { self.body.append(contentsOf: $0) }
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
        let alerts = TLSAlertObserver.alerts(of: context.channel)
        self.fail(self.mapped(error, alerts: alerts).with(alerts))
        context.close(promise: nil)
    }

    private func mapped(_ error: any Error, alerts: TLSAlertsSeen?) -> PinningConnectionError {
        if let error = error as? PinningConnectionError { return error }
        if let parserError = error as? HTTPParserError, let head = self.head, parserError == .invalidEOFState {
            return PinningConnectionError(code: .httpFailed, host: self.host, message: self.cutShort(head), underlying: error)
        }
        if let words = ConnectionFailureWords.httpProblem(error) {
            return PinningConnectionError(code: .httpFailed, host: self.host, message: words, underlying: error)
        }
        if let refusal = PinningConnectionError.refusedAfterHandshake(error, alerts: alerts, host: self.host) {
            return refusal
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

extension PinningConnectionError {
    /// The server's refusal that arrived after our side of the handshake was done, or nil when `alerts` hold no
    /// failure. TLS 1.3: the client's side of the handshake completes before the server has read our
    /// certificate, so its refusal arrives with the first records after. Said as the server said it, every time.
    static func refusedAfterHandshake(_ error: any Error, alerts: TLSAlertsSeen?, host: String) -> PinningConnectionError? {
        guard let alert = alerts?.receivedFailure else { return nil }
        return PinningConnectionError(code: .handshakeFailed, host: host, message: "the server refused the handshake: \(alert)", underlying: error)
            .with(alerts)
    }
}

/// The last handler of an HTTP/2 connection's pipeline: keeps a TLS refusal that arrives after the handshake
/// in the connection's ``ConnectionEvents``.
///
/// A TLS 1.3 server refuses our certificate (or its absence) after ALPN chose h2 and the HTTP/2 pipeline was
/// set up, before or just after our first stream opened. NIOHTTP2 tells the streams only that the connection
/// closed, and a stream's own pipeline has no TLS records to read the alert from, so the request that fails
/// reports the failure kept here (see `PinnedHTTPClient.sendHTTP2`).
final class HTTP2ConnectionFailureRecorder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame

    private let host: String
    private let events: ConnectionEvents

    init(host: String, events: ConnectionEvents) {
        self.host = host
        self.events = events
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // The alerts are asked for here, before channelInactive has passed (TLSAlertObserver's contract).
        if let refusal = PinningConnectionError.refusedAfterHandshake(error, alerts: TLSAlertObserver.alerts(of: context.channel), host: self.host) {
            self.events.note(refusal)
        }
        context.fireErrorCaught(error)
    }
}

@available(*, unavailable)
extension HTTP2ConnectionFailureRecorder: Sendable {}
