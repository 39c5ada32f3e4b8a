public import Foundation
import NIOHTTP1
import Pinning

/// Fetches TUF metadata and targets for a ``TUFUpdater``.
public protocol TUFFetching: Sendable {
    /// The body of `url`, at most `maximumLength` bytes.
    ///
    /// - Throws: ``TUFFetchError``: ``TUFFetchError/Kind/notFound`` for HTTP 403 and 404 (which end the walk
    ///   through new root versions), ``TUFFetchError/Kind/failed`` for anything else, a longer body included.
    func fetch(_ url: URL, maximumLength: Int) async throws(TUFFetchError) -> [UInt8]
}

/// Why a fetch failed, in words.
public struct TUFFetchError: Error, Sendable, CustomStringConvertible {
    /// The error's stable code (for logs, metrics and JSON; the words may change): `notFound` (403 or 404) or
    /// `fetchFailed`.
    public var code: String {
        switch self.kind {
        case .notFound: "notFound"
        case .failed: "fetchFailed"
        }
    }

    public enum Kind: Sendable, Equatable {
        /// The server answered 403 or 404: the file does not exist (yet).
        case notFound
        /// Anything else: no connection, a timeout, another status, a body over the cap.
        case failed
    }

    public var kind: Kind
    /// The fetcher's words as it wrote them (a URL, a server's or connection's words): not escaped. ``TUFUpdater``
    /// escapes them (VisibleText) where it quotes them in a ``/Pinning/TUFError``, whose description is display text.
    public var message: String

    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { self.message }
}

/// Fetches over ``PinnedHTTPClient``: `https` URLs through its pinned TLS connections (so a repository's server can
/// be pinned like any other, or judged by private roots given in the client's ``/Pinning/TrustSettings``), and `http`
/// URLs over plain connections only when ``allowsPlainHTTP`` is set. TUF's signatures, versions, expiries and hashes
/// protect the content either way; plain HTTP lets a network attacker withhold updates (which expiry turns into a
/// visible failure) but not change them.
///
/// Redirects (301, 302, 303, 307, 308) are followed, as python-tuf's ngclient (through requests) and `curl -L` do,
/// by the client's one redirect loop: up to the client's ``PinnedHTTPClientConfiguration/maximumRedirects`` (the
/// `pinning` commands use 5, as for `pinning check`: an object store or CDN redirects once or twice; requests allows
/// 30 and curl 50, but every extra hop is only more time an attacker can spend), each new `https` host judged for
/// itself. From `https` a redirect to plain `http` is refused even though the metadata is signed: a repository given
/// as `https` was promised that transport. A redirect read over plain `http` (which anyone on the path can write)
/// stays on the repository's host: `http` at the same port, or `https` on that host; to another host or port it is
/// refused (fail closed) unless ``followsPlainRedirectsToOtherHosts`` is set. TUF's signatures would refuse whatever
/// another host served, but the request itself is the harm: without this rule an on-path attacker could make the
/// fetcher send GETs to any host or port it can reach (a service on its loopback or its network). curl likewise
/// keeps credentials to the first host; python-tuf's fetcher (requests) follows any redirect. The length cap and the time
/// bound apply to the whole chain, not to each step: a chain of redirects costs no more than one direct fetch may
/// (the client's connect plus request timeouts). Every failure names the URL that failed, after redirects.
///
/// A body cut short says so (``TUFFetchError/Kind/failed``, "the response was cut short: …" when its Content-Length
/// or chunked framing was not met); so does an `https` body delimited only by the connection's close when the
/// server closed without a TLS close_notify ("may have been cut short"): it is refused, not handed to TUF, whose
/// refusal of a truncated file (a length, a hash, JSON) would not say why.
public struct TUFHTTPFetcher: TUFFetching {
    public let client: PinnedHTTPClient
    public let allowsPlainHTTP: Bool
    /// Addresses to connect to instead of DNS (as curl's `--resolve`), redirect targets included.
    public let resolve: PinnedHTTPClient.Resolve
    /// Opt-in: follow a redirect read over plain `http` to another host or port too (default false: only the same
    /// host, `http` at the same port or `https`). For a repository whose plain `http` server redirects to a mirror on
    /// another host, on a network the caller trusts not to be tampered with.
    public let followsPlainRedirectsToOtherHosts: Bool

    public init(
        client: PinnedHTTPClient, allowsPlainHTTP: Bool = false, followsPlainRedirectsToOtherHosts: Bool = false,
        resolve: @escaping PinnedHTTPClient.Resolve = { _, _ in nil }
    ) {
        self.client = client
        self.allowsPlainHTTP = allowsPlainHTTP
        self.followsPlainRedirectsToOtherHosts = followsPlainRedirectsToOtherHosts
        self.resolve = resolve
    }

    public func fetch(_ url: URL, maximumLength: Int) async throws(TUFFetchError) -> [UInt8] {
        switch url.scheme?.lowercased() {
        case "https":
            break
        case "http" where self.allowsPlainHTTP:
            break
        default:
            throw TUFFetchError(kind: .failed, message: "\(url.absoluteString): only https\(self.allowsPlainHTTP ? " and http" : "") URLs are fetched")
        }
        let followed: PinnedHTTPClient.Followed
        do {
            followed = try await self.client.follow(
                url, headers: HTTPHeaders(), maximumBodySize: maximumLength, allowsPlainHTTP: self.allowsPlainHTTP, wholeChain: true,
                plainRedirectsLeaveHost: self.followsPlainRedirectsToOtherHosts, resolve: self.resolve)
        } catch {
            let failed = error.url ?? url
            // A refused server in the product's words (`[noPathToAnchor] reason`), not the failure's log form,
            // which starts with its type's name; the host is named once, in front.
            let words = error.trustFailure.map { "\(error.host ?? failed.host ?? ""): \($0.codeAndReason)" } ?? error.message
            throw TUFFetchError(kind: .failed, message: "\(failed.absoluteString): \(words)")
        }
        let shown = followed.url.absoluteString + (followed.redirects.isEmpty ? "" : " (redirected from \(url.absoluteString))")
        switch followed.head.status.code {
        case 200:
            // A body framed only by the close, and a close without TLS's close_notify: an attacker (or a failing
            // server) may have cut it, and nothing says it did not. Refused in words of its own, rather than handed
            // to TUF, whose length, hash or JSON refusal would not say why. (As curl over OpenSSL 3 refuses an
            // "unexpected eof"; over plain http there is no close_notify to miss, and a close-delimited body is
            // all the transport can tell, so TUF's checks decide.)
            if followed.bodyMayBeTruncated {
                throw TUFFetchError(
                    kind: .failed,
                    message:
                        "\(shown): the response may have been cut short: the server closed the connection without a TLS close_notify, and its body had no Content-Length or chunked framing to show it was whole (\(followed.body.count) bytes received)"
                )
            }
            return followed.body
        case 403, 404:
            throw TUFFetchError(kind: .notFound, message: "\(shown): HTTP \(followed.head.status.code)")
        default:
            // A redirect status that was not followed: say why rather than leave "HTTP 302" unexplained.
            var why = ""
            if PinnedHTTPClient.redirectLocation(followed.head) != nil {
                why = " (redirects are not followed: the client's maximumRedirects is 0)"
            } else if [301, 302, 303, 307, 308].contains(followed.head.status.code) {
                why = " without a Location header to follow"
            }
            throw TUFFetchError(kind: .failed, message: "\(shown): HTTP \(followed.head.status.code)\(why)")
        }
    }
}
