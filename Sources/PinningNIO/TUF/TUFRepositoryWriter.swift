public import Foundation
public import Pinning

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// How long each top-level role's metadata stays valid after it is signed, in days.
public struct TUFExpiryPeriods: Sendable, Equatable {
    public var root: Int
    public var targets: Int
    public var snapshot: Int
    public var timestamp: Int

    /// The defaults: root a year; targets and snapshot 90 days (renewed by each publish); timestamp one day
    /// (renewed by `pinning pinset timestamp` from a scheduler: it bounds how long a network attacker can keep a
    /// client on an old pin set without the client noticing).
    public init(root: Int = 365, targets: Int = 90, snapshot: Int = 90, timestamp: Int = 1) {
        self.root = root
        self.targets = targets
        self.snapshot = snapshot
        self.timestamp = timestamp
    }

    /// The longest period accepted: 100 years.
    public static let maximumDays = 36_500

    /// The period of a top-level role.
    public subscript(role: String) -> Int? {
        get {
            switch role {
            case TUFRoleName.root: self.root
            case TUFRoleName.targets: self.targets
            case TUFRoleName.snapshot: self.snapshot
            case TUFRoleName.timestamp: self.timestamp
            default: nil
            }
        }
        set {
            guard let newValue else { return }
            switch role {
            case TUFRoleName.root: self.root = newValue
            case TUFRoleName.targets: self.targets = newValue
            case TUFRoleName.snapshot: self.snapshot = newValue
            case TUFRoleName.timestamp: self.timestamp = newValue
            default: break
            }
        }
    }
}

/// Why a repository operation was refused or failed, in one line.
public struct TUFRepositoryError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// The directory holds no repository (no `metadata/1.root.json`).
        case notARepository
        /// `initialize` on a directory that already holds one.
        case alreadyARepository
        /// A key that the root does not list for the role it was given for, or a threshold the keys cannot meet.
        case wrongKey
        /// A target path or option value that cannot be written.
        case invalidInput
        /// The repository's files do not verify as a client would check them (damaged, expired, inconsistent).
        case inconsistent
        /// Another writer holds the repository's lock.
        case busy
        /// A file could not be read or written.
        case io
    }

    public var code: Code
    /// Display text, printed as it is: every path in it (the user's own directory too) and everything read from
    /// the repository's files is escaped (control and invisible characters as `\u{…}`), as in the client's `TUFError`.
    public var message: String
    /// For ``Code/wrongKey``: the key id of the key refused, when one key is (so a caller can name its file).
    public var keyID: String?

    public init(_ code: Code, _ message: String, keyID: String? = nil) {
        self.code = code
        self.message = message
        self.keyID = keyID
    }

    public var description: String { self.message }
}

/// Writes a TUF repository of static files that any HTTPS server, object store or CDN can serve: the
/// publishing side of pin sets (issue 29). The client side is ``TUFUpdater``; every file this writer produces is
/// first checked, in memory, the way ``/Pinning/TUFTrustedSet`` checks it for a fresh client and for one that holds the
/// previous version, and only then written.
///
/// Layout under ``directory`` (consistent snapshots, so every file but two is immutable and a CDN may cache it
/// forever):
/// - `metadata/N.root.json` for every root version, and `metadata/root.json`, a copy of the newest (the file an
///   operator ships with clients as their trusted root);
/// - `metadata/N.targets.json` and `metadata/N.snapshot.json`, one per version;
/// - `metadata/timestamp.json`, the one file clients fetch first, replaced at each publish and renewal (serve it
///   with a short cache lifetime);
/// - `targets/DIR/SHA256.NAME` for a target `DIR/NAME`, named by the SHA-256 of its contents;
/// - `pinset.json`: the expiry periods (``TUFExpiryPeriods``); not metadata, nothing secret;
/// - `.pinset-timestamp-version`: the highest timestamp version this repository has signed. `timestamp.json` has
///   no versioned copies, and the one on disk may be an older file copied back (by an attacker holding the file
///   server, or a restored backup): numbering from it would sign again a version clients already hold, which
///   they refuse as a replay until a later renewal.
///
/// Every file is written atomically and durably (a temporary file, fsync, rename, fsync of the directory), in an
/// order that keeps the served repository consistent at every instant: targets, then targets metadata, then the
/// snapshot, and the timestamp last, so a client sees the new set only once all of it is there. A crash leaves at
/// most unreferenced files; the next write picks versions above them. Writers take `.pinset.lock` (`flock`), so
/// two commands never interleave.
///
/// <!-- snippet: given(repo: String, root: TUFSigningKey, targetsKey: TUFSigningKey, snapshotKey: TUFSigningKey, timestampKey: TUFSigningKey, pins: [UInt8])
/// import Pinning
/// -->
/// ```swift
/// let writer = try TUFRepositoryWriter.initialize(
///     directory: repo, rootKeys: [root], rootThreshold: 1,
///     targetsKey: targetsKey, snapshotKey: snapshotKey, timestampKey: timestampKey)
/// let versions = try writer.publishPinSet(
///     pins, name: "pinning.json", files: [:],
///     targetsKey: targetsKey, snapshotKey: snapshotKey, timestampKey: timestampKey)
/// print("published targets version \(versions.targets)")
/// try writer.renewTimestamp(timestampKey: timestampKey)   // from a scheduler, more often than the timestamp expires
/// ```
public struct TUFRepositoryWriter: Sendable {
    /// A target to publish: its path in the repository, its contents and its optional `custom` value.
    public struct Target: Sendable {
        public var path: String
        public var contents: [UInt8]
        public var custom: TUFJSON?

        public init(path: String, contents: [UInt8], custom: TUFJSON? = nil) {
            self.path = path
            self.contents = contents
            self.custom = custom
        }
    }

    /// The version of each top-level role after an operation.
    public struct Versions: Sendable, Equatable, CustomStringConvertible {
        public var root: Int
        public var targets: Int
        public var snapshot: Int
        public var timestamp: Int

        public init(root: Int, targets: Int, snapshot: Int, timestamp: Int) {
            self.root = root
            self.targets = targets
            self.snapshot = snapshot
            self.timestamp = timestamp
        }

        public var description: String { "root v\(self.root), targets v\(self.targets), snapshot v\(self.snapshot), timestamp v\(self.timestamp)" }
    }

    /// The repository's directory.
    public let directory: String
    public var metadataDirectory: String { self.directory + "/metadata" }
    public var targetsDirectory: String { self.directory + "/targets" }

    /// Opens an existing repository (one with `metadata/1.root.json`).
    ///
    /// - Throws: ``TUFRepositoryError/Code/notARepository``.
    public init(directory: String) throws(TUFRepositoryError) {
        self.directory = directory
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) else {
            // Nothing there: "not a directory" read as if a file were in the way.
            throw TUFRepositoryError(.notARepository, "\(VisibleText.escaped(directory)): no such directory; make a repository with pinning pinset init")
        }
        guard isDirectory.boolValue else {
            throw TUFRepositoryError(.notARepository, "\(VisibleText.escaped(directory)): not a directory")
        }
        guard FileManager.default.fileExists(atPath: self.metadataDirectory + "/1.root.json") else {
            throw TUFRepositoryError(.notARepository, "\(VisibleText.escaped(directory)): not a pin-set repository (no metadata/1.root.json); make one with pinning pinset init")
        }
    }

    /// The expiry periods kept in `pinset.json` (the defaults when it is absent).
    public func expiryPeriods() throws(TUFRepositoryError) -> TUFExpiryPeriods {
        guard let bytes = try self.read(self.directory + "/pinset.json", maximumLength: 64 * 1024) else { return TUFExpiryPeriods() }
        var periods = TUFExpiryPeriods()
        guard let json = try? TUFJSON.parse(bytes), let expires = json.objectValue?["expires"]?.objectValue else {
            throw TUFRepositoryError(.inconsistent, "\(VisibleText.escaped(self.directory))/pinset.json: not {\"expires\": {ROLE: DAYS, …}}")
        }
        for member in expires.members {
            guard periods[member.key] != nil, let days = member.value.intValue, (1...TUFExpiryPeriods.maximumDays).contains(days) else {
                let role = VisibleText.escaped(member.key)
                throw TUFRepositoryError(
                    .inconsistent,
                    "\(VisibleText.escaped(self.directory))/pinset.json: expires.\(role) is not a top-level role with 1 to \(TUFExpiryPeriods.maximumDays) days")
            }
            periods[member.key] = days
        }
        return periods
    }

    /// Replaces the expiry periods kept in `pinset.json` (used by the next writes).
    public func setExpiryPeriods(_ periods: TUFExpiryPeriods) throws(TUFRepositoryError) {
        try Self.checkPeriods(periods)
        let members: [(String, TUFJSON)] = [TUFRoleName.root, TUFRoleName.targets, TUFRoleName.snapshot, TUFRoleName.timestamp].map {
            ($0, .integer(String(periods[$0]!)))
        }
        let json = TUFJSON.object(TUFJSONObject([("expires", .object(TUFJSONObject(members)!))])!)
        try self.write(json.jsonBytes() + [0x0A], directory: self.directory, name: "pinset.json")
    }

    // MARK: - Initialize

    /// Makes a new repository in `directory` (created if needed; it must not hold one already): root version 1
    /// listing the four roles' keys (root with `rootThreshold`, the others with threshold 1), empty targets,
    /// a snapshot and a timestamp, each version 1, with `consistent_snapshot` on.
    ///
    /// - Throws: ``TUFRepositoryError``: ``TUFRepositoryError/Code/alreadyARepository``,
    ///   ``TUFRepositoryError/Code/invalidInput`` (a threshold above the number of distinct root keys, a period out
    ///   of range), ``TUFRepositoryError/Code/io``.
    @discardableResult
    public static func initialize(
        directory: String, rootKeys: [TUFSigningKey], rootThreshold: Int = 1, targetsKey: TUFSigningKey, snapshotKey: TUFSigningKey,
        timestampKey: TUFSigningKey, expiry: TUFExpiryPeriods = TUFExpiryPeriods(), now: Date = Date()
    ) throws(TUFRepositoryError) -> TUFRepositoryWriter {
        try Self.checkPeriods(expiry)
        var distinctRoot: [TUFSigningKey] = []
        for key in rootKeys where !distinctRoot.contains(where: { $0.keyID == key.keyID }) { distinctRoot.append(key) }
        guard !distinctRoot.isEmpty else { throw TUFRepositoryError(.invalidInput, "a root needs at least one root key") }
        guard (1...distinctRoot.count).contains(rootThreshold) else {
            throw TUFRepositoryError(.invalidInput, "the root threshold \(rootThreshold) is not between 1 and the \(distinctRoot.count) distinct root key\(distinctRoot.count == 1 ? "" : "s") given")
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw TUFRepositoryError(.notARepository, "\(VisibleText.escaped(directory)): not a directory; a pin-set repository is a directory (created when missing)")
        }
        // A FIFO, file or device where the repository or its metadata/ or targets/ must be (or on the way to it) is
        // bad input naming that part; a directory that cannot be made (permissions, a read-only or full disk) is a
        // failure to write.
        do {
            try TUFFiles.makeDirectories(directory + "/metadata")
            try TUFFiles.makeDirectories(directory + "/targets")
        } catch {
            if error.kind != nil {
                throw TUFRepositoryError(.notARepository, "\(VisibleText.escaped(directory)): cannot hold a pin-set repository: \(error.description)")
            }
            throw TUFRepositoryError(.io, "\(VisibleText.escaped(directory)): cannot create the repository's directories: \(error.description)")
        }
        let writer = TUFRepositoryWriter(unchecked: directory)
        return try writer.locked { () throws(TUFRepositoryError) -> TUFRepositoryWriter in
            guard !FileManager.default.fileExists(atPath: writer.metadataDirectory + "/1.root.json") else {
                throw TUFRepositoryError(.alreadyARepository, "\(VisibleText.escaped(directory)): already a pin-set repository (metadata/1.root.json exists)")
            }
            var keys: [String: TUFJSON] = [:]
            for key in distinctRoot + [targetsKey, snapshotKey, timestampKey] { keys[key.keyID] = key.publicKeyJSON }
            let roles: [String: TUFRoleKeys] = [
                TUFRoleName.root: TUFRoleKeys(keyIDs: distinctRoot.map(\.keyID), threshold: rootThreshold),
                TUFRoleName.targets: TUFRoleKeys(keyIDs: [targetsKey.keyID], threshold: 1),
                TUFRoleName.snapshot: TUFRoleKeys(keyIDs: [snapshotKey.keyID], threshold: 1),
                TUFRoleName.timestamp: TUFRoleKeys(keyIDs: [timestampKey.keyID], threshold: 1),
            ]
            let start = Self.seconds(now)
            let root = try Self.sign(
                TUFMetadataBuilder.root(version: 1, expires: start + Int64(expiry.root) * 86_400, keys: keys, roles: roles), with: distinctRoot)
            let targets = try Self.sign(try Self.targetsObject(version: 1, expires: start + Int64(expiry.targets) * 86_400, targets: []), with: [targetsKey])
            let snapshot = try Self.sign(
                TUFMetadataBuilder.snapshot(version: 1, expires: start + Int64(expiry.snapshot) * 86_400, targetsVersion: 1, targetsFile: targets), with: [snapshotKey])
            let timestamp = try Self.sign(
                TUFMetadataBuilder.timestamp(version: 1, expires: start + Int64(expiry.timestamp) * 86_400, snapshotVersion: 1, snapshotFile: snapshot),
                with: [timestampKey])
            let state = State(roots: [root], timestamp: timestamp, snapshot: snapshot, targets: targets)
            try writer.verifyAsClients(state, previous: nil, targetFiles: [:], now: now)
            try writer.setExpiryPeriods(expiry)
            try writer.write(targets, directory: writer.metadataDirectory, name: "1.targets.json")
            try writer.write(snapshot, directory: writer.metadataDirectory, name: "1.snapshot.json")
            try writer.write(timestamp, directory: writer.metadataDirectory, name: "timestamp.json")
            try writer.write(root, directory: writer.metadataDirectory, name: "root.json")
            // Last: 1.root.json is what makes the directory a repository, so an interrupted init can be run again.
            try writer.write(root, directory: writer.metadataDirectory, name: "1.root.json")
            return writer
        }
    }

    private init(unchecked directory: String) {
        self.directory = directory
    }

    // MARK: - Publish

    /// Publishes targets: each target file written under its SHA-256, a new targets version listing them (with the
    /// targets already listed, minus `removing` and minus the paths republished), a new snapshot and a new
    /// timestamp, each signed by the role's key.
    ///
    /// - Throws: ``TUFRepositoryError``: ``TUFRepositoryError/Code/wrongKey`` (a key the root does not list for
    ///   that role), ``TUFRepositoryError/Code/invalidInput`` (a target path that is empty, absolute, has an empty,
    ///   `.` or `..` part, a backslash or a control character), ``TUFRepositoryError/Code/inconsistent``,
    ///   ``TUFRepositoryError/Code/io``, ``TUFRepositoryError/Code/busy``.
    @discardableResult
    public func publish(
        _ targets: [Target], removing: [String] = [], targetsKey: TUFSigningKey, snapshotKey: TUFSigningKey, timestampKey: TUFSigningKey, now: Date = Date()
    ) throws(TUFRepositoryError) -> Versions {
        try self.publish(targets, removing: removing, pinSet: nil, targetsKey: targetsKey, snapshotKey: snapshotKey, timestampKey: timestampKey, now: now)
    }

    /// ``publish(_:removing:targetsKey:snapshotKey:timestampKey:now:)``; with `pinSet` (the target name of the
    /// configuration published, by ``publishPinSet(_:name:files:targetsKey:snapshotKey:timestampKey:now:)``), the
    /// files the previous version of that configuration referenced are removed too, and the other configurations
    /// of the repository are guarded (``guardOtherPinSets(_:publishing:removing:in:)``): both read under the lock,
    /// from the targets this version replaces.
    func publish(
        _ targets: [Target], removing: [String], pinSet: String?, targetsKey: TUFSigningKey, snapshotKey: TUFSigningKey, timestampKey: TUFSigningKey, now: Date
    ) throws(TUFRepositoryError) -> Versions {
        // Target paths are compared byte for byte (as clients look them up); `texts`, compared as Swift compares
        // `String` (Unicode canonical equivalence), finds two spellings of one name, which targets metadata may not
        // hold (clients refuse it as malformed): refused here as bad input instead.
        var paths = Set<[UInt8]>()
        var texts = Set<String>()
        for target in targets {
            try Self.checkTargetPath(target.path)
            guard paths.insert(Array(target.path.utf8)).inserted else {
                throw TUFRepositoryError(.invalidInput, "target path \(VisibleText.quoted(target.path, limit: 200)) is given twice")
            }
            guard texts.insert(target.path).inserted else {
                throw TUFRepositoryError(.invalidInput, "target path \(VisibleText.quoted(target.path, limit: 200)) is given twice, spelled with other Unicode code points")
            }
        }
        return try self.locked { () throws(TUFRepositoryError) -> Versions in
            let expiry = try self.expiryPeriods()
            let current = try self.load()
            let root = try self.parse { () throws(TUFError) in try TUFRoot(bytes: current.roots.last!) }
            try self.checkRootNotExpired(root, now: now)
            try Self.checkKey(targetsKey, role: TUFRoleName.targets, root: root)
            try Self.checkKey(snapshotKey, role: TUFRoleName.snapshot, root: root)
            try Self.checkKey(timestampKey, role: TUFRoleName.timestamp, root: root)
            let oldTargets = try self.parse { () throws(TUFError) in try TUFTargets(bytes: current.targets, role: TUFRoleName.targets) }
            var removing = removing
            if let pinSet {
                removing += Self.pinSetFiles(oldTargets.target(pinSet)) ?? []
                removing = try Self.guardOtherPinSets(pinSet, publishing: targets, removing: removing, in: oldTargets)
            }
            let replaced = Set((removing + targets.map(\.path)).map { Array($0.utf8) })
            var listed = oldTargets.targets.values.filter { !replaced.contains(Array($0.path.utf8)) }
            // A listed path that is another spelling of a new one (the same text to `String`, other bytes): keeping
            // both would make targets metadata clients refuse, and replacing it would drop another file.
            let kept = Dictionary(listed.map { ($0.path, $0.path) }, uniquingKeysWith: { first, _ in first })
            for target in targets {
                guard let other = kept[target.path] else { continue }
                throw TUFRepositoryError(
                    .invalidInput,
                    "target path \(VisibleText.quoted(target.path, limit: 200)) is another spelling (other Unicode code points) of the listed target path \(VisibleText.quoted(other, limit: 200)); use that spelling, or another name"
                )
            }
            var files: [String: [UInt8]] = [:]
            for target in targets {
                let entry = TUFTargetFile(path: target.path, contents: target.contents, custom: target.custom)
                listed.append(entry)
                files[Self.storedTargetPath(entry)] = target.contents
            }
            listed.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
            let start = Self.seconds(now)
            let targetsVersion = max(oldTargets.version, try self.highestVersion(of: TUFRoleName.targets)) + 1
            let targetsFile = try Self.sign(
                try Self.targetsObject(version: targetsVersion, expires: start + Int64(expiry.targets) * 86_400, targets: listed), with: [targetsKey])
            let oldSnapshot = try self.parse { () throws(TUFError) in try TUFSnapshot(bytes: current.snapshot) }
            let snapshotVersion = max(oldSnapshot.version, try self.highestVersion(of: TUFRoleName.snapshot)) + 1
            let snapshotFile = try Self.sign(
                TUFMetadataBuilder.snapshot(version: snapshotVersion, expires: start + Int64(expiry.snapshot) * 86_400, targetsVersion: targetsVersion, targetsFile: targetsFile),
                with: [snapshotKey])
            let oldTimestamp = try self.parse { () throws(TUFError) in try TUFTimestamp(bytes: current.timestamp) }
            let timestampVersion = max(oldTimestamp.version, try self.signedTimestampVersion()) + 1
            let timestampFile = try Self.sign(
                TUFMetadataBuilder.timestamp(
                    version: timestampVersion, expires: start + Int64(expiry.timestamp) * 86_400, snapshotVersion: snapshotVersion, snapshotFile: snapshotFile),
                with: [timestampKey])
            let next = State(roots: current.roots, timestamp: timestampFile, snapshot: snapshotFile, targets: targetsFile)
            try self.verifyAsClients(next, previous: current, targetFiles: files, now: now)

            for (stored, contents) in files.sorted(by: { $0.key < $1.key }) {
                let path = self.targetsDirectory + "/" + stored
                let directory = String(path[..<path.lastIndex(of: "/")!])
                do throws(TUFFiles.DirectoryFailure) {
                    try TUFFiles.makeDirectories(directory)
                } catch {
                    // Something other than a directory inside targets/ is a damaged repository.
                    throw TUFRepositoryError(error.kind != nil ? .inconsistent : .io, "\(VisibleText.escaped(directory)): cannot create: \(error.description)")
                }
                // Content-addressed: a file already there under its hash is the same file.
                if try self.read(path, maximumLength: contents.count) == contents { continue }
                try self.write(contents, directory: directory, name: String(path[path.index(after: path.lastIndex(of: "/")!)...]))
            }
            try self.write(targetsFile, directory: self.metadataDirectory, name: "\(targetsVersion).targets.json")
            try self.write(snapshotFile, directory: self.metadataDirectory, name: "\(snapshotVersion).snapshot.json")
            try self.recordTimestampVersion(timestampVersion)
            try self.write(timestampFile, directory: self.metadataDirectory, name: "timestamp.json")
            return Versions(root: root.version, targets: targetsVersion, snapshot: snapshotVersion, timestamp: timestampVersion)
        }
    }

    /// Publishes a pin set: the configuration as target `name`, and the files it references (anchors, CRLs; keyed
    /// by the path the configuration writes, relative to its own directory) beside it, as one consistent set. The
    /// configuration's target carries `"custom": {"pinset": {"files": {PATH: TARGET}}}`, mapping each referenced
    /// path to its target path, so a client can download all of them and lay them out as the configuration expects.
    /// The files the previous version of `name` referenced are no longer listed, unless another configuration
    /// references them too.
    ///
    /// Several configurations may share one repository (each under its own `name`), and then they must not change
    /// each other: a file one references is never replaced by another's file of the same target path with other
    /// bytes (it would silently swap that configuration's anchor or CRL, in every client that follows it), nor is
    /// another configuration's target, nor is a file another still references removed. Such a publication is refused
    /// (``TUFRepositoryError/Code/invalidInput``, naming both configurations and the file); the same file with the same
    /// bytes is shared. Files are published beside `name` (`other/other.json` puts its files under `other/`), which
    /// is how two configurations keep files of the same name apart.
    ///
    /// - Throws: ``TUFRepositoryError``, as ``publish(_:removing:targetsKey:snapshotKey:timestampKey:now:)``, and
    ///   ``TUFRepositoryError/Code/invalidInput`` when a referenced file would be published at `name` itself or
    ///   would change another configuration, as above.
    @discardableResult
    public func publishPinSet(
        _ configuration: [UInt8], name: String = "pinning.json", files: [String: [UInt8]], targetsKey: TUFSigningKey, snapshotKey: TUFSigningKey,
        timestampKey: TUFSigningKey, now: Date = Date()
    ) throws(TUFRepositoryError) -> Versions {
        try Self.checkTargetPath(name)
        let base = name.contains("/") ? String(name[...name.lastIndex(of: "/")!]) : ""
        var targets: [Target] = []
        var references: [(String, TUFJSON)] = []
        for (path, contents) in files.sorted(by: { $0.key < $1.key }) {
            try Self.checkTargetPath(path)
            guard base + path != name else {
                throw TUFRepositoryError(
                    .invalidInput,
                    "the configuration's target name \(VisibleText.quoted(name, limit: 200)) is also the target of a file it references (\(VisibleText.quoted(path, limit: 200))); give the configuration another target name"
                )
            }
            targets.append(Target(path: base + path, contents: contents))
            references.append((path, .string(base + path)))
        }
        guard let referenceObject = TUFJSONObject(references) else {
            throw TUFRepositoryError(.invalidInput, "two referenced files have the same path")
        }
        let custom = TUFJSON.object(TUFJSONObject([("pinset", .object(TUFJSONObject([("files", .object(referenceObject))])!))])!)
        targets.append(Target(path: name, contents: configuration, custom: custom))
        return try self.publish(targets, removing: [], pinSet: name, targetsKey: targetsKey, snapshotKey: snapshotKey, timestampKey: timestampKey, now: now)
    }

    /// The target paths a configuration's target references (its `custom.pinset.files`), nil when it is not a
    /// pin set's configuration.
    static func pinSetFiles(_ target: TUFTargetFile?) -> [String]? {
        guard let files = target?.custom?.objectValue?["pinset"]?.objectValue?["files"]?.objectValue else { return nil }
        return files.members.compactMap(\.value.stringValue)
    }

    /// Refuses a publication of configuration `name` that would change another configuration listed in `old`: a
    /// target another configuration references (or another configuration's own target) published with other bytes,
    /// or the other configuration's target replaced at all; returns `removing` without the files another
    /// configuration still references. Two configurations in one repository then never change each other's files.
    static func guardOtherPinSets(_ name: String, publishing targets: [Target], removing: [String], in old: TUFTargets) throws(TUFRepositoryError) -> [String] {
        // Target path → the other configuration that references it (or is it).
        // Keyed by bytes, as clients look target paths up: `String` keys would take another spelling of a name
        // (Unicode canonical equivalence) for it.
        var referencedBy: [[UInt8]: String] = [:]
        for other in old.targets.values.sorted(by: { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }) where !other.path.utf8.elementsEqual(name.utf8) {
            guard let files = Self.pinSetFiles(other) else { continue }
            referencedBy[Array(other.path.utf8)] = other.path
            for file in files where referencedBy[Array(file.utf8)] == nil { referencedBy[Array(file.utf8)] = other.path }
        }
        let quotedName = VisibleText.quoted(name, limit: 200)
        for target in targets {
            guard let owner = referencedBy[Array(target.path.utf8)] else { continue }
            let quotedOwner = VisibleText.quoted(owner, limit: 200)
            let quotedPath = VisibleText.quoted(target.path, limit: 200)
            if owner.utf8.elementsEqual(target.path.utf8) {
                throw TUFRepositoryError(
                    .invalidInput, "\(quotedPath) is the configuration of another pin set: publishing \(quotedName) would replace it; give this one another target name")
            }
            if target.path.utf8.elementsEqual(name.utf8) {
                throw TUFRepositoryError(
                    .invalidInput, "\(quotedName) is a file the pin set \(quotedOwner) references: publishing a configuration there would replace it; give this one another target name")
            }
            let listed = old.target(target.path)
            let new = TUFTargetFile(path: target.path, contents: target.contents)
            if listed == nil || listed?.length != new.length || listed?.hashes["sha256"] != new.hashes["sha256"] {
                throw TUFRepositoryError(
                    .invalidInput,
                    "\(quotedPath), a file \(quotedName) references, differs from the file at that target path that the pin set \(quotedOwner) references: publishing it would change \(quotedOwner)'s files in every client that follows it; publish \(quotedName) under a target name in a directory of its own (its files go to that directory), or give the file another name"
                )
            }
        }
        return removing.filter { referencedBy[Array($0.utf8)] == nil }
    }

    // MARK: - Timestamp

    /// A new timestamp version naming the current snapshot, expiring one timestamp period from `now`: what a
    /// scheduler runs so clients keep accepting the repository.
    ///
    /// - Throws: ``TUFRepositoryError``: ``TUFRepositoryError/Code/inconsistent`` when the snapshot or targets have
    ///   expired (a new timestamp would not help clients: publish again) or the root has (renew it first with
    ///   ``rotateRoot(oldKeys:newKeys:threshold:now:)``), and as ``publish(_:removing:targetsKey:snapshotKey:timestampKey:now:)``.
    @discardableResult
    public func renewTimestamp(timestampKey: TUFSigningKey, now: Date = Date()) throws(TUFRepositoryError) -> Versions {
        try self.locked { () throws(TUFRepositoryError) -> Versions in
            let expiry = try self.expiryPeriods()
            let current = try self.load()
            let root = try self.parse { () throws(TUFError) in try TUFRoot(bytes: current.roots.last!) }
            try self.checkRootNotExpired(root, now: now)
            try Self.checkKey(timestampKey, role: TUFRoleName.timestamp, root: root)
            let old = try self.parse { () throws(TUFError) in try TUFTimestamp(bytes: current.timestamp) }
            let timestampVersion = max(old.version, try self.signedTimestampVersion()) + 1
            let timestampFile = try Self.sign(
                TUFMetadataBuilder.timestamp(
                    version: timestampVersion, expires: Self.seconds(now) + Int64(expiry.timestamp) * 86_400, snapshotVersion: old.snapshotMeta.version,
                    snapshotFile: current.snapshot),
                with: [timestampKey])
            let next = State(roots: current.roots, timestamp: timestampFile, snapshot: current.snapshot, targets: current.targets)
            try self.verifyAsClients(next, previous: current, targetFiles: [:], now: now)
            try self.recordTimestampVersion(timestampVersion)
            try self.write(timestampFile, directory: self.metadataDirectory, name: "timestamp.json")
            let snapshot = try self.parse { () throws(TUFError) in try TUFSnapshot(bytes: current.snapshot) }
            let targets = try self.parse { () throws(TUFError) in try TUFTargets(bytes: current.targets, role: TUFRoleName.targets) }
            return Versions(root: root.version, targets: targets.version, snapshot: snapshot.version, timestamp: timestampVersion)
        }
    }

    // MARK: - Root rotation

    /// A new root version whose root keys are `newKeys` with `threshold`, the other roles' keys unchanged, signed by
    /// `oldKeys` (which must meet the current root's threshold) and by `newKeys` (which must meet the new one), so
    /// every client walks from the current root to it (§5.3.4).
    ///
    /// An expired repository is renewed this way: the current root, timestamp, snapshot or targets may have expired
    /// (the private `verifyRotation(_:previous:now:)` says why only their expiry is waived). The new root may then vouch for an expired
    /// timestamp, snapshot or targets, which this does not sign (it holds no online key): clients refuse the
    /// repository until ``renewTimestamp(timestampKey:now:)`` or a publication renews them.
    ///
    /// - Throws: ``TUFRepositoryError``: ``TUFRepositoryError/Code/wrongKey`` (an old key that is not a root key
    ///   of the current version, too few old or new keys for a threshold), ``TUFRepositoryError/Code/invalidInput``,
    ///   and as ``publish(_:removing:targetsKey:snapshotKey:timestampKey:now:)``.
    @discardableResult
    public func rotateRoot(oldKeys: [TUFSigningKey], newKeys: [TUFSigningKey], threshold: Int, now: Date = Date()) throws(TUFRepositoryError) -> Versions {
        try self.locked { () throws(TUFRepositoryError) -> Versions in
            let expiry = try self.expiryPeriods()
            let current = try self.load()
            let root = try self.parse { () throws(TUFError) in try TUFRoot(bytes: current.roots.last!) }
            guard let rootRole = root.roleKeys(TUFRoleName.root) else { throw TUFRepositoryError(.inconsistent, "root version \(root.version) has no root role") }
            for key in oldKeys where !rootRole.keyIDs.contains(key.keyID) {
                throw TUFRepositoryError(.wrongKey, "key \(key.keyID.prefix(12))… is not a root key of root version \(root.version)", keyID: key.keyID)
            }
            let oldIDs = Set(oldKeys.map(\.keyID))
            guard oldIDs.count >= rootRole.threshold else {
                throw TUFRepositoryError(
                    .wrongKey, "\(oldIDs.count) distinct old root key\(oldIDs.count == 1 ? "" : "s") given; root version \(root.version) needs \(rootRole.threshold) to sign its successor")
            }
            var distinctNew: [TUFSigningKey] = []
            for key in newKeys where !distinctNew.contains(where: { $0.keyID == key.keyID }) { distinctNew.append(key) }
            guard (1...max(1, distinctNew.count)).contains(threshold), !distinctNew.isEmpty else {
                throw TUFRepositoryError(.invalidInput, "the root threshold \(threshold) is not between 1 and the \(distinctNew.count) distinct new root key\(distinctNew.count == 1 ? "" : "s") given")
            }
            guard let rootSigned = try self.parse({ () throws(TUFError) in try TUFEnvelope.signedObject(of: current.roots.last!) }).objectValue,
                let oldKeyObjects = rootSigned["keys"]?.objectValue
            else { throw TUFRepositoryError(.inconsistent, "root version \(root.version) has no keys or roles object") }
            // Keep every other role's keys (as written) and drop the root keys that are no longer used by any role.
            var roles: [String: TUFRoleKeys] = [:]
            for name in [TUFRoleName.targets, TUFRoleName.snapshot, TUFRoleName.timestamp] {
                guard let role = root.roleKeys(name) else { throw TUFRepositoryError(.inconsistent, "root version \(root.version) has no \(name) role") }
                roles[name] = role
            }
            roles[TUFRoleName.root] = TUFRoleKeys(keyIDs: distinctNew.map(\.keyID), threshold: threshold)
            let used = Set(roles.values.flatMap(\.keyIDs))
            var keys: [String: TUFJSON] = [:]
            for member in oldKeyObjects.members where used.contains(member.key) { keys[member.key] = member.value }
            for key in distinctNew { keys[key.keyID] = key.publicKeyJSON }
            let version = root.version + 1
            let rootFile = try Self.sign(
                TUFMetadataBuilder.root(
                    version: version, expires: Self.seconds(now) + Int64(expiry.root) * 86_400, keys: keys, roles: roles, consistentSnapshot: root.consistentSnapshot),
                with: oldKeys + distinctNew)
            let next = State(roots: current.roots + [rootFile], timestamp: current.timestamp, snapshot: current.snapshot, targets: current.targets)
            if try self.expiredRoles(current, now: now).isEmpty {
                try self.verifyAsClients(next, previous: current, targetFiles: [:], now: now)
            } else {
                try self.verifyRotation(next, previous: current, now: now)
            }
            try self.write(rootFile, directory: self.metadataDirectory, name: "\(version).root.json")
            try self.write(rootFile, directory: self.metadataDirectory, name: "root.json")
            let snapshot = try self.parse { () throws(TUFError) in try TUFSnapshot(bytes: current.snapshot) }
            let targets = try self.parse { () throws(TUFError) in try TUFTargets(bytes: current.targets, role: TUFRoleName.targets) }
            let timestamp = try self.parse { () throws(TUFError) in try TUFTimestamp(bytes: current.timestamp) }
            return Versions(root: version, targets: targets.version, snapshot: snapshot.version, timestamp: timestamp.version)
        }
    }

    /// The top-level roles whose current metadata has expired at `now`, root first.
    func expiredRoles(_ state: State, now: Date) throws(TUFRepositoryError) -> [String] {
        let root = try self.parse { () throws(TUFError) in try TUFRoot(bytes: state.roots.last!) }
        let targets = try self.parse { () throws(TUFError) in try TUFTargets(bytes: state.targets, role: TUFRoleName.targets) }
        let snapshot = try self.parse { () throws(TUFError) in try TUFSnapshot(bytes: state.snapshot) }
        let timestamp = try self.parse { () throws(TUFError) in try TUFTimestamp(bytes: state.timestamp) }
        let envelopes = [(TUFRoleName.root, root.envelope), (TUFRoleName.targets, targets.envelope), (TUFRoleName.snapshot, snapshot.envelope), (TUFRoleName.timestamp, timestamp.envelope)]
        return envelopes.filter { $0.1.isExpired(at: now.timeIntervalSince1970) }.map(\.0)
    }

    /// The check of a root rotation in a repository whose metadata has expired, which a rotation must be able to
    /// renew (otherwise an expired root could only be replaced by a new repository, and every client re-shipped).
    ///
    /// A deliberate waiver, of expiry only. TUF's client workflow walks root versions checking each one's
    /// signatures (a threshold of the trusted root's keys and of its own) and version, not expiry, and checks expiry
    /// on the final root alone (specification §5.3.4–§5.3.10): so the root chain is walked at `now` and the new root
    /// must not have expired. The timestamp, snapshot and targets, which a rotation does not change, then go through
    /// every other check of §5.4–§5.6 exactly as ``verifyAsClients(_:previous:targetFiles:now:)`` runs them (a
    /// threshold of their keys in the new root, the timestamp→snapshot length, hashes and version, the
    /// snapshot→targets length, hashes and version, rollback against `previous`, the size caps, and every target
    /// file's length and hashes), judged one second before the earliest of their three expiries (or at `now` when
    /// that is earlier): at that instant none of them has expired, so their expiry checks (§5.4.4, §5.5.7, §5.6.4)
    /// are the only ones that cannot fail; nothing else is skipped. Clients refuse the repository until those roles
    /// are signed again (`pinning pinset timestamp` or `publish`).
    func verifyRotation(_ state: State, previous: State, now: Date) throws(TUFRepositoryError) {
        let earliest: Int64
        do throws(TUFError) {
            var set = try TUFTrustedSet(trustedRoot: state.roots[0], updateStartTime: now)
            for root in state.roots.dropFirst() { try set.updateRoot(root) }
            try set.checkRootNotExpired()
            earliest = min(
                try TUFTimestamp(bytes: state.timestamp).envelope.expires, try TUFSnapshot(bytes: state.snapshot).envelope.expires,
                try TUFTargets(bytes: state.targets, role: TUFRoleName.targets).envelope.expires)
        } catch {
            throw TUFRepositoryError(.inconsistent, "\(VisibleText.escaped(self.directory)): a client would refuse the result: \(error)")
        }
        // The new root expires days after `now`, so it has not expired at this earlier instant either.
        let reference = min(now, Date(timeIntervalSince1970: Double(earliest) - 1))
        try self.verifyAsClients(state, previous: previous, targetFiles: [:], now: reference)
    }

    // MARK: - State

    /// The served metadata: every root version, and the timestamp, snapshot and targets it leads to.
    struct State {
        var roots: [[UInt8]]
        var timestamp: [UInt8]
        var snapshot: [UInt8]
        var targets: [UInt8]
    }

    /// Reads the metadata a client would fetch: `1.root.json`, `2.root.json`, … while they exist (the files
    /// clients walk, whatever `root.json` says), `timestamp.json`, the snapshot it names and the targets that
    /// names.
    func load() throws(TUFRepositoryError) -> State {
        let limits = TUFLimits()
        var roots: [[UInt8]] = []
        while let bytes = try self.read(self.metadataDirectory + "/\(roots.count + 1).root.json", maximumLength: limits.rootMaxLength) {
            roots.append(bytes)
        }
        guard !roots.isEmpty else { throw TUFRepositoryError(.notARepository, "\(VisibleText.escaped(self.directory)): not a pin-set repository (no metadata/1.root.json)") }
        guard let timestamp = try self.read(self.metadataDirectory + "/timestamp.json", maximumLength: limits.timestampMaxLength) else {
            throw TUFRepositoryError(.inconsistent, "\(VisibleText.escaped(self.metadataDirectory))/timestamp.json is missing")
        }
        let snapshotVersion = try self.parse { () throws(TUFError) in try TUFTimestamp(bytes: timestamp).snapshotMeta.version }
        guard let snapshot = try self.read(self.metadataDirectory + "/\(snapshotVersion).snapshot.json", maximumLength: limits.snapshotMaxLength) else {
            throw TUFRepositoryError(.inconsistent, "\(VisibleText.escaped(self.metadataDirectory))/\(snapshotVersion).snapshot.json, which the timestamp names, is missing")
        }
        let targetsVersion = try self.parse { () throws(TUFError) -> Int in
            guard let entry = try TUFSnapshot(bytes: snapshot).entry(forRole: TUFRoleName.targets) else {
                throw TUFError(role: TUFRoleName.snapshot, rule: .malformed, "no targets.json entry")
            }
            return entry.version
        }
        guard let targets = try self.read(self.metadataDirectory + "/\(targetsVersion).targets.json", maximumLength: limits.targetsMaxLength) else {
            throw TUFRepositoryError(.inconsistent, "\(VisibleText.escaped(self.metadataDirectory))/\(targetsVersion).targets.json, which the snapshot names, is missing")
        }
        return State(roots: roots, timestamp: timestamp, snapshot: snapshot, targets: targets)
    }

    /// Checks `state` as ``TUFTrustedSet`` does for a fresh client (from version 1 of the root) and, with
    /// `previous`, for a client that trusts the previous state (rollback rules), and every target against the
    /// bytes it will be served as (`targetFiles`, then the files already in `targets/`).
    func verifyAsClients(_ state: State, previous: State?, targetFiles: [String: [UInt8]], now: Date) throws(TUFRepositoryError) {
        do {
            for prior in [nil] + (previous.map { [$0] } ?? []) {
                var set = try TUFTrustedSet(trustedRoot: state.roots[0], updateStartTime: now)
                for root in state.roots.dropFirst() { try set.updateRoot(root) }
                try set.checkRootNotExpired()
                if let prior {
                    try set.updateTimestamp(prior.timestamp)
                    try set.updateTimestamp(state.timestamp)
                    try set.checkTimestampFinal()
                    try set.updateSnapshot(prior.snapshot, isLocalCopy: true)
                } else {
                    try set.updateTimestamp(state.timestamp)
                    try set.checkTimestampFinal()
                }
                try set.updateSnapshot(state.snapshot, isLocalCopy: false)
                try set.checkSnapshotFinal()
                let targets = try set.updateTargets(state.targets)
                guard prior == nil else { continue }
                for target in targets.targets.values {
                    let stored = Self.storedTargetPath(target)
                    guard let bytes = try targetFiles[stored] ?? self.readTarget(stored, maximumLength: target.length) else {
                        throw TUFError(role: target.path, rule: .unavailable, "targets/\(TUFError.printable(stored)) is missing")
                    }
                    try target.verify(bytes)
                }
            }
        } catch let error as TUFError {
            // Display text, as TUFError's description is (``TUFRepositoryStatus/clientRefusal`` is this message).
            throw TUFRepositoryError(.inconsistent, "\(VisibleText.escaped(self.directory)): a client would refuse the result: \(error)")
        } catch let error as TUFRepositoryError {
            throw error
        } catch {
            throw TUFRepositoryError(.inconsistent, "\(VisibleText.escaped(self.directory)): \(VisibleText.escaped("\(error)"))")
        }
    }

    private func readTarget(_ stored: String, maximumLength: Int) throws -> [UInt8]? {
        do {
            return try TUFFiles.readFile(self.targetsDirectory + "/" + stored, maximumLength: maximumLength, role: stored)
        } catch {
            throw TUFError(role: stored, rule: .unavailable, "targets/\(TUFError.printable(stored)): \(error.message)")
        }
    }

    /// The highest timestamp version this repository has signed (`.pinset-timestamp-version`; 0 when none is
    /// recorded, as in a repository an earlier release wrote).
    func signedTimestampVersion() throws(TUFRepositoryError) -> Int {
        guard let bytes = try self.read(self.directory + "/.pinset-timestamp-version", maximumLength: 32) else { return 0 }
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let version = Int(text), version >= 0 else {
            throw TUFRepositoryError(.inconsistent, "\(VisibleText.escaped(self.directory))/.pinset-timestamp-version: not a version number")
        }
        return version
    }

    /// Records `version` as the highest timestamp version signed, before the timestamp itself is written (a crash
    /// between the two leaves a record above the file: the next version is higher still, which is safe).
    func recordTimestampVersion(_ version: Int) throws(TUFRepositoryError) {
        guard version > (try self.signedTimestampVersion()) else { return }
        try self.write(Array("\(version)\n".utf8), directory: self.directory, name: ".pinset-timestamp-version")
    }

    /// The highest N of the `N.ROLE.json` files in `metadata/` (0 when none), so a version written by an
    /// interrupted run (never referenced, but maybe cached) is never written again with other contents.
    ///
    /// A listing that fails is an error, not "none": 0 would let a version already written be written again. A
    /// name that is not UTF-8 is skipped, and that is exact: it cannot be `N.ROLE.json`, which is ASCII.
    func highestVersion(of role: String) throws(TUFRepositoryError) -> Int {
        let suffix = "." + role + ".json"
        let names: [String]
        do {
            names = try DirectoryListing.entries(atPath: self.metadataDirectory).compactMap(\.name)
        } catch {
            throw TUFRepositoryError(.io, "\(VisibleText.escaped(self.metadataDirectory)): cannot be listed: \(error.words)")
        }
        return names.compactMap { $0.hasSuffix(suffix) ? Int($0.dropLast(suffix.count)) : nil }.max() ?? 0
    }

    // MARK: - Helpers

    /// Where a target is stored under `targets/`: `DIR/SHA256.NAME`, as clients fetch it under consistent snapshots.
    static func storedTargetPath(_ target: TUFTargetFile) -> String {
        let hash = target.hashes["sha256"] ?? ""
        guard let slash = target.path.lastIndex(of: "/") else { return hash + "." + target.path }
        return String(target.path[...slash]) + hash + "." + String(target.path[target.path.index(after: slash)...])
    }

    /// Target paths this writer lays out as files: relative, `/`-separated, no empty, `.` or `..` part, no
    /// backslash (each would name another file, or none, on some server), and no character that does not show
    /// (``VisibleText/isHidden(_:)``: control and format characters, bidi controls, zero-width and other
    /// default-ignorable ones), so that a path reads as what it names in every listing and log. Clients refuse the
    /// same paths (`PinSetUpdater`), so a writer never publishes a set they would refuse.
    static func checkTargetPath(_ path: String) throws(TUFRepositoryError) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !path.isEmpty, !path.hasPrefix("/"), parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }) else {
            throw TUFRepositoryError(.invalidInput, "target path \(VisibleText.quoted(path, limit: 200)) must be relative, with no empty, . or .. part")
        }
        guard !path.unicodeScalars.contains(where: { VisibleText.isHidden($0) || $0 == "\\" }) else {
            throw TUFRepositoryError(
                .invalidInput, "target path \(VisibleText.quoted(path, limit: 200)) has a control or invisible character, or a backslash")
        }
    }

    /// Refuses to sign for a root that has expired: clients refuse everything it vouches for (§5.3.10), so the
    /// root is renewed first, by ``rotateRoot(oldKeys:newKeys:threshold:now:)``, which an expired root does not block.
    func checkRootNotExpired(_ root: TUFRoot, now: Date) throws(TUFRepositoryError) {
        guard root.envelope.isExpired(at: now.timeIntervalSince1970) else { return }
        throw TUFRepositoryError(
            .inconsistent,
            "\(VisibleText.escaped(self.directory)): root version \(root.version) expired at \(VisibleText.escaped(root.envelope.expiresText)), and clients refuse everything it vouches for: renew it first with pinning pinset rotate-root (its keys may sign the new version again: --old-key K --new-key K), then run this again"
        )
    }

    /// ``TUFMetadataBuilder/targets(version:expires:targets:)``, a repeated path refused in words.
    static func targetsObject(version: Int, expires: Int64, targets: [TUFTargetFile]) throws(TUFRepositoryError) -> TUFJSONObject {
        do {
            return try TUFMetadataBuilder.targets(version: version, expires: expires, targets: targets)
        } catch {
            throw TUFRepositoryError(.invalidInput, "target path \(VisibleText.quoted(error.path, limit: 200)) is listed twice")
        }
    }

    static func checkKey(_ key: TUFSigningKey, role: String, root: TUFRoot) throws(TUFRepositoryError) {
        guard let roleKeys = root.roleKeys(role), roleKeys.keyIDs.contains(key.keyID) else {
            let listed = root.roleKeys(role)?.keyIDs.map { String($0.prefix(12)) + "…" }.joined(separator: ", ") ?? "none"
            throw TUFRepositoryError(
                .wrongKey, "key \(key.keyID.prefix(12))… is not a \(role) key of root version \(root.version) (its \(role) keys: \(listed))", keyID: key.keyID)
        }
    }

    static func checkPeriods(_ periods: TUFExpiryPeriods) throws(TUFRepositoryError) {
        for role in [TUFRoleName.root, TUFRoleName.targets, TUFRoleName.snapshot, TUFRoleName.timestamp] {
            let days = periods[role]!
            guard (1...TUFExpiryPeriods.maximumDays).contains(days) else {
                throw TUFRepositoryError(.invalidInput, "the \(role) expiry of \(days) days is not between 1 and \(TUFExpiryPeriods.maximumDays)")
            }
        }
    }

    static func seconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970.rounded(.down)) }

    static func sign(_ signed: TUFJSONObject, with keys: [TUFSigningKey]) throws(TUFRepositoryError) -> [UInt8] {
        do {
            return try TUFMetadataBuilder.sign(signed, with: keys)
        } catch {
            throw TUFRepositoryError(.invalidInput, error.message)
        }
    }

    func parse<Value>(_ body: () throws(TUFError) -> Value) throws(TUFRepositoryError) -> Value {
        do {
            return try body()
        } catch {
            throw TUFRepositoryError(.inconsistent, "\(VisibleText.escaped(self.directory)): \(error)")
        }
    }

    func read(_ path: String, maximumLength: Int) throws(TUFRepositoryError) -> [UInt8]? {
        do {
            return try TUFFiles.readFile(path, maximumLength: maximumLength, role: path)
        } catch {
            throw TUFRepositoryError(.io, error.message)
        }
    }

    func write(_ bytes: [UInt8], directory: String, name: String) throws(TUFRepositoryError) {
        do {
            try TUFFiles.writeFileAtomically(bytes, directory: directory, name: name, role: name)
        } catch {
            throw TUFRepositoryError(.io, error.message)
        }
    }

    /// Runs `body` holding the repository's lock (`.pinset.lock`, `flock`, not waited for).
    func locked<Value>(_ body: () throws(TUFRepositoryError) -> Value) throws(TUFRepositoryError) -> Value {
        let path = self.directory + "/.pinset.lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw TUFRepositoryError(.io, "\(VisibleText.escaped(path)): cannot open: \(SystemErrorText.text(errno))") }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            throw TUFRepositoryError(.busy, "\(VisibleText.escaped(self.directory)): another pinning pinset command is writing this repository (\(VisibleText.escaped(path)) is locked)")
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }
}

extension TUFEnvelope {
    /// The `signed` object of a metadata file, as written (for rewriting parts of it).
    static func signedObject(of bytes: [UInt8]) throws(TUFError) -> TUFJSON {
        guard let signed = (try? TUFJSON.parse(bytes))?.objectValue?["signed"] else {
            throw TUFError(role: TUFRoleName.root, rule: .malformed, "no \"signed\" object")
        }
        return signed
    }
}
