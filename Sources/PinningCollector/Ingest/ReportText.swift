/// Where each report's JSON text lies in a `POST /reports` body, so that `raw` is stored byte for byte as the
/// client sent it (no re-serialising, and no escaping of ours: the bytes are copied, never written).
///
/// This runs only on a body Foundation's `JSONDecoder` has already accepted, so it does not judge JSON: it only
/// finds the top-level value, or each element of a top-level array, by tracking strings (a `"` inside one is
/// escaped, `\"`; any byte after a `\` is skipped) and the depth of `{`/`[` outside them. Numbers, `true`, `false`
/// and `null` hold none of those bytes. The caller compares the count with the decoded document's and refuses the
/// body when they differ, so a disagreement fails closed instead of storing the wrong text.
enum ReportText {
    /// The ranges of the reports in `body`: one for an object, one per element for an array (empty for `[]`), each
    /// without the whitespace around it; nil when the first value is neither (the decoder decides what that is).
    static func ranges(in body: [UInt8]) -> [Range<Int>]? {
        var index = 0
        // A UTF-8 byte order mark is not part of the text (RFC 8259 §8.1 lets a parser ignore one).
        if body.count >= 3, body[0] == 0xEF, body[1] == 0xBB, body[2] == 0xBF { index = 3 }
        while index < body.count, Self.isWhitespace(body[index]) { index += 1 }
        guard index < body.count else { return nil }
        switch body[index] {
        case UInt8(ascii: "{"):
            var end = body.count
            while end > index, Self.isWhitespace(body[end - 1]) { end -= 1 }
            return [index..<end]
        case UInt8(ascii: "["):
            return Self.elements(of: body, after: index + 1)
        default:
            return nil
        }
    }

    /// The elements of the array whose `[` is just before `start`.
    private static func elements(of body: [UInt8], after start: Int) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var depth = 0
        var strings = JSONStrings()
        var elementStart = start
        var index = start
        while index < body.count {
            let byte = body[index]
            if strings.outside(byte) {
                switch byte {
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: ","):
                    if depth > 0 {
                        // Inside an element: a comma separates its own members, a bracket closes one of its values.
                        if byte != UInt8(ascii: ",") { depth -= 1 }
                    } else {
                        // The top-level array's own `]` or one of its commas: an element ends here.
                        if let element = Self.trimmed(body, elementStart..<index) { ranges.append(element) }
                        if byte != UInt8(ascii: ",") { return ranges }
                        elementStart = index + 1
                    }
                default:
                    break
                }
            }
            index += 1
        }
        return ranges
    }

    /// `range` without its leading and trailing whitespace; nil when nothing is left (the inside of `[]`).
    private static func trimmed(_ body: [UInt8], _ range: Range<Int>) -> Range<Int>? {
        var lower = range.lowerBound
        var upper = range.upperBound
        while lower < upper, Self.isWhitespace(body[lower]) { lower += 1 }
        while upper > lower, Self.isWhitespace(body[upper - 1]) { upper -= 1 }
        return lower < upper ? lower..<upper : nil
    }

    /// JSON's four whitespace bytes (RFC 8259 §2).
    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }
}

/// Whether a byte of JSON text stands inside a string: fed the text's bytes (or its one-byte scalars) in order, it
/// follows `"` and the `\` escapes, so that brackets, braces and commas are counted only outside strings.
struct JSONStrings {
    private(set) var inside = false
    private var escaped = false

    /// Takes the next byte; true when it stands outside every string (a quote that opens or closes one does not).
    mutating func outside(_ byte: UInt8) -> Bool {
        if self.inside {
            if self.escaped {
                self.escaped = false
            } else if byte == UInt8(ascii: "\\") {
                self.escaped = true
            } else if byte == UInt8(ascii: "\"") {
                self.inside = false
            }
            return false
        }
        if byte == UInt8(ascii: "\"") {
            self.inside = true
            return false
        }
        return true
    }
}
