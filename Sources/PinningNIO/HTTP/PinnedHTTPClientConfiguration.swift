public import NIOCore

/// Settings of a ``PinnedHTTPClient``.
public struct PinnedHTTPClientConfiguration: Sendable, Hashable {
    /// Bound on the TCP connect plus the TLS handshake. Default 10 s.
    public var connectTimeout: TimeAmount
    /// Bound on each request, from sending it to the end of the response. Default 30 s.
    public var requestTimeout: TimeAmount
    /// How many redirects one ``PinnedHTTPClient/get(_:headers:maximumBodySize:resolve:)`` follows. Default 5; 0 returns the 3xx.
    public var maximumRedirects: Int
    /// Idle keep-alive connections kept per host, port and address. Default 8.
    public var maximumIdleConnectionsPerHost: Int
    /// Largest response body accepted. Default 16 MiB.
    public var maximumBodySize: Int
    /// The `User-Agent` header.
    public var userAgent: String
    /// Where to write each handshake's session secrets (NSS key log format), for decrypting a capture while
    /// debugging. Default nil: nothing is written.
    public var keyLog: TLSKeyLog?
    /// Which HTTP versions the client offers.
    public var httpVersions: HTTPVersions

    /// Which HTTP versions a ``PinnedHTTPClient`` offers.
    public enum HTTPVersions: Sendable, Hashable {
        /// HTTP/1.1 only, no ALPN (the default, as this client has always spoken).
        case http1Only
        /// `h2` and `http/1.1` in ALPN: HTTP/2 when the server picks it (all requests to that host, port and
        /// address then share one connection, as streams), HTTP/1.1 otherwise. As curl and AsyncHTTPClient do.
        case automatic
    }

    /// The defaults, or the given values.
    public init(
        connectTimeout: TimeAmount = .seconds(10),
        requestTimeout: TimeAmount = .seconds(30),
        maximumRedirects: Int = 5,
        maximumIdleConnectionsPerHost: Int = 8,
        maximumBodySize: Int = 16 * 1024 * 1024,
        userAgent: String = "swift-pinning",
        keyLog: TLSKeyLog? = nil,
        httpVersions: HTTPVersions = .http1Only
    ) {
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.maximumRedirects = maximumRedirects
        self.maximumIdleConnectionsPerHost = maximumIdleConnectionsPerHost
        self.maximumBodySize = maximumBodySize
        self.userAgent = userAgent
        self.keyLog = keyLog
        self.httpVersions = httpVersions
    }
}
