import Foundation
import NIOConcurrencyHelpers
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What bounds a ``PinSetUpdater`` refresh: its overall time (``PinSetUpdater/Options/refreshTimeout``, kept under
/// ``PinSetUpdater/Options/lockWait``) and the cancellation of the task that started it, even while it waits for the
/// state directory's lock.
@Suite("PinSetUpdater: a refresh ends within its time, and when cancelled")
struct PinSetRefreshBoundsTests {
    /// A repository that answers nothing for `seconds`, then fails (a slow server, within each fetch's own timeouts).
    struct SlowFetcher: TUFFetching {
        let seconds: Int
        let calls = NIOLockedValueBox(0)
        func fetch(_ url: URL, maximumLength: Int) async throws(TUFFetchError) -> [UInt8] {
            self.calls.withLockedValue { $0 += 1 }
            do {
                try await Task.sleep(for: .seconds(self.seconds))
            } catch {
                throw TUFFetchError(kind: .failed, message: "\(url.absoluteString): the fetch was cancelled")
            }
            throw TUFFetchError(kind: .failed, message: "\(url.absoluteString): the slow server gave up")
        }
    }

    static func updater(_ repository: PinSetTestRepository, directory: TemporaryDirectory, options: PinSetUpdater.Options, fetcher: any TUFFetching) throws -> PinSetUpdater {
        try PinSetUpdater(bootstrapRoot: repository.bootstrapRoot, directory: directory.path("state"), metadataURL: repository.metadataURL, options: options, fetcher: fetcher)
    }

    @Test("a refresh whose fetches outlast three quarters of lockWait fails at that time, changing nothing, and frees the lock for the next")
    func refreshTimeout() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-refresh-timeout")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        var options = PinSetUpdater.Options()
        // 2 s of lockWait: a refresh may hold the lock 1.5 s (the default refreshTimeout, 90 s, is longer).
        options.lockWait = .seconds(2)
        let updater = try Self.updater(repository, directory: directory, options: options, fetcher: SlowFetcher(seconds: 30))
        let started = ContinuousClock.now
        let outcome = await updater.refresh()
        let elapsed = ContinuousClock.now - started
        guard case .failed(let line) = outcome else {
            Issue.record("a refresh whose server never answered: \(outcome)")
            return
        }
        #expect(line.contains("not fetched: the refresh did not end within its 1.5 seconds (PinSetUpdater.Options.refreshTimeout)"), "\(line)")
        #expect(!line.contains("\n"))
        // 1.5 s, and room for a loaded machine (the suite runs beside others on two cores); without the bound, 30 s.
        #expect(elapsed < .seconds(15), "the refresh took \(elapsed)")
        #expect(updater.currentConfiguration() == nil)
        // The lock is free: a second updater of the directory takes it at once (its own refresh times out the same).
        let lock = open(directory.path("state/.pinset.lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        try #require(lock >= 0)
        defer { close(lock) }
        #expect(flock(lock, LOCK_EX | LOCK_NB) == 0)
    }

    @Test("cancelling the task that started a refresh ends its wait for the state lock at once; nothing changes")
    func lockWaitCancelled() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-lock-cancel")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        var options = PinSetUpdater.Options()
        options.lockWait = .seconds(30)
        let fetcher = SlowFetcher(seconds: 1)
        let updater = try Self.updater(repository, directory: directory, options: options, fetcher: fetcher)
        // Another refresh of the directory holds the lock (flock locks of two descriptors conflict).
        let held = open(directory.path("state/.pinset.lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        try #require(held >= 0)
        defer { close(held) }
        try #require(flock(held, LOCK_EX | LOCK_NB) == 0)
        let refresh = Task { await updater.refresh() }
        try await Task.sleep(for: .milliseconds(300))
        let cancelled = ContinuousClock.now
        refresh.cancel()
        let outcome = await refresh.value
        let elapsed = ContinuousClock.now - cancelled
        // At once, with room for a loaded machine; without it, the whole 30 s of lockWait.
        #expect(elapsed < .seconds(15), "the wait went on \(elapsed) after its task was cancelled")
        guard case .failed(let line) = outcome else {
            Issue.record("a refresh cancelled while waiting for the lock: \(outcome)")
            return
        }
        #expect(line.contains("the refresh was cancelled while waiting for another refresh of this pin set directory; nothing changed"), "\(line)")
        #expect(fetcher.calls.withLockedValue { $0 } == 0, "a fetch was made without the lock")
        #expect(updater.status.consecutiveFailures == 1)
    }
}
