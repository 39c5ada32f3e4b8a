import Crypto
import Foundation
import Pinning
import PinningTestSupport
import Testing

@Suite("TUF keys and thresholds")
struct TUFKeyTests {
    @Test(
        "each supported key type verifies its own signature over the canonical bytes, and nothing else",
        arguments: [
            TUFTestSigner.Kind.ed25519, .ecdsaP256, .rsaPSS,
        ])
    func keyTypes(_ kind: TUFTestSigner.Kind) throws {
        let repository = TUFTestRepository(kind: kind)
        let root = repository.root(version: 1)
        let set = try TUFTrustedSet(trustedRoot: root, updateStartTime: TUFTestRepository.now)
        let key = try #require(set.root.keys[repository.rootSigners[0].keyID])
        let message = Array("signed bytes".utf8)
        let signature = repository.rootSigners[0].sign(message)
        #expect(key.isValidSignature(signature, for: message))
        #expect(!key.isValidSignature(signature, for: Array("other bytes".utf8)))
        #expect(!key.isValidSignature("", for: message))
        #expect(!key.isValidSignature("zz", for: message))
        // Another key of the same type does not verify it.
        let other = TUFTestSigner(kind)
        #expect(!key.isValidSignature(other.sign(message), for: message))
    }

    @Test("a root signed by a key the root does not list is refused with the missing key id")
    func wrongSigner() throws {
        let repository = TUFTestRepository()
        let stranger = TUFTestSigner(.ed25519)
        let error = try #require(throws: TUFError.self) {
            _ = try TUFTrustedSet(trustedRoot: repository.root(version: 1, signers: [stranger]), updateStartTime: TUFTestRepository.now)
        }
        #expect(error.rule == .threshold)
        #expect(error.role == "root")
        #expect(error.keyIDs == [repository.rootSigners[0].keyID])
        #expect(error.description.hasPrefix("root: version 1 has 0 valid signatures"))
    }

    @Test("duplicate key ids never reach a threshold: listed twice in a role, signed twice, or one key under two ids")
    func duplicateKeyIDs() throws {
        var repository = TUFTestRepository()
        let signer = repository.rootSigners[0]

        // A role listing one key id twice is refused outright.
        var fields = repository.rootSigned(version: 1).objectValue!.members.reduce(into: [String: TUFJSON]()) { $0[$1.key] = $1.value }
        var roles = fields["roles"]!.objectValue!.members.reduce(into: [String: TUFJSON]()) { $0[$1.key] = $1.value }
        roles["root"] = tufObject(["keyids": .array([.string(signer.keyID), .string(signer.keyID)]), "threshold": tufInt(2)])
        fields["roles"] = tufObject(roles)
        let listedTwice = TUFTestRepository.signed(tufObject(fields), by: [signer])
        let listed = try #require(throws: TUFError.self) { _ = try TUFTrustedSet(trustedRoot: listedTwice, updateStartTime: TUFTestRepository.now) }
        #expect(listed.rule == .malformed)
        #expect(listed.keyIDs == [signer.keyID])

        // Two signatures under one key id: refused, even though one would meet the threshold.
        let message = try repository.rootSigned(version: 1).canonicalBytes()
        let again = tufObject(["keyid": .string(signer.keyID), "sig": .string(signer.sign(message))])
        let signedTwice = TUFTestRepository.signed(repository.rootSigned(version: 1), by: [signer], extraSignatures: [again])
        let twice = try #require(throws: TUFError.self) { _ = try TUFTrustedSet(trustedRoot: signedTwice, updateStartTime: TUFTestRepository.now) }
        #expect(twice.rule == .duplicateSignature)

        // The same key under a second key id (ids are not checked against the key's hash): counts once.
        let alias = "aa" + String(signer.keyID.dropFirst(2))
        repository.rootThreshold = 2
        var aliasFields = repository.rootSigned(version: 1).objectValue!.members.reduce(into: [String: TUFJSON]()) { $0[$1.key] = $1.value }
        var keys = aliasFields["keys"]!.objectValue!.members.reduce(into: [String: TUFJSON]()) { $0[$1.key] = $1.value }
        keys[alias] = signer.keyJSON
        aliasFields["keys"] = tufObject(keys)
        var aliasRoles = aliasFields["roles"]!.objectValue!.members.reduce(into: [String: TUFJSON]()) { $0[$1.key] = $1.value }
        aliasRoles["root"] = tufObject(["keyids": .array([.string(signer.keyID), .string(alias)]), "threshold": tufInt(2)])
        aliasFields["roles"] = tufObject(aliasRoles)
        let aliasSigned = tufObject(aliasFields)
        let aliasMessage = try aliasSigned.canonicalBytes()
        let aliasBytes = TUFTestRepository.signed(
            aliasSigned, by: [signer], extraSignatures: [tufObject(["keyid": .string(alias), "sig": .string(signer.sign(aliasMessage))])])
        let aliased = try #require(throws: TUFError.self) { _ = try TUFTrustedSet(trustedRoot: aliasBytes, updateStartTime: TUFTestRepository.now) }
        #expect(aliased.rule == .threshold)
        #expect(aliased.description.contains("1 valid signature"))
    }
}

@Suite("TUF trusted set")
struct TUFTrustedSetTests {
    @Test("a whole update: root, timestamp, snapshot, targets, then a target found and its bytes checked")
    func happyPath() throws {
        let repository = TUFTestRepository()
        let content = Array("pins".utf8)
        let set = try repository.trustedSet(targets: TUFTestRepository.targetsSigned(version: 1, targets: ["pinning.json": content]))
        var search = try set.search(for: "pinning.json")
        guard case .found(let target, let role) = try search.next() else {
            Issue.record("the target was not found")
            return
        }
        #expect(role == "targets")
        try target.verify(content)
        let tampered = try #require(throws: TUFError.self) { try target.verify(Array("pinz".utf8)) }
        #expect(tampered.rule == .hashMismatch)
        let longer = try #require(throws: TUFError.self) { try target.verify(content + [0]) }
        #expect(longer.rule == .lengthMismatch)
    }

    @Test("root rotation: each new root signed by a threshold of the old root's keys and of its own, one version at a time")
    func rootRotation() throws {
        var repository = TUFTestRepository()
        let old = repository.rootSigners
        var set = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)

        repository.rootSigners = [TUFTestSigner(.ecdsaP256)]
        let new = repository.rootSigners

        // Signed only by the new key: not authorized by the trusted root.
        let onlyNew = try #require(throws: TUFError.self) { try set.updateRoot(repository.root(version: 2, signers: new)) }
        #expect(onlyNew.rule == .threshold)
        #expect(onlyNew.keyIDs == old.map(\.keyID))
        #expect(onlyNew.description.contains("the trusted root version 1"))
        // Signed only by the old key: the new root does not vouch for itself.
        let onlyOld = try #require(throws: TUFError.self) { try set.updateRoot(repository.root(version: 2, signers: old)) }
        #expect(onlyOld.rule == .threshold)
        #expect(onlyOld.keyIDs == new.map(\.keyID))
        // A skipped version.
        let skipped = try #require(throws: TUFError.self) { try set.updateRoot(repository.root(version: 3, signers: old + new)) }
        #expect(skipped.rule == .versionMismatch)
        #expect(skipped.expectedVersion == 2 && skipped.foundVersion == 3)
        #expect(set.root.version == 1)

        try set.updateRoot(repository.root(version: 2, signers: old + new))
        #expect(set.root.version == 2)
        // Version 3 now needs the new key, not the old one.
        let stale = try #require(throws: TUFError.self) { try set.updateRoot(repository.root(version: 3, signers: old)) }
        #expect(stale.rule == .threshold)
        try set.updateRoot(repository.root(version: 3, signers: new))
        #expect(set.root.version == 3)
    }

    @Test("an expired final root stops the update before the timestamp")
    func expiredRoot() throws {
        let repository = TUFTestRepository()
        var set = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)
        try set.updateRoot(repository.root(version: 2, expires: TUFTestRepository.past))
        let error = try #require(throws: TUFError.self) { try set.checkRootNotExpired() }
        #expect(error.rule == .expired && error.role == "root")
        let blocked = try #require(throws: TUFError.self) { try set.updateTimestamp(repository.timestamp(version: 1, snapshotVersion: 1)) }
        #expect(blocked.rule == .expired)
    }

    @Test("rollback: an older timestamp, a timestamp naming an older snapshot, a snapshot naming older targets")
    func rollback() throws {
        let repository = TUFTestRepository()
        var set = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)
        #expect(try set.updateTimestamp(repository.timestamp(version: 2, snapshotVersion: 2)) == .accepted)
        let older = try #require(throws: TUFError.self) { try set.updateTimestamp(repository.timestamp(version: 1, snapshotVersion: 2)) }
        #expect(older.rule == .rollback && older.expectedVersion == 2 && older.foundVersion == 1)
        let olderSnapshot = try #require(throws: TUFError.self) { try set.updateTimestamp(repository.timestamp(version: 3, snapshotVersion: 1)) }
        #expect(olderSnapshot.rule == .rollback && olderSnapshot.foundVersion == 1)
        // The same version again is no update: the trusted one is kept, even with other content.
        #expect(try set.updateTimestamp(repository.timestamp(version: 2, snapshotVersion: 9)) == .unchanged)
        #expect(set.timestamp?.snapshotMeta.version == 2)

        // Snapshot: the trusted (local) version 2 lists targets version 5; a new one listing version 4 is refused.
        try set.updateSnapshot(repository.snapshot(version: 2, meta: ["targets.json": TUFTestRepository.metaEntry(version: 5)]), isLocalCopy: true)
        let targetsRollback = try #require(throws: TUFError.self) {
            try set.updateSnapshot(repository.snapshot(version: 2, meta: ["targets.json": TUFTestRepository.metaEntry(version: 4)]), isLocalCopy: false)
        }
        #expect(targetsRollback.rule == .rollback && targetsRollback.expectedVersion == 5 && targetsRollback.foundVersion == 4)
        let dropped = try #require(throws: TUFError.self) {
            try set.updateSnapshot(repository.snapshot(version: 2, meta: ["other.json": TUFTestRepository.metaEntry(version: 5)]), isLocalCopy: false)
        }
        #expect(dropped.rule == .removedFromSnapshot)
    }

    @Test("a local snapshot longer than the new timestamp's snapshot length still guards against a targets rollback")
    func localSnapshotLongerThanNewLength() throws {
        let repository = TUFTestRepository()
        var set = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)
        // The stored snapshot v2 (targets v22) is one byte longer than the new v3 (targets v1), whose exact length
        // the new timestamp names.
        let local = repository.snapshot(version: 2, meta: ["targets.json": TUFTestRepository.metaEntry(version: 22)])
        let new = repository.snapshot(version: 3, meta: ["targets.json": TUFTestRepository.metaEntry(version: 1)])
        #expect(local.count == new.count + 1)
        try set.updateTimestamp(repository.timestamp(version: 3, snapshotVersion: 3, snapshotBytes: new))
        try set.updateSnapshot(local, isLocalCopy: true)
        let error = try #require(throws: TUFError.self) { try set.updateSnapshot(new, isLocalCopy: false) }
        #expect(error.rule == .rollback && error.expectedVersion == 22 && error.foundVersion == 1)
    }

    @Test("freeze: expired timestamp, snapshot and targets are refused at the update's start time")
    func freeze() throws {
        let repository = TUFTestRepository()
        var set = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)
        try set.updateTimestamp(repository.timestamp(version: 1, snapshotVersion: 1, expires: TUFTestRepository.past))
        let timestamp = try #require(throws: TUFError.self) { try set.checkTimestampFinal() }
        #expect(timestamp.rule == .expired && timestamp.role == "timestamp")
        // Nothing can be built on it.
        let blocked = try #require(throws: TUFError.self) {
            try set.updateSnapshot(repository.snapshot(version: 1, meta: ["targets.json": TUFTestRepository.metaEntry(version: 1)]), isLocalCopy: false)
        }
        #expect(blocked.rule == .expired)

        var second = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)
        try second.updateTimestamp(repository.timestamp(version: 1, snapshotVersion: 1))
        try second.updateSnapshot(
            repository.snapshot(version: 1, meta: ["targets.json": TUFTestRepository.metaEntry(version: 1)], expires: TUFTestRepository.past), isLocalCopy: false)
        let snapshot = try #require(throws: TUFError.self) { try second.checkSnapshotFinal() }
        #expect(snapshot.rule == .expired && snapshot.role == "snapshot")

        var third = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)
        try third.updateTimestamp(repository.timestamp(version: 1, snapshotVersion: 1))
        try third.updateSnapshot(repository.snapshot(version: 1, meta: ["targets.json": TUFTestRepository.metaEntry(version: 1)]), isLocalCopy: false)
        let targets = try #require(throws: TUFError.self) {
            try third.updateTargets(TUFTestRepository.signed(TUFTestRepository.targetsSigned(version: 1, expires: TUFTestRepository.past), by: repository.targetsSigners))
        }
        #expect(targets.rule == .expired && targets.role == "targets")
    }

    @Test("mix-and-match: a snapshot other than the timestamp's, targets other than the snapshot's, a role the snapshot omits")
    func mixAndMatch() throws {
        let repository = TUFTestRepository()
        let snapshotV2 = repository.snapshot(version: 2, meta: ["targets.json": TUFTestRepository.metaEntry(version: 1)])
        let otherSnapshot = repository.snapshot(version: 2, meta: ["targets.json": TUFTestRepository.metaEntry(version: 2)])
        var set = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)
        try set.updateTimestamp(repository.timestamp(version: 1, snapshotVersion: 2, snapshotBytes: snapshotV2))
        let swapped = try #require(throws: TUFError.self) { try set.updateSnapshot(otherSnapshot, isLocalCopy: false) }
        #expect(swapped.rule == .lengthMismatch || swapped.rule == .hashMismatch)
        try set.updateSnapshot(snapshotV2, isLocalCopy: false)
        try set.checkSnapshotFinal()
        let wrongVersion = try #require(throws: TUFError.self) {
            try set.updateTargets(TUFTestRepository.signed(TUFTestRepository.targetsSigned(version: 2), by: repository.targetsSigners))
        }
        #expect(wrongVersion.rule == .versionMismatch && wrongVersion.expectedVersion == 1 && wrongVersion.foundVersion == 2)

        // A snapshot of another version than the timestamp names is not final.
        var other = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)
        try other.updateTimestamp(repository.timestamp(version: 1, snapshotVersion: 3))
        try other.updateSnapshot(snapshotV2, isLocalCopy: false)
        let notFinal = try #require(throws: TUFError.self) { try other.checkSnapshotFinal() }
        #expect(notFinal.rule == .versionMismatch && notFinal.expectedVersion == 3)

        // A delegation to a role the snapshot does not list is never followed.
        let delegate = TUFTestSigner(.ed25519)
        let delegations = TUFTestRepository.delegations(keys: [delegate], roles: [TUFTestRepository.delegatedRole("unlisted", signers: [delegate], paths: ["*"])])
        let withDelegation = try repository.trustedSet(targets: TUFTestRepository.targetsSigned(version: 1, delegations: delegations))
        var search = try withDelegation.search(for: "file")
        let unlisted = try #require(throws: TUFError.self) { _ = try search.next() }
        #expect(unlisted.rule == .notInSnapshot && unlisted.role == "unlisted")
    }

    @Test("size caps: a timestamp over its cap, a snapshot over the timestamp's length")
    func oversized() throws {
        let repository = TUFTestRepository()
        var set = try TUFTrustedSet(
            trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now, limits: TUFLimits(timestampMaxLength: 100))
        let large = try #require(throws: TUFError.self) { try set.updateTimestamp(repository.timestamp(version: 1, snapshotVersion: 1)) }
        #expect(large.rule == .tooLarge && large.role == "timestamp")

        var second = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)
        let snapshot = repository.snapshot(version: 1, meta: ["targets.json": TUFTestRepository.metaEntry(version: 1)])
        let shorter = Array(snapshot.dropLast(10))
        try second.updateTimestamp(repository.timestamp(version: 1, snapshotVersion: 1, snapshotBytes: shorter))
        let over = try #require(throws: TUFError.self) { try second.updateSnapshot(snapshot, isLocalCopy: false) }
        #expect(over.rule == .tooLarge && over.role == "snapshot")
    }

    @Test("the wrong _type, an unsupported spec_version, a bad expires are refused before any signature counts")
    func malformed() throws {
        let repository = TUFTestRepository()
        var set = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)
        // A snapshot served as the timestamp, even signed by the timestamp key.
        var fields = TUFTestRepository.common("snapshot", version: 1, expires: TUFTestRepository.future)
        fields["meta"] = tufObject(["snapshot.json": TUFTestRepository.metaEntry(version: 1)])
        let wrongType = try #require(throws: TUFError.self) {
            try set.updateTimestamp(TUFTestRepository.signed(tufObject(fields), by: repository.timestampSigners))
        }
        #expect(wrongType.rule == .wrongType)
        fields = TUFTestRepository.common("timestamp", version: 1, expires: "2099-13-01T00:00:00Z")
        fields["meta"] = tufObject(["snapshot.json": TUFTestRepository.metaEntry(version: 1)])
        let badDate = try #require(throws: TUFError.self) { try set.updateTimestamp(TUFTestRepository.signed(tufObject(fields), by: repository.timestampSigners)) }
        #expect(badDate.rule == .malformed)
        fields = TUFTestRepository.common("timestamp", version: 1, expires: TUFTestRepository.future)
        fields["spec_version"] = .string("2.0.0")
        fields["meta"] = tufObject(["snapshot.json": TUFTestRepository.metaEntry(version: 1)])
        let spec = try #require(throws: TUFError.self) { try set.updateTimestamp(TUFTestRepository.signed(tufObject(fields), by: repository.timestampSigners)) }
        #expect(spec.rule == .unsupportedSpecVersion)
        // A float anywhere in the signed part: no canonical form, so nothing to verify.
        fields = TUFTestRepository.common("timestamp", version: 1, expires: TUFTestRepository.future)
        let json =
            #"{"signatures": [], "signed": {"_type": "timestamp", "spec_version": "1.0.31", "version": 1, "expires": "2099-01-01T00:00:00Z", "meta": {"snapshot.json": {"version": 1}}, "x": 0.5}}"#
        let float = try #require(throws: TUFError.self) { try set.updateTimestamp(Array(json.utf8)) }
        #expect(float.rule == .malformed)
        #expect(set.timestamp == nil)
    }

    @Test("an unknown hash algorithm is a refusal, never skipped")
    func unknownHash() throws {
        let repository = TUFTestRepository()
        var set = try TUFTrustedSet(trustedRoot: repository.root(version: 1), updateStartTime: TUFTestRepository.now)
        var fields = TUFTestRepository.common("timestamp", version: 1, expires: TUFTestRepository.future)
        fields["meta"] = tufObject(["snapshot.json": tufObject(["version": tufInt(1), "hashes": tufObject(["md7": .string("00")])])])
        try set.updateTimestamp(TUFTestRepository.signed(tufObject(fields), by: repository.timestampSigners))
        let snapshot = repository.snapshot(version: 1, meta: ["targets.json": TUFTestRepository.metaEntry(version: 1)])
        let error = try #require(throws: TUFError.self) { try set.updateSnapshot(snapshot, isLocalCopy: false) }
        #expect(error.rule == .unsupportedHashAlgorithm)
    }
}

@Suite("TUF delegations")
struct TUFDelegationTests {
    /// Provides each requested role from `files` until the search ends.
    static func run(_ search: inout TUFTargetSearch, files: [String: [UInt8]]) throws -> TUFTargetSearch.Step {
        while true {
            let step = try search.next()
            guard case .needs(let request) = step else { return step }
            try search.provide(try #require(files[request.role]))
        }
    }

    @Test("a role reached through two delegators is verified under each: trusted through A lends nothing to B")
    func diamond() throws {
        let repository = TUFTestRepository()
        let keyA = TUFTestSigner(.ed25519)
        let keyB = TUFTestSigner(.ed25519)
        let releaseViaA = TUFTestSigner(.ed25519)
        let releaseViaB = TUFTestSigner(.ed25519)
        let top = TUFTestRepository.targetsSigned(
            version: 1,
            delegations: TUFTestRepository.delegations(
                keys: [keyA, keyB],
                roles: [
                    TUFTestRepository.delegatedRole("parent-a", signers: [keyA], paths: ["team-a/*"]),
                    TUFTestRepository.delegatedRole("parent-b", signers: [keyB], paths: ["team-b/*"]),
                ]))
        let parentA = TUFTestRepository.signed(
            TUFTestRepository.targetsSigned(
                version: 1,
                delegations: TUFTestRepository.delegations(
                    keys: [releaseViaA], roles: [TUFTestRepository.delegatedRole("release", signers: [releaseViaA], paths: ["team-a/*"])])), by: [keyA])
        let parentB = TUFTestRepository.signed(
            TUFTestRepository.targetsSigned(
                version: 1,
                delegations: TUFTestRepository.delegations(
                    keys: [releaseViaB], roles: [TUFTestRepository.delegatedRole("release", signers: [releaseViaB], paths: ["team-b/*"])])), by: [keyB])
        // release is signed only with the key parent-a delegated to.
        let release = TUFTestRepository.signed(
            TUFTestRepository.targetsSigned(version: 1, targets: ["team-a/root.json": Array("A".utf8), "team-b/root.json": Array("B".utf8)]), by: [releaseViaA])
        let set = try repository.trustedSet(
            targets: top,
            extraSnapshotMeta: [
                "parent-a.json": TUFTestRepository.metaEntry(version: 1), "parent-b.json": TUFTestRepository.metaEntry(version: 1),
                "release.json": TUFTestRepository.metaEntry(version: 1),
            ])
        let files = ["parent-a": parentA, "parent-b": parentB, "release": release]

        var viaA = try set.search(for: "team-a/root.json")
        guard case .found(_, let role) = try Self.run(&viaA, files: files) else {
            Issue.record("team-a/root.json was not found through parent-a")
            return
        }
        #expect(role == "release")
        #expect(viaA.visitedRoles == ["targets", "parent-a", "release"])

        var viaB = try set.search(for: "team-b/root.json")
        let refused = try #require(throws: TUFError.self) { _ = try Self.run(&viaB, files: files) }
        #expect(refused.rule == .threshold && refused.role == "release")
        #expect(refused.description.contains("parent-b's delegation"))
        #expect(refused.keyIDs == [releaseViaB.keyID])
    }

    @Test("succinct hash-bin delegations (TAP 15) are refused with a typed error, never skipped")
    func succinctRoles() throws {
        let repository = TUFTestRepository()
        let succinct = tufObject([
            "keys": tufObject([:]),
            "succinct_roles": tufObject(["keyids": .array([]), "threshold": tufInt(1), "bit_length": tufInt(8), "name_prefix": .string("bin")]),
        ])
        let set = try repository.trustedSet(targets: TUFTestRepository.targetsSigned(version: 1, delegations: succinct))
        let error = try #require(throws: TUFError.self) { _ = try set.search(for: "file") }
        #expect(error.rule == .delegation && error.role == "targets")
    }

    @Test("pre-order depth-first order, terminating delegations, hash prefixes, cycles")
    func order() throws {
        let repository = TUFTestRepository()
        let key = TUFTestSigner(.ed25519)
        func targets(_ roles: [TUFJSON], files: [String: [UInt8]] = [:]) -> TUFJSON {
            TUFTestRepository.targetsSigned(version: 1, targets: files, delegations: roles.isEmpty ? nil : TUFTestRepository.delegations(keys: [key], roles: roles))
        }
        let prefix = String(SHA256.hash(data: Array("wanted".utf8)).map { String(format: "%02x", $0) }.joined().prefix(8))
        let top = targets([
            TUFTestRepository.delegatedRole("A", signers: [key], paths: ["*"]),
            TUFTestRepository.delegatedRole("B", signers: [key], paths: ["*"]),
            TUFTestRepository.delegatedRole("H", signers: [key], hashPrefixes: [prefix]),
        ])
        let files: [String: [UInt8]] = [
            "A": TUFTestRepository.signed(
                targets([
                    TUFTestRepository.delegatedRole("C", signers: [key], paths: ["*"], terminating: true),
                    TUFTestRepository.delegatedRole("D", signers: [key], paths: ["*"]),
                ]), by: [key]),
            "C": TUFTestRepository.signed(targets([TUFTestRepository.delegatedRole("A", signers: [key], paths: ["*"])]), by: [key]),
            "B": TUFTestRepository.signed(targets([]), by: [key]),
            "H": TUFTestRepository.signed(targets([], files: ["wanted": Array("w".utf8)]), by: [key]),
        ]
        var meta: [String: TUFJSON] = [:]
        for name in ["A", "B", "C", "D", "H"] { meta[name + ".json"] = TUFTestRepository.metaEntry(version: 1) }
        let set = try repository.trustedSet(targets: top, extraSnapshotMeta: meta)

        // A's terminating delegation to C ends the search below it: D and B are never visited; C's cycle back to
        // A is skipped.
        var missing = try set.search(for: "missing")
        guard case .notFound = try Self.run(&missing, files: files) else {
            Issue.record("a missing target was found")
            return
        }
        #expect(missing.visitedRoles == ["targets", "A", "C"])

        // path_hash_prefixes: H covers exactly the paths whose SHA-256 starts with its prefix.
        let hashed = try repository.trustedSet(
            targets: targets([TUFTestRepository.delegatedRole("H", signers: [key], hashPrefixes: [prefix])]), extraSnapshotMeta: meta)
        var wanted = try hashed.search(for: "wanted")
        guard case .found(_, let role) = try Self.run(&wanted, files: files) else {
            Issue.record("the hash-prefixed role's target was not found")
            return
        }
        #expect(role == "H")
        var other = try hashed.search(for: "other")
        guard case .notFound = try Self.run(&other, files: files) else {
            Issue.record("a path outside the prefix was found")
            return
        }
        #expect(other.visitedRoles == ["targets"])
    }
}
