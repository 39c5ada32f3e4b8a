import Testing

@testable import Pinning

/// TUF messages quote a repository's text (role names, types, versions) by VisibleText's rules.
@Suite("TUF messages: a repository's text escaped")
struct TUFPrintableTests {
    @Test("TUF messages quote a repository's text by the same rules, at most 200 characters (bidi and zero-width were raw before)")
    func tufPrintable() {
        #expect(TUFError.printable("role\u{1B}[31m\u{202E}\u{200B}x\\") == "role\\u{1b}[31m\\u{202e}\\u{200b}x\\u{5c}")
        #expect(TUFError.printable("délégué") == "délégué")
        #expect(TUFError.printable(String(repeating: "a", count: 250)) == String(repeating: "a", count: 200) + "…")
        let error = TUFError(role: "tar\u{202E}gets", rule: .malformed, "x")
        #expect(error.description == "tar\\u{202e}gets: x")
    }

    @Test("a key id is the repository's text too: cut to 12 characters, then escaped (a long one was cut but left raw)")
    func keyIDs() {
        #expect(TUFError.short("\u{1B}[2J\u{1B}]0;owned\u{7}\r\nFAKE\u{202E}") == "\\u{1b}[2J\\u{1b}]0;owne…")
        #expect(TUFError.short("0123456789abcdef") == "0123456789ab…")
        #expect(TUFError.short("0123456789ab") == "0123456789ab")
    }

    @Test("a repository's text quoted in a message cannot close the quote: its own \" is \\u{22}")
    func quotedInMessage() throws {
        // A `_type` that ends the quote and writes words of ours after it: "… _type is "x", not "root", not "root"".
        let document = #"{"signed": {"_type": "x\", not \"root", "spec_version": "1.0.31", "version": 1, "expires": "2030-01-01T00:00:00Z"}, "signatures": []}"#
        let error = try #require(throws: TUFError.self) {
            _ = try TUFEnvelope(bytes: Array(document.utf8), role: "root", type: "root")
        }
        #expect(error.rule == .wrongType)
        #expect(error.description == #"root: the metadata's _type is "x\u{22}, not \u{22}root", not "root""#, "\(error)")
    }
}
