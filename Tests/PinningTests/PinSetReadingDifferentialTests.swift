import Crypto
import Foundation
import PinningTestSupport
import Testing

@testable import Pinning

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The shortcuts that make a pin set of 10,000 hosts quick to read (issue 29), each held to a reading that does not
/// take them: a configuration written plainly, written unusually (whitespace everywhere, every character of a
/// string possibly `\u`-escaped, members shuffled) and read by Foundation's JSON reader; the one-pass reading of a
/// configuration (``ConfigurationDocument``) against the strict reader's tree, and each case it decides itself; an entry's fields found in
/// one pass against a search per field; keys compared with `memcmp` against element by element; the pin decoder
/// against Foundation's base64; the address pre-check against `inet_pton` itself; overlapping patterns found by the
/// host index against a table of patterns.
@Suite("Pin-set reading shortcuts held to readings without them")
struct PinSetReadingDifferentialTests {
    static func pin(_ seed: String) -> String {
        "sha256/" + Data(SHA256.hash(data: Data(seed.utf8))).base64EncodedString()
    }

    // MARK: - Configurations written two ways, and read by Foundation

    /// A JSON value as the generator builds it (keys kept in the order written).
    indirect enum Value {
        case string(String)
        case number(String)
        case bool(Bool)
        case null
        case array([Value])
        case object([(String, Value)])
    }

    /// Host keys: plain, upper-case, trailing dot, wildcards, addresses (IPv6 in upper case too), names outside ASCII
    /// (precomposed, decomposed, Greek, CJK, the ideographic full stop, U+212A KELVIN SIGN), and keys that are refused.
    static let hostKeys: [String] = [
        "api.example.com", "API.Example.COM.", "*.cdn.example.com", "**.fleet.internal", "deep.example.org", "10.0.0.1", "FE80::1",
        "::ffff:10.0.0.2", "b\u{FC}cher.example", "\u{3C3}khttp.example", "\u{65E5}\u{672C}.example", "a\u{3002}ideographic.example",
        "\u{212A}elvin.example", "*.b\u{FC}cher.example", "under_score.example.net", "e\u{301}.example", "*.com", "a*b.example.com",
        "a..b.example", "", "-lead.example", "x/y.example", "**.10.0.0.3", "quote\".example", "back\\slash.example", "tab\t.example",
        "\u{1F600}.example", "with space.example",
    ]

    /// Entry field names, with near misses (a letter off, another case, a combining mark, the Kelvin sign).
    static let fieldNames = [
        "pins", "enforce", "includeSubdomains", "anchorsOnly", "expires", "reportURIs", "excludeSubdomainFromParentPolicy", "pin", "Pins",
        "pins\u{301}", "\u{212A}eys", "enforcePinning", "\u{E9}nforce",
    ]

    static func randomValue(field: String, using generator: inout SplitMix64) -> Value {
        let pins = (0..<4).map { Self.pin("p\($0)") }
        switch (field, Int.random(in: 0..<10, using: &generator)) {
        case ("pins", 0..<6):
            let count = Int.random(in: 0...3, using: &generator)
            return .array((0..<count).map { _ in .string(pins.randomElement(using: &generator)!) })
        case ("pins", 6):
            return .array([.string(pins[0]), .number("7"), .string("sha256/not base64"), .string(" SHA256/" + String(pins[1].dropFirst(7)) + " ")])
        case ("pins", 7):
            return .array([.string(pins[2]), .string("sha256//" + String(pins[3].dropFirst(7)))])
        case ("expires", 0..<5):
            return .string(["2031-01-01T00:00:00Z", "2031-01-01", "soon"].randomElement(using: &generator)!)
        case ("reportURIs", 0..<5):
            return .array([.string("https://reports.example/p"), .string("ftp://x")])
        case (_, 0..<5) where ["enforce", "includeSubdomains", "anchorsOnly", "excludeSubdomainFromParentPolicy"].contains(field):
            return .bool(Bool.random(using: &generator))
        case (_, 5):
            return .null
        case (_, 6):
            return .number(["1", "-0", "2.5e3", "0.0"].randomElement(using: &generator)!)
        case (_, 7):
            return .object([("x", .bool(true))])
        default:
            return .string("text \u{E9}\u{1F600}\"\\/")
        }
    }

    /// A configuration of up to `count` distinct keys (distinct as Swift strings too, so Foundation's dictionaries
    /// keep them all), each entry mostly two good pins, sometimes other fields.
    static func randomConfiguration(entries count: Int, using generator: inout SplitMix64) -> Value {
        var seen: Set<String> = []
        var domains: [(String, Value)] = []
        for index in 0..<count {
            let key =
                Bool.random(using: &generator)
                ? Self.hostKeys.randomElement(using: &generator)! : "host-\(index).\(["example", "Example", "ex\u{E4}mple"].randomElement(using: &generator)!)"
            guard seen.insert(key).inserted else { continue }
            var fields: [(String, Value)] = [("pins", .array([.string(Self.pin("\(index) a")), .string(Self.pin("\(index) b"))]))]
            if Int.random(in: 0..<3, using: &generator) == 0 {
                var names: Set<String> = ["pins"]
                for _ in 0..<Int.random(in: 1...3, using: &generator) {
                    let name = Self.fieldNames.randomElement(using: &generator)!
                    guard names.insert(name).inserted else { continue }
                    fields.append((name, Self.randomValue(field: name, using: &generator)))
                }
                if names.contains("excludeSubdomainFromParentPolicy") || Bool.random(using: &generator) {
                    fields = fields.filter { $0.0 != "pins" } + [("pins", Self.randomValue(field: "pins", using: &generator))]
                }
            }
            domains.append((key, Int.random(in: 0..<40, using: &generator) == 0 ? .array([]) : .object(fields)))
        }
        var top: [(String, Value)] = [("version", .number("1")), ("domains", .object(domains))]
        switch Int.random(in: 0..<6, using: &generator) {
        case 0: top.append(("unlistedHosts", .string("reject")))
        case 1: top.append(("unlistedHosts", .string("sometimes")))
        case 2: top.append(("extra", .null))
        default: break
        }
        return .object(top)
    }

    /// Plain JSON: no whitespace, only `"`, `\` and control characters escaped.
    static func plain(_ value: Value) -> String {
        switch value {
        case .string(let text): return Self.quoted(text)
        case .number(let text): return text
        case .bool(let flag): return flag ? "true" : "false"
        case .null: return "null"
        case .array(let items): return "[" + items.map(Self.plain).joined(separator: ",") + "]"
        case .object(let members): return "{" + members.map { Self.quoted($0.0) + ":" + Self.plain($0.1) }.joined(separator: ",") + "}"
        }
    }

    /// The same value written unusually: any JSON whitespace around every token, members in another order, and each
    /// character of a string written as a `\u` escape (a surrogate pair past U+FFFF, upper- or lower-case hex),
    /// `/` as `\/`, or raw, at random.
    static func unusual(_ value: Value, using generator: inout SplitMix64) -> String {
        func space() -> String {
            String((0..<Int.random(in: 0...2, using: &generator)).map { _ in [" ", "\t", "\n", "\r"].randomElement(using: &generator)! })
        }
        switch value {
        case .string(let text): return space() + Self.quoted(text, using: &generator) + space()
        case .number, .bool, .null: return space() + Self.plain(value) + space()
        case .array(let items):
            return space() + "[" + space() + items.map { Self.unusual($0, using: &generator) }.joined(separator: ",") + space() + "]" + space()
        case .object(let members):
            let shuffled = members.shuffled(using: &generator)
            return space() + "{" + space()
                + shuffled.map { space() + Self.quoted($0.0, using: &generator) + space() + ":" + Self.unusual($0.1, using: &generator) }.joined(separator: ",")
                + space() + "}" + space()
        }
    }

    /// `text` as a JSON string: `"`, `\` and control characters escaped, everything else raw.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars { Self.append(scalar, to: &out) }
        return out + "\""
    }

    static func append(_ scalar: Unicode.Scalar, to out: inout String) {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\u{00}"..."\u{1F}": out += Self.escaped(scalar.value, upper: false)
        default: out.unicodeScalars.append(scalar)
        }
    }

    /// `text` as a JSON string with any character `\u`-escaped (a surrogate pair past U+FFFF), `/` written `\/`,
    /// at random.
    static func quoted(_ text: String, using generator: inout SplitMix64) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            let upper = Bool.random(using: &generator)
            guard Int.random(in: 0..<3, using: &generator) == 0 else {
                Self.append(scalar, to: &out)
                continue
            }
            if scalar == "/" && upper {
                out += "\\/"
            } else if scalar.value > 0xFFFF {
                let offset = scalar.value - 0x10000
                out += Self.escaped(0xD800 + (offset >> 10), upper: upper) + Self.escaped(0xDC00 + (offset & 0x3FF), upper: upper)
            } else {
                out += Self.escaped(scalar.value, upper: upper)
            }
        }
        return out + "\""
    }

    static func escaped(_ unit: UInt32, upper: Bool) -> String {
        let digits = String(unit, radix: 16, uppercase: upper)
        return "\\u" + String(repeating: "0", count: 4 - digits.count) + digits
    }

    /// What reading gave: the configuration's entries and unlisted-host mode, or the problems.
    enum Outcome: Equatable {
        case read(unlisted: String, entries: [PinningConfiguration.Entry])
        case refused([PinningConfigurationError.Problem])
    }

    static func outcome(_ read: () throws -> PinningConfiguration) -> Outcome {
        do {
            let configuration = try read()
            return .read(unlisted: configuration.unlistedHosts.rawValue, entries: configuration.entries)
        } catch let error as PinningConfigurationError {
            return .refused(error.problems)
        } catch {
            return .refused([.init(.invalidJSON, entry: nil, field: nil, "\(error)")])
        }
    }

    @Test("generated configurations written plainly, written unusually, and read through Foundation's JSON reader give the same entries or the same problems")
    func writtenTwoWaysAndReadByFoundation() throws {
        var generator = SplitMix64(seed: 29)
        var (read, refused) = (0, 0)
        for round in 0..<120 {
            let value = Self.randomConfiguration(entries: round % 10 == 0 ? 400 : Int.random(in: 1...12, using: &generator), using: &generator)
            let plain = Data(Self.plain(value).utf8)
            let unusual = Data(Self.unusual(value, using: &generator).utf8)
            let fromPlain = Self.outcome { try PinningConfiguration(data: plain, baseDirectory: "/") }
            let fromUnusual = Self.outcome { try PinningConfiguration(data: unusual, baseDirectory: "/") }
            // Foundation's reader (JSONDecoder, through `Decodable`): a different tokenizer, unescaping and key
            // comparison, then the same validator.
            let fromFoundation = Self.outcome { try JSONDecoder().decode(PinningConfiguration.self, from: plain) }
            #expect(fromPlain == fromUnusual, "round \(round): \(String(decoding: unusual, as: UTF8.self).prefix(300))")
            #expect(fromPlain == fromFoundation, "round \(round): \(String(decoding: plain, as: UTF8.self).prefix(300))")
            if case .read = fromPlain { read += 1 } else { refused += 1 }
        }
        // Both outcomes were compared, many times each.
        #expect(read >= 10 && refused >= 10, "\(read) read, \(refused) refused")
    }

    // MARK: - The one-pass reading against the strict reader's tree

    /// What loading `data` gives, with the one-pass reading allowed (as every caller loads) or not (the strict
    /// reader's tree, then the validator, as before the one-pass reading), and the files each reading names.
    static func bothReadings(_ data: Data, baseDirectory: String = "/") -> (onePass: Bool, allowed: Outcome, strict: Outcome, files: [String], strictFiles: [String]) {
        let text = PinningConfiguration.Text(data, maximumSize: .max)
        let strictText = PinningConfiguration.Text(data, maximumSize: .max, readingInOnePass: false)
        let allowed = Self.outcome { try PinningConfiguration(text: text, baseDirectory: baseDirectory) }
        let strict = Self.outcome { try PinningConfiguration(text: strictText, baseDirectory: baseDirectory) }
        return (
            text.wasReadInOnePass, allowed, strict, PinningConfiguration.filesNamed(in: text), PinningConfiguration.filesNamed(in: strictText)
        )
    }

    /// A configuration of up to `count` entries with ASCII keys and known field names only (the values still of any
    /// type, and the keys good or refused patterns), at most once each: the shape the one-pass reading takes.
    static func usualConfiguration(entries count: Int, using generator: inout SplitMix64) -> Value {
        let asciiKeys = Self.hostKeys.filter { key in key.utf8.allSatisfy { $0 < 0x80 } }
        let known = Self.fieldNames.filter { ConfigurationValidator.entryFields.contains($0) && $0 != "pins" }
        var seen: Set<String> = []
        var domains: [(String, Value)] = []
        for index in 0..<count {
            let key = Bool.random(using: &generator) ? asciiKeys.randomElement(using: &generator)! : "host-\(index).example"
            guard seen.insert(key).inserted else { continue }
            let twoPins = Value.array([.string(Self.pin("\(index) a")), .string(Self.pin("\(index) b"))])
            var fields: [(String, Value)] = [("pins", Int.random(in: 0..<4, using: &generator) == 0 ? Self.randomValue(field: "pins", using: &generator) : twoPins)]
            if Int.random(in: 0..<3, using: &generator) == 0 {
                for name in known.shuffled(using: &generator).prefix(Int.random(in: 1...2, using: &generator)) {
                    fields.append((name, Self.randomValue(field: name, using: &generator)))
                }
            }
            domains.append((key, .object(fields)))
        }
        var top: [(String, Value)] = [("version", .number("1")), ("domains", .object(domains))]
        if Int.random(in: 0..<6, using: &generator) == 0 { top.append(("unlistedHosts", .string("reject"))) }
        return .object(top)
    }

    @Test("generated configurations, written plainly and unusually: the one-pass reading loads what the strict reader's tree loads, or the same problems, and names the same files")
    func onePassAgainstTree() throws {
        var generator = SplitMix64(seed: 2929)
        var (onePassRead, onePassRefused, leftToStrict) = (0, 0, 0)
        for round in 0..<200 {
            let count = round % 20 == 0 ? 300 : Int.random(in: 1...10, using: &generator)
            // Every other round in the shape the one-pass reading takes (which the validator may still refuse).
            let value =
                round % 2 == 0
                ? Self.randomConfiguration(entries: count, using: &generator) : Self.usualConfiguration(entries: count, using: &generator)
            for text in [Self.plain(value), Self.unusual(value, using: &generator)] {
                let read = Self.bothReadings(Data(text.utf8))
                #expect(read.allowed == read.strict, "round \(round): \(text.prefix(300))")
                #expect(read.files == read.strictFiles, "round \(round): \(text.prefix(300))")
                switch (read.onePass, read.allowed) {
                case (true, .read): onePassRead += 1
                case (true, .refused): onePassRefused += 1
                case (false, _): leftToStrict += 1
                }
            }
        }
        // Each way was taken many times: read in one pass and loaded, read in one pass and refused by the validator,
        // and left to the strict reader.
        #expect(onePassRead >= 20 && onePassRefused >= 20 && leftToStrict >= 20, "\(onePassRead) \(onePassRefused) \(leftToStrict)")
    }

    @Test("what the one-pass reading decides itself: escaped keys (a repeated key that differs only in escaping is refused), escaped pins, host names outside ASCII, number forms, depth, UTF-8")
    func onePassDecisions() throws {
        let (a, b) = (Self.pin("a"), Self.pin("b"))
        let pins = "\"pins\": [\"\(a)\", \"\(b)\"]"
        let entry = "{\(pins)}"
        // More pins than the one-pass reading takes in a list (ConfigurationDocument's maximumPinsInOnePass, whose
        // repeat check is quadratic): the list is read as a value and checked by the validator.
        let many = (0...16).map { "\"\(Self.pin("many\($0)"))\"" }.joined(separator: ", ")
        /// A text, whether the one-pass reading takes it, and what loading it gives (nil: loaded; else words of the refusal).
        let cases: [(text: String, onePass: Bool, refusal: String?)] = [
            // The usual form, and keys with escapes that unescape to ASCII.
            ("{\"version\": 1, \"domains\": {\"a.example\": \(entry)}}", true, nil),
            ("{\"v\\u0065rsion\": 1, \"dom\\u0061ins\": {\"\\u0061.example\": {\"p\\u0069ns\": [\"\(a)\", \"\(b)\"]}}}", true, nil),
            // A key repeated, once escaped and once not: the same key, refused as the strict reader refuses it.
            ("{\"version\": 1, \"domains\": {\"hosts.example\": \(entry), \"ho\\u0073ts.example\": \(entry)}}", false, "repeated key"),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\(pins), \"p\\u0069ns\": [\"\(a)\", \"\(b)\"]}}}", false, "repeated key"),
            ("{\"version\": 1, \"dom\\u0061ins\": {}, \"domains\": {}}", false, "repeated key"),
            ("{\"version\": 1, \"version\": 1, \"domains\": {}}", false, "repeated key"),
            // Host names outside ASCII, raw or escaped: left to the strict reader, which compares their Unicode forms.
            ("{\"version\": 1, \"domains\": {\"b\u{FC}cher.example\": \(entry)}}", false, nil),
            ("{\"version\": 1, \"domains\": {\"b\\u00fccher.example\": \(entry)}}", false, nil),
            ("{\"version\": 1, \"domains\": {\"caf\u{E9}.example\": \(entry), \"cafe\u{301}.example\": \(entry)}}", false, "repeated key"),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\(pins), \"revocation\": {\"\u{212A}\": 1, \"K\": 1}}}}", false, "repeated key"),
            // Pins written otherwise (an escape, curl's form, a repeat, one of them not a string): read by the validator.
            ("{\"version\": 1, \"domains\": {\"a.example\": {\"pins\": [\"sha256\\/\(a.dropFirst(7))\", \"\(b)\"]}}}", true, nil),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\"pins\": [\"sha256//\(a.dropFirst(7))\", \"\(b)\"]}}}", true, nil),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\"pins\": [\"\(a)\", \"\(a)\"]}}}", true, "repeats pins[0]"),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\"pins\": [\"\(a)\", 7]}}}", true, "must be a string"),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\"pins\": [\"\(a)\"]}}}", true, "at least two distinct pins"),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\"pins\": [\"\(a)\"], \"enforce\": false}}}", true, nil),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\"pins\": []}}}", true, "at least two distinct pins"),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\"pins\": [\(many)]}}}", true, nil),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\"pins\": [\(many), \"\(Self.pin("many3"))\"]}}}", true, "repeats pins[3]"),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\"excludeSubdomainFromParentPolicy\": true, \(pins)}}}", true, "cannot be combined"),
            // Number forms: read by the strict reader's number reading either way.
            ("{\"version\": 1.0, \"domains\": {}}", true, nil),
            ("{\"version\": 10e-1, \"domains\": {}}", true, nil),
            ("{\"version\": -0, \"domains\": {}}", true, "unsupported version 0"),
            ("{\"version\": 01, \"domains\": {}}", false, "leading zero"),
            ("{\"version\": 1., \"domains\": {}}", false, "no digits after its decimal point"),
            ("{\"version\": NaN, \"domains\": {}}", false, "unexpected character"),
            // Depth, UTF-8, the text's end, fields unknown or of another type.
            ("{\"version\": 1, \"domains\": {\"a.example\": {\(pins), \"reportURIs\": \(String(repeating: "[", count: 61))\(String(repeating: "]", count: 61))}}}", true, "must be a string"),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\(pins), \"reportURIs\": \(String(repeating: "[", count: 62))\(String(repeating: "]", count: 62))}}}", false, "nested deeper than 64"),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\(pins), \"expires\": \"\\ud800\"}}}", false, "lone surrogate"),
            ("{\"version\": 1, \"domains\": {\"a.example\": \(entry)}} x", false, "more data after"),
            ("{\"version\": 1, \"domains\": {\"a.example\": \(entry),}}", false, "expected a string key"),
            ("{\"version\": 1, \"domains\": {\"a.example\": {\(pins), \"pin\": 1}}}", false, "unknown field"),
            ("{\"version\": 1, \"domains\": {}, \"extra\": 1}", false, "unknown field"),
            ("{\"version\": 1, \"domains\": []}", false, "must be an object"),
            ("{\"version\": 1, \"domains\": {\"a.example\": []}}", false, "an entry must be an object"),
            ("{\"version\": 1}", true, "missing; list the pinned hosts"),
            ("\u{FEFF}{\"version\": 1, \"domains\": {}}", false, nil),
        ]
        for (text, onePass, refusal) in cases {
            let read = Self.bothReadings(Data(text.utf8))
            #expect(read.onePass == onePass, "\(text.prefix(200))")
            #expect(read.allowed == read.strict, "\(text.prefix(200))")
            switch (read.allowed, refusal) {
            case (.read, nil): break
            case (.refused(let problems), let words?):
                #expect(problems.contains { $0.description.contains(words) }, "\(text.prefix(200)): \(problems)")
            default:
                Issue.record("\(text.prefix(200)): expected \(refusal ?? "to load"), got \(read.allowed)")
            }
        }
        // Invalid UTF-8 in a host key and in a value: refused in the strict reader's words.
        for bytes in [
            Array("{\"version\": 1, \"domains\": {\"a".utf8) + [0xC0, 0xAF] + Array(".example\": \(entry)}}".utf8),
            Array("{\"version\": 1, \"domains\": {\"a.example\": {\(pins), \"expires\": \"".utf8) + [0xED, 0xA0, 0x80] + Array("\"}}}".utf8),
        ] {
            let read = Self.bothReadings(Data(bytes))
            #expect(!read.onePass && read.allowed == read.strict)
            guard case .refused(let problems) = read.allowed else {
                Issue.record("invalid UTF-8 was read")
                continue
            }
            #expect(problems.contains { $0.description.contains("not valid UTF-8") }, "\(problems)")
        }
    }

    @Test("usual configurations with bytes changed, inserted or cut (JSON punctuation, escapes, quotes, bytes outside ASCII): both readings give the same entries or the same problems")
    func onePassAgainstTreeOnMutatedBytes() throws {
        var generator = SplitMix64(seed: 290)
        let pieces: [[UInt8]] = [
            Array("{".utf8), Array("}".utf8), Array("[".utf8), Array("]".utf8), Array(",".utf8), Array(":".utf8), Array("\"".utf8),
            Array("\\".utf8), Array("\\u0073".utf8), Array("\\ud800".utf8), Array(" ".utf8), Array("0".utf8), Array("1e".utf8),
            Array("-".utf8), Array("pins".utf8), Array("t".utf8), Array("null".utf8), [0x80], [0xC3, 0xA9], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0x00], [0x1F],
        ]
        var (same, onePass) = (0, 0)
        for round in 0..<1500 {
            var bytes = Array(Self.plain(Self.usualConfiguration(entries: Int.random(in: 1...4, using: &generator), using: &generator)).utf8)
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let position = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<4, using: &generator) {
                case 0: bytes.replaceSubrange(position...position, with: pieces.randomElement(using: &generator)!)
                case 1: bytes.insert(contentsOf: pieces.randomElement(using: &generator)!, at: position)
                case 2: bytes.remove(at: position)
                default: bytes.removeSubrange(position...)
                }
                if bytes.isEmpty { bytes = Array("{".utf8) }
            }
            let read = Self.bothReadings(Data(bytes))
            #expect(read.allowed == read.strict, "round \(round): \(String(decoding: bytes, as: UTF8.self).prefix(300))")
            #expect(read.files == read.strictFiles, "round \(round)")
            if read.allowed == read.strict { same += 1 }
            if read.onePass { onePass += 1 }
        }
        // Many mutated texts were still read in one pass (a change inside a value, an escape in a key), many not.
        #expect(same == 1500 && onePass >= 100 && onePass <= 1400, "\(same) same, \(onePass) read in one pass")
    }

    @Test("an entry's field names by their bytes are the validator's list, in its order")
    func entryFieldTable() {
        let fields = ConfigurationValidator.EntryFields.Field.allCases
        #expect(fields.map { ConfigurationValidator.entryFields[$0.rawValue] } == ConfigurationValidator.entryFields)
        for field in fields {
            let name = ConfigurationValidator.entryFields[field.rawValue]
            #expect(ConfigurationValidator.EntryFields.Field(named: Array(name.utf8)) == field)
            #expect(ConfigurationValidator.EntryFields.Field(named: Array(name.utf8.dropLast())) == nil)
        }
        #expect(Set(fields.map(\.bit)).count == fields.count)
    }

    // MARK: - An entry's fields in one pass

    @Test("an entry's fields found in one pass are what a search by each name finds, byte for byte; other keys are noticed")
    func entryFieldsInOnePass() throws {
        var generator = SplitMix64(seed: 7)
        let names = ConfigurationValidator.entryFields
        let others = ["pin", "Pins", "pins\u{301}", "\u{212A}eys", "anchors ", "enforc", "reportURIS", "", "\u{E9}", String(repeating: "x", count: 32)]
        for _ in 0..<500 {
            var members: [(String, TUFJSON)] = []
            for name in (names + others).shuffled(using: &generator).prefix(Int.random(in: 0...6, using: &generator)) {
                members.append((name, .string(name + "!")))
            }
            let object = try #require(TUFJSONObject(members))
            let found = ConfigurationValidator.EntryFields(object)
            #expect(found.anchors == object["anchors"] && found.anchorsOnly == object["anchorsOnly"] && found.clientIdentity == object["clientIdentity"])
            #expect(found.enforce == object["enforce"] && found.expires == object["expires"] && found.includeSubdomains == object["includeSubdomains"])
            #expect(found.pins == object["pins"] && found.reportURIs == object["reportURIs"] && found.revocation == object["revocation"])
            #expect(found.excludeSubdomainFromParentPolicy == object["excludeSubdomainFromParentPolicy"])
            let hasOther = object.keys.contains { key in !names.contains { $0.utf8.elementsEqual(key.utf8) } }
            #expect(found.hasOtherKey == hasOther, "\(object.keys)")
        }
    }

    // MARK: - Keys compared by their bytes

    @Test("keys compared with memcmp order and match as their bytes do element by element; look-ups find exactly the byte-equal key")
    func keyComparison() throws {
        var generator = SplitMix64(seed: 11)
        let pieces = ["", "a", "b", "ab", "\u{E9}", "e\u{301}", "\u{212A}", "K", "\u{1F600}", "\u{0}", "\u{7F}", "\u{80}", "zz", "host-1", "host-10"]
        var keys: [String] = []
        for _ in 0..<300 {
            keys.append((0..<Int.random(in: 0...3, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined())
        }
        // Long strings too (past the inline small-string form).
        keys += keys.prefix(40).map { String(repeating: "long-prefix.", count: 3) + $0 }
        for left in keys.prefix(120) {
            for right in keys {
                let order = TUFJSONObject.compare(left, right)
                let equal = left.utf8.elementsEqual(right.utf8)
                let before = left.utf8.lexicographicallyPrecedes(right.utf8)
                #expect((order == 0) == equal && (order < 0) == before, "\(left.debugDescription) \(right.debugDescription)")
            }
        }
        var unique: [String] = []
        for key in keys where !unique.contains(where: { $0.utf8.elementsEqual(key.utf8) }) { unique.append(key) }
        let object = try #require(TUFJSONObject(unique.map { ($0, TUFJSON.string($0)) }))
        #expect(object.hasNonASCIIKey == unique.contains { $0.utf8.contains { $0 >= 0x80 } })
        for key in keys + ["missing", "e", "\u{E9}x"] {
            let expected = object.members.first { $0.key.utf8.elementsEqual(key.utf8) }?.value
            #expect(object[key] == expected, "\(key.debugDescription)")
        }
        #expect(TUFJSONObject([("a", .null), ("a", .bool(true))]) == nil)
        #expect(TUFJSONObject([("\u{E9}", .null), ("e\u{301}", .null)])?.count == 2)
    }

    @Test("the reader notes a key outside ASCII at any depth, and only then")
    func readerNotesKeys() throws {
        let cases: [(String, Bool)] = [
            (#"{"a": {"b": [{"c": 1}]}}"#, false), (#"{"a": {"b": [{"\u00e9": 1}]}}"#, true), (#"{"a": "\u00e9"}"#, false),
            ("{\"a\": [{\"\u{E9}\": 1}]}", true), (#"["\u00e9", {"x": {}}]"#, false), (#"{"\ud83d\ude00": null}"#, true),
        ]
        for (text, expected) in cases {
            let read = try TUFJSON.parseNotingKeys(Array(text.utf8))
            #expect(read.hasNonASCIIKey == expected, "\(text)")
            #expect(read.value == (try TUFJSON.parse(Array(text.utf8))))
        }
    }

    // MARK: - Pins decoded over their bytes

    @Test("a pin with any one character changed, after sha256/ or bare, reads as Foundation's base64 decoder reads its body when that is canonical, or is refused")
    func pinDecoderAgainstFoundation() throws {
        var generator = SplitMix64(seed: 5)
        let replacements: [Character] = Array("AZaz09+/=-_.*~ ;é\u{0}") + ["\u{1F600}"]
        var (decoded, refusedCount) = (0, 0)
        for _ in 0..<300 {
            let digest = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var body = Array(Data(digest).base64EncodedString())
            #expect(try Pin("sha256/" + String(body)) == Pin(sha256Digest: digest))
            #expect(try Pin(String(body)) == Pin(sha256Digest: digest), "bare")
            let position = Int.random(in: 0..<body.count, using: &generator)
            body[position] = replacements.randomElement(using: &generator)!
            let text = String(body)
            // The general reading of such a text: no spaces at the ends to trim (a space inside is not base64),
            // so its body is what Foundation decodes.
            guard !text.hasPrefix(" "), !text.hasSuffix(" "), !text.contains(";"), !text.hasPrefix("/") else { continue }
            if let foundation = Data(base64Encoded: text), foundation.count == 32, foundation.base64EncodedString() == text {
                #expect(try Pin("sha256/" + text) == Pin(sha256Digest: Array(foundation)), "\(text)")
                #expect(try Pin(text) == Pin(sha256Digest: Array(foundation)), "bare \(text)")
                decoded += 1
            } else if let foundation = Data(base64Encoded: text), foundation.count == 32 {
                // Foundation reads it, but it is not the digest's one Base64 text (bits past the digest set): refused,
                // naming the text meant (NU3), by the shortcut and the general reading alike.
                let meant = "did you mean sha256/\(foundation.base64EncodedString())?"
                let prefixed = #expect(throws: PinError.self, "\(text)") { try Pin("sha256/" + text) }
                let bare = #expect(throws: PinError.self, "bare \(text)") { try Pin(text) }
                #expect(prefixed?.description.contains(meant) == true && bare?.description.contains(meant) == true, "\(text)")
                refusedCount += 1
            } else {
                #expect(throws: PinError.self, "\(text)") { try Pin("sha256/" + text) }
                #expect(throws: PinError.self, "bare \(text)") { try Pin(text) }
                refusedCount += 1
            }
        }
        #expect(decoded > 20 && refusedCount > 20, "\(decoded) decoded, \(refusedCount) refused")
    }

    @Test("a pin's digest, order and hash are its bytes'")
    func pinStorage() throws {
        var generator = SplitMix64(seed: 3)
        var pins: [(Pin, [UInt8])] = []
        for _ in 0..<200 {
            var digest = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            // Digests that differ only late, to exercise every word of the comparison.
            if let previous = pins.last?.1, Bool.random(using: &generator) {
                digest = previous
                digest[Int.random(in: 0..<32, using: &generator)] &+= 1
            }
            let pin = try Pin(sha256Digest: digest)
            #expect(pin.sha256 == digest && Pin(subjectPublicKeyInfoDER: [1, 2, 3]).sha256 == Array(SHA256.hash(data: [1, 2, 3] as [UInt8])))
            pins.append((pin, digest))
        }
        for (left, leftBytes) in pins {
            for (right, rightBytes) in pins.prefix(50) {
                #expect((left == right) == (leftBytes == rightBytes))
                #expect((left < right) == leftBytes.lexicographicallyPrecedes(rightBytes))
                if leftBytes == rightBytes { #expect(left.hashValue == right.hashValue) }
            }
        }
        #expect(Set(pins.map(\.0)).count == Set(pins.map(\.1)).count)
    }

    // MARK: - Host names and addresses

    /// `inet_pton` asked directly, as `IPAddressText.bytes` was before its pre-check.
    static func addressByInetPton(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    @Test("an address is read as inet_pton reads it, whatever the text (letters past f, NUL, %, spaces, text outside ASCII)")
    func addressPreCheck() {
        var generator = SplitMix64(seed: 13)
        let pieces = ["1", "0", "255", "256", ".", ":", "::", "a", "F", "g", "ffff", "%", " ", "\u{0}", "\u{E9}", "-", "10.0.0.1", "::1", "fe80::", "x"]
        var addresses = 0
        var texts = ["10.0.0.1", "::1", "FE80::1", "::ffff:10.0.0.2", "1.2.3.4\u{0}junk", "::1\u{0}", "host-1.example", "", "1.2.3", "01.2.3.4"]
        for _ in 0..<3000 {
            texts.append((0..<Int.random(in: 1...6, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined())
        }
        for text in texts {
            let expected = Self.addressByInetPton(text)
            #expect(IPAddressText.bytes(text) == expected, "\(text.debugDescription)")
            if expected != nil { addresses += 1 }
        }
        #expect(addresses > 50, "\(addresses)")
    }

    @Test("an ASCII host name is its lower-cased self, copied only when it has an upper-case letter")
    func asciiHostNames() throws {
        var generator = SplitMix64(seed: 17)
        let alphabet = Array("abcXYZ019-._*:[]")
        for _ in 0..<500 {
            let name = String((0..<Int.random(in: 0...20, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
            #expect(try IDNA.toASCII(name) == name.lowercased())
        }
    }

    // MARK: - Overlapping patterns

    @Test("entries that cover the same hosts are found by the host index as a table of patterns finds them, in order")
    func overlapsFromIndex() throws {
        var generator = SplitMix64(seed: 19)
        let keys = [
            "api.example.com", "API.example.com.", "api.example.com.", "*.example.com", "*.EXAMPLE.com", "**.example.com", "example.com", "10.0.0.1",
            "b\u{FC}cher.example", "xn--bcher-kva.example", "**.b\u{FC}cher.example", "*.xn--bcher-kva.example", "::1", "0:0:0:0:0:0:0:1",
        ]
        let (a, b) = (Self.pin("a"), Self.pin("b"))
        for _ in 0..<200 {
            var domains: [(String, TUFJSON)] = []
            for key in keys.shuffled(using: &generator).prefix(Int.random(in: 1...keys.count, using: &generator)) {
                var fields: [(String, TUFJSON)] = [("pins", .array([.string(a), .string(b)]))]
                if Bool.random(using: &generator) { fields.append(("includeSubdomains", .bool(true))) }
                domains.append((key, .object(try #require(TUFJSONObject(fields)))))
            }
            let domainsObject = try #require(TUFJSONObject(domains))
            let root = TUFJSON.object(try #require(TUFJSONObject([("version", .integer("1")), ("domains", .object(domainsObject))])))
            var validator = ConfigurationValidator(baseDirectory: "/")
            let validated = validator.validate(root)
            let configuration = try #require(validated)
            let found = validator.problems.filter { $0.message.contains("covers exactly the same hosts") }
            // The table the validator used before the index: the first key of each pattern, in entry order.
            var seen: [HostPattern.Kind: String] = [:]
            var expected: [PinningConfigurationError.Problem] = []
            for entry in configuration.entries {
                if let other = seen[entry.pattern.kind] {
                    expected.append(.init(.invalidPattern, entry: entry.key, field: nil, "covers exactly the same hosts as \"\(other)\"; keep one entry"))
                } else {
                    seen[entry.pattern.kind] = entry.key
                }
            }
            #expect(found == expected)
        }
    }
}
