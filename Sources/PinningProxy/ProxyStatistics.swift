public import CoreMetrics
public import Foundation
import NIOConcurrencyHelpers
import PinningNIO

/// What the proxy counts. Metrics go through swift-metrics, to the factory the embedding program gives (the
/// `pinning` CLI gives swift-prometheus's, and serves its registry at `/metrics`); `/status` reads the few
/// figures kept here.
///
/// The metrics:
/// - `pinning_proxy_connections_total{kind}`: client connections accepted (`proxy`, `tunnel`);
/// - `pinning_proxy_refusals_total{host,code}`: upstream connections refused, by host and failure code (at most
///   1,024 hosts are labelled; further ones count under `(other)`, so a client cannot grow the table);
/// - `pinning_proxy_active_connections`: client connections open now;
/// - `pinning_proxy_upstream_handshake_seconds`: connecting to an upstream plus its TLS handshake, policy included
///   (a swift-metrics timer; a histogram in Prometheus);
/// - `pinning_proxy_reloads_total{result}`: configuration reloads, `succeeded` or `failed`;
/// - `pinning_proxy_seconds_until_expiry{kind,entry}`: the local CA, each client identity and each pin set;
/// - `pinning_proxy_pinset_version`, `…_pinset_last_refresh_seconds`, `…_pinset_seconds_stale`,
///   `…_pinset_refresh_failing`: the followed pin set (`--pinset`), from its ``/PinningNIO/PinSetStatus``.
public final class ProxyStatistics: Sendable {
    struct State {
        var active = 0
        var reloads = 0
        var failedReloads = 0
        var refusalHosts = Set<String>()
    }

    /// Hosts are labels: bounded, so a client cannot grow the table without end by trying names.
    static let maximumRefusalHosts = 1024

    private let state = NIOLockedValueBox(State())
    private let factory: any MetricsFactory
    private let activeGauge: Gauge
    private let handshakeTimer: CoreMetrics.Timer
    /// When the proxy started.
    public let started = Date()

    /// Counters that record through `factory`.
    public init(factory: any MetricsFactory) {
        self.factory = factory
        self.activeGauge = Gauge(label: "pinning_proxy_active_connections", dimensions: [], factory: factory)
        self.handshakeTimer = CoreMetrics.Timer(label: "pinning_proxy_upstream_handshake_seconds", dimensions: [], factory: factory)
        self.activeGauge.record(0)
        for result in ["succeeded", "failed"] {
            // Present from the start, so a scrape shows 0 rather than nothing.
            Counter(label: "pinning_proxy_reloads_total", dimensions: [("result", result)], factory: factory).increment(by: 0)
        }
    }

    /// A connection of `kind` (`proxy`, `tunnel`) began.
    func opened(_ kind: ProxyLogRecord.Kind) -> Bool {
        Counter(label: "pinning_proxy_connections_total", dimensions: [("kind", kind.rawValue)], factory: self.factory).increment()
        let active = self.state.withLockedValue { state in
            state.active += 1
            return state.active
        }
        self.activeGauge.record(active)
        return true
    }

    func closed() {
        let active = self.state.withLockedValue { state in
            state.active = max(0, state.active - 1)
            return state.active
        }
        self.activeGauge.record(active)
    }

    var active: Int { self.state.withLockedValue { $0.active } }

    func refused(host: String, code: String) {
        let label = self.state.withLockedValue { state -> String in
            if state.refusalHosts.contains(host) { return host }
            guard state.refusalHosts.count < Self.maximumRefusalHosts else { return "(other)" }
            state.refusalHosts.insert(host)
            return host
        }
        Counter(label: "pinning_proxy_refusals_total", dimensions: [("host", label), ("code", code)], factory: self.factory).increment()
    }

    func upstreamHandshake(nanoseconds: Int64) {
        self.handshakeTimer.recordNanoseconds(nanoseconds)
    }

    /// Counts a reload, successful or not.
    public func reloaded(succeeded: Bool) {
        self.state.withLockedValue { state in
            if succeeded { state.reloads += 1 } else { state.failedReloads += 1 }
        }
        Counter(label: "pinning_proxy_reloads_total", dimensions: [("result", succeeded ? "succeeded" : "failed")], factory: self.factory).increment()
    }

    /// Reloads so far: (succeeded, failed).
    public var reloads: (succeeded: Int, failed: Int) {
        self.state.withLockedValue { ($0.reloads, $0.failedReloads) }
    }

    /// Sets the pin-set gauges: `pinning_proxy_pinset_version` (0 without one), `pinning_proxy_pinset_last_refresh_seconds`
    /// (Unix time of the last successful refresh, 0 before one), `pinning_proxy_pinset_seconds_stale`,
    /// `pinning_proxy_pinset_refresh_failing` (1 while the last refresh failed; its words are in `/status`).
    func recordPinSet(_ status: PinSetStatus) {
        Gauge(label: "pinning_proxy_pinset_version", dimensions: [], factory: self.factory).record(status.version ?? 0)
        Gauge(label: "pinning_proxy_pinset_last_refresh_seconds", dimensions: [], factory: self.factory)
            .record(status.refreshed.map { $0.timeIntervalSince1970 } ?? 0)
        Gauge(label: "pinning_proxy_pinset_seconds_stale", dimensions: [], factory: self.factory).record(status.secondsStale)
        Gauge(label: "pinning_proxy_pinset_refresh_failing", dimensions: [], factory: self.factory).record(status.lastError == nil ? 0 : 1)
    }

    /// Sets the expiry gauges: seconds until each named expiry (`kind` and `entry` labels).
    func recordExpiries(_ expiries: [(kind: String, entry: String, seconds: Double)]) {
        for expiry in expiries {
            Gauge(label: "pinning_proxy_seconds_until_expiry", dimensions: [("kind", expiry.kind), ("entry", expiry.entry)], factory: self.factory)
                .record(expiry.seconds.rounded(.down))
        }
    }
}
