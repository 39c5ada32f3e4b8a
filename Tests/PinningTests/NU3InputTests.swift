import Foundation
import Testing

@testable import Pinning

/// New-user trial 3 (NU3), the core's part: what a configuration's version says when it is not 1, and pins whose
/// Base64 is not the one text of their digest.
@Suite("NU3: configuration version words, canonical Base64 pins")
struct NU3InputTests {
    static let pinA = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    static let pinB = "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="

    static func problems(_ json: String) -> String {
        do {
            _ = try PinningConfiguration(data: Data(json.utf8), baseDirectory: "/")
            return "(accepted)"
        } catch {
            return error.description
        }
    }

    @Test(
        "a version that is not 1 is named as the file writes it",
        arguments: [
            ("1e400", "unsupported version 1e400; this library reads version 1"),  // was "inf"
            ("-1e400", "unsupported version -1e400; this library reads version 1"),
            ("1.5", "unsupported version 1.5 (not a whole number); this library reads version 1"),
            ("2", "unsupported version 2; this library reads version 1"),
            ("2.0", "unsupported version 2; this library reads version 1"),
            ("1e20", "unsupported version 1e20; this library reads version 1"),
        ])
    func version(_ written: String, _ expected: String) {
        let text = Self.problems("{\"version\": \(written), \"domains\": {}}")
        #expect(text.contains(expected), "\(text)")
        #expect(!text.contains("inf;"), "\(text)")
    }

    /// 43 × `B` then `=`: the last `B` carries 2 bits past the digest, which Foundation's decoder drops, so it read
    /// as the digest whose one Base64 text ends `…BBBA=` and was shown, reported and exported as that.
    static let nonCanonical = "sha256/" + String(repeating: "B", count: 43) + "="
    static let canonical = "sha256/" + String(repeating: "B", count: 42) + "A="

    @Test("a pin in non-canonical Base64 is refused, naming the canonical text")
    func nonCanonicalPin() throws {
        for text in [Self.nonCanonical, "sha256//" + String(repeating: "B", count: 43) + "=", String(repeating: "B", count: 43) + "=", " \(Self.nonCanonical) "] {
            do {
                let pin = try Pin(text)
                Issue.record("\(text) read as \(pin)")
            } catch {
                #expect(error.description.contains("not canonical Base64; did you mean \(Self.canonical)?"), "\(error.description)")
            }
        }
        // The canonical text, and every other canonical form, still read as the same pin.
        #expect(try Pin(Self.canonical).description == Self.canonical)
        #expect(try Pin(String(Self.canonical.dropFirst(7))) == Pin(Self.canonical))  // bare
        #expect(try Pin(" \(Self.canonical) ").description == Self.canonical)  // trimmed
        #expect(try Pin(Self.pinA).description == Self.pinA)
        #expect(try Pin("sha256//" + Self.pinB.dropFirst(7)).description == Self.pinB)  // curl's sha256//
    }

    @Test("a configuration with a non-canonical pin is refused, naming the entry and the text meant")
    func nonCanonicalPinInConfiguration() {
        let text = Self.problems(
            "{\"version\": 1, \"domains\": {\"api.example.com\": {\"pins\": [\"\(Self.nonCanonical)\", \"\(Self.pinA)\"]}}}")
        #expect(text.contains("domains[\"api.example.com\"].pins[0]"), "\(text)")
        #expect(text.contains("not canonical Base64; did you mean \(Self.canonical)?"), "\(text)")
    }
}
