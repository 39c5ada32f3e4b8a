public import Foundation

/// Where a ``PinningConfiguration`` hands the ``PinFailureReport`` of a pin mismatch.
///
/// The core builds reports and never delivers them itself: it opens no sockets and starts no tasks. The
/// `PinningNIO` module's `PinFailureReportQueue` conforms (rate limit, retries, an HTTPS POST over the
/// package's own TLS client); conform your own type to log reports or hand them to your networking stack.
///
/// <!-- snippet: given(configuration: inout PinningConfiguration)
/// import PinningNIO
/// -->
/// ```swift
/// configuration.reportQueue = PinFailureReportQueue(reporter: HTTPPinFailureReporter())   // PinningNIO
/// ```
public protocol PinFailureReporting: Sendable {
    /// Accepts `report` for delivery to each of `uris` and returns without waiting for the delivery.
    ///
    /// It is called on the verdict's path (the verdict never depends on it), so it must return promptly:
    /// deliver in the background and bound the delivery's time yourself.
    ///
    /// - Parameters:
    ///   - report: The failure report.
    ///   - uris: The entry's `reportURIs`; never empty when a configuration calls this.
    /// - Returns: Whether the report was accepted for delivery; false when it was dropped (rate-limited, or
    ///   no URIs). Surfaces as ``HostEvaluation/reportSubmitted``.
    func submit(_ report: PinFailureReport, to uris: [URL]) async -> Bool
}
