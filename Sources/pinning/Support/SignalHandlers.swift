import Dispatch
import Foundation

/// Signal handlers for the long-running commands (`serve`, `proxy`), installed before the command announces that
/// it is up: whoever waits for the start-up line (a supervisor, a test) may signal at once, and a signal that
/// arrived before its handler would take its default action (SIGHUP and SIGTERM end the process).
enum SignalHandlers {
    /// Ignores `signals` (so none takes its default action from now on), then returns once a dispatch source for
    /// each is registered with the system, so that from the return on every one of them reaches `handler`.
    /// Cancel the sources when done.
    static func install(_ signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) async -> [any DispatchSourceSignal] {
        let registered = DispatchGroup()
        let sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handler(number) }
            // libdispatch registers a source asynchronously after `resume()`; until then a signal is ignored
            // rather than fatal, but it would be lost, so the caller waits for every registration.
            registered.enter()
            source.setRegistrationHandler { registered.leave() }
            source.resume()
            return source
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            registered.notify(queue: .global()) { continuation.resume() }
        }
        return sources
    }
}
