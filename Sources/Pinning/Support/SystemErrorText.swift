import Foundation

/// `strerror`'s words for an errno value: the one wrapper every module uses (`package`), which never trusts the
/// pointer to be non-nil. Each caller keeps the words it always printed: the system's text as it is
/// (``text(_:otherwise:)``) or with a lower-case first letter (``words(_:)``), and its own stand-in for a code the
/// library has no text for.
package enum SystemErrorText {
    /// `strerror(code)` as the C library writes it (`No such file or directory`); `fallback` (by default
    /// `errno CODE`) when it gives no text at all.
    package static func text(_ code: CInt, otherwise fallback: String? = nil) -> String {
        guard let pointer = strerror(code) else { return fallback ?? "errno \(code)" }
        return String(cString: pointer)
    }

    /// ``text(_:otherwise:)`` with its first letter in lower case, as the messages around it are written
    /// (`no such file or directory`); `error CODE` when the library gives no text or an empty one.
    package static func words(_ code: CInt) -> String {
        let text = Self.text(code, otherwise: "")
        guard !text.isEmpty else { return "error \(code)" }
        return text.prefix(1).lowercased() + text.dropFirst()
    }
}
