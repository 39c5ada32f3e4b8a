public import Foundation
public import Pinning

/// Hands pin failure reports to an ``HTTPPinFailureReporter`` in the background, at most once per day for
/// the same report, and lets a short-lived program wait for delivery before it exits.
///
/// <!-- snippet: given(configuration: inout PinningConfiguration)
/// import Pinning
/// -->
/// ```swift
/// let queue = PinFailureReportQueue(reporter: HTTPPinFailureReporter())
/// configuration.reportQueue = queue
/// // … evaluations with the configuration queue their reports …
/// _ = await queue.waitForDelivery(timeout: .seconds(5))    // e.g. before a command-line tool exits
/// ```
///
/// Rate limiting follows TrustKit: a report with the same host, the same validated chain and the same known
/// pins as one submitted less than ``minimumInterval`` ago (24 hours by default) is dropped. The memory of
/// past reports lives in the queue, so it lasts as long as the queue does (a process, typically).
///
/// The queue is driven by events: each submitted report is one task, and waiting for delivery resumes when
/// the last of them finishes (nothing polls).
public actor PinFailureReportQueue: PinFailureReporting {
    /// The reporter that delivers.
    public nonisolated let reporter: HTTPPinFailureReporter
    /// How long an identical report is suppressed after one was submitted.
    public nonisolated let minimumInterval: TimeInterval
    private let clock: @Sendable () -> Date
    private var lastSubmitted: [PinFailureReport.DeduplicationKey: Date] = [:]
    private var pending: [UInt64: Task<Void, Never>] = [:]
    /// Callers of ``flush()`` and ``waitForDelivery(timeout:)``, resumed when ``pending`` becomes empty.
    private var idleWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextID: UInt64 = 0

    /// A queue delivering through `reporter`.
    ///
    /// - Parameters:
    ///   - reporter: Delivers each report.
    ///   - minimumInterval: How long an identical report is suppressed; 24 hours by default.
    ///   - clock: The current time; inject a fixed clock in tests.
    public init(
        reporter: HTTPPinFailureReporter = HTTPPinFailureReporter(),
        minimumInterval: TimeInterval = 86400,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.reporter = reporter
        self.minimumInterval = minimumInterval
        self.clock = clock
    }

    /// Starts delivering `report` to `uris` in the background and returns at once.
    ///
    /// - Parameters:
    ///   - report: The failure report.
    ///   - uris: The collectors.
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
        let id = self.makeID()
        let reporter = self.reporter
        self.pending[id] = Task.detached {
            await reporter.send(report, to: uris)
            await self.finished(id)
        }
        return true
    }

    /// The number of reports still being delivered.
    public var pendingCount: Int { self.pending.count }

    /// Waits until every submitted report has been delivered (or given up on), or `timeout` has passed.
    ///
    /// - Parameter timeout: The longest wait.
    /// - Returns: true when nothing is left pending.
    public func waitForDelivery(timeout: Duration) async -> Bool {
        guard !self.pending.isEmpty else { return true }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitUntilIdle() }
            group.addTask {
                do {
                    try await Task.sleep(for: timeout)
                } catch {
                    // Cancelled because delivery finished first.
                }
            }
            await group.next()
            group.cancelAll()
        }
        return self.pending.isEmpty
    }

    /// Waits until every submitted report has been delivered or given up on (the reporter bounds the time).
    public func flush() async {
        await self.waitUntilIdle()
    }

    private func makeID() -> UInt64 {
        defer { self.nextID += 1 }
        return self.nextID
    }

    private func finished(_ id: UInt64) {
        self.pending[id] = nil
        guard self.pending.isEmpty else { return }
        let waiters = self.idleWaiters
        self.idleWaiters = [:]
        for waiter in waiters.values { waiter.resume() }
    }

    /// Returns when nothing is pending, or when the calling task is cancelled.
    private func waitUntilIdle() async {
        let id = self.makeID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Runs on the actor: no report can finish between this check and the registration.
                if self.pending.isEmpty || Task.isCancelled {
                    continuation.resume()
                } else {
                    self.idleWaiters[id] = continuation
                }
            }
        } onCancel: {
            Task { await self.stopWaiting(id) }
        }
    }

    private func stopWaiting(_ id: UInt64) {
        self.idleWaiters.removeValue(forKey: id)?.resume()
    }
}
