import Crypto
import Foundation

/// One signature of a metadata file: the key id it claims and the signature in hex (possibly empty: an unsigned
/// slot, as tuf-on-ci writes them).
package struct TUFSignature: Sendable, Equatable {
    package var keyID: String
    package var signature: String
}

/// A metadata file as read, before any signature is checked: the `signed` object, its canonical bytes (what the
/// signatures cover), the signatures and the fields every role has.
package struct TUFEnvelope: Sendable {
    /// The name the file was loaded as (`root`, `timestamp`, `snapshot`, `targets` or a delegated role).
    package let role: String
    package let signed: TUFJSONObject
    /// `signed` in canonical JSON: the bytes every signature covers.
    package let canonicalSigned: [UInt8]
    package let signatures: [TUFSignature]
    package let version: Int
    /// `expires`, as written (`2030-01-01T00:00:00Z`).
    package let expiresText: String
    /// `expires` in seconds since 1970-01-01T00:00:00Z.
    package let expires: Int64
    package let specVersion: String

    /// Reads a metadata file as the role `role`, whose `_type` must be `type`.
    ///
    /// - Throws: ``TUFError`` ``TUFError/Rule/malformed`` (not JSON, a field missing or of the wrong kind, a
    ///   float in the signed part, two signatures under one key id is ``TUFError/Rule/duplicateSignature``),
    ///   ``TUFError/Rule/wrongType``, ``TUFError/Rule/unsupportedSpecVersion``.
    init(bytes: [UInt8], role: String, type: String) throws(TUFError) {
        let json: TUFJSON
        do {
            json = try TUFJSON.parse(bytes)
        } catch {
            throw TUFError(role: role, rule: .malformed, "not valid JSON: \(error)")
        }
        guard let top = json.objectValue else { throw TUFError(role: role, rule: .malformed, "the metadata is \(json.kindWords), not an object") }
        guard let signed = top["signed"]?.objectValue else { throw TUFError(role: role, rule: .malformed, "no \"signed\" object") }
        guard let signatureList = top["signatures"]?.arrayValue else { throw TUFError(role: role, rule: .malformed, "no \"signatures\" array") }
        var signatures: [TUFSignature] = []
        for entry in signatureList {
            guard let object = entry.objectValue, let keyID = object["keyid"]?.stringValue, let signature = object["sig"]?.stringValue else {
                throw TUFError(role: role, rule: .malformed, "a signature that is not an object with \"keyid\" and \"sig\" strings")
            }
            // The specification: "the keyid MUST be unique in the signatures array". One key id signing twice is
            // never a second signature; the file is refused, as python-tuf refuses it.
            if signatures.contains(where: { $0.keyID.utf8.elementsEqual(keyID.utf8) }) {
                throw TUFError(role: role, rule: .duplicateSignature, "two signatures under key id \(TUFError.short(keyID))", keyIDs: [keyID])
            }
            signatures.append(TUFSignature(keyID: keyID, signature: signature))
        }
        guard let actualType = signed["_type"]?.stringValue else { throw TUFError(role: role, rule: .malformed, "no \"_type\" string") }
        guard actualType.utf8.elementsEqual(type.utf8) else {
            throw TUFError(role: role, rule: .wrongType, "the metadata's _type is \(TUFError.quoted(actualType)), not \"\(type)\"")
        }
        guard let specVersion = signed["spec_version"]?.stringValue else { throw TUFError(role: role, rule: .malformed, "no \"spec_version\" string") }
        let parts = specVersion.split(separator: ".", omittingEmptySubsequences: false)
        guard (2...3).contains(parts.count), parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }) else {
            throw TUFError(role: role, rule: .unsupportedSpecVersion, "spec_version \(TUFError.quoted(specVersion)) is not MAJOR.MINOR[.PATCH]")
        }
        guard parts[0] == "1" else {
            throw TUFError(role: role, rule: .unsupportedSpecVersion, "spec_version \(specVersion) is not a 1.x version of the TUF specification")
        }
        guard let versionValue = signed["version"], let version = versionValue.intValue else {
            throw TUFError(role: role, rule: .malformed, "no integer \"version\"")
        }
        guard version >= 1 else { throw TUFError(role: role, rule: .malformed, "version \(version) is not positive", foundVersion: version) }
        guard let expiresText = signed["expires"]?.stringValue else { throw TUFError(role: role, rule: .malformed, "no \"expires\" string") }
        guard let expires = TUFTime.parse(expiresText) else {
            throw TUFError(role: role, rule: .malformed, "expires \(TUFError.quoted(expiresText)) is not YYYY-MM-DDTHH:MM:SSZ")
        }
        do {
            self.canonicalSigned = try TUFJSON.object(signed).canonicalBytes()
        } catch {
            throw TUFError(role: role, rule: .malformed, "the signed part has no canonical JSON form: \(error.message)")
        }
        self.role = role
        self.signed = signed
        self.signatures = signatures
        self.version = version
        self.expiresText = expiresText
        self.expires = expires
        self.specVersion = specVersion
    }

    /// Whether the metadata has expired at `time` (seconds since 1970): expired from its `expires` instant on, as
    /// python-tuf's `is_expired` (`reference_time >= expires`).
    package func isExpired(at time: Double) -> Bool {
        time >= Double(self.expires)
    }
}

/// A role's keys and threshold (in root's `roles`, or a delegation).
package struct TUFRoleKeys: Sendable, Equatable {
    package var keyIDs: [String]
    package var threshold: Int

    /// A role's key ids and threshold, as a repository writes them.
    package init(keyIDs: [String], threshold: Int) {
        self.keyIDs = keyIDs
        self.threshold = threshold
    }

    init(json: TUFJSON?, role: String, context: String) throws(TUFError) {
        guard let object = json?.objectValue else { throw TUFError(role: role, rule: .malformed, "\(context) is not an object") }
        guard let list = object["keyids"]?.arrayValue else { throw TUFError(role: role, rule: .malformed, "\(context) has no \"keyids\" array") }
        var keyIDs: [String] = []
        for item in list {
            guard let keyID = item.stringValue else { throw TUFError(role: role, rule: .malformed, "\(context) lists a key id that is not a string") }
            // Unique, as python-tuf requires: a key id listed twice must never look like two keys.
            if keyIDs.contains(where: { $0.utf8.elementsEqual(keyID.utf8) }) {
                throw TUFError(role: role, rule: .malformed, "\(context) lists key id \(TUFError.short(keyID)) more than once", keyIDs: [keyID])
            }
            keyIDs.append(keyID)
        }
        guard let threshold = object["threshold"]?.intValue else { throw TUFError(role: role, rule: .malformed, "\(context) has no integer \"threshold\"") }
        guard threshold >= 1 else { throw TUFError(role: role, rule: .malformed, "\(context) has threshold \(threshold); it must be at least 1") }
        self.keyIDs = keyIDs
        self.threshold = threshold
    }
}

/// A file's expected version, and optionally length and hashes, as timestamp and snapshot list them.
package struct TUFMetaFile: Sendable, Equatable {
    package var version: Int
    package var length: Int?
    /// Algorithm name to hex digest.
    package var hashes: [String: String]?

    init(json: TUFJSON, role: String, name: String) throws(TUFError) {
        let context = "the entry for \(TUFError.printable(name))"
        guard let object = json.objectValue else { throw TUFError(role: role, rule: .malformed, "\(context) is not an object") }
        guard let version = object["version"]?.intValue, version >= 1 else {
            throw TUFError(role: role, rule: .malformed, "\(context) has no positive integer \"version\"")
        }
        self.version = version
        if let lengthValue = object["length"] {
            guard let length = lengthValue.intValue, length >= 0 else { throw TUFError(role: role, rule: .malformed, "\(context) has a length that is not a non-negative integer") }
            self.length = length
        }
        if let hashesValue = object["hashes"] {
            self.hashes = try TUFHashes.read(hashesValue, role: role, context: context)
        }
    }

    /// Checks `data` against this entry's length and hashes (when given).
    func verify(_ data: [UInt8], role: String, what: String) throws(TUFError) {
        if let length = self.length, data.count != length {
            throw TUFError(role: role, rule: .lengthMismatch, "\(what) is \(data.count) bytes, not the \(length) bytes the trusted metadata names")
        }
        if let hashes = self.hashes {
            try TUFHashes.verify(data, hashes: hashes, role: role, what: what)
        }
    }
}

/// A target file's length, hashes and custom data (`targets.<path>`).
public struct TUFTargetFile: Sendable, Equatable {
    public var path: String
    package var length: Int
    package var hashes: [String: String]
    /// The `custom` value, if any.
    package var custom: TUFJSON?

    /// The entry a repository lists for a target with these contents: its length and SHA-256.
    package init(path: String, contents: [UInt8], custom: TUFJSON? = nil) {
        self.path = path
        self.length = contents.count
        self.hashes = ["sha256": TUFHex.encode(SHA256.hash(data: contents))]
        self.custom = custom
    }

    init(path: String, json: TUFJSON, role: String) throws(TUFError) {
        let context = "target \(TUFError.printable(path))"
        guard let object = json.objectValue else { throw TUFError(role: role, rule: .malformed, "\(context) is not an object") }
        guard let length = object["length"]?.intValue, length >= 0 else { throw TUFError(role: role, rule: .malformed, "\(context) has no non-negative integer \"length\"") }
        guard let hashesValue = object["hashes"] else { throw TUFError(role: role, rule: .malformed, "\(context) has no \"hashes\"") }
        self.path = path
        self.length = length
        self.hashes = try TUFHashes.read(hashesValue, role: role, context: context)
        self.custom = object["custom"]
    }

    /// Checks downloaded or cached bytes: exactly `length` bytes, and every listed hash.
    package func verify(_ data: [UInt8]) throws(TUFError) {
        guard data.count == self.length else {
            throw TUFError(role: self.path, rule: .lengthMismatch, "the target is \(data.count) bytes, not the \(self.length) bytes its metadata names")
        }
        try TUFHashes.verify(data, hashes: self.hashes, role: self.path, what: "the target")
    }
}

/// Hash lists (`{"sha256": "HEX", …}`).
enum TUFHashes {
    static func read(_ json: TUFJSON, role: String, context: String) throws(TUFError) -> [String: String] {
        guard let object = json.objectValue, object.count > 0 else { throw TUFError(role: role, rule: .malformed, "\(context) has hashes that are not a non-empty object") }
        var hashes: [String: String] = [:]
        for member in object.members {
            guard let digest = member.value.stringValue else { throw TUFError(role: role, rule: .malformed, "\(context) has a hash that is not a string") }
            guard hashes.updateValue(digest, forKey: member.key) == nil else {
                throw TUFError(role: role, rule: .malformed, "\(context) names one hash algorithm twice")
            }
        }
        return hashes
    }

    /// Every listed hash must be computed and must match: one this client cannot compute is a refusal, never
    /// skipped (else a file listing only an unknown algorithm would be accepted unchecked).
    static func verify(_ data: [UInt8], hashes: [String: String], role: String, what: String) throws(TUFError) {
        for algorithm in hashes.keys.sorted() {
            let expected = hashes[algorithm]!.lowercased()
            let actual: String
            switch algorithm {
            case "sha256": actual = TUFHex.encode(SHA256.hash(data: data))
            case "sha384": actual = TUFHex.encode(SHA384.hash(data: data))
            case "sha512": actual = TUFHex.encode(SHA512.hash(data: data))
            default:
                throw TUFError(
                    role: role, rule: .unsupportedHashAlgorithm, "\(what) is listed with hash algorithm \(TUFError.quoted(algorithm)), which this client cannot compute (sha256, sha384, sha512)"
                )
            }
            guard actual == expected else {
                throw TUFError(
                    role: role, rule: .hashMismatch, "\(what) has \(algorithm) \(actual.prefix(16))…, not the \(TUFError.printable(String(expected.prefix(16))))… the trusted metadata names")
            }
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` to seconds since 1970.
enum TUFTime {
    static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for index in range {
                guard (0x30...0x39).contains(bytes[index]) else { return nil }
                value = value * 10 + Int64(bytes[index] - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13), let minute = number(14..<16),
            let second = number(17..<19)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= CivilCalendar.daysIn(month: month, year: year), hour < 24, minute < 60, second < 60 else { return nil }
        return CivilCalendar.daysFromCivil(year: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60 + second
    }

    /// Seconds since 1970 as `YYYY-MM-DDTHH:MM:SSZ` (the inverse of ``parse(_:)``; years 0 to 9999).
    static func format(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = seconds - days * 86_400
        let (year, month, day) = CivilCalendar.civilFromDays(days)
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let yearText = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
        return "\(yearText)-\(two(month))-\(two(day))T\(two(rest / 3_600)):\(two(rest % 3_600 / 60)):\(two(rest % 60))Z"
    }
}

/// Builds a dictionary from object members, refusing two keys that differ in bytes but that Swift's `String`
/// compares equal (Unicode canonical equivalence): each name in a file must mean one entry.
func tufExactDictionary<Value>(_ object: TUFJSONObject, role: String, what: String, _ transform: (String, TUFJSON) throws(TUFError) -> Value) throws(TUFError) -> [String: Value] {
    var out: [String: Value] = [:]
    out.reserveCapacity(object.count)
    for member in object.members {
        let value = try transform(member.key, member.value)
        guard out.updateValue(value, forKey: member.key) == nil else {
            throw TUFError(role: role, rule: .malformed, "two \(what) names that Unicode treats as the same text (\(TUFError.printable(member.key)))")
        }
    }
    return out
}

/// The entry for exactly `key` (byte for byte) in a dictionary built by ``tufExactDictionary``.
func tufExactLookup<Value>(_ dictionary: [String: Value], _ key: String) -> Value? {
    guard let index = dictionary.index(forKey: key), dictionary[index].key.utf8.elementsEqual(key.utf8) else { return nil }
    return dictionary[index].value
}
