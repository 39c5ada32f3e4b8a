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
    /// What exactly is wrong, in words: never a library's error text, a Swift type name or a source location.
    public var problem: String
    /// What the library underneath reported (swift-asn1's parse error, NIOSSL's or BoringSSL's error), when the
    /// failure came from one: for logs and a tool's `--verbose`/`--json` output. It is not part of
    /// ``description`` or ``problem``.
    public var underlyingError: String?

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
        self.underlyingError = nil
    }

    /// The error for `reason`: its code and its words, with the library's own report (if any) kept apart.
    package init(_ reason: Reason, origin: String, underlying: (any Error)? = nil) {
        self.code = reason.code
        self.origin = origin
        self.problem = reason.words
        self.underlyingError = underlying.map { String(describing: $0) }
    }

    /// `"ORIGIN: CODE: PROBLEM"`.
    public var description: String {
        "\(self.origin): \(self.code): \(self.problem)"
    }
}

extension TLSIdentityError {
    /// Every way loading an identity fails, each with the line a person reads (``words``) and its ``Code``. The
    /// words are made here from the case, so no library's error text can reach them; that text travels in
    /// ``TLSIdentityError/underlyingError``.
    package enum Reason: Hashable, Sendable {
        // The file itself.
        /// The operating system refused the file; the reason is its words (`no such file or directory`).
        case unreadableFile(String)
        /// Larger than the limit; the words say how large and what the limit is.
        case fileTooLarge(String)
        case emptyFile

        // Certificates (a PEM identity's chain file, a mutual-TLS server's client CAs).
        /// Neither PEM certificates nor a DER certificate or PKCS#7 bundle (truncated, damaged, another kind of file).
        case notCertificates
        case noCertificate
        /// Certificate `index` (1-based) of the input uses something the libraries cannot read.
        case unusableCertificate(index: Int)
        /// The key/signature algorithm of a certificate is not supported.
        case unsupportedCertificate
        case noClientCA

        // Private keys.
        case noPrivateKeyBlock
        /// A DER certificate where the private key belongs.
        case certificateNotKey
        /// Not a readable private key: damaged, not PEM/DER at all, or a type that is not supported.
        case unreadableKey
        /// Decrypted (or plain) well-formed key of a type BoringSSL does not support.
        case unsupportedKeyType
        case encryptedKeyWithoutPassphrase
        case wrongKeyPassphrase
        case passphraseTooLong(bytes: Int)
        case passphraseContainsNUL
        /// The encrypted key's structure is damaged; `part` says where (our words).
        case damagedEncryptedKey(part: String)
        /// The encrypted key uses a scheme that is not supported; `what` names it (our words).
        case unsupportedKeyEncryption(String)
        /// The key is not the key of the first certificate of `certificateFile` (whose subject is `subject`).
        case keyDoesNotMatchCertificate(certificateFile: String, subject: String)

        // PKCS#12.
        /// Not a PKCS#12 (PFX) structure at all: truncated, damaged, or another kind of file (PEM, text).
        case notPKCS12
        /// A PKCS#12 structure damaged inside; `part` says where (our words).
        case damagedPKCS12(part: String)
        /// A PKCS#12 feature this loader does not read; `what` names it (our words).
        case unsupportedPKCS12(String)
        case pkcs12PassphraseMissing
        case wrongPKCS12Passphrase
        /// The integrity check passed but `what` does not decrypt (damaged, or `-twopass`).
        case secondPassphrase(what: String)
        case pkcs12WithoutKey(certificates: Int)
        case pkcs12WithoutCertificate
        case pkcs12SeveralKeys(Int)
        case keyMatchesNoCertificate(certificates: Int)

        /// The code callers match on.
        package var code: Code {
            switch self {
            case .unreadableFile: return .unreadableFile
            case .fileTooLarge: return .fileTooLarge
            case .emptyFile, .notCertificates, .unreadableKey, .damagedEncryptedKey, .notPKCS12, .damagedPKCS12,
                .unusableCertificate:
                return .corruptFile
            case .noCertificate, .noClientCA, .pkcs12WithoutCertificate: return .noCertificate
            case .unsupportedCertificate, .unsupportedKeyType, .unsupportedKeyEncryption, .unsupportedPKCS12,
                .pkcs12SeveralKeys:
                return .unsupportedFormat
            case .noPrivateKeyBlock, .certificateNotKey, .pkcs12WithoutKey: return .noPrivateKey
            case .encryptedKeyWithoutPassphrase, .wrongKeyPassphrase, .passphraseTooLong, .passphraseContainsNUL,
                .pkcs12PassphraseMissing, .wrongPKCS12Passphrase, .secondPassphrase:
                return .wrongPassphrase
            case .keyDoesNotMatchCertificate, .keyMatchesNoCertificate: return .noCertificateMatchingKey
            }
        }

        /// What is wrong, in words.
        package var words: String {
            switch self {
            case .unreadableFile(let reason): return reason
            case .fileTooLarge(let size): return size
            case .emptyFile: return "the file is empty"
            case .notCertificates:
                return "not a certificate file: neither PEM certificates nor a DER certificate or PKCS#7 bundle (truncated, damaged, or another kind of file)"
            case .noCertificate: return "the input holds no certificate"
            case .unusableCertificate(let index):
                return "certificate \(index) cannot be read (damaged, or an unsupported key or signature algorithm)"
            case .unsupportedCertificate:
                return "a certificate uses a key or signature algorithm that is not supported"
            case .noClientCA: return "a mutual-TLS server needs at least one client CA"
            case .noPrivateKeyBlock: return "no PRIVATE KEY block in the PEM input"
            case .certificateNotKey: return "a DER certificate, not a private key"
            case .unreadableKey: return "the private key cannot be read (damaged, or of a type that is not supported)"
            case .unsupportedKeyType: return "the private key is of a type that is not supported"
            case .encryptedKeyWithoutPassphrase: return "the private key is encrypted and no passphrase was given"
            case .wrongKeyPassphrase: return "the passphrase does not decrypt the private key"
            case .passphraseTooLong(let bytes):
                return "the passphrase is \(bytes) bytes; a traditional encrypted PEM key (Proc-Type: 4,ENCRYPTED) takes at most 1,023, in OpenSSL too"
            case .passphraseContainsNUL: return "the passphrase contains a NUL character"
            case .damagedEncryptedKey(let part): return "the encrypted private key is malformed: \(part)"
            case .unsupportedKeyEncryption(let what): return "the encrypted private key uses \(what)"
            case .keyDoesNotMatchCertificate(let file, let subject):
                return "the key does not belong to the first certificate of \(file) (\(subject)): the certificate file must start with the certificate of this key, then its intermediates"
            case .notPKCS12:
                return "not a PKCS#12 (PFX) file: truncated, damaged, or another kind of file (PEM, text)"
            case .damagedPKCS12(let part): return "the PKCS#12 file is damaged: \(part)"
            case .unsupportedPKCS12(let what): return what
            case .pkcs12PassphraseMissing: return "the file is protected by a passphrase and none was given"
            case .wrongPKCS12Passphrase: return "the passphrase does not unlock this PKCS#12 file (its integrity check fails)"
            case .secondPassphrase(let what):
                return "the passphrase unlocks the file's integrity check but does not decrypt \(what) (damaged, or encrypted with a second passphrase)"
            case .pkcs12WithoutKey(let count):
                return "the file holds \(count) certificate(s) but no private key (exported with -nokeys?)"
            case .pkcs12WithoutCertificate: return "the file holds a private key but no certificate"
            case .pkcs12SeveralKeys(let count): return "the file holds \(count) private keys; exactly one is supported"
            case .keyMatchesNoCertificate(let count):
                return "none of the file's \(count) certificate(s) carries the public key of its private key"
            }
        }
    }
}
