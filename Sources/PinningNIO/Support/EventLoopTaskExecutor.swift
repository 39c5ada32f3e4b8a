public import NIOCore

/// Runs the jobs of a task on one event loop: the task executor that trust decisions made during a handshake
/// prefer.
///
/// NIOSSL calls a custom verification callback on the channel's event loop and waits for its promise. The policy
/// is `async` (swift-certificates' verifier is), so the callback must start a task. A task started plainly runs on
/// Swift's global cooperative pool, which has one thread per core: when the program keeps that pool busy
/// (CPU-bound work, a blocking call), handshakes wait behind it, and on a loaded 2-core machine a loopback
/// handshake was seen to wait past a 30 s timeout. With this executor preferred, the evaluation runs on the
/// connection's own event loop, where BoringSSL's built-in verification runs too; it suspends (and frees the
/// loop) only where the evaluator itself awaits something.
///
/// The consequence, as for NIOSSL's own verification: an evaluator that blocks its thread blocks the event
/// loop. The evaluators of this package never block.
public final class EventLoopTaskExecutor: TaskExecutor, Sendable {
    /// The loop the jobs run on.
    public let eventLoop: any EventLoop

    /// An executor for `eventLoop`.
    public init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Runs `job` on the event loop, in a later tick (never inline, so a promise completed inside a NIOSSL callback
    /// does not re-enter it).
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}

extension EventLoopPromise where Value: Sendable {
    /// Completes the promise with the result of `body`, run as a task that prefers the promise's event loop
    /// (``EventLoopTaskExecutor``) over the global cooperative pool. Returns the task, so a caller can cancel it.
    @discardableResult
    func completeWithTaskOnEventLoop(_ body: sending @escaping @isolated(any) () async throws -> Value) -> Task<Void, Never> {
        let executor = EventLoopTaskExecutor(self.futureResult.eventLoop)
        return Task(executorPreference: executor) {
            do {
                self.succeed(try await body())
            } catch {
                self.fail(error)
            }
        }
    }
}
