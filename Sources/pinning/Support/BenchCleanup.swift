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
        var processes: Set<Int32> = []
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
    static func temporaryDirectory(prefix: String) throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory(prefix: prefix)
        Self.state.withLockedValue { _ = $0.directories.insert(directory.path) }
        return directory
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
        let pid = process.processIdentifier
        Self.state.withLockedValue { _ = $0.processes.insert(pid) }
    }

    static func ended(_ process: Process) {
        let pid = process.processIdentifier
        Self.state.withLockedValue { _ = $0.processes.remove(pid) }
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
        let (processes, directories) = Self.state.withLockedValue { state -> (Set<Int32>, Set<String>) in
            state.interrupted = true
            return (state.processes, state.directories)
        }
        for pid in processes {
            kill(pid, SIGKILL)
        }
        // Foundation's Process reaps its children itself; until it has, kill(pid, 0) still finds them. A bounded
        // wait (2 s): a child that cannot be reaped must not keep the bench from exiting.
        let deadline = DispatchTime.now() + .seconds(2)
        while processes.contains(where: { kill($0, 0) == 0 }), DispatchTime.now() < deadline {
            usleep(1000)
        }
        for path in directories {
            do {
                try FileManager.default.removeItem(atPath: path)
            } catch {
                // Already gone (the bench's own `defer` got there first), or not removable: exit regardless.
            }
        }
        FileHandle.standardError.write(Data("pinning: bench: interrupted; children stopped, scratch directories removed\n".utf8))
        Foundation.exit(128 + number)
    }
}
