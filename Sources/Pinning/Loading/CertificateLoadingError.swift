/// Certificates could not be loaded from a file, a directory or a byte buffer.
///
/// Every error names where the input came from (``origin``: a file path, or a label the caller chose such as
/// `"<stdin>"`) and says what is wrong with it (``problem``), so that the message can be shown as is:
///
/// ```
/// /tmp/x.pem: malformed PEM: block 2 (CERTIFICATE) is not valid base64
/// ```
///
/// Match on ``code`` to react to a kind of failure; the codes are extensible, so always keep a default case.
public struct CertificateLoadingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of loading failure.
    ///
    /// A struct over a private enum rather than a public enum, so that new kinds can be added without breaking
    /// clients that switch over them.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case unreadableFile
            case fileTooLarge
            case emptyInput
            case noCertificates
            case malformedPEM
            case malformedDER
            case malformedPKCS7
            case unsupportedKey
            case notADirectory
            case unsupportedCertificate
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// The file or directory does not exist or could not be read (permissions, I/O error).
        public static let unreadableFile = Code(.unreadableFile)
        /// The file is larger than ``CertificateLoader/maximumFileSize``; it was not read.
        public static let fileTooLarge = Code(.fileTooLarge)
        /// The input is empty (zero bytes, or only whitespace).
        public static let emptyInput = Code(.emptyInput)
        /// The input is well formed but holds no certificate (for example a PEM file with only a private key,
        /// a PKCS#7 bundle without certificates, or a directory without certificate files).
        public static let noCertificates = Code(.noCertificates)
        /// A PEM block is broken: bad base64, a missing or mismatched `-----END …-----` line.
        public static let malformedPEM = Code(.malformedPEM)
        /// The bytes are not a DER certificate (and not a PKCS#7 bundle either).
        public static let malformedDER = Code(.malformedDER)
        /// The bytes look like PKCS#7/CMS but are not a readable SignedData certificate bundle.
        public static let malformedPKCS7 = Code(.malformedPKCS7)
        /// The certificate is well formed but its public key type is not supported.
        ///
        /// swift-certificates only accepts ECDSA P-256, P-384 and P-521, RSA (2048 bits or more) and Ed25519 keys;
        /// certificates with any other key (DSA, Ed448, brainpool curves, explicit EC parameters, RSA-1024, …)
        /// cannot be used for evaluation. They can still be inspected and pinned.
        public static let unsupportedKey = Code(.unsupportedKey)
        /// A directory was expected but the path is not one.
        public static let notADirectory = Code(.notADirectory)
        /// The certificate is well-formed X.509 but uses something the verifier does not support: an RSASSA-PSS,
        /// MD5 or DSA signature, a negative serial number, … The problem names it in words. Such a certificate
        /// can still be inspected and pinned (`CertificateLoader.inspect(atPath:)`), never used for evaluation.
        public static let unsupportedCertificate = Code(.unsupportedCertificate)

        /// A short human-readable name for the code, e.g. `"malformed PEM"`.
        public var description: String {
            switch self.kind {
            case .unreadableFile: return "unreadable file"
            case .fileTooLarge: return "file too large"
            case .emptyInput: return "empty input"
            case .noCertificates: return "no certificates"
            case .malformedPEM: return "malformed PEM"
            case .malformedDER: return "malformed DER"
            case .malformedPKCS7: return "malformed PKCS#7"
            case .unsupportedKey: return "unsupported key"
            case .notADirectory: return "not a directory"
            case .unsupportedCertificate: return "unsupported certificate"
            }
        }
    }

    /// What kind of failure this is.
    public var code: Code
    /// Where the input came from: a file or directory path, or a label given by the caller (e.g. `"<stdin>"`).
    public var origin: String
    /// What exactly is wrong, e.g. `"block 2 (CERTIFICATE) is not valid base64"`.
    public var problem: String

    /// Creates an error. Internal: only the loaders of this module report loading failures.
    ///
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - origin: The file path or caller-given label of the input.
    ///   - problem: What exactly is wrong.
    init(code: Code, origin: String, problem: String) {
        self.code = code
        self.origin = origin
        self.problem = problem
    }

    /// `"ORIGIN: CODE: PROBLEM"`, e.g. `"/tmp/x.pem: malformed PEM: block 2 (CERTIFICATE) is not valid base64"`.
    public var description: String {
        "\(self.origin): \(self.code): \(self.problem)"
    }
}
