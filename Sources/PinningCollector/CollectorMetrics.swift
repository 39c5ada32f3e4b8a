import Foundation
import Prometheus

/// `/metrics`, in Prometheus's text format (swift-prometheus's registry, no global metrics system).
public final class CollectorMetrics: Sendable {
    /// Why a request's reports were refused (the `reason` label).
    public enum RefusalReason: String, Sendable, CaseIterable {
        /// A `400`: the body could not be read whole, or a report in it was refused (the whole body is).
        case malformed
        /// A `413`: the body is over `--max-report-bytes`, or it carries more reports than `--rate` lets one source
        /// send in a minute (it could never be accepted whole; the remedy is the same, a smaller request).
        case tooLarge = "too_large"
        /// A `429`: the source is over `--rate`.
        case rateLimited = "rate_limited"
        /// A `503`: the ingest queue is full, or the collector is stopping.
        case busy
        /// A `503`: the database refused the transaction.
        case storageFailed = "storage_failed"
    }

    let registry = PrometheusCollectorRegistry()
    let received: Counter
    let stored: Counter
    let deduplicated: Counter
    let storageFailures: Counter
    let commits: Counter
    let queueDepth: Gauge
    let retained: Counter
    private let refused: [RefusalReason: Counter]

    public init() {
        self.received = self.registry.makeCounter(
            descriptor: MetricNameDescriptor(metricName: "collector_reports_received", unitName: "total", helpText: "Reports received in POST /reports bodies that parsed."))
        self.stored = self.registry.makeCounter(descriptor: MetricNameDescriptor(metricName: "collector_reports_stored", unitName: "total", helpText: "Reports stored as new rows."))
        self.deduplicated = self.registry.makeCounter(
            descriptor: MetricNameDescriptor(metricName: "collector_reports_deduplicated", unitName: "total", helpText: "Reports counted on an identical row within the window."))
        self.storageFailures = self.registry.makeCounter(
            descriptor: MetricNameDescriptor(metricName: "collector_storage_failures", unitName: "total", helpText: "Requests whose transaction the database refused."))
        self.commits = self.registry.makeCounter(
            descriptor: MetricNameDescriptor(
                metricName: "collector_ingest_commits", unitName: "total", helpText: "Transactions the ingest writer committed (each holds one or more requests' reports)."))
        self.queueDepth = self.registry.makeGauge(descriptor: MetricNameDescriptor(metricName: "collector_ingest_queue", unitName: "reports", helpText: "Reports waiting for the writer."))
        self.retained = self.registry.makeCounter(descriptor: MetricNameDescriptor(metricName: "collector_reports_expired", unitName: "total", helpText: "Reports deleted by retention."))
        var refused: [RefusalReason: Counter] = [:]
        for reason in RefusalReason.allCases {
            refused[reason] = self.registry.makeCounter(
                descriptor: MetricNameDescriptor(
                    metricName: "collector_requests_refused", unitName: "total", helpText: "POST /reports requests refused, by reason."),
                labels: [("reason", reason.rawValue)]
            )
        }
        self.refused = refused
    }

    func refuse(_ reason: RefusalReason) {
        self.refused[reason]?.increment()
    }

    /// The text exposition.
    public func render() -> String {
        var buffer: [UInt8] = []
        self.registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}
