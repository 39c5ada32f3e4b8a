/// A TLS identity (certificate chain and private key) could not be loaded.
///
/// Every error names the input (``origin``: a file path, or a label the caller chose) and says what is wrong
/// (``problem``), so the message can be shown as is:
///
/// ```
/// /etc/app/client.p12: wrong passphrase: the passphrase does not unlock this PKCS#12 file (its integrity check fails)
/// ```
///
/// Match on ``code``; the codes are extensible, so keep a default case.
public struct TLSIdentityError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure. A struct over a private enum so that kinds can be added without breaking clients.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case unreadableFile
            case fileTooLarge
            case corruptFile
            case wrongPassphrase
            case noPrivateKey
            case noCertificate
            case noCertificateMatchingKey
            case unsupportedFormat
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// The file does not exist or cannot be read.
        public static let unreadableFile = Code(.unreadableFile)
        /// The file is larger than ``TLSIdentity/maximumFileSize``; it was not read.
        public static let fileTooLarge = Code(.fileTooLarge)
        /// The bytes are not a well-formed PKCS#12 file, PEM certificate or PEM key (truncated, damaged, or
        /// another kind of file).
        public static let corruptFile = Code(.corruptFile)
        /// The passphrase does not unlock the file (or the encrypted key).
        public static let wrongPassphrase = Code(.wrongPassphrase)
        /// The file holds no private key.
        public static let noPrivateKey = Code(.noPrivateKey)
        /// The file holds no certificate.
        public static let noCertificate = Code(.noCertificate)
        /// There is a private key, but no certificate in the file carries its public key.
        public static let noCertificateMatchingKey = Code(.noCertificateMatchingKey)
        /// Well formed, but uses something this loader does not support (BER encoding, public-key integrity
        /// mode, several private keys, an unsupported MAC digest).
        public static let unsupportedFormat = Code(.unsupportedFormat)

        /// A short name, e.g. `"wrong passphrase"`.
        public var description: String {
            switch self.kind {
            case .unreadableFile: return "unreadable file"
            case .fileTooLarge: return "file too large"
            case .corruptFile: return "corrupt file"
            case .wrongPassphrase: return "wrong passphrase"
            case .noPrivateKey: return "no private key"
            case .noCertificate: return "no certificate"
            case .noCertificateMatchingKey: return "no certificate matching the key"
            case .unsupportedFormat: return "unsupported format"
            }
        }
    }

    /// What kind of failure this is.
    public var code: Code
    /// Where the input came from: a file path or a label given by the caller.
    public var origin: String
    /// What exactly is wrong.
    public var problem: String

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - origin: The file path or caller-given label of the input.
    ///   - problem: What exactly is wrong.
    public init(code: Code, origin: String, problem: String) {
        self.code = code
        self.origin = origin
        self.problem = problem
    }

    /// `"ORIGIN: CODE: PROBLEM"`.
    public var description: String {
        "\(self.origin): \(self.code): \(self.problem)"
    }
}
