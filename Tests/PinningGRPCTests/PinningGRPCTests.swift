import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import Pinning
import PinningGRPC
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// Messages are UTF-8 text: no protobuf, so no code generation in the build.
struct TextSerializer: MessageSerializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: String) throws -> Bytes {
        Bytes(Array(message.utf8))
    }
}

struct TextDeserializer: MessageDeserializer {
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> String {
        serializedMessageBytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }
}

/// The clients the service saw, by subject.
final class SeenClients: Sendable {
    private let box = NIOLockedValueBox<[String]>([])
    var all: [String] { self.box.withLockedValue { $0 } }
    func append(_ subject: String) { self.box.withLockedValue { $0.append(subject) } }
}

/// A device service: `Whoami` (unary) answers with the caller's validated identity; `Count` (server streaming)
/// sends n numbered messages.
struct DeviceService: RegistrableRPCService {
    static let whoami = MethodDescriptor(fullyQualifiedService: "devices.Devices", method: "Whoami")
    static let count = MethodDescriptor(fullyQualifiedService: "devices.Devices", method: "Count")
    let seen: SeenClients

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        let seen = self.seen
        router.registerHandler(forMethod: Self.whoami, deserializer: TextDeserializer(), serializer: TextSerializer()) { request, context in
            var greeting = ""
            for try await message in request.messages { greeting = message }
            let client = context.authenticatedClient
            seen.append(client?.subject ?? "nobody")
            let answer = "\(greeting) \(client?.subject ?? "nobody") via \(client?.certificateChain.count ?? 0) certificates"
            return StreamingServerResponse(single: ServerResponse(message: answer))
        }
        router.registerHandler(forMethod: Self.count, deserializer: TextDeserializer(), serializer: TextSerializer()) { request, context in
            var wanted = 0
            for try await message in request.messages { wanted = Int(message) ?? 0 }
            let subject = context.authenticatedClient?.subject ?? "nobody"
            let count = max(wanted, 1)
            return StreamingServerResponse { writer in
                for index in 1...count {
                    try await writer.write("\(index) for \(subject)")
                }
                return [:]
            }
        }
    }
}

@Suite("gRPC: pinned client and mutual-TLS server transports (loopback)", .timeLimit(.minutes(4)))
struct PinningGRPCTests {
    let serverChain: TestChain
    let clientChain: TestChain

    init() throws {
        self.serverChain = try TestChain(host: "device.local", rootName: "Server Root")
        self.clientChain = try TestChain.device(rootName: "Client Root")
    }

    /// Serves `DeviceService` over `MutualTLSGRPCServerTransport` on 127.0.0.1:0 with `leaf` as the server's
    /// certificate; `body` gets the port.
    func withServer(
        leaf: TestIdentity? = nil,
        chain: [Certificate]? = nil,
        seen: SeenClients,
        bind: String = "127.0.0.1",
        _ body: @Sendable @escaping (Int) async throws -> Void
    ) async throws {
        let server = try MutualTLSServer.makeGRPC(
            identity: try (leaf ?? self.serverChain.leaf).tlsIdentity(chain: chain ?? [self.serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [self.clientChain.root.certificate]
        )
        let transport = MutualTLSGRPCServerTransport(host: bind, port: 0, server: server)
        try await withGRPCServer(transport: transport, services: [DeviceService(seen: seen)]) { grpcServer in
            let address = try await transport.listeningAddress
            guard let port = address.ipv4?.port ?? address.ipv6?.port else {
                Issue.record("not an IP address: \(address)")
                return
            }
            try await body(port)
            grpcServer.beginGracefulShutdown()
        }
    }

    /// A pinned client transport to device.local (connecting to 127.0.0.1) pinned to the genuine server's key.
    func transport(port: Int, identity: TLSIdentity?, trusting extra: [Certificate] = [], connectTo ip: String = "127.0.0.1") throws -> PinnedGRPCClientTransport {
        try PinnedGRPCClientTransport(
            host: "device.local",
            port: port,
            evaluator: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: self.serverChain.leaf.certificate)]),
            settings: TrustSettings(anchors: [self.serverChain.root.certificate] + extra, anchorsOnly: true),
            identity: identity,
            address: try SocketAddress(ipAddress: ip, port: port)
        )
    }

    func whoami(_ transport: PinnedGRPCClientTransport) async throws -> String {
        try await withGRPCClient(transport: transport) { client in try await Self.whoami("hello from", on: client) }
    }

    static func whoami<T: ClientTransport>(_ greeting: String, on client: GRPCClient<T>) async throws -> String {
        try await client.unary(
            request: ClientRequest(message: greeting),
            descriptor: DeviceService.whoami,
            serializer: TextSerializer(),
            deserializer: TextDeserializer(),
            options: .defaults
        ) { response in try response.message }
    }

    static func count<T: ClientTransport>(_ count: Int, on client: GRPCClient<T>) async throws -> [String] {
        try await client.serverStreaming(
            request: ClientRequest(message: String(count)),
            descriptor: DeviceService.count,
            serializer: TextSerializer(),
            deserializer: TextDeserializer(),
            options: .defaults
        ) { response in
            var messages: [String] = []
            for try await message in response.messages { messages.append(message) }
            return messages
        }
    }

    @Test("unary and server-streaming calls succeed with the genuine server; the service sees the validated device")
    func genuineServer() async throws {
        let seen = SeenClients()
        let identity = try self.clientChain.leaf.tlsIdentity(chain: [self.clientChain.intermediate.certificate])
        try await self.withServer(seen: seen) { port in
            let transport = try self.transport(port: port, identity: identity)
            try await withGRPCClient(transport: transport) { client in
                let answer = try await Self.whoami("hello from", on: client)
                // Leaf, intermediate and the client root: the path the server's policy validated.
                #expect(answer == "hello from CN=gerät-7 via 3 certificates")
                let streamed = try await Self.count(5, on: client)
                #expect(streamed == (1...5).map { "\($0) for CN=gerät-7" })
            }
        }
        #expect(seen.all == ["CN=gerät-7"])
    }

    @Test("over IPv6 (::1) too: the service finds its client by the connection's remote address in gRPC's ipv6:[…] form")
    func ipv6() async throws {
        let seen = SeenClients()
        let identity = try self.clientChain.leaf.tlsIdentity(chain: [self.clientChain.intermediate.certificate])
        try await self.withServer(seen: seen, bind: "::1") { port in
            let answer = try await self.whoami(try self.transport(port: port, identity: identity, connectTo: "::1"))
            #expect(answer == "hello from CN=gerät-7 via 3 certificates")
        }
        #expect(seen.all == ["CN=gerät-7"])
    }

    @Test("grpc-swift's own client (NIOSSL mTLS, no code of ours) calls the mTLS server transport; the service sees the device")
    func stockClient() async throws {
        let seen = SeenClients()
        let device = TestPKI.pemBundle([self.clientChain.leaf.certificate, self.clientChain.intermediate.certificate])
        let key = self.clientChain.leaf.privateKeyPEM
        let root = self.serverChain.root.certificatePEM
        try await self.withServer(seen: seen) { port in
            let stock = try HTTP2ClientTransport.Posix(
                target: .ipv4(address: "127.0.0.1", port: port),
                transportSecurity: .mTLS(
                    certificateChain: [.bytes(Array(device.utf8), format: .pem)],
                    privateKey: .bytes(Array(key.utf8), format: .pem)
                ) { tls in
                    tls.trustRoots = .certificates([.bytes(Array(root.utf8), format: .pem)])
                    tls.serverCertificateVerification = .fullVerification
                }
            )
            let answer = try await withGRPCClient(transport: stock) { client in try await Self.whoami("stock", on: client) }
            #expect(answer == "stock CN=gerät-7 via 3 certificates")
        }
        #expect(seen.all == ["CN=gerät-7"])
    }

    @Test("the pinned client calls grpc-swift's own TLS server (requiring ALPN h2); the stock server's transport sees no client identity of ours")
    func stockServer() async throws {
        let seen = SeenClients()
        let chain = TestPKI.pemBundle([self.serverChain.leaf.certificate, self.serverChain.intermediate.certificate])
        let stock = HTTP2ServerTransport.Posix(
            address: .ipv4(host: "127.0.0.1", port: 0),
            transportSecurity: .tls(
                certificateChain: [.bytes(Array(chain.utf8), format: .pem)],
                privateKey: .bytes(Array(self.serverChain.leaf.privateKeyPEM.utf8), format: .pem)
            ) { tls in tls.requireALPN = true }
        )
        try await withGRPCServer(transport: stock, services: [DeviceService(seen: seen)]) { server in
            let port = try #require(try await stock.listeningAddress.ipv4?.port)
            let answer = try await self.whoami(try self.transport(port: port, identity: nil))
            #expect(answer == "hello from nobody via 0 certificates")
            server.beginGracefulShutdown()
        }
        #expect(seen.all == ["nobody"])
    }

    @Test("the evaluator and configurationSource initialisers default the settings alike (TrustSettings.default) and keep given settings alike")
    func initialisersAgreeOnSettings() throws {
        struct NoConfiguration: PinningConfigurationSource {
            func currentConfiguration() -> CurrentConfiguration? { nil }
        }
        /// TrustSettings is not Equatable (its SPI clock aside, every field is): compared field by field.
        struct Fields: Hashable {
            var anchors: [Certificate]
            var anchorsOnly: Bool
            var platformRoots: TrustRoots?
            var purpose: TrustPurpose
            var profile: ValidationProfile
            var limits: TrustLimits
            var revocation: RevocationPolicy?
            init(_ settings: TrustSettings) {
                (self.anchors, self.anchorsOnly, self.platformRoots) = (settings.anchors, settings.anchorsOnly, settings.platformRoots)
                (self.purpose, self.profile, self.limits, self.revocation) = (settings.purpose, settings.profile, settings.limits, settings.revocation)
            }
        }
        let evaluator = SecurityPolicy.pinningMode(.none)
        let byEvaluator = try PinnedGRPCClientTransport(host: "device.local", port: 443, evaluator: evaluator)
        let bySource = try PinnedGRPCClientTransport(host: "device.local", port: 443, configurationSource: NoConfiguration())
        let defaults = Fields(TrustSettings.default)
        #expect(Fields(byEvaluator.client.settings) == defaults)
        #expect(Fields(bySource.client.settings) == defaults)
        // The default in values: the platform roots (nil: the operating system's store), no anchors, server
        // authentication, RFC 5280, the default limits, no revocation checking.
        #expect(defaults.anchors.isEmpty && !defaults.anchorsOnly && defaults.platformRoots == nil)
        #expect(defaults.purpose == .serverAuthentication && defaults.profile == .rfc5280 && defaults.limits == .default && defaults.revocation == nil)

        let given = TrustSettings(anchors: [self.serverChain.root.certificate], anchorsOnly: true, platformRoots: TrustRoots([]))
        let givenByEvaluator = try PinnedGRPCClientTransport(host: "device.local", port: 443, evaluator: evaluator, settings: given)
        let givenBySource = try PinnedGRPCClientTransport(host: "device.local", port: 443, configurationSource: NoConfiguration(), settings: given)
        #expect(Fields(givenByEvaluator.client.settings) == Fields(given))
        #expect(Fields(givenBySource.client.settings) == Fields(given))
        #expect(Fields(givenBySource.client.settings).anchors == [self.serverChain.root.certificate])
    }

    @Test("a pinned client that does not offer ALPN h2 is refused when the transport is made, in words")
    func withoutALPN() throws {
        let client = try PinnedTLSClient(evaluator: SecurityPolicy.pinningMode(.none), settings: TrustSettings(anchors: [self.serverChain.root.certificate]))
        #expect {
            _ = try PinnedGRPCClientTransport(host: "device.local", port: 443, client: client)
        } throws: { error in
            (error as? PinningConnectionError)?.code == .invalidRequest && "\(error)".contains("ALPN h2")
        }
    }

    @Test("an intercepting server (its CA trusted too) is refused, unary and streaming: the gRPC error names the TrustFailure; nothing reaches it")
    func interceptingServer() async throws {
        let seen = SeenClients()
        let interceptor = try TestChain(host: "device.local", rootName: "Interception Root")
        let identity = try self.clientChain.leaf.tlsIdentity(chain: [self.clientChain.intermediate.certificate])
        try await self.withServer(leaf: interceptor.leaf, chain: [interceptor.intermediate.certificate], seen: seen) { port in
            let transport = try self.transport(port: port, identity: identity, trusting: [interceptor.root.certificate])
            do {
                let answer = try await self.whoami(transport)
                Issue.record("the intercepting server answered: \(answer)")
            } catch let error as RPCError {
                #expect(error.code == .unavailable)
                // Only the refusal: not the transport's words after it, which blame the server ("The server accepted
                // the TCP connection but closed the connection before completing the HTTP/2 connection preface.").
                #expect(error.message == "certificate refused by the pinning policy: pinMismatch: device.local: no certificate on the validated path matches a pin.", "\(error)")
                #expect(PinnedGRPCRefusal.find(in: error)?.trustFailure?.code == .pinMismatch)
                #expect(error.cause is RPCError, "the transport's own error stays the cause")
            }
            // A streaming call is refused the same way, before any message.
            let streaming = try self.transport(port: port, identity: identity, trusting: [interceptor.root.certificate])
            do {
                let messages = try await withGRPCClient(transport: streaming) { client in
                    try await Self.count(3, on: client)
                }
                Issue.record("the intercepting server streamed: \(messages)")
            } catch let error as RPCError {
                #expect(error.code == .unavailable)
                #expect(PinnedGRPCRefusal.find(in: error)?.trustFailure?.code == .pinMismatch, "\(error)")
                #expect(error.message == "certificate refused by the pinning policy: pinMismatch: device.local: no certificate on the validated path matches a pin.", "\(error)")
            }
        }
        #expect(seen.all.isEmpty)
    }

    @Test("the server refuses a device of another CA and a client without a certificate; the service never runs")
    func refusedDevices() async throws {
        let seen = SeenClients()
        let other = try TestChain.device(rootName: "Other Root")
        let foreign = try other.leaf.tlsIdentity(chain: [other.intermediate.certificate])
        try await self.withServer(seen: seen) { port in
            for identity in [foreign, nil] {
                await #expect(throws: RPCError.self) {
                    _ = try await self.whoami(try self.transport(port: port, identity: identity))
                }
            }
        }
        #expect(seen.all.isEmpty)
    }
}
