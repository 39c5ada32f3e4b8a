public import Hummingbird
import Logging
public import NIOCore

/// Hummingbird's request context plus the peer's address (the source of a report, hashed before it is stored).
public struct CollectorContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The connection's peer, nil when NIO no longer knows it.
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// Bodies are read by the routes themselves, up to `--max-report-bytes` for reports and a few KiB for the login
    /// form; this is only Hummingbird's own default, for nothing that reads through it.
    public var maxUploadSize: Int { 64 * 1024 }
}
