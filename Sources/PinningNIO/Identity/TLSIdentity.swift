import Foundation
public import NIOSSL
import Pinning
import SwiftASN1
public import X509

/// The identity an mTLS client uses: ``TLSIdentity`` loaded for a client.
public typealias ClientIdentity = TLSIdentity

/// A certificate chain with the private key of its leaf: what a TLS endpoint presents to prove who it is (a
/// client in mutual TLS, or a server).
///
/// Load one from a PKCS#12 file (`.p12`/`.pfx`, modern AES/PBKDF2 or legacy 3DES/RC2) or from PEM files:
///
/// <!-- snippet: given(passphrase: String) -->
/// ```swift
/// let identity = try TLSIdentity.pkcs12(file: "client.p12", passphrase: passphrase)
/// let anchor = identity.chainRoot          // the private CA, to trust the server with
/// ```
///
/// Loading never crashes on hostile or damaged input: every failure is a ``TLSIdentityError`` naming the
/// file (wrong passphrase, no private key, no certificate matching the key, corrupt file).
public struct TLSIdentity: Sendable, Hashable {
    /// The largest file read: 16 MiB (real identities are a few KiB).
    public static let maximumFileSize = 16 * 1024 * 1024

    /// The chain as it is sent in the handshake: the leaf (whose key this identity holds) first, then each
    /// issuer found in the input, then any other certificates of the input.
    public let certificateChain: [Certificate]
    /// Where it was loaded from (a path or a caller-given label).
    public let origin: String
    /// The chain in NIOSSL's form, same order.
    public let nioCertificateChain: [NIOSSLCertificate]
    /// The leaf's private key.
    public let privateKey: NIOSSLPrivateKey

    /// The end-entity certificate, whose private key this identity holds.
    public var leaf: Certificate { self.certificateChain[0] }

    /// The chain's root: the last certificate of the issuer chain from the leaf when it is self-issued (as a
    /// private CA's root is), else nil. Deployments on a private PKI take their server anchor from here.
    public var chainRoot: Certificate? {
        guard self.certificateChain.count > 1 else { return nil }
        var current = self.leaf
        var remaining = Array(self.certificateChain.dropFirst())
        while let index = remaining.firstIndex(where: { $0.subject == current.issuer }) {
            current = remaining.remove(at: index)
            if current.subject == current.issuer { return current }
        }
        return nil
    }

    /// Hashes the chain and the origin, not the key: NIOSSL's hash of a private key DER-encodes it with a `try!`,
    /// which crashes for an Ed25519 key (BoringSSL cannot encode one that way). Equal identities still hash equally
    /// (equality compares the key too, through NIOSSL's `EVP_PKEY_cmp`, which works for every key type).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.certificateChain)
        hasher.combine(self.origin)
    }

    /// The chain for a `TLSConfiguration`.
    public var certificateSources: [NIOSSLCertificateSource] { self.nioCertificateChain.map { .certificate($0) } }
    /// The key for a `TLSConfiguration`.
    public var privateKeySource: NIOSSLPrivateKeySource { .privateKey(self.privateKey) }

    init(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey, origin: String) throws(TLSIdentityError) {
        var parsed: [(Certificate, NIOSSLCertificate)] = []
        for (index, certificate) in chain.enumerated() {
            do {
                parsed.append((try Certificate(derEncoded: try certificate.toDERBytes()), certificate))
            } catch {
                throw TLSIdentityError(.unusableCertificate(index: index + 1), origin: origin, underlying: error)
            }
        }
        guard let first = parsed.first else {
            throw TLSIdentityError(.noCertificate, origin: origin)
        }
        // Order: leaf, its issuer, that one's issuer, …, then whatever is left in input order.
        var ordered = [first]
        var remaining = Array(parsed.dropFirst())
        while let last = ordered.last, last.0.subject != last.0.issuer,
            let index = remaining.firstIndex(where: { $0.0.subject == last.0.issuer })
        {
            ordered.append(remaining.remove(at: index))
        }
        ordered += remaining
        self.certificateChain = ordered.map(\.0)
        self.nioCertificateChain = ordered.map(\.1)
        self.privateKey = key
        self.origin = origin
    }

    // MARK: - PKCS#12

    /// Loads a PKCS#12 file (`.p12`, `.pfx`).
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - passphrase: The file's passphrase (empty for none).
    /// - Throws: ``TLSIdentityError`` naming `path`.
    public static func pkcs12(file path: String, passphrase: String) throws(TLSIdentityError) -> TLSIdentity {
        let bytes = try Self.read(path)
        return try Self.pkcs12(bytes: bytes, passphrase: passphrase, origin: path)
    }

    /// Loads a PKCS#12 file from memory. Safe for untrusted bytes: no input crashes the process.
    ///
    /// - Parameters:
    ///   - bytes: The DER-encoded PFX.
    ///   - passphrase: The passphrase (empty for none).
    ///   - origin: What to call the input in errors.
    /// - Throws: ``TLSIdentityError``.
    public static func pkcs12(
        bytes: [UInt8], passphrase: String, origin: String
    ) throws(TLSIdentityError) -> TLSIdentity {
        try PKCS12Loader(origin: origin, passphrase: passphrase).load(bytes)
    }

    // MARK: - PEM

    /// Loads a PEM certificate chain (the leaf first, then its intermediates) and the leaf's private key.
    ///
    /// - Parameters:
    ///   - certificateChainFile: PEM (or DER/PKCS#7) certificates, leaf first.
    ///   - privateKeyFile: The leaf's private key, PEM (PKCS#8, traditional, or encrypted PKCS#8) or DER.
    ///   - passphrase: For an encrypted key; nil when the key is not encrypted.
    /// - Throws: ``TLSIdentityError`` naming the offending file.
    public static func pem(
        certificateChainFile: String,
        privateKeyFile: String,
        passphrase: String? = nil
    ) throws(TLSIdentityError) -> TLSIdentity {
        let chain = try Self.read(certificateChainFile)
        let key = try Self.read(privateKeyFile)
        return try Self.pem(
            certificateChain: chain,
            privateKey: key,
            passphrase: passphrase,
            certificateOrigin: certificateChainFile,
            keyOrigin: privateKeyFile
        )
    }

    /// Loads a certificate chain (leaf first) and private key from memory.
    ///
    /// - Parameters:
    ///   - certificateChain: PEM (or DER/PKCS#7) certificates, leaf first.
    ///   - privateKey: The leaf's private key, PEM or DER.
    ///   - passphrase: For an encrypted key.
    ///   - certificateOrigin: What to call the certificates in errors.
    ///   - keyOrigin: What to call the key in errors.
    /// - Throws: ``TLSIdentityError``.
    public static func pem(
        certificateChain: [UInt8],
        privateKey: [UInt8],
        passphrase: String? = nil,
        certificateOrigin: String,
        keyOrigin: String
    ) throws(TLSIdentityError) -> TLSIdentity {
        let certificates: [Certificate]
        do {
            certificates = try CertificateLoader.certificates(from: certificateChain, origin: certificateOrigin)
        } catch {
            throw Self.mapped(error)
        }
        var nioChain: [NIOSSLCertificate] = []
        for certificate in certificates {
            do {
                nioChain.append(try NIOSSLCertificate(bytes: certificate.derBytes, format: .der))
            } catch {
                throw TLSIdentityError(
                    .unusableCertificate(index: nioChain.count + 1), origin: certificateOrigin, underlying: error)
            }
        }
        let key = try Self.privateKey(privateKey, passphrase: passphrase, origin: keyOrigin)
        guard let leaf = nioChain.first else {
            throw TLSIdentityError(.noCertificate, origin: certificateOrigin)
        }
        guard Self.key(key, matches: leaf) else {
            throw TLSIdentityError(
                .keyDoesNotMatchCertificate(certificateFile: certificateOrigin, subject: "\(certificates[0].subject)"),
                origin: keyOrigin)
        }
        return try TLSIdentity(chain: nioChain, key: key, origin: certificateOrigin)
    }

    // MARK: - Helpers

    /// Whether `key` is the private key of `certificate`, decided by BoringSSL's `X509_check_private_key` on
    /// their DER forms. A key or certificate that does not parse counts as "does not match" (fail closed).
    ///
    /// Not by building an `NIOSSLContext` with both (which refuses a mismatched key) where it can be avoided:
    /// swift-nio-ssl 2.37 leaks the SSL_CTX when that initialiser throws, so every mismatched identity leaked
    /// ~700 bytes (found by the suite's AddressSanitizer run). BoringSSL's `i2d_PrivateKey` only encodes RSA, EC
    /// and DSA keys, so an Ed25519 key still takes the context route (same verdict, the leak on a mismatch).
    static func key(_ key: NIOSSLPrivateKey, matches certificate: NIOSSLCertificate) -> Bool {
        let certificateDER: [UInt8]
        do {
            certificateDER = try certificate.toDERBytes()
        } catch {
            return false
        }
        let keyDER: [UInt8]
        do {
            keyDER = try key.derBytes
        } catch {
            BoringSSL.clearErrors()
            return Self.contextAccepts(key, with: certificate)
        }
        return BoringSSL.check(privateKeyDER: keyDER, certificateDER: certificateDER) == .matches
    }

    /// Whether NIOSSL accepts `key` as the private key of `certificate` (`SSL_CTX_use_PrivateKey` refuses a key
    /// that does not match the certificate set before it).
    private static func contextAccepts(_ key: NIOSSLPrivateKey, with certificate: NIOSSLCertificate) -> Bool {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificate)],
            privateKey: .privateKey(key)
        )
        configuration.trustRoots = .certificates([])
        do {
            _ = try NIOSSLContext(configuration: configuration)
            return true
        } catch {
            return false
        }
    }

    /// Reads a private key: PEM (PKCS#8, SEC1, PKCS#1), DER (PKCS#8 or traditional), encrypted PKCS#8 (PEM
    /// `ENCRYPTED PRIVATE KEY` or DER) or traditional encrypted PEM (`Proc-Type: 4,ENCRYPTED`).
    ///
    /// The passphrase never reaches NIOSSL's passphrase callback (it converts each byte to a signed `CChar` and
    /// traps on any byte over 0x7F, so any non-ASCII passphrase killed the process). Encrypted PKCS#8 is
    /// decrypted by ``PasswordBasedEncryption`` (PBES2: the UTF-8 bytes; PKCS#12 schemes: UTF-16BE, as OpenSSL
    /// 3); traditional PEM by BoringSSL with the UTF-8 bytes (OpenSSL's `EVP_BytesToKey`, same bytes). NIOSSL then
    /// reads the decrypted DER.
    static func privateKey(
        _ bytes: [UInt8], passphrase: String?, origin: String
    ) throws(TLSIdentityError) -> NIOSSLPrivateKey {
        let text = String(decoding: bytes, as: UTF8.self)
        let isPEM = text.contains("-----BEGIN")
        if isPEM, !text.contains("PRIVATE KEY-----") {
            throw TLSIdentityError(.noPrivateKeyBlock, origin: origin)
        }
        let encryptedPKCS8 = try Self.encryptedPrivateKeyInfo(bytes, text: text, isPEM: isPEM, origin: origin)
        let traditional = isPEM && encryptedPKCS8 == nil && text.contains("Proc-Type: 4,ENCRYPTED")
        guard encryptedPKCS8 != nil || traditional else {
            // Not encrypted. No passphrase callback is needed: BoringSSL never prompts on a terminal (its default
            // callback without a passphrase fails).
            do {
                return try NIOSSLPrivateKey(bytes: bytes, format: isPEM ? .pem : .der)
            } catch {
                if !isPEM, Self.isDERCertificate(bytes) {
                    throw TLSIdentityError(.certificateNotKey, origin: origin, underlying: error)
                }
                throw TLSIdentityError(.unreadableKey, origin: origin, underlying: error)
            }
        }
        guard let passphrase else {
            throw TLSIdentityError(.encryptedKeyWithoutPassphrase, origin: origin)
        }
        let privateKeyInfo: [UInt8]
        if let encryptedPKCS8 {
            privateKeyInfo = try Self.decryptPKCS8(encryptedPKCS8, passphrase: passphrase, origin: origin)
        } else {
            privateKeyInfo = try Self.decryptTraditionalPEM(bytes, passphrase: passphrase, origin: origin)
        }
        do {
            return try NIOSSLPrivateKey(bytes: privateKeyInfo, format: .der)
        } catch {
            // CBC padding checks only the last byte(s): about one wrong passphrase in 256 "decrypts" to garbage
            // with valid padding. Garbage that is not even DER is that case; well-formed DER is a key type
            // BoringSSL does not support.
            let isDER: Bool
            do {
                _ = try DER.parse(privateKeyInfo)
                isDER = true
            } catch {
                isDER = false
            }
            if !isDER {
                throw TLSIdentityError(.wrongKeyPassphrase, origin: origin)
            }
            throw TLSIdentityError(.unsupportedKeyType, origin: origin, underlying: error)
        }
    }

    /// Whether `bytes` are one DER certificate (given where a private key belongs).
    private static func isDERCertificate(_ bytes: [UInt8]) -> Bool {
        do {
            _ = try Certificate(derEncoded: bytes)
            return true
        } catch {
            return false
        }
    }

    /// The DER EncryptedPrivateKeyInfo of an `ENCRYPTED PRIVATE KEY` PEM block or of DER input shaped as one
    /// (`SEQUENCE { AlgorithmIdentifier, OCTET STRING }`, where a PrivateKeyInfo starts with an INTEGER); nil for
    /// anything else.
    private static func encryptedPrivateKeyInfo(
        _ bytes: [UInt8], text: String, isPEM: Bool, origin: String
    ) throws(TLSIdentityError) -> [UInt8]? {
        if isPEM {
            let begin = "-----BEGIN ENCRYPTED PRIVATE KEY-----"
            let end = "-----END ENCRYPTED PRIVATE KEY-----"
            guard let start = text.range(of: begin) else { return nil }
            guard let stop = text.range(of: end, range: start.upperBound..<text.endIndex) else {
                throw TLSIdentityError(.damagedEncryptedKey(part: "the ENCRYPTED PRIVATE KEY block has no END line"), origin: origin)
            }
            let body = text[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
            guard let der = Data(base64Encoded: String(body)) else {
                throw TLSIdentityError(
                    .damagedEncryptedKey(part: "the ENCRYPTED PRIVATE KEY block is not valid base64"), origin: origin)
            }
            return Array(der)
        }
        let node: ASN1Node
        do {
            node = try DER.parse(bytes)
        } catch {
            return nil  // not DER at all: NIOSSL's reading reports it as unreadable
        }
        guard node.identifier == .sequence, case .constructed(let children) = node.content else { return nil }
        // Exactly `SEQUENCE { AlgorithmIdentifier, OCTET STRING }`: a DER certificate (`SEQUENCE { SEQUENCE,
        // SEQUENCE, BIT STRING }`) given as the key also starts with a SEQUENCE, and must be called unreadable,
        // not "encrypted".
        var fields = children.makeIterator()
        guard let first = fields.next(), first.identifier == .sequence,
            let second = fields.next(), second.identifier == .octetString, fields.next() == nil
        else { return nil }
        return bytes
    }

    private static func decryptPKCS8(
        _ der: [UInt8], passphrase: String, origin: String
    ) throws(TLSIdentityError) -> [UInt8] {
        let algorithm: ASN1Node
        let ciphertext: [UInt8]
        do {
            var fields = try PasswordBasedEncryption.sequence(try DER.parse(der), "EncryptedPrivateKeyInfo")
            guard let algorithmNode = fields.next(), let dataNode = fields.next() else {
                throw PasswordBasedEncryption.Failure.corrupt("incomplete")
            }
            algorithm = algorithmNode
            ciphertext = Array(try ASN1OctetString(derEncoded: dataNode).bytes)
        } catch {
            throw TLSIdentityError(
                .damagedEncryptedKey(part: "its EncryptedPrivateKeyInfo"), origin: origin, underlying: error)
        }
        do {
            return try PasswordBasedEncryption.decrypt(
                ciphertext, algorithm: algorithm, passphrase: PKCS12Passphrase(passphrase))
        } catch {
            switch error {
            case .wrongPassphrase:
                throw TLSIdentityError(.wrongKeyPassphrase, origin: origin)
            case .unsupported(let problem):
                throw TLSIdentityError(.unsupportedKeyEncryption(problem), origin: origin)
            case .corrupt(let problem, let underlying):
                var failure = TLSIdentityError(.damagedEncryptedKey(part: problem), origin: origin)
                failure.underlyingError = underlying
                throw failure
            }
        }
    }

    /// OpenSSL's traditional encrypted PEM (`DEK-Info`), decrypted by BoringSSL from the passphrase's UTF-8 bytes
    /// handed as a C string to its default callback (no NIOSSL callback involved).
    private static func decryptTraditionalPEM(
        _ bytes: [UInt8], passphrase: String, origin: String
    ) throws(TLSIdentityError) -> [UInt8] {
        // Both OpenSSL and BoringSSL read this form's passphrase into a 1,024-byte buffer (PEM_BUFSIZE) with its NUL.
        guard passphrase.utf8.count < 1024 else {
            throw TLSIdentityError(.passphraseTooLong(bytes: passphrase.utf8.count), origin: origin)
        }
        guard !passphrase.utf8.contains(0) else {
            throw TLSIdentityError(.passphraseContainsNUL, origin: origin)
        }
        do {
            return try BoringSSL.privateKeyInfo(pem: bytes, passphrase: passphrase)
        } catch {
            switch error {
            case .unreadable:
                throw TLSIdentityError(.wrongKeyPassphrase, origin: origin)
            case .unencodable:
                throw TLSIdentityError(.unsupportedKeyType, origin: origin)
            }
        }
    }

    /// The whole file, read like every certificate file: regular files, and also pipes, FIFOs, `/dev/fd/N` and
    /// `<(…)` process substitution (one shared reader, `CertificateLoader.readFile`, with its size limit).
    package static func read(_ path: String) throws(TLSIdentityError) -> [UInt8] {
        do {
            return try CertificateLoader.readFile(atPath: path)
        } catch {
            throw Self.mapped(error)
        }
    }

    /// A file or certificate-loading failure as an identity error. The loader's own words are kept for what the
    /// operating system said (an unreadable or oversized file); for the contents, its text may quote the parser
    /// that failed, so the words come from the code and that text goes to ``TLSIdentityError/underlyingError``.
    static func mapped(_ error: CertificateLoadingError) -> TLSIdentityError {
        let reason: TLSIdentityError.Reason
        var underlying: String? = error.problem
        switch error.code {
        case .unreadableFile, .notADirectory:
            reason = .unreadableFile(error.problem)
            underlying = nil
        case .fileTooLarge:
            reason = .fileTooLarge(error.problem)
            underlying = nil
        case .emptyInput: reason = .emptyFile
        case .noCertificates: reason = .noCertificate
        case .unsupportedKey, .unsupportedCertificate: reason = .unsupportedCertificate
        case .malformedPEM, .malformedDER, .malformedPKCS7: reason = .notCertificates
        default: reason = .notCertificates
        }
        var mapped = TLSIdentityError(reason, origin: error.origin)
        mapped.underlyingError = underlying
        return mapped
    }
}
