/// Text someone else wrote, made visible where it is shown to a person: a terminal (the CLI's stdout and stderr), a
/// log line, the collector's dashboard, an error message. The one escaper for display in this package; the
/// JavaScript and source-code escapers (the PAC file, the platform formats) have other purposes and rules.
///
/// A peer's strings (a certificate's names, a server's status line, a report collector's answer, a TUF repository's
/// role names, a file name) can carry characters that act instead of showing: ESC starts a terminal escape sequence,
/// CR and LF forge lines, U+202E (RIGHT-TO-LEFT OVERRIDE) and the other bidi controls reorder the text around them,
/// zero-width characters make `exam\u{200B}ple.com` look like `example.com`. Each control character (general
/// category Cc: C0, DEL, C1), each format character (Cf: the bidi controls, zero-width characters, U+FEFF, the soft
/// hyphen, the tag block), each other default-ignorable code point (variation selectors, U+034F, the Hangul fillers), the line and paragraph separators (U+2028, U+2029) are written as
/// `\u{…}` in lower-case hex (ESC as `\u{1b}`); every other character, `é` and `例` included, is kept as it is. A
/// backslash is escaped too (`\u{5c}`) where it comes before `u` or `x`, so that a sender's literal `\u{202e}` or
/// `\xFF` is not read as one of these escapes, and where it comes before `"` or ends the text, so that it cannot
/// escape the quote a caller writes after the text (`message="…"`); every other backslash is kept, so a
/// distinguished name's own escapes (RFC 4514's `O=Example\, Inc.`, `\+`, `\\`) read as they always have. In the
/// output, then, every `\u{…}` and `\xNN` is an escape and every other backslash is the sender's.
///
/// Pure functions: no state, no I/O.
package enum VisibleText {
    /// `text` with every hidden character (``isHidden(_:)``), and each backslash before `u`, `x`, `"` or the end,
    /// written as `\u{…}`.
    package static func escaped(_ text: String) -> String {
        var result = ""
        result.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        Self.append(text.unicodeScalars[...], quoting: false, to: &result)
        return result
    }

    /// `text` escaped as ``escaped(_:)``, cut to its first `limit` Unicode scalars (then followed by `…`), for a
    /// message that quotes a peer's text of any length.
    package static func escaped(_ text: String, limit: Int) -> String {
        let scalars = text.unicodeScalars
        guard scalars.count > limit else { return Self.escaped(text) }
        var result = ""
        Self.append(scalars.prefix(max(0, limit)), quoting: false, to: &result)
        return result + "…"
    }

    /// `text` between double quotes, for a message that quotes a peer's text inside its own words: escaped as
    /// ``escaped(_:)``, and each `"` of the text written as `\u{22}` too, so that the text cannot close the quote
    /// and go on as if the message's own words followed (`_type is "x", not "root"` from a `_type` of
    /// `x", not "root`). With a `limit`, a text cut to its first `limit` Unicode scalars ends its quotes and is
    /// followed by `…` outside them: a sender's own `…` stays inside the quotes, so it cannot read as a cut.
    package static func quoted(_ text: String, limit: Int? = nil) -> String {
        let scalars = text.unicodeScalars
        let cut = limit.map { scalars.count > max(0, $0) } ?? false
        var result = "\""
        Self.append(cut ? scalars.prefix(max(0, limit ?? 0)) : scalars[...], quoting: true, to: &result)
        return result + "\"" + (cut ? "…" : "")
    }

    /// Bytes that should be UTF-8 (a file name, which on Linux is any bytes but `/` and NUL): each well-formed
    /// UTF-8 sequence by the rules of ``escaped(_:)``, each byte that is not part of one as `\xNN` (upper-case hex),
    /// so `b\xFF.pem` names the file `b`, 0xFF, `.pem` and `café.pem` is shown as it is.
    package static func escaped(bytes: some Sequence<UInt8>) -> String {
        let bytes = Array(bytes)
        var result = ""
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        // The parser consumes the bytes in order: `offset` is where the sequence it answers for starts.
        var offset = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                offset += encoded.count
                // What follows matters only to a backslash (one byte): whether it is `u`, `x`, `"` or nothing.
                let following = offset < bytes.count ? Unicode.Scalar(bytes[offset]) : nil
                Self.append(Unicode.UTF8.decode(encoded), before: following, to: &result)
            case .error(let length):
                for byte in bytes[offset..<offset + length] {
                    result += "\\x" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16, uppercase: true)
                }
                offset += length
            case .emptyInput:
                return result
            }
        }
    }

    /// `json` (the text of a JSON document, as JSONEncoder writes it) with each hidden character outside ASCII's C0
    /// (DEL, C1, the format characters, U+2028, U+2029) written as a JSON `\uXXXX` escape (a surrogate pair above
    /// U+FFFF). The document's values are unchanged, as a JSON reader reads them; only its text on a terminal is.
    /// JSONEncoder already escapes C0 inside strings, and a raw C0 left in its output is the document's own layout
    /// (the newlines and spaces of pretty printing), which stays as it is; so does the backslash, which a JSON string
    /// only holds escaped.
    package static func jsonEscaped(_ json: String) -> String {
        var result = ""
        for scalar in json.unicodeScalars {
            if scalar.value >= 0x7F && Self.isHidden(scalar) {
                for unit in String(scalar).utf16 {
                    let hex = String(unit, radix: 16)
                    result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Whether `scalar` acts on a display instead of showing: a control character (Cc), a format character (Cf), a
    /// line or paragraph separator, a bidi control, or any other default-ignorable code point (Unicode's list of
    /// what a renderer shows as nothing: variation selectors, the combining grapheme joiner U+034F, the Hangul fillers,
    /// the Mongolian free variation selectors).
    package static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        // Printable ASCII (space to `~`) is none of these: answered without the property look-ups, since almost
        // every character of a report is one (`pinning evaluate` escapes each line it prints).
        if scalar.value >= 0x20 && scalar.value < 0x7F { return false }
        let category = scalar.properties.generalCategory
        // Format characters (Cf) are invisible too: the bidi controls, zero-width spaces and joiners (U+200B–U+200D),
        // U+2060, U+FEFF, the soft hyphen, the tag block. Left raw, "exam\u{200B}ple.com" would show as a second
        // "example.com".
        // Default-ignorable code points outside Cf are invisible as well: "exam\u{FE0F}ple.com" (a variation
        // selector, Mn) or a Hangul filler (U+3164, Lo) would show as "example.com" too.
        return category == .control || category == .format || category == .lineSeparator || category == .paragraphSeparator
            || scalar.properties.isBidiControl || scalar.properties.isDefaultIgnorableCodePoint
    }

    /// Appends `scalars` by the rules of ``escaped(_:)``; `quoting`: each `"` as `\u{22}` too (``quoted(_:limit:)``).
    private static func append(_ scalars: Substring.UnicodeScalarView, quoting: Bool, to result: inout String) {
        var iterator = scalars.makeIterator()
        var next = iterator.next()
        while let scalar = next {
            next = iterator.next()
            Self.append(scalar, before: next, quoting: quoting, to: &result)
        }
    }

    /// Appends `scalar`, escaped if it is hidden, a `"` when `quoting`, or a backslash that `following` (the next
    /// character of the text, nil at its end) would turn into what reads as an escape (`\u…`, `\x…`), or that could
    /// escape a quote (`\"`, or the text's last character before the caller's closing quote).
    private static func append(_ scalar: Unicode.Scalar, before following: Unicode.Scalar?, quoting: Bool = false, to result: inout String) {
        let backslashThatActs = scalar == "\\" && (following == nil || following == "u" || following == "x" || following == "\"")
        if Self.isHidden(scalar) || backslashThatActs || (quoting && scalar == "\"") {
            result += "\\u{\(String(scalar.value, radix: 16))}"
        } else {
            result.unicodeScalars.append(scalar)
        }
    }
}
