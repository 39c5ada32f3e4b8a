/// Report text made visible where it is shown to a person (the dashboard, a terminal, a log line).
///
/// A report's strings are the sender's: ESC starts a terminal escape sequence, CR and LF forge lines, U+202E
/// (RIGHT-TO-LEFT OVERRIDE) and the other bidi controls reorder the text around them, and none of them is seen
/// when written raw. Each control character (general category Cc: C0, DEL, C1), each bidi control and the line and
/// paragraph separators (U+2028, U+2029) is written as `\u{…}` (ESC as `\u{1b}`); every other character, `é`
/// and `例` included, is kept as it is.
package enum VisibleText {
    package static func escaped(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            if Self.isHidden(scalar) {
                result += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    package static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        let category = scalar.properties.generalCategory
        return category == .control || category == .lineSeparator || category == .paragraphSeparator || scalar.properties.isBidiControl
    }
}
