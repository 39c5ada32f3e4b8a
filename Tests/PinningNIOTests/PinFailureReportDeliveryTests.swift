import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// Delivery of pin failure reports by `PinningNIO` (moved here from the core with the queue and the reporter):
/// POSTed as JSON to real collectors on 127.0.0.1, over plain HTTP and over HTTPS judged by the reporter's own
/// policy; the 24-hour rate limit; bounded retries.
@Suite("Pin failure report delivery")
struct PinFailureReportDeliveryTests {
    static let time = TestPKI.referenceTime
    static let year: TimeInterval = 365 * 86400

    struct PKI: Sendable {
        let api: TestChain  // api.example.com under rootA
        let other: TestChain  // a second, unrelated PKI (for "wrong" pins)
    }

    static let fixture = Result {
        let before = PinFailureReportDeliveryTests.time.addingTimeInterval(-PinFailureReportDeliveryTests.year)
        let after = PinFailureReportDeliveryTests.time.addingTimeInterval(PinFailureReportDeliveryTests.year)
        return PKI(
            api: try TestChain(host: "api.example.com", notValidBefore: before, notValidAfter: after),
            other: try TestChain(host: "api.example.com", notValidBefore: before, notValidAfter: after, rootName: "Other Root")
        )
    }

    static func pin(_ certificate: Certificate) -> String { Pin(spkiOf: certificate).description }

    /// A report with no chains, for tests of delivery alone.
    static let minimalReport = PinFailureReport(
        dateTime: PinFailureReportDeliveryTests.time,
        hostname: "api.example.com",
        port: 443,
        effectiveExpirationDate: nil,
        includeSubdomains: false,
        notedHostname: "api.example.com",
        servedCertificateChain: [],
        validatedCertificateChain: [],
        knownPins: [],
        validationResult: "pinMismatch"
    )

    static func configuration(_ domains: String) throws -> PinningConfiguration {
        try PinningConfiguration(
            data: Data("{\"version\": 1, \"unlistedHosts\": \"default\", \"domains\": {\(domains)}}".utf8),
            baseDirectory: "/"
        )
    }

    /// The chain presented, with platform roots = `roots`, at the reference time.
    static func trust(_ chain: TestChain, roots: [Certificate], at time: Date = PinFailureReportDeliveryTests.time) -> ServerTrust {
        ServerTrust(certificates: chain.presented, platformRoots: TrustRoots(roots), validationTime: time)
    }

    final class TestClock: @unchecked Sendable {
        private let lock = NSLock()
        private var value: Date
        init(_ value: Date) { self.value = value }
        var now: Date {
            self.lock.lock()
            defer { self.lock.unlock() }
            return self.value
        }
        func advance(_ interval: TimeInterval) {
            self.lock.lock()
            self.value += interval
            self.lock.unlock()
        }
    }

    final class Outcomes: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [HTTPPinFailureReporter.Outcome] = []
        func append(_ outcome: HTTPPinFailureReporter.Outcome) {
            self.lock.lock()
            self.values.append(outcome)
            self.lock.unlock()
        }
        var all: [HTTPPinFailureReporter.Outcome] {
            self.lock.lock()
            defer { self.lock.unlock() }
            return self.values
        }
    }

    @Test("reports are POSTed as JSON to a real server, at most once per 24 hours per host, chain and pins", .timeLimit(.minutes(3)))
    func deliveryAndRateLimit() async throws {
        let pki = try Self.fixture.get()
        let server = try LoopbackHTTPServer()
        defer { server.stop() }
        let clock = TestClock(Self.time)
        let outcomes = Outcomes()
        let queue = PinFailureReportQueue(
            reporter: HTTPPinFailureReporter(timeout: .seconds(30), onOutcome: { outcomes.append($0) }),
            clock: { clock.now }
        )
        var configuration = try Self.configuration(
            "\"**.example.com\": {\"pins\": [\"\(Self.pin(pki.other.root.certificate))\"], \"enforce\": false, \"reportURIs\": [\"\(server.url("/pins").absoluteString)\"]}"
        )
        configuration.reportQueue = queue
        let trust = Self.trust(pki.api, roots: [pki.api.root.certificate])

        let first = await configuration.evaluate(trust, forHost: "api.example.com")
        #expect(first.isTrusted && first.pinMismatch && first.reportSubmitted)
        #expect(await queue.waitForDelivery(timeout: .seconds(50)))
        let requests = await server.waitForRequests(1)
        try #require(requests.count == 1)
        #expect(requests[0].requestLine == "POST /pins HTTP/1.1")
        #expect(requests[0].headers["content-type"] == "application/json")
        let received = try JSONDecoder().decode(PinFailureReport.self, from: Data(requests[0].body))
        #expect(received == first.failureReport)
        #expect(outcomes.all.count == 1 && outcomes.all[0].delivered && outcomes.all[0].status == 204)

        // Same host, chain and pins within 24 hours: not sent again (the verdict is unchanged).
        clock.advance(23 * 3600)
        let second = await configuration.evaluate(trust, forHost: "api.example.com")
        #expect(second.isTrusted && second.pinMismatch && !second.reportSubmitted)
        // Another host is another report.
        let otherHost = try TestChain(
            host: "www.example.com",
            notValidBefore: Self.time.addingTimeInterval(-Self.year),
            notValidAfter: Self.time.addingTimeInterval(Self.year)
        )
        let third = await configuration.evaluate(Self.trust(otherHost, roots: [otherHost.root.certificate]), forHost: "www.example.com")
        #expect(third.reportSubmitted)
        await queue.flush()
        #expect(await server.waitForRequests(2).count == 2)

        // After 24 hours the first report goes out again.
        clock.advance(2 * 3600)
        let fourth = await configuration.evaluate(trust, forHost: "api.example.com")
        #expect(fourth.reportSubmitted)
        await queue.flush()
        #expect(await server.waitForRequests(3).count == 3)
        #expect(server.requests.count == 3)
    }

    @Test("enforced mismatches are reported too; a failing collector is retried a bounded number of times", .timeLimit(.minutes(3)))
    func retries() async throws {
        let pki = try Self.fixture.get()
        let server = try LoopbackHTTPServer(statuses: [500, 503, 204])
        defer { server.stop() }
        let outcomes = Outcomes()
        let queue = PinFailureReportQueue(
            reporter: HTTPPinFailureReporter(
                timeout: .seconds(30),
                maximumAttempts: 3,
                retryDelay: .milliseconds(20),
                onOutcome: { outcomes.append($0) }
            )
        )
        var configuration = try Self.configuration(
            "\"api.example.com\": {\"pins\": [\"\(Self.pin(pki.other.intermediate.certificate))\", \"\(Self.pin(pki.other.root.certificate))\"], \"reportURIs\": [\"\(server.url().absoluteString)\"]}"
        )
        configuration.reportQueue = queue
        let result = await configuration.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com")
        #expect(result.verdict.failure?.code == .pinMismatch && result.reportSubmitted)
        await queue.flush()
        #expect(server.requests.count == 3)
        #expect(outcomes.all.count == 1 && outcomes.all[0].delivered && outcomes.all[0].attempts == 3)

        // A collector that always fails: exactly maximumAttempts tries, then given up.
        let failing = try LoopbackHTTPServer(statuses: [500])
        defer { failing.stop() }
        let reporter = HTTPPinFailureReporter(timeout: .seconds(30), maximumAttempts: 2, retryDelay: .milliseconds(10), onOutcome: { outcomes.append($0) })
        let report = try #require(result.failureReport)
        await reporter.send(report, to: [failing.url()])
        #expect(failing.requests.count == 2)
        #expect(outcomes.all.last?.delivered == false && outcomes.all.last?.status == 500)
    }

    @Test("delivery to nowhere (http and https) is bounded and never changes the verdict", .timeLimit(.minutes(3)))
    func unreachable() async throws {
        let pki = try Self.fixture.get()
        // Port 1 on the loopback, where nothing listens: connection refused (as PinnedClientTests' closed port).
        // Not a port a test server just closed: with the suites running at once, another test's listener could be
        // given that port again before the reports are sent (a CI run once got an HTTP and a TLS answer there).
        let closedPort = 1
        let url = try #require(URL(string: "http://127.0.0.1:\(closedPort)/reports"))
        // https:// now goes through the reporter's own TLS client (no secureReporter): to the same closed port.
        let secureURL = try #require(URL(string: "https://127.0.0.1:\(closedPort)/pins"))
        let outcomes = Outcomes()
        let reporter = HTTPPinFailureReporter(timeout: .seconds(1), maximumAttempts: 2, retryDelay: .milliseconds(10), onOutcome: { outcomes.append($0) })
        let queue = PinFailureReportQueue(reporter: reporter)
        var configuration = try Self.configuration(
            "\"api.example.com\": {\"pins\": [\"\(Self.pin(pki.api.intermediate.certificate))\"], \"enforce\": false, \"reportURIs\": [\"\(url.absoluteString)\", \"\(secureURL.absoluteString)\"]}"
        )
        configuration.reportQueue = queue
        let good = await configuration.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com")
        #expect(good.isTrusted && !good.pinMismatch && !good.reportSubmitted)

        let other = try Self.configuration(
            "\"api.example.com\": {\"pins\": [\"\(Self.pin(pki.other.root.certificate))\"], \"enforce\": false, \"reportURIs\": [\"\(url.absoluteString)\", \"\(secureURL.absoluteString)\"]}"
        )
        var withQueue = other
        withQueue.reportQueue = queue
        let mismatch = await withQueue.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com")
        #expect(mismatch.isTrusted && mismatch.pinMismatch && mismatch.reportSubmitted)
        // Bounded by the reporter, not by a wall clock: flush returns once every attempt was made or refused.
        await queue.flush()
        let all = outcomes.all
        #expect(all.count == 2 && all.allSatisfy { !$0.delivered && $0.attempts <= 2 })
        #expect(all.contains { $0.uri.scheme == "https" && $0.attempts == 2 && $0.message.contains("127.0.0.1") })
        // In words, without NIO type dumps: "cannot connect to 127.0.0.1 port N: connection refused".
        #expect(all.allSatisfy { $0.message.hasPrefix("cannot connect to 127.0.0.1 port \(closedPort)") }, "\(all.map(\.message))")
    }

    @Test("a reporter's numbers at their extremes are bounded, never a trap", .timeLimit(.minutes(3)))
    func extremeNumbers() async throws {
        let pki = try Self.fixture.get()
        // Port 1, where nothing listens (see `unreachable`: a port a test server just closed can be taken again).
        let url = try #require(URL(string: "http://127.0.0.1:1/reports"))
        let report = try #require(
            await Self.configuration("\"api.example.com\": {\"pins\": [\"\(Self.pin(pki.other.root.certificate))\"], \"enforce\": false}")
                .evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com").failureReport
        )
        let outcomes = Outcomes()
        for attempts in [0, -5, Int.min] {
            var reporter = HTTPPinFailureReporter(timeout: .seconds(Int64.max), onOutcome: { outcomes.append($0) })
            reporter.maximumAttempts = attempts
            reporter.retryDelay = .seconds(-1)
            await reporter.send(report, to: [url])
        }
        #expect(outcomes.all.count == 3 && outcomes.all.allSatisfy { !$0.delivered && $0.attempts == 1 }, "\(outcomes.all)")
    }

    // MARK: - HTTPS collectors

    /// An HTTPS collector on 127.0.0.1 under a PKI of its own ("Collector Root").
    static func httpsCollector() async throws -> (TestChain, LoopbackReportCollector) {
        let pki = try TestChain(host: "localhost", rootName: "Collector Root")
        let collector = try await LoopbackReportCollector(identity: try pki.leaf.tlsIdentity(chain: [pki.intermediate.certificate]))
        return (pki, collector)
    }

    @Test("an https:// collector gets the report over the reporter's own policy (its roots, no pins)", .timeLimit(.minutes(3)))
    func httpsCollector() async throws {
        let pki = try Self.fixture.get()
        let (collectorPKI, collector) = try await Self.httpsCollector()
        defer { Task { await collector.stop() } }
        let outcomes = Outcomes()
        // The collector's root stands in for the platform store: the reporter judges collectors by it, not by
        // the configuration whose pin just failed (that pin is on no path of the collector's chain).
        let reporter = HTTPPinFailureReporter(
            timeout: .seconds(30),
            // The settings form (TrustSettings); the untrusted-collector test below uses the trust: form.
            settings: TrustSettings(platformRoots: Fixtures.platform([collectorPKI.root.certificate])),
            group: testGroup,
            onOutcome: { outcomes.append($0) }
        )
        let queue = PinFailureReportQueue(reporter: reporter)
        let uri = "https://127.0.0.1:\(collector.port)/pins?source=test"
        var configuration = try Self.configuration(
            "\"api.example.com\": {\"pins\": [\"\(Self.pin(pki.other.intermediate.certificate))\", \"\(Self.pin(pki.other.root.certificate))\"], \"reportURIs\": [\"\(uri)\"]}"
        )
        configuration.reportQueue = queue
        let result = await configuration.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com")
        #expect(result.verdict.failure?.code == .pinMismatch && result.reportSubmitted)
        #expect(await queue.waitForDelivery(timeout: .seconds(50)))
        #expect(await queue.pendingCount == 0)

        let requests = collector.requests
        try #require(requests.count == 1)
        #expect(requests[0].head.method == .POST && requests[0].head.uri == "/pins?source=test")
        #expect(requests[0].head.headers.first(name: "content-type") == "application/json")
        #expect(requests[0].head.headers.first(name: "host") == "127.0.0.1:\(collector.port)")
        let received = try JSONDecoder().decode(PinFailureReport.self, from: Data(requests[0].body))
        #expect(received == result.failureReport)
        let all = outcomes.all
        #expect(all.count == 1 && all[0].delivered && all[0].status == 204 && all[0].attempts == 1)
    }

    @Test("a collector the reporter's policy does not trust never receives the report", .timeLimit(.minutes(3)))
    func untrustedCollector() async throws {
        let pki = try Self.fixture.get()
        let (_, collector) = try await Self.httpsCollector()
        defer { Task { await collector.stop() } }
        let outcomes = Outcomes()
        // Roots that do not include the collector's: the handshake is refused, the body is never sent.
        let reporter = HTTPPinFailureReporter(
            timeout: .seconds(30),
            maximumAttempts: 2,
            retryDelay: .milliseconds(10),
            settings: TrustSettings(platformRoots: Fixtures.platform([pki.api.root.certificate])),
            group: testGroup,
            onOutcome: { outcomes.append($0) }
        )
        let uri = try #require(URL(string: "https://127.0.0.1:\(collector.port)/pins"))
        await reporter.send(Self.minimalReport, to: [uri])
        let all = outcomes.all
        #expect(all.count == 1 && !all[0].delivered && all[0].status == nil && all[0].attempts == 2)
        #expect(all[0].message.hasPrefix("untrusted: "), "\(all[0].message)")
        #expect(collector.requests.isEmpty)
    }

    @Test("a report URI that is neither https nor http is refused without an attempt")
    func unsupportedScheme() async throws {
        let outcomes = Outcomes()
        let reporter = HTTPPinFailureReporter(group: testGroup, onOutcome: { outcomes.append($0) })
        await reporter.send(Self.minimalReport, to: [try #require(URL(string: "ftp://127.0.0.1/pins"))])
        let all = outcomes.all
        #expect(all.count == 1 && !all[0].delivered && all[0].attempts == 0 && all[0].message == "not an https:// or http:// URI")
    }
}

/// A report collector on 127.0.0.1 (HTTPS with `identity`, else plain HTTP) that records every request with its
/// body and answers 204.
final class LoopbackReportCollector: Sendable {
    struct Request: Sendable {
        var head: HTTPRequestHead
        var body: [UInt8]
    }

    let channel: any Channel
    private let received: NIOLockedValueBox<[Request]>
    var port: Int { self.channel.localAddress?.port ?? 0 }
    var requests: [Request] { self.received.withLockedValue { $0 } }

    init(identity: TLSIdentity?) async throws {
        let received = NIOLockedValueBox<[Request]>([])
        self.received = received
        let context = try identity.map {
            try NIOSSLContext(
                configuration: TLSConfiguration.makeServerConfiguration(certificateChain: $0.certificateSources, privateKey: $0.privateKeySource)
            )
        }
        self.channel = try await ServerBootstrap(group: testGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(RecordingCollectorHandler(received: received))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func stop() async {
        do { try await self.channel.close() } catch {}
    }
}

/// Records one request (head and body) per connection, then answers `204 No Content` and closes.
final class RecordingCollectorHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let received: NIOLockedValueBox<[LoopbackReportCollector.Request]>
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(received: NIOLockedValueBox<[LoopbackReportCollector.Request]>) {
        self.received = received
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.body = []
        case .body(var buffer):
            self.body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard let head = self.head else { return }
            let request = LoopbackReportCollector.Request(head: head, body: self.body)
            self.received.withLockedValue { $0.append(request) }
            var headers = HTTPHeaders()
            headers.add(name: "content-length", value: "0")
            headers.add(name: "connection", value: "close")
            context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .noContent, headers: headers))), promise: nil)
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(self.wrapOutboundOut(.end(nil))).whenComplete { _ in loopBound.value.close(promise: nil) }
        }
    }
}

@available(*, unavailable)
extension RecordingCollectorHandler: Sendable {}
