/// An `application/x-www-form-urlencoded` body (the dashboard's sign-in form), read strictly.
///
/// The WHATWG URL standard's parser (§5.1): the body splits at `&` into name-value pairs, a pair at its first `=`,
/// `+` is a space and `%XX` is the byte XX. Two deliberate deviations, both refusals where the standard repairs:
/// a `%` not followed by two hex digits is refused (the standard keeps it as text), and so are bytes that are not
/// UTF-8 once decoded (the standard substitutes U+FFFD, so two different tokens could read the same). A browser
/// never sends either for what a person typed: it percent-encodes `%` itself and encodes the form as UTF-8.
///
/// Foundation's `URLComponents` read this before and stopped the process (a precondition in
/// `percentEncodedQuery`'s setter) for a body with a space, `<`, `"` or a bad `%` escape; this reader never
/// traps, and every refusal names what is wrong in words.
struct FormBody: Sendable, Equatable {
    /// The pairs in body order (a name may repeat).
    var fields: [(name: String, value: String)]

    struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        var description: String
    }

    static func == (left: FormBody, right: FormBody) -> Bool {
        left.fields.elementsEqual(right.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    /// Parses `body`.
    ///
    /// - Throws: ``Refusal`` for a `%` escape that is not two hex digits, or for a name or value that is not UTF-8.
    init(parsing body: some Collection<UInt8>) throws(Refusal) {
        var fields: [(name: String, value: String)] = []
        for (index, pair) in body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true).enumerated() {
            let name: ArraySlice<UInt8>
            let value: ArraySlice<UInt8>
            let bytes = ArraySlice(pair)
            if let equals = bytes.firstIndex(of: UInt8(ascii: "=")) {
                name = bytes[..<equals]
                value = bytes[(equals + 1)...]
            } else {
                name = bytes
                value = []
            }
            let decodedName = try Self.decode(name, what: "field \(index + 1)'s name")
            let decodedValue = try Self.decode(value, what: "the value of field \(index + 1)")
            fields.append((decodedName, decodedValue))
        }
        self.fields = fields
    }

    /// The values of the fields called `name`.
    func values(_ name: String) -> [String] {
        self.fields.filter { $0.name == name }.map(\.value)
    }

    /// `+` as a space, `%XX` as the byte, then UTF-8.
    private static func decode(_ bytes: ArraySlice<UInt8>, what: String) throws(Refusal) -> String {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "+"):
                decoded.append(UInt8(ascii: " "))
                index += 1
            case UInt8(ascii: "%"):
                guard bytes.endIndex - index >= 3, let high = Self.hexValue(bytes[index + 1]), let low = Self.hexValue(bytes[index + 2]) else {
                    throw Refusal(description: "\(what) has a % that is not followed by two hexadecimal digits")
                }
                decoded.append(high << 4 | low)
                index += 3
            default:
                decoded.append(byte)
                index += 1
            }
        }
        // Decoding repairs bytes that are not UTF-8 (U+FFFD); a repaired text no longer has the bytes it came from.
        let text = String(decoding: decoded, as: UTF8.self)
        guard text.utf8.elementsEqual(decoded) else {
            throw Refusal(description: "\(what) is not UTF-8 text")
        }
        return text
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
