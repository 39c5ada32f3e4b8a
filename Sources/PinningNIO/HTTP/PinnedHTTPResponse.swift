public import Foundation
public import NIOHTTP1
public import Pinning
public import X509

/// A response of ``PinnedHTTPClient``.
public struct PinnedHTTPResponse: Sendable {
    /// The URL that answered (after redirects).
    public var url: URL
    /// The HTTP version that carried the response (2.0 on an HTTP/2 connection).
    public var version: HTTPVersion
    /// The status.
    public var status: HTTPResponseStatus
    /// The response headers.
    public var headers: HTTPHeaders
    /// The body.
    public var body: [UInt8]
    /// True when the body was delimited only by the server closing the connection (no `Content-Length`, not
    /// chunked) and the server closed it without a TLS close_notify: the body is accepted, as curl, Python
    /// `requests` and Go do, but nothing proves it complete (an attacker on the path can cut such a body short
    /// by closing the TCP connection). A `Content-Length` or chunked body cut short that way is never a response:
    /// it is a ``PinningConnectionError`` with code ``PinningConnectionError/Code/httpFailed``.
    public var bodyMayBeTruncated: Bool
    /// The handshake of the connection that carried this response: the trusted chain and the peer.
    public var handshake: PinnedHandshake
    /// The URLs redirected from, in order (empty without redirects).
    public var redirects: [URL]

    /// The body as UTF-8 (invalid sequences replaced).
    public var bodyText: String { String(decoding: self.body, as: UTF8.self) }
    /// What the evaluator trusted, and on what basis.
    public var trustedChain: TrustedChain { self.handshake.trustedChain }
    /// The chain the server presented, leaf first, as sent.
    public var presentedChain: [Certificate] { self.handshake.trustedChain.presentedChain }
}

struct HTTPExchange: Sendable {
    var head: HTTPResponseHead
    var body: [UInt8]
    var bodyMayBeTruncated: Bool
    var handshake: PinnedHandshake

    /// The response to hand the caller: this exchange for `url`, after `redirects`.
    func response(url: URL, redirects: [URL]) -> PinnedHTTPResponse {
        PinnedHTTPResponse(
            url: url,
            version: self.head.version,
            status: self.head.status,
            headers: self.head.headers,
            body: self.body,
            bodyMayBeTruncated: self.bodyMayBeTruncated,
            handshake: self.handshake,
            redirects: redirects
        )
    }
}
