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

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
