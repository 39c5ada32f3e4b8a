import Foundation
import Logging
import PinningCollector
import Testing

@Suite("Collector: the deferred log handler (metadata kept, the writing handler made only for a message written)")
struct DeferredLogHandlerTests {
    /// Text written by a `StreamLogHandler`, kept for the test.
    final class Capture: TextOutputStream, @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []
        func write(_ string: String) { self.lock.withLock { self.lines.append(string) } }
        var written: [String] { self.lock.withLock { self.lines } }
    }

    /// How many writing handlers were made.
    final class Count: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func add() { self.lock.withLock { self.count += 1 } }
        var value: Int { self.lock.withLock { self.count } }
    }

    /// The same steps on two loggers, one with each handler: what a request's logger goes through in Hummingbird
    /// (an entry set per request), then a message below the level and messages at and above it.
    static func exercise(_ logger: Logger) {
        var logger = logger
        logger.logLevel = .warning
        logger[metadataKey: "hb.request.id"] = "42"
        logger[metadataKey: "peer"] = .array(["127.0.0.1", .stringConvertible(8090)])
        logger.info("not written")
        logger.warning("written", metadata: ["extra": "1"])
        logger[metadataKey: "peer"] = nil
        logger.error("also written")
    }

    /// A line without its timestamp (its first word), which differs between two handlers run a moment apart.
    static func withoutTime(_ line: String) -> String {
        String(line.drop { $0 != " " })
    }

    @Test("writes what StreamLogHandler writes for the same logger, level and metadata, and nothing below the level")
    func sameOutput() {
        let plain = Capture()
        let deferred = Capture()
        Self.exercise(Logger(label: "pinning-collector") { StreamLogHandler(label: $0, stream: plain, metadataProvider: nil) })
        Self.exercise(
            Logger(label: "pinning-collector") { label in
                DeferredLogHandler(label: label) { StreamLogHandler(label: $0, stream: deferred, metadataProvider: nil) }
            })
        #expect(plain.written.count == 2)
        #expect(deferred.written.map(Self.withoutTime) == plain.written.map(Self.withoutTime))
        #expect(deferred.written.first.map(Self.withoutTime)?.contains("hb.request.id=42") == true)
        #expect(deferred.written.first.map(Self.withoutTime)?.contains("written") == true)
        #expect(deferred.written.last?.contains("peer") == false)
    }

    @Test("makes the writing handler only for a message that is written")
    func lazy() {
        let made = Count()
        var logger = Logger(label: "collector") { label in
            DeferredLogHandler(label: label) {
                made.add()
                return StreamLogHandler(label: $0, stream: Capture(), metadataProvider: nil)
            }
        }
        logger.logLevel = .warning
        for request in 0..<100 {
            logger[metadataKey: "hb.request.id"] = .stringConvertible(request)
            logger.debug("per request")
        }
        #expect(made.value == 0)
        logger.warning("once")
        #expect(made.value == 1)
    }
}
