import Foundation
import PinningTestSupport
import Testing

@testable import Pinning

/// The one escaper for text shown to a person (``VisibleText``), and file names (`DirectoryListing.escaped`, bytes),
/// which call it. TUF messages: TUFPrintableTests.
@Suite("VisibleText: peers' text made visible, one set of rules")
struct VisibleTextTests {
    @Test("C0, DEL, C1, format characters (bidi, zero-width, U+FEFF, soft hyphen, tags), U+2028/U+2029, and a backslash before u, x, \" or the end, as \\u{…}; letters kept")
    func rules() {
        #expect(VisibleText.escaped("a\u{1B}[0m\r\n\t\u{0}\u{7F}\u{80}\u{85}\u{9B}\u{9F}b") == "a\\u{1b}[0m\\u{d}\\u{a}\\u{9}\\u{0}\\u{7f}\\u{80}\\u{85}\\u{9b}\\u{9f}b")
        #expect(VisibleText.escaped("\u{202A}\u{202E}\u{2066}\u{2069}\u{200E}\u{200F}\u{61C}") == "\\u{202a}\\u{202e}\\u{2066}\\u{2069}\\u{200e}\\u{200f}\\u{61c}")
        #expect(VisibleText.escaped("exam\u{200B}ple\u{200D}.com\u{FEFF}\u{AD}\u{2060}\u{E0041}") == "exam\\u{200b}ple\\u{200d}.com\\u{feff}\\u{ad}\\u{2060}\\u{e0041}")
        #expect(VisibleText.escaped("line\u{2028}para\u{2029}") == "line\\u{2028}para\\u{2029}")
        // Default-ignorable code points outside Cf: variation selectors (Mn), U+034F, the Hangul fillers (Lo), the
        // Mongolian free variation selectors.
        #expect(
            VisibleText.escaped("exam\u{FE0F}ple\u{E0100}\u{34F}\u{115F}\u{1160}\u{3164}\u{FFA0}\u{180B}\u{180F}.com")
                == "exam\\u{fe0f}ple\\u{e0100}\\u{34f}\\u{115f}\\u{1160}\\u{3164}\\u{ffa0}\\u{180b}\\u{180f}.com")
        #expect(VisibleText.escaped("한국어 ❤ é") == "한국어 ❤ é", "visible Hangul and symbols are kept")
        // A backslash is escaped only before `u` or `x`, where it would read as an escape, and before `"` or at the
        // end, where it could escape a caller's closing quote; a distinguished name's own escapes stay as they are.
        #expect(VisibleText.escaped("C:\\dir \\u{202e} \\xFF \\U \\\" \\") == "C:\\dir \\u{5c}u{202e} \\u{5c}xFF \\U \\u{5c}\" \\u{5c}")
        #expect(VisibleText.escaped("CN=Smith\\, John+O=A\\+B\\\\C") == "CN=Smith\\, John+O=A\\+B\\\\C")
        #expect(VisibleText.escaped("\\\u{1B}") == "\\\\u{1b}", "a backslash before a hidden character stays, the character is escaped")
        #expect(VisibleText.escaped("café 例え Ωμέγα 😀 \"quoted\" ~") == "café 例え Ωμέγα 😀 \"quoted\" ~")
        #expect(VisibleText.escaped("") == "")
    }

    @Test("the ASCII fast path agrees with the properties: no printable ASCII character is hidden, every other ASCII one is")
    func asciiFastPath() {
        for value in UInt32(0)...0x7F {
            let scalar = Unicode.Scalar(value)!
            let category = scalar.properties.generalCategory
            let byProperties = category == .control || category == .format || scalar.properties.isDefaultIgnorableCodePoint
            #expect(VisibleText.isHidden(scalar) == byProperties, "U+\(String(value, radix: 16))")
            #expect(byProperties == !(0x20..<0x7F).contains(value), "U+\(String(value, radix: 16))")
        }
    }

    @Test("a limit cuts the text before escaping it, in Unicode scalars, and says so with …")
    func limit() {
        #expect(VisibleText.escaped("abc\u{1B}def", limit: 4) == "abc\\u{1b}…")
        #expect(VisibleText.escaped("abc", limit: 3) == "abc")
        #expect(VisibleText.escaped("例例例例", limit: 2) == "例例…")
    }

    @Test("bytes: UTF-8 by the same rules, each byte that is not UTF-8 as \\xNN")
    func bytes() {
        #expect(VisibleText.escaped(bytes: Array("café.pem".utf8)) == "café.pem")
        #expect(VisibleText.escaped(bytes: [0x62, 0xFF] + Array(".pem".utf8)) == "b\\xFF.pem")
        #expect(VisibleText.escaped(bytes: [0x63, 0x1B, 0xFE] + Array(".txt".utf8)) == "c\\u{1b}\\xFE.txt")
        // A truncated sequence (é without its second byte), an overlong '/', a lone continuation byte, a surrogate.
        #expect(VisibleText.escaped(bytes: [0x61, 0xC3, 0x62]) == "a\\xC3b")
        #expect(VisibleText.escaped(bytes: [0xC0, 0xAF]) == "\\xC0\\xAF")
        #expect(VisibleText.escaped(bytes: [0x80, 0x41]) == "\\x80A")
        #expect(VisibleText.escaped(bytes: [0xED, 0xA0, 0x80]) == "\\xED\\xA0\\x80")
        // U+202E and U+0085 encoded in UTF-8 are characters, escaped as such.
        #expect(VisibleText.escaped(bytes: Array("a\u{202E}\u{85}\\".utf8)) == "a\\u{202e}\\u{85}\\u{5c}")
        #expect(DirectoryListing.escaped([0x62, 0xFF, 0x5C]) == "b\\xFF\\u{5c}")
        #expect(DirectoryListing.escaped([0x62, 0x5C, 0x2E]) == "b\\.")
        // A backslash before `x` or `u` (as bytes) is escaped; before a byte that is not UTF-8 it stays.
        #expect(VisibleText.escaped(bytes: Array("a\\xFF\\u{1}".utf8)) == "a\\u{5c}xFF\\u{5c}u{1}")
        #expect(VisibleText.escaped(bytes: [0x5C, 0xFF]) == "\\\\xFF")
    }

    @Test("the escaped text reads back as the original: every \\u{…} and \\xNN is an escape, every other backslash the sender's")
    func unambiguous() {
        // A reader of the rules above, for the test: `\u{hex}` and `\xHH` are escapes, any other backslash is itself.
        // nil for what the escaper should never write (a malformed escape).
        func read(_ text: String) -> [UInt8]? {
            var out: [UInt8] = []
            let scalars = Array(text.unicodeScalars)
            var i = 0
            while i < scalars.count {
                let escape = scalars[i] == "\\" && i + 1 < scalars.count ? scalars[i + 1] : nil
                if escape == "u" {
                    guard i + 2 < scalars.count, scalars[i + 2] == "{", let close = scalars[(i + 3)...].firstIndex(of: "}"),
                        let value = UInt32(String(String.UnicodeScalarView(scalars[(i + 3)..<close])), radix: 16),
                        let scalar = Unicode.Scalar(value)
                    else { return nil }
                    out += Array(String(scalar).utf8)
                    i = close + 1
                } else if escape == "x" {
                    guard i + 3 < scalars.count, let byte = UInt8(String(String.UnicodeScalarView(scalars[(i + 2)...(i + 3)])), radix: 16)
                    else { return nil }
                    out.append(byte)
                    i += 4
                } else {
                    out += Array(String(scalars[i]).utf8)
                    i += 1
                }
            }
            return out
        }
        let alphabet: [UInt8] = Array("\\ux{}0a1b\"".utf8) + [0x1B, 0x0A, 0xFF, 0xC3, 0xA9, 0xE2, 0x80, 0xAE]
        // A new seed each run, printed with any failure; PINNING_TEST_SEED=N makes that run's inputs again.
        let seed = Self.seed()
        var generator = SplitMix64(seed: seed)
        for _ in 0..<5_000 {
            let bytes = (0..<Int.random(in: 0...12, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            let escaped = VisibleText.escaped(bytes: bytes)
            #expect(read(escaped) == bytes, "seed \(seed): \(bytes) → \(escaped)")
            #expect(!escaped.unicodeScalars.contains { VisibleText.isHidden($0) }, "seed \(seed): \(escaped)")
            #expect(!escaped.hasSuffix("\\") && !escaped.contains("\\\""), "seed \(seed): no backslash left to escape a caller's quote: \(escaped)")
            if let text = String(validating: bytes, as: UTF8.self) {
                #expect(read(VisibleText.escaped(text)) == bytes, "seed \(seed): \(bytes)")
            }
        }
    }

    /// `PINNING_TEST_SEED` when set (to replay a failure this suite printed), else a new random seed.
    static func seed() -> UInt64 {
        ProcessInfo.processInfo.environment["PINNING_TEST_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: .min ... .max)
    }

    @Test("quoted: the text between quotes, its own \" as \\u{22} so it cannot close them; a cut's … outside the quotes")
    func quoted() {
        #expect(VisibleText.quoted("root") == "\"root\"")
        // A `_type` that tries to end the quote and write the message's own words after it.
        #expect(VisibleText.quoted("x\", not \"root") == "\"x\\u{22}, not \\u{22}root\"")
        #expect(VisibleText.quoted("a\u{1B}b\\") == "\"a\\u{1b}b\\u{5c}\"", "hidden characters and a final backslash as everywhere")
        #expect(VisibleText.quoted("a\\\"b") == "\"a\\u{5c}\\u{22}b\"", "a backslash before a quote is escaped, then the quote")
        #expect(VisibleText.quoted("abcdef", limit: 3) == "\"abc\"…")
        #expect(VisibleText.quoted("ab…", limit: 3) == "\"ab…\"", "the sender's own … stays inside the quotes: not a cut")
        #expect(VisibleText.quoted("例え", limit: 0) == "\"\"…")
        #expect(VisibleText.quoted("") == "\"\"")
        // Whatever the text, the result has exactly two raw quotes, first and last (before a cut's …).
        let alphabet: [Character] = ["\"", "\\", "u", "x", "{", "}", "a", "…", "\u{1B}", "\u{202E}", "é"]
        // A new seed each run, printed with any failure; PINNING_TEST_SEED=N makes that run's inputs again.
        let seed = Self.seed()
        var generator = SplitMix64(seed: seed)
        for _ in 0..<2_000 {
            let text = String((0..<Int.random(in: 0...10, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
            let limit = Bool.random(using: &generator) ? Int.random(in: 0...10, using: &generator) : nil
            let shown = VisibleText.quoted(text, limit: limit)
            let body = shown.hasSuffix("…") ? String(shown.dropLast()) : shown
            #expect(body.filter { $0 == "\"" }.count == 2 && body.hasPrefix("\"") && body.hasSuffix("\""), "seed \(seed): \(text) → \(shown)")
            #expect(!body.dropLast().hasSuffix("\\"), "seed \(seed): no backslash before the closing quote: \(shown)")
            #expect(!shown.unicodeScalars.contains { VisibleText.isHidden($0) }, "seed \(seed): \(shown)")
        }
    }

    @Test("JSON: DEL, C1, format characters and separators as \\uXXXX (a surrogate pair above U+FFFF); the values and the layout unchanged")
    func json() throws {
        let value = ["host": "evil\u{1B}[2J\u{7F}\u{9B}\u{202E}\u{2028}\u{E0041}é例\\", "n": "1"]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let raw = String(decoding: try encoder.encode(value), as: UTF8.self)
        let escaped = VisibleText.jsonEscaped(raw)
        #expect(escaped.contains(#""evil\u001b[2J\u007f\u009b\u202e\u2028\udb40\udc41é例\\""#), "\(escaped)")
        #expect(!escaped.unicodeScalars.contains { $0.value >= 0x7F && VisibleText.isHidden($0) })
        #expect(escaped.contains("\n"), "the pretty printing's line feeds are the document's own")
        let decoded = try JSONDecoder().decode([String: String].self, from: Data(escaped.utf8))
        #expect(decoded == value)
    }
}
