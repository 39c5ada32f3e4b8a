public import Foundation
import NIOHTTP1

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
/// be pinned like any other), and `http` URLs through ``PinnedHTTPClient/getPlainHTTP(_:headers:maximumBodySize:resolve:)``
/// only when ``allowsPlainHTTP`` is set. TUF's signatures, versions, expiries and hashes protect the content either
/// way; plain HTTP lets a network attacker withhold updates (which expiry turns into a visible failure) but not
/// change them. Redirects are followed for `https` (each new host evaluated), never for `http`.
public struct TUFHTTPFetcher: TUFFetching {
    public let client: PinnedHTTPClient
    public let allowsPlainHTTP: Bool

    public init(client: PinnedHTTPClient, allowsPlainHTTP: Bool = false) {
        self.client = client
        self.allowsPlainHTTP = allowsPlainHTTP
    }

    public func fetch(_ url: URL, maximumLength: Int) async throws(TUFFetchError) -> [UInt8] {
        let status: HTTPResponseStatus
        let body: [UInt8]
        do {
            switch url.scheme?.lowercased() {
            case "https":
                let response = try await self.client.get(url, maximumBodySize: maximumLength)
                status = response.status
                body = response.body
            case "http" where self.allowsPlainHTTP:
                let response = try await self.client.getPlainHTTP(url, maximumBodySize: maximumLength)
                status = response.status
                body = response.body
            default:
                throw TUFFetchError(kind: .failed, message: "\(url.absoluteString): only https\(self.allowsPlainHTTP ? " and http" : "") URLs are fetched")
            }
        } catch let error as TUFFetchError {
            throw error
        } catch let error as PinningConnectionError {
            throw TUFFetchError(kind: .failed, message: "\(url.absoluteString): \(error.message)")
        } catch {
            throw TUFFetchError(kind: .failed, message: "\(url.absoluteString): \(error)")
        }
        switch status.code {
        case 200:
            return body
        case 403, 404:
            throw TUFFetchError(kind: .notFound, message: "\(url.absoluteString): HTTP \(status.code)")
        default:
            throw TUFFetchError(kind: .failed, message: "\(url.absoluteString): HTTP \(status.code)")
        }
    }
}
