/// Report text made visible where it is shown to a person (the dashboard, a terminal, a log line).
///
/// A report's strings are the sender's: ESC starts a terminal escape sequence, CR and LF forge lines, U+202E
/// (RIGHT-TO-LEFT OVERRIDE) and the other bidi controls reorder the text around them, and none of them is seen
/// when written raw. Each control character (general category Cc: C0, DEL, C1), each format character (Cf: the bidi
/// controls, zero-width characters, U+FEFF), the line and paragraph separators (U+2028, U+2029) and the backslash
/// is written as `\u{…}` (ESC as `\u{1b}`); every other character, `é` and `例` included, is kept as it is.
package enum VisibleText {
    package static func escaped(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            // A backslash too, so that a sender's literal "\u{202e}" is not read as an escaped control.
            if Self.isHidden(scalar) || scalar == "\\" {
                result += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    package static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        let category = scalar.properties.generalCategory
        // Format characters (Cf) are invisible too: the bidi controls, zero-width spaces and joiners (U+200B–U+200D),
        // U+2060, U+FEFF, the soft hyphen, the tag block. Left raw, "exam\u{200B}ple.com" would show as a second
        // "example.com".
        return category == .control || category == .format || category == .lineSeparator || category == .paragraphSeparator
            || scalar.properties.isBidiControl
    }
}
