import Foundation
import X509

/// Any JSON value, decoded without interpretation so that validation can see every field (including unknown
/// ones) and report every problem, not just the first.
enum JSONValue: Decodable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
            return
        }
        // The first decoding that succeeds names the type. JSONDecoder keeps booleans and numbers apart.
        do {
            self = .bool(try container.decode(Bool.self))
            return
        } catch {}
        do {
            self = .number(try container.decode(Double.self))
            return
        } catch {}
        do {
            self = .string(try container.decode(String.self))
            return
        } catch {}
        do {
            self = .array(try container.decode([JSONValue].self))
            return
        } catch {}
        self = .object(try container.decode([String: JSONValue].self))
    }

    /// The value in the strict reader's terms, which the validator reads (``PinningConfiguration/init(from:)``):
    /// a number as the shortest text that reads back as the same `Double`.
    var tufJSON: TUFJSON {
        switch self {
        case .null: return .null
        case .bool(let flag): return .bool(flag)
        case .number(let number): return .float("\(number)")
        case .string(let text): return .string(text)
        case .array(let items): return .array(items.map(\.tufJSON))
        case .object(let fields):
            // Dictionary keys are distinct as Swift strings, so byte for byte too: never nil.
            return .object(TUFJSONObject(fields.map { ($0.key, $0.value.tufJSON) }) ?? TUFJSONObject([])!)
        }
    }

}

/// How a configuration's JSON text is read: once, with the core's strict reader (``TUFJSON/parse(_:)``), into the
/// value the validator checks field by field.
enum ConfigurationJSON {
    /// Reads a configuration's JSON text with the core's strict reader, not `JSONDecoder`: decoding an enum through
    /// `Decodable` tries each type in turn and builds a `DecodingError` for every miss, which made reading 10,000
    /// entries take hundreds of milliseconds (issue 29 asks for a pin set of 10,000 hosts verified and applied in
    /// 100 ms). The validator reads the reader's value as it is: nothing is converted or copied.
    ///
    /// What the strict reader changes, deliberately: an object key repeated in one object is refused (the old
    /// reading kept one of the two silently, so a file could be read as something other than what a reviewer
    /// saw), and so is an escaped lone surrogate. Kept as before: a leading UTF-8 byte-order mark is skipped, and
    /// UTF-16 and UTF-32 text (RFC 8259 §8.1 asks for UTF-8; `JSONDecoder` also read these, told apart by a
    /// byte-order mark or by the zero bytes of the first characters, as RFC 4627 §3 describes) is converted to
    /// UTF-8 first.
    static func parse(_ data: Data) throws(TUFJSONError) -> TUFJSON {
        let read: (value: TUFJSON, hasNonASCIIKey: Bool)
        if data.starts(with: [0xEF, 0xBB, 0xBF]) {
            read = try TUFJSON.parseNotingKeys(data.dropFirst(3))
        } else if let wide = Self.wideEncoding(data) {
            guard let decoded = String(data: data, encoding: wide.encoding) else {
                throw TUFJSONError(message: "the text looks like \(wide.name) but is not valid \(wide.name)")
            }
            var utf8 = Array(decoded.utf8)
            if utf8.starts(with: [0xEF, 0xBB, 0xBF]) { utf8.removeFirst(3) }
            read = try TUFJSON.parseNotingKeys(utf8)
        } else {
            read = try TUFJSON.parseNotingKeys(data)
        }
        // Only keys outside ASCII can be Unicode-equivalent: with none anywhere, there is nothing to compare.
        if read.hasNonASCIIKey { try Self.checkKeyForms(read.value) }
        return read.value
    }

    /// UTF-16 or UTF-32, from a byte-order mark or the zero bytes around the first (ASCII) characters; nil for UTF-8.
    private static func wideEncoding(_ bytes: Data) -> (encoding: String.Encoding, name: String)? {
        if bytes.starts(with: [0x00, 0x00, 0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE, 0x00, 0x00]) { return (.utf32, "UTF-32") }
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) { return (.utf16, "UTF-16") }
        guard bytes.count >= 4 else { return nil }
        let first = Array(bytes.prefix(4))
        switch (first[0] == 0, first[1] == 0, first[2] == 0, first[3] == 0) {
        case (true, true, true, false): return (.utf32BigEndian, "UTF-32")
        case (false, true, true, true): return (.utf32LittleEndian, "UTF-32")
        case (true, false, true, false): return (.utf16BigEndian, "UTF-16")
        case (false, true, false, true): return (.utf16LittleEndian, "UTF-16")
        default: return nil
        }
    }

    /// Refuses an object with two keys that differ only in Unicode normalisation (`café` written precomposed and
    /// decomposed). The reader compares keys byte for byte; the validator compares them as Swift strings
    /// (canonical equivalence), so such a pair would be one key to it, and one of the two would silently win.
    /// Visited as the configuration used to be converted (each member's value before its key, members in the
    /// reader's order), so the pair named is the same. Only objects with a key outside ASCII are compared: two
    /// different ASCII keys are never equivalent, but an ASCII key can be equivalent to one that is not (U+212A
    /// KELVIN SIGN is `K`).
    private static func checkKeyForms(_ json: TUFJSON) throws(TUFJSONError) {
        switch json {
        case .array(let items):
            for item in items { try Self.checkKeyForms(item) }
        case .object(let object):
            let compare = object.hasNonASCIIKey
            var seen: Set<String> = []
            for member in object.members {
                try Self.checkKeyForms(member.value)
                if compare, !seen.insert(member.key).inserted {
                    throw TUFJSONError(message: "an object with a repeated key (\"\(member.key)\", written in two Unicode forms)")
                }
            }
        case .null, .bool, .integer, .float, .string:
            break
        }
    }

    /// An object's keys in the order the validator reports problems in (Swift's `String` order, as `keys.sorted()`
    /// gives), with their values. The reader's order (UTF-8 bytes) is the same for ASCII keys, so it is only
    /// sorted again when a key is not ASCII.
    static func sortedMembers(_ object: TUFJSONObject) -> [TUFJSONObject.Member] {
        guard !object.hasNonASCIIKey else { return object.members.sorted { $0.key < $1.key } }
        return object.members
    }
}

extension TUFJSON {
    /// What kind of value this is, in a configuration's words (`JSONValue`'s before the validator read this type:
    /// an integer and a number with a fraction are both "a number").
    var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .integer, .float: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// A number's value as `Double` reads its text (the reader checked its grammar; an exponent too large is
    /// infinity); nil for anything else.
    var numberValue: Double? {
        switch self {
        case .integer(let digits): return Double(digits) ?? .nan
        case .float(let text): return Double(text) ?? .nan
        default: return nil
        }
    }
}

/// Checks a decoded configuration field by field, collecting every problem.
struct ConfigurationValidator {
    typealias Problem = PinningConfigurationError.Problem

    static let topLevelFields = ["domains", "unlistedHosts", "version"]
    static let entryFields = [
        "anchors", "anchorsOnly", "clientIdentity", "enforce", "excludeSubdomainFromParentPolicy", "expires", "includeSubdomains",
        "pins", "reportURIs", "revocation",
    ]

    let baseDirectory: String
    private(set) var problems: [Problem] = []

    init(baseDirectory: String) {
        self.baseDirectory = baseDirectory
    }

    private mutating func add(_ kind: Problem.Kind, _ entry: String?, _ field: String?, _ message: String) {
        self.problems.append(Problem(kind, entry: entry, field: field, message))
    }

    /// For the validators of other files (``clientIdentity(_:_:)``).
    mutating func addProblem(_ kind: Problem.Kind, _ entry: String?, _ field: String?, _ message: String) {
        self.add(kind, entry, field, message)
    }

    var problemCount: Int { self.problems.count }

    /// The configuration, or nil when a problem makes one impossible (check ``problems`` either way: a
    /// configuration is only usable when there are none).
    mutating func validate(_ root: TUFJSON) -> PinningConfiguration? {
        guard case .object(let fields) = root else {
            self.add(.wrongType, nil, nil, "the configuration must be a JSON object, not \(root.typeName)")
            return nil
        }
        for key in fields.keys.sorted() where !Self.topLevelFields.contains(key) {
            self.add(
                .unknownField,
                nil,
                key,
                "unknown field; the top level has only \(Self.topLevelFields.joined(separator: ", "))"
            )
        }
        let version = self.version(fields["version"])
        let unlisted = self.unlistedHosts(fields["unlistedHosts"])
        var entries: [PinningConfiguration.Entry] = []
        var index: PinningConfiguration.HostIndex?
        switch fields["domains"] {
        case nil:
            self.add(.missingField, nil, "domains", "missing; list the pinned hosts (it may be {} to pin none)")
        case .object(let domains)?:
            entries.reserveCapacity(domains.count)
            for member in ConfigurationJSON.sortedMembers(domains) {
                if let entry = self.entry(member.key, member.value) {
                    entries.append(entry)
                }
            }
            index = self.indexEntries(entries)
        case let other?:
            self.add(.wrongType, nil, "domains", "must be an object mapping host patterns to entries, not \(other.typeName)")
        }
        guard let version, let unlisted else { return nil }
        return PinningConfiguration(version: version, unlistedHosts: unlisted, entries: entries, index: index)
    }

    /// ``validate(_:)-(TUFJSON)`` of a text the one-pass reader read: the same checks in the same order, on the
    /// values the tree would have held (the reader reads only texts with no other top-level field, `domains` an
    /// object of objects, and no unknown entry field).
    mutating func validate(_ document: ConfigurationDocument) -> PinningConfiguration? {
        let version = self.version(document.version)
        let unlisted = self.unlistedHosts(document.unlistedHosts)
        var entries: [PinningConfiguration.Entry] = []
        var index: PinningConfiguration.HostIndex?
        if let domains = document.domains {
            entries.reserveCapacity(domains.count)
            for domain in domains {
                let entry = self.entry(domain.key, domain.fields, problemsBefore: self.problems.count) {
                    EntryFields.Field.allCases.filter { $0 != .excludeSubdomainFromParentPolicy && domain.fields.has($0) }.map { Self.entryFields[$0.rawValue] }
                }
                if let entry { entries.append(entry) }
            }
            index = self.indexEntries(entries)
        } else {
            self.add(.missingField, nil, "domains", "missing; list the pinned hosts (it may be {} to pin none)")
        }
        guard let version, let unlisted else { return nil }
        return PinningConfiguration(version: version, unlistedHosts: unlisted, entries: entries, index: index)
    }

    /// The host index of the entries (in key order), after checking that no two cover the same hosts and that every
    /// exclusion has a parent.
    private mutating func indexEntries(_ entries: [PinningConfiguration.Entry]) -> PinningConfiguration.HostIndex {
        let built = PinningConfiguration.HostIndex(entries)
        self.checkOverlaps(entries, built)
        self.checkExclusionsHaveParents(entries)
        return built
    }

    private mutating func version(_ value: TUFJSON?) -> Int? {
        switch value {
        case nil:
            self.add(.missingField, nil, "version", "missing; this library reads version \(PinningConfiguration.supportedVersion)")
        case let value? where value.numberValue != nil:
            let number = value.numberValue ?? .nan
            guard number == Double(PinningConfiguration.supportedVersion) else {
                self.add(
                    .invalidValue,
                    nil,
                    "version",
                    "unsupported version \(Self.written(value, number)); this library reads version \(PinningConfiguration.supportedVersion)"
                )
                return nil
            }
            return PinningConfiguration.supportedVersion
        case let other?:
            self.add(.wrongType, nil, "version", "must be the number \(PinningConfiguration.supportedVersion), not \(other.typeName)")
        }
        return nil
    }

    private mutating func unlistedHosts(_ value: TUFJSON?) -> PinningConfiguration.UnlistedHosts? {
        switch value {
        case nil:
            return .default
        case .string(let text)?:
            guard let mode = PinningConfiguration.UnlistedHosts(rawValue: text) else {
                self.add(.invalidValue, nil, "unlistedHosts", "unknown value \"\(text)\"; use \"default\" or \"reject\"")
                return nil
            }
            return mode
        case let other?:
            self.add(.wrongType, nil, "unlistedHosts", "must be \"default\" or \"reject\", not \(other.typeName)")
            return nil
        }
    }

    private mutating func entry(_ key: String, _ value: TUFJSON) -> PinningConfiguration.Entry? {
        guard case .object(let fields) = value else {
            self.add(.wrongType, key, nil, "an entry must be an object such as {\"pins\": [\"sha256/…\", \"sha256/…\"]}, not \(value.typeName)")
            return nil
        }
        let before = self.problems.count
        let found = EntryFields(fields)
        if found.hasOtherKey {
            for member in ConfigurationJSON.sortedMembers(fields) where !Self.entryFields.contains(member.key) {
                self.add(.unknownField, key, member.key, "unknown field; an entry has only \(Self.entryFields.joined(separator: ", "))")
            }
        }
        return self.entry(key, found, problemsBefore: before) {
            fields.keys.sorted().filter { $0 != "excludeSubdomainFromParentPolicy" && Self.entryFields.contains($0) }
        }
    }

    /// An entry from its fields (found by ``EntryFields/init(_:)`` in the tree, or read by ``ConfigurationDocument``);
    /// `otherKnownFields` lists the known fields present but `excludeSubdomainFromParentPolicy`, in Swift's `String`
    /// order, for an exclusion, which may have none.
    private mutating func entry(
        _ key: String, _ found: EntryFields, problemsBefore before: Int, otherKnownFields: () -> [String]
    ) -> PinningConfiguration.Entry? {
        if self.bool(found.excludeSubdomainFromParentPolicy, key, "excludeSubdomainFromParentPolicy") == true {
            return self.exclusion(key, otherKnownFields(), problemsBefore: before)
        }
        let includeSubdomains = self.bool(found.includeSubdomains, key, "includeSubdomains") ?? false
        let enforce = self.bool(found.enforce, key, "enforce") ?? true
        let anchorsOnly = self.bool(found.anchorsOnly, key, "anchorsOnly") ?? false

        var pattern: HostPattern?
        do {
            pattern = try HostPattern.parse(key, includeSubdomains: includeSubdomains)
        } catch {
            self.add(.invalidPattern, key, nil, error.message)
        }

        let pins = self.pins(found, key, enforce: enforce)
        let expires = self.expires(found.expires, key)
        let (anchorFiles, anchors) = self.anchors(found.anchors, key)
        if anchorsOnly && anchorFiles.isEmpty {
            self.add(.invalidValue, key, "anchorsOnly", "is true but the entry lists no anchors, so nothing could be trusted")
        }
        let reportURIs = self.reportURIs(found.reportURIs, key)
        let clientIdentity = self.clientIdentity(found.clientIdentity, key)
        let (revocationFiles, revocation) = self.revocation(found.revocation, key)

        guard self.problems.count == before, let pattern else { return nil }
        return PinningConfiguration.Entry(
            key: key,
            pins: pins,
            includeSubdomains: {
                if case .anyDepth = pattern.kind { return true }
                return false
            }(),
            enforce: enforce,
            expires: expires,
            anchorFiles: anchorFiles,
            anchors: anchors,
            anchorsOnly: anchorsOnly,
            reportURIs: reportURIs,
            excludesSubdomainFromParentPolicy: false,
            clientIdentity: clientIdentity,
            revocationFiles: revocationFiles,
            revocation: revocation,
            pattern: pattern
        )
    }

    /// An entry's fields, found in one pass over its members: each value is what `fields["name"]` gives (the key
    /// matched byte for byte), without a search per field name.
    ///
    /// Small, as the one-pass reader keeps one per entry (10,000 for a pin set of 10,000 hosts, moved as the list
    /// grows and is sorted): `pins` held in place, every other field (most entries have none) in a list beside it.
    struct EntryFields: Sendable {
        var pins: TUFJSON?
        /// The pins, when the one-pass reader (``ConfigurationDocument``) decoded them from the text: `pins` was an
        /// array of strings each a pin in the usual form, none repeated (``pins`` is then nil). Validated as that array.
        var readPins: [Pin]?
        /// The fields other than `pins` that are present, each once.
        private var others: [(field: Field, value: TUFJSON)] = []
        /// Whether a key is none of the field names byte for byte (it is then checked against
        /// ``ConfigurationValidator/entryFields`` as before, and reported when unknown).
        var hasOtherKey = false

        var anchors: TUFJSON? { self.value(of: .anchors) }
        var anchorsOnly: TUFJSON? { self.value(of: .anchorsOnly) }
        var clientIdentity: TUFJSON? { self.value(of: .clientIdentity) }
        var enforce: TUFJSON? { self.value(of: .enforce) }
        var excludeSubdomainFromParentPolicy: TUFJSON? { self.value(of: .excludeSubdomainFromParentPolicy) }
        var expires: TUFJSON? { self.value(of: .expires) }
        var includeSubdomains: TUFJSON? { self.value(of: .includeSubdomains) }
        var reportURIs: TUFJSON? { self.value(of: .reportURIs) }
        var revocation: TUFJSON? { self.value(of: .revocation) }

        private func value(of field: Field) -> TUFJSON? {
            self.others.first { $0.field == field }?.value
        }

        /// The fields, by name (``ConfigurationValidator/entryFields``, in that order).
        enum Field: Int, CaseIterable {
            case anchors, anchorsOnly, clientIdentity, enforce, excludeSubdomainFromParentPolicy, expires, includeSubdomains, pins, reportURIs, revocation

            /// The field named exactly these bytes, if any.
            init?(named key: some Collection<UInt8>) {
                func named(_ name: String) -> Bool { key.elementsEqual(name.utf8) }
                switch key.count {
                case 4 where named("pins"): self = .pins
                case 7 where named("anchors"): self = .anchors
                case 7 where named("enforce"): self = .enforce
                case 7 where named("expires"): self = .expires
                case 10 where named("reportURIs"): self = .reportURIs
                case 10 where named("revocation"): self = .revocation
                case 11 where named("anchorsOnly"): self = .anchorsOnly
                case 14 where named("clientIdentity"): self = .clientIdentity
                case 17 where named("includeSubdomains"): self = .includeSubdomains
                case 32 where named("excludeSubdomainFromParentPolicy"): self = .excludeSubdomainFromParentPolicy
                default: return nil
                }
            }

            /// The field's bit in a set of fields held as one integer.
            var bit: UInt16 { 1 << UInt16(self.rawValue) }
        }

        /// No field.
        init() {}

        init(_ fields: TUFJSONObject) {
            for member in fields.members {
                // Compared over the key's bytes in place when it holds them contiguously (a string read from bytes does).
                let field = member.key.utf8.withContiguousStorageIfAvailable { Field(named: $0) } ?? Field(named: member.key.utf8)
                guard let field else {
                    self.hasOtherKey = true
                    continue
                }
                self.set(field, member.value)
            }
        }

        /// Sets a field (the last value wins, as a tree's object holds each key once anyway).
        mutating func set(_ field: Field, _ value: TUFJSON) {
            guard field != .pins else {
                self.pins = value
                return
            }
            if let position = self.others.firstIndex(where: { $0.field == field }) {
                self.others[position].value = value
            } else {
                self.others.append((field, value))
            }
        }

        /// Whether the field is present.
        func has(_ field: Field) -> Bool {
            field == .pins ? self.pins != nil || self.readPins != nil : self.others.contains { $0.field == field }
        }
    }

    /// TrustKit's `kTSKExcludeSubdomainFromParentPolicy`: `{"excludeSubdomainFromParentPolicy": true}` exempts
    /// one host from the policy of an entry that covers it from above (`includeSubdomains`, `*.`, `**.`). The
    /// host is then not pinned: its chain and name are validated as for an unlisted host under
    /// `"unlistedHosts": "default"`. As in TrustKit, the entry may carry nothing else (a pin or an anchor on
    /// it would mean the opposite of the exemption), it names exactly one host (no wildcard), and a parent
    /// entry must exist (checked once every entry is read).
    private mutating func exclusion(_ key: String, _ otherKnownFields: [String], problemsBefore before: Int) -> PinningConfiguration.Entry? {
        for field in otherKnownFields {
            self.add(
                .invalidValue, key, field,
                "cannot be combined with \"excludeSubdomainFromParentPolicy\": true; the excluded host is not pinned (remove the field, or the exclusion)"
            )
        }
        var pattern: HostPattern?
        if key.hasPrefix("*") {
            self.add(.invalidPattern, key, "excludeSubdomainFromParentPolicy", "excludes one host; write its exact name, not a wildcard")
        } else {
            do {
                pattern = try HostPattern.parse(key, includeSubdomains: false)
            } catch {
                self.add(.invalidPattern, key, nil, error.message)
            }
        }
        guard self.problems.count == before, let pattern else { return nil }
        return PinningConfiguration.Entry(
            key: key,
            pins: [],
            includeSubdomains: false,
            enforce: false,
            expires: nil,
            anchorFiles: [],
            anchors: [],
            anchorsOnly: false,
            reportURIs: [],
            excludesSubdomainFromParentPolicy: true,
            clientIdentity: nil,
            revocationFiles: [],
            revocation: nil,
            pattern: pattern
        )
    }

    /// An exclusion without a parent policy exempts nothing, which is a mistake (TrustKit refuses it too).
    private mutating func checkExclusionsHaveParents(_ entries: [PinningConfiguration.Entry]) {
        for position in entries.indices where entries[position].excludesSubdomainFromParentPolicy {
            let excluded = entries[position]
            guard case .exact(let host) = excluded.pattern.kind else { continue }
            let hasParent = entries.contains { parent in
                !parent.excludesSubdomainFromParentPolicy && parent.pattern.kind != excluded.pattern.kind && parent.pattern.matches(host)
            }
            if !hasParent {
                self.add(
                    .invalidValue, excluded.key, "excludeSubdomainFromParentPolicy",
                    "no entry covers this host from above (includeSubdomains, \"*.\" or \"**.\"), so there is no parent policy to exclude it from"
                )
            }
        }
    }

    private mutating func bool(_ value: TUFJSON?, _ key: String, _ field: String) -> Bool? {
        switch value {
        case nil: return nil
        case .bool(let flag)?: return flag
        case let other?:
            self.add(.wrongType, key, field, "must be true or false, not \(other.typeName)")
            return nil
        }
    }

    private mutating func strings(_ value: TUFJSON?, _ key: String, _ field: String) -> [(Int, String)] {
        switch value {
        case nil:
            return []
        case .array(let items)?:
            var strings: [(Int, String)] = []
            strings.reserveCapacity(items.count)
            for (index, item) in items.enumerated() {
                guard case .string(let text) = item else {
                    self.add(.wrongType, key, "\(field)[\(index)]", "must be a string, not \(item.typeName)")
                    continue
                }
                strings.append((index, text))
            }
            return strings
        case let other?:
            self.add(.wrongType, key, field, "must be an array of strings, not \(other.typeName)")
            return []
        }
    }

    private mutating func pins(_ found: EntryFields, _ key: String, enforce: Bool) -> [Pin] {
        if let read = found.readPins {
            // Decoded by the one-pass reader: an array of strings, each a pin in the usual form, none repeated; what
            // is left to check of such an array is its count, below.
            self.checkPinCount(read.count, key, enforce: enforce)
            return read
        }
        let value = found.pins
        guard value != nil else {
            self.add(
                .missingField,
                key,
                "pins",
                "missing; an entry needs its SPKI pins (\"sha256/…\"), at least two when enforced"
            )
            return []
        }
        let texts = self.strings(value, key, "pins")
        var pins: [Pin] = []
        pins.reserveCapacity(texts.count)
        // Where each pin was first written. An entry holds a few pins: they are compared one by one, and hashed
        // only for a long list (a pin set of 10,000 hosts would otherwise build 10,000 small tables).
        var indices: [Int] = []
        indices.reserveCapacity(texts.count)
        var firstIndex: [Pin: Int] = [:]
        var malformed = false
        for (index, text) in texts {
            do {
                let pin = try Pin(text)
                let earlier: Int? =
                    pins.count < 16 ? pins.firstIndex(of: pin).map { indices[$0] } : firstIndex[pin]
                if let earlier {
                    self.add(.invalidValue, key, "pins[\(index)]", "repeats pins[\(earlier)]; a backup pin must be a different key")
                    continue
                }
                if pins.count == 15 {
                    for (position, earlierPin) in pins.enumerated() { firstIndex[earlierPin] = indices[position] }
                }
                if pins.count >= 15 { firstIndex[pin] = index }
                indices.append(index)
                pins.append(pin)
            } catch {
                malformed = true
                self.add(.invalidValue, key, "pins[\(index)]", error.description)
            }
        }
        if case .array? = value, !malformed {
            self.checkPinCount(pins.count, key, enforce: enforce)
        }
        return pins
    }

    /// Whether an entry's list of pins, every one read and none repeated, has enough of them.
    private mutating func checkPinCount(_ count: Int, _ key: String, enforce: Bool) {
        if enforce && count < 2 {
            self.add(
                .invalidValue,
                key,
                "pins",
                "an enforced entry needs at least two distinct pins (a backup key makes rotation possible without locking clients out); found \(count). Add a backup pin, or set \"enforce\": false for report-only"
            )
        } else if !enforce && count == 0 {
            self.add(.invalidValue, key, "pins", "a report-only entry needs at least one pin to report against")
        }
    }

    private mutating func expires(_ value: TUFJSON?, _ key: String) -> Date? {
        switch value {
        case nil:
            return nil
        case .string(let text)?:
            // A full RFC 3339 date-time (the reader takes nothing else): a bare date would leave the time zone, and
            // so the instant, unclear. The reader's words say what is wrong ("day 30 does not exist: February 2030
            // has 28 days"), as `--at`'s refusal does.
            do {
                return try RFC3339.read(text)
            } catch {
                self.add(.invalidValue, key, "expires", "\"\(text)\" is not an RFC 3339 date-time such as 2031-01-01T00:00:00Z: \(error.description)")
                return nil
            }
        case let other?:
            self.add(.wrongType, key, "expires", "must be an RFC 3339 date-time string, not \(other.typeName)")
            return nil
        }
    }

    private mutating func anchors(_ value: TUFJSON?, _ key: String) -> ([String], [Certificate]) {
        var files: [String] = []
        var certificates: [Certificate] = []
        for (index, path) in self.strings(value, key, "anchors") {
            files.append(path)
            guard !path.isEmpty else {
                self.add(.anchorFile, key, "anchors[\(index)]", "the path is empty")
                continue
            }
            let resolved =
                path.hasPrefix("/")
                ? path : URL(fileURLWithPath: self.baseDirectory, isDirectory: true).appendingPathComponent(path).path
            do {
                certificates += try CertificateLoader.certificates(atPath: resolved)
            } catch {
                self.add(.anchorFile, key, "anchors[\(index)]", error.description)
            }
        }
        return (files, certificates)
    }

    /// `"revocation": {"crls": ["fleet.crl"], "mode": "hard"|"soft", "scope": "leaf"|"chain", "fetch": false}`:
    /// the CRL files (relative to the configuration, read now, as anchors are) and how they are applied.
    /// `fetch: true` also downloads CRLs from the certificates' distribution points (in `PinningNIO`; the
    /// policy only asks for it, see ``RevocationPolicy/fetch``), and makes `crls` optional.
    private mutating func revocation(_ value: TUFJSON?, _ key: String) -> ([String], RevocationPolicy?) {
        guard let value else { return ([], nil) }
        guard case .object(let fields) = value else {
            self.add(.wrongType, key, "revocation", "must be an object such as {\"crls\": [\"fleet.crl\"], \"mode\": \"hard\"}, not \(value.typeName)")
            return ([], nil)
        }
        let before = self.problems.count
        let known = ["crls", "fetch", "mode", "scope"]
        for field in fields.keys.sorted() where !known.contains(field) {
            self.add(.unknownField, key, "revocation.\(field)", "unknown field; revocation has only \(known.joined(separator: ", "))")
        }
        let fetch = self.bool(fields["fetch"], key, "revocation.fetch") ?? false
        let mode = self.word(fields["mode"], key, "revocation.mode", default: RevocationPolicy.Mode.hard)
        let scope = self.word(fields["scope"], key, "revocation.scope", default: RevocationPolicy.Scope.leaf)
        // With fetch, CRL files are optional (the distribution points supply them); without, there would be
        // nothing to check against.
        if fields["crls"] == nil && !fetch {
            self.add(.missingField, key, "revocation.crls", "missing; list the CRL files to check against (PEM or DER), or set \"fetch\": true")
        }
        var files: [String] = []
        var crls: [CertificateRevocationList] = []
        let listed = self.strings(fields["crls"], key, "revocation.crls")
        if fields["crls"] != nil && listed.isEmpty && self.problems.count == before {
            self.add(.invalidValue, key, "revocation.crls", "is empty; list at least one CRL file")
        }
        for (index, path) in listed {
            files.append(path)
            let field = "revocation.crls[\(index)]"
            guard !path.isEmpty else {
                self.add(.crlFile, key, field, "the path is empty")
                continue
            }
            let resolved =
                path.hasPrefix("/")
                ? path : URL(fileURLWithPath: self.baseDirectory, isDirectory: true).appendingPathComponent(path).path
            do {
                for crl in try Self.readCRLs(resolved) where !crls.contains(crl) {
                    crls.append(crl)
                }
            } catch {
                self.add(.crlFile, key, field, "\(path): \(error.message)")
            }
        }
        guard self.problems.count == before, let mode, let scope else { return (files, nil) }
        return (files, RevocationPolicy(crls: crls, mode: mode, scope: scope, fetch: fetch))
    }

    /// One of an enum's raw values, `fallback` when absent.
    private mutating func word<Word: RawRepresentable & CaseIterable>(
        _ value: TUFJSON?, _ key: String, _ field: String, default fallback: Word
    ) -> Word? where Word.RawValue == String {
        let choices = Word.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: " or ")
        switch value {
        case nil:
            return fallback
        case .string(let text)?:
            guard let word = Word(rawValue: text) else {
                self.add(.invalidValue, key, field, "\"\(text)\" is not \(choices)")
                return nil
            }
            return word
        case let other?:
            self.add(.wrongType, key, field, "must be \(choices), not \(other.typeName)")
            return nil
        }
    }

    /// The CRLs in one file, read with the CRL reader's own size limit.
    private static func readCRLs(_ path: String) throws(CRLError) -> [CertificateRevocationList] {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CRLError(.notACRL, "cannot open the file (missing or not readable)")
        }
        defer {
            do {
                try handle.close()
            } catch {
                // Closing a file that was only read cannot lose data; nothing to report.
            }
        }
        let data: Data
        do {
            data = try handle.read(upToCount: CertificateRevocationList.maximumSize + 1) ?? Data()
        } catch {
            throw CRLError(.notACRL, "cannot read the file")
        }
        return try CertificateRevocationList.read(Array(data))
    }

    private mutating func reportURIs(_ value: TUFJSON?, _ key: String) -> [URL] {
        var uris: [URL] = []
        for (index, text) in self.strings(value, key, "reportURIs") {
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
                let host = url.host, !host.isEmpty
            else {
                self.add(.invalidValue, key, "reportURIs[\(index)]", "\"\(text)\" is not an absolute http:// or https:// URI")
                continue
            }
            uris.append(url)
        }
        return uris
    }

    /// Two keys that cover exactly the same hosts (`API.example.com` and `api.example.com.`, or
    /// `**.example.com` and `example.com` with includeSubdomains) would make the winner depend on file order.
    /// The host index of `entries` (built once, and kept by the configuration) lists them: an entry whose pattern
    /// is the same kind over the same name as an earlier one's, with the first of them.
    private mutating func checkOverlaps(_ entries: [PinningConfiguration.Entry], _ index: PinningConfiguration.HostIndex) {
        for (position, first) in index.repeated {
            self.add(.invalidPattern, entries[position].key, nil, "covers exactly the same hosts as \"\(entries[first].key)\"; keep one entry")
        }
    }

    /// A version that is not 1, as the file says it: a whole number as digits, anything else as written (`1e400`
    /// read as a `Double` is infinity, and "unsupported version inf" was not what the file said; NU3).
    private static func written(_ value: TUFJSON, _ number: Double) -> String {
        if number.isFinite, number == number.rounded(), abs(number) < 1e15 { return String(Int(number)) }
        switch value {
        case .integer(let text), .float(let text):
            let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
            return number.isFinite && number != number.rounded() ? "\(shown) (not a whole number)" : shown
        default:
            return String(number)
        }
    }
}
