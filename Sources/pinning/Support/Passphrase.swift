import ArgumentParser
import Foundation
import Pinning

/// `--passphrase-env VAR` / `--passphrase-file FILE`: the passphrase options of `check`, `serve` and
/// `pki export`, one option group read by one reader.
struct PassphraseOptions: ParsableArguments {
    @Option(name: .customLong("passphrase-env"), help: ArgumentHelp("Read the passphrase from this environment variable.", valueName: "var"))
    var environment: String?

    @Option(name: .customLong("passphrase-file"), help: ArgumentHelp("Read the passphrase from the first line of this file.", valueName: "file"))
    var file: String?

    /// Whether either option is given.
    var isGiven: Bool { self.environment != nil || self.file != nil }

    /// One source at most, refused while parsing.
    func validate() throws {
        if self.environment != nil && self.file != nil {
            throw InputError(Passphrase.bothSourcesRefusal)
        }
    }

    /// The passphrase, or nil when neither option is given.
    func passphrase() throws(InputError) -> String? {
        try Passphrase.read(environment: self.environment, file: self.file)
    }
}

/// Reads a passphrase from an environment variable or a file, for every command that takes one.
///
/// Any Unicode text is a passphrase (it reaches the key derivation as OpenSSL 3 encodes it: see
/// `PKCS12Passphrase`). Refused, with the option named: an unset variable, an unreadable file, bytes that are not
/// UTF-8 (OpenSSL would use them raw, we could not say which characters they are) and a NUL character (OpenSSL
/// reads passphrases as C strings and would stop there).
enum Passphrase {
    static func read(environment: String?, file: String?) throws(InputError) -> String? {
        switch (environment, file) {
        case (nil, nil):
            return nil
        case (let name?, nil):
            // getenv, not ProcessInfo: ProcessInfo would silently repair bytes that are not UTF-8.
            guard let raw = getenv(name) else {
                throw InputError("--passphrase-env \(name): the environment variable is not set")
            }
            let bytes = Array(UnsafeBufferPointer(start: UnsafeRawPointer(raw).assumingMemoryBound(to: UInt8.self), count: strlen(raw)))
            return try Self.text(bytes, option: "--passphrase-env \(name)", what: "the environment variable")
        case (nil, let path?):
            let bytes: [UInt8]
            do {
                // The reader every file option uses: regular files, FIFOs, /dev/fd/N and <(…) alike.
                bytes = try CertificateLoader.readFile(atPath: path)
            } catch {
                throw InputError("--passphrase-file \(error.origin): \(error.problem)")
            }
            // Like openssl's `file:`: the first line, without its line ending.
            let firstLine = bytes.split(separator: 0x0A, maxSplits: 1, omittingEmptySubsequences: false).first.map(Array.init) ?? []
            let line = firstLine.last == 0x0D ? Array(firstLine.dropLast()) : firstLine
            return try Self.text(line, option: "--passphrase-file \(path)", what: "the first line")
        case (_?, _?):
            // PassphraseOptions.validate() refuses this while parsing; the reader refuses it too, on its own.
            throw InputError(Self.bothSourcesRefusal)
        }
    }

    static let bothSourcesRefusal = "--passphrase-env and --passphrase-file cannot be combined"

    private static func text(_ bytes: [UInt8], option: String, what: String) throws(InputError) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw InputError("\(option): \(what) is not UTF-8 text; write the passphrase in UTF-8")
        }
        guard !bytes.contains(0) else {
            throw InputError("\(option): \(what) contains a NUL character, which ends a passphrase in OpenSSL")
        }
        return text
    }
}
