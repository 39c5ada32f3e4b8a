import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO
import PinningProxy
import PinningTestSupport
import Testing
import X509

/// AsyncHTTPClient has no hook to judge a chain during the handshake, so the adapter can pin only the leaf. Through
/// `PinningProxy` (issue 16: "AsyncHTTPClient through the proxy"), an unmodified AsyncHTTPClient gets the whole
/// per-host policy: pins anywhere in the chain, anchors, and the entry's client identity. AHC's own proxy support
/// sends `CONNECT`; it trusts only the proxy's local CA.
@Suite("AsyncHTTPClient through PinningProxy", .timeLimit(.minutes(3)))
struct AsyncHTTPClientThroughProxyTests {
    /// An mTLS upstream (its reply names the client certificate), a configuration pinning api.example.com to the
    /// intermediate (the entry's client identity is device-ü 3) and bad.example.com to unrelated keys, and a
    /// PinningProxy for it whose log records are kept.
    struct Fixture {
        let directory: TemporaryDirectory
        let server: HTTPSTestServer
        let authority: ProxyCertificateAuthority
        let proxy: PinningProxy
        let proxyPort: Int
        let records = NIOLockedValueBoxForTests<[ProxyLogRecord]>([])

        init() async throws {
            let directory = try TemporaryDirectory(prefix: "pinning-ahc-proxy")
            self.directory = directory
            let genuine = try TestChain(host: "api.example.com")
            let device = try TestPKI.leaf("device-ü 3", issuer: genuine.intermediate, dnsNames: ["device-3.fleet.test"], usage: .clientAuth)
            // One server certificate for both names, so bad.example.com differs from api.example.com only in its pins.
            let serverLeaf = try TestPKI.leaf("api.example.com", issuer: genuine.intermediate, dnsNames: ["api.example.com", "bad.example.com"])
            // The upstream requires a client certificate under the same root and answers with its subject.
            let mutual = try MutualTLSServer(
                identity: try serverLeaf.tlsIdentity(chain: [genuine.intermediate.certificate]),
                clientCertificateAuthorities: [genuine.root.certificate]
            )
            let server = try await HTTPSTestServer(mutualTLS: mutual)
            self.server = server
            try directory.write("root.pem", genuine.root.certificatePEM)
            let intermediatePin = Pin(spkiOf: genuine.intermediate.certificate).description
            let unrelated = ["sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString(), "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString()]
            let configuration = try PinningConfiguration(
                data: Data(
                    """
                    {"version": 1, "domains": {
                      "api.example.com": {"pins": ["\(intermediatePin)", "\(unrelated[1])"], "anchors": ["root.pem"], "anchorsOnly": true},
                      "bad.example.com": {"pins": ["\(unrelated[0])", "\(unrelated[1])"], "anchors": ["root.pem"], "anchorsOnly": true}
                    }}
                    """.utf8),
                baseDirectory: directory.path
            )
            self.authority = try ProxyCertificateAuthority.load(directory: directory.path("ca"), coverage: configuration.entries.map(\.coverage))
            var resolve = ProxySettings.Resolve()
            let upstream = try SocketAddress(ipAddress: "127.0.0.1", port: server.port)
            resolve.add(host: "api.example.com", port: server.port, address: upstream)
            resolve.add(host: "bad.example.com", port: server.port, address: upstream)
            let settings = ProxySettings(
                configuration: configuration,
                identities: ["api.example.com": try device.tlsIdentity(chain: [genuine.intermediate.certificate])],
                listen: try SocketAddress(ipAddress: "127.0.0.1", port: 0),
                resolve: resolve
            )
            let records = self.records
            self.proxy = try PinningProxy(settings: settings, authority: self.authority, group: testGroup) { record in
                records.withLockedValue { $0.append(record) }
            }
            let addresses = try await self.proxy.start()
            self.proxyPort = try #require(addresses.first?.port)
        }

        /// A plain AsyncHTTPClient: its proxy setting, and the local CA as its only root. No pinning code.
        func client(readTimeout: TimeAmount = .seconds(30)) throws -> HTTPClient {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: self.authority.certificate.derBytes, format: .der)])
            var clientConfiguration = HTTPClient.Configuration(tlsConfiguration: tls)
            clientConfiguration.proxy = .server(host: "127.0.0.1", port: self.proxyPort)
            clientConfiguration.timeout = .init(connect: .seconds(30), read: readTimeout)
            return HTTPClient(eventLoopGroup: testGroup, configuration: clientConfiguration)
        }

    }

    @Test("an intermediate pin and a client identity hold for a plain AsyncHTTPClient; a wrong pin is a 502 that says pinMismatch")
    func throughProxy() async throws {
        let fixture = try await Fixture()
        let server = fixture.server
        let proxy = fixture.proxy
        let records = fixture.records
        defer {
            fixture.directory.remove()
            Task { await server.stop() }
        }

        let client = try fixture.client()
        do {
            let trusted = try await client.execute(HTTPClientRequest(url: "https://api.example.com:\(server.port)/"), timeout: .seconds(50))
            let body = String(buffer: try await trusted.body.collect(upTo: 1 << 16))
            #expect(trusted.status == .ok)
            // The upstream saw the entry's identity: the proxy presented it.
            #expect(body == "hello CN=device-ü 3", "\(body)")

            let refused = try await client.execute(HTTPClientRequest(url: "https://bad.example.com:\(server.port)/"), timeout: .seconds(50))
            let explanation = String(buffer: try await refused.body.collect(upTo: 1 << 16))
            #expect(refused.status == .badGateway)
            #expect(refused.headers["X-Pinning-Failure"] == ["pinMismatch"], "\(refused.headers)")
            #expect(explanation.contains("pin"), "\(explanation)")
        } catch {
            try await client.shutdown()
            await proxy.stop()
            throw error
        }
        try await client.shutdown()
        await proxy.stop()
        // A connection's record is written when the connection has finished closing, on its event loop, which
        // may be after stop() returned (stop closes the listeners): wait for the connections to drain, then for
        // both records, up to 10 s.
        await proxy.drain(timeout: .seconds(10))
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline,
            !records.withLockedValue({ $0.contains { $0.host == "bad.example.com" } && $0.contains { $0.host == "api.example.com" } })
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        let logged = records.withLockedValue { $0 }
        #expect(logged.contains { $0.host == "api.example.com" && $0.verdict == .trusted }, "\(logged)")
        #expect(logged.contains { $0.host == "bad.example.com" && $0.failure == "pinMismatch" }, "\(logged)")
    }

    /// Whole-suite runs on a loaded 2-core machine saw this client's request fail with a read timeout after 30 s
    /// while it passed alone in under a second: the proxy reached the upstream from a task on Swift's global
    /// cooperative pool, which the suite's own work kept busy, so the response waited behind it. Here every thread
    /// of that pool is held while the request runs; AsyncHTTPClient's future API and the proxy work on NIO's
    /// event loops, so the answer needs no pool thread, and the hold is released when the response has come (or
    /// when the client gives up: the read timeout, 10 s, comes before the hold's own limit).
    @Test("the proxy answers while Swift's cooperative pool is busy: reaching the upstream does not wait for a pool thread")
    func answersWhileThePoolIsBusy() async throws {
        let fixture = try await Fixture()
        defer {
            fixture.directory.remove()
            Task { await fixture.server.stop() }
        }
        let client = try fixture.client(readTimeout: .seconds(10))
        let url = "https://api.example.com:\(fixture.server.port)/"
        let outcome = NIOLockedValueBoxForTests<Result<HTTPClient.Response, any Error>?>(nil)
        // The first holder to keep a pool thread busy sends the request (on the event loops alone); the answer
        // releases the hold.
        let hold = CooperativePoolHold(limit: 20) { hold in
            do {
                Self.holdUntilAnswered(
                    client.execute(request: try HTTPClient.Request(url: url), deadline: .now() + .seconds(15)), hold: hold, outcome: outcome)
            } catch {
                outcome.withLockedValue { $0 = .failure(error) }
                hold.release()
            }
        }
        hold.start()
        // This task's own thread is one of the pool's too; it waits here (a pool thread is free again only after the
        // release) for the answer. On a loaded machine the holders themselves may wait for a thread: generously.
        let started = ContinuousClock.now
        while outcome.withLockedValue({ $0 == nil }), ContinuousClock.now - started < .seconds(120) {
            try await Task.sleep(for: .milliseconds(20))
        }
        hold.release()
        try await client.shutdown()
        await fixture.proxy.stop()
        switch outcome.withLockedValue({ $0 }) {
        case .success(let response)?:
            #expect(response.status == .ok)
            #expect(response.body.map { String(buffer: $0) } == "hello CN=device-ü 3")
        case .failure(let error)?:
            Issue.record("the request failed while the pool was held: \(error)")
        case nil:
            Issue.record("no answer within 120 s")
        }
    }

    /// Keeps `response`'s outcome and releases `hold` when it comes (on the event loop).
    static func holdUntilAnswered(
        _ response: EventLoopFuture<HTTPClient.Response>, hold: CooperativePoolHold,
        outcome: NIOLockedValueBoxForTests<Result<HTTPClient.Response, any Error>?>
    ) {
        response.whenComplete { result in
            outcome.withLockedValue { $0 = result }
            hold.release()
        }
    }
}

/// Keeps every thread of Swift's global cooperative pool (one per core) busy until released, as a suite's
/// CPU-bound tests do: `hold()` spins on the calling thread, and more holders are started than the pool has
/// threads, so none is left for a task that starts meanwhile. Released by `release()` (from an event loop), or
/// after `limit` seconds whatever happens.
final class CooperativePoolHold: Sendable {
    private let state = NIOLockedValueBoxForTests((released: false, holding: 0, began: false))
    private let first: @Sendable (CooperativePoolHold) -> Void
    let limit: Double

    /// `first` runs once, on the first holder's thread, when it has begun to keep that thread busy.
    init(limit: Double, first: @escaping @Sendable (CooperativePoolHold) -> Void) {
        self.limit = limit
        self.first = first
    }

    /// Starts the holders at the priority of the suite's own tests and of a task started from an event loop's
    /// thread (medium): on Linux each priority has threads of its own, so holders of another priority (high was
    /// tried) leave a medium task its threads, and the proxy's task ran at once even on the old code.
    func start() {
        for _ in 0..<(ProcessInfo.processInfo.activeProcessorCount + 2) {
            Task.detached(priority: .medium) { self.hold() }
        }
    }

    /// Keeps this thread busy until released (or `limit` seconds have passed).
    func hold() {
        let deadline = ContinuousClock.now + .seconds(self.limit)
        let isFirst = self.state.withLockedValue { state -> Bool in
            state.holding += 1
            defer { state.began = true }
            return !state.began
        }
        if isFirst { self.first(self) }
        while !self.state.withLockedValue({ $0.released }), ContinuousClock.now < deadline {}
        self.state.withLockedValue { $0.holding -= 1 }
    }

    func release() {
        self.state.withLockedValue { $0.released = true }
    }
}

/// A lock around a value (the test's log collector is called on the proxy's event loops).
final class NIOLockedValueBoxForTests<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLockedValue<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try self.lock.withLock { try body(&self.value) }
    }
}
