import Foundation
import NIOConcurrencyHelpers
public import PinningPKI

extension TemporaryDirectory {
    /// Removes the directory when the test process exits normally (`exit`, or the end of `main`): for a fixture
    /// shared by every test of a run (a `static let`), which no single test may remove, since others may still
    /// read it. A run that is killed leaves it behind, as it leaves everything else.
    ///
    /// A directory that one test makes and uses is removed by that test instead, with `defer { directory.remove() }`.
    public func removeAtExit() {
        RemovedAtExit.add(self)
    }
}

/// The directories ``TemporaryDirectory/removeAtExit()`` was called on; one `atexit` handler removes them all.
private enum RemovedAtExit {
    /// nil until the first directory, whose caller registers the handler.
    static let directories = NIOLockedValueBox<[TemporaryDirectory]?>(nil)

    static func add(_ directory: TemporaryDirectory) {
        let first = Self.directories.withLockedValue { directories in
            defer { directories = (directories ?? []) + [directory] }
            return directories == nil
        }
        if first {
            atexit {
                for directory in RemovedAtExit.directories.withLockedValue({ $0 ?? [] }) {
                    directory.remove()
                }
            }
        }
    }
}
