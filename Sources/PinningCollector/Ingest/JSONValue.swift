import Foundation

/// A JSON document as Foundation's `JSONDecoder` read it: the parser and its escaping are Foundation's, this type
/// only keeps what it produced so that each key of a report can be checked for its type and named in a refusal.
///
/// Foundation's decoder refuses invalid UTF-8, unescaped control characters and nesting deeper than its limit
/// before any of this runs, and keeps booleans and numbers apart (`true` never decodes as `1`).
enum JSONValue: Sendable, Hashable, Decodable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        // Scalars first, strings first among them: most of a report's values are strings, and every type a value
        // is not costs a thrown DecodingError (with its coding path) here. Each try asks for one JSON type only
        // (Foundation's decoder never reads a number as a string or a boolean, nor a string as either), so the
        // order does not change what a value becomes; Int64 still goes before Double, as before.
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
            return
        }
        if let value = try? single.decode(String.self) {
            self = .string(value)
            return
        }
        if let value = try? single.decode(Bool.self) {
            self = .bool(value)
            return
        }
        if let value = try? single.decode(Int64.self) {
            self = .integer(value)
            return
        }
        if let value = try? single.decode(Double.self) {
            self = .number(value)
            return
        }
        if let object = try? decoder.container(keyedBy: AnyKey.self) {
            var values: [String: JSONValue] = [:]
            for key in object.allKeys {
                values[key.stringValue] = try object.decode(JSONValue.self, forKey: key)
            }
            self = .object(values)
            return
        }
        var array = try decoder.unkeyedContainer()
        var values: [JSONValue] = []
        while !array.isAtEnd {
            values.append(try array.decode(JSONValue.self))
        }
        self = .array(values)
    }

    /// Whether this is a whole number beyond Int64 (`99999999999999999999`, `-1e19`): Foundation's decoder reads
    /// every whole number within Int64 as one, whatever its spelling (`443`, `443.0`, `4.43e2`), so a whole number
    /// kept as a Double is one outside that range. A refusal says it is an integer out of range, not a fraction.
    var isIntegerOutOfRange: Bool {
        guard case .number(let value) = self else { return false }
        // Every Double from 2^63 up is whole; -2^63 itself is Int64.min, which the decoder reads as an integer.
        return value.isFinite && value.magnitude >= 0x1p63
    }

    /// What a refusal calls the value's type.
    var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .integer, .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

/// A `POST /reports` body as the parser reads it: one report object, an array of values, or anything else (which
/// the parser refuses, naming its type).
///
/// A report keeps only the keys ``ReportParser`` reads (``ReportFields/expected``): every other key is in the
/// report's `raw` text, which is copied from the body, so it is not decoded at all. Each key it reads is decoded
/// as the type it should have first, so a well-formed report costs the decoder no failed attempt (each one throws
/// an error carrying its coding path); a value of another type is then decoded as a ``JSONValue``, so that the
/// refusal names what it is, exactly as when every value was a ``JSONValue``. The document was scanned whole
/// before any of this runs, so malformed JSON anywhere, an unknown key's value included, is still refused.
enum ReportBody: Decodable {
    case object(ReportFields)
    case array([ReportFields])
    case other(JSONValue)

    init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var elements: [ReportFields] = []
            while !array.isAtEnd { elements.append(try array.decode(ReportFields.self)) }
            self = .array(elements)
        } else if (try? decoder.container(keyedBy: JSONValue.AnyKey.self)) != nil {
            self = .object(try ReportFields(from: decoder))
        } else {
            self = .other(try JSONValue(from: decoder))
        }
    }
}

/// One element of a body: a report object's known keys, or a value that is not an object.
enum ReportFields: Decodable {
    case object([String: JSONValue])
    case other(JSONValue)

    /// The type each key the parser reads should have (what it is decoded as first).
    enum Expected {
        case string, integer, bool, array
    }

    static let expected: [String: Expected] = [
        "hostname": .string, "port": .integer, "date-time": .string, "noted-hostname": .string, "include-subdomains": .bool,
        "enforce-pinning": .bool, "report-only": .bool, "validation-result": .string, "app-bundle-id": .string, "app-id": .string,
        "app-version": .string, "app-platform": .string, "app-platform-version": .string, "app-vendor-id": .string,
        "library-version": .string, "trustkit-version": .string, "pinset-version": .string, "effective-expiration-date": .string,
        "known-pins-expiration-date": .string, "served-certificate-chain": .array, "validated-certificate-chain": .array,
        "known-pins": .array,
    ]

    init(from decoder: any Decoder) throws {
        guard let object = try? decoder.container(keyedBy: JSONValue.AnyKey.self) else {
            self = .other(try JSONValue(from: decoder))
            return
        }
        var fields: [String: JSONValue] = [:]
        for key in object.allKeys {
            guard let expected = Self.expected[key.stringValue] else { continue }
            fields[key.stringValue] = try Self.value(object, key, expected)
        }
        self = .object(fields)
    }

    private static func value(_ object: KeyedDecodingContainer<JSONValue.AnyKey>, _ key: JSONValue.AnyKey, _ expected: Expected) throws -> JSONValue {
        switch expected {
        case .string:
            if let value = try? object.decode(String.self, forKey: key) { return .string(value) }
        case .integer:
            if let value = try? object.decode(Int64.self, forKey: key) { return .integer(value) }
        case .bool:
            if let value = try? object.decode(Bool.self, forKey: key) { return .bool(value) }
        case .array:
            if let value = try? object.decode([JSONValue].self, forKey: key) { return .array(value) }
        }
        return try object.decode(JSONValue.self, forKey: key)
    }
}
