public import Foundation
public import NIOCore
public import NIOHTTP1

/// A response fetched over plain HTTP by ``PinnedHTTPClient/getPlainHTTP(_:headers:maximumBodySize:resolve:)``:
/// nothing authenticated the server or protected the bytes, so there is no handshake to show.
public struct PlainHTTPResponse: Sendable {
    /// The URL that answered.
    public var url: URL
    /// The HTTP version of the response.
    public var version: HTTPVersion
    /// The status.
    public var status: HTTPResponseStatus
    /// The response headers.
    public var headers: HTTPHeaders
    /// The body.
    public var body: [UInt8]
}

extension PinnedHTTPClient {
    /// GETs a plain `http://` URL: no TLS, so no evaluator is asked and nothing authenticates the server or
    /// protects the bytes in transit. Only for content whose integrity is established another way and where the
    /// server is not under the caller's control: TUF metadata (signed, versioned and expiring) and TUF targets
    /// (hashed in signed metadata) are the case this exists for; The Update Framework is designed to be safe over
    /// an untrusted transport, and repositories (and tuf-conformance's test server) are served over plain HTTP.
    ///
    /// The same timeouts and the same response handling as ``get(_:headers:maximumBodySize:resolve:)``, but one
    /// connection per request (`Connection: close`, never pooled beside TLS connections), and redirects are
    /// returned, not followed.
    ///
    /// - Parameters:
    ///   - url: An `http` URL (an `https` one is refused: use ``get(_:headers:maximumBodySize:resolve:)``).
    ///   - headers: Extra request headers (`Host`, `Connection` and `Content-Length` are the client's).
    ///   - maximumBodySize: The largest body accepted (nil: ``PinnedHTTPClientConfiguration/maximumBodySize``).
    ///   - resolve: An address to use instead of DNS.
    /// - Throws: ``PinningConnectionError`` (connection, timeout and HTTP codes).
    public func getPlainHTTP(
        _ url: URL,
        headers: HTTPHeaders = HTTPHeaders(),
        maximumBodySize: Int? = nil,
        resolve: @escaping Resolve = { _, _ in nil }
    ) async throws(PinningConnectionError) -> PlainHTTPResponse {
        let target = try RequestTarget(url, plainHTTP: true)
        if self.pool.isShutDown {
            throw PinningConnectionError(code: .invalidRequest, host: target.host, message: "the client was shut down")
        }
        let collected = try await HTTP1Exchange.plain(
            target, request: RequestLine(method: .GET, body: nil, maximumBodySize: maximumBodySize), headers: headers, address: resolve(target.host, target.port),
            configuration: self.configuration, group: self.group)
        return PlainHTTPResponse(url: url, version: collected.head.version, status: collected.head.status, headers: collected.head.headers, body: collected.body)
    }

    /// One request for the module's own callers (failure reports, CRL downloads), as it is: redirects are returned,
    /// not followed. An `https` URL goes over this client's pinned connections (``send(_:_:headers:body:resolve:)``);
    /// an `http` URL is sent in the clear, as by ``getPlainHTTP(_:headers:maximumBodySize:resolve:)``, and only
    /// when `allowsPlainHTTP` (the caller decided the content needs no transport protection, or that the clear is
    /// all the destination offers).
    ///
    /// - Returns: The response head and body, and the handshake for `https`.
    /// - Throws: ``PinningConnectionError``; ``PinningConnectionError/Code/invalidRequest`` for any other scheme.
    func perform(
        _ url: URL, request: RequestLine, headers: HTTPHeaders, allowsPlainHTTP: Bool
    ) async throws(PinningConnectionError) -> (response: CollectedResponse, handshake: PinnedHandshake?) {
        if allowsPlainHTTP, url.scheme?.lowercased() == "http" {
            let target = try RequestTarget(url, plainHTTP: true)
            if self.pool.isShutDown {
                throw PinningConnectionError(code: .invalidRequest, host: target.host, message: "the client was shut down")
            }
            let collected = try await HTTP1Exchange.plain(target, request: request, headers: headers, address: nil, configuration: self.configuration, group: self.group)
            return (collected, nil)
        }
        let target = try RequestTarget(url)
        let exchange = try await self.exchange(target, request: request, headers: headers, resolve: { _, _ in nil })
        return (CollectedResponse(head: exchange.head, body: exchange.body, bodyMayBeTruncated: exchange.bodyMayBeTruncated), exchange.handshake)
    }
}
