import Foundation

/// A value behind a lock: the one lock box of the package (`package`), as swift-certificates has its own
/// `LockedValueBox`. The core cannot use NIO's `NIOLockedValueBox`, and `Synchronization.Mutex` needs newer
/// platforms than the package supports.
///
/// Keep the closures short and never call out of the package while holding the lock.
package final class LockedValueBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    /// A box holding `value`.
    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value and returns what it returns.
    package func withLockedValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        self.lock.lock()
        defer { self.lock.unlock() }
        return try body(&self.value)
    }
}
