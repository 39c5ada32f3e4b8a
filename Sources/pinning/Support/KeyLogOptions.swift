import ArgumentParser
import Foundation
import PinningNIO

/// `--keylog FILE` and `--keylog-from-env`, shared by `check`, `serve`, `demo` and `proxy` (issue 15).
///
/// Choices, with curl and Go as the bar: an explicit file is the main form (curl has no flag, only the variable;
/// Wireshark users ask for a flag); `SSLKEYLOGFILE` is read only with `--keylog-from-env` (Go never reads it,
/// curl always does: a variable left in a shell profile should not silently expose every connection); every run
/// that logs says so on stderr, in capitals, because the file decrypts everything it records.
struct KeyLogOptions: ParsableArguments {
    @Option(
        name: .customLong("keylog"),
        help: ArgumentHelp(
            "Append each handshake's TLS session secrets to this file (NSS key log format, for Wireshark); created with mode 0600.", valueName: "file"))
    var path: String?

    @Flag(name: .customLong("keylog-from-env"), help: "Use the file SSLKEYLOGFILE names as --keylog (never read without this flag).")
    var fromEnvironment = false

    func validate() throws {
        if self.path != nil && self.fromEnvironment {
            throw InputError("--keylog and --keylog-from-env: give one of them")
        }
    }

    /// The key log asked for, or nil; the warning is printed on stderr whenever one is open.
    ///
    /// - Throws: ``InputError`` naming the option and the file when it cannot be used.
    func open(command: String) throws -> TLSKeyLog? {
        let keyLog: TLSKeyLog?
        let option: String
        do {
            if let path = self.path {
                option = "--keylog"
                keyLog = try TLSKeyLog(path: path)
            } else if self.fromEnvironment {
                option = "--keylog-from-env (SSLKEYLOGFILE)"
                keyLog = try TLSKeyLog.fromEnvironment()
                if keyLog == nil {
                    FileHandle.standardError.write(Data("pinning: \(command): --keylog-from-env: SSLKEYLOGFILE is not set; no keys are logged\n".utf8))
                }
            } else {
                return nil
            }
        } catch {
            throw InputError("\(self.path != nil ? "--keylog" : "--keylog-from-env (SSLKEYLOGFILE)"): \(error.description)")
        }
        if let keyLog {
            FileHandle.standardError.write(
                Data(
                    "pinning: \(command): WARNING: TLS session keys are being written to \(keyLog.path) (\(option)); anyone who can read that file can decrypt these connections. Use it for debugging only.\n"
                        .utf8))
        }
        return keyLog
    }
}
