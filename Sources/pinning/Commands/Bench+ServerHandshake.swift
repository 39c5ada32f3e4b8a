import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Pinning
import PinningNIO
import PinningPKI
import X509

/// `pinning bench handshake --server`: an mTLS server (an IoT gateway) authenticating many *different* client
/// certificates, where no whole-chain cache can hit.
///
/// Three servers on 127.0.0.1 present the same identity: one judging clients with our policy
/// (``MutualTLSServer``: path validation to the client CA, clientAuth, the whole chain), one with NIOSSL's own
/// client verification against the same CA, one that asks for no client certificate (the ceiling). Clients
/// present `clients` distinct leaf certificates under one intermediate, in turn, and do not verify the server,
/// so the figures are the servers' cost. A handshake counts when the server has accepted the client and said
/// so (one byte after its own handshake completed): in TLS 1.3 the client finishes before the server has judged
/// its certificate, so the client's own completion would not include the server's verification.
struct ServerHandshakeBenchmark {
    var keyType: TestKeyType
    var clients: Int

    enum ServerKind: CaseIterable {
        case pinned, baseline, unverified
    }

    func run(connections: Int, concurrency: Int, rounds requestedRounds: Int) async throws -> HandshakeBenchReport {
        let chain = try TestChain(key: self.keyType)
        let serverIdentity = try TLSIdentity.pem(
            certificateChain: Array(TestPKI.pemBundle([chain.leaf.certificate, chain.intermediate.certificate]).utf8),
            privateKey: Array(chain.leaf.privateKeyPEM.utf8),
            certificateOrigin: "<minted chain>",
            keyOrigin: "<minted key>"
        )
        // N distinct devices under the one intermediate; each client context presents one of them.
        var contexts: [NIOSSLContext] = []
        for index in 0..<self.clients {
            let device = try TestPKI.leaf("device-\(index)", issuer: chain.intermediate, usage: .clientAuth, key: self.keyType)
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .none
            configuration.verifySignatureAlgorithms = TLSConfiguration.pinningAcceptedSignatureAlgorithms
            configuration.certificateChain = [
                .certificate(try NIOSSLCertificate(bytes: device.der, format: .der)),
                .certificate(try NIOSSLCertificate(bytes: chain.intermediate.der, format: .der)),
            ]
            configuration.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(device.privateKeyPEM.utf8), format: .pem))
            contexts.append(try NIOSSLContext(configuration: configuration))
        }
        let group = MultiThreadedEventLoopGroup.singleton

        let mutual = try MutualTLSServer(identity: serverIdentity, clientCertificateAuthorities: [chain.root.certificate])
        var verifying = TLSConfiguration.makeServerConfiguration(
            certificateChain: serverIdentity.certificateSources,
            privateKey: serverIdentity.privateKeySource
        )
        verifying.certificateVerification = .noHostnameVerification
        verifying.trustRoots = .certificates([try NIOSSLCertificate(bytes: chain.root.der, format: .der)])
        verifying.verifySignatureAlgorithms = TLSConfiguration.pinningAcceptedSignatureAlgorithms
        let baselineContext = try NIOSSLContext(configuration: verifying)
        let open = TLSConfiguration.makeServerConfiguration(
            certificateChain: serverIdentity.certificateSources,
            privateKey: serverIdentity.privateKeySource
        )
        let openContext = try NIOSSLContext(configuration: open)

        let servers: [ServerKind: any Channel] = [
            .pinned: try await Self.server(group: group) { pipeline in
                try mutual.addHandlers(to: pipeline)
                try pipeline.addHandler(AcceptedByte())
            },
            .baseline: try await Self.server(group: group) { pipeline in
                try pipeline.addHandler(NIOSSLServerHandler(context: baselineContext))
                try pipeline.addHandler(AcceptedByte())
            },
            .unverified: try await Self.server(group: group) { pipeline in
                try pipeline.addHandler(NIOSSLServerHandler(context: openContext))
                try pipeline.addHandler(AcceptedByte())
            },
        ]
        defer { for server in servers.values { server.close(promise: nil) } }

        let clientContexts = contexts
        let counter = NextClient(count: contexts.count)
        var addresses: [ServerKind: SocketAddress] = [:]
        for (kind, server) in servers {
            addresses[kind] = try SocketAddress(ipAddress: "127.0.0.1", port: server.localAddress?.port ?? 0)
        }
        let targets = addresses
        let rates = try await AlternatingRounds.rates(
            of: ServerKind.self, connections: connections, concurrency: concurrency, rounds: requestedRounds
        ) { kind, count in
            guard let address = targets[kind] else { return }
            try await AlternatingRounds.spread(count, concurrency: concurrency) {
                try await Self.acceptedConnection(context: clientContexts[counter.take()], address: address, group: group)
            }
        }
        return HandshakeBenchReport(
            handshakesPerSecond: rates[.pinned] ?? 0,
            baselineHandshakesPerSecond: rates[.baseline] ?? 0,
            unverifiedHandshakesPerSecond: rates[.unverified] ?? 0
        )
    }

    private static func server(
        group: any EventLoopGroup,
        _ configure: @escaping @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void
    ) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try configure(channel.pipeline.syncOperations) }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    /// One connection: the handshake, then the server's one byte saying it accepted the client.
    private static func acceptedConnection(context: NIOSSLContext, address: SocketAddress, group: any EventLoopGroup) async throws {
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: context, serverHostname: nil))
                    try channel.pipeline.syncOperations.addHandler(HandshakeWaiter(promise: channel.eventLoop.makePromise(), until: .serverByte))
                }
            }
            .connect(to: address)
            .get()
        let waiter = try await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.handler(type: HandshakeWaiter.self)
        }.get()
        defer { channel.close(promise: nil) }
        try await waiter.promise.futureResult.get()
    }
}

/// Hands out client identities in turn.
final class NextClient: @unchecked Sendable {
    private let lock = NSLock()
    private var next = 0
    private let count: Int

    init(count: Int) { self.count = count }

    func take() -> Int {
        self.lock.lock()
        defer { self.lock.unlock() }
        let index = self.next
        self.next = (self.next + 1) % self.count
        return index
    }
}

/// Server side: once the TLS handshake (and so the client's verification) has completed, writes one byte.
final class AcceptedByte: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            context.writeAndFlush(NIOAny(context.channel.allocator.buffer(bytes: [0x2A])), promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
