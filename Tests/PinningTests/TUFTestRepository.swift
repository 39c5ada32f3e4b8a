import Crypto
import Foundation
import Pinning
import _CryptoExtras

/// A signing key made at test time, in the form TUF metadata lists it.
struct TUFTestSigner {
    enum Kind { case ed25519, ecdsaP256, rsaPSS }

    let kind: Kind
    let keyJSON: TUFJSON
    let keyID: String
    private let signer: ([UInt8]) -> [UInt8]

    init(_ kind: Kind) {
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

    func sign(_ message: [UInt8]) -> String {
        self.signer(message).map { String(format: "%02x", $0) }.joined()
    }
}

func tufObject(_ members: [String: TUFJSON]) -> TUFJSON {
    .object(TUFJSONObject(members.map { ($0.key, $0.value) })!)
}

func tufInt(_ value: Int) -> TUFJSON { .integer(String(value)) }

/// Builds and signs the metadata of a small repository, as a repository tool would.
struct TUFTestRepository {
    static let future = "2099-01-01T00:00:00Z"
    static let past = "2000-01-01T00:00:00Z"
    /// The update start time the tests use: 2026-01-01.
    static let now = Date(timeIntervalSince1970: 1_767_225_600)

    var rootSigners: [TUFTestSigner]
    var rootThreshold = 1
    var timestampSigners: [TUFTestSigner]
    var snapshotSigners: [TUFTestSigner]
    var targetsSigners: [TUFTestSigner]
    var consistentSnapshot = true

    init(kind: TUFTestSigner.Kind = .ed25519) {
        self.rootSigners = [TUFTestSigner(kind)]
        self.timestampSigners = [TUFTestSigner(kind)]
        self.snapshotSigners = [TUFTestSigner(kind)]
        self.targetsSigners = [TUFTestSigner(kind)]
    }

    static func signed(_ signed: TUFJSON, by signers: [TUFTestSigner], extraSignatures: [TUFJSON] = []) -> [UInt8] {
        let message = try! signed.canonicalBytes()
        let signatures = signers.map { tufObject(["keyid": .string($0.keyID), "sig": .string($0.sign(message))]) } + extraSignatures
        return tufObject(["signatures": .array(signatures), "signed": signed]).jsonBytes()
    }

    static func common(_ type: String, version: Int, expires: String) -> [String: TUFJSON] {
        ["_type": .string(type), "spec_version": .string("1.0.31"), "version": tufInt(version), "expires": .string(expires)]
    }

    static func role(_ signers: [TUFTestSigner], threshold: Int) -> TUFJSON {
        tufObject(["keyids": .array(signers.map { .string($0.keyID) }), "threshold": tufInt(threshold)])
    }

    func rootSigned(version: Int, expires: String = Self.future) -> TUFJSON {
        var keys: [String: TUFJSON] = [:]
        for signer in self.rootSigners + self.timestampSigners + self.snapshotSigners + self.targetsSigners {
            keys[signer.keyID] = signer.keyJSON
        }
        var fields = Self.common("root", version: version, expires: expires)
        fields["consistent_snapshot"] = .bool(self.consistentSnapshot)
        fields["keys"] = tufObject(keys)
        fields["roles"] = tufObject([
            "root": Self.role(self.rootSigners, threshold: self.rootThreshold),
            "timestamp": Self.role(self.timestampSigners, threshold: 1),
            "snapshot": Self.role(self.snapshotSigners, threshold: 1),
            "targets": Self.role(self.targetsSigners, threshold: 1),
        ])
        return tufObject(fields)
    }

    func root(version: Int, expires: String = Self.future, signers: [TUFTestSigner]? = nil) -> [UInt8] {
        Self.signed(self.rootSigned(version: version, expires: expires), by: signers ?? self.rootSigners)
    }

    static func metaEntry(version: Int, of bytes: [UInt8]? = nil) -> TUFJSON {
        var entry: [String: TUFJSON] = ["version": tufInt(version)]
        if let bytes {
            entry["length"] = tufInt(bytes.count)
            entry["hashes"] = tufObject(["sha256": .string(SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined())])
        }
        return tufObject(entry)
    }

    func timestamp(version: Int, snapshotVersion: Int, snapshotBytes: [UInt8]? = nil, expires: String = Self.future) -> [UInt8] {
        var fields = Self.common("timestamp", version: version, expires: expires)
        fields["meta"] = tufObject(["snapshot.json": Self.metaEntry(version: snapshotVersion, of: snapshotBytes)])
        return Self.signed(tufObject(fields), by: self.timestampSigners)
    }

    func snapshot(version: Int, meta: [String: TUFJSON], expires: String = Self.future) -> [UInt8] {
        var fields = Self.common("snapshot", version: version, expires: expires)
        fields["meta"] = tufObject(meta)
        return Self.signed(tufObject(fields), by: self.snapshotSigners)
    }

    static func targetsSigned(version: Int, targets: [String: [UInt8]] = [:], delegations: TUFJSON? = nil, expires: String = Self.future) -> TUFJSON {
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

    static func delegations(keys: [TUFTestSigner], roles: [TUFJSON]) -> TUFJSON {
        var keyMap: [String: TUFJSON] = [:]
        for key in keys { keyMap[key.keyID] = key.keyJSON }
        return tufObject(["keys": tufObject(keyMap), "roles": .array(roles)])
    }

    static func delegatedRole(_ name: String, signers: [TUFTestSigner], paths: [String]? = nil, hashPrefixes: [String]? = nil, terminating: Bool = false) -> TUFJSON {
        var fields: [String: TUFJSON] = [
            "name": .string(name), "keyids": .array(signers.map { .string($0.keyID) }), "threshold": tufInt(1), "terminating": .bool(terminating),
        ]
        if let paths { fields["paths"] = .array(paths.map { .string($0) }) }
        if let hashPrefixes { fields["path_hash_prefixes"] = .array(hashPrefixes.map { .string($0) }) }
        return tufObject(fields)
    }

    /// A trusted set brought up to version 1 of every top-level role.
    func trustedSet(targets: TUFJSON? = nil, extraSnapshotMeta: [String: TUFJSON] = [:]) throws -> TUFTrustedSet {
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
