public import Foundation
import NIOConcurrencyHelpers
public import NIOCore
public import NIOHTTP1
import NIOHTTP2
public import NIOPosix
public import NIOSSL
import NIOTLS
public import Pinning
import X509

/// A compact HTTPS client (HTTP/1.1 on NIOHTTP1; HTTP/2 on NIOHTTP2 when
/// ``PinnedHTTPClientConfiguration/httpVersions`` is `.automatic` and the server picks it) whose every connection
/// is a ``PinnedTLSClient`` handshake.
///
/// <!-- snippet: given(pins: [Pin])
/// import Foundation
/// import Pinning
/// -->
/// ```swift
/// let client = try PinnedHTTPClient(evaluator: SecurityPolicy(pinningMode: .publicKey, pins: pins))
/// defer { Task { await client.shutdown() } }
/// let response = try await client.get(URL(string: "https://api.example.com/v1/status")!)
/// print(response.status, response.bodyText)
/// ```
///
/// Enforcement is that of ``PinnedTLSClient``: the evaluator (a ``/Pinning/SecurityPolicy`` with a pin anywhere on the
/// path, `allowInvalidCertificates`, a host ``/Pinning/PinningConfiguration``, …) judges every handshake, and a refusal
/// is a ``PinningConnectionError`` with code ``PinningConnectionError/Code/untrusted`` carrying the
/// ``/Pinning/TrustFailure``.
///
/// - Connections are reused per host: idle keep-alive connections are pooled by host, port and the address
///   `resolve` gave (so a connection trusted for one name is never used for another).
/// - Redirects (301, 302, 303, 307, 308 with `Location`) are followed up to
///   ``PinnedHTTPClientConfiguration/maximumRedirects``; a new host means a new handshake, evaluated for that
///   host. A redirect away from `https` is refused.
/// - Timeouts: ``PinnedHTTPClientConfiguration/connectTimeout`` bounds TCP connect plus the TLS handshake,
///   ``PinnedHTTPClientConfiguration/requestTimeout`` bounds each request's response.
/// - HTTP/2 (opt in with `.automatic`): `h2` and `http/1.1` are offered in ALPN; the protocol is set up only after
///   the evaluator trusted the server. An HTTP/2 connection is shared by every request to its host, port and
///   address, each a stream; requests made while the first connection is being set up wait for it rather than
///   each opening one. A server that picks HTTP/1.1 (or no ALPN) is spoken to as without it.
public final class PinnedHTTPClient: Sendable {
    /// Resolves a host and port to the address to connect to instead of DNS (as curl's `--resolve`); nil: DNS.
    public typealias Resolve = @Sendable (_ host: String, _ port: Int) -> SocketAddress?

    /// The TLS client every connection goes through.
    public let tls: PinnedTLSClient
    /// Timeouts, redirects, pool and size limits.
    public let configuration: PinnedHTTPClientConfiguration
    let group: any EventLoopGroup
    let pool: HTTPConnectionPool

    /// A client whose handshakes are judged by `evaluator` with `settings` applied to each presented chain
    /// (``/Pinning/TrustSettings``).
    ///
    /// - Parameters:
    ///   - evaluator: Decides trust for each handshake (for the host of each URL, redirects included).
    ///   - settings: How each handshake's chain is judged; default the platform roots and server authentication.
    ///   - identity: The client identity for servers that request one (mutual TLS).
    ///   - tlsConfiguration: A base TLS configuration; see ``PinnedTLSClient/init(evaluator:settings:identity:configuration:keyLog:)``.
    ///   - configuration: Timeouts, redirects and limits.
    ///   - group: The event loops; default NIO's shared singleton.
    /// - Throws: when NIOSSL cannot build the TLS context.
    public convenience init(
        evaluator: any ServerTrustEvaluating,
        settings: TrustSettings = .default,
        identity: TLSIdentity? = nil,
        tlsConfiguration: TLSConfiguration? = nil,
        configuration: PinnedHTTPClientConfiguration = PinnedHTTPClientConfiguration(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        try self.init(
            tls: { base in
                try PinnedTLSClient(evaluator: evaluator, settings: settings, identity: identity, configuration: base, keyLog: configuration.keyLog)
            }, identity: identity, tlsConfiguration: tlsConfiguration, configuration: configuration, group: group)
    }

    /// A client over the ``PinnedTLSClient`` `tls` makes from the base TLS configuration (ALPN added for `.automatic`).
    init(
        tls: (TLSConfiguration?) throws -> PinnedTLSClient,
        identity: TLSIdentity?,
        tlsConfiguration: TLSConfiguration?,
        configuration: PinnedHTTPClientConfiguration,
        group: any EventLoopGroup
    ) throws {
        var base = tlsConfiguration
        if configuration.httpVersions == .automatic {
            var offering = tlsConfiguration ?? .makePinnedClientConfiguration(identity: identity)
            // A caller's own ALPN list is kept; otherwise h2 first, as curl offers.
            if offering.applicationProtocols.isEmpty { offering.applicationProtocols = Self.alpnProtocols }
            base = offering
        }
        self.tls = try tls(base)
        self.configuration = configuration
        self.group = group
        self.pool = HTTPConnectionPool(maximumIdlePerKey: configuration.maximumIdleConnectionsPerHost)
    }

    /// A client whose every new connection is judged by the configuration `source` holds when its handshake
    /// happens (a ``PinSetUpdater`` following a signed pin set).
    ///
    /// A new configuration applies to the next connection; requests in flight finish on the connection they
    /// have. A pooled connection trusted under an older configuration is not reused: an idle HTTP/1.1 connection
    /// is closed when next taken, a shared HTTP/2 connection stops taking new streams and closes once its open
    /// ones finish. So a pin the new configuration withdrew stops being trusted for new requests at once.
    ///
    /// - Parameters: as ``init(evaluator:settings:identity:tlsConfiguration:configuration:group:)``.
    public convenience init(
        configurationSource source: any PinningConfigurationSource,
        settings: TrustSettings = .default,
        identity: TLSIdentity? = nil,
        tlsConfiguration: TLSConfiguration? = nil,
        configuration: PinnedHTTPClientConfiguration = PinnedHTTPClientConfiguration(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        try self.init(
            tls: { base in
                try PinnedTLSClient(configurationSource: source, settings: settings, identity: identity, configuration: base, keyLog: configuration.keyLog)
            }, identity: identity, tlsConfiguration: tlsConfiguration, configuration: configuration, group: group)
    }

    /// A client judged with the settings of a ``/Pinning/ServerTrust`` template (its certificates are ignored).
    ///
    /// - Throws: ``FixedValidationTimeError`` when the template fixes ``/Pinning/ServerTrust/validationTime``; otherwise
    ///   as ``init(evaluator:settings:identity:tlsConfiguration:configuration:group:)``.
    @available(*, deprecated, message: "pass settings: TrustSettings; a ServerTrust template can freeze the client's clock")
    public convenience init(
        evaluator: any ServerTrustEvaluating,
        trust: ServerTrust,
        identity: TLSIdentity? = nil,
        tlsConfiguration: TLSConfiguration? = nil,
        configuration: PinnedHTTPClientConfiguration = PinnedHTTPClientConfiguration(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) throws {
        try self.init(
            evaluator: evaluator, settings: try TrustSettings.ofTemplate(trust, for: "PinnedHTTPClient(trust:)"), identity: identity,
            tlsConfiguration: tlsConfiguration, configuration: configuration, group: group)
    }

    /// How many TCP connections (with a trusted handshake) this client has opened.
    public var openedConnections: Int { self.pool.opened }

    /// GETs `url`, following redirects.
    ///
    /// - Parameters:
    ///   - url: An `https` URL.
    ///   - headers: Extra request headers (`Host`, `Connection` and `Content-Length` are the client's).
    ///     `Authorization`, `Proxy-Authorization` and `Cookie` are not sent after a redirect to another host or port.
    ///   - maximumBodySize: The largest body accepted for this request (nil:
    ///     ``PinnedHTTPClientConfiguration/maximumBodySize``); a longer one fails with
    ///     ``PinningConnectionError/Code/httpFailed`` as soon as it passes the cap.
    ///   - resolve: Addresses to use instead of DNS (also applied to redirect targets).
    /// - Returns: The final response, with the handshake of the connection that carried it.
    /// - Throws: ``PinningConnectionError``: ``PinningConnectionError/Code/untrusted`` with the ``/Pinning/TrustFailure``
    ///   when a server (the first or a redirect target) is refused; connection, timeout, HTTP and redirect codes
    ///   otherwise.
    public func get(
        _ url: URL,
        headers: HTTPHeaders = HTTPHeaders(),
        maximumBodySize: Int? = nil,
        resolve: @escaping Resolve = { _, _ in nil }
    ) async throws(PinningConnectionError) -> PinnedHTTPResponse {
        let followed = try await self.follow(url, headers: headers, maximumBodySize: maximumBodySize, allowsPlainHTTP: false, wholeChain: false, resolve: resolve)
        guard let handshake = followed.handshake else {
            // Not reached: without allowsPlainHTTP every URL followed is https, carried by a pinned connection.
            var failure = PinningConnectionError(code: .invalidRequest, host: nil, message: "\(followed.url.absoluteString): only https URLs are supported here")
            failure.url = followed.url
            throw failure
        }
        return PinnedHTTPResponse(
            url: followed.url, version: followed.head.version, status: followed.head.status, headers: followed.head.headers, body: followed.body,
            bodyMayBeTruncated: followed.bodyMayBeTruncated, handshake: handshake, redirects: followed.redirects)
    }

    /// The last response of ``follow(_:headers:maximumBodySize:allowsPlainHTTP:wholeChain:resolve:)``: the URL that
    /// answered, those redirected from, and the handshake of its connection (nil for a plain `http` URL).
    struct Followed: Sendable {
        var url: URL
        var redirects: [URL]
        var head: HTTPResponseHead
        var body: [UInt8]
        var bodyMayBeTruncated: Bool
        var handshake: PinnedHandshake?
    }

    /// The module's one redirect loop: GETs `url`, following 301, 302, 303, 307 and 308 with a `Location` up to
    /// ``PinnedHTTPClientConfiguration/maximumRedirects`` (0: the 3xx is the response). `https` URLs go over pinned
    /// connections, each new host judged for itself; `http` URLs (only when `allowsPlainHTTP`, for content whose
    /// integrity is established another way: TUF) go over plain connections, as
    /// ``getPlainHTTP(_:headers:maximumBodySize:resolve:)``. A redirect from `https` to `http` is always refused:
    /// a URL given as `https` promised a protected transport, and that promise is kept to the end of the chain.
    ///
    /// With `wholeChain`, the body cap and the time bound the whole chain, not each step: the bodies of every
    /// response read (redirects included) together stay within the cap, and the chain ends within one request's
    /// time (``PinnedHTTPClientConfiguration/connectTimeout`` plus ``PinnedHTTPClientConfiguration/requestTimeout``),
    /// so a chain of redirects costs no more than one direct fetch may. Without it each step gets the full cap
    /// and timeouts (what ``get(_:headers:maximumBodySize:resolve:)`` has always done).
    ///
    /// A redirect read from a plain `http` response, which anyone on the path can write, is followed only on the same
    /// host: to `http` at the same port, or to `https` (whose server must prove that name before a byte of the
    /// request is sent); anywhere else is refused, unless `plainRedirectsLeaveHost` (the caller's opt-in). Otherwise an
    /// on-path attacker could make this client send GETs to any host or port it can reach (a service on its
    /// loopback or its network). A redirect read over `https` was sent by an authenticated server and goes to any
    /// `https` URL.
    ///
    /// A failure names the URL it was requesting (``PinningConnectionError/url``): after a redirect, not the one
    /// given (`pinning check` says which host was judged, and for which URL; the TUF fetcher names it).
    func follow(
        _ url: URL, headers: HTTPHeaders, maximumBodySize: Int?, allowsPlainHTTP: Bool, wholeChain: Bool, plainRedirectsLeaveHost: Bool = false,
        resolve: @escaping Resolve
    ) async throws(PinningConnectionError) -> Followed {
        var current = url
        var visited: [URL] = []
        var headers = headers
        let origin = try RequestTarget(url, plainHTTP: allowsPlainHTTP && Self.isPlain(url))
        var budget = maximumBodySize ?? self.configuration.maximumBodySize
        let allowed = self.configuration.connectTimeout + self.configuration.requestTimeout
        let deadline: NIODeadline? = wholeChain ? .now() + allowed : nil
        do throws(PinningConnectionError) {
            while true {
                let plain = allowsPlainHTTP && Self.isPlain(current)
                let target = try RequestTarget(current, plainHTTP: plain)
                if target.host.lowercased() != origin.host.lowercased() || target.port != origin.port {
                    // As curl and browsers do: credentials meant for one origin are not sent to another.
                    for name in Self.originBoundHeaders { headers.remove(name: name) }
                }
                if let deadline, deadline <= .now() {
                    let followed = "\(visited.count) redirect\(visited.count == 1 ? "" : "s") followed"
                    throw PinningConnectionError(code: .timedOut, host: target.host, message: "no complete response within \(PinnedTLSClient.words(allowed)) (\(followed))")
                }
                let request = RequestLine(method: .GET, body: nil, maximumBodySize: wholeChain ? budget : maximumBodySize, deadline: deadline)
                let hop: Followed
                if plain {
                    if self.pool.isShutDown {
                        throw PinningConnectionError(code: .invalidRequest, host: target.host, message: "the client was shut down")
                    }
                    let collected = try await HTTP1Exchange.plain(
                        target, request: request, headers: headers, address: resolve(target.host, target.port), configuration: self.configuration, group: self.group)
                    hop = Followed(
                        url: current, redirects: visited, head: collected.head, body: collected.body, bodyMayBeTruncated: collected.bodyMayBeTruncated, handshake: nil)
                } else {
                    let exchange = try await self.exchange(target, request: request, headers: headers, resolve: resolve)
                    hop = Followed(
                        url: current, redirects: visited, head: exchange.head, body: exchange.body, bodyMayBeTruncated: exchange.bodyMayBeTruncated,
                        handshake: exchange.handshake)
                }
                budget -= hop.body.count
                // maximumRedirects 0: redirects are the caller's business; the 3xx is the response.
                guard let location = Self.redirectLocation(hop.head), self.configuration.maximumRedirects > 0 else {
                    return hop
                }
                guard let next = URL(string: location, relativeTo: current)?.absoluteURL else {
                    throw PinningConnectionError(code: .httpFailed, host: target.host, message: "redirect to an unparseable Location \"\(location)\"")
                }
                var nextHost = next.host?.lowercased() ?? ""
                if nextHost.hasPrefix("[") && nextHost.hasSuffix("]") { nextHost = String(nextHost.dropFirst().dropLast()) }
                let sameHost = !nextHost.isEmpty && nextHost == target.host.lowercased()
                switch next.scheme?.lowercased() {
                case "https" where plain && !sameHost && !plainRedirectsLeaveHost, "http" where plain && !plainRedirectsLeaveHost && (!sameHost || (next.port ?? 80) != target.port):
                    throw PinningConnectionError(
                        code: .tooManyRedirects, host: target.host,
                        message:
                            "refusing a redirect from plain http to another host or port (\(next.absoluteString)): a redirect read over plain http is followed only on \(target.host) port \(target.port), or to https on \(target.host)"
                    )
                case "https":
                    break
                case "http" where plain:
                    break
                case "http" where allowsPlainHTTP:
                    throw PinningConnectionError(
                        code: .tooManyRedirects, host: target.host,
                        message: "refusing a redirect from https to plain http (\(next.absoluteString)): a URL given as https is followed over https only")
                default:
                    let words = plain ? "refusing a redirect to \(next.absoluteString): only http and https URLs are followed" : "refusing a redirect away from https to \(next.absoluteString)"
                    throw PinningConnectionError(code: .tooManyRedirects, host: target.host, message: words)
                }
                visited.append(current)
                guard visited.count <= self.configuration.maximumRedirects else {
                    throw PinningConnectionError(
                        code: .tooManyRedirects, host: target.host, message: "more than \(self.configuration.maximumRedirects) redirects (last to \(next.absoluteString))")
                }
                current = next
            }
        } catch {
            var failure = error
            failure.url = current
            throw failure
        }
    }

    static func isPlain(_ url: URL) -> Bool { url.scheme?.lowercased() == "http" }

    /// Sends one request with any method and body, as it is: redirects are returned, not followed (as curl without
    /// `-L`; ``get(_:headers:maximumBodySize:resolve:)`` follows them). The connection is the same pinned one ``get(_:headers:maximumBodySize:resolve:)``
    /// uses: the policy judges the server before any byte of the request is sent.
    ///
    /// - Parameters:
    ///   - method: The request method.
    ///   - url: An `https` URL.
    ///   - headers: Request headers (`Host`, `Connection`, `Content-Length` and `Transfer-Encoding` are the client's:
    ///     the body is sent whole, with its length).
    ///   - body: The request body, or nil for none.
    ///   - resolve: Addresses to use instead of DNS.
    /// - Returns: The response, with the handshake of the connection that carried it.
    /// - Throws: ``PinningConnectionError``, as for ``get(_:headers:maximumBodySize:resolve:)``. A pooled connection the server
    ///   closed while idle is replaced by a new one only for idempotent methods (RFC 9110 §9.2.2): a POST is never
    ///   sent twice.
    public func send(
        _ method: HTTPMethod,
        _ url: URL,
        headers: HTTPHeaders = HTTPHeaders(),
        body: [UInt8]? = nil,
        resolve: @escaping Resolve = { _, _ in nil }
    ) async throws(PinningConnectionError) -> PinnedHTTPResponse {
        let target = try RequestTarget(url)
        let exchange = try await self.exchange(target, request: RequestLine(method: method, body: body), headers: headers, resolve: resolve)
        return exchange.response(url: url, redirects: [])
    }

    /// Closes every pooled connection; later requests fail with ``PinningConnectionError/Code/invalidRequest``.
    /// Connections in use close when their request ends.
    public func shutdown() async {
        await withTaskGroup(of: Void.self) { group in
            for connection in self.pool.shutdown() {
                group.addTask { await connection.close() }
            }
        }
    }

    /// The request head for this client (its `User-Agent`); see ``HTTP1Exchange/head(_:request:headers:userAgent:dropping:)``.
    func requestHead(_ target: RequestTarget, request: RequestLine, headers: HTTPHeaders, dropping: [String]) -> HTTPRequestHead {
        HTTP1Exchange.head(target, request: request, headers: headers, userAgent: self.configuration.userAgent, dropping: dropping)
    }

    /// A request's method and body.
    struct RequestLine: Sendable {
        var method: HTTPMethod
        var body: [UInt8]?
        /// This request's cap on the response body (nil: the configuration's).
        var maximumBodySize: Int? = nil
        /// Only the status and headers matter (a failure report): the exchange ends at the response head, the
        /// body is not read, and the connection is closed after it (`Connection: close` is sent).
        var statusOnly = false

        /// When the chain of redirects this request is a step of must be over (``follow(_:headers:maximumBodySize:allowsPlainHTTP:wholeChain:resolve:)``
        /// with `wholeChain`); nil: the configuration's timeouts apply to this request alone.
        var deadline: NIODeadline? = nil

        /// `timeout`, shortened to what is left before ``deadline``.
        func bounded(_ timeout: TimeAmount) -> TimeAmount {
            guard let deadline else { return timeout }
            return max(.nanoseconds(1), min(timeout, deadline - .now()))
        }

        /// Safe to send again when a reused connection turns out closed (RFC 9110 §9.2.2).
        var isIdempotent: Bool {
            switch self.method {
            case .GET, .HEAD, .PUT, .DELETE, .OPTIONS, .TRACE: true
            default: false
            }
        }
    }

    /// What `.automatic` offers in ALPN, most preferred first.
    static let alpnProtocols = ["h2", "http/1.1"]

    /// Request headers dropped when a redirect leaves the original host and port.
    static let originBoundHeaders = ["authorization", "proxy-authorization", "cookie"]

    static func redirectLocation(_ head: HTTPResponseHead) -> String? {
        switch head.status.code {
        case 301, 302, 303, 307, 308:
            return head.headers.first(name: "location")
        default:
            return nil
        }
    }

    /// One request on a pooled or new connection. A reused connection that the server closed while idle is
    /// replaced once (GET is idempotent).
    func exchange(_ target: RequestTarget, request: RequestLine, headers: HTTPHeaders, resolve: Resolve) async throws(PinningConnectionError) -> HTTPExchange {
        let address = resolve(target.host, target.port)
        let key = HTTPConnectionPool.Key(host: target.host.lowercased(), port: target.port, address: address?.description)
        if self.pool.isShutDown {
            throw PinningConnectionError(code: .invalidRequest, host: target.host, message: "the client was shut down")
        }
        if let shared = self.pool.shared(key) {
            if !self.mayReuse(shared) {
                self.pool.retireShared(shared, for: key)
            } else {
                do {
                    return try await self.sendHTTP2(target, request: request, headers: headers, on: shared)
                } catch let error where error.code == .connectionClosed && request.isIdempotent {
                    // The server went away (GOAWAY, close) between requests: a new connection below.
                }
            }
        }
        while let idle = self.pool.take(key) {
            guard self.mayReuse(idle) else {
                // Trusted under an older configuration than the source's current one: not for a new request.
                idle.closeInBackground()
                continue
            }
            do {
                return try await self.send(target, request: request, headers: headers, on: idle, key: key)
            } catch let error where error.code == .connectionClosed && request.isIdempotent {
                // The server closed the idle connection: use a fresh one.
            }
            break
        }
        guard self.configuration.httpVersions == .automatic else {
            let connection = try await self.connect(target, address: address, timeout: request.bounded(self.configuration.connectTimeout))
            return try await self.send(target, request: request, headers: headers, on: connection, key: key)
        }
        // The connection may turn out to speak HTTP/2: requests for the same key wait for it, so they share it.
        let (pending, started) = self.pool.connecting(key) {
            Task { () async throws -> HTTPConnection in try await self.connect(target, address: address, timeout: request.bounded(self.configuration.connectTimeout)) }
        }
        let connection: HTTPConnection
        do {
            connection = try await pending.value
        } catch {
            if started { _ = self.pool.connected(key, nil) }
            throw (error as? PinningConnectionError)
                ?? PinningConnectionError(code: .connectFailed, host: target.host, message: "the connection failed", underlying: error)
        }
        if started, !self.pool.connected(key, connection) {
            connection.closeInBackground()
            throw PinningConnectionError(code: .invalidRequest, host: target.host, message: "the client was shut down")
        }
        if connection.multiplexer != nil {
            return try await self.sendHTTP2(target, request: request, headers: headers, on: connection)
        }
        if started {
            return try await self.send(target, request: request, headers: headers, on: connection, key: key)
        }
        // Another request's HTTP/1.1 connection: it carries one request at a time, and that one is theirs.
        let own = try await self.connect(target, address: address, timeout: request.bounded(self.configuration.connectTimeout))
        return try await self.send(target, request: request, headers: headers, on: own, key: key)
    }

    /// Whether a pooled connection may carry a new request: always with a fixed evaluator; with a configuration
    /// source, only when the connection was trusted under the source's current configuration.
    private func mayReuse(_ connection: HTTPConnection) -> Bool {
        guard let source = self.tls.configurationSource else { return true }
        guard let generation = connection.generation, let current = source.currentConfiguration() else { return false }
        return generation == current.generation
    }

    private func connect(_ target: RequestTarget, address: SocketAddress?, timeout: TimeAmount) async throws(PinningConnectionError) -> HTTPConnection {
        // Read before the handshake: the configuration that judges it is this one or a newer one, never older, so
        // a connection is never taken for newer than it is.
        let generation = self.tls.configurationSource?.currentConfiguration()?.generation
        let maximumBodySize = self.configuration.maximumBodySize
        let events = ConnectionEvents()
        let negotiates = self.configuration.httpVersions == .automatic
        // With ALPN the HTTP handlers are added once the handshake completed, which the pinning handler passes
        // on only for a trusted server; this future says which protocol was set up.
        let protocolChosen = NIOLockedValueBox<EventLoopFuture<NIOHTTP2Handler.StreamMultiplexer?>?>(nil)
        let connection = try await self.tls.connect(
            host: target.host,
            port: target.port,
            address: address,
            group: self.group,
            timeout: timeout,
            configure: { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard negotiates else {
                        try Self.addHTTP1Handlers(to: channel.pipeline.syncOperations, host: target.host, maximumBodySize: maximumBodySize, events: events)
                        return
                    }
                    let chosen = channel.eventLoop.makePromise(of: NIOHTTP2Handler.StreamMultiplexer?.self)
                    protocolChosen.withLockedValue { $0 = chosen.futureResult }
                    let negotiation = ApplicationProtocolNegotiationHandler { result, channel in
                        do {
                            if case .negotiated("h2") = result {
                                let multiplexer = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                                    mode: .client,
                                    connectionConfiguration: .init(),
                                    streamConfiguration: .init(),
                                    // A client accepts no streams the server opens (no server push here).
                                    inboundStreamInitializer: { stream in stream.close() }
                                )
                                try channel.pipeline.syncOperations.addHandler(HTTP2ConnectionFailureRecorder(host: target.host, events: events))
                                chosen.succeed(multiplexer)
                            } else {
                                try Self.addHTTP1Handlers(to: channel.pipeline.syncOperations, host: target.host, maximumBodySize: maximumBodySize, events: events)
                                chosen.succeed(nil)
                            }
                            return channel.eventLoop.makeSucceededVoidFuture()
                        } catch {
                            chosen.fail(error)
                            return channel.eventLoop.makeFailedFuture(error)
                        }
                    }
                    channel.closeFuture.whenComplete { _ in
                        chosen.fail(PinningConnectionError(code: .connectionClosed, host: target.host, message: "the connection closed before an HTTP protocol was set up"))
                    }
                    try channel.pipeline.syncOperations.addHandler(negotiation)
                }
            }
        )
        self.pool.countOpened()
        var http = HTTPConnection(channel: connection.channel, handshake: connection.handshake, events: events)
        http.generation = generation
        if let chosen = protocolChosen.withLockedValue({ $0 }) {
            do {
                http.multiplexer = try await chosen.get()
            } catch {
                connection.channel.close(promise: nil)
                throw (error as? PinningConnectionError)
                    ?? PinningConnectionError(code: .httpFailed, host: target.host, message: "the HTTP protocol could not be set up", underlying: error)
            }
        }
        return http
    }

    static func addHTTP1Handlers(
        to pipeline: ChannelPipeline.SynchronousOperations, host: String, maximumBodySize: Int, events: ConnectionEvents
    ) throws {
        try pipeline.addHTTPClientHandlers()
        try pipeline.addHandler(HTTPResponseCollector(host: host, maximumBodySize: maximumBodySize, events: events))
    }

    /// One request as a stream of a shared HTTP/2 connection. The stream goes through NIOHTTP2's HTTP/1 codec to
    /// the same response collector as HTTP/1.1, so limits, timeouts and errors read the same.
    private func sendHTTP2(_ target: RequestTarget, request: RequestLine, headers: HTTPHeaders, on connection: HTTPConnection) async throws(PinningConnectionError) -> HTTPExchange {
        guard let multiplexer = connection.multiplexer else {
            throw PinningConnectionError(code: .httpFailed, host: target.host, message: "not an HTTP/2 connection")
        }
        // Connection-specific fields are not allowed in HTTP/2 (RFC 9113 §8.2.2).
        let head = self.requestHead(
            target, request: request, headers: headers, dropping: ["connection", "content-length", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"])
        let channel = connection.channel
        let timeout = request.bounded(self.configuration.requestTimeout)
        let host = target.host
        let limit = request.maximumBodySize ?? self.configuration.maximumBodySize
        let events = ConnectionEvents()
        let opened = channel.eventLoop.flatSubmit {
            multiplexer.createStreamChannel { stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: .https))
                    try stream.pipeline.syncOperations.addHandler(HTTPResponseCollector(host: host, maximumBodySize: limit, events: events))
                }
            }
        }
        let collected: CollectedResponse
        do {
            collected = try await opened.flatMapError { error -> EventLoopFuture<any Channel> in
                let code: PinningConnectionError.Code = channel.isActive ? .httpFailed : .connectionClosed
                return channel.eventLoop.makeFailedFuture(PinningConnectionError(code: code, host: host, message: "an HTTP/2 stream could not be opened", underlying: error))
            }.flatMap { stream in
                HTTP1Exchange.run(head, request: request, on: stream, events: events, host: host, timeout: timeout).always { _ in
                    // A status-only request does not read the body: the stream is reset, the connection stays.
                    if request.statusOnly { stream.close(promise: nil) }
                }
            }.flatMapError { error in
                // A refusal the connection kept (HTTP2ConnectionFailureRecorder) is why the stream failed. It is
                // read in a task of its own on the loop: NIOHTTP2 tells the streams of an error before the
                // recorder behind it sees the error, so reading it now could come too early.
                channel.eventLoop.submit { connection.events.failure }.flatMapThrowing { kept in throw kept ?? error }
            }.get()
        } catch {
            var failure =
                (error as? PinningConnectionError)
                ?? PinningConnectionError(code: .httpFailed, host: host, message: "the request failed", underlying: error)
            failure.handshake = connection.handshake
            throw failure
        }
        return HTTPExchange(head: collected.head, body: collected.body, bodyMayBeTruncated: collected.bodyMayBeTruncated, handshake: connection.handshake)
    }

    private func send(
        _ target: RequestTarget, request: RequestLine, headers: HTTPHeaders, on connection: HTTPConnection, key: HTTPConnectionPool.Key
    ) async throws(PinningConnectionError) -> HTTPExchange {
        var head = self.requestHead(target, request: request, headers: headers, dropping: ["connection", "content-length", "transfer-encoding"])
        if request.statusOnly {
            // The body will not be read, so the connection cannot carry another request: say so.
            head.headers.replaceOrAdd(name: "connection", value: "close")
        }
        let collected: CollectedResponse
        do {
            collected = try await HTTP1Exchange.run(
                head, request: request, on: connection.channel, events: connection.events, host: target.host, timeout: request.bounded(self.configuration.requestTimeout)
            ).get()
        } catch {
            connection.closeInBackground()
            var failure =
                (error as? PinningConnectionError)
                ?? PinningConnectionError(code: .httpFailed, host: target.host, message: "the request failed", underlying: error)
            failure.handshake = connection.handshake
            throw failure
        }
        if collected.head.isKeepAlive && connection.channel.isActive && !request.statusOnly {
            if !self.pool.put(connection, for: key) {
                connection.closeInBackground()
            }
        } else {
            connection.closeInBackground()
        }
        return HTTPExchange(head: collected.head, body: collected.body, bodyMayBeTruncated: collected.bodyMayBeTruncated, handshake: connection.handshake)
    }
}
