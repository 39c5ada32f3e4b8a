import Dispatch
import Foundation
import Pinning
import PinningPKI

/// What `pinning bench …` leaves while it runs (scratch directories, child processes: the proxy under test,
/// stunnel, openssl), and its SIGINT and SIGTERM handler: an interrupted bench stops its children, removes its
/// directories and exits 130 (SIGINT) or 143 (SIGTERM), as a shell reports a process those signals ended.
///
/// Before it, Ctrl-C ended the bench by the signal's default action: no `defer` ran, so `pinning-bench-proxy-*`
/// stayed in the temporary directory and the child proxy and stunnel (sent the signal only when it came from a
/// terminal, to the whole process group) could outlive it.
enum BenchCleanup {
    private struct State {
        var directories: Set<String> = []
        /// The children, as Foundation's objects, not their PIDs: see ``interrupted(by:)``.
        var processes: [ObjectIdentifier: Process] = [:]
        var interrupted = false
        var sources: [any DispatchSourceSignal] = []
    }

    private static let state = LockedValueBox(State())

    /// Installs the handler (once; the sources live as long as the process), before the bench makes anything.
    static func installHandler() async {
        guard Self.state.withLockedValue({ $0.sources.isEmpty }) else { return }
        let sources = await SignalHandlers.install([SIGINT, SIGTERM]) { number in Self.interrupted(by: number) }
        Self.state.withLockedValue { $0.sources = sources }
    }

    /// A new scratch directory, removed by the handler if the bench is interrupted; give it back with
    /// ``remove(_:)``.
    ///
    /// Made under the lock: the handler takes its list of directories under it, so a directory is either in that
    /// list or never made. Made before the lock was taken, one created after the handler's list was read (then
    /// exiting) was left behind. Once the handler has begun, nothing is made: ``Interrupted`` is thrown (the
    /// command then waits in ``waitIfInterrupted()`` for the handler's exit).
    static func temporaryDirectory(prefix: String) throws -> TemporaryDirectory {
        try Self.state.withLockedValue { state in
            guard !state.interrupted else { throw Interrupted() }
            let directory = try TemporaryDirectory(prefix: prefix)
            state.directories.insert(directory.path)
            return directory
        }
    }

    /// Thrown by ``temporaryDirectory(prefix:)`` once the handler has begun.
    struct Interrupted: Error, CustomStringConvertible {
        var description: String { "bench: interrupted" }
    }

    /// Removes `directory` (made by ``temporaryDirectory(prefix:)``), unless the handler has begun: then it removes
    /// it. The removal holds the lock, so the two never remove one tree at once (two removals racing each other
    /// each failed on what the other had taken, and left the directory).
    static func remove(_ directory: TemporaryDirectory) {
        Self.state.withLockedValue { state in
            guard !state.interrupted, state.directories.remove(directory.path) != nil else { return }
            directory.remove()
        }
    }

    /// A child the handler kills if the bench is interrupted; call ``ended(_:)`` once it has been waited for.
    static func started(_ process: Process) {
        Self.state.withLockedValue { $0.processes[ObjectIdentifier(process)] = process }
    }

    static func ended(_ process: Process) {
        Self.state.withLockedValue { _ = $0.processes.removeValue(forKey: ObjectIdentifier(process)) }
    }

    /// Called by the command's end (`PinningCommand.main`) before it prints or exits: once the handler has begun,
    /// it alone ends the process (with 130 or 143), not a bench that failed because its children were killed.
    static func waitIfInterrupted() {
        guard Self.state.withLockedValue({ $0.interrupted }) else { return }
        while true { pause() }
    }

    /// Kills the children (SIGKILL, as the benches' own stop does: a child's clean shutdown measures nothing),
    /// waits for them, removes the directories, exits 128 + `number`.
    private static func interrupted(by number: Int32) {
        let (processes, directories) = Self.state.withLockedValue { state -> ([Process], Set<String>) in
            state.interrupted = true
            return (Array(state.processes.values), state.directories)
        }
        // Only children Foundation has not reaped yet (`isRunning` turns false once it has waited for one): a
        // child that ended and was reaped before the bench called `ended` no longer owns its PID, which may by now
        // be an unrelated process's. What remains is the instant between this check and the kill: the child
        // would have to be reaped in it and the system's PIDs wrap round to its number.
        for process in processes where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
        }
        // A bounded wait (2 s) for Foundation to reap them: a child that cannot be reaped must not keep the bench
        // from exiting.
        let deadline = DispatchTime.now() + .seconds(2)
        while processes.contains(where: \.isRunning), DispatchTime.now() < deadline {
            usleep(1000)
        }
        for path in directories {
            do {
                try FileManager.default.removeItem(atPath: path)
            } catch {
                // Already gone (the bench's own `defer` got there first), or not removable: exit regardless.
            }
        }
        // write(2) on descriptor 2 (FileHandle's write takes no stdio lock), then _exit: `exit` flushes stdio's
        // streams, and would hang here for good if the main thread held stdout's lock, blocked writing to a full
        // pipe. What the bench printed before is flushed only if stdout's lock is free now (a non-blocking try):
        // the lines it had printed still reach a pipe, as with `exit`; when the main thread is writing, they are
        // dropped (the results of an interrupted run are incomplete anyway).
        StandardOutput.flushIfFree()
        FileHandle.standardError.write(Data("pinning: bench: interrupted; children stopped, scratch directories removed\n".utf8))
        _exit(128 + number)
    }
}
