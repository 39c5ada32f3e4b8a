import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import PinningAsyncHTTPClient
import PinningHummingbird
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// What the handler saw, per request.
final class SeenClients: Sendable {
    private let box = NIOLockedValueBox<[AuthenticatedPeer?]>([])
    var all: [AuthenticatedPeer?] { self.box.withLockedValue { $0 } }
    func append(_ peer: AuthenticatedPeer?) { self.box.withLockedValue { $0.append(peer) } }
}

@Suite("Hummingbird over mutual TLS on loopback", .timeLimit(.minutes(3)))
struct MutualTLSHummingbirdTests {
    let serverChain: TestChain
    let clientChain: TestChain

    init() throws {
        self.serverChain = try TestChain(host: "device.local", rootName: "Server Root")
        self.clientChain = try TestChain(host: "client-7", ipAddresses: [], leafUsage: .clientAuth, rootName: "Client Root", intermediateName: "Client Issuing CA")
    }

    /// Runs an Application with `MutualTLSServer` on 127.0.0.1:0, calls `body` with its port, then stops it.
    func withServer(seen: SeenClients, revocation: RevocationSource? = nil, _ body: @Sendable (Int) async throws -> Void) async throws {
        var configuration = MutualTLSServer.Configuration(
            identity: try self.serverChain.leaf.tlsIdentity(chain: [self.serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [self.clientChain.root.certificate])
        configuration.revocation = revocation
        let server = try MutualTLSServer(configuration: configuration)
        let router = Router(context: MutualTLSRequestContext.self)
        router.get("/") { _, context -> String in
            seen.append(context.client)
            return "hello \(context.client?.subject ?? "nobody")"
        }
        let ports = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router,
            server: .mutualTLS(server: server),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                ports.continuation.yield(channel.localAddress?.port ?? 0)
                ports.continuation.finish()
            }
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService(gracefulShutdownSignals: []) }
            // Bound the wait for the server to come up: generous, since the whole suite shares 2 cores in CI,
            // where 10 s was once not enough for Hummingbird to start; the stream ends as soon as it is up.
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                ports.continuation.finish()
            }
            var port = 0
            for await value in ports.stream {
                port = value
            }
            do {
                guard port != 0 else { throw CancellationError() }
                try await body(port)
            } catch {
                group.cancelAll()
                throw error
            }
            group.cancelAll()
        }
    }

    func get(port: Int, identity: TLSIdentity?) async throws -> (UInt, String) {
        let pinning = try AsyncHTTPClientPinning(
            host: "device.local",
            policy: .default,
            settings: TrustSettings(anchors: [self.serverChain.root.certificate], anchorsOnly: true),
            identity: identity
        )
        var configuration = try pinning.makeHTTPClientConfiguration()
        configuration.dnsOverride = ["device.local": "127.0.0.1"]
        configuration.timeout = .init(connect: .seconds(30), read: .seconds(60))
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        do {
            let response = try await client.execute(HTTPClientRequest(url: "https://device.local:\(port)/"), timeout: .seconds(60))
            let body = try await response.body.collect(upTo: 1 << 16)
            try await client.shutdown()
            return (response.status.code, String(buffer: body))
        } catch {
            try await client.shutdown()
            throw error
        }
    }

    @Test("a client with an identity gets 200; the handler sees its validated chain, subject and pin")
    func clientWithIdentity() async throws {
        let seen = SeenClients()
        let identity = try self.clientChain.leaf.tlsIdentity(chain: [self.clientChain.intermediate.certificate])
        let clientChain = self.clientChain
        try await self.withServer(seen: seen) { port in
            let (status, body) = try await self.get(port: port, identity: identity)
            #expect(status == 200)
            #expect(body == "hello CN=client-7")
        }
        let peer = try #require(seen.all.first ?? nil)
        #expect(peer.subject == "CN=client-7")
        #expect(peer.pin == Pin(spkiOf: clientChain.leaf.certificate))
        // The validated path, ending at the client CA that anchored it (the client sent only leaf + intermediate).
        #expect(peer.certificateChain == clientChain.all)
    }

    @Test("a client without an identity is refused; the handler never runs")
    func clientWithoutIdentity() async throws {
        let seen = SeenClients()
        let trust = ServerTrust(certificates: [], anchors: [self.serverChain.root.certificate], anchorsOnly: true)
        try await self.withServer(seen: seen) { port in
            // A raw pinned TLS client: under TLS 1.3 it may finish its handshake before the server refuses, so
            // the request is written regardless and the check is that it is never handled.
            let client = try PinnedTLSClient(evaluator: SecurityPolicy.default, settings: trust.clientSettings)
            let address = try SocketAddress(ipAddress: "127.0.0.1", port: port)
            do {
                let connection = try await client.connect(host: "device.local", port: port, address: address, group: MultiThreadedEventLoopGroup.singleton, timeout: .seconds(30))
                do {
                    try await connection.channel.writeAndFlush(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: device.local\r\n\r\n"))
                } catch {
                    // The server already closed the connection: refused.
                }
                try await Task.sleep(for: .milliseconds(500))
                connection.channel.close(promise: nil)
            } catch {
                // Refused during the handshake.
            }
        }
        #expect(seen.all.isEmpty)
    }

    @Test("a client certificate from another CA is refused; the handler never runs")
    func clientFromOtherCA() async throws {
        let seen = SeenClients()
        let other = try TestChain(host: "client-7", ipAddresses: [], leafUsage: .clientAuth, rootName: "Other Root")
        let identity = try other.leaf.tlsIdentity(chain: [other.intermediate.certificate])
        try await self.withServer(seen: seen) { port in
            await #expect(throws: (any Error).self) {
                _ = try await self.get(port: port, identity: identity)
            }
        }
        #expect(seen.all.isEmpty)
    }

    @Test("a revoked device is refused through the Hummingbird adapter (the server's CRLs); another device of the same CA is served")
    func revokedDevice() async throws {
        let seen = SeenClients()
        let revoked = try self.clientChain.leaf.tlsIdentity(chain: [self.clientChain.intermediate.certificate])
        let otherDevice = try TestPKI.leaf("client-8", issuer: self.clientChain.intermediate, usage: .clientAuth)
        let other = try otherDevice.tlsIdentity(chain: [self.clientChain.intermediate.certificate])
        let crl = try TestCRL.revoking(self.clientChain.leaf, issuer: self.clientChain.intermediate)
        let source = RevocationSource(policy: RevocationPolicy(crls: try CertificateRevocationList.read(crl.der), mode: .hard, scope: .leaf))
        try await self.withServer(seen: seen, revocation: source) { port in
            await #expect(throws: (any Error).self) {
                _ = try await self.get(port: port, identity: revoked)
            }
            let (status, body) = try await self.get(port: port, identity: other)
            #expect(status == 200)
            #expect(body == "hello CN=client-8")
        }
        #expect(seen.all.map { $0?.subject } == ["CN=client-8"])
    }
}
