// Only Glibc, with @preconcurrency: `stdout` is a C global that Swift 6 otherwise refuses to read (a file that
// imports Foundation too, which exports Glibc, does not get the attribute applied). The FILE it points to is set
// before main and never changes.
@preconcurrency import Glibc

/// C's standard output stream, for the one caller that must not block on it.
enum StandardOutput {
    /// Flushes stdout's buffer if no thread holds the stream's lock now (`ftrylockfile`); otherwise leaves it.
    /// For a signal handler's thread about to `_exit`: `fflush` would wait for the lock, for good if its holder
    /// is blocked writing to a full pipe.
    static func flushIfFree() {
        let output = stdout
        guard ftrylockfile(output) == 0 else { return }
        fflush_unlocked(output)
        funlockfile(output)
    }
}
