import Foundation
import Pinning
import PinningTestSupport
import Testing

/// Text a peer wrote (a certificate's names, a server's status line, body and redirect, a report collector's
/// answer) never reaches the terminal raw: control characters (C0, DEL, C1), format characters (bidi controls,
/// zero-width, U+FEFF), the line and paragraph separators, and a backslash that would read as an escape, are shown
/// as `\u{…}` (VisibleText) in text, and as `\uXXXX` escapes in JSON (the values unchanged); letters such as é and 例 are kept.
@Suite("Hostile peer text on the CLI's stdout and stderr")
struct HostileTextCLITests {
    static let hostileName = "evil\u{1B}[2J owned\u{7}\r\nFAKE\u{202E}gpj.exe\u{200B}\u{85}例é"
    static let shownName = "evil\\u{1b}[2J owned\\u{7}\\u{d}\\u{a}FAKE\\u{202e}gpj.exe\\u{200b}\\u{85}例é"

    /// Whether `text` holds a character that acts on a terminal instead of showing (line feeds aside, which
    /// separate the report's own lines). Written out here rather than taken from VisibleText, so that the test
    /// does not judge the escaper by itself.
    static func hasHidden(_ text: String) -> Bool {
        text.unicodeScalars.contains { scalar in
            let category = scalar.properties.generalCategory
            return scalar != "\n" && (category == .control || category == .format || category == .lineSeparator || category == .paragraphSeparator)
        }
    }

    @Test("evaluate (the report check --verbose prints too): certificate names escaped in text; in JSON escaped as \\uXXXX, the names unchanged")
    func certificateNames() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-hostile-text")
        defer { directory.remove() }
        let root = try TestPKI.root("Root\u{1B}[31m\u{202E}")
        let leaf = try TestPKI.leaf(Self.hostileName, issuer: root, dnsNames: ["api.test"])
        let chain = try directory.write("chain.pem", leaf.certificatePEM + root.certificatePEM)
        let roots = try directory.write("root.pem", root.certificatePEM)

        let text = try await CLI.run(["evaluate", "--chain", chain, "--roots", roots, "--host", "api.test"], in: directory)
        #expect(text.status == 0, "\(text)")
        #expect(!Self.hasHidden(text.stdout), "\(text)")
        #expect(text.stdout.contains(Self.shownName), "\(text)")
        #expect(text.stdout.contains("Root\\u{1b}[31m\\u{202e}"), "\(text)")

        let json = try await CLI.run(["evaluate", "--chain", chain, "--roots", roots, "--host", "api.test", "--json"], in: directory)
        #expect(json.status == 0, "\(json)")
        #expect(!Self.hasHidden(json.stdout), "\(json)")
        #expect(json.stdout.contains(#"gpj.exe\u200b\u0085例é"#), "\(json)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let presented = try #require(object["presentedChain"] as? [[String: Any]])
        let subject = try #require(presented.first?["subject"] as? String)
        #expect(subject.contains(Self.hostileName), "the JSON value is the certificate's name, unchanged: \(subject)")
    }

    @Test("inspect: a certificate's subject, issuer and subjectAltName escaped in text; in JSON as \\uXXXX, the values unchanged")
    func inspectNames() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-hostile-inspect")
        defer { directory.remove() }
        let root = try TestPKI.root("Root\u{1B}[31m\u{202E}")
        // An IA5String may hold ESC: a dNSName a CA would never issue, but a file can hold.
        let leaf = try TestPKI.leaf(Self.hostileName, issuer: root, dnsNames: ["api.test", "x\u{1B}]0;t\u{7}.test"])
        let file = try directory.write("leaf.pem", leaf.certificatePEM)

        let text = try await CLI.run(["inspect", file], in: directory)
        #expect(text.status == 0, "\(text)")
        #expect(!Self.hasHidden(text.stdout), "\(text)")
        #expect(text.stdout.contains(Self.shownName), "\(text)")
        #expect(text.stdout.contains("Root\\u{1b}[31m\\u{202e}"), "\(text)")
        #expect(text.stdout.contains("x\\u{1b}]0;t\\u{7}.test"), "\(text)")

        let json = try await CLI.run(["inspect", file, "--json"], in: directory)
        #expect(json.status == 0, "\(json)")
        #expect(!Self.hasHidden(json.stdout), "\(json)")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        let certificate = try #require(entries.first?["certificate"] as? [String: Any])
        let subject = try #require(certificate["subject"] as? String)
        #expect(subject.contains(Self.hostileName), "the JSON value is the certificate's name, unchanged: \(subject)")

        // pins prints each certificate's subject beside its pin.
        let pins = try await CLI.run(["pins", file], in: directory)
        #expect(pins.status == 0, "\(pins)")
        #expect(!Self.hasHidden(pins.stdout) && !Self.hasHidden(pins.stderr), "\(pins)")
        #expect(pins.stdout.contains(Self.shownName), "\(pins)")
    }

    @Test("check's text: the server's redirect, status line reason, body and an error quoting it are escaped; the body keeps its line feeds")
    func checkText() {
        let text = InProcessCLI.checkText(
            url: "https://api.test/", finalURL: "https://api.test/\u{202E}next", status: 418, reasonPhrase: "I'm\u{1B}[2J a teapot\r",
            body: "line 1\u{1B}[31m\nline 2\u{202E}é\n", error: "api.test: the server said \u{9B}31m")
        #expect(
            text == """
                GET https://api.test/
                redirected to https://api.test/\\u{202e}next
                HTTP 418 I'm\\u{1b}[2J a teapot\\u{d}
                line 1\\u{1b}[31m
                line 2\\u{202e}é
                error: api.test: the server said \\u{9b}31m
                """)
    }

    @Test("check's text: a CRLF body reads as lines, as it did before bodies were escaped; a lone CR inside a line is escaped")
    func checkTextCRLF() {
        let text = InProcessCLI.checkText(
            url: "https://api.test/", finalURL: "https://api.test/", status: 200, reasonPhrase: "OK",
            body: "line 1\r\nline\r2\u{1B}\r\n\r\nlast\r\n", error: nil)
        #expect(
            text == """
                GET https://api.test/
                HTTP 200 OK
                line 1
                line\\u{d}2\\u{1b}

                last
                """)
    }

    @Test("proxy's JSON log lines: DEL, C1 and bidi controls as \\uXXXX, the values unchanged")
    func proxyJSON() throws {
        let line = InProcessCLI.proxyJSONLine(["event": "report", "message": "untrusted: CN=a\u{1B}\u{7F}\u{9B}\u{202E}é"])
        #expect(line == #"{"event":"report","message":"untrusted: CN=a\u001b\u007f\u009b\u202eé"}"#)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object["message"] == "untrusted: CN=a\u{1B}\u{7F}\u{9B}\u{202E}é")
    }
}
