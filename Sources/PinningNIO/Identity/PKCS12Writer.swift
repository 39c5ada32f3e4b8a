// BoringSSL is reached directly because NIOSSL's `NIOSSLPKCS12Bundle.serialize(passphrase:)` always passes
// 0 for the algorithm NIDs (AES-256-CBC/PBKDF2, which macOS before 10.15/iOS before 13, Windows before Server
// 2019 and Java 8 before 8u301 cannot read) and can `fatalError`/`preconditionFailure`. CNIOBoringSSL is not
// a product of swift-nio-ssl: it is visible here only because SwiftPM hands every transitive C module's
// module map to the compiler. If a swift-nio-ssl release stops that, this file stops compiling (it cannot
// silently change behaviour); the fallback is a hand-written PFX with a Swift 3DES.
import CNIOBoringSSL
import CNIOBoringSSLShims
import SwiftASN1
package import X509

/// How a written PKCS#12 encrypts its key and certificates.
package enum PKCS12Encryption: Sendable, Hashable {
    /// PBES2 with AES-256-CBC and PBKDF2-HMAC-SHA256 (BoringSSL's and OpenSSL 3's default).
    case aes256
    /// pbeWithSHAAnd3-KeyTripleDES-CBC for the key and the certificates: the form older tools (macOS before
    /// 10.15, Windows before Server 2019, Java 8 before 8u301, OpenSSL 1.0) can import.
    case legacy3DES
}

/// Writes PKCS#12 (PFX) files with BoringSSL's `PKCS12_create`: one key bag and the certificate chain,
/// HMAC-SHA1 integrity (the only MAC every importer accepts).
package enum PKCS12Writer {
    /// The PBE/PBKDF2 and MAC iteration count (OpenSSL's default).
    package static let iterations: Int32 = 2048

    /// A failure to write, with BoringSSL's reason.
    package struct WriteError: Error, CustomStringConvertible {
        package var description: String
    }

    /// The DER bytes of a PFX holding `privateKey` and `certificateChain` (leaf first).
    ///
    /// - Parameters:
    ///   - certificateChain: The leaf (matching `privateKey`) followed by its intermediates. Not empty.
    ///   - privateKeyPEM: The leaf's unencrypted private key as PEM (PKCS#8, SEC1 or PKCS#1).
    ///   - passphrase: Protects the key bag, the certificates and the MAC. Must not contain NUL.
    ///   - friendlyName: The friendlyName attribute of the key and leaf (what keychains show).
    ///   - encryption: The algorithms.
    /// - Throws: ``WriteError`` for an empty chain, a key BoringSSL cannot read, a key that does not match
    ///   the leaf, or a BoringSSL failure.
    package static func serialize(
        certificateChain: [Certificate],
        privateKeyPEM: String,
        passphrase: String,
        friendlyName: String,
        encryption: PKCS12Encryption
    ) throws(WriteError) -> [UInt8] {
        guard let leafCertificate = certificateChain.first else {
            throw WriteError(description: "no certificate to export")
        }
        guard !passphrase.utf8.contains(0), !friendlyName.utf8.contains(0) else {
            throw WriteError(description: "the passphrase or name contains a NUL character")
        }
        let leaf = try self.x509(leafCertificate)
        defer { X509_free(leaf) }
        let key = try self.privateKey(privateKeyPEM)
        defer { EVP_PKEY_free(key) }
        guard X509_check_private_key(leaf, key) == 1 else {
            ERR_clear_error()
            throw WriteError(description: "the private key does not belong to \(leafCertificate.subject)")
        }
        guard let stack = CNIOBoringSSLShims_sk_X509_new_null() else {
            throw WriteError(description: "out of memory")
        }
        defer { CNIOBoringSSLShims_sk_X509_pop_free(stack, X509_free) }
        for certificate in certificateChain.dropFirst() {
            let x509 = try self.x509(certificate)
            if CNIOBoringSSLShims_sk_X509_push(stack, x509) == 0 {
                X509_free(x509)
                throw WriteError(description: "out of memory")
            }
        }
        let nid: Int32
        switch encryption {
        case .aes256: nid = NID_aes_256_cbc
        case .legacy3DES: nid = NID_pbe_WithSHA1And3_Key_TripleDES_CBC
        }
        let created = PKCS12_create(passphrase, friendlyName, key, leaf, stack, nid, nid, self.iterations, self.iterations, 0)
        guard let pkcs12 = created else {
            throw WriteError(description: "PKCS12_create failed: \(self.boringSSLErrors())")
        }
        defer { PKCS12_free(pkcs12) }
        let length = i2d_PKCS12(pkcs12, nil)
        guard length > 0 else {
            throw WriteError(description: "i2d_PKCS12 failed: \(self.boringSSLErrors())")
        }
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let written = bytes.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_PKCS12(pkcs12, &cursor)
        }
        guard written == length else {
            throw WriteError(description: "i2d_PKCS12 wrote \(written) of \(length) bytes: \(self.boringSSLErrors())")
        }
        return bytes
    }

    private static func x509(_ certificate: Certificate) throws(WriteError) -> OpaquePointer {
        var serializer = DER.Serializer()
        do {
            try serializer.serialize(certificate)
        } catch {
            throw WriteError(description: "cannot encode \(certificate.subject): \(error)")
        }
        let der = serializer.serializedBytes
        let parsed = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
        guard let parsed else {
            throw WriteError(description: "BoringSSL cannot read \(certificate.subject): \(self.boringSSLErrors())")
        }
        return parsed
    }

    private static func privateKey(_ pem: String) throws(WriteError) -> OpaquePointer {
        let bytes = Array(pem.utf8)
        let key = bytes.withUnsafeBytes { buffer -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, buffer.count) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let key else {
            throw WriteError(description: "BoringSSL cannot read the private key: \(self.boringSSLErrors())")
        }
        return key
    }

    /// Drains BoringSSL's error queue for this thread into one line.
    private static func boringSSLErrors() -> String {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            let reason = buffer.withUnsafeMutableBufferPointer { pointer -> String in
                guard let base = pointer.baseAddress else { return "error \(code)" }
                ERR_error_string_n(code, base, pointer.count)
                return String(cString: base)
            }
            reasons.append(reason)
        }
        return reasons.isEmpty ? "no reason given" : reasons.joined(separator: "; ")
    }
}
