import Foundation
import Pinning
import PinningTestSupport
import Testing

@Suite("TUF canonical JSON")
struct TUFCanonicalJSONTests {
    static func canonical(_ text: String) throws -> [UInt8] {
        try TUFJSON.parse(Array(text.utf8)).canonicalBytes()
    }

    static func hex(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            out.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    @Test("the bytes securesystemslib 1.4.0's encode_canonical writes for the same JSON (computed with it)")
    func securesystemslibVector() throws {
        // Input and expected output from `encode_canonical(json.loads(INPUT)).encode("utf-8")` (securesystemslib
        // 1.4.0): keys in code point order (upper case first, "e\u0301" before "z" before "\u00e9"), only `"` and `\`
        // escaped, every other character raw UTF-8, -0 as 0, a 30-digit integer exactly.
        let input = #"{"z": 1, "Z": [true, false, null, -0, 123456789012345678901234567890], "a": "q\"uo\\te\n\u00e9\ud83d\ude00", "\u00e9": {}, "e\u0301": [], "": ""}"#
        let expected = Self.hex(
            "7b22223a22222c225a223a5b747275652c66616c73652c6e756c6c2c302c3132333435363738393031323334353637383930313233343536373839305d2c2261223a22715c22756f5c5c74650ac3a9f09f9880222c2265cc81223a5b5d2c227a223a312c22c3a9223a7b7d7d"
        )
        #expect(try Self.canonical(input) == expected)
    }

    @Test("JSON text escapes what canonical JSON writes raw, and reads back to the same value")
    func jsonText() throws {
        let value = try TUFJSON.parse(Array(#"{"pem": "-----BEGIN-----\nAB\u0001\"\\", "n": [1, -2, 0.5, true, null]}"#.utf8))
        let text = value.jsonBytes()
        #expect(String(decoding: text, as: UTF8.self) == #"{"n":[1,-2,0.5,true,null],"pem":"-----BEGIN-----\nAB\u0001\"\\"}"#)
        #expect(try TUFJSON.parse(text) == value)
        // The canonical form of the same string is raw, and not strict JSON.
        let canonical = try TUFJSON.parse(Array(#"{"pem": "a\nb"}"#.utf8)).canonicalBytes()
        #expect(canonical == Array("{\"pem\":\"a\nb\"}".utf8))
        #expect(throws: TUFJSONError.self) { try TUFJSON.parse(canonical) }
    }

    @Test("canonical form: sorted keys, no whitespace, nested values, and it is a fixed point")
    func basics() throws {
        let out = try Self.canonical(#" { "b" : 1 , "a" : [ true , { "y" : null , "x" : "s" } ] } "#)
        #expect(String(decoding: out, as: UTF8.self) == #"{"a":[true,{"x":"s","y":null}],"b":1}"#)
        #expect(try TUFJSON.parse(out).canonicalBytes() == out)
    }

    @Test("keys that Unicode treats as equal but differ in code points stay two keys, compared byte for byte")
    func unicodeEquivalentKeys() throws {
        let value = try TUFJSON.parse(Array(#"{"\u00e9": 1, "e\u0301": 2}"#.utf8))
        let object = try #require(value.objectValue)
        #expect(object.count == 2)
        #expect(object["\u{e9}"] == .integer("1"))
        #expect(object["e\u{301}"] == .integer("2"))
    }

    @Test("floats are read but have no canonical form, as securesystemslib refuses them")
    func floatsRefused() throws {
        let value = try TUFJSON.parse(Array(#"{"a": 1.5}"#.utf8))
        #expect(throws: TUFJSONError.self) { try value.canonicalBytes() }
        #expect(try TUFJSON.parse(Array("1e3".utf8)) == .float("1e3"))
        #expect(try TUFJSON.parse(Array("10".utf8)).intValue == 10)
    }

    @Test(
        "input that is not one strict JSON text is refused",
        arguments: [
            #"{"a": 1, "a": 2}"#,  // a repeated key
            #""\ud800""#,  // an escaped lone high surrogate
            #""\udc00x""#,  // an escaped lone low surrogate
            #"{"a": 1} x"#,  // data after the value
            "\u{FEFF}{}",  // a byte-order mark
            "NaN", "Infinity", "-Infinity",  // Python's extensions
            "01", "-", "1.", "1e", ".5",  // malformed numbers
            "\"a\u{01}b\"",  // an unescaped control character
            #""\x""#,  // an unknown escape
            "[1,]", "{\"a\":}", "{,}", "",  // structure
            "tru", "nul",
        ])
    func refused(_ text: String) {
        #expect(throws: TUFJSONError.self) { try TUFJSON.parse(Array(text.utf8)) }
    }

    @Test("invalid UTF-8 inside a string is refused")
    func invalidUTF8() {
        #expect(throws: TUFJSONError.self) { try TUFJSON.parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: TUFJSONError.self) { try TUFJSON.parse([0x22, 0xED, 0xA0, 0x80, 0x22]) }  // an encoded surrogate
    }

    @Test("nesting deeper than the cap is refused without exhausting the stack")
    func depth() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: TUFJSONError.self) { try TUFJSON.parse(Array(deep.utf8)) }
        let fine = String(repeating: "[", count: 60) + String(repeating: "]", count: 60)
        #expect(try TUFJSON.parse(Array(fine.utf8)).canonicalBytes() == Array(fine.utf8))
    }
}

@Suite("TUF path patterns")
struct TUFPathPatternTests {
    @Test(
        "fnmatch per path part, as python-tuf matches delegation paths",
        arguments: [
            ("*.md", "README.md", true),
            ("*.md", "releases/README.md", false),  // * never crosses /
            ("releases/*/*", "releases/x/x_v1", true),
            ("releases/*/*", "releases/x", false),
            ("foo-?.tgz", "foo-1.tgz", true),
            ("foo-?.tgz", "foo-alpha.tgz", false),
            ("*.md", "README.MD", false),  // case-sensitive
            ("[ab]c", "bc", true),
            ("[!ab]c", "bc", false),
            ("[!ab]c", "zc", true),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("[x", "[x", true),  // a [ without ] is itself
            ("*", "", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("*/*", "a/b", true),
            ("team-a/*", "team-b/trusted_root.json", false),
        ])
    func matches(_ pattern: String, _ path: String, _ expected: Bool) {
        #expect(TUFPathPattern.matches(pattern: pattern, path: path) == expected)
    }
}
