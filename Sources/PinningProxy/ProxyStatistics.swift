public import Foundation
import NIOConcurrencyHelpers

/// What the proxy counts, for `/status` and `/metrics`. Thread-safe; every update is a short locked section.
public final class ProxyStatistics: Sendable {
    struct State {
        var connections: [String: Int] = [:]  // by kind
        var refusals: [RefusalKey: Int] = [:]
        var active = 0
        var reloads = 0
        var failedReloads = 0
        var handshakeBuckets = [Int](repeating: 0, count: ProxyStatistics.handshakeBounds.count)
        var handshakeCount = 0
        var handshakeSum = 0.0
    }

    struct RefusalKey: Hashable {
        var host: String
        var code: String
    }

    /// Upper bounds (seconds) of the upstream handshake latency histogram's buckets.
    static let handshakeBounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    /// Hosts are labels: bounded, so a client cannot grow the table without end by trying names.
    static let maximumRefusalKeys = 1024

    private let state = NIOLockedValueBox(State())
    /// When the proxy started.
    public let started = Date()

    /// Empty counters.
    public init() {}

    /// A connection of `kind` (`intercept`, `tunnel`, `passthrough`, `local`) began.
    func opened(_ kind: String) -> Bool {
        self.state.withLockedValue { state in
            state.connections[kind, default: 0] += 1
            state.active += 1
            return true
        }
    }

    func closed() {
        self.state.withLockedValue { $0.active = max(0, $0.active - 1) }
    }

    var active: Int { self.state.withLockedValue { $0.active } }

    func refused(host: String, code: String) {
        self.state.withLockedValue { state in
            let key = RefusalKey(host: host, code: code)
            if state.refusals[key] == nil && state.refusals.count >= Self.maximumRefusalKeys {
                state.refusals[RefusalKey(host: "(other)", code: code), default: 0] += 1
                return
            }
            state.refusals[key, default: 0] += 1
        }
    }

    func upstreamHandshake(seconds: Double) {
        self.state.withLockedValue { state in
            state.handshakeCount += 1
            state.handshakeSum += seconds
            for (index, bound) in Self.handshakeBounds.enumerated() where seconds <= bound {
                state.handshakeBuckets[index] += 1
            }
        }
    }

    /// Counts a reload, successful or not.
    public func reloaded(succeeded: Bool) {
        self.state.withLockedValue { state in
            if succeeded { state.reloads += 1 } else { state.failedReloads += 1 }
        }
    }

    /// Reloads so far: (succeeded, failed).
    public var reloads: (succeeded: Int, failed: Int) {
        self.state.withLockedValue { ($0.reloads, $0.failedReloads) }
    }

    /// Prometheus text exposition (format 0.0.4). `expiries` are seconds until each named expiry.
    func prometheusText(expiries: [(labels: String, seconds: Double)]) -> String {
        let state = self.state.withLockedValue { $0 }
        var lines: [String] = []
        lines.append("# HELP pinning_proxy_connections_total Client connections accepted, by kind.")
        lines.append("# TYPE pinning_proxy_connections_total counter")
        for (kind, count) in state.connections.sorted(by: { $0.key < $1.key }) {
            lines.append("pinning_proxy_connections_total{kind=\"\(Self.label(kind))\"} \(count)")
        }
        lines.append("# HELP pinning_proxy_refusals_total Upstream connections refused, by host and failure code.")
        lines.append("# TYPE pinning_proxy_refusals_total counter")
        for (key, count) in state.refusals.sorted(by: { ($0.key.host, $0.key.code) < ($1.key.host, $1.key.code) }) {
            lines.append("pinning_proxy_refusals_total{host=\"\(Self.label(key.host))\",code=\"\(Self.label(key.code))\"} \(count)")
        }
        lines.append("# HELP pinning_proxy_active_connections Client connections open now.")
        lines.append("# TYPE pinning_proxy_active_connections gauge")
        lines.append("pinning_proxy_active_connections \(state.active)")
        lines.append("# HELP pinning_proxy_upstream_handshake_seconds Upstream connect and TLS handshake time, policy included.")
        lines.append("# TYPE pinning_proxy_upstream_handshake_seconds histogram")
        for (index, bound) in Self.handshakeBounds.enumerated() {
            lines.append("pinning_proxy_upstream_handshake_seconds_bucket{le=\"\(bound)\"} \(state.handshakeBuckets[index])")
        }
        lines.append("pinning_proxy_upstream_handshake_seconds_bucket{le=\"+Inf\"} \(state.handshakeCount)")
        lines.append("pinning_proxy_upstream_handshake_seconds_sum \(state.handshakeSum)")
        lines.append("pinning_proxy_upstream_handshake_seconds_count \(state.handshakeCount)")
        lines.append("# HELP pinning_proxy_reloads_total Configuration reloads, by result.")
        lines.append("# TYPE pinning_proxy_reloads_total counter")
        lines.append("pinning_proxy_reloads_total{result=\"succeeded\"} \(state.reloads)")
        lines.append("pinning_proxy_reloads_total{result=\"failed\"} \(state.failedReloads)")
        lines.append("# HELP pinning_proxy_seconds_until_expiry Seconds until the earliest expiry (pin sets, the local CA).")
        lines.append("# TYPE pinning_proxy_seconds_until_expiry gauge")
        for expiry in expiries {
            lines.append("pinning_proxy_seconds_until_expiry{\(expiry.labels)} \(Int(expiry.seconds.rounded(.down)))")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// A label value with `\`, `"` and newlines escaped, as the exposition format requires.
    static func label(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
