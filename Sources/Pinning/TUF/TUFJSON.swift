#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A JSON value as The Update Framework signs it: integers kept exactly (as their decimal digits), object keys kept
/// byte for byte, and an encoder for OLPC canonical JSON as securesystemslib writes it (`encode_canonical`).
///
/// Foundation's `JSONSerialization` is not used for metadata: it reads integers as `Double` beyond 2^53, it cannot
/// say whether `1` was written `1` or `1.0`, and `NSDictionary` keys compare as Unicode-equivalent strings. A
/// signature covers exact bytes, so the value it is checked against must be exactly what was written.
public enum TUFJSON: Sendable, Equatable {
    case null
    case bool(Bool)
    /// An integer, as its decimal digits with an optional leading `-` (`-0` is kept as `0`, as Python reads it).
    case integer(String)
    /// A number with a fraction or an exponent, as written. Canonical JSON has no floats: encoding refuses it, as
    /// securesystemslib does, so a signature over a value containing one never verifies.
    case float(String)
    case string(String)
    case array([TUFJSON])
    case object(TUFJSONObject)

    /// The integer's value when it fits an `Int`.
    package var intValue: Int? {
        guard case .integer(let digits) = self else { return nil }
        return Int(digits)
    }

    package var stringValue: String? {
        guard case .string(let text) = self else { return nil }
        return text
    }

    package var boolValue: Bool? {
        guard case .bool(let value) = self else { return nil }
        return value
    }

    package var objectValue: TUFJSONObject? {
        guard case .object(let object) = self else { return nil }
        return object
    }

    package var arrayValue: [TUFJSON]? {
        guard case .array(let array) = self else { return nil }
        return array
    }

    /// What kind of value this is, for messages ("a string", "an object").
    package var kindWords: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer: "an integer"
        case .float: "a number with a fraction"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A JSON object: members in canonical order (by the UTF-8 bytes of their keys, which is Unicode code point order,
/// as Python sorts `str`), each key once. Keys are compared byte for byte, never as Unicode-equivalent strings.
public struct TUFJSONObject: Sendable, Equatable {
    package struct Member: Sendable, Equatable {
        package var key: String
        package var value: TUFJSON

        package static func == (lhs: Member, rhs: Member) -> Bool {
            lhs.key.utf8.elementsEqual(rhs.key.utf8) && lhs.value == rhs.value
        }
    }

    /// The members, sorted by key bytes.
    package private(set) var members: [Member]

    /// Whether a key holds a byte outside ASCII (then Unicode-equivalent keys are possible, which a configuration
    /// refuses, and Swift's `String` order may differ from the byte order of ``members``).
    package private(set) var hasNonASCIIKey: Bool

    /// An object of these members; nil when a key repeats (byte for byte).
    package init?(_ members: [(String, TUFJSON)]) {
        self.init(members: members.map { Member(key: $0.0, value: $0.1) })
    }

    /// An object of these members, sorted here unless they already are; nil when a key repeats (byte for byte).
    /// The members are taken, not copied: sorting the 10,000 members of a pin set's `domains` does not first copy them.
    init?(members: consuming [Member]) {
        // Already in order (canonical JSON always is): checked, not sorted again. Either way every neighbour is
        // compared below, so a repeated key is found.
        if !members.indices.dropFirst().allSatisfy({ !Self.precedes(members[$0].key, members[$0 - 1].key) }) {
            members.sort { Self.precedes($0.key, $1.key) }
        }
        for index in members.indices.dropFirst() where Self.compare(members[index - 1].key, members[index].key) == 0 {
            return nil
        }
        self.members = members
        self.hasNonASCIIKey = !members.allSatisfy { Self.isASCII($0.key) }
    }

    /// Whether `lhs` sorts before `rhs` by their UTF-8 bytes.
    static func precedes(_ lhs: String, _ rhs: String) -> Bool {
        Self.compare(lhs, rhs) < 0
    }

    /// How `lhs` and `rhs` compare by their UTF-8 bytes, as `lexicographicallyPrecedes` and `elementsEqual` do
    /// (negative, zero or positive): over the bytes in place with `memcmp` when both strings hold them contiguously,
    /// as a string read from bytes does, element by element otherwise.
    package static func compare(_ lhs: String, _ rhs: String) -> Int {
        let compared = lhs.utf8.withContiguousStorageIfAvailable { left in
            rhs.utf8.withContiguousStorageIfAvailable { right -> Int in
                let common = min(left.count, right.count)
                if common > 0, let leftBase = left.baseAddress, let rightBase = right.baseAddress {
                    let order = memcmp(leftBase, rightBase, common)
                    if order != 0 { return Int(order) }
                }
                return left.count - right.count
            }
        }
        if let compared, let result = compared { return result }
        if lhs.utf8.elementsEqual(rhs.utf8) { return 0 }
        return lhs.utf8.lexicographicallyPrecedes(rhs.utf8) ? -1 : 1
    }

    /// Whether every byte of `text` is ASCII.
    package static func isASCII(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { bytes in bytes.allSatisfy { $0 < 0x80 } } ?? text.utf8.allSatisfy { $0 < 0x80 }
    }

    /// The value under exactly this key (byte for byte).
    package subscript(key: String) -> TUFJSON? {
        var low = 0
        var high = self.members.count
        while low < high {
            let middle = (low + high) / 2
            let order = Self.compare(self.members[middle].key, key)
            if order == 0 { return self.members[middle].value }
            if order < 0 {
                low = middle + 1
            } else {
                high = middle
            }
        }
        return nil
    }

    package var keys: [String] { self.members.map(\.key) }
    package var count: Int { self.members.count }
}

/// Why bytes are not JSON, or a value has no canonical form.
package struct TUFJSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `invalidJSON`: the error's stable code (for logs, metrics and JSON; the words may change).
    package var code: String { "invalidJSON" }

    package var message: String
    /// The byte offset where reading stopped, when reading.
    package var offset: Int?

    package var description: String {
        self.offset.map { "\(self.message) at byte \($0)" } ?? self.message
    }
}

extension TUFJSON {
    /// Deepest nesting accepted. TUF metadata nests about six levels; the bound keeps a hostile file from
    /// exhausting the stack.
    package static let maximumDepth = 64

    /// Reads one JSON text (RFC 8259) from UTF-8 bytes, as Python's `json.loads(data.decode("utf-8"))` would,
    /// except where that would let a file mean two things: a key repeated in one object (Python keeps the last)
    /// and an escaped lone surrogate (which Python keeps, then cannot encode to sign) are refused. Python's
    /// `NaN`/`Infinity` extensions and a byte-order mark are refused, as RFC 8259 and Python's strict UTF-8
    /// decoding do.
    package static func parse(_ bytes: some Collection<UInt8>) throws(TUFJSONError) -> TUFJSON {
        try Self.parseNotingKeys(bytes).value
    }

    /// ``parse(_:)``, and whether any object key of the value, at any depth, holds a byte outside ASCII (when none
    /// does, no two keys can be Unicode-equivalent, and nothing has to be walked to find out).
    package static func parseNotingKeys(_ bytes: some Collection<UInt8>) throws(TUFJSONError) -> (value: TUFJSON, hasNonASCIIKey: Bool) {
        var reader = StrictJSONReader(bytes: Array(bytes))
        reader.skipWhitespace()
        let value = try reader.value(depth: 0)
        reader.skipWhitespace()
        guard reader.atEnd else { throw reader.error("more data after the JSON value") }
        return (value, reader.sawNonASCIIKey)
    }

    /// The value's canonical JSON bytes, exactly as securesystemslib's `encode_canonical(...).encode("utf-8")`:
    /// object members sorted by key code points, no whitespace, strings with only `"` and `\` escaped (every other
    /// character raw, in UTF-8), integers in decimal. A float is refused.
    package func canonicalBytes() throws(TUFJSONError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        try Self.write(self, escapingControlCharacters: false, into: &out) { text throws(TUFJSONError) in
            throw TUFJSONError(message: "canonical JSON has no floats (\(text))")
        }
        return out
    }

    /// The value as compact JSON text (RFC 8259) that any JSON reader accepts: the canonical form, except that control
    /// characters in strings are escaped (`\n`, `\u0001`; canonical JSON writes them raw, which strict readers refuse)
    /// and floats are written as read. What a repository writes as a metadata file; signatures cover
    /// ``canonicalBytes()`` of its `signed` part, which reading this text gives back exactly.
    package func jsonBytes() -> [UInt8] {
        var out: [UInt8] = []
        Self.write(self, escapingControlCharacters: true, into: &out) { text in Array(text.utf8) }
        return out
    }

    /// The one writer of both forms, which differ only in how strings escape control characters and in what a
    /// float becomes (`float` gives its bytes, or throws to refuse it). Members are written in the object's order.
    private static func write<Failure: Error>(
        _ value: TUFJSON,
        escapingControlCharacters: Bool,
        into out: inout [UInt8],
        float: (String) throws(Failure) -> [UInt8]
    ) throws(Failure) {
        switch value {
        case .null:
            out += Array("null".utf8)
        case .bool(let flag):
            out += Array((flag ? "true" : "false").utf8)
        case .integer(let digits):
            out += Array(digits.utf8)
        case .float(let text):
            out += try float(text)
        case .string(let text):
            writeString(text, escapingControlCharacters: escapingControlCharacters, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                try write(item, escapingControlCharacters: escapingControlCharacters, into: &out, float: float)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (index, member) in object.members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                writeString(member.key, escapingControlCharacters: escapingControlCharacters, into: &out)
                out.append(UInt8(ascii: ":"))
                try write(member.value, escapingControlCharacters: escapingControlCharacters, into: &out, float: float)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// `"` and `\` escaped; control characters (below 0x20) raw, as canonical JSON has them, or escaped
    /// (`\n`, `\r`, `\t`, else `\u00XX`); every other byte raw.
    private static func writeString(_ text: String, escapingControlCharacters: Bool, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                out += [UInt8(ascii: "\\"), byte]
            case 0x0A where escapingControlCharacters: out += Array("\\n".utf8)
            case 0x0D where escapingControlCharacters: out += Array("\\r".utf8)
            case 0x09 where escapingControlCharacters: out += Array("\\t".utf8)
            case 0x00..<0x20 where escapingControlCharacters:
                let digits = Array("0123456789abcdef".utf8)
                out += Array("\\u00".utf8) + [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]]
            default:
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// A recursive-descent reader over UTF-8 bytes (``TUFJSON/parse(_:)``; a configuration's one-pass reading,
/// ``ConfigurationDocument``, reads its values with it).
struct StrictJSONReader {
    let bytes: [UInt8]
    var position = 0
    /// Whether an object read so far has a key with a byte outside ASCII.
    var sawNonASCIIKey = false

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    var atEnd: Bool { self.position >= self.bytes.count }

    func error(_ message: String) -> TUFJSONError {
        TUFJSONError(message: message, offset: self.position)
    }

    mutating func skipWhitespace() {
        while self.position < self.bytes.count {
            switch self.bytes[self.position] {
            case 0x20, 0x09, 0x0A, 0x0D: self.position += 1
            default: return
            }
        }
    }

    mutating func value(depth: Int) throws(TUFJSONError) -> TUFJSON {
        guard depth < TUFJSON.maximumDepth else { throw self.error("JSON nested deeper than \(TUFJSON.maximumDepth) levels") }
        guard self.position < self.bytes.count else { throw self.error("the JSON text ends where a value was expected") }
        switch self.bytes[self.position] {
        case UInt8(ascii: "{"): return try self.object(depth: depth)
        case UInt8(ascii: "["): return try self.array(depth: depth)
        case UInt8(ascii: "\""): return .string(try self.string())
        case UInt8(ascii: "t"): return try self.literal("true", .bool(true))
        case UInt8(ascii: "f"): return try self.literal("false", .bool(false))
        case UInt8(ascii: "n"): return try self.literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try self.number()
        default: throw self.error("unexpected character where a JSON value was expected")
        }
    }

    mutating func literal(_ word: String, _ value: TUFJSON) throws(TUFJSONError) -> TUFJSON {
        let expected = Array(word.utf8)
        guard self.position + expected.count <= self.bytes.count, Array(self.bytes[self.position..<self.position + expected.count]) == expected else {
            throw self.error("unexpected word where a JSON value was expected")
        }
        self.position += expected.count
        return value
    }

    mutating func number() throws(TUFJSONError) -> TUFJSON {
        let start = self.position
        var negative = false
        if self.bytes[self.position] == UInt8(ascii: "-") {
            negative = true
            self.position += 1
        }
        let integerStart = self.position
        guard self.digits() > 0 else { throw self.error("a number without digits") }
        if self.bytes[integerStart] == UInt8(ascii: "0") && self.position - integerStart > 1 {
            throw TUFJSONError(message: "a number with a leading zero", offset: integerStart)
        }
        var isInteger = true
        if self.position < self.bytes.count && self.bytes[self.position] == UInt8(ascii: ".") {
            self.position += 1
            guard self.digits() > 0 else { throw self.error("a number with no digits after its decimal point") }
            isInteger = false
        }
        if self.position < self.bytes.count && (self.bytes[self.position] | 0x20) == UInt8(ascii: "e") {
            self.position += 1
            if self.position < self.bytes.count && (self.bytes[self.position] == UInt8(ascii: "+") || self.bytes[self.position] == UInt8(ascii: "-")) {
                self.position += 1
            }
            guard self.digits() > 0 else { throw self.error("a number with no digits in its exponent") }
            isInteger = false
        }
        let text = String(decoding: self.bytes[start..<self.position], as: UTF8.self)
        guard isInteger else { return .float(text) }
        // Python reads -0 as the integer 0 and writes it back as "0".
        let digits = String(decoding: self.bytes[integerStart..<self.position], as: UTF8.self)
        return .integer(negative && digits != "0" ? "-" + digits : digits)
    }

    /// Skips ASCII digits; returns how many.
    mutating func digits() -> Int {
        let start = self.position
        while self.position < self.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.bytes[self.position]) {
            self.position += 1
        }
        return self.position - start
    }

    mutating func string() throws(TUFJSONError) -> String {
        self.position += 1  // the opening quote
        // Most strings (keys, pins, host names) are printable ASCII without escapes: made in one step from their
        // bytes. Anything else is read scalar by scalar below, from where the plain run stopped.
        let start = self.position
        while self.position < self.bytes.count {
            let byte = self.bytes[self.position]
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { break }
            self.position += 1
        }
        if self.position < self.bytes.count, self.bytes[self.position] == UInt8(ascii: "\"") {
            self.position += 1
            return String(decoding: self.bytes[start..<self.position - 1], as: UTF8.self)
        }
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: String(decoding: self.bytes[start..<self.position], as: UTF8.self).unicodeScalars)
        while true {
            guard self.position < self.bytes.count else { throw self.error("a string that never ends") }
            let byte = self.bytes[self.position]
            if byte == UInt8(ascii: "\"") {
                self.position += 1
                return String(scalars)
            }
            if byte < 0x20 { throw self.error("a control character inside a string (it must be escaped)") }
            if byte < 0x80 && byte != UInt8(ascii: "\\") {
                scalars.append(Unicode.Scalar(byte))
                self.position += 1
                continue
            }
            if byte >= 0x80 {
                // Strict UTF-8 (no overlong forms, no encoded surrogates), as Python's decode("utf-8").
                var iterator = self.bytes[self.position...].makeIterator()
                var decoder = UTF8()
                guard case .scalarValue(let scalar) = decoder.decode(&iterator) else { throw self.error("a string that is not valid UTF-8") }
                scalars.append(scalar)
                self.position += UTF8.width(scalar)
                continue
            }
            self.position += 1
            guard self.position < self.bytes.count else { throw self.error("a string that never ends") }
            let escape = self.bytes[self.position]
            self.position += 1
            switch escape {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                let first = try self.hex4()
                var value = UInt32(first)
                if (0xD800...0xDBFF).contains(first) {
                    // A high surrogate must be followed by an escaped low one; together they are one character.
                    guard self.position + 1 < self.bytes.count, self.bytes[self.position] == UInt8(ascii: "\\"), self.bytes[self.position + 1] == UInt8(ascii: "u") else {
                        throw self.error("an escaped lone surrogate in a string")
                    }
                    self.position += 2
                    let second = try self.hex4()
                    guard (0xDC00...0xDFFF).contains(second) else { throw self.error("an escaped lone surrogate in a string") }
                    value = 0x10000 + ((UInt32(first) - 0xD800) << 10) + (UInt32(second) - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(first) {
                    throw self.error("an escaped lone surrogate in a string")
                }
                guard let scalar = Unicode.Scalar(value) else { throw self.error("an escape that is not a character") }
                scalars.append(scalar)
            default:
                throw self.error("an unknown escape in a string")
            }
        }
    }

    mutating func hex4() throws(TUFJSONError) -> UInt16 {
        guard self.position + 4 <= self.bytes.count else { throw self.error("a \\u escape with fewer than four hex digits") }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = self.bytes[self.position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw self.error("a \\u escape with a character that is not a hex digit")
            }
            value = value << 4 | UInt16(digit)
            self.position += 1
        }
        return value
    }

    mutating func array(depth: Int) throws(TUFJSONError) -> TUFJSON {
        self.position += 1
        var items: [TUFJSON] = []
        self.skipWhitespace()
        if self.position < self.bytes.count && self.bytes[self.position] == UInt8(ascii: "]") {
            self.position += 1
            return .array(items)
        }
        while true {
            self.skipWhitespace()
            items.append(try self.value(depth: depth + 1))
            self.skipWhitespace()
            guard self.position < self.bytes.count else { throw self.error("an array that never ends") }
            let byte = self.bytes[self.position]
            self.position += 1
            if byte == UInt8(ascii: "]") { return .array(items) }
            guard byte == UInt8(ascii: ",") else { throw TUFJSONError(message: "expected , or ] in an array", offset: self.position - 1) }
        }
    }

    mutating func object(depth: Int) throws(TUFJSONError) -> TUFJSON {
        self.position += 1
        var members: [TUFJSONObject.Member] = []
        self.skipWhitespace()
        if self.position < self.bytes.count && self.bytes[self.position] == UInt8(ascii: "}") {
            self.position += 1
            return .object(TUFJSONObject(members: [])!)
        }
        while true {
            self.skipWhitespace()
            guard self.position < self.bytes.count else { throw self.error("an object that never ends") }
            guard self.bytes[self.position] == UInt8(ascii: "\"") else {
                throw self.error("expected a string key in an object")
            }
            let keyOffset = self.position
            let key = try self.string()
            self.skipWhitespace()
            guard self.position < self.bytes.count, self.bytes[self.position] == UInt8(ascii: ":") else {
                throw self.error("expected : after an object key")
            }
            self.position += 1
            self.skipWhitespace()
            members.append(TUFJSONObject.Member(key: key, value: try self.value(depth: depth + 1)))
            self.skipWhitespace()
            guard self.position < self.bytes.count else { throw self.error("an object that never ends") }
            let byte = self.bytes[self.position]
            self.position += 1
            if byte == UInt8(ascii: "}") {
                guard let object = TUFJSONObject(members: consume members) else {
                    // Python keeps the last of repeated keys; a signature would then cover a value the file does not
                    // show first. One meaning per file: refused.
                    throw TUFJSONError(message: "an object with a repeated key", offset: keyOffset)
                }
                if object.hasNonASCIIKey { self.sawNonASCIIKey = true }
                return .object(object)
            }
            guard byte == UInt8(ascii: ",") else { throw TUFJSONError(message: "expected , or } in an object", offset: self.position - 1) }
        }
    }
}
