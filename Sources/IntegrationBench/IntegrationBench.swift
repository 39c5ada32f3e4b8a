// Requests per second through the integrations (issue 13), each beside the same framework with NIOSSL's own
// verification, measured side by side in one run:
//
//     swift run -c release IntegrationBench grpc  [--json]   gRPC unary calls: PinnedGRPCClientTransport vs
//                                                           HTTP2ClientTransport.Posix with NIOSSL verification
//     swift run -c release IntegrationBench http2 [--json]   HTTP/2 GETs: PinnedHTTPClient (.automatic) vs
//                                                           AsyncHTTPClient (HTTP/2, NIOSSL verification)
//     swift run -c release IntegrationBench vapor [--json]   a Vapor mTLS server: useMutualTLS vs Vapor with
//                                                           NIOSSL's own client verification, new connections
//
// Options: --requests, --concurrency, --rounds; --devices N (vapor: the fleet's size, default 1,000, every device
// connecting to every server once before the rounds); --kind NAME, repeatable, to run only some kinds (for a
// profile of one kind; a ratio needs the NIOSSL kind too).
//
// A separate executable, not a `pinning bench` command: the CLI does not link Vapor or gRPC (its start-up time
// is issue 12's business). `scripts/bench-compare.sh` runs it with INTEGRATIONS=1.
import ArgumentParser
import AsyncHTTPClient
import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import PinningGRPC
import PinningNIO
import PinningPKI
import PinningVapor
import Vapor
import X509

@main
struct IntegrationBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "IntegrationBench",
        abstract: "Requests per second through the gRPC, HTTP/2 and Vapor integrations, beside NIOSSL's own verification.",
        discussion: """
            Each kind takes turns with the others in --rounds rounds (after a warm-up), so drift in the machine's \
            load spreads over all of them; the figure is requests ÷ the time the kind ran. "fresh" workloads open \
            a new connection (and TLS handshake) per request; "shared" ones send --requests over one client's \
            connection, --concurrency at a time. The pinned kinds run with and without an EvaluationCache.

            JSON: {"workload": {"kind": requestsPerSecond, …}, …}
            """
    )

    @ArgumentParser.Argument(help: "grpc, http2 or vapor.")
    var integration: String

    @ArgumentParser.Option(help: "Requests per kind and workload (default 2000).")
    var requests: Int = 2000

    @ArgumentParser.Option(help: "Requests in flight at once (default 8).")
    var concurrency: Int = 8

    @ArgumentParser.Option(help: "Rounds the kinds take turns in (default 5).")
    var rounds: Int = 5

    @ArgumentParser.Option(help: "Distinct devices the vapor workload connects as (default 1000).")
    var devices: Int = 1000

    @ArgumentParser.Option(name: .customLong("kind"), help: "Only this kind, by its full name; repeatable (to profile one kind alone; a ratio needs the NIOSSL kind too).")
    var kinds: [String] = []

    @ArgumentParser.Flag(help: "Print the result as JSON.")
    var json = false

    func validate() throws {
        guard ["grpc", "http2", "vapor"].contains(self.integration) else {
            throw ArgumentParser.ValidationError("the integration must be grpc, http2 or vapor, not \(self.integration)")
        }
        guard (1...1_000_000).contains(self.requests), (1...256).contains(self.concurrency), (1...100).contains(self.rounds) else {
            throw ArgumentParser.ValidationError("--requests 1…1,000,000, --concurrency 1…256, --rounds 1…100")
        }
        guard (1...100_000).contains(self.devices) else {
            throw ArgumentParser.ValidationError("--devices 1…100,000")
        }
    }

    func run() async throws {
        let bench = Rounds(requests: self.requests, concurrency: self.concurrency, rounds: self.rounds, only: self.kinds.isEmpty ? nil : self.kinds)
        let results: [String: [String: Double]]
        switch self.integration {
        case "grpc": results = try await GRPCBench().run(bench)
        case "http2": results = try await HTTP2Bench().run(bench)
        default: results = try await VaporBench(devices: self.devices).run(bench)
        }
        if self.json {
            let data = try JSONSerialization.data(withJSONObject: results, options: [.sortedKeys, .prettyPrinted])
            print(String(decoding: data, as: UTF8.self))
            return
        }
        for (workload, kinds) in results.sorted(by: { $0.key < $1.key }) {
            print(workload)
            let baseline = kinds.first { $0.key.hasPrefix("niossl") }?.value ?? 0
            for (kind, rate) in kinds.sorted(by: { $0.key < $1.key }) {
                let ratio = baseline > 0 ? String(format: "  (%.3f× NIOSSL)", rate / baseline) : ""
                print("  " + kind.padding(toLength: 40, withPad: " ", startingAt: 0) + String(format: "%10.1f requests/s", rate) + ratio)
            }
        }
    }
}

/// Alternating rounds over named kinds of one operation.
struct Rounds {
    var requests: Int
    var concurrency: Int
    var rounds: Int
    /// The names of the kinds to run (nil: all).
    var only: [String]? = nil

    /// Requests per second for each kind; `operation(kind)` is one request of that kind.
    func rates(_ kinds: [String], concurrency: Int? = nil, _ operation: @escaping @Sendable (String) async throws -> Void) async throws -> [String: Double] {
        let kinds = kinds.filter { kind in self.only?.contains(kind) ?? true }
        let concurrency = concurrency ?? self.concurrency
        var elapsed: [String: Double] = [:]
        for kind in kinds {
            try await Self.spread(min(self.requests, concurrency * 4), concurrency: concurrency) { try await operation(kind) }
        }
        let perRound = max(1, self.requests / self.rounds)
        for _ in 0..<self.rounds {
            for kind in kinds {
                let started = DispatchTime.now().uptimeNanoseconds
                try await Self.spread(perRound, concurrency: concurrency) { try await operation(kind) }
                elapsed[kind, default: 0] += Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            }
        }
        return elapsed.mapValues { ($0 > 0 ? Double(perRound * self.rounds) / $0 : 0).rounded() }
    }

    static func spread(_ count: Int, concurrency: Int, _ one: @escaping @Sendable () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            let workers = max(1, min(concurrency, count))
            for worker in 0..<workers {
                let share = count / workers + (worker < count % workers ? 1 : 0)
                tasks.addTask {
                    for _ in 0..<share { try await one() }
                }
            }
            try await tasks.waitForAll()
        }
    }
}

/// One event loop for every client and one for every server, whatever the kind: with NIO's shared group, which
/// loop each kind's connection lands on (beside the server's, or not) moved the shared-connection figures between
/// 0.67× and 1.41× from run to run.
enum Loops {
    static let clients = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    static let server = MultiThreadedEventLoopGroup(numberOfThreads: 1)
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
}

/// The minted PKI every bench uses: a server chain for localhost/127.0.0.1 and a device CA with devices.
struct BenchPKI {
    let server: TestChain
    let deviceRoot: TestIdentity
    let deviceCA: TestIdentity
    let devices: [TestIdentity]

    init(devices: Int = 0) throws {
        self.server = try TestChain(host: "localhost")
        let root = try TestPKI.root("Bench Device Root")
        let issuer = try TestPKI.intermediate("Bench Device CA", issuer: root)
        self.deviceRoot = root
        self.deviceCA = issuer
        self.devices = try (0..<devices).map { try TestPKI.leaf("device-\($0)", issuer: issuer, usage: .clientAuth, includeSAN: false) }
    }

    var serverIdentity: TLSIdentity {
        get throws { try self.server.leaf.tlsIdentity(chain: [self.server.intermediate.certificate]) }
    }

    /// The pinned policy: the server intermediate's key, the minted root as the only anchor.
    func evaluator(cached: Bool) -> any ServerTrustEvaluating {
        let policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: self.server.intermediate.certificate)])
        return cached ? CachingTrustEvaluator(policy, cache: EvaluationCache()) : policy
    }

    var settings: TrustSettings { TrustSettings(anchors: [self.server.root.certificate], anchorsOnly: true) }
}

// MARK: - gRPC

struct Text: MessageSerializer, MessageDeserializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: String) throws -> Bytes { Bytes(Array(message.utf8)) }
    func deserialize<Bytes: GRPCContiguousBytes>(_ bytes: Bytes) throws -> String {
        bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }
}

struct Echo: RegistrableRPCService {
    static let method = MethodDescriptor(fullyQualifiedService: "bench.Echo", method: "Echo")

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(forMethod: Self.method, deserializer: Text(), serializer: Text()) { request, _ in
            var last = ""
            for try await message in request.messages { last = message }
            return StreamingServerResponse(single: ServerResponse(message: last))
        }
    }
}

struct GRPCBench {
    func run(_ bench: Rounds) async throws -> [String: [String: Double]] {
        let pki = try BenchPKI()
        // grpc-swift's own server (plain TLS): software the pinned client did not write.
        let serverChain = TestPKI.pemBundle([pki.server.leaf.certificate, pki.server.intermediate.certificate])
        let server = HTTP2ServerTransport.Posix(
            address: .ipv4(host: "127.0.0.1", port: 0),
            transportSecurity: .tls(
                certificateChain: [.bytes(Array(serverChain.utf8), format: .pem)],
                privateKey: .bytes(Array(pki.server.leaf.privateKeyPEM.utf8), format: .pem)
            ),
            eventLoopGroup: Loops.server
        )
        // One evaluator per kind for the whole run, so the cached kind's cache outlives each connection.
        let pinnedEvaluator = pki.evaluator(cached: false)
        let cachedEvaluator = pki.evaluator(cached: true)
        let rootPEM = Array(pki.server.root.certificatePEM.utf8)
        return try await withGRPCServer(transport: server, services: [Echo()]) { grpcServer in
            defer { grpcServer.beginGracefulShutdown() }
            guard let port = try await server.listeningAddress.ipv4?.port else { throw BenchFailure(description: "no port") }
            let address = try NIOCore.SocketAddress(ipAddress: "127.0.0.1", port: port)
            @Sendable func transport(_ kind: String) throws -> any ClientTransport<GRPCNIOTransportBytes> {
                switch kind {
                case "niossl verification":
                    return try HTTP2ClientTransport.Posix(
                        target: .ipv4(address: "127.0.0.1", port: port),
                        transportSecurity: .tls { tls in
                            tls.trustRoots = .certificates([.bytes(rootPEM, format: .pem)])
                            tls.serverCertificateVerification = .fullVerification
                        },
                        eventLoopGroup: Loops.clients
                    )
                default:
                    return try PinnedGRPCClientTransport(
                        host: "localhost", port: port, evaluator: kind == "pinned" ? pinnedEvaluator : cachedEvaluator, settings: pki.settings,
                        address: address, eventLoopGroup: Loops.clients)
                }
            }
            let kinds = ["pinned", "pinned, cached", "niossl verification"]
            var results: [String: [String: Double]] = [:]
            // A new client (connection, handshake, HTTP/2 preface) for every call.
            results["fresh connection per call"] = try await bench.rates(kinds) { kind in
                try await Self.freshCall(try transport(kind))
            }
            // One client per kind, its calls multiplexed on its connection.
            let shared = try kinds.map { try transport($0) }
            results["shared connection"] = try await withThrowingTaskGroup(of: Void.self) { group in
                var clients: [String: SharedClient] = [:]
                for (kind, transport) in zip(kinds, shared) {
                    let client = Self.shared(transport)
                    clients[kind] = client
                    group.addTask { try await client.run() }
                }
                let all = clients
                let rates = try await bench.rates(kinds) { kind in
                    try await all[kind]?.call()
                }
                for client in all.values { client.stop() }
                try await group.waitForAll()
                return rates
            }
            return results
        }
    }

    /// A client whose connections run while `run` runs; the transport's type opened from the existential.
    struct SharedClient: Sendable {
        var run: @Sendable () async throws -> Void
        var call: @Sendable () async throws -> Void
        var stop: @Sendable () -> Void
    }

    static func shared<T: ClientTransport>(_ transport: T) -> SharedClient {
        let client = GRPCClient(transport: transport)
        return SharedClient(run: { try await client.runConnections() }, call: { try await Self.call(client) }, stop: { client.beginGracefulShutdown() })
    }

    static func freshCall<T: ClientTransport>(_ transport: T) async throws {
        try await withGRPCClient(transport: transport) { client in try await Self.call(client) }
    }

    static func call<T: ClientTransport>(_ client: GRPCClient<T>) async throws {
        let answer = try await client.unary(
            request: ClientRequest(message: "ping"), descriptor: Echo.method, serializer: Text(), deserializer: Text(), options: .defaults
        ) { response in try response.message }
        guard answer == "ping" else { throw BenchFailure(description: "unexpected answer \(answer)") }
    }
}

// MARK: - HTTP/2 (PinnedHTTPClient vs AsyncHTTPClient)

/// A Vapor application serving `GET /hello` over TLS on 127.0.0.1, HTTP/2 and HTTP/1.1; `body` gets its port.
func withVaporServer<T>(
    _ configuration: HTTPServer.Configuration,
    _ body: (Int) async throws -> T
) async throws -> T {
    var environment = Environment.production
    environment.arguments = ["bench"]
    let app = try await Application.make(environment, .shared(Loops.server))
    app.logger.logLevel = .critical
    app.http.server.configuration = configuration
    app.get("hello") { _ in "hello" }
    do {
        try await app.server.start(address: .hostname("127.0.0.1", port: 0))
        guard let port = app.http.server.shared.localAddress?.port else { throw BenchFailure(description: "no port") }
        let result = try await body(port)
        await app.server.shutdown()
        try await app.asyncShutdown()
        return result
    } catch {
        await app.server.shutdown()
        try await app.asyncShutdown()
        throw error
    }
}

struct HTTP2Bench {
    func run(_ bench: Rounds) async throws -> [String: [String: Double]] {
        let pki = try BenchPKI()
        let identity = try pki.serverIdentity
        var configuration = HTTPServer.Configuration(supportVersions: [.two, .one])
        configuration.tlsConfiguration = .makeServerConfiguration(certificateChain: identity.certificateSources, privateKey: identity.privateKeySource)
        return try await withVaporServer(configuration) { port in
            let url = "https://localhost:\(port)/hello"
            let resolve: PinnedHTTPClient.Resolve = { _, port in try? NIOCore.SocketAddress(ipAddress: "127.0.0.1", port: port) }
            let h2 = PinnedHTTPClientConfiguration(httpVersions: .automatic)
            let pinned = try PinnedHTTPClient(evaluator: pki.evaluator(cached: false), settings: pki.settings, configuration: h2, group: Loops.clients)
            let cached = try PinnedHTTPClient(evaluator: pki.evaluator(cached: true), settings: pki.settings, configuration: h2, group: Loops.clients)
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: pki.server.root.der, format: .der)])
            tls.certificateVerification = .fullVerification
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
            configuration.httpVersion = .automatic
            configuration.dnsOverride = ["localhost": "127.0.0.1"]
            let ahc = HTTPClient(eventLoopGroup: Loops.clients, configuration: configuration)
            let target = URL(string: url)!
            let rates = try await bench.rates(["pinned", "pinned, cached", "niossl verification (AsyncHTTPClient)"]) { kind in
                switch kind {
                case "pinned", "pinned, cached":
                    let response = try await (kind == "pinned" ? pinned : cached).get(target, resolve: resolve)
                    guard response.status == .ok, response.version.major == 2 else { throw BenchFailure(description: "pinned: \(response.status) \(response.version)") }
                default:
                    let response = try await ahc.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
                    _ = try await response.body.collect(upTo: 1 << 16)
                    guard response.status == .ok, response.version.major == 2 else { throw BenchFailure(description: "AHC: \(response.status) \(response.version)") }
                }
            }
            try await ahc.shutdown()
            await pinned.shutdown()
            await cached.shutdown()
            return ["shared connection, HTTP/2": rates]
        }
    }
}

// MARK: - Vapor mTLS server

struct VaporBench {
    var devices: Int

    func run(_ bench: Rounds) async throws -> [String: [String: Double]] {
        let pki = try BenchPKI(devices: self.devices)
        let identity = try pki.serverIdentity
        // Each request presents the next device certificate on a new connection.
        let clients = try pki.devices.map { device -> NIOSSLContext in
            let deviceIdentity = try device.tlsIdentity(chain: [pki.deviceCA.certificate])
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.certificateVerification = .none
            tls.certificateChain = deviceIdentity.certificateSources
            tls.privateKey = deviceIdentity.privateKeySource
            tls.applicationProtocols = ["http/1.1"]
            return try NIOSSLContext(configuration: tls)
        }
        let next = NIOLockedValueBox(0)
        @Sendable func request(port: Int) async throws {
            let index = next.withLockedValue { value in
                defer { value = (value + 1) % clients.count }
                return value
            }
            try await RawRequest.get(port: port, context: clients[index])
        }
        let cachedServer = try MutualTLSServer(
            identity: identity, clientCertificateAuthorities: [pki.deviceRoot.certificate], clientRule: .builtIn(cache: EvaluationCache()))
        let server = try MutualTLSServer(identity: identity, clientCertificateAuthorities: [pki.deviceRoot.certificate])
        // Three Vapor servers at once, so the kinds take turns in rounds as in every other bench.
        var pinnedConfiguration = HTTPServer.Configuration(supportVersions: [.one])
        pinnedConfiguration.useMutualTLS(server)
        var cachedConfiguration = HTTPServer.Configuration(supportVersions: [.one])
        cachedConfiguration.useMutualTLS(cachedServer)
        // NIOSSL's own client verification: the same CA as trust roots, VERIFY_PEER | FAIL_IF_NO_PEER_CERT.
        var niosslConfiguration = HTTPServer.Configuration(supportVersions: [.one])
        niosslConfiguration.tlsConfiguration = server.configuration
        let results = try await withVaporServer(pinnedConfiguration) { pinnedPort in
            try await withVaporServer(cachedConfiguration) { cachedPort in
                try await withVaporServer(niosslConfiguration) { nioPort in
                    let ports = ["pinned": pinnedPort, "pinned, cached": cachedPort, "niossl verification": nioPort]
                    // Every device connects to every server once before the rounds, as in a running fleet: the cached
                    // kind then measures devices that return within the cache's lifetime (what the cache is for),
                    // while the uncached kind validates every chain in full, which is also what a device's first
                    // connection costs the cached server.
                    for port in ports.values {
                        try await Rounds.spread(clients.count, concurrency: bench.concurrency) { try await request(port: port) }
                    }
                    return try await bench.rates(["pinned", "pinned, cached", "niossl verification"]) { kind in
                        try await request(port: ports[kind] ?? 0)
                    }
                }
            }
        }
        return ["fresh connection per request, \(self.devices) devices": results]
    }
}

/// One HTTP/1.1 GET /hello on a new TLS connection (no server verification: the server is what is measured),
/// read until the server closes.
enum RawRequest {
    static func get(port: Int, context: NIOSSLContext) async throws {
        let done = Loops.clients.any().makePromise(of: String.self)
        let channel = try await ClientBootstrap(group: Loops.clients)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: context, serverHostname: nil))
                    try channel.pipeline.syncOperations.addHandler(Collector(done: done))
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        channel.writeAndFlush(ByteBuffer(string: "GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"), promise: nil)
        let response = try await done.futureResult.get()
        guard response.hasPrefix("HTTP/1.1 200") else { throw BenchFailure(description: "unexpected response: \(response.prefix(60))") }
    }

    final class Collector: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let done: EventLoopPromise<String>
        var text = ""

        init(done: EventLoopPromise<String>) { self.done = done }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = self.unwrapInboundIn(data)
            self.text += buffer.readString(length: buffer.readableBytes) ?? ""
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.done.succeed(self.text)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            self.done.fail(error)
            context.close(promise: nil)
        }
    }
}
