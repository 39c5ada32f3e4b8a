import Crypto
public import Foundation
import NIOConcurrencyHelpers
public import Pinning

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Follows a pin set published in a TUF repository: a pinning configuration (the format `pinning check --config`
/// reads) and the files it names (anchors, CRLs), all targets of one repository, verified by ``TUFUpdater``, and
/// handed to clients as the ``/Pinning/PinningConfigurationSource`` they judge new connections by.
///
/// <!-- snippet: given(rootJSON: [UInt8], client: PinnedHTTPClient)
/// import Foundation
/// -->
/// ```swift
/// let updater = try PinSetUpdater(
///     bootstrapRoot: rootJSON, directory: "/var/lib/myapp/pins",
///     metadataURL: URL(string: "https://pins.example.com/metadata/")!, fetcher: TUFHTTPFetcher(client: client))
/// await updater.refresh()
/// let api = try PinnedHTTPClient(configurationSource: updater)
/// Task { await updater.run() }   // every hour (± 10 %), sooner after a failure
/// ```
///
/// The rules it keeps:
/// - **Last good, never fail open.** A refresh that fails (no connection) or is refused (a bad signature, a
///   rollback, a freeze, an oversized file, a hash mismatch, an invalid configuration) changes nothing: the last
///   good configuration stays enforced, and ``status`` says what went wrong in one line. When the metadata that
///   vouched for it has expired and no refresh succeeded since, it is still enforced and reported stale
///   (``PinSetStatus/stale``, ``PinSetStatus/secondsStale``). Pins are never dropped for want of an update.
/// - **One consistent set.** The configuration and every file it names are targets of the same trusted targets
///   metadata, fetched in one refresh and loaded together; a file it names that is not such a target, or a path
///   leaving the pin set's directory, refuses the whole set. A pin set carries no client identity (private keys
///   are not published): one that names one is refused.
/// - **Persisted.** The accepted set is kept in `directory` (`pinsets/`, committed by an atomic write of
///   `current.json`), so a restart enforces it before any network access. TUF's own metadata is in `metadata/`.
/// - **Monotonic.** A pin set whose targets version is older than the last good one's is refused even if the
///   metadata directory was lost (the TUF rollback checks need it).
/// - **Shared.** Several updaters, in one process or several, may keep their state in one directory: each refresh
///   holds `.pinset.lock` there (`flock`, waited for up to ``Options/lockWait``), so one refresh's downloads and
///   commit never meet another's (which would remove the set being written, or write metadata under it).
///
/// The version of a pin set is the version of the top-level targets metadata that vouched for it: it changes
/// with every publication and never goes back. Failure reports carry it (`pinset-version`).
public actor PinSetUpdater: PinningConfigurationSource {
    /// Where and how often.
    public struct Options: Sendable {
        /// The target that holds the configuration (a path in the repository).
        public var targetName: String
        /// Where targets are downloaded from; nil: the `targets/` folder beside the metadata URL's last path segment
        /// (`https://h/repo/metadata/` → `https://h/repo/targets/`), as a repository `pinning pinset` writes.
        public var targetsURL: URL?
        /// The time between refreshes that succeed (default one hour); each is spread by ``jitter``.
        public var refreshInterval: Duration
        /// The fraction by which each delay is spread at random, both ways (default 0.1: ±10 %), so a fleet started
        /// together does not ask the repository at the same instant.
        public var jitter: Double
        /// The delay after a first failure; it doubles with each further one, up to ``refreshInterval`` (a failing
        /// repository is asked less and less often, and never less often than when it works).
        public var firstRetryDelay: Duration
        /// Caps for metadata (TUF's endless-data protection).
        public var limits: TUFLimits
        /// The largest file the pin set may name (an anchor, a CRL).
        public var maximumReferencedFileSize: Int
        /// The largest configuration the pin set may carry: ``/Pinning/PinningConfiguration/maximumPinSetSize``
        /// (16 MiB, where that explains why) by default, not the 1 MiB of a configuration file read from disk. A
        /// target the signed metadata lists as longer is refused before it is downloaded.
        public var maximumConfigurationSize: Int
        /// Set as the ``/Pinning/PinningConfiguration/reportQueue`` of every configuration published.
        public var reportQueue: (any PinFailureReporting)?
        /// How long a refresh waits for another updater's refresh of the same directory (its `.pinset.lock`) before
        /// it fails, changing nothing (default two minutes); the next refresh on the schedule tries again.
        ///
        /// Nothing bounds a whole refresh: only each fetch is bounded, by the fetcher's own timeouts (with
        /// ``TUFHTTPFetcher`` over a ``PinnedHTTPClient``, its configuration's: by default 10 s to connect and 30 s
        /// per request), and a refresh that applies a new pin set makes at least five (the next root version,
        /// timestamp, snapshot, targets, the configuration), more with new root versions and referenced files; a
        /// fetcher without timeouts bounds nothing. So an honest but slow
        /// refresh can hold the lock longer than this wait. The wait polls on a thread of its own and does not end
        /// when its task is cancelled.
        public var lockWait: Duration = .seconds(120)

        public init(
            targetName: String = "pinning.json", targetsURL: URL? = nil, refreshInterval: Duration = .seconds(3600), jitter: Double = 0.1,
            firstRetryDelay: Duration = .seconds(60), limits: TUFLimits = TUFLimits(), maximumReferencedFileSize: Int = 16 * 1024 * 1024,
            reportQueue: (any PinFailureReporting)? = nil, maximumConfigurationSize: Int = PinningConfiguration.maximumPinSetSize
        ) {
            self.maximumConfigurationSize = maximumConfigurationSize
            self.targetName = targetName
            self.targetsURL = targetsURL
            self.refreshInterval = refreshInterval
            self.jitter = jitter
            self.firstRetryDelay = firstRetryDelay
            self.limits = limits
            self.maximumReferencedFileSize = maximumReferencedFileSize
            self.reportQueue = reportQueue
        }
    }

    /// What one refresh did.
    public enum Outcome: Sendable, Equatable {
        /// A new pin set was verified, stored and published.
        case updated(version: Int)
        /// The metadata was verified and names the pin set already enforced.
        case unchanged(version: Int)
        /// Nothing changed: the line says why (which role, which rule, or which file or connection). Display text,
        /// as ``PinSetStatus/lastError`` (the same line).
        case failed(String)
    }

    /// The directory of this updater's state.
    public nonisolated let directory: String
    public nonisolated let metadataURL: URL
    /// ``Options/targetsURL``, or the default beside the metadata URL.
    public nonisolated let targetsURL: URL
    public nonisolated let options: Options
    nonisolated let fetcher: any TUFFetching
    nonisolated let clock: @Sendable () -> Date
    nonisolated let log: (@Sendable (String) -> Void)?
    private nonisolated let state: NIOLockedValueBox<State>
    private var inFlight: Task<Outcome, Never>?

    struct State {
        var current: CurrentConfiguration?
        var record: PinSetRecord?
        var lastError: String?
        var lastAttempt: Date?
        var consecutiveFailures = 0
        /// Why the pin set kept in the directory was not loaded at start (display text); kept after a refresh
        /// overwrote ``lastError``, so "none kept" is never said of a directory whose pin set was refused.
        var storedRejection: String?
    }

    /// Why the pin set kept in ``directory`` was not used when this updater started (edited, removed or unreadable
    /// files: display text), nil when none was kept or it was loaded. `pinning check` and `pinning proxy` say it when
    /// they have no pin set at all, rather than "none kept".
    package nonisolated var storedRejection: String? { self.state.withLockedValue { $0.storedRejection } }

    /// An updater that enforces the pin set stored in `directory`, if any, at once (no network), and takes the
    /// bootstrap root as its trust in the repository the first time (afterwards the stored, possibly rotated,
    /// root is used).
    ///
    /// - Parameters:
    ///   - bootstrapRoot: The repository's `root.json` shipped with the client (verified at the first refresh:
    ///     it must be signed by a threshold of its own keys).
    ///   - directory: Where the state lives (created when missing).
    ///   - metadataURL: The repository's metadata URL.
    ///   - options: The target, where targets are downloaded from, the refresh timing and the limits (``Options``).
    ///   - fetcher: How to fetch (``TUFHTTPFetcher``).
    ///   - clock: The time: each refresh's TUF start time, and staleness. Tests move it.
    ///   - log: Told what was refused, applied or skipped, one line each. Display text: a peer's text in it (a
    ///     repository's role names and target paths, its server's words, a local path, the system's words) is
    ///     escaped by VisibleText, once, so the line is printed as it is; escaping it again would show each escape
    ///     as the sender's literal text (`\u{5c}u{1b}` for an ESC).
    /// - Throws: ``PinSetError`` when the directory cannot be made or the bootstrap root cannot be stored.
    public init(
        bootstrapRoot: [UInt8], directory: String, metadataURL: URL, options: Options = Options(), fetcher: any TUFFetching,
        clock: @escaping @Sendable () -> Date = { Date() }, log: (@Sendable (String) -> Void)? = nil
    ) throws(PinSetError) {
        try Self.checkTargetPath(options.targetName, what: "the target name")
        self.directory = directory
        var text = metadataURL.absoluteString
        if !text.hasSuffix("/") { text += "/" }
        self.metadataURL = URL(string: text) ?? metadataURL
        self.targetsURL = options.targetsURL ?? Self.defaultTargetsURL(metadataURL: self.metadataURL)
        self.options = options
        self.fetcher = fetcher
        self.clock = clock
        self.log = log
        self.state = NIOLockedValueBox(State())
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw PinSetError("\(VisibleText.escaped(directory)): not a directory; the pin set's state is kept in a directory (created when missing)")
        }
        do {
            try TUFFiles.makeDirectories(directory + "/metadata")
            try TUFFiles.makeDirectories(directory + "/pinsets")
        } catch {
            throw PinSetError("\(VisibleText.escaped(directory)): cannot create the state directory: \(error.description)")
        }
        // Apart from a refresh of another updater sharing the directory (``whileLocked(_:)``), which may store a
        // newer root than the bootstrap one, or commit and remove the set being read. One attempt, never waited
        // for: this initializer is synchronous (it may run on an event loop or the cooperative pool), and a refresh
        // may hold the lock for as long as its downloads take. Going on without it is safe by construction, only
        // less lucky: the bootstrap root is stored with `link(2)`, only where no `root.json` is (never replacing a
        // newer one a refresh stored), and every stored pin-set file is checked against its recorded sha256, so a
        // set removed under this reading is not used (no pin set until a refresh), never a mixed one.
        let lockPath = directory + "/.pinset.lock"
        let lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        defer { if lock >= 0 { close(lock) } }
        if lock < 0 {
            log?("\(VisibleText.escaped(lockPath)): cannot open (\(SystemErrorText.text(errno))); reading the stored pin set without the lock")
        } else if flock(lock, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            let why = code == EWOULDBLOCK ? "held by a refresh sharing the directory" : "cannot be taken (\(SystemErrorText.text(code)))"
            log?("\(VisibleText.escaped(lockPath)): \(why); reading the stored pin set without the lock")
        }
        if !FileManager.default.fileExists(atPath: directory + "/metadata/root.json") {
            do {
                try TUFUpdater.initializeIfAbsent(metadataDirectory: directory + "/metadata", trustedRoot: bootstrapRoot)
            } catch {
                throw PinSetError("\(VisibleText.escaped(directory)): the bootstrap root was not stored: \(error)")
            }
        }
        self.loadStored()
    }

    /// `…/metadata/` → `…/targets/`: the metadata URL's last path segment replaced.
    public static func defaultTargetsURL(metadataURL: URL) -> URL {
        guard var components = URLComponents(url: metadataURL, resolvingAgainstBaseURL: false) else { return metadataURL }
        var segments = components.percentEncodedPath.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if !segments.isEmpty { segments.removeLast() }
        components.percentEncodedPath = "/" + (segments + ["targets"]).joined(separator: "/") + "/"
        return components.url ?? metadataURL
    }

    // MARK: - What clients read

    /// The configuration new connections are judged by: the last good pin set, whatever later refreshes did.
    public nonisolated func currentConfiguration() -> CurrentConfiguration? {
        self.state.withLockedValue { $0.current }
    }

    /// Version, target, digest, last refresh, staleness and the last error, judged at the clock's now.
    public nonisolated var status: PinSetStatus {
        let now = self.clock()
        return self.state.withLockedValue { state in
            let freshUntil = state.record?.freshUntil
            let secondsStale = freshUntil.map { max(0, Int(now.timeIntervalSince($0).rounded(.down))) } ?? 0
            return PinSetStatus(
                version: state.record?.version,
                targetName: state.record?.targetName ?? self.options.targetName,
                sha256: state.record?.sha256,
                refreshed: state.record?.refreshed,
                freshUntil: freshUntil,
                stale: freshUntil.map { now >= $0 } ?? false,
                secondsStale: secondsStale,
                lastError: state.lastError,
                lastAttempt: state.lastAttempt,
                consecutiveFailures: state.consecutiveFailures
            )
        }
    }

    // MARK: - Refreshing

    /// Refreshes now. A refresh already under way is joined, not repeated.
    @discardableResult
    public func refresh() async -> Outcome {
        if let inFlight = self.inFlight {
            return await inFlight.value
        }
        let task = Task { await self.performRefresh() }
        self.inFlight = task
        let outcome = await task.value
        self.inFlight = nil
        return outcome
    }

    /// Refreshes on the schedule until the task is cancelled: ``Options/refreshInterval`` after a success,
    /// ``nextDelay(afterFailures:options:random:)`` after failures, each spread by the jitter. `onOutcome` is told
    /// the outcome of every refresh (a new configuration is already published when it is called).
    public func run(onOutcome: (@Sendable (Outcome) async -> Void)? = nil) async {
        var generator = SystemRandomNumberGenerator()
        while !Task.isCancelled {
            let failures = self.state.withLockedValue { $0.consecutiveFailures }
            let delay = Self.nextDelay(afterFailures: failures, options: self.options, random: Double.random(in: -1...1, using: &generator))
            do {
                try await Task.sleep(for: delay)
            } catch {
                return
            }
            let outcome = await self.refresh()
            await onOutcome?(outcome)
        }
    }

    /// The delay before the next refresh: the interval after a success, `firstRetryDelay × 2^(failures−1)` (at
    /// most the interval) after failures; spread by `random × jitter` (`random` in −1…1).
    public static func nextDelay(afterFailures failures: Int, options: Options, random: Double) -> Duration {
        var base = options.refreshInterval
        if failures > 0 {
            let doublings = min(failures - 1, 30)
            let retry = options.firstRetryDelay * (1 << doublings)
            base = min(retry, options.refreshInterval)
        }
        let spread = max(-1, min(1, random)) * max(0, min(1, options.jitter))
        let seconds = Double(base.components.seconds) + Double(base.components.attoseconds) / 1e18
        return .milliseconds(Int64((seconds * (1 + spread) * 1000).rounded()))
    }

    private func performRefresh() async -> Outcome {
        let start = self.clock()
        do {
            let outcome = try await self.whileLocked { () async throws(PinSetError) -> Outcome in try await self.attempt(startTime: start) }
            self.state.withLockedValue { state in
                state.lastError = nil
                state.lastAttempt = start
                state.consecutiveFailures = 0
            }
            return outcome
        } catch {
            let line = error.message
            self.state.withLockedValue { state in
                state.lastError = line
                state.lastAttempt = start
                state.consecutiveFailures += 1
            }
            let version = self.state.withLockedValue { $0.record?.version }
            self.log?("pin set refresh refused, \(version.map { "version \($0) stays enforced" } ?? "no pin set is enforced"): \(line)")
            return .failed(line)
        }
    }

    private func attempt(startTime: Date) async throws(PinSetError) -> Outcome {
        var tuf = TUFUpdater(
            metadataDirectory: self.directory + "/metadata", metadataURL: self.metadataURL, fetcher: self.fetcher, limits: self.options.limits, log: nil)
        let trusted: TUFTrustedSet
        do {
            trusted = try await tuf.refresh(startTime: startTime)
        } catch {
            throw PinSetError(error.description)
        }
        guard let targets = trusted.targets, let timestamp = trusted.timestamp, let snapshot = trusted.snapshot else {
            throw PinSetError("targets: not trusted after the refresh")
        }
        let version = targets.version
        let freshUntil = Date(
            timeIntervalSince1970: TimeInterval(min(trusted.root.envelope.expires, timestamp.envelope.expires, snapshot.envelope.expires, targets.envelope.expires)))
        let previous = self.state.withLockedValue { $0.record }
        if let previous, version < previous.version {
            throw PinSetError("targets: version \(version) is older than the pin set enforced (version \(previous.version))")
        }

        let name = self.options.targetName
        let main = try await self.targetInfo(&tuf, name)
        guard main.length <= self.options.maximumConfigurationSize else {
            throw PinSetError("\(TUFError.printable(name)): the repository lists \(main.length) bytes, over the \(self.options.maximumConfigurationSize)-byte cap of a configuration")
        }
        guard let mainDigest = main.hashes["sha256"] else {
            throw PinSetError("\(TUFError.printable(name)): the repository lists no sha256 for it")
        }

        // Nothing new: the same configuration and the same files, by their trusted hashes.
        if let previous, previous.sha256 == mainDigest {
            var same = true
            for (path, digest) in previous.files where path != name {
                // A file no longer listed is not an error here: the full path below downloads the set as it is now
                // listed, and refuses it if it is incomplete. `try?` is safe: an error makes `info` nil, which is
                // "not the same", so it can only send the refresh down the full, verified path, never accept.
                let info = try? await tuf.targetInfo(path)
                if info?.hashes["sha256"] != digest { same = false }
            }
            // The same files under the same targets, laid out as before (the publisher may have remapped them).
            if let mapping = try Self.fileMapping(main) {
                let referenced = previous.files.keys.filter { $0 != name }
                if Set(mapping.values) != Set(referenced) || previous.layout != Self.layout(mapping, targetName: name) { same = false }
            }
            if same {
                var record = previous
                record.version = version
                record.refreshed = startTime
                record.freshUntil = freshUntil
                // current.json is rewritten (two flushes) only when what a restart relies on changed: the version
                // (the monotonic check) or the expiry (staleness). The time of a refresh that found nothing else new
                // is kept in memory (``status``) and written with the next change, so after a restart `refreshed`
                // may be an earlier refresh's: it can only understate how recently the set was confirmed.
                if record.version != previous.version || record.freshUntil != previous.freshUntil {
                    try self.commit(record)
                }
                self.state.withLockedValue { state in
                    state.record = record
                    if let current = state.current, current.generation != version {
                        var configuration = current.configuration
                        configuration.pinsetVersion = version
                        state.current = CurrentConfiguration(configuration: configuration, generation: version)
                    }
                }
                return .unchanged(version: version)
            }
        }

        // Download into the set's own new directory, laid out as the repository's target paths. Nothing names it
        // until current.json does (the commit below), so its files are written without waiting for the disk, and
        // flushed (every file, then its directories and its entry in `pinsets/`) on another thread while the
        // configuration is read; the commit waits for that flush. A set refused, or left by a crash, is never
        // named, and is removed (at once, or by the next commit).
        let pinsets = self.directory + "/pinsets"
        let final = "v\(version)-" + String(mainDigest.prefix(16)) + "-" + TUFFiles.randomSuffix()
        let staging = pinsets + "/" + final
        do {
            try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        } catch {
            throw PinSetError("\(VisibleText.escaped(staging)): cannot create: \(VisibleText.escaped((error as NSError).localizedDescription))")
        }
        var committed = false
        defer {
            // A set refused before the commit is removed; if that fails it is only left behind, never trusted:
            // nothing names it (current.json names the previous set), a restart loads only what current.json
            // names after checking each of its files' sha256, and the next commit removes it.
            if !committed { self.removeLeftover(staging) }
        }
        var staged = StagedFiles(root: staging, parent: pinsets)
        let configurationBytes = try await self.download(&tuf, main, into: &staged, as: name)
        // Read once: the files it names are taken from this reading, and the same reading is loaded below.
        let text = PinningConfiguration.Text(Data(configurationBytes), maximumSize: self.options.maximumConfigurationSize)
        var files = [name: mainDigest]
        var layout: [String: String] = [:]
        for (local, reference) in try Self.referencedFiles(text, targetName: name, mapping: try Self.fileMapping(main)) {
            let info = try await self.targetInfo(&tuf, reference)
            guard info.length <= self.options.maximumReferencedFileSize else {
                throw PinSetError("\(TUFError.printable(reference)): the repository lists \(info.length) bytes, over the cap of \(self.options.maximumReferencedFileSize) bytes")
            }
            guard let digest = info.hashes["sha256"] else { throw PinSetError("\(TUFError.printable(reference)): the repository lists no sha256 for it") }
            _ = try await self.download(&tuf, info, into: &staged, as: local)
            files[reference] = digest
            if local != reference { layout[reference] = local }
        }

        // On a refusal below the flush's result is not used (the set's directory is removed, flushed or not).
        async let flushed = Self.flush(staged)
        var configuration: PinningConfiguration
        let base = (staging + "/" + name as NSString).deletingLastPathComponent
        do {
            configuration = try PinningConfiguration(text: text, baseDirectory: base, origin: "\(name) of pin set version \(version)")
        } catch {
            // One line: the problems one after another. They quote the configuration (the repository's text) as it
            // is: escaped here.
            let count = error.problems.count == 1 ? "1 problem" : "\(error.problems.count) problems"
            throw PinSetError(
                "invalid pinning configuration \(VisibleText.escaped(error.origin)): \(count): " + error.problems.map { VisibleText.escaped($0.description) }.joined(separator: "; "))
        }
        if let position = configuration.entries.firstIndex(where: { $0.clientIdentity != nil }) {
            let key = VisibleText.quoted(configuration.entries[position].key, limit: 200)
            throw PinSetError("\(TUFError.printable(name)): entry \(key) names a clientIdentity; a pin set carries no private keys, so it is refused")
        }

        // Commit: once the set is on disk in full (the flush above), current.json naming it (written and flushed,
        // renamed, the state directory flushed: the commit point), then the old sets go. A crash before the commit
        // point leaves current.json naming the previous set, whole; after it, the set it names is whole too. From
        // here the set's directory is kept even if writing current.json fails (it may already name it).
        if let failure = await flushed {
            throw PinSetError(failure.description)
        }
        committed = true
        let record = PinSetRecord(
            version: version, targetName: name, sha256: mainDigest, directory: "pinsets/" + final, files: files, layout: layout.isEmpty ? nil : layout,
            refreshed: startTime, freshUntil: freshUntil)
        try self.commit(record)
        self.removeLeftovers(in: pinsets, keeping: final)
        // The configuration was read from the set's directory; its anchors and CRLs are values already loaded.
        configuration.pinsetVersion = version
        configuration.reportQueue = self.options.reportQueue
        let published = CurrentConfiguration(configuration: configuration, generation: version)
        self.state.withLockedValue { state in
            state.record = record
            state.current = published
        }
        let entries = configuration.entries.count
        self.log?("pin set version \(version) applied (\(TUFError.printable(name)), sha256 \(mainDigest.prefix(16))…, \(entries) entr\(entries == 1 ? "y" : "ies"))")
        return .updated(version: version)
    }

    /// Runs `body` holding the state directory's `.pinset.lock` (`flock`, exclusive): one refresh at a time per
    /// directory, whichever process or updater runs it. Without it, updaters sharing a directory (clients started
    /// together on one `--pinset-dir`) removed each other's set while it was being written, as a leftover, and
    /// refused it. The lock is waited for, polled, up to ``Options/lockWait``; it is released when `body` ends, or
    /// by the system when the process does.
    private func whileLocked<Value>(_ body: () async throws(PinSetError) -> Value) async throws(PinSetError) -> Value {
        let path = self.directory + "/.pinset.lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw PinSetError("\(VisibleText.escaped(path)): cannot open: \(TUFFiles.words(errno))") }
        defer { close(descriptor) }
        if flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            try await Self.waitForLock(descriptor, path: path, wait: self.options.lockWait)
        }
        defer { flock(descriptor, LOCK_UN) }
        return try await body()
    }

    /// Takes the lock on `descriptor` once the refresh holding it ends, polling on a thread of its own (20 ms
    /// apart, up to `wait`). Not `Task.sleep`: under a shifted clock (faketime, as the expiry tests run the CLI) its
    /// timer never fired and a waiting client hung; a plain sleep on a thread does not depend on that timer.
    private static func waitForLock(_ descriptor: CInt, path: String, wait: Duration) async throws(PinSetError) {
        let refusal = await withCheckedContinuation { (continuation: CheckedContinuation<PinSetError?, Never>) in
            DispatchQueue.global().async {
                let deadline = ContinuousClock.now + wait
                while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
                    let code = errno
                    guard code == EWOULDBLOCK || code == EINTR else {
                        continuation.resume(returning: PinSetError("\(VisibleText.escaped(path)): cannot lock: \(TUFFiles.words(code))"))
                        return
                    }
                    guard ContinuousClock.now < deadline else {
                        continuation.resume(
                            returning: PinSetError("\(VisibleText.escaped(path)): another refresh of this pin set directory has held it for over \(wait); nothing changed"))
                        return
                    }
                    usleep(20_000)
                }
                continuation.resume(returning: nil)
            }
        }
        if let refusal { throw refusal }
    }

    private func targetInfo(_ tuf: inout TUFUpdater, _ path: String) async throws(PinSetError) -> TUFTargetFile {
        do {
            return try await tuf.targetInfo(path)
        } catch {
            throw PinSetError(error.description)
        }
    }

    /// Downloads and verifies `target` (length, every hash), writes it at `local` (a path under the staging
    /// directory, where the configuration expects it; flushed later by ``StagedFiles/flush()``), and returns its bytes.
    private func download(_ tuf: inout TUFUpdater, _ target: TUFTargetFile, into staged: inout StagedFiles, as local: String) async throws(PinSetError) -> [UInt8] {
        let bytes: [UInt8]
        do {
            bytes = try await tuf.fetchTarget(target, from: self.targetsURL)
        } catch {
            throw PinSetError(error.description)
        }
        let destination = staged.root + "/" + local
        guard !FileManager.default.fileExists(atPath: destination) else {
            throw PinSetError("\(TUFError.printable(target.path)): would be stored at \(TUFError.printable(local)), where another file of the pin set is")
        }
        try staged.createParents(of: local)
        do {
            try TUFFiles.createFile(bytes, path: destination, role: target.path)
        } catch {
            throw PinSetError(error.description)
        }
        staged.files.append(destination)
        return bytes
    }

    /// `staged.flush()` on a thread of its own (the flushes wait for the disk): the refusal, nil once all is on disk.
    private static func flush(_ staged: StagedFiles) async -> TUFError? {
        await withCheckedContinuation { (continuation: CheckedContinuation<TUFError?, Never>) in
            DispatchQueue.global().async {
                do throws(TUFError) {
                    try staged.flush()
                    continuation.resume(returning: nil)
                } catch {
                    continuation.resume(returning: error)
                }
            }
        }
    }

    /// A pin set being written: the files written and the directories made under ``root`` (a new directory in
    /// `parent`), to be flushed before the set is committed.
    struct StagedFiles: Sendable {
        let root: String
        let parent: String
        var files: [String] = []
        /// ``root`` and every directory made below it, each once.
        var directories: [String]
        private var known: Set<String>

        init(root: String, parent: String) {
            self.root = root
            self.parent = parent
            self.directories = [root]
            self.known = [root]
        }

        /// Makes the directories above `local` (a relative path under ``root``) that do not exist yet.
        mutating func createParents(of local: String) throws(PinSetError) {
            var components = local.split(separator: "/").map(String.init)
            components.removeLast()
            var path = self.root
            for component in components {
                path += "/" + component
                if self.known.contains(path) { continue }
                guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
                    throw PinSetError("\(VisibleText.escaped(path)): cannot create: \(TUFFiles.words(errno))")
                }
                self.known.insert(path)
                self.directories.append(path)
            }
        }

        /// Every file's contents, then every directory (deepest first), then ``parent`` (where ``root`` was made),
        /// flushed to disk.
        func flush() throws(TUFError) {
            for file in self.files {
                try TUFFiles.syncFile(file, role: file)
            }
            for directory in self.directories.reversed() {
                try TUFFiles.syncDirectory(directory, role: directory)
            }
            try TUFFiles.syncDirectory(self.parent, role: self.parent)
        }
    }

    // MARK: - Files the configuration names

    /// The files the configuration names (anchors, CRLs): for each, where it goes under the pin set's directory
    /// (the configuration's directory joined with the path as the configuration writes it) and the target it is.
    ///
    /// With `mapping` (the configuration target's `custom.pinset.files`, which `pinning pinset publish` writes:
    /// path as written → target path) every named file must be listed there, and its target is the one listed: the
    /// publisher's word on which target is which file. Without it (a repository some other tool made) the target is
    /// the path beside the configuration's target. Only what has the expected shape is collected: anything else is
    /// the loader's to refuse, with its own words.
    static func referencedFiles(_ text: PinningConfiguration.Text, targetName: String, mapping: [String: String]?) throws(PinSetError) -> [(local: String, target: String)] {
        let written = PinningConfiguration.filesNamed(in: text)
        let slash = targetName.lastIndex(of: "/")
        let base = slash.map { String(targetName[...$0]) } ?? ""
        var files: [(local: String, target: String)] = []
        // Looked up by local path and by target, not searched: a pin set of 10,000 hosts may name a file per host.
        var locals: Set<String> = []
        var localOfTarget: [String: String] = [:]
        for path in written where !locals.contains(base + path) {
            try Self.checkTargetPath(path, what: "a file the configuration names")
            let target: String
            if let mapping {
                guard let listed = mapping[path] else {
                    throw PinSetError("\(TUFError.printable(targetName)): the configuration names \(TUFError.printable(path)), which its target's custom.pinset.files does not list")
                }
                try Self.checkTargetPath(listed, what: "the target custom.pinset.files lists for \(TUFError.printable(path))")
                target = listed
            } else {
                target = base + path
            }
            if let other = localOfTarget[target] {
                throw PinSetError(
                    "\(TUFError.printable(targetName)): the configuration names \(TUFError.printable(other)) and \(TUFError.printable(base + path)), which are both target \(TUFError.printable(target))"
                )
            }
            files.append((base + path, target))
            locals.insert(base + path)
            localOfTarget[target] = base + path
        }
        return files
    }

    /// The configuration target's `custom.pinset.files` (path as written → target path), nil when it has none; a
    /// `custom.pinset.files` that is not an object of strings refuses the set.
    static func fileMapping(_ target: TUFTargetFile) throws(PinSetError) -> [String: String]? {
        guard let pinset = target.custom?.objectValue?["pinset"], let files = pinset.objectValue?["files"] else { return nil }
        guard let object = files.objectValue else { throw PinSetError("\(TUFError.printable(target.path)): custom.pinset.files is not an object") }
        var mapping: [String: String] = [:]
        for member in object.members {
            guard let value = member.value.stringValue else {
                throw PinSetError("\(TUFError.printable(target.path)): custom.pinset.files[\(VisibleText.quoted(member.key, limit: 200))] is not a string")
            }
            mapping[member.key] = value
        }
        return mapping
    }

    /// The stored layout a refresh makes from `mapping` (target → local path, only where they differ), nil when
    /// none differ.
    static func layout(_ mapping: [String: String], targetName: String) -> [String: String]? {
        let slash = targetName.lastIndex(of: "/")
        let base = slash.map { String(targetName[...$0]) } ?? ""
        var layout: [String: String] = [:]
        for (written, target) in mapping where base + written != target {
            layout[target] = base + written
        }
        return layout.isEmpty ? nil : layout
    }

    /// Refuses a target name that is not a relative path inside the repository's targets (``Options/targetName``).
    public static func validateTargetName(_ name: String) throws(PinSetError) {
        try Self.checkTargetPath(name, what: "the target name")
    }

    /// A path inside the repository's targets: relative, no empty, `.` or `..` component, no backslash. Anything else
    /// could name a file outside the pin set on this machine. Nor any character that does not show
    /// (``VisibleText/isHidden(_:)``: C0, DEL, C1, format and bidi characters, zero-width and other default-ignorable
    /// ones): such a path would become a local file name and a log line that reads as another.
    static func checkTargetPath(_ path: String, what: String) throws(PinSetError) {
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        let bad =
            path.isEmpty || path.hasPrefix("/") || path.contains("\\")
            || path.unicodeScalars.contains { VisibleText.isHidden($0) }
            || components.contains { $0.isEmpty || $0 == "." || $0 == ".." }
        if bad {
            throw PinSetError("\(what) \(VisibleText.quoted(path, limit: 200)) is not a relative path inside the repository's targets")
        }
    }

    // MARK: - Persistence

    /// Removes every entry of `pinsets` but `kept` (the set current.json now names): the previous set, and any set
    /// a crash or a failed removal left. Each failure is logged and passed over: what is left is named by nothing, so
    /// it is never loaded (``loadStored()`` reads only the directory current.json names, checking each file's sha256),
    /// and the next commit tries again. A failure here cannot undo the commit, which has happened.
    private nonisolated func removeLeftovers(in pinsets: String, keeping kept: String) {
        let entries: [String]
        do {
            entries = try FileManager.default.contentsOfDirectory(atPath: pinsets)
        } catch {
            self.log?("\(VisibleText.escaped(pinsets)): cannot list the old pin sets to remove them (they are not used): \(VisibleText.escaped((error as NSError).localizedDescription))")
            return
        }
        for entry in entries where entry != kept {
            self.removeLeftover(pinsets + "/" + entry)
        }
    }

    /// Removes `path` (a pin set's directory that is not, or no longer, named by current.json), or logs why not.
    private nonisolated func removeLeftover(_ path: String) {
        do {
            try FileManager.default.removeItem(atPath: path)
        } catch {
            self.log?("\(VisibleText.escaped(path)): cannot remove this unused pin set directory (it is not used): \(VisibleText.escaped((error as NSError).localizedDescription))")
        }
    }

    private nonisolated func commit(_ record: PinSetRecord) throws(PinSetError) {
        let bytes: [UInt8]
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            encoder.dateEncodingStrategy = .secondsSince1970
            bytes = Array(try encoder.encode(record))
        } catch {
            throw PinSetError("cannot encode the pin set record: \(VisibleText.escaped("\(error)"))")
        }
        do {
            try TUFFiles.writeFileAtomically(bytes, directory: self.directory, name: "current.json", role: "current.json")
        } catch {
            throw PinSetError(error.description)
        }
    }

    /// Loads the last good pin set from `current.json`: every file must still have the digest recorded when it was
    /// verified, and the configuration must load. Anything else leaves no pin set enforced (fail closed) and says why.
    private nonisolated func loadStored() {
        let path = self.directory + "/current.json"
        let record: PinSetRecord
        do {
            guard let bytes = try TUFFiles.readFile(path, maximumLength: 4 * 1024 * 1024, role: "current.json") else { return }
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .secondsSince1970
            record = try decoder.decode(PinSetRecord.self, from: Data(bytes))
        } catch let error as TUFError {
            self.rejectStored("\(VisibleText.escaped(path)): \(error.description)")
            return
        } catch {
            // A decoding error's words may quote current.json, a file on this machine: escaped as any other text.
            self.rejectStored("\(VisibleText.escaped(path)): \(VisibleText.escaped("\(error)"))")
            return
        }
        do throws(PinSetError) {
            try Self.checkTargetPath(record.directory, what: "the stored directory")
            for (file, digest) in record.files {
                try Self.checkTargetPath(file, what: "a stored file")
                let local = record.layout?[file] ?? file
                try Self.checkTargetPath(local, what: "a stored file")
                let filePath = self.directory + "/" + record.directory + "/" + local
                let bytes: [UInt8]?
                do {
                    bytes = try TUFFiles.readFile(filePath, maximumLength: max(self.options.maximumReferencedFileSize, self.options.maximumConfigurationSize), role: file)
                } catch {
                    throw PinSetError(error.description)
                }
                guard let bytes, Self.sha256(bytes) == digest else {
                    throw PinSetError("\(VisibleText.escaped(filePath)) is missing or not the file that was verified")
                }
            }
            var configuration: PinningConfiguration
            do {
                configuration = try PinningConfiguration(
                    contentsOfFile: self.directory + "/" + record.directory + "/" + record.targetName, maximumSize: self.options.maximumConfigurationSize)
            } catch {
                // The configuration's problems quote its text as it is: escaped here, as every piece of this line.
                throw PinSetError(VisibleText.escaped(error.description))
            }
            configuration.pinsetVersion = record.version
            configuration.reportQueue = self.options.reportQueue
            let published = CurrentConfiguration(configuration: configuration, generation: record.version)
            self.state.withLockedValue { state in
                state.record = record
                state.current = published
            }
            self.log?("pin set version \(record.version) loaded from \(VisibleText.escaped(self.directory)) (\(TUFError.printable(record.targetName)), refreshed \(RFC3339.format(record.refreshed)))")
        } catch {
            self.rejectStored(error.message)
        }
    }

    private nonisolated func rejectStored(_ why: String) {
        let line = "the stored pin set is not used, no pin set is enforced until a refresh succeeds: \(why)"
        self.state.withLockedValue { state in
            state.lastError = line
            state.storedRejection = why
        }
        self.log?(line)
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        HexText.digits(SHA256.hash(data: bytes))
    }
}

/// What is known of a followed pin set, for `/status`, `/metrics` and reports.
public struct PinSetStatus: Sendable, Equatable {
    /// The version enforced (the top-level targets version that vouched for it), nil when none is.
    public var version: Int?
    /// The target that holds the configuration.
    public var targetName: String
    /// The configuration's SHA-256 (hex), nil when none is enforced.
    public var sha256: String?
    /// When a refresh last succeeded (the metadata verified, the set current).
    public var refreshed: Date?
    /// The earliest expiry of the metadata trusted at that refresh: after it, with no newer refresh, the pins are
    /// still enforced but stale.
    public var freshUntil: Date?
    /// Whether ``freshUntil`` has passed without a refresh succeeding since.
    public var stale: Bool
    /// How long ago ``freshUntil`` passed (0 when not stale).
    public var secondsStale: Int
    /// The last refresh's failure in one line, nil once one succeeds. Display text: a peer's text in it is escaped
    /// by VisibleText (once: print it as it is).
    public var lastError: String?
    /// When a refresh was last tried.
    public var lastAttempt: Date?
    /// Refreshes failed in a row.
    public var consecutiveFailures: Int
}

/// A pin set refused or not fetched: one line of words. Display text: a peer's text in ``message`` (a repository's
/// role names and target paths, its server's words, its configuration's text, a local path) is escaped by
/// VisibleText, once, as a ``/Pinning/TUFError``'s description is; print it as it is.
public struct PinSetError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { self.message }
}

/// `current.json`: the last good pin set, written after its files.
struct PinSetRecord: Codable, Sendable, Equatable {
    var version: Int
    var targetName: String
    var sha256: String
    /// Under the state directory: `pinsets/vN-DIGEST`.
    var directory: String
    /// Every file of the set by target path, with its SHA-256 as the trusted metadata named it.
    var files: [String: String]
    /// Target path → where it is stored under ``directory``, for the files stored elsewhere than at their target
    /// path (a `custom.pinset.files` that maps a name to another target); nil when none is.
    var layout: [String: String]?
    var refreshed: Date
    var freshUntil: Date
}
