import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO
import PinningPKI
import X509

extension PinningCommand.Bench {
    /// `pinning bench proxy`: HTTP requests per second and latency through `pinning proxy` (its tunnel and its
    /// forward proxy), beside stunnel in client mode and a direct connection to the same upstream.
    struct Proxy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "proxy",
            abstract: "Requests per second and latency through pinning proxy (tunnel, forward proxy) beside stunnel and a direct connection.",
            discussion: """
                A P-256 root, intermediate and leaf for api.bench are minted; an HTTPS server on 127.0.0.1 presents them \
                and answers every GET. `pinning proxy` (this binary, as a separate process) runs with a configuration \
                pinning the intermediate and a --tunnel to the server; stunnel (when /usr/bin/stunnel4 exists) runs in \
                client mode to the same server, verifying the same root and name. Keep-alive clients then take turns in \
                rounds: direct TLS to the server, plain TCP through the tunnel, plain TCP through stunnel, and CONNECT \
                plus TLS through the forward proxy (trusting its local CA). Added latency is each path's p50 minus the \
                direct p50. With --memory the proxy's resident size is read after 10,000 and after 100,000 proxied \
                requests (over 1,000 connections), and per idle intercepted connection.

                JSON keys: direct, tunnel, stunnel, forwardProxy (each requestsPerSecond, p50Milliseconds, \
                p99Milliseconds, addedP50Milliseconds, addedP99Milliseconds), tunnelToStunnelThroughput, memory.
                """
        )

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Requests per path, 100 to 10,000,000 (default 20,000).", valueName: "n"), transform: NumericOption.integer(100...10_000_000))
        var requests: Int = 20_000

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Keep-alive connections in flight per path, 1 to 256 (default 8).", valueName: "c"), transform: NumericOption.integer(1...256))
        var concurrency: Int = 8

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Rounds the paths take turns in, 1 to 100 (default 4).", valueName: "r"), transform: NumericOption.integer(1...100))
        var rounds: Int = 4

        @Flag(name: .long, help: "Also measure the proxy's resident size after 10,000 and 100,000 requests, and per idle connection.")
        var memory = false

        @Flag(name: .long, help: "Print the result as JSON.")
        var json = false

        func run() async throws {
            // Before anything is made: an interrupted bench removes what it made and stops its children.
            await BenchCleanup.installHandler()
            let benchmark = ProxyBenchmark(requests: self.requests, concurrency: self.concurrency, rounds: self.rounds, memory: self.memory)
            let report = try await BenchRun.report("proxy", ownWords: { ($0 as? ProxyBenchmark.Failure)?.description }, run: benchmark.run)
            try JSONOutput.print(report, json: self.json)
        }
    }
}

/// `pinning bench proxy --json` output.
struct ProxyBenchReport: TextReport {
    struct Path: Encodable {
        var requestsPerSecond: Double
        var p50Milliseconds: Double
        var p99Milliseconds: Double
        var addedP50Milliseconds: Double
        /// This path's p99 minus the direct connection's p99 (the issue asks for added p50 and p99).
        var addedP99Milliseconds: Double
    }

    struct Memory: Encodable {
        var residentBytesAfter10000: Int
        var residentBytesAfter100000: Int
        var growthPercent: Double
        var bytesPerIdleConnection: Int
        var idleConnections: Int
    }

    var direct: Path
    var tunnel: Path
    var stunnel: Path?
    var forwardProxy: Path
    var tunnelToStunnelThroughput: Double?
    var memory: Memory?

    var humanReadable: String {
        func line(_ name: String, _ path: Path) -> String {
            name.padding(toLength: 22, withPad: " ", startingAt: 0)
                + String(
                    format: " %9.0f requests/s  p50 %.3f ms  p99 %.3f ms  added p50 %+.3f ms  added p99 %+.3f ms", path.requestsPerSecond,
                    path.p50Milliseconds, path.p99Milliseconds, path.addedP50Milliseconds, path.addedP99Milliseconds)
        }
        var lines = [line("direct TLS", self.direct), line("pinning proxy tunnel", self.tunnel)]
        if let stunnel { lines.append(line("stunnel (client mode)", stunnel)) }
        lines.append(line("pinning forward proxy", self.forwardProxy))
        if let ratio = self.tunnelToStunnelThroughput {
            lines.append(String(format: "tunnel throughput / stunnel throughput: %.2f×", ratio))
        }
        if let memory {
            lines.append(
                String(
                    format: "proxy RSS after 10,000 requests %.1f MiB, after 100,000 %.1f MiB (%+.1f%%); %d bytes per idle intercepted connection (%d held)",
                    Double(memory.residentBytesAfter10000) / 1_048_576, Double(memory.residentBytesAfter100000) / 1_048_576, memory.growthPercent,
                    memory.bytesPerIdleConnection, memory.idleConnections))
        }
        return lines.joined(separator: "\n")
    }
}

struct ProxyBenchmark {
    var requests: Int
    var concurrency: Int
    var rounds: Int
    var memory: Bool

    enum Kind: String, CaseIterable {
        case direct, tunnel, stunnel, forwardProxy
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    func run() async throws -> ProxyBenchReport {
        let directory = try BenchCleanup.temporaryDirectory(prefix: "pinning-bench-proxy")
        // Removed however the run ends (an interrupt too: BenchCleanup); the defers below stop the proxy and
        // stunnel first, and a failure has already copied what the proxy logged into its message.
        defer { BenchCleanup.remove(directory) }
        let chain = try TestChain(host: "api.bench")
        let identity = try chain.leaf.tlsIdentity(chain: [chain.intermediate.certificate])
        let group = MultiThreadedEventLoopGroup.singleton
        let upstream = try await LocalHTTPSServer.start(identity: identity, clientCertificateAuthorities: [], bind: "127.0.0.1", port: 0, group: group)
        let upstreamPort = upstream.localAddress?.port ?? 0
        let rootPath = try directory.write("root.pem", chain.root.certificatePEM)
        let pin = Pin(spkiOf: chain.intermediate.certificate).description
        let backup = "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString()
        let config = try directory.write(
            "pinning.json",
            #"{"version": 1, "domains": {"api.bench": {"pins": ["\#(pin)", "\#(backup)"], "anchors": ["root.pem"], "anchorsOnly": true}}}"#)

        // The proxy under test: this very binary, as its own process.
        let proxy = Process()
        proxy.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        proxy.arguments = [
            "proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", directory.path("ca"), "--resolve", "api.bench:\(upstreamPort):127.0.0.1",
            "--tunnel", "127.0.0.1:0=api.bench:\(upstreamPort)", "--max-connections", "100000",
        ]
        let proxyOut = directory.path("proxy.out")
        _ = FileManager.default.createFile(atPath: proxyOut, contents: nil)  // opening it next says why, if it failed
        proxy.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: proxyOut))
        // Its log (one line per connection) is kept, so a failed run can say what the proxy saw.
        let proxyLog = directory.path("proxy.err")
        _ = FileManager.default.createFile(atPath: proxyLog, contents: nil)  // opening it next says why, if it failed
        proxy.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: proxyLog))
        try proxy.run()
        BenchCleanup.started(proxy)
        defer { Self.stop(proxy) }
        let lines = try await Self.lines(proxyOut, count: 3, process: proxy)
        guard let proxyPort = Int(lines[0].split(separator: ":").last ?? ""),
            let tunnelPort = Int(lines[1].split(separator: " ")[3].split(separator: ":").last ?? "")
        else { throw Failure(description: "unexpected start-up lines from pinning proxy: \(lines)") }

        // stunnel in client mode to the same upstream, verifying the same root and name.
        var stunnel: Process?
        var stunnelPort = 0
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/stunnel4") {
            stunnelPort = try Self.freePort()
            let conf = try directory.write(
                "stunnel.conf",
                """
                foreground = yes
                pid =
                [bench]
                client = yes
                accept = 127.0.0.1:\(stunnelPort)
                connect = 127.0.0.1:\(upstreamPort)
                sni = api.bench
                verifyChain = yes
                CAfile = \(rootPath)
                checkHost = api.bench

                """)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/stunnel4")
            process.arguments = [conf]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            BenchCleanup.started(process)
            stunnel = process
            try await Self.waitForListener(port: stunnelPort)
        }
        defer { stunnel.map(Self.stop) }

        let proxyCA = try NIOSSLCertificate.fromPEMFile(directory.path("ca/ca.pem"))
        var direct = TLSConfiguration.makeClientConfiguration()
        direct.trustRoots = .certificates([try NIOSSLCertificate(bytes: chain.root.der, format: .der)])
        let directContext = try NIOSSLContext(configuration: direct)
        var viaProxy = TLSConfiguration.makeClientConfiguration()
        viaProxy.trustRoots = .certificates(proxyCA)
        let proxyContext = try NIOSSLContext(configuration: viaProxy)

        let loop = LoadGenerator(group: group, host: "api.bench")
        func target(_ kind: Kind) -> LoadGenerator.Target {
            switch kind {
            case .direct: return .tls(port: upstreamPort, context: directContext)
            case .tunnel: return .plain(port: tunnelPort)
            case .stunnel: return .plain(port: stunnelPort)
            case .forwardProxy: return .connect(proxyPort: proxyPort, upstreamPort: upstreamPort, context: proxyContext)
            }
        }
        let kinds = Kind.allCases.filter { $0 != .stunnel || stunnel != nil }
        // Warm up every path (handshakes, the proxy's leaf for api.bench), then take turns in rounds.
        for kind in kinds {
            do {
                _ = try await loop.run(target(kind), connections: self.concurrency, requestsPerConnection: 20)
            } catch {
                throw Failure(description: "the \(kind.rawValue) path failed while warming up: \(Self.words(error))")
            }
        }
        var histograms: [Kind: LatencyHistogram] = [:]
        var elapsed: [Kind: Double] = [:]
        var counts: [Kind: Int] = [:]
        let perRound = max(self.concurrency, self.requests / self.rounds)
        for _ in 0..<self.rounds {
            for kind in kinds {
                let result: LoadGenerator.Result
                do {
                    result = try await loop.run(target(kind), connections: self.concurrency, requestsPerConnection: max(1, perRound / self.concurrency))
                } catch {
                    // Say which path failed: a reset through stunnel and one through the proxy mean different things.
                    let logged = ((try? String(contentsOfFile: proxyLog, encoding: .utf8)) ?? "").split(separator: "\n")
                    let failures = logged.filter { $0.contains("failure=") || $0.hasPrefix("\(kind == .tunnel ? "tunnel" : "intercept") ") }.suffix(12).map { "\n  proxy log: \($0)" }.joined()
                    throw Failure(description: "the \(kind.rawValue) path failed: \(Self.words(error))\(failures)")
                }
                var histogram = histograms[kind] ?? LatencyHistogram()
                for sample in result.latencies { histogram.record(sample) }
                histograms[kind] = histogram
                elapsed[kind, default: 0] += result.seconds
                counts[kind, default: 0] += result.latencies.count
            }
        }
        let directP50 = (histograms[.direct]?.percentile(0.5) ?? 0) / 1e6
        let directP99 = (histograms[.direct]?.percentile(0.99) ?? 0) / 1e6
        func path(_ kind: Kind) -> ProxyBenchReport.Path? {
            guard let histogram = histograms[kind], let seconds = elapsed[kind], seconds > 0 else { return nil }
            let p50 = histogram.percentile(0.5) / 1e6
            let p99 = histogram.percentile(0.99) / 1e6
            return ProxyBenchReport.Path(
                requestsPerSecond: (Double(counts[kind] ?? 0) / seconds).rounded(), p50Milliseconds: p50.rounded(places: 3),
                p99Milliseconds: p99.rounded(places: 3), addedP50Milliseconds: (p50 - directP50).rounded(places: 3), addedP99Milliseconds: (p99 - directP99).rounded(places: 3))
        }
        var report = ProxyBenchReport(
            direct: path(.direct)!, tunnel: path(.tunnel)!, stunnel: path(.stunnel), forwardProxy: path(.forwardProxy)!, tunnelToStunnelThroughput: nil,
            memory: nil)
        if let stunnelPath = report.stunnel, stunnelPath.requestsPerSecond > 0 {
            report.tunnelToStunnelThroughput = (report.tunnel.requestsPerSecond / stunnelPath.requestsPerSecond).rounded(places: 3)
        }
        if self.memory {
            report.memory = try await self.measureMemory(loop: loop, target: target(.forwardProxy), pid: proxy.processIdentifier)
        }
        try? await upstream.close()
        return report
    }

    /// SIGKILL: a child may inherit SIGTERM blocked from the thread that spawned it (stunnel did, and outlived
    /// the benchmark), and nothing of these processes needs a clean shutdown.
    ///
    /// Waits by polling `isRunning` rather than with `waitUntilExit()`: Foundation's `waitUntilExit` allocates a
    /// weak-reference side table it never frees, which LeakSanitizer reports in CI's ASan stage.
    static func stop(_ process: Process) {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        ChildProcess.waitForExit(process)
        BenchCleanup.ended(process)
    }

    /// RSS after 10,000 and after 100,000 requests through the forward proxy (100 per connection, so 1,000
    /// connections in all), then the RSS added per idle intercepted connection.
    private func measureMemory(loop: LoadGenerator, target: LoadGenerator.Target, pid: Int32) async throws -> ProxyBenchReport.Memory {
        var done = 0
        var after10000 = 0
        while done < 100_000 {
            _ = try await loop.run(target, connections: 50, requestsPerConnection: 100)
            done += 5_000
            if done == 10_000 { after10000 = ProcessMemory.residentBytes(pid: pid) }
        }
        try await Task.sleep(for: .milliseconds(200))
        let after100000 = ProcessMemory.residentBytes(pid: pid)
        let idle = 500
        let before = ProcessMemory.residentBytes(pid: pid)
        let held = try await loop.hold(target, connections: idle)
        try await Task.sleep(for: .milliseconds(200))
        let during = ProcessMemory.residentBytes(pid: pid)
        for channel in held { try? await channel.close() }
        return ProxyBenchReport.Memory(
            residentBytesAfter10000: after10000, residentBytesAfter100000: after100000,
            growthPercent: (after10000 > 0 ? (Double(after100000) / Double(after10000) - 1) * 100 : 0).rounded(places: 3),
            bytesPerIdleConnection: max(0, during - before) / idle, idleConnections: idle)
    }

    static func lines(_ path: String, count: Int, process: Process) async throws -> [String] {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && process.isRunning {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            let lines = text.split(separator: "\n").map(String.init)
            if lines.count >= count { return lines }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw Failure(description: "pinning proxy did not start")
    }

    /// Our own failures as they are; a socket or TLS error through the shared words.
    static func words(_ error: any Error) -> String {
        (error as? Failure)?.description ?? ConnectionFailureWords.words(error)
    }

    static func freePort() throws -> Int {
        let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).wait()
        defer { try? channel.close().wait() }
        return channel.localAddress?.port ?? 0
    }

    static func waitForListener(port: Int) async throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            do {
                let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get()
                try await channel.close()
                return
            } catch {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        throw Failure(description: "stunnel did not listen on 127.0.0.1:\(port)")
    }
}

/// Keep-alive HTTP/1.1 clients: each connection sends GET requests one after another and times each.
struct LoadGenerator {
    enum Target {
        case plain(port: Int)
        case tls(port: Int, context: NIOSSLContext)
        /// CONNECT through the forward proxy, then TLS (trusting its local CA) to the upstream.
        case connect(proxyPort: Int, upstreamPort: Int, context: NIOSSLContext)
    }

    struct Result {
        var latencies: [UInt64]
        var seconds: Double
    }

    let group: any EventLoopGroup
    let host: String

    func run(_ target: Target, connections: Int, requestsPerConnection: Int) async throws -> Result {
        let started = BenchClock.now
        let latencies = try await withThrowingTaskGroup(of: [UInt64].self) { tasks in
            for _ in 0..<connections {
                tasks.addTask {
                    let channel = try await self.open(target)
                    do {
                        let samples = try await channel.eventLoop.flatSubmit { Self.start(channel, requests: requestsPerConnection) }.get()
                        // Closed and awaited: nothing of a connection outlives the run.
                        try? await channel.close()
                        return samples
                    } catch {
                        try? await channel.close()
                        throw error
                    }
                }
            }
            var all: [UInt64] = []
            for try await samples in tasks { all += samples }
            return all
        }
        return Result(latencies: latencies, seconds: BenchClock.seconds(since: started))
    }

    /// On `channel`'s loop: its ``RequestLoop`` sends `requests` requests; the future holds their latencies.
    private static func start(_ channel: any Channel, requests: Int) -> EventLoopFuture<[UInt64]> {
        do {
            return try channel.pipeline.syncOperations.handler(type: RequestLoop.self).start(requests: requests)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
    }

    /// Opens `connections` connections, each after one completed request, and leaves them open.
    func hold(_ target: Target, connections: Int) async throws -> [any Channel] {
        var channels: [any Channel] = []
        for _ in 0..<connections {
            let channel = try await self.open(target)
            _ = try await channel.eventLoop.flatSubmit { Self.start(channel, requests: 1) }.get()
            channels.append(channel)
        }
        return channels
    }

    private func open(_ target: Target) async throws -> any Channel {
        let host = self.host
        switch target {
        case .plain(let port):
            return try await ClientBootstrap(group: self.group)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(RequestLoop(host: host))
                    }
                }
                .connect(host: "127.0.0.1", port: port).get()
        case .tls(let port, let context):
            return try await ClientBootstrap(group: self.group)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: host))
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(RequestLoop(host: host))
                    }
                }
                .connect(host: "127.0.0.1", port: port).get()
        case .connect(let proxyPort, let upstreamPort, let context):
            let established = NIOLockedValueBox<EventLoopFuture<Void>?>(nil)
            let channel = try await ClientBootstrap(group: self.group)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handshake = ConnectHandshake(authority: "\(host):\(upstreamPort)")
                        try channel.pipeline.syncOperations.addHandler(handshake)
                        established.withLockedValue { $0 = handshake.done.futureResult }
                    }
                }
                .connect(host: "127.0.0.1", port: proxyPort).get()
            guard let done = established.withLockedValue({ $0 }) else { throw ProxyBenchmark.Failure(description: "no CONNECT handshake") }
            try await done.get()
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: host))
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                try channel.pipeline.syncOperations.addHandler(RequestLoop(host: host))
            }.get()
            return channel
        }
    }
}

/// Sends `CONNECT authority` and waits for the proxy's `200`, then leaves the pipeline.
final class ConnectHandshake: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let authority: String
    var done: EventLoopPromise<Void>!
    private var received = ""

    private var completed = false

    init(authority: String) { self.authority = authority }

    /// Completes `done` once (a refusal is followed by the close it causes).
    private func complete(_ result: Result<Void, any Error>) {
        guard !self.completed else { return }
        self.completed = true
        self.done.completeWith(result)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let done = context.eventLoop.makePromise(of: Void.self)
        self.done = done
        // Bounded: a proxy that never answers the CONNECT fails the run instead of hanging it.
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let timeout = context.eventLoop.scheduleTask(in: .seconds(30)) {
            bound.value.complete(.failure(ProxyBenchmark.Failure(description: "no answer to CONNECT within 30 s")))
        }
        done.futureResult.whenComplete { _ in timeout.cancel() }
    }

    func channelActive(context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: 128)
        buffer.writeString("CONNECT \(self.authority) HTTP/1.1\r\nHost: \(self.authority)\r\n\r\n")
        context.writeAndFlush(self.wrapOutboundOut(buffer), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = self.unwrapInboundIn(data)
        self.received += buffer.readString(length: buffer.readableBytes) ?? ""
        guard self.received.contains("\r\n\r\n") else { return }
        guard self.received.hasPrefix("HTTP/1.1 200") else {
            self.complete(.failure(ProxyBenchmark.Failure(description: "CONNECT refused: \(self.received.prefix(200))")))
            context.close(promise: nil)
            return
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        self.complete(.success(()))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.complete(.failure(error))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.complete(.failure(ProxyBenchmark.Failure(description: "the proxy closed the connection before answering CONNECT")))
        context.fireChannelInactive()
    }
}

/// Sends GET requests one after another on one keep-alive connection, recording each latency.
final class RequestLoop: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let host: String
    private var context: ChannelHandlerContext?
    private var remaining = 0
    private var sentAt: UInt64 = 0
    private var samples: [UInt64] = []
    private var promise: EventLoopPromise<[UInt64]>?
    /// Checks every 5 s that a reply came since the last check; a connection that stalls for 30 s fails the run
    /// with words instead of hanging the benchmark (a stalled path is a finding, not a reason to wait forever).
    private var watchdog: RepeatedTask?
    private var progressAtLastCheck = -1
    private var stalledChecks = 0

    init(host: String) { self.host = host }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func start(requests: Int) -> EventLoopFuture<[UInt64]> {
        guard let context = self.context else { return MultiThreadedEventLoopGroup.singleton.any().makeFailedFuture(ChannelError.ioOnClosedChannel) }
        let promise = context.eventLoop.makePromise(of: [UInt64].self)
        self.promise = promise
        self.remaining = requests
        self.samples.reserveCapacity(requests)
        self.progressAtLastCheck = -1
        self.stalledChecks = 0
        // Cancelled by `finish`, which every end of the run goes through (reply, error, close).
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.watchdog = context.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(5), delay: .seconds(5)) { _ in
            bound.value.checkProgress()
        }
        self.send(context: context)
        return promise.futureResult
    }

    private func checkProgress() {
        guard self.promise != nil else { return }
        if self.remaining == self.progressAtLastCheck {
            self.stalledChecks += 1
            if self.stalledChecks >= 6 {
                self.finish(.failure(ProxyBenchmark.Failure(description: "no reply for 30 s with \(self.remaining) requests to go")))
                self.context?.close(promise: nil)
            }
        } else {
            self.stalledChecks = 0
            self.progressAtLastCheck = self.remaining
        }
    }

    private func finish(_ result: Result<[UInt64], any Error>) {
        self.watchdog?.cancel()
        self.watchdog = nil
        guard let promise = self.promise else { return }
        self.promise = nil
        switch result {
        case .success(let samples): promise.succeed(samples)
        case .failure(let error): promise.fail(error)
        }
    }

    private func send(context: ChannelHandlerContext) {
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/bench")
        head.headers.add(name: "host", value: self.host)
        self.sentAt = BenchClock.now
        context.write(self.wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = self.unwrapInboundIn(data) else { return }
        self.samples.append(BenchClock.now - self.sentAt)
        self.remaining -= 1
        if self.remaining > 0 {
            self.send(context: context)
        } else {
            let samples = self.samples
            self.samples = []
            self.finish(.success(samples))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.finish(.failure(error))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.finish(.failure(ProxyBenchmark.Failure(description: "the connection closed with \(self.remaining) requests to go")))
        context.fireChannelInactive()
    }
}
