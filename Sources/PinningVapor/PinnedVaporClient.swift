import Foundation
import NIOConcurrencyHelpers
public import NIOCore
import NIOHTTP1
public import PinningNIO
public import Vapor

/// A Vapor `Client` on ``/PinningNIO/PinnedHTTPClient``: every request's server judged by the product's policy
/// (full chain, names, pins above the leaf, per-host configuration entries, revocation), which Vapor's default
/// client (AsyncHTTPClient with its TLS configuration) cannot do. A refusal fails the request with
/// ``/PinningNIO/PinningConnectionError`` carrying the ``/Pinning/TrustFailure``.
///
/// <!-- snippet: given(configuration: PinningConfiguration, settings: TrustSettings, app: Application, req: Request)
/// import Pinning
/// import PinningNIO
/// import Vapor
/// -->
/// ```swift
/// let pinned = try PinnedHTTPClient(evaluator: configuration, settings: settings)
/// app.clients.use(.pinned(pinned))
/// let response = try await req.client.get("https://api.example.com/v1/status")
/// ```
///
/// What it does differently from Vapor's default client, by choice:
/// - `https` only (a pinned client has nothing to pin over plain HTTP); other schemes fail the request.
/// - Redirects are returned, not followed (as curl without `-L`): the caller sees where it is sent.
/// - The body is sent whole with its `Content-Length`; `ClientRequest.timeout` bounds the whole request (the
///   client's own `requestTimeout` still applies to each exchange).
public struct PinnedVaporClient: Client {
    /// The pinned client requests go through (shared; its owner shuts it down).
    public let client: PinnedHTTPClient
    public let eventLoop: any EventLoop
    /// Addresses to use instead of DNS (as curl's `--resolve` and AsyncHTTPClient's `dnsOverride`); the policy
    /// still checks the URL's host.
    public let resolve: PinnedHTTPClient.Resolve

    /// A Vapor client on `client`, completing its futures on `eventLoop`.
    public init(client: PinnedHTTPClient, eventLoop: any EventLoop, resolve: @escaping PinnedHTTPClient.Resolve = { _, _ in nil }) {
        self.client = client
        self.eventLoop = eventLoop
        self.resolve = resolve
    }

    public func delegating(to eventLoop: any EventLoop) -> any Client {
        PinnedVaporClient(client: self.client, eventLoop: eventLoop, resolve: self.resolve)
    }

    public func send(_ request: ClientRequest) -> EventLoopFuture<ClientResponse> {
        guard let url = URL(string: request.url.string), url.scheme?.lowercased() == "https" else {
            return self.eventLoop.makeFailedFuture(
                PinningConnectionError(code: .invalidRequest, host: request.url.host, message: "only https URLs can be pinned: \(request.url.string)"))
        }
        let client = self.client
        let resolve = self.resolve
        let method = NIOHTTP1.HTTPMethod(rawValue: request.method.rawValue)
        let body = request.body.map { Array($0.readableBytesView) }
        let promise = self.eventLoop.makePromise(of: ClientResponse.self)
        // The timer and the request race; whichever ends first completes the promise, once.
        let completed = NIOLockedValueBox(false)
        @Sendable func complete(_ result: Result<ClientResponse, any Error>) {
            let first = completed.withLockedValue { done in
                defer { done = true }
                return !done
            }
            if first { promise.completeWith(result) }
        }
        if let timeout = request.timeout {
            let timer = self.eventLoop.scheduleTask(in: timeout) {
                complete(.failure(PinningConnectionError(code: .timedOut, host: url.host, message: "no response within \(timeout)")))
            }
            promise.futureResult.whenComplete { _ in timer.cancel() }
        }
        let allocator = self.byteBufferAllocator
        Task {
            do {
                let response = try await client.send(method, url, headers: request.headers, body: body, resolve: resolve)
                complete(
                    .success(
                        ClientResponse(
                            status: response.status,
                            headers: response.headers,
                            body: allocator.buffer(bytes: response.body),
                            byteBufferAllocator: allocator
                        )))
            } catch {
                complete(.failure(error))
            }
        }
        return promise.futureResult
    }
}

extension Application.Clients.Provider {
    /// `app.client` and `req.client` on `client` (see ``PinnedVaporClient``). The application does not own
    /// `client`: shut it down after the application.
    ///
    /// - Parameters:
    ///   - client: The pinned client.
    ///   - resolve: Addresses to use instead of DNS; the policy still checks each URL's host.
    public static func pinned(_ client: PinnedHTTPClient, resolve: @escaping PinnedHTTPClient.Resolve = { _, _ in nil }) -> Self {
        .init { application in
            application.clients.use { application in
                PinnedVaporClient(client: client, eventLoop: application.eventLoopGroup.any(), resolve: resolve)
            }
        }
    }
}
