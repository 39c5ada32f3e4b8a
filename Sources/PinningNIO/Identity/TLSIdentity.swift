import CNIOBoringSSL
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
                throw TLSIdentityError(
                    code: .unsupportedFormat,
                    origin: origin,
                    problem: "certificate \(index + 1) cannot be read (unsupported key or signature algorithm?): \(error)"
                )
            }
        }
        guard let first = parsed.first else {
            throw TLSIdentityError(code: .noCertificate, origin: origin, problem: "the input holds no certificate")
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
    public static func pkcs12(bytes: [UInt8], passphrase: String, origin: String) throws(TLSIdentityError) -> TLSIdentity {
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
                throw TLSIdentityError(code: .corruptFile, origin: certificateOrigin, problem: "NIOSSL cannot load \(certificate.subject): \(error)")
            }
        }
        let key = try Self.privateKey(privateKey, passphrase: passphrase, origin: keyOrigin)
        guard let leaf = nioChain.first else {
            throw TLSIdentityError(code: .noCertificate, origin: certificateOrigin, problem: "no certificate")
        }
        guard Self.key(key, matches: leaf) else {
            throw TLSIdentityError(
                code: .noCertificateMatchingKey,
                origin: keyOrigin,
                problem: "the key does not belong to the first certificate of \(certificateOrigin) (\(certificates[0].subject)); put the client certificate first"
            )
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
            ERR_clear_error()
            return Self.contextAccepts(key, with: certificate)
        }
        // BoringSSL reports a mismatch on its thread's error queue, which NIOSSL reads when describing its own
        // later failures: leave it empty.
        defer { ERR_clear_error() }
        return keyDER.withUnsafeBufferPointer { keyBytes in
            certificateDER.withUnsafeBufferPointer { certificateBytes in
                var keyCursor = keyBytes.baseAddress
                var certificateCursor = certificateBytes.baseAddress
                guard let privateKey = d2i_AutoPrivateKey(nil, &keyCursor, keyBytes.count) else {
                    return false
                }
                defer { EVP_PKEY_free(privateKey) }
                guard let x509 = d2i_X509(nil, &certificateCursor, certificateBytes.count) else {
                    return false
                }
                defer { X509_free(x509) }
                return X509_check_private_key(x509, privateKey) == 1
            }
        }
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

    static func privateKey(_ bytes: [UInt8], passphrase: String?, origin: String) throws(TLSIdentityError) -> NIOSSLPrivateKey {
        let text = String(decoding: bytes, as: UTF8.self)
        let isPEM = text.contains("-----BEGIN")
        if isPEM, !text.contains("PRIVATE KEY-----") {
            throw TLSIdentityError(code: .noPrivateKey, origin: origin, problem: "no PRIVATE KEY block in the PEM input")
        }
        let encrypted = text.contains("ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED")
        if encrypted, passphrase == nil {
            throw TLSIdentityError(code: .wrongPassphrase, origin: origin, problem: "the private key is encrypted and no passphrase was given")
        }
        // A passphrase callback is always given: without one BoringSSL would prompt on the terminal.
        let secret = Array((passphrase ?? "").utf8)
        do {
            return try NIOSSLPrivateKey(bytes: bytes, format: isPEM ? .pem : .der) { (setter: ([UInt8]) -> Void) in
                setter(secret)
            }
        } catch {
            if encrypted {
                throw TLSIdentityError(code: .wrongPassphrase, origin: origin, problem: "the passphrase does not decrypt the private key")
            }
            throw TLSIdentityError(code: .corruptFile, origin: origin, problem: "not a readable private key: \(error)")
        }
    }

    static func read(_ path: String) throws(TLSIdentityError) -> [UInt8] {
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            throw TLSIdentityError(code: .unreadableFile, origin: path, problem: "cannot read the file: it does not exist or is not accessible")
        }
        if let type = attributes[.type] as? FileAttributeType, type != .typeRegular {
            throw TLSIdentityError(code: .unreadableFile, origin: path, problem: "not a regular file")
        }
        if let size = attributes[.size] as? Int, size > Self.maximumFileSize {
            throw TLSIdentityError(code: .fileTooLarge, origin: path, problem: "\(size) bytes, more than \(Self.maximumFileSize)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TLSIdentityError(code: .unreadableFile, origin: path, problem: "cannot read the file")
        }
        guard data.count <= Self.maximumFileSize else {
            throw TLSIdentityError(code: .fileTooLarge, origin: path, problem: "\(data.count) bytes, more than \(Self.maximumFileSize)")
        }
        return Array(data)
    }

    static func mapped(_ error: CertificateLoadingError) -> TLSIdentityError {
        let code: TLSIdentityError.Code
        switch error.code {
        case .unreadableFile, .notADirectory: code = .unreadableFile
        case .fileTooLarge: code = .fileTooLarge
        case .noCertificates, .emptyInput: code = .noCertificate
        case .unsupportedKey: code = .unsupportedFormat
        default: code = .corruptFile
        }
        return TLSIdentityError(code: code, origin: error.origin, problem: error.problem)
    }
}
