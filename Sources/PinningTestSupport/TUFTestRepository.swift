import Crypto
public import Foundation
public import Pinning
import _CryptoExtras

/// A signing key made at test time, in the form TUF metadata lists it.
public struct TUFTestSigner: Sendable {
    public enum Kind: Sendable { case ed25519, ecdsaP256, rsaPSS }

    public let kind: Kind
    public let keyJSON: TUFJSON
    public let keyID: String
    private let signer: @Sendable ([UInt8]) -> [UInt8]

    public init(_ kind: Kind) {
        self.kind = kind
        let keyType: String
        let scheme: String
        let publicValue: String
        switch kind {
        case .ed25519:
            let key = Curve25519.Signing.PrivateKey()
            (keyType, scheme, publicValue) = ("ed25519", "ed25519", key.publicKey.rawRepresentation.map { String(format: "%02x", $0) }.joined())
            self.signer = { try! Array(key.signature(for: $0)) }
        case .ecdsaP256:
            let key = P256.Signing.PrivateKey()
            (keyType, scheme, publicValue) = ("ecdsa", "ecdsa-sha2-nistp256", key.publicKey.pemRepresentation + "\n")
            self.signer = { try! Array(key.signature(for: $0).derRepresentation) }
        case .rsaPSS:
            let key = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
            (keyType, scheme, publicValue) = ("rsa", "rsassa-pss-sha256", key.publicKey.pemRepresentation + "\n")
            self.signer = { try! Array(key.signature(for: $0, padding: .PSS).rawRepresentation) }
        }
        self.keyJSON = tufObject(["keytype": .string(keyType), "scheme": .string(scheme), "keyval": tufObject(["public": .string(publicValue)])])
        // The key id as the specification defines it: SHA-256 of the key's canonical JSON.
        self.keyID = SHA256.hash(data: try! self.keyJSON.canonicalBytes()).map { String(format: "%02x", $0) }.joined()
    }

    public func sign(_ message: [UInt8]) -> String {
        self.signer(message).map { String(format: "%02x", $0) }.joined()
    }
}

public func tufObject(_ members: [String: TUFJSON]) -> TUFJSON {
    .object(TUFJSONObject(members.map { ($0.key, $0.value) })!)
}

public func tufInt(_ value: Int) -> TUFJSON { .integer(String(value)) }

/// Builds and signs the metadata of a small repository, as a repository tool would.
public struct TUFTestRepository: Sendable {
    public static let future = "2099-01-01T00:00:00Z"
    public static let past = "2000-01-01T00:00:00Z"
    /// The update start time the tests use: 2026-01-01.
    public static let now = Date(timeIntervalSince1970: 1_767_225_600)

    public var rootSigners: [TUFTestSigner]
    public var rootThreshold = 1
    /// The thresholds of the other top-level roles (1 unless a test raises one).
    public var timestampThreshold = 1
    public var snapshotThreshold = 1
    public var targetsThreshold = 1
    public var timestampSigners: [TUFTestSigner]
    public var snapshotSigners: [TUFTestSigner]
    public var targetsSigners: [TUFTestSigner]
    public var consistentSnapshot = true

    public init(kind: TUFTestSigner.Kind = .ed25519) {
        self.rootSigners = [TUFTestSigner(kind)]
        self.timestampSigners = [TUFTestSigner(kind)]
        self.snapshotSigners = [TUFTestSigner(kind)]
        self.targetsSigners = [TUFTestSigner(kind)]
    }

    public static func signed(_ signed: TUFJSON, by signers: [TUFTestSigner], extraSignatures: [TUFJSON] = []) -> [UInt8] {
        let message = try! signed.canonicalBytes()
        let signatures = signers.map { tufObject(["keyid": .string($0.keyID), "sig": .string($0.sign(message))]) } + extraSignatures
        return tufObject(["signatures": .array(signatures), "signed": signed]).jsonBytes()
    }

    public static func common(_ type: String, version: Int, expires: String) -> [String: TUFJSON] {
        ["_type": .string(type), "spec_version": .string("1.0.31"), "version": tufInt(version), "expires": .string(expires)]
    }

    public static func role(_ signers: [TUFTestSigner], threshold: Int) -> TUFJSON {
        tufObject(["keyids": .array(signers.map { .string($0.keyID) }), "threshold": tufInt(threshold)])
    }

    public func rootSigned(version: Int, expires: String = Self.future) -> TUFJSON {
        var keys: [String: TUFJSON] = [:]
        for signer in self.rootSigners + self.timestampSigners + self.snapshotSigners + self.targetsSigners {
            keys[signer.keyID] = signer.keyJSON
        }
        var fields = Self.common("root", version: version, expires: expires)
        fields["consistent_snapshot"] = .bool(self.consistentSnapshot)
        fields["keys"] = tufObject(keys)
        fields["roles"] = tufObject([
            "root": Self.role(self.rootSigners, threshold: self.rootThreshold),
            "timestamp": Self.role(self.timestampSigners, threshold: self.timestampThreshold),
            "snapshot": Self.role(self.snapshotSigners, threshold: self.snapshotThreshold),
            "targets": Self.role(self.targetsSigners, threshold: self.targetsThreshold),
        ])
        return tufObject(fields)
    }

    public func root(version: Int, expires: String = Self.future, signers: [TUFTestSigner]? = nil) -> [UInt8] {
        Self.signed(self.rootSigned(version: version, expires: expires), by: signers ?? self.rootSigners)
    }

    public static func metaEntry(version: Int, of bytes: [UInt8]? = nil) -> TUFJSON {
        var entry: [String: TUFJSON] = ["version": tufInt(version)]
        if let bytes {
            entry["length"] = tufInt(bytes.count)
            entry["hashes"] = tufObject(["sha256": .string(SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined())])
        }
        return tufObject(entry)
    }

    public func timestamp(version: Int, snapshotVersion: Int, snapshotBytes: [UInt8]? = nil, expires: String = Self.future) -> [UInt8] {
        var fields = Self.common("timestamp", version: version, expires: expires)
        fields["meta"] = tufObject(["snapshot.json": Self.metaEntry(version: snapshotVersion, of: snapshotBytes)])
        return Self.signed(tufObject(fields), by: self.timestampSigners)
    }

    public func snapshot(version: Int, meta: [String: TUFJSON], expires: String = Self.future) -> [UInt8] {
        var fields = Self.common("snapshot", version: version, expires: expires)
        fields["meta"] = tufObject(meta)
        return Self.signed(tufObject(fields), by: self.snapshotSigners)
    }

    public static func targetsSigned(version: Int, targets: [String: [UInt8]] = [:], delegations: TUFJSON? = nil, expires: String = Self.future) -> TUFJSON {
        var fields = Self.common("targets", version: version, expires: expires)
        var entries: [String: TUFJSON] = [:]
        for (path, content) in targets {
            entries[path] = tufObject([
                "length": tufInt(content.count),
                "hashes": tufObject(["sha256": .string(SHA256.hash(data: content).map { String(format: "%02x", $0) }.joined())]),
            ])
        }
        fields["targets"] = tufObject(entries)
        if let delegations { fields["delegations"] = delegations }
        return tufObject(fields)
    }

    public static func delegations(keys: [TUFTestSigner], roles: [TUFJSON]) -> TUFJSON {
        var keyMap: [String: TUFJSON] = [:]
        for key in keys { keyMap[key.keyID] = key.keyJSON }
        return tufObject(["keys": tufObject(keyMap), "roles": .array(roles)])
    }

    public static func delegatedRole(_ name: String, signers: [TUFTestSigner], paths: [String]? = nil, hashPrefixes: [String]? = nil, terminating: Bool = false) -> TUFJSON {
        var fields: [String: TUFJSON] = [
            "name": .string(name), "keyids": .array(signers.map { .string($0.keyID) }), "threshold": tufInt(1), "terminating": .bool(terminating),
        ]
        if let paths { fields["paths"] = .array(paths.map { .string($0) }) }
        if let hashPrefixes { fields["path_hash_prefixes"] = .array(hashPrefixes.map { .string($0) }) }
        return tufObject(fields)
    }

    /// Version 1 of a repository whose top-level targets delegate every path (`*`) to the role `roleName`, signed by
    /// `delegate`: the files to serve under `metadata/` (`timestamp.json`, `1.snapshot.json`, `1.targets.json`).
    /// The delegated role's own metadata is the caller's to serve, or not.
    public func delegatingEverything(to roleName: String, signedBy delegate: TUFTestSigner) -> [String: [UInt8]] {
        let delegations = Self.delegations(keys: [delegate], roles: [Self.delegatedRole(roleName, signers: [delegate], paths: ["*"])])
        let targets = Self.signed(Self.targetsSigned(version: 1, delegations: delegations), by: self.targetsSigners)
        let snapshot = self.snapshot(version: 1, meta: ["targets.json": Self.metaEntry(version: 1), roleName + ".json": Self.metaEntry(version: 1)])
        return [
            "timestamp.json": self.timestamp(version: 1, snapshotVersion: 1, snapshotBytes: snapshot),
            "1.snapshot.json": snapshot, "1.targets.json": targets,
        ]
    }

    /// A trusted set brought up to version 1 of every top-level role.
    public func trustedSet(targets: TUFJSON? = nil, extraSnapshotMeta: [String: TUFJSON] = [:]) throws -> TUFTrustedSet {
        var set = try TUFTrustedSet(trustedRoot: self.root(version: 1), updateStartTime: Self.now)
        let targetsBytes = Self.signed(targets ?? Self.targetsSigned(version: 1), by: self.targetsSigners)
        var meta = extraSnapshotMeta
        meta["targets.json"] = Self.metaEntry(version: 1)
        try set.updateTimestamp(self.timestamp(version: 1, snapshotVersion: 1))
        try set.checkTimestampFinal()
        try set.updateSnapshot(self.snapshot(version: 1, meta: meta), isLocalCopy: false)
        try set.checkSnapshotFinal()
        try set.updateTargets(targetsBytes)
        return set
    }
}

/// Hand-made metadata served by a ``LoopbackHTTPServer`` (`files`), for what no valid repository holds (targets
/// signed by fewer keys than their threshold): every publication bumps the targets, snapshot and timestamp versions
/// and adds the targets under `targets/HASH.NAME`. Tests that need a well-formed repository use
/// ``PinSetTestRepository`` (the real ``PinningNIO/TUFRepositoryWriter``).
public final class TUFTestPublisher: Sendable {
    public let server: LoopbackHTTPServer
    public let repository: TUFTestRepository
    /// The versions last published, and the signers of the next targets.
    private struct State {
        var targetsVersion = 0
        var snapshotVersion = 0
        var timestampVersion = 0
        var targetsSigners: [TUFTestSigner]?
    }
    private let state = LockedValueBox(State())
    public var targetsVersion: Int { self.state.withLockedValue { $0.targetsVersion } }
    public var snapshotVersion: Int { self.state.withLockedValue { $0.snapshotVersion } }
    public var timestampVersion: Int { self.state.withLockedValue { $0.timestampVersion } }
    /// Signers of new targets metadata (default: the repository's targets signers).
    public var targetsSigners: [TUFTestSigner]? {
        get { self.state.withLockedValue { $0.targetsSigners } }
        set { self.state.withLockedValue { $0.targetsSigners = newValue } }
    }

    /// A repository with `repository`'s keys; root version 1 served at once (`metadata/1.root.json`).
    public init(repository: TUFTestRepository = TUFTestRepository()) throws {
        self.repository = repository
        self.server = try LoopbackHTTPServer(statuses: [200])
        self.server.files = ["metadata/1.root.json": repository.root(version: 1), "metadata/root.json": repository.root(version: 1)]
    }

    /// The root to ship with a client (version 1).
    public var bootstrapRoot: [UInt8] { self.repository.root(version: 1) }
    /// `http://127.0.0.1:PORT/metadata/`.
    public var metadataURL: URL { self.server.url("/metadata/") }

    /// Publishes `targets` (path → bytes) as the next targets version, with a new snapshot and timestamp, signed by
    /// ``targetsSigners``.
    public func publish(_ targets: [String: [UInt8]]) {
        // One publication at a time: the versions and the served files change together.
        self.state.withLockedValue { state in
            state.targetsVersion += 1
            state.snapshotVersion += 1
            state.timestampVersion += 1
            let targetsBytes = TUFTestRepository.signed(
                TUFTestRepository.targetsSigned(version: state.targetsVersion, targets: targets), by: state.targetsSigners ?? self.repository.targetsSigners)
            let snapshot = self.repository.snapshot(version: state.snapshotVersion, meta: ["targets.json": TUFTestRepository.metaEntry(version: state.targetsVersion)])
            let timestamp = self.repository.timestamp(version: state.timestampVersion, snapshotVersion: state.snapshotVersion, snapshotBytes: snapshot)
            var files = self.server.files ?? [:]
            files["metadata/timestamp.json"] = timestamp
            files["metadata/\(state.snapshotVersion).snapshot.json"] = snapshot
            files["metadata/\(state.targetsVersion).targets.json"] = targetsBytes
            for (path, content) in targets {
                let hash = SHA256.hash(data: content).map { String(format: "%02x", $0) }.joined()
                let slash = path.lastIndex(of: "/")
                let directory = slash.map { String(path[...$0]) } ?? ""
                let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
                files["targets/" + directory + hash + "." + name] = content
            }
            self.server.files = files
        }
    }
}
