public import Hummingbird
public import NIOCore
public import PinningNIO

/// A request context that carries the client a mutual-TLS handshake authenticated.
///
/// <!-- snippet:
/// import Hummingbird
/// import PinningNIO
/// -->
/// ```swift
/// let router = Router(context: MutualTLSRequestContext.self)
/// router.get("/") { _, context in
///     guard let client = context.client else { throw HTTPError(.unauthorized) }
///     return "hello \(client.subject) \(client.pin)"
/// }
/// ```
///
/// ``client`` is the ``/PinningNIO/AuthenticatedPeer`` our evaluator produced: its `certificateChain` is the
/// validated path (client leaf … the client CA that anchored it), not merely what the client sent, together with
/// the subject, SANs, SHA-256 fingerprint and SPKI pin of the leaf. It is nil only when the server was not built
/// with ``HummingbirdCore/HTTPServerBuilder/mutualTLS(server:configuration:)`` (with it, a client without a valid
/// certificate never gets to send a request).
public struct MutualTLSRequestContext: RequestContext {
    /// Hummingbird's core request context storage.
    public var coreContext: CoreRequestContextStorage
    /// The connection's channel.
    public let channel: any Channel
    /// The authenticated client: validated chain and identity.
    public let client: AuthenticatedPeer?

    /// A context for one request, carrying the connection's validated client.
    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
        self.client = source.authenticatedClient
    }
}

extension ApplicationRequestContextSource {
    /// The client the connection's mutual-TLS handshake authenticated (servers built with
    /// ``HummingbirdCore/HTTPServerBuilder/mutualTLS(server:configuration:)``), for your own request contexts.
    public var authenticatedClient: AuthenticatedPeer? {
        AuthenticatedClients.client(of: self.channel)
    }
}
