import Foundation

/// How `pinning config export` and `pinning config import` write a ``Translation``: its warnings and notes on
/// standard error, one line each, then its text to `--out PATH` or standard output. Shared by the `pinning`
/// executable (export) and `pinning-config-import` (import), so both print the same lines.
package enum TranslationOutput {
    /// The output could not be written; `message` names `--out` and its path.
    package struct Failure: Error {
        package var message: String
    }

    /// `pinning: config COMMAND: warning: …` and `… note: …` lines on standard error, then the text.
    package static func write(_ translation: Translation, command: String, to path: String?) throws(Failure) {
        for warning in translation.warnings {
            FileHandle.standardError.write(Data("pinning: config \(command): warning: \(warning.description)\n".utf8))
        }
        for note in translation.notes {
            FileHandle.standardError.write(Data("pinning: config \(command): note: \(note)\n".utf8))
        }
        try self.write(translation.text, to: path)
    }

    /// `text` to `path` (replaced atomically), or to standard output without one.
    package static func write(_ text: String, to path: String?) throws(Failure) {
        guard let path else {
            FileHandle.standardOutput.write(Data(text.utf8))
            return
        }
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw Failure(message: "--out \(path): cannot write it (\(error.localizedDescription))")
        }
    }
}
