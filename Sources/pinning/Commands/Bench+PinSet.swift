import ArgumentParser
import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Pinning
import PinningNIO
import PinningPKI

extension PinningCommand.Bench {
    /// `pinning bench pinset [--hosts N] [--applies N] [--refreshes N] [--json]` (issue 29): what following a pin set
    /// costs. A repository is written by ``TUFRepositoryWriter`` (as `pinning pinset publish` writes one) with a
    /// configuration of `--hosts` hosts, served as static files over plain HTTP on 127.0.0.1 by an in-process server
    /// that counts the requests it answers, and followed by ``PinSetUpdater``.
    struct PinSet: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pinset",
            abstract: "Measure following a pin set: requests of a refresh with nothing new, the time to apply a large pin set, memory over many refreshes.",
            discussion: """
                A TUF repository is written in a temporary directory (ed25519 keys made for the run) holding a \
                configuration of --hosts hosts (two pins each) and one anchored wildcard entry with its anchor file, \
                and served over plain HTTP on 127.0.0.1 by an in-process server that counts requests (TLS to the \
                repository is not what is measured: TUF's signatures protect the files either way).

                apply: --applies times, a new PinSetUpdater with an empty state directory refreshes once: root, \
                timestamp, snapshot and targets fetched and verified, the configuration and its anchor downloaded \
                and checked against their hashes, parsed, stored, and made the configuration new connections are \
                judged by. The wall time of each refresh is reported (median, min, max), and the parse of the \
                configuration alone beside it.

                unchanged: one more refresh with nothing new published; the requests the server answered for it, in \
                order. Expect two: the next root version (TUF's root update, specification §5.3.3, answered 404 when \
                no root was rotated; it is how a client learns that an online key was revoked, so it is never \
                skipped) and timestamp.json; the snapshot, targets and pin set are not fetched again. Beside them, how many \
                new connections the server accepted for them.

                lookup: 100,000 host look-ups in the applied pin set (the entry a connection is judged by).

                memory: --refreshes refreshes with nothing new; the resident set size (VmRSS) and the bytes malloc has \
                in use (glibc's mallinfo2, all arenas) before the first and after the last, and ten samples between.

                JSON keys: hosts, configurationBytes, apply {milliseconds: [..], medianMilliseconds, minMilliseconds, \
                maxMilliseconds, parseMedianMilliseconds}, unchanged {requests: [PATH..], count, connections}, lookup {lookups, microsecondsPerLookup}, memory {refreshes, \
                seconds, rssStartBytes, rssEndBytes, rssSamplesBytes: [..], requests, heapInUseStartBytes, heapInUseEndBytes, \
                heapInUseSamplesBytes: [..]}, load {oneMinute, cores}.
                """
        )

        // 10,000 hosts (issue 29's figure) with two pins each are 1.43 MB of configuration; a pin set may be up to
        // 16 MiB (PinningConfiguration.maximumPinSetSize), about 117,000 such hosts.
        @Option(
            name: .long, parsing: .unconditional,
            help: ArgumentHelp(
                "Hosts in the pin set, 1 to 100,000 (default 10,000, 1.43 MB: each host takes about 143 bytes with two pins; a pin set is at most 16 MiB).",
                valueName: "n"),
            transform: NumericOption.integer(1...100_000))
        var hosts: Int = 10_000

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Fresh updaters that apply the pin set, 1 to 100 (default 5).", valueName: "n"), transform: NumericOption.integer(1...100))
        var applies: Int = 5

        @Option(
            name: .long, parsing: .unconditional, help: ArgumentHelp("Refreshes with nothing new for the memory figures, 0 to 1,000,000 (default 10,000).", valueName: "n"),
            transform: NumericOption.integer(0...1_000_000))
        var refreshes: Int = 10_000

        @Flag(name: .long, help: "Print the result as JSON.")
        var json = false

        // A control for the memory figures: the benchmark's server kept every requested path until this change, and
        // that list alone grew with the refreshes.
        @Flag(name: .long, help: "Keep every path requested during the memory refreshes in the benchmark's server (a list that grows by two paths per refresh; a control for the memory figures).")
        var keepRequestPaths = false

        struct Apply: Encodable {
            var milliseconds: [Double]
            var medianMilliseconds: Double
            var minMilliseconds: Double
            var maxMilliseconds: Double
            var parseMedianMilliseconds: Double
        }

        struct Unchanged: Encodable {
            var requests: [String]
            var count: Int
            /// TCP connections the server accepted for those requests.
            var connections: Int
        }

        struct Lookup: Encodable {
            var lookups: Int
            var microsecondsPerLookup: Double
        }

        struct Memory: Encodable {
            var refreshes: Int
            var seconds: Double
            var rssStartBytes: Int
            var rssEndBytes: Int
            var rssSamplesBytes: [Int]
            /// Requests the server answered during those refreshes (two per refresh with nothing new).
            var requests: Int
            /// `malloc`'s bytes in use (``ProcessMemory/heapInUseBytes()``) after the first refresh, after the last,
            /// and at the ten samples.
            var heapInUseStartBytes: Int
            var heapInUseEndBytes: Int
            var heapInUseSamplesBytes: [Int]
        }

        struct Load: Encodable {
            var oneMinute: Double
            var cores: Int
        }

        struct Report: Encodable {
            var hosts: Int
            var configurationBytes: Int
            var apply: Apply
            var unchanged: Unchanged
            var lookup: Lookup
            var memory: Memory
            var load: Load
        }

        func run() async throws {
            // Before anything is made: an interrupted bench removes what it made and stops its children.
            await BenchCleanup.installHandler()
            let directory = try BenchCleanup.temporaryDirectory(prefix: "pinning-bench-pinset")
            defer { BenchCleanup.remove(directory) }
            let work = directory.path
            let repository = work + "/repo"
            let (configuration, anchor) = try Self.pinSet(hosts: self.hosts)
            guard configuration.count <= PinningConfiguration.maximumPinSetSize else {
                throw InputError("--hosts \(self.hosts): the configuration would be \(configuration.count) bytes, over the \(PinningConfiguration.maximumPinSetSize) a pin set may be")
            }
            let keys = try (0..<4).map { _ in try TUFSigningKey.generate(.ed25519) }
            let writer = try TUFRepositoryWriter.initialize(directory: repository, rootKeys: [keys[0]], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3])
            try writer.publishPinSet(configuration, files: ["fleet-root.pem": anchor], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3])
            let bootstrap = Array(try Data(contentsOf: URL(fileURLWithPath: repository + "/metadata/1.root.json")))

            let server = try await CountingFileServer(directory: repository)
            defer { server.stop() }
            let client = try PinnedHTTPClient(evaluator: SecurityPolicy.defaultEvaluation)
            let fetcher = TUFHTTPFetcher(client: client, allowsPlainHTTP: true)
            let metadataURL = URL(string: "http://127.0.0.1:\(server.port)/metadata/")!

            // Apply: a fresh updater each time, from the bootstrap root to the pin set enforced.
            var times: [Double] = []
            var updater: PinSetUpdater?
            for index in 0..<self.applies {
                let fresh = try PinSetUpdater(bootstrapRoot: bootstrap, directory: work + "/state-\(index)", metadataURL: metadataURL, fetcher: fetcher)
                let start = BenchClock.now
                let outcome = await fresh.refresh()
                times.append(BenchClock.milliseconds(since: start))
                guard case .updated = outcome, fresh.currentConfiguration()?.configuration.entries.count == self.hosts + 1 else {
                    throw InputError("bench pinset: the pin set was not applied: \(Self.words(outcome))")
                }
                updater = fresh
            }
            try directory.write("fleet-root.pem", bytes: anchor)
            var parses: [Double] = []
            for _ in 0..<self.applies {
                let start = BenchClock.now
                _ = try PinningConfiguration(data: Data(configuration), baseDirectory: work, maximumSize: PinningConfiguration.maximumPinSetSize)
                parses.append(BenchClock.milliseconds(since: start))
            }
            guard let updater else { throw InputError("bench pinset: nothing was applied") }

            // Unchanged: the requests of one refresh when nothing was published.
            server.resetRequests()
            let outcome = await updater.refresh()
            guard case .unchanged = outcome else { throw InputError("bench pinset: a refresh with nothing new did not report it: \(Self.words(outcome))") }
            let requests = server.requests
            let connections = server.connections

            // Lookup: the entry for a host, as every connection judged by the pin set looks it up.
            guard let applied = updater.currentConfiguration()?.configuration else { throw InputError("bench pinset: no configuration is current") }
            let lookups = 100_000
            let names = (0..<self.hosts).map { "host-\($0).example" }
            var found = 0
            let lookupStart = BenchClock.now
            for index in 0..<lookups where applied.entry(forHost: names[index % names.count]) != nil {
                found += 1
            }
            let lookupMicroseconds = BenchClock.microseconds(since: lookupStart) / Double(lookups)
            guard found == lookups else { throw InputError("bench pinset: \(lookups - found) hosts of the pin set were not found") }

            // Memory: many refreshes with nothing new. The server counts their requests but keeps no path (a list of
            // 20,000 paths would itself be memory growing with the refreshes).
            server.resetRequests(recordingPaths: self.keepRequestPaths)
            let rssStart = ProcessMemory.residentBytes()
            let heapStart = ProcessMemory.heapInUseBytes()
            var samples: [Int] = []
            var heapSamples: [Int] = []
            let memoryStart = BenchClock.now
            for index in 0..<self.refreshes {
                let outcome = await updater.refresh()
                guard case .unchanged = outcome else { throw InputError("bench pinset: refresh \(index + 1) did not find the pin set unchanged: \(Self.words(outcome))") }
                if self.refreshes >= 10, (index + 1) % (self.refreshes / 10) == 0 {
                    samples.append(ProcessMemory.residentBytes())
                    heapSamples.append(ProcessMemory.heapInUseBytes())
                }
            }
            let memorySeconds = BenchClock.seconds(since: memoryStart)
            let rssEnd = ProcessMemory.residentBytes()
            let heapEnd = ProcessMemory.heapInUseBytes()
            let memoryRequests = server.requestCount
            await client.shutdown()

            let sorted = times.sorted()
            let report = Report(
                hosts: self.hosts,
                configurationBytes: configuration.count,
                apply: Apply(
                    milliseconds: times.map { $0.rounded(places: 2) }, medianMilliseconds: times.median.rounded(places: 2), minMilliseconds: (sorted.first ?? 0).rounded(places: 2),
                    maxMilliseconds: (sorted.last ?? 0).rounded(places: 2), parseMedianMilliseconds: parses.median.rounded(places: 2)),
                unchanged: Unchanged(requests: requests, count: requests.count, connections: connections),
                lookup: Lookup(lookups: lookups, microsecondsPerLookup: lookupMicroseconds.rounded(places: 3)),
                memory: Memory(
                    refreshes: self.refreshes, seconds: memorySeconds.rounded(places: 2), rssStartBytes: rssStart, rssEndBytes: rssEnd, rssSamplesBytes: samples,
                    requests: memoryRequests, heapInUseStartBytes: heapStart, heapInUseEndBytes: heapEnd, heapInUseSamplesBytes: heapSamples),
                load: Load(oneMinute: Self.loadAverage(), cores: ProcessInfo.processInfo.activeProcessorCount)
            )
            if self.json {
                try JSONOutput.print(report)
                return
            }
            print("Pin set of \(report.hosts) hosts (\(report.configurationBytes) bytes), load \(report.load.oneMinute) on \(report.load.cores) cores")
            print(
                "  apply (fetch, verify, download, parse, make current): median \(report.apply.medianMilliseconds) ms, min \(report.apply.minMilliseconds) ms, max \(report.apply.maxMilliseconds) ms over \(self.applies); parse alone \(report.apply.parseMedianMilliseconds) ms"
            )
            print(
                "  refresh with nothing new: \(report.unchanged.count) request\(report.unchanged.count == 1 ? "" : "s") (\(report.unchanged.requests.joined(separator: ", "))) on \(report.unchanged.connections) new connection\(report.unchanged.connections == 1 ? "" : "s")"
            )
            print("  host lookup in the applied pin set: \(report.lookup.microsecondsPerLookup) µs (\(report.lookup.lookups) lookups)")
            print(
                "  memory over \(report.memory.refreshes) refreshes (\(report.memory.seconds) s, \(report.memory.requests) requests): RSS \(report.memory.rssStartBytes / 1024) KiB at start, \(report.memory.rssEndBytes / 1024) KiB at the end; malloc in use \(report.memory.heapInUseStartBytes) bytes at start, \(report.memory.heapInUseEndBytes) at the end"
            )
        }

        /// The configuration (`hosts` hosts with two pins each, and `*.internal.example` anchored at
        /// `fleet-root.pem`) and the anchor's PEM.
        static func pinSet(hosts: Int) throws -> ([UInt8], [UInt8]) {
            let root = try TestPKI.root("Bench Pin Set Root")
            func pin(_ text: String) -> String { "sha256/" + Data(SHA256.hash(data: Data(text.utf8))).base64EncodedString() }
            var entries: [String] = []
            entries.reserveCapacity(hosts + 1)
            for index in 0..<hosts {
                entries.append("\"host-\(index).example\": {\"pins\": [\"\(pin("\(index) current"))\", \"\(pin("\(index) backup"))\"]}")
            }
            entries.append("\"*.internal.example\": {\"pins\": [\"\(pin("internal current"))\", \"\(pin("internal backup"))\"], \"anchors\": [\"fleet-root.pem\"]}")
            let text = "{\"version\": 1, \"domains\": {\n" + entries.joined(separator: ",\n") + "\n}}\n"
            return (Array(text.utf8), Array(root.certificatePEM.utf8))
        }

        /// A refresh's outcome for the bench's error lines, in words (Swift's own rendering of the enum would
        /// quote a failure's line a second time). A failure's line is display text already.
        static func words(_ outcome: PinSetUpdater.Outcome) -> String {
            switch outcome {
            case .updated(let version): return "it updated to version \(version)"
            case .unchanged(let version): return "it found version \(version) unchanged"
            case .failed(let line): return line
            }
        }

        static func loadAverage() -> Double {
            var loads = [Double](repeating: 0, count: 3)
            return getloadavg(&loads, 3) > 0 ? loads[0].rounded(places: 2) : 0
        }
    }
}

/// A static file server on 127.0.0.1 (plain HTTP/1.1) that records the path of every request it answers.
final class CountingFileServer: Sendable {
    let port: Int
    private let channel: any Channel
    private let received: NIOLockedValueBox<Received>
    private let accepted: NIOLockedValueBox<Int>

    struct Received {
        var paths: [String] = []
        var count = 0
        var recordingPaths = true
    }

    init(directory: String) async throws {
        let received = NIOLockedValueBox(Received())
        self.received = received
        let accepted = NIOLockedValueBox(0)
        self.accepted = accepted
        let respond: SimpleHTTPResponder.Respond = { head, _ in
            let path = String(head.uri.prefix { $0 != "?" })
            received.withLockedValue { received in
                received.count += 1
                if received.recordingPaths { received.paths.append(path) }
            }
            let relative = (path.removingPercentEncoding ?? "").drop { $0 == "/" }
            let parts = relative.split(separator: "/", omittingEmptySubsequences: false)
            guard !relative.isEmpty, parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }),
                let contents = FileManager.default.contents(atPath: directory + "/" + relative)
            else { return SimpleHTTPResponse(status: .notFound) }
            return SimpleHTTPResponse(status: .ok, body: Array(contents))
        }
        self.channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                accepted.withLockedValue { $0 += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(SimpleHTTPResponder(respond: respond))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        self.port = self.channel.localAddress?.port ?? 0
    }

    /// The paths requested since the last ``resetRequests(recordingPaths:)`` (none when it said not to record them).
    var requests: [String] { self.received.withLockedValue { $0.paths } }
    /// Requests answered since the last ``resetRequests(recordingPaths:)``.
    var requestCount: Int { self.received.withLockedValue { $0.count } }
    /// Connections accepted since the last ``resetRequests(recordingPaths:)``.
    var connections: Int { self.accepted.withLockedValue { $0 } }
    func resetRequests(recordingPaths: Bool = true) {
        self.received.withLockedValue { $0 = Received(recordingPaths: recordingPaths) }
        self.accepted.withLockedValue { $0 = 0 }
    }
    func stop() { self.channel.close(promise: nil) }
}
