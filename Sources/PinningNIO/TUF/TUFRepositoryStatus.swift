public import Foundation
public import Pinning

/// What a repository serves now: each top-level role's version, expiry, keys and signatures, its targets, and
/// whether a fresh client would accept it (``TUFRepositoryWriter/status(at:)``).
public struct TUFRepositoryStatus: Sendable {
    /// One key of a role, and its signature on the role's current metadata.
    public struct Key: Sendable, Equatable {
        public var keyID: String
        public var keyType: String
        public var scheme: String
        /// Whether the metadata carries a signature under this key id.
        public var signaturePresent: Bool
        /// Whether that signature verifies.
        public var signatureValid: Bool
    }

    /// One top-level role's current metadata.
    public struct Role: Sendable {
        public var name: String
        public var version: Int
        /// `expires`, as written.
        public var expires: String
        /// Seconds from the status time to `expires` (negative: expired).
        public var secondsToExpiry: Int64
        public var threshold: Int
        public var keys: [Key]
        /// Key ids that signed but are not keys of the role.
        public var otherSignatures: [String]

        public var expired: Bool { self.secondsToExpiry <= 0 }
        public var validSignatures: Int { self.keys.filter(\.signatureValid).count }
        public var meetsThreshold: Bool { self.validSignatures >= self.threshold }
    }

    public var directory: String
    /// The instant the status describes.
    public var time: Date
    /// Root, targets, snapshot, timestamp.
    public var roles: [Role]
    /// The targets listed by the current targets metadata, by path.
    public var targets: [TUFTargetFile]
    /// Why a client starting from `1.root.json` at ``time`` would refuse the repository; nil when it would accept it.
    /// Display text: the repository's text in it is escaped by VisibleText (once: print it as it is).
    public var clientRefusal: String?
}

extension TUFRepositoryWriter {
    /// The repository's status at `time`: never throws for expired or badly signed metadata (that is what it
    /// reports), only for a repository whose files cannot be read or parsed at all.
    public func status(at time: Date = Date()) throws(TUFRepositoryError) -> TUFRepositoryStatus {
        let state = try self.load()
        let root = try self.parse { () throws(TUFError) in try TUFRoot(bytes: state.roots.last!) }
        let timestamp = try self.parse { () throws(TUFError) in try TUFTimestamp(bytes: state.timestamp) }
        let snapshot = try self.parse { () throws(TUFError) in try TUFSnapshot(bytes: state.snapshot) }
        let targets = try self.parse { () throws(TUFError) in try TUFTargets(bytes: state.targets, role: TUFRoleName.targets) }
        let now = Self.seconds(time)
        func role(_ name: String, _ envelope: TUFEnvelope) -> TUFRepositoryStatus.Role {
            let roleKeys = root.roleKeys(name) ?? TUFRoleKeys(keyIDs: [], threshold: 1)
            let keys = roleKeys.keyIDs.map { keyID -> TUFRepositoryStatus.Key in
                let key = root.keys[keyID]
                let signature = envelope.signatures.first { $0.keyID == keyID }
                return TUFRepositoryStatus.Key(
                    keyID: keyID, keyType: key?.keyType ?? "?", scheme: key?.scheme ?? "?", signaturePresent: signature.map { !$0.signature.isEmpty } ?? false,
                    signatureValid: signature.map { key?.isValidSignature($0.signature, for: envelope.canonicalSigned) ?? false } ?? false)
            }
            return TUFRepositoryStatus.Role(
                name: name, version: envelope.version, expires: envelope.expiresText, secondsToExpiry: envelope.expires - now, threshold: roleKeys.threshold, keys: keys,
                otherSignatures: envelope.signatures.map(\.keyID).filter { !roleKeys.keyIDs.contains($0) })
        }
        var refusal: String?
        do {
            try self.verifyAsClients(state, previous: nil, targetFiles: [:], now: time)
        } catch {
            refusal = error.message
        }
        return TUFRepositoryStatus(
            directory: self.directory, time: time,
            roles: [
                role(TUFRoleName.root, root.envelope), role(TUFRoleName.targets, targets.envelope), role(TUFRoleName.snapshot, snapshot.envelope),
                role(TUFRoleName.timestamp, timestamp.envelope),
            ],
            targets: targets.targets.values.sorted { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }, clientRefusal: refusal)
    }
}
