import Foundation
import NIOConcurrencyHelpers
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
    /// MutualTLSServer remembers trusted client verdicts (``MutualTLSServer/evaluationCache``).
    var cached = false

    enum ServerKind: CaseIterable {
        case pinned, baseline, unverified
    }

    /// The minted CA, the devices' client contexts and the three servers.
    private struct Setup {
        var chain: TestChain
        var clientContexts: [NIOSSLContext]
        var servers: [ServerKind: BenchTLSServer]

        func stop() {
            for server in self.servers.values { server.stop() }
        }
    }

    private func setUp(group: any EventLoopGroup) async throws -> Setup {
        let chain = try TestChain(key: self.keyType)
        let serverIdentity = try chain.leaf.tlsIdentity(chain: [chain.intermediate.certificate])
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

        let mutual = try MutualTLSServer(
            identity: serverIdentity,
            clientCertificateAuthorities: [chain.root.certificate],
            clientRule: .builtIn(cache: self.cached ? EvaluationCache(maximumEntries: max(1024, self.clients)) : nil)
        )
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

        let servers: [ServerKind: BenchTLSServer] = [
            .pinned: try await BenchTLSServer(group: group) { pipeline in
                try mutual.addHandlers(to: pipeline)
                try pipeline.addHandler(AcceptedByte())
            },
            .baseline: try await BenchTLSServer(group: group) { pipeline in
                try pipeline.addHandler(NIOSSLServerHandler(context: baselineContext))
                try pipeline.addHandler(AcceptedByte())
            },
            .unverified: try await BenchTLSServer(group: group) { pipeline in
                try pipeline.addHandler(NIOSSLServerHandler(context: openContext))
                try pipeline.addHandler(AcceptedByte())
            },
        ]
        return Setup(chain: chain, clientContexts: contexts, servers: servers)
    }

    func run(connections: Int, concurrency: Int, rounds requestedRounds: Int) async throws -> HandshakeBenchReport {
        let group = MultiThreadedEventLoopGroup.singleton
        let setup = try await self.setUp(group: group)
        defer { setup.stop() }

        let clientContexts = setup.clientContexts
        let counter = NextClient(count: clientContexts.count)
        var addresses: [ServerKind: SocketAddress] = [:]
        for (kind, server) in setup.servers {
            addresses[kind] = try SocketAddress(ipAddress: "127.0.0.1", port: server.port)
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

    /// Resumed handshakes per second: `openssl s_time -reuse` makes one full handshake with a device's
    /// certificate, then resumes that session for `seconds`, one connection at a time, against each server in
    /// turn (`rounds` times). TLS 1.2, because s_time never reads after the handshake, so a TLS 1.3 ticket (sent
    /// after it) never reaches it and every connection would be a full one. Each kind's rate is its connections
    /// over the wall time of its s_time runs (the process start, a few milliseconds, is in every kind's time).
    func runResumed(seconds: Int, rounds: Int) async throws -> HandshakeBenchReport {
        guard FileManager.default.isExecutableFile(atPath: ChildProcess.openssl) else {
            throw InputError("--resume runs `openssl s_time`, and \(ChildProcess.openssl) is missing (Debian: apt-get install openssl)")
        }
        let group = MultiThreadedEventLoopGroup.singleton
        let setup = try await self.setUp(group: group)
        defer { setup.stop() }
        let directory = try BenchCleanup.temporaryDirectory(prefix: "pinning-bench-resume")
        defer { BenchCleanup.remove(directory) }
        // s_time sends only the first certificate of -cert (it has no option for a chain), so this device is
        // issued by the root itself: the servers get no intermediate to build a path with otherwise.
        let device = try TestPKI.leaf("device-resumed", issuer: setup.chain.root, usage: .clientAuth, key: self.keyType)
        let certificate = try directory.write("device.pem", TestPKI.pemBundle([device.certificate]))
        let key = try directory.write("device.key", device.privateKeyPEM)

        var connections: [ServerKind: Int] = [:]
        var elapsed: [ServerKind: UInt64] = [:]
        for round in 0...rounds {
            for kind in ServerKind.allCases {
                guard let port = setup.servers[kind]?.port else { continue }
                // Round 0 warms every server up and is not counted.
                let runSeconds = round == 0 ? 1 : seconds
                let started = BenchClock.now
                let output = try ChildProcess.output(
                    ChildProcess.openssl,
                    [
                        "s_time", "-connect", "127.0.0.1:\(port)", "-cert", certificate, "-key", key, "-tls1_2", "-reuse",
                        "-time", String(runSeconds),
                    ]
                )
                let time = BenchClock.now - started
                guard let count = Self.sTimeConnections(output), count > 0 else {
                    throw InputError("openssl s_time made no connection to the \(kind) server: \(output.suffix(300))")
                }
                if round > 0 {
                    connections[kind, default: 0] += count
                    elapsed[kind, default: 0] += time
                }
            }
        }
        func rate(_ kind: ServerKind) -> Double {
            AlternatingRounds.rate(connections[kind] ?? 0, nanoseconds: elapsed[kind] ?? 0)
        }
        return HandshakeBenchReport(
            handshakesPerSecond: rate(.pinned),
            baselineHandshakesPerSecond: rate(.baseline),
            unverifiedHandshakesPerSecond: rate(.unverified)
        )
    }

    /// The count in s_time's "N connections in X.XXs; …" line.
    static func sTimeConnections(_ output: String) -> Int? {
        for line in output.split(separator: "\n") {
            let words = line.split(separator: " ")
            if words.count > 3, words[1] == "connections", words[2] == "in", words[3].hasSuffix("s;") {
                return Int(words[0])
            }
        }
        return nil
    }

    /// One connection: the handshake, then the server's one byte saying it accepted the client.
    private static func acceptedConnection(context: NIOSSLContext, address: SocketAddress, group: any EventLoopGroup) async throws {
        let (channel, waiter) = try await HandshakeWaiter.connect(
            context: context, serverHostname: nil, until: .serverByte, to: address, group: group)
        defer { channel.close(promise: nil) }
        try await waiter.promise.futureResult.get()
    }
}

/// Hands out indices in turn (client identities, server leaves).
final class NextClient: Sendable {
    private let next = NIOLockedValueBox(0)
    private let count: Int

    init(count: Int) { self.count = count }

    func take() -> Int {
        self.next.withLockedValue { next in
            let index = next
            next = (next + 1) % self.count
            return index
        }
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
