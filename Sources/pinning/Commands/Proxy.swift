import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Pinning
import PinningNIO
import PinningProxy
import Prometheus

extension PinningCommand {
    /// `pinning proxy`: the configuration's policy for every client on the machine.
    struct Proxy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "proxy",
            abstract:
                "A local proxy that applies the configuration's pins, anchors and reports to every client: a forward proxy intercepting CONNECT to covered hosts, and TCP tunnels over pinned TLS.",
            discussion: """
                Forward proxy (--listen, default 127.0.0.1:8080; port 0 picks one): CONNECT to a host a configuration entry covers is intercepted: the client's TLS is terminated with a certificate from the local CA, and its requests go to the upstream over a connection judged by that entry (as `pinning check --config` judges it). A refused upstream is answered 502 with the header X-Pinning-Failure: CODE and the failure in words. CONNECT to an unlisted host is a plain TCP tunnel with "unlistedHosts": "default", 403 with "reject". GET /proxy.pac, /status and /metrics are served; anything else is refused (it is not an open relay). Inside an intercepted session the proxy speaks HTTP/1.1 only (ALPN offers http/1.1 alone): a client that speaks only HTTP/2, as gRPC does, cannot use it (its connection is closed and logged as speaking HTTP/2).

                Tunnels (--tunnel 127.0.0.1:5433=db.internal:5432, repeatable): each connection to the local address is forwarded over pinned TLS to the upstream, judged by the entry that covers its host.

                The local CA (--ca-dir, default ~/.config/pinning/proxy-ca) is created on first run (key mode 0600, never overwritten) and name-constrained to the names the configuration covers. Import ca.pem into the clients that use the proxy.

                Start-up lines on stdout: `proxy listening on http://HOST:PORT`, one `tunnel listening on HOST:PORT -> UPSTREAM:PORT` per tunnel, then `local CA: PATH (sha256/...)`. One log line per connection on stderr (--log-format text or json). SIGHUP reloads the configuration, its client identities and the local CA: new connections, and the next request of open ones, use the new policy (an upstream connection made under the old one is not reused); a configuration that fails to load is refused whole, logged with every problem, and the old one stays. SIGINT or SIGTERM stop accepting and wait up to 10 s for connections in flight.

                Deadlines: a request head (the CONNECT, or a request inside an intercepted session) must arrive whole within --request-head-timeout seconds (default 30) of the connection being ready, or for a later request of a kept-alive session of its first byte (408 Request Timeout when part of it came); an intercepted client's TLS handshake must complete within --handshake-timeout seconds (default 10). A kept-alive connection with nothing under way is closed after --idle-timeout. Either is one log line saying which deadline the client missed.

                A pin set instead of a file (--pinset METADATA_URL --pinset-root ROOT.json --pinset-dir DIR): the configuration is the pin set a TUF repository publishes, verified (signatures, thresholds, versions, expiry, hashes) and kept in DIR. It is refreshed every --pinset-refresh seconds (default 3600, ±10 %; sooner, backing off, after a failure) and on SIGHUP; a new version applies to new connections as a reload does. A refresh that fails or is refused changes nothing and is one line on stderr; the last good pin set stays enforced, stale or not (/status and /metrics show its version, last refresh, last error and seconds stale).

                Failure reports: a pin mismatch of an entry that names reportURIs (enforced or report-only) is reported to them in the background, as TrustKit does: an RFC 7469 report with validation-result, enforce-pinning, library-version, app-id "pinning-cli proxy" and pinset-version, through the library's report queue (the same report at most once a day; 3 attempts of 5 s each). Each outcome is one line on stderr (event "report" with --log-format json). On SIGINT/SIGTERM, reports under way get up to 5 s more. --no-reports sends none.

                Exit status: 0 stopped by a signal, 2 bad input, 3 cannot listen (or, with --pinset, no pin set to enforce: none kept and the first refresh failed).
                """
        )

        @Option(name: .long, help: ArgumentHelp("The pinning configuration (JSON): entries, pins, anchors, unlistedHosts.", valueName: "file"))
        var config: String?

        @OptionGroup var pinSetOptions: PinSetOptions

        @Option(
            name: .customLong("pinset-refresh"), parsing: .unconditional,
            help: ArgumentHelp("With --pinset: seconds between refreshes (0.001 to 604,800; default 3600, ±10 %).", valueName: "seconds"),
            transform: NumericOption.seconds(NumericOption.timeoutRange))
        var pinsetRefresh: Double?

        @Option(name: .long, help: ArgumentHelp("Where the forward proxy listens (HOST:PORT; port 0 picks one).", valueName: "host:port"))
        var listen: String = "127.0.0.1:8080"

        @Option(name: .long, help: ArgumentHelp("A TCP tunnel: LOCALHOST:LOCALPORT=HOST:PORT, forwarded over pinned TLS (repeatable).", valueName: "spec"))
        var tunnel: [String] = []

        @Option(name: .customLong("ca-dir"), help: ArgumentHelp("The local CA's directory (created on first run).", valueName: "dir"))
        var caDirectory: String?

        @Option(name: .long, help: ArgumentHelp("Connect HOST:PORT to ADDR instead of resolving it, as curl (repeatable).", valueName: "host:port:addr"))
        var resolve: [String] = []

        @Option(
            name: .long,
            help: ArgumentHelp(
                "Trust roots instead of the system's (PEM file or directory); entries add their anchors. The --pinset repository's server is judged by the system's roots together with these.",
                valueName: "file|dir"))
        var roots: String?

        @Option(
            name: .customLong("max-connections"), parsing: .unconditional, help: ArgumentHelp("The most client connections open at once (1 to 1,000,000).", valueName: "n"),
            transform: NumericOption.integer(1...1_000_000))
        var maxConnections: Int = 1024

        @Option(
            name: .customLong("idle-timeout"), parsing: .unconditional, help: ArgumentHelp("Close a client connection idle for this long (0.001 to 604,800 seconds).", valueName: "seconds"),
            transform: NumericOption.seconds(NumericOption.timeoutRange))
        var idleTimeout: Double = 300

        @OptionGroup var deadlines: DeadlineOptions<DeadlineHelp>

        @Option(name: .customLong("log-format"), help: ArgumentHelp("text or json.", valueName: "format"), transform: LogFormat.parse)
        var logFormat: LogFormat = .text

        @OptionGroup var keyLogOptions: KeyLogOptions

        @Flag(name: .customLong("allow-remote"), help: "Allow listening on an address other than loopback (127.0.0.0/8, ::1).")
        var allowRemote = false

        @Flag(name: .customLong("no-reports"), help: "Send no pin failure reports (by default an entry's reportURIs get one, in the background).")
        var noReports = false

        /// What the proxy's deadlines cover: an intercepted client's handshake with the local CA's certificate, and
        /// every request head (the CONNECT, or a request inside an intercepted session).
        enum DeadlineHelp: DeadlineWords {
            static let handshakeTimeout =
                "Close an intercepted client whose TLS handshake with the local CA's certificate has not completed this long after the CONNECT was answered (0.001 to 604,800; default 10)."
            static let requestHeadTimeout =
                "Close a client whose request head (the CONNECT, or a request inside an intercepted session) has not arrived whole this long after the connection was ready or its first byte came (0.001 to 604,800; default 30); 408 when part of it came."
        }

        enum LogFormat: String, Sendable {
            case text
            case json

            static func parse(_ text: String) throws -> LogFormat {
                guard let format = LogFormat(rawValue: text.lowercased()) else {
                    throw InputError("--log-format \(text): use text or json")
                }
                return format
            }
        }

        func validate() throws {
            switch (self.config, self.pinSetOptions.isGiven) {
            case (nil, false):
                throw InputError("give --config FILE, or --pinset URL with --pinset-root and --pinset-dir")
            case (_?, true):
                throw InputError("--pinset cannot be combined with --config: the pin set is the configuration")
            default:
                break
            }
            if self.pinsetRefresh != nil && !self.pinSetOptions.isGiven {
                throw InputError("--pinset-refresh needs --pinset")
            }
            try self.pinSetOptions.check()
        }

        func run() async throws {
            let json = self.logFormat == .json
            // Failure reports, by default, for the entries that name reportURIs: set on every configuration the
            // proxy applies (the first, each reload, each pin set version).
            let reportQueue: PinFailureReportQueue? = self.noReports ? nil : ReportDelivery.proxyQueue { outcome in Self.reportLog(outcome, json: json) }
            // Read before the pin set: the repository's https server is judged by the platform's roots and these.
            let roots = try InputLoading.roots(self.roots)
            let updater: PinSetUpdater?
            var configuration: PinningConfiguration
            if self.pinSetOptions.isGiven {
                let following = try self.pinSetOptions.makeUpdater(
                    roots: roots, resolve: try ResolveOption.parse(self.resolve), refreshInterval: self.pinsetRefresh, reportQueue: reportQueue
                ) { line in
                    Self.pinSetLog(line, json: json)
                }
                await following.refresh()
                guard let current = following.currentConfiguration() else {
                    // Display text (PinSetStatus.lastError): the repository's text in it is escaped already.
                    let why = following.status.lastError ?? "no pin set"
                    FileHandle.standardError.write(
                        Data("pinning: proxy: no pin set to enforce (\(PinSetOptions.keptWords(following, directory: self.pinSetOptions.directory ?? "")), and the refresh failed: \(why))\n".utf8))
                    throw ExitCode(3)
                }
                configuration = current.configuration
                updater = following
            } else {
                configuration = try self.loadConfiguration()
                configuration.reportQueue = reportQueue
                updater = nil
            }
            let listen = try Self.address(self.listen, option: "--listen", allowRemote: self.allowRemote)
            let tunnels = try self.tunnel.map { spec throws(InputError) in try Self.tunnel(spec, allowRemote: self.allowRemote) }
            let resolve = try self.parsedResolve()
            let directory = self.caDirectory ?? Self.defaultCADirectory()
            let source =
                updater.flatMap { following in
                    following.currentConfiguration().map { "the pin set (version \($0.generation) from \(self.pinSetOptions.metadataURL ?? ""))" }
                } ?? "--config \(self.config ?? "")"
            let authority = try Self.authority(directory: directory, covering: configuration, source: source)
            Self.warnIfReissued(authority)
            // A pin set carries no client identities (PinSetUpdater refuses one that names any).
            let identities = try self.config.map { file throws(InputError) in try Self.identities(configuration, file: file) } ?? [:]
            let keyLog = try self.keyLogOptions.open(command: "proxy")
            var settings = ProxySettings(
                configuration: configuration,
                trustSettings: TrustSettings(platformRoots: roots),
                identities: identities,
                listen: listen,
                tunnels: tunnels,
                resolve: resolve,
                maximumConnections: self.maxConnections,
                idleTimeout: .nanoseconds(Int64(self.idleTimeout * 1e9)),
                metrics: Self.prometheusMetrics(),
                keyLog: keyLog,
                handshakeTimeout: self.deadlines.handshake,
                requestHeadTimeout: self.deadlines.requestHead
            )
            if let updater {
                settings.pinSetStatus = { updater.status }
            }
            let proxy: PinningProxy
            do {
                proxy = try PinningProxy(settings: settings, authority: authority, group: MultiThreadedEventLoopGroup.singleton) { record in
                    FileHandle.standardError.write(Data((record.line(json: json) + "\n").utf8))
                }
            } catch {
                throw InputError(error.message)
            }
            let bound: [SocketAddress]
            do {
                bound = try await proxy.start()
            } catch {
                FileHandle.standardError.write(Data("pinning: proxy: \(error.message)\n".utf8))
                throw ExitCode(3)
            }
            // SIGINT/SIGTERM: stop accepting, let connections in flight finish for a bounded time, exit 0.
            // SIGHUP: reload the configuration, its identities and the CA; a failure keeps the old policy whole.
            let (events, continuation) = AsyncStream<Int32>.makeStream()
            // Installed before the start-up lines are printed (SignalHandlers says why).
            let signals = await SignalHandlers.install([SIGINT, SIGTERM, SIGHUP]) { number in continuation.yield(number) }

            var lines = ["proxy listening on http://\(PinningProxy.describe(bound[0]))"]
            for (tunnel, address) in zip(tunnels, bound.dropFirst()) {
                lines.append("tunnel listening on \(PinningProxy.describe(address)) -> \(tunnel.host):\(tunnel.port)")
            }
            lines.append("local CA: \(authority.certificatePath) (\(authority.pin))")
            FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))

            // With a pin set: refreshed on its schedule in the background; each new version is applied as a reload.
            let applied = NIOLockedValueBox(updater?.currentConfiguration()?.generation ?? 0)
            let follower = updater.map { updater in
                Task {
                    await updater.run { _ in Self.apply(updater, to: proxy, directory: directory, json: json, applied: applied) }
                }
            }
            for await number in events {
                if number != SIGHUP { break }
                if let updater {
                    // SIGHUP refreshes the pin set now (a refresh under way is joined).
                    Task {
                        await updater.refresh()
                        Self.apply(updater, to: proxy, directory: directory, json: json, applied: applied)
                    }
                } else {
                    self.reload(proxy, directory: directory, json: json, reportQueue: reportQueue)
                }
            }
            follower?.cancel()
            await proxy.stop()
            await proxy.drain(timeout: .seconds(10))
            if let reportQueue {
                _ = await reportQueue.waitForDelivery(timeout: ReportDelivery.proxyStopWaitLimit)
            }
            for source in signals { source.cancel() }
        }

        /// Reads the configuration, identities and CA again and swaps them in, or logs why not (every problem).
        func reload(_ proxy: PinningProxy, directory: String, json: Bool, reportQueue: PinFailureReportQueue?) {
            let outcome: Result<PinningConfiguration, InputError>
            do throws(InputError) {
                var configuration = try self.loadConfiguration()
                configuration.reportQueue = reportQueue
                let identities = try Self.identities(configuration, file: self.config ?? "")
                let authority = try Self.authority(directory: directory, covering: configuration, source: "--config \(self.config ?? "")")
                do {
                    try proxy.reload(configuration: configuration, identities: identities, authority: authority)
                } catch {
                    throw InputError(error.message)
                }
                Self.warnIfReissued(authority)
                outcome = .success(configuration)
            } catch {
                outcome = .failure(error)
            }
            if case .success = outcome {
                proxy.statistics.reloaded(succeeded: true)
            } else {
                proxy.statistics.reloaded(succeeded: false)
            }
            let line: String
            switch outcome {
            case .success(let configuration):
                let count = configuration.entries.count
                line =
                    json
                    ? #"{"event":"reload","result":"succeeded","entries":\#(count)}"#
                    : "reload succeeded: \(self.config ?? ""), \(count) entr\(count == 1 ? "y" : "ies")"
            case .failure(let error):
                // The problems quote the configuration file's text (hosts, file names): escaped as every line is.
                if json {
                    // Encoding a [String: String] cannot fail; were it to, the line still says the reload was refused.
                    let encoded = (try? JSONEncoder().encode(["event": "reload", "result": "refused", "problems": error.message])).map {
                        VisibleText.jsonEscaped(String(decoding: $0, as: UTF8.self))
                    }
                    line = encoded ?? #"{"event":"reload","result":"refused"}"#
                } else {
                    line = "reload refused, the previous configuration stays: \(Self.oneLine(error.message))"
                }
            }
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }

        /// Applies the updater's current pin set to the proxy when it is not the one applied yet (a new version, or
        /// one whose earlier application failed): as a reload, new connections and the next request of open ones
        /// use it. A failure keeps the old policy whole and is logged.
        static func apply(_ updater: PinSetUpdater, to proxy: PinningProxy, directory: String, json: Bool, applied: NIOLockedValueBox<Int>) {
            guard let current = updater.currentConfiguration(), current.generation != applied.withLockedValue({ $0 }) else { return }
            let configuration = current.configuration
            let line: String
            do {
                let authority = try ProxyCertificateAuthority.load(directory: directory, coverage: configuration.entries.map(\.coverage))
                try proxy.reload(configuration: configuration, identities: [:], authority: authority)
                applied.withLockedValue { $0 = current.generation }
                proxy.statistics.reloaded(succeeded: true)
                let count = configuration.entries.count
                line =
                    json
                    ? #"{"event":"reload","result":"succeeded","entries":\#(count),"pinsetVersion":\#(current.generation)}"#
                    : "reload succeeded: pin set version \(current.generation), \(count) entr\(count == 1 ? "y" : "ies")"
                Self.warnIfReissued(authority)
            } catch {
                proxy.statistics.reloaded(succeeded: false)
                let message = "pin set version \(current.generation) not applied, the previous configuration stays: \(error)"
                // The pin set is the repository's text: escaped (VisibleText), as the other pin set lines are.
                line = json ? Self.jsonLine(["event": "reload", "result": "refused", "problems": message]) : "reload refused, \(Self.oneLine(message))"
            }
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }

        /// `text` (every problem of a refused configuration, one a line) as one log line: its lines joined by "; ",
        /// each escaped (VisibleText). Escaping the whole would show each line break as `\u{a}`.
        static func oneLine(_ text: String) -> String {
            text.split(separator: "\n", omittingEmptySubsequences: true).map { VisibleText.escaped($0.trimmingCharacters(in: .whitespaces)) }
                .joined(separator: "; ")
        }

        /// The local CA in `directory` (created on first run), name-constrained to what `configuration` covers; a
        /// configuration that needs too many name-constraint subtrees names `source`, another problem names --ca-dir.
        /// (A pin set's version applied in the background says its problem in its own words: see
        /// ``apply(_:to:directory:json:applied:)``.)
        static func authority(directory: String, covering configuration: PinningConfiguration, source: String) throws(InputError) -> ProxyCertificateAuthority {
            // Too many names for the local CA is the configuration's problem, not --ca-dir's: said naming the
            // configuration (or pin set) before the directory is touched.
            if let refusal = ProxyCertificateAuthority.tooManySubtrees(configuration.entries.map(\.coverage)) {
                throw InputError("\(source): \(refusal)")
            }
            do {
                return try ProxyCertificateAuthority.load(directory: directory, coverage: configuration.entries.map(\.coverage))
            } catch {
                // The library names the file at fault: the directory itself, or a file in it. The option goes in
                // front of the directory's own problems once ("--ca-dir ca: exists and is not a directory"), and
                // before the others' file names.
                let ownProblem = error.message.hasPrefix(directory + ": ")
                throw InputError("--ca-dir " + (ownProblem ? error.message : "\(directory): \(error.message)"))
            }
        }

        /// The warning on stderr when loading the local CA issued its certificate again: clients must import it again.
        static func warnIfReissued(_ authority: ProxyCertificateAuthority) {
            if case .reissued(let reason) = authority.event {
                Self.warn("the local CA certificate was issued again (same key): \(reason); clients that imported the old one must import \(authority.certificatePath) again")
            }
        }

        /// One line per failure report sent (to one URI): delivered or not, where, and why. The collector's text is
        /// escaped: by the outcome's description, and in JSON by ``jsonLine(_:)``.
        @Sendable static func reportLog(_ outcome: HTTPPinFailureReporter.Outcome, json: Bool) {
            let text: String
            if json {
                text = Self.jsonLine([
                    "event": "report", "result": outcome.delivered ? "delivered" : "not delivered", "uri": outcome.uri.absoluteString,
                    "attempts": String(outcome.attempts), "message": outcome.message,
                ])
            } else {
                text = "pinning: proxy: report \(outcome)"
            }
            FileHandle.standardError.write(Data((text + "\n").utf8))
        }

        /// One line about the pin set (a refresh refused, a version applied) on stderr.
        @Sendable static func pinSetLog(_ line: String, json: Bool) {
            // The updater's line is display text: the pin set's repository's text in it (role names, its server's
            // errors) is escaped once, where the line was made; printed as it is (in JSON, as the message's value).
            let text = json ? Self.jsonLine(["event": "pinset", "message": line]) : "pinning: proxy: \(line)"
            FileHandle.standardError.write(Data((text + "\n").utf8))
        }

        /// One JSON line; the characters JSONEncoder leaves raw that act on a terminal (DEL, C1, bidi and other format
        /// characters) as `\uXXXX` (VisibleText.jsonEscaped), the values unchanged.
        static func jsonLine(_ fields: [String: String]) -> String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            do {
                return VisibleText.jsonEscaped(String(decoding: try encoder.encode(fields), as: UTF8.self))
            } catch {
                return #"{"event":"pinset"}"#
            }
        }

        /// The client identities the configuration's entries name, loaded (passphrases from the environment).
        static func identities(_ configuration: PinningConfiguration, file: String) throws(InputError) -> [String: TLSIdentity] {
            var identities: [String: TLSIdentity] = [:]
            for entry in configuration.entries {
                guard let source = entry.clientIdentity else { continue }
                do {
                    identities[entry.key] = try TLSIdentity.load(source, entry: entry.key, environment: ProcessInfo.processInfo.environment)
                } catch {
                    throw InputError("--config \(file): \(error.description)")
                }
            }
            return identities
        }

        func loadConfiguration() throws(InputError) -> PinningConfiguration {
            guard let config = self.config else { throw InputError("give --config FILE") }
            do {
                return try PinningConfiguration(contentsOfFile: config)
            } catch {
                throw InputError(error.description)
            }
        }

        /// The proxy's metrics in a registry of their own (not the process-wide swift-metrics bootstrap), served at
        /// `/metrics` in Prometheus's text format. Timers are histograms in seconds.
        static func prometheusMetrics() -> ProxySettings.Metrics {
            let registry = PrometheusCollectorRegistry()
            var factory = PrometheusMetricsFactory(registry: registry)
            factory.defaultDurationHistogramBuckets = [
                .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(5), .seconds(10),
            ]
            return ProxySettings.Metrics(factory: factory) {
                var buffer: [UInt8] = []
                registry.emit(into: &buffer)
                return String(decoding: buffer, as: UTF8.self)
            }
        }

        /// `~/.config/pinning/proxy-ca` (XDG_CONFIG_HOME when set).
        static func defaultCADirectory() -> String {
            let environment = ProcessInfo.processInfo.environment
            if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
                return config + "/pinning/proxy-ca"
            }
            return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".config/pinning/proxy-ca").path
        }

        /// `HOST:PORT` with HOST an IP address (IPv6 in brackets) or `localhost`; loopback unless `allowRemote`.
        static func address(_ text: String, option: String, allowRemote: Bool) throws(InputError) -> SocketAddress {
            guard let colon = text.lastIndex(of: ":") else {
                throw InputError("\(option) \(text): expected HOST:PORT")
            }
            var host = String(text[..<colon])
            let portText = text[text.index(after: colon)...]
            guard let port = Int(portText), (0...65535).contains(port) else {
                throw InputError("\(option) \(text): the port must be 0 to 65535")
            }
            if host.hasPrefix("[") && host.hasSuffix("]") && host.count > 2 {
                host = String(host.dropFirst().dropLast())
            }
            if host == "localhost" { host = "127.0.0.1" }
            let address: SocketAddress
            do {
                address = try SocketAddress(ipAddress: host, port: port)
            } catch {
                throw InputError("\(option) \(text): \(host) is not an IP address (or localhost)")
            }
            if !allowRemote && !Self.isLoopback(address) {
                throw InputError("\(option) \(text): not a loopback address; the proxy listens on loopback unless --allow-remote is given")
            }
            return address
        }

        static func isLoopback(_ address: SocketAddress) -> Bool {
            switch address {
            case .v4:
                return address.ipAddress?.hasPrefix("127.") ?? false
            case .v6:
                return address.ipAddress == "::1"
            default:
                return false
            }
        }

        /// `LOCALHOST:LOCALPORT=HOST:PORT`.
        static func tunnel(_ spec: String, allowRemote: Bool) throws(InputError) -> ProxySettings.Tunnel {
            let parts = spec.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else {
                throw InputError("--tunnel \(spec): expected LOCALHOST:LOCALPORT=HOST:PORT")
            }
            let local = try Self.address(String(parts[0]), option: "--tunnel", allowRemote: allowRemote)
            let upstream = String(parts[1])
            guard let colon = upstream.lastIndex(of: ":"), let port = Int(upstream[upstream.index(after: colon)...]), (1...65535).contains(port) else {
                throw InputError("--tunnel \(spec): the upstream must be HOST:PORT with a port from 1 to 65535")
            }
            var host = String(upstream[..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") && host.count > 2 {
                host = String(host.dropFirst().dropLast())
            }
            // A Unicode name in its A-label form (`bücher.example` → `xn--bcher-kva.example`), converted as
            // `--resolve`, CONNECT and the configuration's keys convert it: it is what is looked up, matched against
            // `--resolve` and an entry, and sent as SNI (kept as typed, it was looked up as raw UTF-8 and never
            // connected).
            guard let ascii = ResolveOption.asciiHost(host) else {
                throw InputError("--tunnel \(VisibleText.escaped(spec)): \"\(VisibleText.escaped(host))\" is not a host name")
            }
            host = ascii
            // The same name check the evaluator applies to the host, so a tunnel that could never be trusted is
            // refused at start-up rather than at its first connection.
            do {
                _ = try PeerName(host)
            } catch {
                throw InputError("--tunnel \(spec): \(error.description)")
            }
            return ProxySettings.Tunnel(local: local, host: host.lowercased(), port: port)
        }

        func parsedResolve() throws(InputError) -> ProxySettings.Resolve {
            var resolve = ProxySettings.Resolve()
            for (key, address) in try ResolveOption.parse(self.resolve) {
                resolve.add(host: key.host, port: key.port, address: address)
            }
            return resolve
        }

        static func warn(_ text: String) {
            FileHandle.standardError.write(Data("pinning: proxy: warning: \(text)\n".utf8))
        }
    }
}
