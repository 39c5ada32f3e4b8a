import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

/// The one HTTP/1.1 exchange as failure reports use it: only the status line matters, so a report is delivered
/// when the head arrives, whatever the body does after it.
@Suite("HTTP exchange for reports")
struct HTTPExchangeTests {
    @Test("a report is delivered on the collector's status line: a 200 whose announced body never comes is a delivery, not a timeout", .timeLimit(.minutes(3)))
    func deliveredOnStatusLine() async throws {
        let server = try await HeadOnlyServer()
        defer { Task { await server.stop() } }
        let outcomes = PinFailureReportDeliveryTests.Outcomes()
        // Were the body awaited, the attempt could end only by this timeout, as a failure.
        let reporter = HTTPPinFailureReporter(timeout: .seconds(120), maximumAttempts: 1, group: testGroup, onOutcome: { outcomes.append($0) })
        await reporter.send(PinFailureReportDeliveryTests.minimalReport, to: [try #require(URL(string: "http://127.0.0.1:\(server.port)/pins"))])
        let all = outcomes.all
        #expect(all.count == 1 && all[0].delivered && all[0].status == 200 && all[0].attempts == 1, "\(all)")
        let heads = server.heads
        #expect(heads.count == 1 && heads[0].method == .POST && heads[0].headers.first(name: "connection") == "close", "\(heads)")
        #expect(heads.first?.headers.first(name: "content-type") == "application/json")
    }
}

/// A plain-HTTP server on 127.0.0.1 that answers every request with `200 OK` announcing a body of a megabyte, and
/// never sends it.
final class HeadOnlyServer: Sendable {
    let channel: any Channel
    private let received: NIOLockedValueBox<[HTTPRequestHead]>
    var port: Int { self.channel.localAddress?.port ?? 0 }
    var heads: [HTTPRequestHead] { self.received.withLockedValue { $0 } }

    init() async throws {
        let received = NIOLockedValueBox<[HTTPRequestHead]>([])
        self.received = received
        self.channel = try await ServerBootstrap(group: testGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(HeadOnlyHandler(received: received))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func stop() async {
        do { try await self.channel.close() } catch {}
    }
}

final class HeadOnlyHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let received: NIOLockedValueBox<[HTTPRequestHead]>

    init(received: NIOLockedValueBox<[HTTPRequestHead]>) {
        self.received = received
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.received.withLockedValue { $0.append(head) }
        case .body:
            break
        case .end:
            var headers = HTTPHeaders()
            headers.add(name: "content-length", value: "1000000")
            context.writeAndFlush(self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        }
    }
}

@available(*, unavailable)
extension HeadOnlyHandler: Sendable {}
