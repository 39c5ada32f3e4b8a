import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// Where one report goes: scheme, host, port and request target of a report URI.
struct ReportTarget: Sendable {
    struct Problem: Error {
        var message: String
    }

    var secure: Bool
    /// The host without brackets (`::1`), as connected to and judged.
    var host: String
    var port: Int
    /// `/pins?x=1`.
    var pathAndQuery: String

    /// The `Host` header: IPv6 literals in brackets, the port unless it is the scheme's default.
    var hostHeader: String {
        let name = self.host.contains(":") ? "[\(self.host)]" : self.host
        return self.port == (self.secure ? 443 : 80) ? name : "\(name):\(self.port)"
    }

    static func parse(_ uri: URL) -> Result<ReportTarget, Problem> {
        let scheme = uri.scheme?.lowercased()
        guard scheme == "https" || scheme == "http" else {
            return .failure(Problem(message: "not an https:// or http:// URI"))
        }
        guard var host = uri.host, !host.isEmpty else {
            return .failure(Problem(message: "the URI has no host"))
        }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let secure = scheme == "https"
        var path = uri.path.isEmpty ? "/" : uri.path
        if let query = uri.query { path += "?" + query }
        return .success(ReportTarget(secure: secure, host: host, port: uri.port ?? (secure ? 443 : 80), pathAndQuery: path))
    }
}

/// One HTTP/1.1 POST of a report on a connection of its own (`Connection: close`): over a ``PinnedTLSClient``
/// handshake for `https`, in the clear for `http`. Only the status line of the answer matters.
enum ReportPoster {
    struct Response: Sendable {
        /// The status code, when a response head was read.
        var status: Int?
        var message: String
    }

    /// POSTs `body` to `target`; connecting (with the handshake) and the response are each bounded by `timeout`.
    static func post(
        _ body: [UInt8],
        to target: ReportTarget,
        tls: PinnedTLSClient,
        group: any EventLoopGroup,
        timeout: TimeAmount
    ) async -> Response {
        let channel: any Channel
        do {
            channel = try await Self.connect(target, tls: tls, group: group, timeout: timeout)
        } catch let error as PinningConnectionError where error.trustFailure != nil {
            // The collector was refused: say why, with the trust failure ("untrusted: …").
            return Response(status: nil, message: error.description)
        } catch let error as PinningConnectionError {
            return Response(status: nil, message: error.message)
        } catch {
            return Response(status: nil, message: error.message)
        }
        defer { channel.close(promise: nil) }
        do {
            let status = try await Self.exchange(body, target: target, on: channel, timeout: timeout)
            return Response(status: status, message: "HTTP \(status)")
        } catch {
            return Response(status: nil, message: error.message)
        }
    }

    private static func connect(
        _ target: ReportTarget,
        tls: PinnedTLSClient,
        group: any EventLoopGroup,
        timeout: TimeAmount
    ) async throws -> any Channel {
        let configure: @Sendable (any Channel) -> EventLoopFuture<Void> = { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                try channel.pipeline.syncOperations.addHandler(ReportStatusCollector())
            }
        }
        if target.secure {
            return try await tls.connect(host: target.host, port: target.port, group: group, timeout: timeout, configure: configure).channel
        }
        do {
            return try await ClientBootstrap(group: group)
                .connectTimeout(timeout)
                .channelInitializer(configure)
                .connect(host: target.host, port: target.port)
                .get()
        } catch let error as ChannelError {
            if case .connectTimeout = error {
                throw ReportPostError(message: "cannot connect to \(target.host) port \(target.port): timed out")
            }
            throw ReportPostError(message: ConnectionFailureWords.connectProblem(error, host: target.host, port: target.port))
        } catch {
            // The same words as a pinned connection's (PinnedTLSClient): no NIO type dumps.
            throw ReportPostError(message: ConnectionFailureWords.connectProblem(error, host: target.host, port: target.port))
        }
    }

    private static func exchange(
        _ body: [UInt8],
        target: ReportTarget,
        on channel: any Channel,
        timeout: TimeAmount
    ) async throws(ReportPostError) -> Int {
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: target.pathAndQuery)
        head.headers.add(name: "host", value: target.hostHeader)
        head.headers.add(name: "content-type", value: "application/json")
        head.headers.add(name: "content-length", value: "\(body.count)")
        head.headers.add(name: "user-agent", value: "swift-pinning")
        head.headers.add(name: "connection", value: "close")
        let requestHead = head
        do {
            return try await channel.eventLoop.flatSubmit { () -> EventLoopFuture<Int> in
                let collector: ReportStatusCollector
                do {
                    collector = try channel.pipeline.syncOperations.handler(type: ReportStatusCollector.self)
                } catch {
                    return channel.eventLoop.makeFailedFuture(
                        ReportPostError(message: "the collector closed the connection before the report was sent")
                    )
                }
                let promise = channel.eventLoop.makePromise(of: Int.self)
                collector.begin(promise)
                var buffer = channel.allocator.buffer(capacity: body.count)
                buffer.writeBytes(body)
                channel.write(HTTPClientRequestPart.head(requestHead), promise: nil)
                channel.write(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: nil)
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                let timer = channel.eventLoop.scheduleTask(in: timeout) {
                    promise.fail(ReportPostError(message: "timed out waiting for the collector's response"))
                    channel.close(promise: nil)
                }
                promise.futureResult.whenComplete { _ in timer.cancel() }
                return promise.futureResult
            }.get()
        } catch let error as ReportPostError {
            throw error
        } catch {
            throw ReportPostError(message: "the report could not be sent: \(ConnectionFailureWords.words(error))")
        }
    }
}

struct ReportPostError: Error, CustomStringConvertible {
    var message: String
    var description: String { self.message }
}

extension Error {
    fileprivate var message: String {
        (self as? ReportPostError)?.message ?? "\(self)"
    }
}

/// Completes the promise it is given with the status of the first response head; fails it when the connection
/// errs or closes first. Runs on the channel's event loop only.
final class ReportStatusCollector: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    private var promise: EventLoopPromise<Int>?
    private var earlyFailure: ReportPostError?

    func begin(_ promise: EventLoopPromise<Int>) {
        if let earlyFailure {
            promise.fail(earlyFailure)
            return
        }
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = self.unwrapInboundIn(data) {
            self.complete(.success(Int(head.status.code)))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.complete(.failure(ReportPostError(message: "the exchange with the collector failed: \(ConnectionFailureWords.words(error))")))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.complete(.failure(ReportPostError(message: "the collector closed the connection without an HTTP status line")))
        context.fireChannelInactive()
    }

    private func complete(_ result: Result<Int, ReportPostError>) {
        guard let promise = self.promise else {
            if case .failure(let failure) = result, self.earlyFailure == nil { self.earlyFailure = failure }
            return
        }
        self.promise = nil
        promise.completeWith(result.mapError { $0 as any Error })
    }
}

@available(*, unavailable)
extension ReportStatusCollector: Sendable {}
