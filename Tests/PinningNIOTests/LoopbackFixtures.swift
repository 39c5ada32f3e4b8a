import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import X509

/// The event loops every loopback test shares.
let testGroup: MultiThreadedEventLoopGroup = .singleton

/// Whether `/usr/bin/openssl` exists (the PKCS#12 and resumption tests drive it).
let opensslAvailable = TestTools.opensslAvailable

enum Fixtures {
    /// A server-side TrustRoots holding only `roots`: stands in for "the platform store".
    static func platform(_ roots: [Certificate]) -> TrustRoots { TrustRoots(roots) }
}

/// A plain TLS server on 127.0.0.1 that serves exactly `identity`'s chain, with NIOSSL's shared context (so
/// it would resume sessions if a client offered one). The handshake is all the tests need.
final class PlainTLSServer: Sendable {
    let channel: any Channel
    var port: Int { self.channel.localAddress?.port ?? 0 }

    init(identity: TLSIdentity, servedChain: [Certificate]? = nil) async throws {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: identity.certificateSources,
            privateKey: identity.privateKeySource
        )
        if let servedChain {
            configuration.certificateChain = try servedChain.map {
                .certificate(try NIOSSLCertificate(bytes: $0.derBytes, format: .der))
            }
        }
        let context = try NIOSSLContext(configuration: configuration)
        self.channel = try await ServerBootstrap(group: testGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func stop() async {
        try? await self.channel.close()
    }
}

/// Handshake outcomes in arrival order, consumed by polling (an AsyncStream would finish when a waiting task is
/// cancelled by a timeout).
final class OutcomeLog: @unchecked Sendable {
    private let lock = NSLock()
    private var pending: [Result<PinnedHandshake, PinningConnectionError>] = []

    func append(_ outcome: Result<PinnedHandshake, PinningConnectionError>) {
        self.lock.withLock { self.pending.append(outcome) }
    }

    func next() -> Result<PinnedHandshake, PinningConnectionError>? {
        self.lock.withLock { self.pending.isEmpty ? nil : self.pending.removeFirst() }
    }

    /// The next outcome, waiting up to `seconds` for one; nil if none arrived.
    func next(within seconds: Double) async -> Result<PinnedHandshake, PinningConnectionError>? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let outcome = self.next() { return outcome }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return self.next()
    }
}

/// A MutualTLSServer on 127.0.0.1 that reports each connection's handshake outcome.
final class MutualTLSTestServer: Sendable {
    let channel: any Channel
    let outcomes = OutcomeLog()
    var port: Int { self.channel.localAddress?.port ?? 0 }

    init(_ server: MutualTLSServer) async throws {
        let log = self.outcomes
        self.channel = try await ServerBootstrap(group: testGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handshake = try server.addHandlers(to: channel.pipeline.syncOperations)
                    handshake.whenComplete { result in
                        log.append(
                            result.mapError { error in
                                (error as? PinningConnectionError)
                                    ?? PinningConnectionError(code: .handshakeFailed, host: nil, message: "\(error)")
                            })
                    }
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    /// The next connection's outcome, or nil after `seconds`.
    func nextOutcome(within seconds: Double = 5) async -> Result<PinnedHandshake, PinningConnectionError>? {
        await self.outcomes.next(within: seconds)
    }

    func stop() async {
        try? await self.channel.close()
    }
}

/// Counts evaluations, then defers to a wrapped evaluator.
final class CountingEvaluator: ServerTrustEvaluating, @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    let wrapped: any ServerTrustEvaluating

    init(_ wrapped: any ServerTrustEvaluating) {
        self.wrapped = wrapped
    }

    var evaluations: Int {
        self.lock.withLock { self.count }
    }

    func evaluate(_ trust: ServerTrust, forDomain domain: String?) async -> TrustEvaluation {
        self.lock.withLock { self.count += 1 }
        return await self.wrapped.evaluate(trust, forDomain: domain)
    }
}

/// Runs /usr/bin/openssl with `arguments`; returns its exit status and combined output. Killed after `timeout`.
/// Waits without blocking a thread (``TestTools/run(_:_:input:in:environment:timeout:)``).
@discardableResult
func openssl(_ arguments: [String], input: String? = nil, timeout: Double = 60) async throws -> (status: Int32, output: String) {
    let result = try await TestTools.openssl(arguments, input: input, timeout: timeout)
    return (result.status, result.output)
}
