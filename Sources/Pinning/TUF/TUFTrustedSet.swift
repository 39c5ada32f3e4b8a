package import Foundation

/// Size caps and bounds of a TUF client (python-tuf's `UpdaterConfig` defaults).
public struct TUFLimits: Sendable, Hashable {
    /// Largest root metadata file accepted.
    package var rootMaxLength: Int
    /// Largest timestamp metadata file accepted.
    package var timestampMaxLength: Int
    /// Largest snapshot metadata file accepted when the timestamp names no length.
    package var snapshotMaxLength: Int
    /// Largest targets metadata file accepted when the snapshot names no length.
    package var targetsMaxLength: Int
    /// How many new root versions one update walks through at most.
    package var maximumRootRotations: Int
    /// How many targets roles one target search visits at most (the top-level one included).
    package var maximumDelegations: Int

    public init(
        rootMaxLength: Int = 512_000, timestampMaxLength: Int = 16_384, snapshotMaxLength: Int = 2_000_000, targetsMaxLength: Int = 5_000_000,
        maximumRootRotations: Int = 256, maximumDelegations: Int = 32
    ) {
        self.rootMaxLength = rootMaxLength
        self.timestampMaxLength = timestampMaxLength
        self.snapshotMaxLength = snapshotMaxLength
        self.targetsMaxLength = targetsMaxLength
        self.maximumRootRotations = maximumRootRotations
        self.maximumDelegations = maximumDelegations
    }
}

/// The metadata a TUF client trusts during one update, and the rules of the client workflow (TUF specification
/// 1.0, §5) for taking in more: bytes in, trusted metadata or a ``TUFError`` out. No files, sockets, tasks or
/// clocks: the caller fetches and stores, and fixes the update's start time once (§5.1), so every expiry in one
/// update is judged against the same instant.
///
/// The order is the workflow's: `updateRoot(_:)` for each newer root, then `updateTimestamp(_:)`,
/// `updateSnapshot(_:isLocalCopy:)`, `updateTargets(_:)`, then `search(for:)` for delegated
/// targets. Each step refuses to run out of order, and each checks that the step before it ended in metadata
/// valid to build on (a root not expired, a timestamp not expired, a snapshot of the version the timestamp names
/// and not expired), so a caller cannot skip a freshness check.
///
/// Local copies: the caller may offer the metadata it stored last time before fetching new metadata (as
/// python-tuf does). A local timestamp or snapshot that still verifies under the current root is kept even when
/// expired or superseded, only as the reference for rollback checks of what comes next; one that no longer
/// verifies (its keys were rotated: the specification's fast-forward attack recovery, §5.3.11) is simply not
/// offered. Failing to load a local copy never makes anything trusted.
public struct TUFTrustedSet: Sendable {
    /// The update's start time, in seconds since 1970.
    package let referenceTime: Double
    package let limits: TUFLimits
    public private(set) var root: TUFRoot
    package private(set) var timestamp: TUFTimestamp?
    package private(set) var snapshot: TUFSnapshot?
    public private(set) var targets: TUFTargets?

    /// Starts from the trusted root (the one the client shipped with, or the last it stored), which must be signed
    /// by a threshold of its own root keys. Its expiry does not matter here: a newer root may follow (§5.2).
    package init(trustedRoot bytes: [UInt8], updateStartTime: Date, limits: TUFLimits = TUFLimits()) throws(TUFError) {
        try Self.checkSize(bytes, cap: limits.rootMaxLength, role: TUFRoleName.root)
        let root = try TUFRoot(bytes: bytes)
        try TUFSignatures.verifyThreshold(
            root.envelope, keys: root.keys, roleKeys: try Self.roleKeys(root, TUFRoleName.root), role: TUFRoleName.root, signer: "its own root role")
        self.root = root
        self.referenceTime = updateStartTime.timeIntervalSince1970
        self.limits = limits
    }

    // MARK: - Root (§5.3)

    /// Takes in the next root version (`N+1.root.json` when the trusted root is version N): signed by a threshold
    /// of the trusted root's root keys and by a threshold of its own, and of exactly version N+1. Its expiry is not
    /// checked here (an intermediate root may have expired); ``updateTimestamp(_:)`` checks the final one.
    @discardableResult
    package mutating func updateRoot(_ bytes: [UInt8]) throws(TUFError) -> TUFRoot {
        let role = TUFRoleName.root
        guard self.timestamp == nil else { throw TUFError(role: role, rule: .outOfOrder, "root cannot be updated after the timestamp (the client workflow updates root first)") }
        try Self.checkSize(bytes, cap: self.limits.rootMaxLength, role: role)
        let new = try TUFRoot(bytes: bytes)
        try TUFSignatures.verifyThreshold(
            new.envelope, keys: self.root.keys, roleKeys: try Self.roleKeys(self.root, role), role: role, signer: "the trusted root version \(self.root.version)")
        let expected = self.root.version + 1
        guard new.version == expected else {
            throw TUFError(role: role, rule: .versionMismatch, "the file for version \(expected) holds version \(new.version)", expectedVersion: expected, foundVersion: new.version)
        }
        try TUFSignatures.verifyThreshold(new.envelope, keys: new.keys, roleKeys: try Self.roleKeys(new, role), role: role, signer: "its own root role")
        self.root = new
        return new
    }

    /// §5.3.10: the final root must not have expired at the update's start time.
    package func checkRootNotExpired() throws(TUFError) {
        guard !self.root.envelope.isExpired(at: self.referenceTime) else {
            throw TUFError(role: TUFRoleName.root, rule: .expired, "version \(self.root.version) expired at \(self.root.envelope.expiresText)", foundVersion: self.root.version)
        }
    }

    // MARK: - Timestamp (§5.4)

    /// What an update did.
    package enum Outcome: Sendable, Equatable {
        /// The new metadata is now trusted.
        case accepted
        /// The new metadata has the trusted version: the trusted metadata is kept (§5.4.3: equal versions are not an
        /// update; content that changed without a new version is ignored).
        case unchanged
    }

    /// Takes in timestamp metadata: signed by the root's timestamp keys, not older than the trusted timestamp, and
    /// naming a snapshot version not older than the one the trusted timestamp named. Expiry is checked by
    /// ``checkTimestampFinal()`` (a local copy may be expired and still guard against rollback).
    ///
    /// - Returns: ``Outcome/unchanged`` when the version equals the trusted one (the trusted one is kept).
    @discardableResult
    package mutating func updateTimestamp(_ bytes: [UInt8]) throws(TUFError) -> Outcome {
        let role = TUFRoleName.timestamp
        guard self.snapshot == nil else { throw TUFError(role: role, rule: .outOfOrder, "timestamp cannot be updated after the snapshot") }
        try self.checkRootNotExpired()
        try Self.checkSize(bytes, cap: self.limits.timestampMaxLength, role: role)
        let new = try TUFTimestamp(bytes: bytes)
        try TUFSignatures.verifyThreshold(new.envelope, keys: self.root.keys, roleKeys: try Self.roleKeys(self.root, role), role: role, signer: "root")
        if let trusted = self.timestamp {
            if new.version < trusted.version {
                throw TUFError(role: role, rule: .rollback, "version \(new.version) is older than the trusted version \(trusted.version)", expectedVersion: trusted.version, foundVersion: new.version)
            }
            if new.version == trusted.version { return .unchanged }
            if new.snapshotMeta.version < trusted.snapshotMeta.version {
                throw TUFError(
                    role: role, rule: .rollback,
                    "version \(new.version) names snapshot version \(new.snapshotMeta.version), older than the trusted timestamp's snapshot version \(trusted.snapshotMeta.version)",
                    expectedVersion: trusted.snapshotMeta.version, foundVersion: new.snapshotMeta.version)
            }
        }
        self.timestamp = new
        return .accepted
    }

    /// The trusted timestamp must not have expired (§5.4.4).
    package func checkTimestampFinal() throws(TUFError) {
        guard let timestamp = self.timestamp else { throw TUFError(role: TUFRoleName.timestamp, rule: .unavailable, "no trusted timestamp") }
        guard !timestamp.envelope.isExpired(at: self.referenceTime) else {
            throw TUFError(role: TUFRoleName.timestamp, rule: .expired, "version \(timestamp.version) expired at \(timestamp.envelope.expiresText)", foundVersion: timestamp.version)
        }
    }

    // MARK: - Snapshot (§5.5)

    /// Takes in snapshot metadata: within the length and hashes the timestamp names (unless it is the client's own
    /// local copy, which was checked when it was fetched), signed by the root's snapshot keys, not older than the
    /// trusted snapshot, and dropping no file the trusted snapshot listed nor lowering any file's version.
    /// ``checkSnapshotFinal()`` then checks its version against the timestamp and its expiry.
    package mutating func updateSnapshot(_ bytes: [UInt8], isLocalCopy: Bool) throws(TUFError) {
        let role = TUFRoleName.snapshot
        guard self.targets == nil else { throw TUFError(role: role, rule: .outOfOrder, "snapshot cannot be updated after the targets") }
        try self.checkTimestampFinal()
        guard let timestamp = self.timestamp else { throw TUFError(role: role, rule: .unavailable, "no trusted timestamp") }
        // A local copy is an older snapshot, kept as the reference for rollback checks: the new timestamp's length
        // is not its length (one more digit in a version, a longer signature), so only the general cap bounds it.
        // Bounding it by the new length would drop the reference and let a rollback through.
        if isLocalCopy {
            try Self.checkSize(bytes, cap: self.limits.snapshotMaxLength, role: role)
        } else {
            try Self.checkSize(bytes, cap: timestamp.snapshotMeta.length ?? self.limits.snapshotMaxLength, role: role)
            try timestamp.snapshotMeta.verify(bytes, role: role, what: "the snapshot")
        }
        let new = try TUFSnapshot(bytes: bytes)
        try TUFSignatures.verifyThreshold(new.envelope, keys: self.root.keys, roleKeys: try Self.roleKeys(self.root, role), role: role, signer: "root")
        if let trusted = self.snapshot {
            // §5.5.5: never an older snapshot than the trusted one.
            if new.version < trusted.version {
                throw TUFError(role: role, rule: .rollback, "version \(new.version) is older than the trusted version \(trusted.version)", expectedVersion: trusted.version, foundVersion: new.version)
            }
            // §5.5.6: every file the trusted snapshot listed, at its version or newer.
            for name in trusted.meta.keys.sorted() {
                let old = trusted.meta[name]!
                guard let entry = tufExactLookup(new.meta, name) else {
                    throw TUFError(
                        role: role, rule: .removedFromSnapshot, "version \(new.version) drops \(TUFError.printable(name)), which the trusted version \(trusted.version) lists",
                        expectedVersion: old.version)
                }
                if entry.version < old.version {
                    throw TUFError(
                        role: role, rule: .rollback,
                        "version \(new.version) names \(TUFError.printable(name)) version \(entry.version), older than the trusted snapshot's version \(old.version)",
                        expectedVersion: old.version, foundVersion: entry.version)
                }
            }
        }
        self.snapshot = new
    }

    /// The trusted snapshot must have the version the timestamp names (§5.5.4) and must not have expired (§5.5.7).
    package func checkSnapshotFinal() throws(TUFError) {
        let role = TUFRoleName.snapshot
        guard let snapshot = self.snapshot, let timestamp = self.timestamp else { throw TUFError(role: role, rule: .unavailable, "no trusted snapshot") }
        guard snapshot.version == timestamp.snapshotMeta.version else {
            throw TUFError(
                role: role, rule: .versionMismatch, "version \(snapshot.version) is not version \(timestamp.snapshotMeta.version), which the timestamp names",
                expectedVersion: timestamp.snapshotMeta.version, foundVersion: snapshot.version)
        }
        guard !snapshot.envelope.isExpired(at: self.referenceTime) else {
            throw TUFError(role: role, rule: .expired, "version \(snapshot.version) expired at \(snapshot.envelope.expiresText)", foundVersion: snapshot.version)
        }
    }

    // MARK: - Targets (§5.6)

    /// The snapshot entry, version, size cap and file name of the top-level targets metadata, for fetching it.
    package func targetsRequest() throws(TUFError) -> TUFRoleRequest {
        try self.checkSnapshotFinal()
        return try TUFRoleRequest(role: TUFRoleName.targets, delegator: TUFRoleName.root, snapshot: self.snapshot!, root: self.root, limits: self.limits)
    }

    /// Takes in the top-level targets metadata: within the length and hashes the snapshot names (a local copy is
    /// checked too: it must be the very file the snapshot names), signed by the root's targets keys, of the version
    /// the snapshot names, and not expired.
    @discardableResult
    package mutating func updateTargets(_ bytes: [UInt8]) throws(TUFError) -> TUFTargets {
        let request = try self.targetsRequest()
        let new = try request.verify(bytes, keys: self.root.keys, roleKeys: try Self.roleKeys(self.root, TUFRoleName.targets), signer: "root", referenceTime: self.referenceTime)
        self.targets = new
        return new
    }

    /// A search for `targetPath` through the trusted targets and their delegations (§5.6.7). Needs the top-level
    /// targets.
    package func search(for targetPath: String) throws(TUFError) -> TUFTargetSearch {
        guard let targets = self.targets, let snapshot = self.snapshot else {
            throw TUFError(role: TUFRoleName.targets, rule: .unavailable, "no trusted targets metadata to search")
        }
        return try TUFTargetSearch(targetPath: targetPath, targets: targets, snapshot: snapshot, root: self.root, limits: self.limits, referenceTime: self.referenceTime)
    }

    // MARK: - Helpers

    static func checkSize(_ bytes: [UInt8], cap: Int, role: String) throws(TUFError) {
        guard bytes.count <= cap else { throw TUFError(role: role, rule: .tooLarge, "the file is \(bytes.count) bytes, over its cap of \(cap) bytes") }
    }

    static func roleKeys(_ root: TUFRoot, _ name: String) throws(TUFError) -> TUFRoleKeys {
        guard let keys = root.roleKeys(name) else { throw TUFError(role: name, rule: .malformed, "root version \(root.version) defines no \(name) role") }
        return keys
    }
}

/// A targets metadata file to load: its role, its delegator, the snapshot's entry for it, the cap on its size and
/// the file name to fetch (`VERSION.ROLE.json` under consistent snapshots, else `ROLE.json`; the role name
/// percent-encoded as python-tuf's `quote(name, "")`).
package struct TUFRoleRequest: Sendable {
    package let role: String
    package let delegator: String
    package let meta: TUFMetaFile
    package let maximumLength: Int
    package let consistentSnapshot: Bool

    init(role: String, delegator: String, snapshot: TUFSnapshot, root: TUFRoot, limits: TUFLimits) throws(TUFError) {
        guard let meta = snapshot.entry(forRole: role) else {
            throw TUFError(role: role, rule: .notInSnapshot, "snapshot version \(snapshot.version) does not list \(TUFError.printable(role)).json, so it cannot be trusted")
        }
        self.role = role
        self.delegator = delegator
        self.meta = meta
        self.maximumLength = meta.length ?? limits.targetsMaxLength
        self.consistentSnapshot = root.consistentSnapshot
    }

    /// The file name under the metadata URL.
    package var remoteFileName: String {
        let name = TUFNames.quote(self.role)
        return self.consistentSnapshot ? "\(self.meta.version).\(name).json" : "\(name).json"
    }

    /// Checks a candidate file for this role and returns it parsed.
    func verify(_ bytes: [UInt8], keys: [String: TUFKey], roleKeys: TUFRoleKeys, signer: String, referenceTime: Double) throws(TUFError) -> TUFTargets {
        try TUFTrustedSet.checkSize(bytes, cap: self.maximumLength, role: self.role)
        try self.meta.verify(bytes, role: self.role, what: "the metadata file")
        let new = try TUFTargets(bytes: bytes, role: self.role)
        try TUFSignatures.verifyThreshold(new.envelope, keys: keys, roleKeys: roleKeys, role: self.role, signer: signer)
        guard new.version == self.meta.version else {
            throw TUFError(
                role: self.role, rule: .versionMismatch, "version \(new.version) is not version \(self.meta.version), which the snapshot names",
                expectedVersion: self.meta.version, foundVersion: new.version)
        }
        guard !new.envelope.isExpired(at: referenceTime) else {
            throw TUFError(role: self.role, rule: .expired, "version \(new.version) expired at \(new.envelope.expiresText)", foundVersion: new.version)
        }
        return new
    }
}

/// Names in URLs and file names.
package enum TUFNames {
    /// Percent-encodes every byte but ASCII letters, digits and `_.-~` (Python's `urllib.parse.quote(name, safe="")`),
    /// so a role name can never name another directory or a URL's query.
    package static func quote(_ name: String) -> String {
        var out = ""
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    /// Percent-encodes a target path for a URL, keeping `/` and the characters RFC 3986 allows in a path segment.
    package static func quotePath(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "~"), UInt8(ascii: "/"),
                UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
                UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        self.count >= width ? self : String(repeating: "0", count: width - self.count) + self
    }
}
