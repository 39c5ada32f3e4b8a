import Foundation
import Pinning
import PinningNIO

/// The pin failure reports `pinning check` and `pinning proxy` send by default, as TrustKit does: to the
/// `reportURIs` of the configuration entry whose pins failed (report-only entries included), through
/// `PinningNIO`'s ``PinFailureReportQueue`` (the same report at most once a day per process) and
/// ``HTTPPinFailureReporter`` (bounded attempts and retries). `--no-reports` turns them off.
///
/// Delivery never changes a verdict, an exit status or stdout: the report is handed over after the verdict is
/// made, and what happens to it is only logged (on stderr).
enum ReportDelivery {
    /// `check` runs once and exits: each attempt is bounded so that every report is delivered or given up on
    /// within ``checkWaitLimit`` (2 attempts of 2 s with a 0.25 s pause: 4.25 s at worst).
    static let checkAttemptTimeout: Duration = .seconds(2)
    static let checkAttempts = 2
    static let checkRetryDelay: Duration = .milliseconds(250)
    /// The longest `check` waits for its reports before it exits (those still under way are abandoned).
    static let checkWaitLimit: Duration = .seconds(5)
    /// The longest `proxy` waits, after its connections have drained on SIGINT/SIGTERM, for reports under way.
    static let proxyStopWaitLimit: Duration = .seconds(5)

    /// The queue for `check`: short attempts, so the exit is not held up for long.
    static func checkQueue(onOutcome: @escaping @Sendable (HTTPPinFailureReporter.Outcome) -> Void) -> PinFailureReportQueue {
        var reporter = HTTPPinFailureReporter(
            timeout: Self.checkAttemptTimeout, maximumAttempts: Self.checkAttempts, retryDelay: Self.checkRetryDelay, onOutcome: onOutcome)
        Self.name(&reporter, command: "check")
        return PinFailureReportQueue(reporter: reporter)
    }

    /// The queue for `proxy`: the reporter's defaults (3 attempts of 5 s, retries after 0.5 s then 1 s), in the
    /// background of a long-running process.
    static func proxyQueue(onOutcome: @escaping @Sendable (HTTPPinFailureReporter.Outcome) -> Void) -> PinFailureReportQueue {
        var reporter = HTTPPinFailureReporter(onOutcome: onOutcome)
        Self.name(&reporter, command: "proxy")
        return PinFailureReportQueue(reporter: reporter)
    }

    /// `app-id` `pinning-cli check` or `pinning-cli proxy`, `app-version` the CLI's version: a collector tells the
    /// command's reports from those of apps built on the library (whose `library-version` is the same).
    private static func name(_ reporter: inout HTTPPinFailureReporter, command: String) {
        reporter.appId = "pinning-cli \(command)"
        reporter.appVersion = SwiftPinning.version
    }
}
