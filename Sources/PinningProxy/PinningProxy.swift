import CoreMetrics
import Foundation
import NIOConcurrencyHelpers
public import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
public import Pinning
public import PinningNIO
import X509

/// A local proxy that applies a ``/Pinning/PinningConfiguration`` for every client on the machine: a forward proxy that
/// intercepts `CONNECT` to covered hosts (terminating the client's TLS with a certificate from the local CA and
/// re-originating it over a pinned connection), and plain TCP tunnels forwarded over pinned TLS.
///
/// Every upstream connection is made by ``/PinningNIO/PinnedTLSClient`` with the configuration as its evaluator:
/// the same trust path `pinning check --config` uses, never a second one.
public final class PinningProxy: Sendable {
    /// The settings it started with (addresses and limits stay; the policy part is replaced by ``reload(configuration:identities:authority:)``).
    public let settings: ProxySettings
    /// Counters for `/status`, recording metrics for `/metrics`.
    public let statistics: ProxyStatistics

    /// What judges connections: the configuration, its identities and the local CA, with the pinned clients made
    /// from them. Replaced whole by a reload; a connection keeps the policy it started with for the request in
    /// flight and takes the current one at its next request.
    public struct Policy: Sendable {
        /// The per-host policy.
        public let configuration: PinningConfiguration
        /// The local CA.
        public let authority: ProxyCertificateAuthority
        /// Client identities by entry key.
        public let identities: [String: TLSIdentity]
        /// Counts reloads: a connection compares it to know its upstream was made under an older policy.
        public let generation: Int
        let upstreamClient: PinnedTLSClient
        let identityClients: [String: PinnedTLSClient]

        init(
            configuration: PinningConfiguration, authority: ProxyCertificateAuthority, identities: [String: TLSIdentity], trustSettings: TrustSettings,
            keyLog: TLSKeyLog?, generation: Int
        ) throws(ProxyError) {
            self.configuration = configuration
            self.authority = authority
            self.identities = identities
            self.generation = generation
            do {
                self.upstreamClient = try PinnedTLSClient(evaluator: configuration, settings: trustSettings, keyLog: keyLog)
                var clients: [String: PinnedTLSClient] = [:]
                for (entry, identity) in identities {
                    clients[entry] = try PinnedTLSClient(evaluator: configuration, settings: trustSettings, identity: identity, keyLog: keyLog)
                }
                self.identityClients = clients
            } catch {
                throw ProxyError("cannot build the upstream TLS configuration: \(ConnectionFailureWords.words(error))")
            }
        }

        /// The pinned client for `host`: its entry's identity, or none. No other host ever sees an identity.
        func client(for host: String) -> PinnedTLSClient {
            self.configuration.entry(forHost: host).flatMap { self.identityClients[$0.key] } ?? self.upstreamClient
        }
    }

    let group: any EventLoopGroup
    let log: @Sendable (ProxyLogRecord) -> Void
    private let policyBox: NIOLockedValueBox<Policy>
    private let channels = NIOLockedValueBox<[any Channel]>([])
    private let listeningAddress = NIOLockedValueBox<SocketAddress?>(nil)
    private let tunnelAddresses = NIOLockedValueBox<[SocketAddress]>([])

    /// A proxy; nothing listens until ``start()``.
    ///
    /// - Parameters:
    ///   - settings: The policy, addresses and limits.
    ///   - authority: The local CA that issues the certificates presented to clients.
    ///   - group: The event loops.
    ///   - log: Called once per connection outcome.
    /// - Throws: ``ProxyError`` when the upstream TLS configuration cannot be built.
    public init(
        settings: ProxySettings,
        authority: ProxyCertificateAuthority,
        group: any EventLoopGroup,
        log: @escaping @Sendable (ProxyLogRecord) -> Void
    ) throws(ProxyError) {
        self.settings = settings
        self.group = group
        self.log = log
        self.statistics = ProxyStatistics(factory: settings.metrics?.factory ?? MetricsSystem.factory)
        self.policyBox = NIOLockedValueBox(
            try Policy(
                configuration: settings.configuration, authority: authority, identities: settings.identities, trustSettings: settings.trustSettings,
                keyLog: settings.keyLog, generation: 0
            )
        )
    }

    /// The policy new connections and requests are judged by.
    public var policy: Policy { self.policyBox.withLockedValue { $0 } }

    /// The local CA in use.
    public var authority: ProxyCertificateAuthority { self.policy.authority }

    /// Replaces the policy: new connections, and the next request of every open connection, use it; requests in
    /// flight finish on the old one. Nothing is replaced when the new upstream clients cannot be built.
    ///
    /// - Throws: ``ProxyError``; the old policy stays.
    public func reload(
        configuration: PinningConfiguration,
        identities: [String: TLSIdentity],
        authority: ProxyCertificateAuthority
    ) throws(ProxyError) {
        let generation = self.policy.generation + 1
        let policy = try Policy(
            configuration: configuration, authority: authority, identities: identities, trustSettings: self.settings.trustSettings,
            keyLog: self.settings.keyLog, generation: generation
        )
        self.policyBox.withLockedValue { $0 = policy }
    }

    /// Where the forward proxy listens once started.
    public var listening: SocketAddress? { self.listeningAddress.withLockedValue { $0 } }

    /// Binds the forward proxy and every tunnel; returns their addresses (the proxy's first).
    ///
    /// - Throws: ``ProxyError`` saying which address cannot be bound and why (in words).
    @discardableResult
    public func start() async throws(ProxyError) -> [SocketAddress] {
        var bound: [SocketAddress] = []
        let proxy = self
        do {
            let channel = try await self.bind(self.settings.listen, what: "the proxy") { channel in
                channel.eventLoop.makeCompletedFuture {
                    try proxy.configureFront(channel)
                }
            }
            self.listeningAddress.withLockedValue { $0 = channel.localAddress }
            bound.append(channel.localAddress ?? self.settings.listen)
            for tunnel in self.settings.tunnels {
                let tunnelChannel = try await self.bind(tunnel.local, what: "the tunnel to \(tunnel.host):\(tunnel.port)") { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try proxy.configureTunnel(channel, tunnel: tunnel)
                    }
                }
                bound.append(tunnelChannel.localAddress ?? tunnel.local)
            }
            self.tunnelAddresses.withLockedValue { $0 = Array(bound.dropFirst()) }
        } catch {
            await self.stop()
            throw error
        }
        return bound
    }

    private func bind(
        _ address: SocketAddress,
        what: String,
        initializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws(ProxyError) -> any Channel {
        do {
            let channel = try await ServerBootstrap(group: self.group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer(initializer)
                .bind(to: address)
                .get()
            self.channels.withLockedValue { $0.append(channel) }
            return channel
        } catch {
            throw ProxyError("cannot listen on \(Self.describe(address)) for \(what): \(ConnectionFailureWords.words(error))")
        }
    }

    /// Stops accepting; connections in flight are left to finish (the caller bounds how long it waits).
    public func stop() async {
        let channels = self.channels.withLockedValue { channels in
            defer { channels.removeAll() }
            return channels
        }
        for channel in channels {
            try? await channel.close()
        }
    }

    /// Waits until no client connection is open, or `timeout` passed.
    public func drain(timeout: Duration) async {
        let deadline = ContinuousClock.now + timeout
        while self.statistics.active > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    // MARK: - Pipelines

    private func configureFront(_ channel: any Channel) throws {
        let connection = ProxyConnection(proxy: self, client: channel.remoteAddress)
        guard connection.admit(kind: .proxy) else {
            // Over the cap: one clear status, then close.
            try channel.pipeline.syncOperations.addHandler(HTTPResponseEncoder())
            try channel.pipeline.syncOperations.addHandler(RefuseOverloadHandler(limit: self.settings.maximumConnections))
            return
        }
        try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: self.settings.idleTimeout))
        // The CONNECT (or local path) request's head must arrive whole within requestHeadTimeout of the accept.
        let deadline = RequestHeadDeadline.handlers(timeout: self.settings.requestHeadTimeout, idleBetweenRequestsCounts: false, server: "pinning proxy")
        try channel.pipeline.syncOperations.addHandler(deadline.bytes)
        let decoder = ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes))
        try channel.pipeline.syncOperations.addHandler(decoder)
        let encoder = HTTPResponseEncoder()
        try channel.pipeline.syncOperations.addHandler(encoder)
        try channel.pipeline.syncOperations.addHandler(deadline.heads)
        try channel.pipeline.syncOperations.addHandler(
            ProxyFrontHandler(proxy: self, connection: connection, decoder: decoder, encoder: encoder, deadline: deadline)
        )
    }

    private func configureTunnel(_ channel: any Channel, tunnel: ProxySettings.Tunnel) throws {
        let connection = ProxyConnection(proxy: self, client: channel.remoteAddress)
        connection.host = tunnel.host
        connection.upstream = "\(tunnel.host):\(tunnel.port)"
        guard connection.admit(kind: .tunnel) else {
            connection.finish(verdict: .notJudged, failure: "tooManyConnections", message: "more than \(self.settings.maximumConnections) connections are open")
            channel.close(promise: nil)
            return
        }
        try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: self.settings.idleTimeout))
        try channel.pipeline.syncOperations.addHandler(TunnelHandler(proxy: self, connection: connection, tunnel: tunnel))
    }

    // MARK: - Upstream

    /// Connects to `host`:`port` over pinned TLS judged by the configuration, adding `configure`'s handlers after
    /// the TLS handlers. Records the handshake time and any refusal.
    func connectUpstream(
        host: String,
        port: Int,
        policy: Policy,
        on eventLoop: any EventLoop,
        configure: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws(PinningConnectionError) -> PinnedConnection {
        let started = ContinuousClock.now
        // The identity of the entry that governs the host, found as the evaluator finds it; no other host sees it.
        let client = policy.client(for: host)
        do {
            let connection = try await client.connect(
                host: host,
                port: port,
                address: self.settings.resolve.address(host: host, port: port),
                group: eventLoop,
                timeout: self.settings.upstreamTimeout,
                configure: configure
            )
            let elapsed = ContinuousClock.now - started
            self.statistics.upstreamHandshake(nanoseconds: elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
            return connection
        } catch {
            self.statistics.refused(host: host, code: Self.failureCode(error))
            throw error
        }
    }

    /// The code a refusal is known by: the TrustFailure's when the policy refused, else the connection error's.
    static func failureCode(_ error: PinningConnectionError) -> String {
        error.trustFailure.map { "\($0.code)" } ?? "\(error.code)"
    }

    /// `127.0.0.1:8080`, `[::1]:8080`: how the proxy names an address (start-up lines, `/status`, the PAC file).
    package static func describe(_ address: SocketAddress) -> String {
        let ip = address.ipAddress ?? "\(address)"
        let port = address.port ?? 0
        return ip.contains(":") ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }

    // MARK: - Local paths

    /// One configuration entry in `/status`: every entry is listed, whatever it has (pins, an identity, an
    /// exclusion), with the instants its pins and its client identity stop working (null when they do not).
    struct EntryStatus: Encodable {
        var entry: String
        var pins: Int
        var enforce: Bool
        /// The entry's `expires`: after it the pins are no longer enforced.
        @NullWhenNil var pinsExpire: String?
        var excludedFromParentPolicy: Bool
        var clientIdentity: Bool
        /// The client identity's certificate notValidAfter.
        @NullWhenNil var identityExpires: String?
        @NullWhenNil var identitySubject: String?
    }

    /// Every entry of `policy`'s configuration, in the configuration's order.
    static func entryStatuses(_ policy: Policy) -> [EntryStatus] {
        policy.configuration.entries.map { entry in
            let identity = policy.identities[entry.key]
            return EntryStatus(
                entry: entry.key,
                pins: entry.pins.count,
                enforce: entry.enforce,
                pinsExpire: entry.expires.map(RFC3339.format),
                excludedFromParentPolicy: entry.excludesSubdomainFromParentPolicy,
                clientIdentity: entry.clientIdentity != nil,
                identityExpires: identity.map { RFC3339.format($0.leaf.notValidAfter) },
                identitySubject: identity.map { "\($0.leaf.subject)" }
            )
        }
    }

    /// `/status`: a JSON summary.
    func statusJSON() -> String {
        struct Status: Encodable {
            var entries: Int
            /// Every configured entry (`entries` is their count).
            var entryList: [EntryStatus]
            var unlistedHosts: String
            var localCA: String
            var localCAPin: String
            var localCAExpires: String
            var uptimeSeconds: Int
            var activeConnections: Int
            var reloads: Int
            var failedReloads: Int
            var listening: String?
            var tunnels: [String]
            /// Only when following a pin set.
            var pinset: PinSetJSON?
        }
        struct PinSetJSON: Encodable {
            @NullWhenNil var version: Int?
            var targetName: String
            @NullWhenNil var sha256: String?
            @NullWhenNil var refreshed: String?
            var stale: Bool
            var secondsStale: Int
            @NullWhenNil var lastError: String?
            @NullWhenNil var lastAttempt: String?
        }
        // The project's own writer: proleptic Gregorian, as every other date the CLI prints (ISO8601DateFormatter
        // switches to the Julian calendar before 1582-10-15).
        let reloads = self.statistics.reloads
        let policy = self.policy
        let status = Status(
            entries: policy.configuration.entries.count,
            entryList: Self.entryStatuses(policy),
            unlistedHosts: policy.configuration.unlistedHosts.rawValue,
            localCA: policy.authority.certificatePath,
            localCAPin: policy.authority.pin.description,
            localCAExpires: RFC3339.format(policy.authority.certificate.notValidAfter),
            uptimeSeconds: Int(Date().timeIntervalSince(self.statistics.started)),
            activeConnections: self.statistics.active,
            reloads: reloads.succeeded,
            failedReloads: reloads.failed,
            listening: self.listening.map(Self.describe),
            tunnels: zip(self.settings.tunnels, self.tunnelAddresses.withLockedValue { $0 }).map { tunnel, address in
                "\(Self.describe(address)) -> \(tunnel.host):\(tunnel.port)"
            },
            pinset: self.settings.pinSetStatus.map { read in
                let pinSet = read()
                return PinSetJSON(
                    version: pinSet.version, targetName: pinSet.targetName, sha256: pinSet.sha256, refreshed: pinSet.refreshed.map(RFC3339.format),
                    stale: pinSet.stale, secondsStale: pinSet.secondsStale, lastError: pinSet.lastError, lastAttempt: pinSet.lastAttempt.map(RFC3339.format))
            }
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return ((try? encoder.encode(status)).map { String(decoding: $0, as: UTF8.self) } ?? "{}") + "\n"
    }

    /// `/metrics`: the expiry gauges brought up to date, then the embedding program's exposition text; nil when
    /// no exposition was configured.
    func metricsText() -> String? {
        guard let exposition = self.settings.metrics?.exposition else { return nil }
        let now = Date()
        let policy = self.policy
        var expiries: [(kind: String, entry: String, seconds: Double)] = [
            ("local_ca", "", policy.authority.certificate.notValidAfter.timeIntervalSince(now))
        ]
        for (entry, identity) in policy.identities.sorted(by: { $0.key < $1.key }) {
            expiries.append(("identity", entry, identity.leaf.notValidAfter.timeIntervalSince(now)))
        }
        for entry in policy.configuration.entries {
            if let expires = entry.expires {
                expiries.append(("pins", entry.key, expires.timeIntervalSince(now)))
            }
        }
        self.statistics.recordExpiries(expiries)
        if let read = self.settings.pinSetStatus {
            self.statistics.recordPinSet(read())
        }
        return exposition()
    }

    /// `/proxy.pac`.
    func pacScript(requestHost: String?) -> String {
        let address = self.listening.map(Self.describe) ?? Self.describe(self.settings.listen)
        return PACFile.script(entries: self.policy.configuration.entries, proxy: address)
    }
}

/// One client connection's bookkeeping: admitted against the cap, and logged exactly once when it ends.
final class ProxyConnection {
    // Lives on the client channel's event loop: not Sendable; closures that leave the loop carry it in an NIOLoopBound.
    let proxy: PinningProxy
    let client: String
    let started = ContinuousClock.now
    var kind = ProxyLogRecord.Kind.local
    var host: String?
    var upstream: String?
    var entry: String?
    var bytesUp = 0
    var bytesDown = 0
    var requests = 0
    private var admitted = false
    private var finished = false

    init(proxy: PinningProxy, client: SocketAddress?) {
        self.proxy = proxy
        self.client = client.map(PinningProxy.describe) ?? "?"
    }

    /// Counts the connection; false when the cap is reached (it is then not counted as open).
    func admit(kind: ProxyLogRecord.Kind) -> Bool {
        self.kind = kind
        guard self.proxy.statistics.active < self.proxy.settings.maximumConnections else { return false }
        self.admitted = self.proxy.statistics.opened(kind)
        return true
    }

    func finish(verdict: ProxyLogRecord.Verdict, failure: String? = nil, message: String? = nil) {
        guard !self.finished else { return }
        self.finished = true
        if self.admitted { self.proxy.statistics.closed() }
        let elapsed = ContinuousClock.now - self.started
        let milliseconds = Int(elapsed.components.seconds * 1000) + Int(elapsed.components.attoseconds / 1_000_000_000_000_000)
        self.proxy.log(
            ProxyLogRecord(
                kind: self.kind, client: self.client, host: self.host, upstream: self.upstream, verdict: verdict, failure: failure,
                entry: self.entry, bytesUp: self.bytesUp, bytesDown: self.bytesDown, requests: self.requests,
                durationMilliseconds: milliseconds, message: message
            )
        )
    }
}

/// Answers `503` to a client over the connection cap, then closes.
final class RefuseOverloadHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = HTTPServerResponsePart
    let limit: Int

    init(limit: Int) { self.limit = limit }

    func channelActive(context: ChannelHandlerContext) {
        let body = "pinning proxy: more than \(self.limit) connections are open; try again later\n"
        HTTPReply.send(context: context, status: .serviceUnavailable, body: body, wrap: self.wrapOutboundOut, close: true)
    }
}

/// Writing a complete small response.
enum HTTPReply {
    static func send(
        context: ChannelHandlerContext,
        status: HTTPResponseStatus,
        headers extra: [(String, String)] = [],
        contentType: String = "text/plain; charset=utf-8",
        body: String,
        wrap: (HTTPServerResponsePart) -> NIOAny,
        close: Bool
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: contentType)
        headers.add(name: "content-length", value: "\(body.utf8.count)")
        for (name, value) in extra { headers.add(name: name, value: value) }
        if close { headers.add(name: "connection", value: "close") }
        context.write(wrap(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: body.utf8.count)
        buffer.writeString(body)
        context.write(wrap(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlush(wrap(.end(nil)))
        if close {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

/// An optional field of a `/status` object that is always there: `null` when nil, not absent (synthesized
/// encoding leaves a nil out), so a reader sees that there is no expiry, no error, no pin set version, rather
/// than wondering.
@propertyWrapper
struct NullWhenNil<Value: Encodable>: Encodable {
    var wrappedValue: Value?

    init(wrappedValue: Value?) {
        self.wrappedValue = wrappedValue
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let value = self.wrappedValue {
            try container.encode(value)
        } else {
            try container.encodeNil()
        }
    }
}
