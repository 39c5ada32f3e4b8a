import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// The pinned client's verification path (NIOSSL's custom callback → the evaluator → `PinningHandshakeHandler`)
/// driven in memory: two `NIOAsyncTestingChannel`s, bytes handed from one to the other, no sockets and no clock,
/// as swift-nio-ssl tests its own handlers. The loopback suites test the same path over real sockets.
@Suite("Handshakes in memory")
struct InMemoryHandshakeTests {
    /// Hands bytes between a client with `client`'s handlers for `host` and a NIOSSL server presenting `server`,
    /// until the pinning handler's verdict is in (bounded), and returns it.
    static func handshake(_ client: PinnedTLSClient, host: String, server: TestChain) async throws -> Result<PinnedHandshake, any Error> {
        let identity = try server.leaf.tlsIdentity(chain: [server.intermediate.certificate])
        let serverContext = try NIOSSLContext(
            configuration: .makeServerConfiguration(certificateChain: identity.certificateSources, privateKey: identity.privateKeySource)
        )
        let clientChannel = NIOAsyncTestingChannel()
        let serverChannel = NIOAsyncTestingChannel()
        let handshake = try await clientChannel.testingEventLoop.executeInContext {
            try client.addHandlers(to: clientChannel.pipeline.syncOperations, host: host)
        }
        let outcome = try await Self.start(handshake, client: clientChannel, server: serverChannel, serverContext: serverContext)
        // The verdict arrives from a task (the evaluator is async), so keep handing bytes over until it is in;
        // 5,000 rounds of at most 1 ms bound the wait without measuring anything.
        for _ in 0..<5000 {
            let moved = try await Self.exchange(clientChannel, serverChannel)
            if let result = outcome.withLockedValue({ $0 }), !moved {
                await Self.close(clientChannel, serverChannel)
                return result
            }
            if !moved { try await Task.sleep(for: .milliseconds(1)) }
        }
        await Self.close(clientChannel, serverChannel)
        Issue.record("no verdict after 5,000 rounds")
        return .failure(PinningConnectionError(code: .timedOut, host: host, message: "no verdict in memory"))
    }

    /// Gives the server channel NIOSSL's server handler, records the client's verdict as it arrives, and connects
    /// both channels; the verdict box is nil until the verdict is in.
    static func start(
        _ handshake: EventLoopFuture<PinnedHandshake>, client: NIOAsyncTestingChannel, server: NIOAsyncTestingChannel, serverContext: NIOSSLContext
    ) async throws -> NIOLockedValueBox<Result<PinnedHandshake, any Error>?> {
        try await server.testingEventLoop.executeInContext {
            try server.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: serverContext))
        }
        let outcome = NIOLockedValueBox<Result<PinnedHandshake, any Error>?>(nil)
        handshake.whenComplete { result in outcome.withLockedValue { $0 = result } }
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: 443)
        try await server.connect(to: address)
        try await client.connect(to: address)
        return outcome
    }

    /// Hands every byte each side has written to the other, then runs both event loops; whether anything moved. A
    /// write that fails is the receiving side's own error (a refused handshake makes the server see an alert), not
    /// the verdict these tests look at.
    static func exchange(_ client: NIOAsyncTestingChannel, _ server: NIOAsyncTestingChannel) async throws -> Bool {
        var moved = false
        while let bytes = try await client.readOutbound(as: ByteBuffer.self) {
            moved = true
            do { try await server.writeInbound(bytes) } catch {}
        }
        while let bytes = try await server.readOutbound(as: ByteBuffer.self) {
            moved = true
            do { try await client.writeInbound(bytes) } catch {}
        }
        await client.testingEventLoop.run()
        await server.testingEventLoop.run()
        return moved
    }

    /// Closes both channels (an unclosed channel keeps its pipeline, and BoringSSL's objects, alive). A channel
    /// the refused handshake already closed reports that; it is not an error here.
    static func close(_ channels: NIOAsyncTestingChannel...) async {
        for channel in channels {
            // NIOSSL's close waits (on a timer) for the peer's close_notify; the peer here answers nothing more,
            // and a testing event loop's clock only moves when told to: move it past that wait.
            let closed = channel.eventLoop.makePromise(of: Void.self)
            channel.close(mode: .all, promise: closed)
            await channel.testingEventLoop.advanceTime(by: .seconds(60))
            do { try await closed.futureResult.get() } catch ChannelError.alreadyClosed {} catch {
                Issue.record("closing an in-memory channel: \(error)")
            }
        }
    }

    static let genuine = Result { try TestChain(host: "api.example.com") }

    static func client(_ policy: SecurityPolicy, anchor: Certificate) throws -> PinnedTLSClient {
        try PinnedTLSClient(evaluator: policy, settings: TrustSettings(anchors: [anchor], anchorsOnly: true))
    }

    @Test("trusted: the validated path and the peer reach the caller")
    func trusted() async throws {
        let chain = try Self.genuine.get()
        let policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: chain.intermediate.certificate)])
        let result = try await Self.handshake(try Self.client(policy, anchor: chain.root.certificate), host: "api.example.com", server: chain)
        let handshake = try result.get()
        #expect(handshake.trustedChain.path == [chain.leaf.certificate, chain.intermediate.certificate, chain.root.certificate])
        #expect(handshake.peer.subject == "CN=api.example.com")
    }

    @Test("a pin on no certificate of the path: refused with pinMismatch, the expected pin named")
    func pinMismatch() async throws {
        let chain = try Self.genuine.get()
        let other = try TestPKI.root("Other Root")
        let policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: other.certificate)])
        let result = try await Self.handshake(try Self.client(policy, anchor: chain.root.certificate), host: "api.example.com", server: chain)
        guard case .failure(let error as PinningConnectionError) = result else {
            Issue.record("not refused with a PinningConnectionError: \(result)")
            return
        }
        #expect(error.code == .untrusted)
        #expect(error.trustFailure?.code == .pinMismatch)
        #expect(error.trustFailure?.expectedPins == [Pin(spkiOf: other.certificate)])
    }

    @Test("another host name: refused with hostnameMismatch")
    func wrongHost() async throws {
        let chain = try Self.genuine.get()
        let result = try await Self.handshake(try Self.client(.default, anchor: chain.root.certificate), host: "www.example.com", server: chain)
        guard case .failure(let error as PinningConnectionError) = result else {
            Issue.record("not refused with a PinningConnectionError: \(result)")
            return
        }
        #expect(error.code == .untrusted)
        #expect(error.trustFailure?.code == .hostnameMismatch)
    }

    @Test("a root the client does not trust: refused with noPathToAnchor")
    func untrustedRoot() async throws {
        let chain = try Self.genuine.get()
        let other = try TestPKI.root("Other Root")
        let result = try await Self.handshake(try Self.client(.default, anchor: other.certificate), host: "api.example.com", server: chain)
        guard case .failure(let error as PinningConnectionError) = result else {
            Issue.record("not refused with a PinningConnectionError: \(result)")
            return
        }
        #expect(error.trustFailure?.code == .noPathToAnchor)
    }
}
