public import Foundation

/// Something that delivers pin failure reports: ``HTTPPinFailureReporter``, or your own (a logger, a queue
/// for later upload, an HTTPS client from your networking stack).
public protocol PinFailureReporting: Sendable {
    /// Delivers `report` to each of `uris`. Runs in the background, never on a verdict's path; an
    /// implementation should bound its own time (timeouts, a bounded number of retries).
    func send(_ report: PinFailureReport, to uris: [URL]) async
}

/// Hands pin failure reports to a ``PinFailureReporting`` in the background, at most once per day for the
/// same report, and lets a short-lived program wait for delivery before it exits.
///
/// ```swift
/// let queue = PinFailureReportQueue(reporter: HTTPPinFailureReporter())
/// configuration.reportQueue = queue
/// …
/// _ = await queue.waitForDelivery(timeout: .seconds(5))    // e.g. before a command-line tool exits
/// ```
///
/// Rate limiting follows TrustKit: a report with the same host, the same validated chain and the same known
/// pins as one submitted less than ``minimumInterval`` ago (24 hours by default) is dropped. The memory of
/// past reports lives in the queue, so it lasts as long as the queue does (a process, typically).
public actor PinFailureReportQueue {
    /// The reporter that delivers.
    public nonisolated let reporter: any PinFailureReporting
    /// How long an identical report is suppressed after one was submitted.
    public nonisolated let minimumInterval: TimeInterval
    private let clock: @Sendable () -> Date
    private var lastSubmitted: [PinFailureReport.DeduplicationKey: Date] = [:]
    private var pending: [UInt64: Task<Void, Never>] = [:]
    private var nextID: UInt64 = 0

    /// A queue delivering through `reporter`.
    ///
    /// - Parameters:
    ///   - reporter: Delivers each report.
    ///   - minimumInterval: How long an identical report is suppressed; 24 hours by default.
    ///   - clock: The current time; inject a fixed clock in tests.
    public init(
        reporter: any PinFailureReporting,
        minimumInterval: TimeInterval = 86400,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.reporter = reporter
        self.minimumInterval = minimumInterval
        self.clock = clock
    }

    /// Starts delivering `report` to `uris` in the background and returns at once.
    ///
    /// - Returns: true when the report was handed to the reporter, false when it was dropped (no URIs, or an
    ///   identical report was submitted less than ``minimumInterval`` ago).
    @discardableResult
    public func submit(_ report: PinFailureReport, to uris: [URL]) -> Bool {
        guard !uris.isEmpty else { return false }
        let now = self.clock()
        // Forget what can no longer suppress anything, so the memory stays bounded by a day's reports.
        self.lastSubmitted = self.lastSubmitted.filter { now.timeIntervalSince($0.value) < self.minimumInterval }
        let key = report.deduplicationKey
        if let last = self.lastSubmitted[key], now.timeIntervalSince(last) < self.minimumInterval, now >= last {
            return false
        }
        self.lastSubmitted[key] = now
        let id = self.nextID
        self.nextID += 1
        let reporter = self.reporter
        self.pending[id] = Task.detached {
            await reporter.send(report, to: uris)
            await self.finished(id)
        }
        return true
    }

    private func finished(_ id: UInt64) {
        self.pending[id] = nil
    }

    /// The number of reports still being delivered.
    public var pendingCount: Int { self.pending.count }

    /// Waits until every submitted report has been delivered (or given up on), or `timeout` has passed.
    ///
    /// - Returns: true when nothing is left pending.
    public func waitForDelivery(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        while !self.pending.isEmpty && ContinuousClock.now < deadline {
            do {
                try await Task.sleep(for: .milliseconds(10))
            } catch {
                break
            }
        }
        return self.pending.isEmpty
    }

    /// Waits until every submitted report has been delivered or given up on (the reporter bounds the time).
    public func flush() async {
        while let task = self.pending.values.first {
            await task.value
        }
    }
}
