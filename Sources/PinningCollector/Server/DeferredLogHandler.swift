package import Logging

/// A log handler that keeps its level and metadata itself and makes the handler that writes (swift-log's
/// `StreamLogHandler` on standard error, by default) only for a message that is logged.
///
/// Hummingbird gives every request a logger of its own with an `hb.request.id` entry in its metadata, and
/// `StreamLogHandler` formats its whole metadata into text each time an entry is set (its `metadata` property's
/// `didSet`): 3.6% of the collector's CPU with one report per POST (`perf`, release), for messages that at the
/// collector's default level (`warning`) are never written. Here setting an entry is a dictionary write; a message
/// that is logged is written by the handler made for it, with this handler's level and metadata, so the output is
/// that handler's own.
package struct DeferredLogHandler: LogHandler {
    package var logLevel: Logger.Level = .info
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let makeHandler: @Sendable (String) -> any LogHandler

    /// - Parameter makeHandler: Makes the handler that writes a message, from the logger's label.
    package init(label: String, makeHandler: @escaping @Sendable (String) -> any LogHandler = { StreamLogHandler.standardError(label: $0) }) {
        self.label = label
        self.makeHandler = makeHandler
        self.metadataProvider = LoggingSystem.metadataProvider
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var handler = self.makeHandler(self.label)
        handler.logLevel = self.logLevel
        handler.metadataProvider = self.metadataProvider
        handler.metadata = self.metadata
        handler.log(event: event)
    }
}
