import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOSSL
import Pinning
import PinningTestSupport
import Testing

@testable import PinningNIO

/// When ``TLSAlertObserver`` opens the records it kept: only when its alerts are asked for before it ends (a failure
/// being mapped, in `errorCaught` or `channelInactive`), never on a connection nobody asks about. First on hand-made
/// records in an `EmbeddedChannel`, a probe standing in for NIOSSL and the handlers behind it; then a real TLS 1.3
/// handshake in memory against NIOSSL's server, refusing our missing client certificate or accepting us.
@Suite("TLS alert observer: kept records opened only when a failure asks")
struct TLSAlertObserverTests {
    typealias Records = TLSAlertObservationTests

    /// Stands in for NIOSSL and what follows it: on a read (NIOSSL failing the connection on an alert, a collector
    /// mapping that failure) and on `channelInactive`, does what the test says.
    final class Probe: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var onRead: (ChannelHandlerContext) -> Void = { _ in }
        var onInactive: () -> Void = {}

        func channelRead(context: ChannelHandlerContext, data: NIOAny) { self.onRead(context) }

        func channelInactive(context: ChannelHandlerContext) {
            self.onInactive()
            context.fireChannelInactive()
        }
    }

    static let serverApplication = [UInt8](repeating: 0x22, count: 32)

    /// A TLS 1.3 client connection up to our completed handshake: ClientHello out, the server's application secret
    /// logged, a ServerHello (AES-128-GCM) in, then ``TLSAlertObserver/handshakeCompleted()``.
    static func completed(_ probe: Probe) throws -> (EmbeddedChannel, TLSAlertObserver, TLSAlertSecrets) {
        let registry = TLSAlertSecrets(capacity: 4)
        let observer = TLSAlertObserver(role: .client, secrets: registry)
        let channel = EmbeddedChannel(handlers: [observer, probe])
        try channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        try channel.writeOutbound(ByteBuffer(bytes: Records.clientHello()))
        let randomHex = Records.clientRandom.map { String(format: "%02x", $0) }.joined()
        let secretHex = Self.serverApplication.map { String(format: "%02x", $0) }.joined()
        registry.keyLogCallback(forwardingTo: nil)(ByteBuffer(string: "SERVER_TRAFFIC_SECRET_0 \(randomHex) \(secretHex)\n"))
        try channel.writeInbound(ByteBuffer(bytes: Records.serverHello(suite: 0x1301)))
        observer.handshakeCompleted()
        #expect(observer.isObserving, "a TLS 1.3 client reads the server's next record")
        #expect(registry.count == 1)
        return (channel, observer, registry)
    }

    /// The server refusing our certificate: its first record under its application secret.
    static func refusal() throws -> ByteBuffer {
        ByteBuffer(bytes: try Records.sealed([2, 116], type: 21, cipher: .aes128GCM, secret: Self.serverApplication, sequence: 0))
    }

    @Test("a refusal after our handshake, mapped while its read passes: the alert, then the secrets are gone")
    func mappedDuringTheRead() throws {
        let probe = Probe()
        let (channel, observer, registry) = try Self.completed(probe)
        var mapped: TLSAlertsSeen?
        probe.onRead = { _ in mapped = observer.alerts }
        try channel.writeInbound(try Self.refusal())
        #expect(mapped?.receivedFailure == TLSAlert(code: 116, level: .fatal))
        #expect(observer.keysDerived == 1, "the server's application keys, for the one record kept")
        #expect(!observer.isObserving)
        #expect(registry.count == 0, "the secrets are overwritten once the read has passed")
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test("a refusal whose read closed the connection, mapped in channelInactive behind the observer: the alert")
    func mappedWhenInactive() throws {
        let probe = Probe()
        let (channel, observer, registry) = try Self.completed(probe)
        var mapped: TLSAlertsSeen?
        probe.onRead = { context in context.close(promise: nil) }
        probe.onInactive = { mapped = observer.alerts }
        try channel.writeInbound(try Self.refusal())
        #expect(mapped?.receivedFailure == TLSAlert(code: 116, level: .fatal))
        #expect(!observer.isObserving)
        #expect(registry.count == 0)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test("a record the connection survives (a session ticket) is forgotten unopened: no key derived, secrets gone")
    func survivedRecordUnopened() throws {
        let probe = Probe()
        let (channel, observer, registry) = try Self.completed(probe)
        let ticket = try Records.sealed([4, 0, 0, 40] + [UInt8](repeating: 7, count: 40), type: 22, cipher: .aes128GCM, secret: Self.serverApplication, sequence: 0)
        try channel.writeInbound(ByteBuffer(bytes: ticket))
        #expect(!observer.isObserving)
        #expect(registry.count == 0)
        #expect(observer.keysDerived == 0)
        #expect(observer.alerts == TLSAlertsSeen())
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test("our own close before the server's next record: its close_notify ends the observer, nothing opened")
    func ourCloseNothingOpened() throws {
        let probe = Probe()
        let (channel, observer, registry) = try Self.completed(probe)
        // NIOSSL closes for us by writing our close_notify (a record kept, under a secret not logged here) and waiting
        // for the server's: when that arrives, it closes the channel within the read.
        let ours = try Records.sealed([1, 0], type: 21, cipher: .aes128GCM, secret: [UInt8](repeating: 0x33, count: 32), sequence: 0)
        try channel.writeOutbound(ByteBuffer(bytes: ours))
        probe.onRead = { context in context.close(promise: nil) }
        let closeNotify = try Records.sealed([1, 0], type: 21, cipher: .aes128GCM, secret: Self.serverApplication, sequence: 0)
        try channel.writeInbound(ByteBuffer(bytes: closeNotify))
        #expect(!observer.isObserving)
        #expect(registry.count == 0)
        #expect(observer.keysDerived == 0)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test("key log lines are read in place: the four traffic secrets of a registered random kept, every other line dropped")
    func keyLogLines() {
        let registry = TLSAlertSecrets(capacity: 2)
        let random = Records.clientRandom
        let randomHex = random.map { String(format: "%02x", $0) }.joined()
        let secretHex = String(repeating: "cd", count: 48)
        let callback = registry.keyLogCallback(forwardingTo: nil)
        #expect(registry.register(random))
        for label in ["CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"] {
            callback(ByteBuffer(string: "\(label) \(randomHex) \(secretHex)\n"))
        }
        for dropped in [
            "EXPORTER_SECRET \(randomHex) \(secretHex)\n", "CLIENT_EARLY_TRAFFIC_SECRET \(randomHex) \(secretHex)\n",
            "CLIENT_TRAFFIC_SECRET_1 \(randomHex) \(secretHex)\n", "server_traffic_secret_0 \(randomHex) \(secretHex)\n",
            "SERVER_TRAFFIC_SECRET_0  \(randomHex) \(secretHex)\n", "SERVER_TRAFFIC_SECRET_0 \(randomHex)  \(secretHex)\n",
            "SERVER_TRAFFIC_SECRET_0 \(randomHex) \n", "SERVER_TRAFFIC_SECRET_0 \(randomHex.dropLast(2)) \(secretHex)\n",
            "SERVER_TRAFFIC_SECRET_0 \(randomHex)ab \(secretHex)\n", "SERVER_TRAFFIC_SECRET_0 \(randomHex) \(secretHex)x\n",
        ] {
            callback(ByteBuffer(string: dropped.replacingOccurrences(of: "cd", with: "ef")))
        }
        var seen: TLS13Secrets?
        registry.withSecrets(of: random) { seen = $0 }
        let expected = [UInt8](repeating: 0xCD, count: 48)
        #expect(seen?.clientHandshake == expected && seen?.serverHandshake == expected)
        #expect(seen?.clientApplication == expected && seen?.serverApplication == expected, "no dropped line overwrote a kept secret")
        #expect(registry.count == 1)
    }

    // MARK: A real TLS 1.3 handshake in memory

    /// Records what a handler behind NIOSSL maps from a failure, as the HTTP response collector does.
    final class Mapper: ChannelInboundHandler, Sendable {
        typealias InboundIn = NIOAny
        let mapped = NIOLockedValueBox<TLSAlertsSeen?>(nil)

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            self.mapped.withLockedValue { $0 = TLSAlertObserver.alerts(of: context.channel) }
            context.close(promise: nil)
        }
    }

    /// A pinned client (no client certificate) against NIOSSL's TLS 1.3 server in memory, bytes handed over until
    /// both sides are quiet; `requireClientCertificate` makes the server refuse us after our handshake completed.
    /// Then our side closes. Returns what the client's observer did and what the mapper behind it saw.
    struct Outcome {
        var keysDerived: Int
        var isObserving: Bool
        var alerts: TLSAlertsSeen
        var mapped: TLSAlertsSeen?
        var handshakeCompleted: Bool
    }

    static func handshake(requireClientCertificate: Bool) async throws -> Outcome {
        let chain = try TestChain(host: "api.example.com")
        let identity = try chain.leaf.tlsIdentity(chain: [chain.intermediate.certificate])
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: identity.certificateSources, privateKey: identity.privateKeySource)
        configuration.minimumTLSVersion = .tlsv13
        if requireClientCertificate {
            configuration.certificateVerification = .noHostnameVerification
            configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: chain.root.der, format: .der)])
        }
        let serverContext = try NIOSSLContext(configuration: configuration)
        let client = try PinnedTLSClient(evaluator: SecurityPolicy.default, settings: TrustSettings(anchors: [chain.root.certificate], anchorsOnly: true))
        let clientChannel = NIOAsyncTestingChannel()
        let serverChannel = NIOAsyncTestingChannel()
        let mapper = Mapper()
        let (handshake, observer) = try await clientChannel.testingEventLoop.executeInContext {
            let handshake = try client.addHandlers(to: clientChannel.pipeline.syncOperations, host: "api.example.com")
            try clientChannel.pipeline.syncOperations.addHandler(mapper)
            let observer = try clientChannel.pipeline.syncOperations.handler(type: TLSAlertObserver.self)
            return (handshake, NIOLoopBound(observer, eventLoop: clientChannel.eventLoop))
        }
        let outcome = try await InMemoryHandshakeTests.start(handshake, client: clientChannel, server: serverChannel, serverContext: serverContext)

        /// Hands bytes over until neither side writes anything more (bounded; the verdict comes from a task).
        func pump() async throws {
            var quiet = 0
            for _ in 0..<5000 where quiet < 20 {
                // The server's own errors (our close, its refusal) are not what is tested here.
                let moved = try await InMemoryHandshakeTests.exchange(clientChannel, serverChannel)
                quiet = moved || outcome.withLockedValue({ $0 }) == nil ? 0 : quiet + 1
                if !moved { try await Task.sleep(for: .milliseconds(1)) }
            }
        }
        try await pump()
        if try await clientChannel.testingEventLoop.executeInContext({ clientChannel.isActive }) {
            // Trusted and not refused: our side closes, the server answers close_notify.
            clientChannel.close(mode: .all, promise: nil)
            try await pump()
        }
        await InMemoryHandshakeTests.close(clientChannel, serverChannel)
        let (keysDerived, isObserving, alerts) = try await clientChannel.testingEventLoop.executeInContext {
            (observer.value.keysDerived, observer.value.isObserving, observer.value.alerts)
        }
        var completed = false
        if case .success? = outcome.withLockedValue({ $0 }) { completed = true }
        return Outcome(keysDerived: keysDerived, isObserving: isObserving, alerts: alerts, mapped: mapper.mapped.withLockedValue { $0 }, handshakeCompleted: completed)
    }

    @Test("NIOSSL's TLS 1.3 server refusing our missing certificate after our handshake: certificate_required, mapped")
    func refusedInMemory() async throws {
        let outcome = try await Self.handshake(requireClientCertificate: true)
        #expect(outcome.handshakeCompleted, "TLS 1.3: our side of the handshake completed before the server refused")
        #expect(outcome.mapped?.receivedFailure == TLSAlert(code: 116, level: .fatal), "\(String(describing: outcome.mapped))")
        #expect(outcome.keysDerived >= 1)
        #expect(!outcome.isObserving)
    }

    @Test("NIOSSL's TLS 1.3 server accepting us, then our close: the observer ends without deriving a key")
    func acceptedInMemory() async throws {
        let outcome = try await Self.handshake(requireClientCertificate: false)
        #expect(outcome.handshakeCompleted)
        #expect(outcome.mapped == nil, "no failure to map")
        #expect(outcome.keysDerived == 0)
        #expect(!outcome.isObserving)
        #expect(outcome.alerts == TLSAlertsSeen())
    }
}
