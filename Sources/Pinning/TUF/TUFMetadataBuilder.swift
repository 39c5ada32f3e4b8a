import Crypto

/// Writes TUF metadata (specification 1.0): the `signed` part of each top-level role, and the file that carries it
/// with its signatures. Pure: values in, bytes out; `PinningNIO`'s `TUFRepositoryWriter` decides versions and
/// expiries and lays the files out.
///
/// What is written is what ``TUFTrustedSet`` and python-tuf read: `spec_version` ``specVersion``, `expires` as
/// `YYYY-MM-DDTHH:MM:SSZ`, snapshot and timestamp entries with the version, length and SHA-256 of the file they
/// name, targets with their length and SHA-256. A file is ``TUFJSON/jsonBytes()`` of
/// `{"signatures": [{"keyid", "sig"}…], "signed": {…}}`; every signature covers the canonical JSON of `signed`.
package enum TUFMetadataBuilder {
    /// The specification version written (the one python-tuf 7 writes).
    package static let specVersion = "1.0.31"

    /// Root: the keys (key id to public key object) and each top-level role's key ids and threshold.
    package static func root(
        version: Int, expires: Int64, keys: [String: TUFJSON], roles: [String: TUFRoleKeys], consistentSnapshot: Bool = true
    ) -> TUFJSONObject {
        let roleObjects: [(String, TUFJSON)] = roles.map { name, role in
            (name, self.object([("keyids", .array(role.keyIDs.map { .string($0) })), ("threshold", self.integer(role.threshold))]))
        }
        return self.common(
            type: TUFRoleName.root, version: version, expires: expires,
            [
                ("consistent_snapshot", .bool(consistentSnapshot)), ("keys", self.object(keys.map { ($0.key, $0.value) })),
                ("roles", self.object(roleObjects)),
            ])
    }

    /// Targets: each target's length, hashes and custom value.
    ///
    /// - Throws: ``RepeatedTargetPath`` when two targets have the same path (byte for byte): the paths are the
    ///   caller's data (a configuration's file names, a `--target-name`), so a repeat is refused, never a crash.
    package static func targets(version: Int, expires: Int64, targets: [TUFTargetFile]) throws(RepeatedTargetPath) -> TUFJSONObject {
        let entries: [(String, TUFJSON)] = targets.map { target in
            var fields: [(String, TUFJSON)] = [("length", self.integer(target.length)), ("hashes", self.hashes(target.hashes))]
            if let custom = target.custom { fields.append(("custom", custom)) }
            return (target.path, self.object(fields))
        }
        guard let object = TUFJSONObject(entries) else {
            var seen = Set<[UInt8]>()
            let repeated = targets.first { !seen.insert(Array($0.path.utf8)).inserted }?.path ?? ""
            throw RepeatedTargetPath(path: repeated)
        }
        return self.common(type: TUFRoleName.targets, version: version, expires: expires, [("targets", .object(object))])
    }

    /// Two targets given to ``targets(version:expires:targets:)`` with the same path.
    package struct RepeatedTargetPath: Error, Sendable {
        /// The path, as given (not escaped).
        package var path: String
    }

    /// Snapshot: the version, length and SHA-256 of `targets.json`, whose file is `targetsFile`.
    package static func snapshot(version: Int, expires: Int64, targetsVersion: Int, targetsFile: [UInt8]) -> TUFJSONObject {
        self.common(
            type: TUFRoleName.snapshot, version: version, expires: expires,
            [("meta", self.object([("targets.json", self.meta(version: targetsVersion, file: targetsFile))]))])
    }

    /// Timestamp: the version, length and SHA-256 of `snapshot.json`, whose file is `snapshotFile`.
    package static func timestamp(version: Int, expires: Int64, snapshotVersion: Int, snapshotFile: [UInt8]) -> TUFJSONObject {
        self.common(
            type: TUFRoleName.timestamp, version: version, expires: expires,
            [("meta", self.object([("snapshot.json", self.meta(version: snapshotVersion, file: snapshotFile))]))])
    }

    /// The metadata file: `signed` and one signature by each key (in the order given; a key given twice signs once).
    package static func sign(_ signed: TUFJSONObject, with keys: [TUFSigningKey]) throws(TUFKeyError) -> [UInt8] {
        let message: [UInt8]
        do {
            message = try TUFJSON.object(signed).canonicalBytes()
        } catch {
            throw TUFKeyError(.unreadable, "the metadata has no canonical JSON form: \(error.message)")
        }
        var signatures: [TUFJSON] = []
        var seen = Set<String>()
        for key in keys where seen.insert(key.keyID).inserted {
            signatures.append(self.object([("keyid", .string(key.keyID)), ("sig", .string(try key.sign(message)))]))
        }
        return TUFJSON.object(self.objectValue([("signatures", .array(signatures)), ("signed", .object(signed))])).jsonBytes()
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` for seconds since 1970.
    package static func expiresText(_ seconds: Int64) -> String { TUFTime.format(seconds) }

    // MARK: - Pieces

    static func common(type: String, version: Int, expires: Int64, _ fields: [(String, TUFJSON)]) -> TUFJSONObject {
        self.objectValue(
            [
                ("_type", .string(type)), ("spec_version", .string(self.specVersion)), ("version", self.integer(version)),
                ("expires", .string(TUFTime.format(expires))),
            ] + fields)
    }

    static func meta(version: Int, file: [UInt8]) -> TUFJSON {
        self.object([
            ("version", self.integer(version)), ("length", self.integer(file.count)),
            ("hashes", self.hashes(["sha256": TUFHex.encode(SHA256.hash(data: file))])),
        ])
    }

    static func hashes(_ hashes: [String: String]) -> TUFJSON {
        self.object(hashes.map { ($0.key, .string($0.value)) })
    }

    static func integer(_ value: Int) -> TUFJSON { .integer(String(value)) }

    static func object(_ members: [(String, TUFJSON)]) -> TUFJSON { .object(self.objectValue(members)) }

    /// Members whose names are distinct by construction (field names above, dictionary keys): never names a caller
    /// chose, which may repeat (target paths are checked by ``targets(version:expires:targets:)``).
    static func objectValue(_ members: [(String, TUFJSON)]) -> TUFJSONObject {
        guard let object = TUFJSONObject(members) else {
            preconditionFailure("TUFMetadataBuilder: a repeated member name in \(members.map(\.0))")
        }
        return object
    }
}
