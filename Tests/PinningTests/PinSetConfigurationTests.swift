import Crypto
import Foundation
import Pinning
import Testing

/// Configurations the size of a fleet's pin set (issue 29: 10,000 hosts verified and applied in 100 ms): the pin-set
/// cap, the strict JSON reader they are read with, the host index they are searched with, and the pin reader's
/// shortcut, each held to the answers of the general path.
@Suite("Pin-set-sized configurations: cap, strict reading, host index")
struct PinSetConfigurationTests {
    static func pin(_ seed: String) -> String {
        "sha256/" + Data(SHA256.hash(data: Data(seed.utf8))).base64EncodedString()
    }

    /// `hosts` hosts `host-N.example` with two pins each, as `pinning bench pinset` writes them.
    static func fleet(_ hosts: Int) -> Data {
        var entries: [String] = []
        for index in 0..<hosts {
            entries.append("\"host-\(index).example\": {\"pins\": [\"\(Self.pin("\(index) a"))\", \"\(Self.pin("\(index) b"))\"]}")
        }
        return Data(("{\"version\": 1, \"domains\": {\n" + entries.joined(separator: ",\n") + "\n}}\n").utf8)
    }

    @Test("10,000 hosts are over a configuration file's 1 MiB but within a pin set's 16 MiB; over 16 MiB is refused unread")
    func pinSetCap() throws {
        let text = Self.fleet(10_000)
        #expect(text.count > PinningConfiguration.maximumFileSize && text.count < PinningConfiguration.maximumPinSetSize)
        let refused = #expect(throws: PinningConfigurationError.self) { try PinningConfiguration(data: text, baseDirectory: "/") }
        #expect(refused?.problems.map(\.kind) == [.fileTooLarge] && refused?.description.contains("1048576 bytes (1 MiB)") == true)

        let configuration = try PinningConfiguration(data: text, baseDirectory: "/", maximumSize: PinningConfiguration.maximumPinSetSize)
        #expect(configuration.entries.count == 10_000)
        #expect(configuration.entry(forHost: "HOST-9999.example.")?.pins.map(\.description) == [Self.pin("9999 a"), Self.pin("9999 b")])
        #expect(configuration.entry(forHost: "host-10000.example") == nil)

        let huge = Data(repeating: UInt8(ascii: " "), count: PinningConfiguration.maximumPinSetSize + 1)
        let tooLarge = #expect(throws: PinningConfigurationError.self) {
            try PinningConfiguration(data: huge, baseDirectory: "/", maximumSize: PinningConfiguration.maximumPinSetSize)
        }
        #expect(tooLarge?.description.contains("larger than 16777216 bytes (16 MiB), the cap of a pin set") == true, "\(String(describing: tooLarge))")
    }

    @Test("the host index finds exactly the entry a search of every entry finds, for exact, *., **., includeSubdomains, IP, excluded, IDN and odd names")
    func indexAgreesWithSearch() throws {
        let (a, b) = (Self.pin("a"), Self.pin("b"))
        let pins = "{\"pins\": [\"\(a)\", \"\(b)\"]}"
        let json = """
            {"version": 1, "domains": {
              "api.example.com": \(pins),
              "*.example.com": \(pins),
              "**.example.com": \(pins),
              "*.cdn.example.com": \(pins),
              "deep.cdn.example.com": {"pins": ["\(a)", "\(b)"], "includeSubdomains": true},
              "**.fleet.internal": \(pins),
              "*.edge.fleet.internal": \(pins),
              "excluded.fleet.internal": {"excludeSubdomainFromParentPolicy": true},
              "Upper.Example.ORG.": \(pins),
              "bücher.example": {"pins": ["\(a)", "\(b)"], "includeSubdomains": true},
              "10.0.0.1": \(pins),
              "::1": \(pins),
              "under_score.example.net": \(pins)
            }}
            """
        let configuration = try PinningConfiguration(data: Data(json.utf8), baseDirectory: "/")
        let labels = ["", "api.", "x.", "y.x.", "cdn.", "a.cdn.", "b.a.cdn.", "deep.cdn.", "z.deep.cdn.", "edge.", "n.edge.", "m.n.edge.", "excluded.", "q.excluded."]
        let suffixes = ["example.com", "fleet.internal", "upper.example.org", "bücher.example", "xn--bcher-kva.example", "example.net", "com", "internal", ""]
        var hosts: [String] = []
        for label in labels {
            for suffix in suffixes {
                let host = label + suffix
                hosts += [host, host.uppercased(), host + ".", "." + host, host + ".."]
            }
        }
        hosts += [
            "10.0.0.1", "[::1]", "::1", "0:0:0:0:0:0:0:1", "10.0.0.1.", "under_score.example.net", "☃.fleet.internal", "a.☃.example.com",
            "e\u{301}.example.com", "\u{301}.example.com", "a.\u{301}example.com", "api.example.com\r\n", "", ".", "..",
        ]
        var matched = 0
        for host in hosts {
            let indexed = configuration.entry(forHost: host)
            #expect(indexed?.key == configuration.entryTestingEveryEntry(forHost: host)?.key, "\(host.debugDescription)")
            if indexed != nil { matched += 1 }
        }
        // The comparison covered matches of every kind, not only misses.
        #expect(matched > hosts.count / 3, "\(matched) of \(hosts.count)")
        #expect(configuration.entry(forHost: "a.b.cdn.example.com")?.key == "**.example.com")
        #expect(configuration.entry(forHost: "x.cdn.example.com")?.key == "*.cdn.example.com")
        #expect(configuration.entry(forHost: "z.deep.cdn.example.com")?.key == "deep.cdn.example.com")
    }

    @Test("the strict reader: a repeated key (byte for byte, or in two Unicode forms) is refused; a UTF-8 byte-order mark and UTF-16 text are read")
    func strictReading() throws {
        let (a, b) = (Self.pin("a"), Self.pin("b"))
        let entry = "{\"pins\": [\"\(a)\", \"\(b)\"]}"
        let repeated = #expect(throws: PinningConfigurationError.self) {
            try PinningConfiguration(data: Data("{\"version\": 1, \"domains\": {\"a.example\": \(entry), \"a.example\": {\"pins\": [\"\(a)\"]}}}".utf8), baseDirectory: "/")
        }
        #expect(repeated?.problems.map(\.kind) == [.invalidJSON] && repeated?.description.contains("repeated key") == true, "\(String(describing: repeated))")
        let forms = #expect(throws: PinningConfigurationError.self) {
            try PinningConfiguration(data: Data("{\"version\": 1, \"domains\": {\"caf\u{E9}.example\": \(entry), \"cafe\u{301}.example\": \(entry)}}".utf8), baseDirectory: "/")
        }
        #expect(forms?.description.contains("repeated key") == true, "\(String(describing: forms))")

        let text = "{\"version\": 1, \"domains\": {\"a.example\": \(entry)}}"
        let plain = try PinningConfiguration(data: Data(text.utf8), baseDirectory: "/")
        for data in [Data([0xEF, 0xBB, 0xBF] + Array(text.utf8)), text.data(using: .utf16)!, text.data(using: .utf16BigEndian)!, text.data(using: .utf16LittleEndian)!] {
            let read = try PinningConfiguration(data: data, baseDirectory: "/")
            #expect(read.entries.map(\.key) == plain.entries.map(\.key) && read.entries.first?.pins == plain.entries.first?.pins)
        }
    }

    @Test("a pin in the usual form reads as the general reading does: every digest, either prefix case, curl's form, spaces")
    func pinShortcut() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let digest = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let base64 = Data(digest).base64EncodedString()
            let expected = try Pin(sha256Digest: digest)
            #expect(try Pin("sha256/" + base64) == expected)
            #expect(try Pin(" SHA256/" + base64 + " ") == expected)
            #expect(try Pin("sha256//" + base64) == expected)
        }
        // A digest whose base64 starts with "/" ("sha256//…" is then ours, 51 characters, not curl's form).
        var digest = [UInt8](repeating: 0, count: 32)
        digest[0] = 0xFC
        let slashed = Data(digest).base64EncodedString()
        #expect(slashed.hasPrefix("/"))
        #expect(try Pin("sha256/" + slashed) == Pin(sha256Digest: digest))
        #expect(throws: PinError.self) { try Pin("sha256/" + String(repeating: "*", count: 44)) }
        #expect(throws: PinError.self) { try Pin("sha256/" + String(Data(digest + [0]).base64EncodedString().prefix(44))) }
    }

    @Test("an ASCII key and a key outside ASCII that Swift reads as the same string (U+212A KELVIN SIGN is K) are a repeated key; a key outside ASCII alone is read")
    func keyFormsAcrossASCII() throws {
        let (a, b) = (Self.pin("a"), Self.pin("b"))
        let entry = "{\"pins\": [\"\(a)\", \"\(b)\"]}"
        let kelvin = #expect(throws: PinningConfigurationError.self) {
            try PinningConfiguration(data: Data("{\"version\": 1, \"domains\": {\"K.example\": \(entry), \"\u{212A}.example\": \(entry)}}".utf8), baseDirectory: "/")
        }
        #expect(kelvin?.problems.map(\.kind) == [.invalidJSON] && kelvin?.description.contains("repeated key") == true, "\(String(describing: kelvin))")
        let read = try PinningConfiguration(data: Data("{\"version\": 1, \"domains\": {\"b\u{FC}cher.example\": \(entry), \"a.example\": \(entry)}}".utf8), baseDirectory: "/")
        #expect(read.entries.map(\.key) == ["a.example", "b\u{FC}cher.example"])
    }

    @Test("a text read once (PinningConfiguration.Text) names the same files and loads to the same configuration, or the same refusal, as the bytes")
    func textReadOnce() throws {
        let (a, b) = (Self.pin("a"), Self.pin("b"))
        let good = Data(
            "{\"version\": 1, \"domains\": {\"b.example\": {\"pins\": [\"\(a)\", \"\(b)\"], \"anchors\": [\"x.pem\"]}, \"a.example\": {\"pins\": [\"\(a)\", \"\(b)\"], \"revocation\": {\"crls\": [\"y.crl\"]}}}}"
                .utf8)
        #expect(PinningConfiguration.filesNamed(in: PinningConfiguration.Text(good, maximumSize: .max)) == ["y.crl", "x.pem"])
        #expect(PinningConfiguration.filesNamed(inJSON: good) == ["y.crl", "x.pem"])
        let fleet = Self.fleet(50)
        let viaText = try PinningConfiguration(text: PinningConfiguration.Text(fleet, maximumSize: .max), baseDirectory: "/")
        let viaData = try PinningConfiguration(data: fleet, baseDirectory: "/")
        #expect(viaText.entries == viaData.entries)
        for (bytes, maximum) in [(Data("{\"version\": 1, \"domains\": {".utf8), 100), (fleet, 100), (Data("[]".utf8), 100)] {
            let fromData = #expect(throws: PinningConfigurationError.self) { try PinningConfiguration(data: bytes, baseDirectory: "/", origin: "o", maximumSize: maximum) }
            let fromText = #expect(throws: PinningConfigurationError.self) {
                try PinningConfiguration(text: PinningConfiguration.Text(bytes, maximumSize: maximum), baseDirectory: "/", origin: "o")
            }
            #expect(fromData?.description == fromText?.description && fromData != nil)
            #expect(PinningConfiguration.filesNamed(in: PinningConfiguration.Text(bytes, maximumSize: maximum)).isEmpty)
        }
    }

    // Until NU3 such a pin read as Foundation's decoder reads it (the digest with those bits dropped), and was then
    // shown, reported and exported as the canonical text, which the user never wrote.
    @Test("a pin whose base64 is not canonical (bits set past the digest, no padding) is refused, naming the canonical text")
    func pinShortcutNonCanonical() throws {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        for _ in 0..<200 {
            let digest = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var base64 = Array(Data(digest).base64EncodedString())
            // The last character before "=" carries 2 bits past the digest: set them.
            base64[42] = alphabet[(alphabet.firstIndex(of: base64[42])! | Int.random(in: 1...3, using: &generator)) % 64]
            for text in [String(base64), String(base64.dropLast())] {
                let foundation = Data(base64Encoded: text).map { Array($0) }
                if let foundation, foundation.count == 32 {
                    let meant = "not canonical Base64; did you mean sha256/\(Data(foundation).base64EncodedString())?"
                    let refused = #expect(throws: PinError.self, "\(text)") { try Pin("sha256/" + text) }
                    #expect(refused?.description.contains(meant) == true, "\(String(describing: refused))")
                } else {
                    #expect(throws: PinError.self, "\(text)") { try Pin("sha256/" + text) }
                }
            }
        }
    }
}
