import Crypto
import Foundation

/// The four top-level role names.
package enum TUFRoleName {
    package static let root = "root"
    package static let timestamp = "timestamp"
    package static let snapshot = "snapshot"
    package static let targets = "targets"
    package static let topLevel: Set<String> = [root, timestamp, snapshot, targets]
}

/// Root metadata: the keys and thresholds of the top-level roles.
public struct TUFRoot: Sendable {
    package let envelope: TUFEnvelope
    /// `consistent_snapshot`; absent means false (as python-tuf reads it).
    package let consistentSnapshot: Bool
    package let keys: [String: TUFKey]
    /// `root`, `timestamp`, `snapshot` and `targets` (other entries are ignored).
    package let roles: [String: TUFRoleKeys]

    public var version: Int { self.envelope.version }

    package init(bytes: [UInt8]) throws(TUFError) {
        let role = TUFRoleName.root
        let envelope = try TUFEnvelope(bytes: bytes, role: role, type: role)
        let signed = envelope.signed
        if let value = signed["consistent_snapshot"] {
            guard let flag = value.boolValue else { throw TUFError(role: role, rule: .malformed, "consistent_snapshot is \(value.kindWords), not a boolean") }
            self.consistentSnapshot = flag
        } else {
            self.consistentSnapshot = false
        }
        guard let keys = signed["keys"]?.objectValue else { throw TUFError(role: role, rule: .malformed, "no \"keys\" object") }
        self.keys = try tufExactDictionary(keys, role: role, what: "key id") { (keyID, json) throws(TUFError) in try TUFKey(keyID: keyID, json: json, role: role) }
        guard let roles = signed["roles"]?.objectValue else { throw TUFError(role: role, rule: .malformed, "no \"roles\" object") }
        var parsed: [String: TUFRoleKeys] = [:]
        for name in TUFRoleName.topLevel.sorted() {
            parsed[name] = try TUFRoleKeys(json: roles[name], role: role, context: "roles.\(name)")
        }
        self.roles = parsed
        self.envelope = envelope
    }

    /// The keys and threshold of a top-level role.
    package func roleKeys(_ name: String) -> TUFRoleKeys? { tufExactLookup(self.roles, name) }
}

/// Timestamp metadata: the snapshot's version (and optionally length and hashes).
package struct TUFTimestamp: Sendable {
    package let envelope: TUFEnvelope
    package let snapshotMeta: TUFMetaFile

    package var version: Int { self.envelope.version }

    package init(bytes: [UInt8]) throws(TUFError) {
        let role = TUFRoleName.timestamp
        let envelope = try TUFEnvelope(bytes: bytes, role: role, type: role)
        guard let meta = envelope.signed["meta"]?.objectValue else { throw TUFError(role: role, rule: .malformed, "no \"meta\" object") }
        guard let snapshot = meta["snapshot.json"] else { throw TUFError(role: role, rule: .malformed, "meta has no \"snapshot.json\" entry") }
        self.snapshotMeta = try TUFMetaFile(json: snapshot, role: role, name: "snapshot.json")
        self.envelope = envelope
    }
}

/// Snapshot metadata: the version of every targets metadata file (`targets.json`, `ROLE.json`).
package struct TUFSnapshot: Sendable {
    package let envelope: TUFEnvelope
    /// File name (`targets.json`, `ROLE.json`) to its entry.
    package let meta: [String: TUFMetaFile]

    package var version: Int { self.envelope.version }

    package init(bytes: [UInt8]) throws(TUFError) {
        let role = TUFRoleName.snapshot
        let envelope = try TUFEnvelope(bytes: bytes, role: role, type: role)
        guard let meta = envelope.signed["meta"]?.objectValue else { throw TUFError(role: role, rule: .malformed, "no \"meta\" object") }
        self.meta = try tufExactDictionary(meta, role: role, what: "file") { (name, json) throws(TUFError) in try TUFMetaFile(json: json, role: role, name: name) }
        self.envelope = envelope
    }

    /// The entry for a targets role's metadata file (`ROLE.json`).
    package func entry(forRole name: String) -> TUFMetaFile? { tufExactLookup(self.meta, name + ".json") }
}

/// Targets metadata (top-level or delegated): target files and delegations.
public struct TUFTargets: Sendable {
    package let envelope: TUFEnvelope
    public let targets: [String: TUFTargetFile]
    package let delegations: TUFDelegations?

    public var version: Int { self.envelope.version }

    package init(bytes: [UInt8], role: String) throws(TUFError) {
        let envelope = try TUFEnvelope(bytes: bytes, role: role, type: TUFRoleName.targets)
        guard let targets = envelope.signed["targets"]?.objectValue else { throw TUFError(role: role, rule: .malformed, "no \"targets\" object") }
        self.targets = try tufExactDictionary(targets, role: role, what: "target") { (path, json) throws(TUFError) in try TUFTargetFile(path: path, json: json, role: role) }
        if let delegations = envelope.signed["delegations"] {
            self.delegations = try TUFDelegations(json: delegations, role: role)
        } else {
            self.delegations = nil
        }
        self.envelope = envelope
    }

    /// The target listed under exactly `path`.
    package func target(_ path: String) -> TUFTargetFile? { tufExactLookup(self.targets, path) }
}

/// A targets role's delegations: keys, and the delegated roles in their order of priority.
package struct TUFDelegations: Sendable {
    package let keys: [String: TUFKey]
    /// In the order the delegator lists them (the order of the search).
    package let roles: [TUFDelegatedRole]
    /// True when the delegations are TAP 15 `succinct_roles` (hash bins), which this client does not follow: a
    /// search that reaches them is refused (``TUFError/Rule/delegation``), never skipped.
    package let usesSuccinctRoles: Bool

    init(json: TUFJSON, role: String) throws(TUFError) {
        guard let object = json.objectValue else { throw TUFError(role: role, rule: .malformed, "delegations is \(json.kindWords), not an object") }
        guard let keys = object["keys"]?.objectValue else { throw TUFError(role: role, rule: .malformed, "delegations has no \"keys\" object") }
        self.keys = try tufExactDictionary(keys, role: role, what: "key id") { (keyID, json) throws(TUFError) in try TUFKey(keyID: keyID, json: json, role: role) }
        let roles = object["roles"]
        let succinct = object["succinct_roles"]
        guard (roles == nil) != (succinct == nil) else {
            throw TUFError(role: role, rule: .malformed, "delegations must have exactly one of \"roles\" and \"succinct_roles\"")
        }
        self.usesSuccinctRoles = succinct != nil
        var parsed: [TUFDelegatedRole] = []
        if let roles {
            guard let list = roles.arrayValue else { throw TUFError(role: role, rule: .malformed, "delegations.roles is \(roles.kindWords), not an array") }
            for item in list {
                let delegated = try TUFDelegatedRole(json: item, delegator: role)
                if parsed.contains(where: { $0.name.utf8.elementsEqual(delegated.name.utf8) }) {
                    throw TUFError(role: role, rule: .malformed, "delegates to role \(TUFError.printable(delegated.name)) twice")
                }
                parsed.append(delegated)
            }
        }
        self.roles = parsed
    }

    /// The delegated roles whose paths (or hash prefixes) cover `targetPath`, in order.
    package func roles(for targetPath: String) -> [TUFDelegatedRole] {
        self.roles.filter { $0.covers(targetPath) }
    }
}

/// One delegation: the role's name, keys, threshold, whether it is terminating, and the target paths it may sign.
package struct TUFDelegatedRole: Sendable {
    package let name: String
    package let keys: TUFRoleKeys
    package let terminating: Bool
    /// Shell-style patterns (`*`, `?`, `[…]`), matched per `/`-separated part, or nil with hash prefixes.
    package let paths: [String]?
    /// Lower-case hex prefixes of the SHA-256 of the target path, or nil with paths.
    package let pathHashPrefixes: [String]?

    init(json: TUFJSON, delegator: String) throws(TUFError) {
        guard let object = json.objectValue else { throw TUFError(role: delegator, rule: .malformed, "a delegated role is \(json.kindWords), not an object") }
        guard let name = object["name"]?.stringValue else { throw TUFError(role: delegator, rule: .malformed, "a delegated role has no \"name\" string") }
        let context = "the delegation to \(TUFError.printable(name))"
        // As python-tuf: a delegated role never takes a top-level role's name (its metadata file would be theirs).
        guard !name.isEmpty, !TUFRoleName.topLevel.contains(where: { $0.utf8.elementsEqual(name.utf8) }) else {
            throw TUFError(role: delegator, rule: .malformed, "a delegated role is named \(TUFError.quoted(name)): empty or a top-level role's name")
        }
        self.name = name
        self.keys = try TUFRoleKeys(json: json, role: delegator, context: context)
        guard let terminating = object["terminating"]?.boolValue else { throw TUFError(role: delegator, rule: .malformed, "\(context) has no boolean \"terminating\"") }
        self.terminating = terminating
        func strings(_ key: String) throws(TUFError) -> [String]? {
            guard let value = object[key] else { return nil }
            guard let list = value.arrayValue else { throw TUFError(role: delegator, rule: .malformed, "\(context) has \(key) that is not an array") }
            var out: [String] = []
            for item in list {
                guard let text = item.stringValue else { throw TUFError(role: delegator, rule: .malformed, "\(context) has \(key) with an entry that is not a string") }
                out.append(text)
            }
            return out
        }
        self.paths = try strings("paths")
        self.pathHashPrefixes = try strings("path_hash_prefixes")
        guard (self.paths == nil) != (self.pathHashPrefixes == nil) else {
            throw TUFError(role: delegator, rule: .malformed, "\(context) must have exactly one of \"paths\" and \"path_hash_prefixes\"")
        }
    }

    /// Whether this delegation covers `targetPath`.
    package func covers(_ targetPath: String) -> Bool {
        if let paths = self.paths {
            return paths.contains { TUFPathPattern.matches(pattern: $0, path: targetPath) }
        }
        let digest = TUFHex.encode(SHA256.hash(data: Array(targetPath.utf8)))
        return (self.pathHashPrefixes ?? []).contains { digest.hasPrefix($0) }
    }
}

/// Threshold signature checks.
package enum TUFSignatures {
    /// Verifies that at least `roleKeys.threshold` distinct keys of the role signed `envelope`.
    ///
    /// Each key id of the role counts at most once (the signatures array has unique key ids, see ``TUFEnvelope``),
    /// and two key ids whose keys are the same type, scheme and public value count once together: key ids are
    /// not checked against the key's hash (python-tuf and go-tuf do not either, and real repositories such as
    /// Sigstore's once listed ids that were not), so one key listed under two ids must not reach a threshold of
    /// two. An unusable key (unsupported type, malformed value) and an invalid or empty signature count nothing.
    ///
    /// - Returns: the key ids whose signatures counted.
    /// - Throws: ``TUFError/Rule/threshold`` naming the signed and the missing key ids.
    @discardableResult
    package static func verifyThreshold(
        _ envelope: TUFEnvelope, keys: [String: TUFKey], roleKeys: TUFRoleKeys, role: String, signer: String
    ) throws(TUFError) -> [String] {
        var counted: [String] = []
        var countedMaterial = Set<String>()
        var missing: [String] = []
        for keyID in roleKeys.keyIDs {
            guard let key = tufExactLookup(keys, keyID),
                let signature = envelope.signatures.first(where: { $0.keyID.utf8.elementsEqual(keyID.utf8) }),
                key.isValidSignature(signature.signature, for: envelope.canonicalSigned)
            else {
                missing.append(keyID)
                continue
            }
            if countedMaterial.insert(key.material).inserted {
                counted.append(keyID)
            }
        }
        guard counted.count >= roleKeys.threshold else {
            let signedWords = counted.isEmpty ? "none" : counted.map(TUFError.short).joined(separator: ", ")
            let missingWords = missing.isEmpty ? "" : "; no valid signature from \(missing.map(TUFError.short).joined(separator: ", "))"
            throw TUFError(
                role: role, rule: .threshold,
                "version \(envelope.version) has \(counted.count) valid signature\(counted.count == 1 ? "" : "s") from \(signer)'s \(roleKeys.keyIDs.count) key\(roleKeys.keyIDs.count == 1 ? "" : "s"), below its threshold of \(roleKeys.threshold) (signed: \(signedWords)\(missingWords))",
                foundVersion: envelope.version, keyIDs: missing)
        }
        return counted
    }
}

/// Target path patterns, as the specification and python-tuf match them: the pattern and the path are split at
/// `/` into the same number of parts, and each part matches as Python's `fnmatch.fnmatchcase` (`*` any run of
/// characters, `?` one character, `[abc]`, `[a-z]`, `[!abc]` one of or none of a set; a `[` without its `]` is
/// itself). So `*` never crosses a `/`, and matching is case-sensitive.
package enum TUFPathPattern {
    package static func matches(pattern: String, path: String) -> Bool {
        let patternParts = pattern.split(separator: "/", omittingEmptySubsequences: false)
        let pathParts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard patternParts.count == pathParts.count else { return false }
        for (patternPart, pathPart) in zip(patternParts, pathParts) {
            guard matchPart(Array(patternPart.unicodeScalars), Array(pathPart.unicodeScalars)) else { return false }
        }
        return true
    }

    private enum Token {
        case literal(Unicode.Scalar)
        case any
        case star
        case set(negated: Bool, ranges: [ClosedRange<UInt32>])

        func matches(_ scalar: Unicode.Scalar) -> Bool {
            switch self {
            case .literal(let expected): expected == scalar
            case .any: true
            case .star: true
            case .set(let negated, let ranges): ranges.contains { $0.contains(scalar.value) } != negated
            }
        }
    }

    private static func tokens(_ pattern: [Unicode.Scalar]) -> [Token] {
        var out: [Token] = []
        var index = 0
        while index < pattern.count {
            let scalar = pattern[index]
            index += 1
            switch scalar {
            case "*":
                if case .star? = out.last { continue }
                out.append(.star)
            case "?":
                out.append(.any)
            case "[":
                // As fnmatch.translate: `!` first negates; a `]` right after `[` or `[!` is a member; no closing
                // `]` means the `[` is an ordinary character.
                var cursor = index
                var negated = false
                if cursor < pattern.count && pattern[cursor] == "!" {
                    negated = true
                    cursor += 1
                }
                var members: [Unicode.Scalar] = []
                if cursor < pattern.count && pattern[cursor] == "]" {
                    members.append("]")
                    cursor += 1
                }
                while cursor < pattern.count && pattern[cursor] != "]" {
                    members.append(pattern[cursor])
                    cursor += 1
                }
                guard cursor < pattern.count else {
                    out.append(.literal("["))
                    continue
                }
                index = cursor + 1
                var ranges: [ClosedRange<UInt32>] = []
                var position = 0
                while position < members.count {
                    if position + 2 < members.count && members[position + 1] == "-" {
                        let low = members[position].value
                        let high = members[position + 2].value
                        // Python drops a reversed range (it matches nothing).
                        if low <= high { ranges.append(low...high) }
                        position += 3
                    } else {
                        ranges.append(members[position].value...members[position].value)
                        position += 1
                    }
                }
                out.append(.set(negated: negated, ranges: ranges))
            default:
                out.append(.literal(scalar))
            }
        }
        return out
    }

    /// Glob matching with backtracking to the last star (linear in practice, no recursion).
    private static func matchPart(_ pattern: [Unicode.Scalar], _ text: [Unicode.Scalar]) -> Bool {
        let tokens = tokens(pattern)
        var tokenIndex = 0
        var textIndex = 0
        var starToken: Int? = nil
        var starText = 0
        while textIndex < text.count {
            if tokenIndex < tokens.count {
                if case .star = tokens[tokenIndex] {
                    starToken = tokenIndex
                    starText = textIndex
                    tokenIndex += 1
                    continue
                }
                if tokens[tokenIndex].matches(text[textIndex]) {
                    tokenIndex += 1
                    textIndex += 1
                    continue
                }
            }
            guard let star = starToken else { return false }
            tokenIndex = star + 1
            starText += 1
            textIndex = starText
        }
        while tokenIndex < tokens.count, case .star = tokens[tokenIndex] { tokenIndex += 1 }
        return tokenIndex == tokens.count
    }
}
