import Foundation
public import Logging
import Prometheus
public import ServiceLifecycle

/// The one writer: every accepted report goes through it, in batches, each batch one transaction (group commit),
/// and a request is answered `204` only after its batch committed. Retention runs here too, between batches, so
/// SQLite never sees two writers.
///
/// Bounded: at most ``capacity`` reports wait at once; beyond that ``submit(_:)`` refuses at once
/// (``Refusal/busy``) instead of queueing without limit under a flood. On graceful shutdown it stops taking new
/// reports and stores every one already queued before returning (nothing answered `204` is lost, nothing queued
/// is dropped).
public actor IngestWriter: Service {
    public enum Refusal: Error, Sendable, Equatable {
        /// The queue is full.
        case busy
        /// The collector is stopping.
        case stopping
    }

    private struct Pending {
        var items: [IngestItem]
        var continuation: CheckedContinuation<[IngestOutcome], any Error>
    }

    private let store: ReportStore
    private let logger: Logger
    private let metrics: CollectorMetrics
    public let capacity: Int
    public let batchSize: Int
    /// Transactions in flight at once: 1 for SQLite (one writer); on PostgreSQL more, each on a connection of its
    /// own, so that one batch's statements run while another's commit waits for the WAL's flush.
    public let concurrentTransactions: Int
    private var inFlight = 0
    private var queue: [Pending] = []
    private var queued = 0
    private var stopping = false
    private var finished = false
    private var wakeup: CheckedContinuation<Void, Never>?
    private var jobs: [@Sendable (ReportStore) async -> Void] = []

    public init(store: ReportStore, metrics: CollectorMetrics, logger: Logger, capacity: Int = 20_000, batchSize: Int = 512, concurrentTransactions: Int = 1) {
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.capacity = capacity
        self.batchSize = batchSize
        // SQLite has one writer connection: its transactions run one at a time whatever is asked.
        self.concurrentTransactions = store.database.kind == .sqlite ? 1 : max(1, concurrentTransactions)
    }

    /// Queues reports and returns once they are committed.
    ///
    /// - Throws: ``Refusal`` when full or stopping; the database's error when its transaction failed.
    public func submit(_ items: [IngestItem]) async throws -> [IngestOutcome] {
        guard !self.stopping else { throw Refusal.stopping }
        guard self.queued + items.count <= self.capacity else { throw Refusal.busy }
        self.queued += items.count
        self.metrics.queueDepth.set(Int64(self.queued))
        return try await withCheckedThrowingContinuation { continuation in
            self.queue.append(Pending(items: items, continuation: continuation))
            self.wake()
        }
    }

    /// Runs `job` on the writer between batches (retention).
    public func perform(_ job: @escaping @Sendable (ReportStore) async -> Void) {
        self.jobs.append(job)
        self.wake()
    }

    private func wake() {
        if let wakeup = self.wakeup {
            self.wakeup = nil
            wakeup.resume()
        }
    }

    public func run() async throws {
        // A graceful shutdown and a cancellation both stop the intake and drain the queue: what was accepted is
        // stored either way.
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await self.loop()
            } onGracefulShutdown: {
                Task { await self.beginStopping() }
            }
        } onCancel: {
            Task { await self.beginStopping() }
        }
    }

    /// Stops taking reports; ``run()`` returns once the queue is empty.
    public func beginStopping() {
        self.stopping = true
        self.wake()
    }

    private func loop() async {
        while true {
            // A job (retention) runs alone: it waits for the transactions in flight, and none starts during it.
            if !self.jobs.isEmpty && self.inFlight == 0 {
                let jobs = self.jobs
                self.jobs = []
                for job in jobs { await job(self.store) }
                continue
            }
            if !self.queue.isEmpty && self.jobs.isEmpty && self.inFlight < self.concurrentTransactions {
                let batch = self.takeBatch()
                self.inFlight += 1
                if self.concurrentTransactions == 1 {
                    await self.write(batch)
                } else {
                    Task { await self.write(batch) }
                }
                continue
            }
            if self.queue.isEmpty && self.jobs.isEmpty && self.inFlight == 0 && self.stopping { break }
            await withCheckedContinuation { self.wakeup = $0 }
        }
        self.finished = true
    }

    private func takeBatch() -> [Pending] {
        // The requests that fit in one batch (at least one), taken off the queue in one step: removing them one
        // at a time shifted the whole queue each time, quadratic under a flood of single-report requests.
        var taken = 0
        var count = 0
        for pending in self.queue {
            guard taken == 0 || count + pending.items.count <= self.batchSize else { break }
            taken += 1
            count += pending.items.count
        }
        let batch = Array(self.queue.prefix(taken))
        self.queue.removeFirst(taken)
        return batch
    }

    private func write(_ batch: [Pending]) async {
        defer {
            self.inFlight -= 1
            self.wake()
        }
        let items = batch.flatMap(\.items)
        let count = items.count
        do {
            let outcomes = try await self.store.ingest(items)
            self.metrics.commits.increment()
            var offset = 0
            for pending in batch {
                pending.continuation.resume(returning: Array(outcomes[offset..<offset + pending.items.count]))
                offset += pending.items.count
            }
        } catch let unavailable as DatabaseUnavailable {
            // The database is out of reach: retrying each request alone would only make each wait again for a
            // connection that is not there. Every request of the batch gets the 503 now.
            self.logger.warning("a batch of \(items.count) reports was not stored: \(unavailable.description)")
            if let detail = unavailable.detail { self.logger.info("the database driver said: \(detail)") }
            for pending in batch {
                self.metrics.storageFailures.increment()
                pending.continuation.resume(throwing: unavailable)
            }
        } catch {
            // One request's reports must not fail another's: retry each request in a transaction of its own, so
            // only the one the database refuses is answered with the error.
            self.logger.warning("a batch of \(items.count) reports failed; retrying each request alone: \(error)")
            for pending in batch {
                do {
                    let outcomes = try await self.store.ingest(pending.items)
                    self.metrics.commits.increment()
                    pending.continuation.resume(returning: outcomes)
                } catch {
                    self.metrics.storageFailures.increment()
                    pending.continuation.resume(throwing: error)
                }
            }
        }
        self.queued -= count
        self.metrics.queueDepth.set(Int64(self.queued))
    }
}
