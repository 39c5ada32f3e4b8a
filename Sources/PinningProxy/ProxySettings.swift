public import CoreMetrics
public import NIOCore
public import Pinning
public import PinningNIO

/// How a ``PinningProxy`` runs: its policy, where it listens, its tunnels and its limits.
public struct ProxySettings: Sendable {
    /// One `--tunnel LOCALHOST:LOCALPORT=HOST:PORT`: a plain TCP listener forwarded over pinned TLS.
    public struct Tunnel: Sendable, Hashable {
        /// Where the tunnel listens (loopback unless remote listening is allowed).
        public var local: SocketAddress
        /// The upstream host: the name the configuration entry is found for, sent as SNI and checked.
        public var host: String
        /// The upstream port.
        public var port: Int

        /// A tunnel from `local` to `host`:`port`.
        public init(local: SocketAddress, host: String, port: Int) {
            self.local = local
            self.host = host
            self.port = port
        }
    }

    /// Where an upstream `host:port` is connected instead of resolving it (as curl's `--resolve`); keys are
    /// lower-cased host names.
    public struct Resolve: Sendable {
        var addresses: [String: SocketAddress] = [:]

        /// No overrides: every host is resolved.
        public init() {}

        /// Connects `host`:`port` to `address`.
        public mutating func add(host: String, port: Int, address: SocketAddress) {
            self.addresses["\(host.lowercased()):\(port)"] = address
        }

        /// The address for `host`:`port`, if one was given.
        public func address(host: String, port: Int) -> SocketAddress? {
            self.addresses["\(host.lowercased()):\(port)"]
        }
    }

    /// Where the proxy's metrics go, and what `/metrics` serves.
    public struct Metrics: Sendable {
        /// The swift-metrics backend the proxy records into.
        public var factory: any MetricsFactory
        /// The text `/metrics` answers with (Prometheus's exposition format, say), read at each scrape.
        public var exposition: @Sendable () -> String

        /// Metrics recorded into `factory` and served as `exposition` gives them.
        public init(factory: any MetricsFactory, exposition: @escaping @Sendable () -> String) {
            self.factory = factory
            self.exposition = exposition
        }
    }

    /// The per-host policy: entries, pins, anchors, report-only, reports, unlistedHosts.
    public var configuration: PinningConfiguration
    /// The platform roots and the rest of the judging settings (the entries add their anchors).
    public var trustSettings: TrustSettings
    /// The client identities of entries that have one (`clientIdentity`), by entry key: presented to the hosts of
    /// that entry when they ask for a client certificate, and to no other host.
    public var identities: [String: TLSIdentity]
    /// The forward proxy's address.
    public var listen: SocketAddress
    /// The tunnels.
    public var tunnels: [Tunnel]
    /// Upstream address overrides.
    public var resolve: Resolve
    /// The most client connections open at once (forward proxy and tunnels together); more are refused.
    public var maximumConnections: Int
    /// A client connection with nothing read or written for this long is closed.
    public var idleTimeout: TimeAmount
    /// The bound on connecting to an upstream plus its TLS handshake.
    public var upstreamTimeout: TimeAmount
    /// How long an intercepted client has for its TLS handshake with the local CA's certificate, from the
    /// `200 Connection Established`.
    public var handshakeTimeout: TimeAmount
    /// How long a client has for a request head to arrive whole: the `CONNECT` (or local path) request from the
    /// moment the connection is accepted, the first request inside an intercepted TLS session from the
    /// `200 Connection Established`, a later one from its first byte (an idle kept-alive connection is
    /// ``idleTimeout``'s business). A client that dribbles a head (one byte a second) cannot hold a connection, and
    /// a slot of ``maximumConnections``, for longer.
    public var requestHeadTimeout: TimeAmount
    /// The metrics backend and `/metrics` text; nil records into swift-metrics' global `MetricsSystem.factory` and
    /// `/metrics` answers 404 (the embedding program exports metrics its own way).
    public var metrics: Metrics?
    /// Where to write the session secrets of every upstream handshake (NSS key log format), for decrypting a
    /// capture while debugging; nil writes nothing. The client side of an intercepted connection is the client's
    /// own to log (curl and browsers read `SSLKEYLOGFILE`).
    public var keyLog: TLSKeyLog?
    /// When the configuration follows a pin set (``/PinningNIO/PinSetUpdater``): its status, read for `/status`
    /// (`pinset`) and `/metrics` (`pinning_proxy_pinset_*`). Nil for a configuration read from a file.
    public var pinSetStatus: (@Sendable () -> PinSetStatus)?

    /// Settings with the given policy, addresses and limits (the defaults: 1,024 connections, 300 s idle, 10 s to
    /// reach an upstream, 10 s for a client's TLS handshake, 30 s for a request head).
    public init(
        configuration: PinningConfiguration,
        trustSettings: TrustSettings = .default,
        identities: [String: TLSIdentity] = [:],
        listen: SocketAddress,
        tunnels: [Tunnel] = [],
        resolve: Resolve = Resolve(),
        maximumConnections: Int = 1024,
        idleTimeout: TimeAmount = .seconds(300),
        upstreamTimeout: TimeAmount = .seconds(10),
        metrics: Metrics? = nil,
        keyLog: TLSKeyLog? = nil,
        handshakeTimeout: TimeAmount = .seconds(10),
        requestHeadTimeout: TimeAmount = .seconds(30)
    ) {
        self.configuration = configuration
        self.trustSettings = trustSettings
        self.identities = identities
        self.listen = listen
        self.tunnels = tunnels
        self.resolve = resolve
        self.maximumConnections = maximumConnections
        self.idleTimeout = idleTimeout
        self.upstreamTimeout = upstreamTimeout
        self.metrics = metrics
        self.keyLog = keyLog
        self.handshakeTimeout = handshakeTimeout
        self.requestHeadTimeout = requestHeadTimeout
    }
}
