public import Foundation
public import Pinning

/// A TUF client (specification 1.0, §5): keeps a repository's metadata in a directory, brings it up to date, and
/// finds and downloads targets. The rules are the core's (``/Pinning/TUFTrustedSet``, and the package's `TUFTargetSearch`); this type fetches
/// (through a ``TUFFetching``, normally ``TUFHTTPFetcher`` on ``PinnedHTTPClient``) and stores.
///
/// The metadata directory holds the metadata the client trusts, one file per role, under names that are not
/// version-prefixed (`root.json`, `timestamp.json`, `snapshot.json`, `targets.json`, and a delegated role `ROLE`
/// as `quote(ROLE).json`), each the exact bytes the repository served. Every file is replaced atomically (write,
/// fsync, rename) only after the core accepted its contents, and the directory is flushed once a refresh has stored
/// files, before the refresh returns (so before anything is made current on what it trusts). After a crash at
/// any point each file is a complete, verified version: never a torn file that would be skipped as the reference
/// for a rollback check. A crash before that flush may lose some of the refresh's renames (see
/// ``refresh(startTime:)``): each role then holds the version stored before, which the client had accepted.
///
/// <!-- snippet: given(dir: String, targetDir: String, client: PinnedHTTPClient)
/// import Foundation
/// -->
/// ```swift
/// var updater = TUFUpdater(metadataDirectory: dir, metadataURL: URL(string: "https://pins.example.com/metadata/")!,
///                          fetcher: TUFHTTPFetcher(client: client))
/// try await updater.refresh()
/// let target = try await updater.targetInfo("pinning.json")
/// let path = try await updater.download(target, from: URL(string: "https://pins.example.com/targets/")!, into: targetDir)
/// ```
public struct TUFUpdater: Sendable {
    public let metadataDirectory: String
    /// The repository's metadata URL (a directory: `…/metadata/`).
    public let metadataURL: URL
    public let fetcher: any TUFFetching
    public let limits: TUFLimits
    /// Told about what the client did and skipped (a local copy not used, and why), for `--verbose` output, one line
    /// each. Display text: a peer's text in it (a role name, a target path, a server's words, a local path) is
    /// escaped by VisibleText, once, so the line is printed as it is (escaping it again would show an escape as
    /// the sender's literal text).
    public let log: (@Sendable (String) -> Void)?

    /// The metadata trusted by the last ``refresh(startTime:)``; nil before one succeeded.
    public private(set) var trusted: TUFTrustedSet?
    /// Delegated targets metadata taken in during this client's life, by role: bytes only, re-verified against
    /// the delegation that leads to the role at every use (see `TUFTargetSearch`).
    private var delegatedBytes: [String: [UInt8]] = [:]
    /// Whether a file was renamed into the metadata directory since the directory was last flushed.
    private var renamedSinceFlush = false

    public init(
        metadataDirectory: String, metadataURL: URL, fetcher: any TUFFetching, limits: TUFLimits = TUFLimits(), log: (@Sendable (String) -> Void)? = nil
    ) {
        self.metadataDirectory = metadataDirectory
        let text = metadataURL.absoluteString
        self.metadataURL = text.hasSuffix("/") ? metadataURL : URL(string: text + "/") ?? metadataURL
        self.fetcher = fetcher
        self.limits = limits
        self.log = log
    }

    /// Stores `bytes` as the trusted root to start from (`root.json`), as the client's first step, creating
    /// `metadataDirectory` (and its parents) when missing. A `root.json` already there is replaced, but only by a
    /// root that is one: `bytes` must be TUF root metadata signed by a threshold of its own root keys (as the first
    /// refresh reads it, `TUFTrustedSet(trustedRoot:updateStartTime:limits:)`; its expiry does not matter for a
    /// trusted root, §5.2). Anything else is refused before anything is created or written.
    ///
    /// - Throws: ``/Pinning/TUFError``: the root's refusal, or why the directory or file could not be written.
    public static func initialize(metadataDirectory: String, trustedRoot bytes: [UInt8], limits: TUFLimits = TUFLimits()) throws(TUFError) {
        _ = try TUFTrustedSet(trustedRoot: bytes, updateStartTime: Date(), limits: limits)
        do {
            try TUFFiles.makeDirectories(metadataDirectory)
        } catch {
            throw TUFError(role: TUFRoleName.root, rule: .unavailable, "cannot create the metadata directory: \(error.description)")
        }
        try TUFFiles.writeFileAtomically(bytes, directory: metadataDirectory, name: "root.json", role: TUFRoleName.root)
    }

    /// ``initialize(metadataDirectory:trustedRoot:limits:)`` that leaves a `root.json` already there as it is
    /// (a newer root a refresh stored), atomically: the check and the write are one `link(2)`, so it needs no lock.
    ///
    /// - Returns: Whether `bytes` were stored (`false`: a `root.json` was already there).
    @discardableResult
    package static func initializeIfAbsent(metadataDirectory: String, trustedRoot bytes: [UInt8], limits: TUFLimits = TUFLimits()) throws(TUFError) -> Bool {
        _ = try TUFTrustedSet(trustedRoot: bytes, updateStartTime: Date(), limits: limits)
        do {
            try TUFFiles.makeDirectories(metadataDirectory)
        } catch {
            throw TUFError(role: TUFRoleName.root, rule: .unavailable, "cannot create the metadata directory: \(error.description)")
        }
        return try TUFFiles.writeFileAtomically(bytes, directory: metadataDirectory, name: "root.json", role: TUFRoleName.root, onlyIfAbsent: true)
    }

    /// ``initialize(metadataDirectory:trustedRoot:limits:)`` with the contents of the file at `path` (at most
    /// `limits`' `rootMaxLength` bytes).
    public static func initialize(metadataDirectory: String, trustedRootFile path: String, limits: TUFLimits = TUFLimits()) throws(TUFError) {
        try self.initialize(metadataDirectory: metadataDirectory, trustedRoot: try self.readTrustedRoot(path, limits: limits), limits: limits)
    }

    /// The contents of the trusted root file at `path` (at most `limits`' `rootMaxLength` bytes), read by the one
    /// input reader (a FIFO or `<(…)` within its bound).
    package static func readTrustedRoot(_ path: String, limits: TUFLimits = TUFLimits()) throws(TUFError) -> [UInt8] {
        guard let bytes = try TUFFiles.readFile(path, maximumLength: limits.rootMaxLength, role: TUFRoleName.root) else {
            throw TUFError(role: TUFRoleName.root, rule: .unavailable, "\(VisibleText.escaped(path)): no such file")
        }
        return bytes
    }

    // MARK: - Refresh

    /// Brings the top-level metadata up to date (§5.3 to §5.6): each newer root, version by version, then timestamp,
    /// snapshot and targets, each checked by the core and stored once accepted. Expiry is judged against
    /// `startTime` throughout.
    ///
    /// Timestamp, snapshot and targets are each written (contents flushed) and renamed into place as they are
    /// accepted, in that order, and the directory is flushed once, when the refresh ends, rather than after each
    /// rename (a root is flushed at once, as before). A crash before that flush may lose any of those renames; every
    /// name still holds a whole file the client verified, the new one or the one before it. That never accepts a
    /// rollback: each stored role is the reference its own rollback check is made against (§5.4: a timestamp older
    /// than the stored one is refused; §5.5: so is a snapshot older than the stored one, or listing an older
    /// targets version, even when an older timestamp names it), so a mix of new and previous files refuses
    /// anything older than the newest stored copy of each role; and nothing is made current on the refresh (a pin
    /// set committed) before the flush.
    ///
    /// - Throws: ``/Pinning/TUFError``: the first refusal or fetch failure. What was accepted before it stays stored.
    @discardableResult
    public mutating func refresh(startTime: Date = Date()) async throws(TUFError) -> TUFTrustedSet {
        let set: TUFTrustedSet
        do {
            set = try await self.refreshStoring(startTime: startTime)
        } catch {
            self.trusted = nil
            // The renames made before the refusal are flushed too, so a later refresh that finds those files
            // already in place (and so stores nothing) never relies on a rename that is not on disk. A flush that
            // fails here leaves the refusal as the error; what it may lose at a crash is a rename to a newer
            // verified file, that is a return to the previous one, which the client had stored and accepted.
            if self.renamedSinceFlush {
                do {
                    try TUFFiles.syncDirectory(self.metadataDirectory, role: TUFRoleName.targets)
                    self.renamedSinceFlush = false
                } catch let flush {
                    self.log?("\(flush)")
                }
            }
            throw error
        }
        // The renames made durable before the caller acts on the set. A refresh that stored nothing flushes nothing
        // (a flush costs a disk cache flush, milliseconds, even when nothing is pending).
        if self.renamedSinceFlush {
            try TUFFiles.syncDirectory(self.metadataDirectory, role: TUFRoleName.targets)
            self.renamedSinceFlush = false
        }
        self.trusted = set
        return set
    }

    private mutating func refreshStoring(startTime: Date) async throws(TUFError) -> TUFTrustedSet {
        self.trusted = nil
        self.delegatedBytes = [:]
        guard let rootBytes = try self.readLocal(TUFRoleName.root, maximumLength: self.limits.rootMaxLength) else {
            throw TUFError(role: TUFRoleName.root, rule: .unavailable, "no trusted root in \(VisibleText.escaped(self.metadataDirectory)) (initialize the client with one first)")
        }
        var set = try TUFTrustedSet(trustedRoot: rootBytes, updateStartTime: startTime, limits: self.limits)

        // §5.3: each next root version until the repository has none (403 or 404), at most maximumRootRotations.
        let firstNew = set.root.version + 1
        for version in firstNew..<(firstNew + self.limits.maximumRootRotations) {
            let data: [UInt8]
            do {
                data = try await self.fetchMetadata("\(version).root.json", maximumLength: self.limits.rootMaxLength)
            } catch let error where error.kind == .notFound {
                break
            } catch {
                throw TUFError(role: TUFRoleName.root, rule: .unavailable, "cannot fetch version \(version): \(VisibleText.escaped(error.message))", expectedVersion: version)
            }
            try set.updateRoot(data)
            try self.store(TUFRoleName.root, data)
            self.log?("root: trusted version \(set.root.version)")
        }
        try set.checkRootNotExpired()

        // §5.4: the local timestamp, if it still verifies, is the reference for rollback checks.
        if let local = self.readLocalCopy(TUFRoleName.timestamp, maximumLength: self.limits.timestampMaxLength) {
            do {
                try set.updateTimestamp(local)
            } catch {
                self.log?("local timestamp not used: \(error)")
            }
        }
        let timestampBytes = try await self.fetchRole(TUFRoleName.timestamp, fileName: "timestamp.json", maximumLength: self.limits.timestampMaxLength)
        let outcome = try set.updateTimestamp(timestampBytes)
        try set.checkTimestampFinal()
        if outcome == .accepted {
            try self.store(TUFRoleName.timestamp, timestampBytes, syncDirectory: false)
        }
        let timestamp = set.timestamp!
        self.log?("timestamp: trusted version \(timestamp.version)\(outcome == .unchanged ? " (unchanged)" : "")")

        // §5.5: the local snapshot is used as it is when it is the version the timestamp names; otherwise it is the
        // reference for rollback checks of the new one.
        var snapshotIsFinal = false
        // Read up to the general cap, not the new timestamp's length: an older local snapshot may be longer and is
        // still the reference for rollback checks.
        if let local = self.readLocalCopy(TUFRoleName.snapshot, maximumLength: self.limits.snapshotMaxLength) {
            do {
                try set.updateSnapshot(local, isLocalCopy: true)
                try set.checkSnapshotFinal()
                snapshotIsFinal = true
            } catch {
                self.log?("local snapshot not used as the current one: \(error)")
            }
        }
        if !snapshotIsFinal {
            let name = set.root.consistentSnapshot ? "\(timestamp.snapshotMeta.version).snapshot.json" : "snapshot.json"
            let data = try await self.fetchRole(TUFRoleName.snapshot, fileName: name, maximumLength: timestamp.snapshotMeta.length ?? self.limits.snapshotMaxLength)
            try set.updateSnapshot(data, isLocalCopy: false)
            try set.checkSnapshotFinal()
            try self.store(TUFRoleName.snapshot, data, syncDirectory: false)
        }
        self.log?("snapshot: trusted version \(set.snapshot!.version)")

        // §5.6: the top-level targets, from the local copy when it is the very file the snapshot names.
        let request = try set.targetsRequest()
        var targetsLoaded = false
        if let local = self.readLocalCopy(TUFRoleName.targets, maximumLength: request.maximumLength) {
            do {
                try set.updateTargets(local)
                targetsLoaded = true
            } catch {
                self.log?("local targets not used: \(error)")
            }
        }
        if !targetsLoaded {
            let data = try await self.fetchRole(TUFRoleName.targets, fileName: request.remoteFileName, maximumLength: request.maximumLength)
            try set.updateTargets(data)
            try self.store(TUFRoleName.targets, data, syncDirectory: false)
        }
        self.log?("targets: trusted version \(set.targets!.version)")
        return set
    }

    // MARK: - Targets

    /// Finds `path` in the trusted targets and their delegations (refreshing first if this client has not).
    ///
    /// - Throws: ``/Pinning/TUFError``: ``/Pinning/TUFError/Rule/targetNotFound`` when no role the search may reach lists it; any
    ///   refusal of delegated metadata on the way (the search stops there: a role that fails its delegator's
    ///   rules is never skipped).
    public mutating func targetInfo(_ path: String) async throws(TUFError) -> TUFTargetFile {
        if self.trusted == nil {
            try await self.refresh()
        }
        var search = try self.trusted!.search(for: path)
        while true {
            let request: TUFRoleRequest
            switch try search.next() {
            case .found(let target, let role):
                self.log?("target \(TUFError.printable(path)): listed by \(TUFError.printable(role))")
                return target
            case .notFound(let reason):
                throw TUFError(role: path, rule: .targetNotFound, "not found: \(reason)")
            case .needs(let needed):
                request = needed
            }
            // Bytes taken in earlier in this run, then the stored copy, then the repository's: each must pass the
            // delegation that leads here now.
            if let cached = self.delegatedBytes[request.role] {
                do {
                    try search.provide(cached)
                    continue
                } catch {
                    self.log?("\(TUFError.printable(request.role)) as loaded before is not valid through \(TUFError.printable(request.delegator)): \(error)")
                }
            }
            if let local = self.readLocalCopy(request.role, maximumLength: request.maximumLength), local != self.delegatedBytes[request.role] {
                do {
                    try search.provide(local)
                    self.delegatedBytes[request.role] = local
                    continue
                } catch {
                    self.log?("local \(TUFError.printable(request.role)) not used: \(error)")
                }
            }
            let data = try await self.fetchRole(request.role, fileName: request.remoteFileName, maximumLength: request.maximumLength)
            try search.provide(data)
            self.delegatedBytes[request.role] = data
            try self.store(request.role, data)
        }
    }

    /// The path `target` is stored at in `directory` (its target path percent-encoded into one file name).
    public static func targetFilePath(_ target: TUFTargetFile, in directory: String) -> String {
        directory + "/" + TUFNames.quote(target.path)
    }

    /// The stored copy of `target` in `directory` when its length and hashes match the trusted metadata.
    public func cachedTarget(_ target: TUFTargetFile, in directory: String) -> String? {
        let path = Self.targetFilePath(target, in: directory)
        do {
            guard let bytes = try TUFFiles.readFile(path, maximumLength: target.length, role: target.path) else { return nil }
            try target.verify(bytes)
            return path
        } catch {
            self.log?("stored copy of \(TUFError.printable(target.path)) not used: \(error)")
            return nil
        }
    }

    /// Downloads `target` from `baseURL` (under consistent snapshots as `DIR/HASH.NAME`), checks its length and
    /// every hash, and stores it in `directory` (atomically). At most `target.length` bytes are read.
    ///
    /// - Returns: The stored file's path.
    public func download(_ target: TUFTargetFile, from baseURL: URL, into directory: String) async throws(TUFError) -> String {
        let data = try await self.fetchTarget(target, from: baseURL)
        try TUFFiles.writeFileAtomically(data, directory: directory, name: TUFNames.quote(target.path), role: target.path)
        return Self.targetFilePath(target, in: directory)
    }

    /// Downloads `target` from `baseURL` as ``download(_:from:into:)`` does and returns its bytes, checked against
    /// its length and every hash, without storing them.
    func fetchTarget(_ target: TUFTargetFile, from baseURL: URL) async throws(TUFError) -> [UInt8] {
        guard let trusted = self.trusted else { throw TUFError(role: target.path, rule: .outOfOrder, "refresh the metadata before downloading targets") }
        var remotePath = target.path
        if trusted.root.consistentSnapshot, let algorithm = target.hashes.keys.sorted().first {
            let slash = remotePath.lastIndex(of: "/")
            let directoryPart = slash.map { String(remotePath[...$0]) } ?? ""
            let namePart = slash.map { String(remotePath[remotePath.index(after: $0)...]) } ?? remotePath
            remotePath = directoryPart + target.hashes[algorithm]! + "." + namePart
        }
        var base = baseURL.absoluteString
        if !base.hasSuffix("/") { base += "/" }
        guard let url = URL(string: base + TUFNames.quotePath(remotePath)) else {
            throw TUFError(role: target.path, rule: .unavailable, "cannot form a URL from \(VisibleText.escaped(base)) and the target path")
        }
        let data: [UInt8]
        do {
            data = try await self.fetcher.fetch(url, maximumLength: target.length)
        } catch {
            throw TUFError(role: target.path, rule: .unavailable, "cannot download the target: \(VisibleText.escaped(error.message))")
        }
        try target.verify(data)
        return data
    }

    // MARK: - Files and fetching

    private func fileName(_ role: String) -> String { TUFNames.quote(role) + ".json" }

    private func readLocal(_ role: String, maximumLength: Int) throws(TUFError) -> [UInt8]? {
        try TUFFiles.readFile(self.metadataDirectory + "/" + self.fileName(role), maximumLength: maximumLength, role: role)
    }

    /// A stored copy offered before fetching: one that cannot be read is not offered (and said so in the log).
    private func readLocalCopy(_ role: String, maximumLength: Int) -> [UInt8]? {
        do {
            return try self.readLocal(role, maximumLength: maximumLength)
        } catch {
            self.log?("local \(TUFError.printable(role)) not read: \(error)")
            return nil
        }
    }

    private mutating func store(_ role: String, _ bytes: [UInt8], syncDirectory: Bool = true) throws(TUFError) {
        try TUFFiles.writeFileAtomically(bytes, directory: self.metadataDirectory, name: self.fileName(role), role: role, syncDirectory: syncDirectory)
        if !syncDirectory { self.renamedSinceFlush = true }
    }

    private func fetchMetadata(_ fileName: String, maximumLength: Int) async throws(TUFFetchError) -> [UInt8] {
        guard let url = URL(string: self.metadataURL.absoluteString + fileName) else {
            throw TUFFetchError(kind: .failed, message: "cannot form a URL from \(self.metadataURL.absoluteString) and \(fileName)")
        }
        return try await self.fetcher.fetch(url, maximumLength: maximumLength)
    }

    private func fetchRole(_ role: String, fileName: String, maximumLength: Int) async throws(TUFError) -> [UInt8] {
        do {
            return try await self.fetchMetadata(fileName, maximumLength: maximumLength)
        } catch {
            throw TUFError(role: role, rule: .unavailable, "cannot fetch \(VisibleText.escaped(fileName)): \(VisibleText.escaped(error.message))")
        }
    }
}
