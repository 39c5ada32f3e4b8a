// Every direct call into BoringSSL in this repository is in this folder, and only files here import
// CNIOBoringSSL.
//
// Why directly: swift-nio-ssl has no API for what identities need here: PKCS#12 and PKCS#8 password-based
// encryption (AES-CBC, 3DES, RC2, RC4, PBKDF2: PasswordBasedEncryption.swift), reading a traditional encrypted
// PEM key without NIOSSL's passphrase callback (which traps on any byte over 0x7F), checking a key against a
// certificate without building an NIOSSLContext (which leaks its SSL_CTX when it throws, in 2.37), and writing a
// key as PKCS#8 (the form the PKCS#12 writer stores).
//
// Why it compiles: CNIOBoringSSL is not a product of swift-nio-ssl. It is visible only because SwiftPM hands
// every transitive C module's module map to the compiler. If a swift-nio-ssl release stops that, these files stop
// compiling (they cannot silently change behaviour), and this folder is the whole of what must be replaced.
import CNIOBoringSSL

/// The key operations identities need from BoringSSL, on DER and PEM bytes so that no BoringSSL pointer leaves
/// this file. Each leaves BoringSSL's per-thread error queue empty (NIOSSL reads that queue when describing its
/// own later failures).
enum BoringSSL {
    /// Why a key could not be read or re-encoded, with BoringSSL's reasons.
    enum KeyFailure: Error {
        /// BoringSSL cannot read the key (damaged, not a key, or the passphrase does not decrypt it).
        case unreadable(String)
        /// The key was read but cannot be written as PKCS#8.
        case unencodable(String)
    }

    /// Whether a private key belongs to a certificate.
    enum KeyCheck: Equatable {
        case matches
        case differs
        case unreadableKey(String)
        case unreadableCertificate(String)
    }

    /// The PKCS#8 PrivateKeyInfo DER of the PEM private key in `pem` (PKCS#8, SEC1, PKCS#1, or OpenSSL's
    /// traditional encrypted PEM when `passphrase` is given). The passphrase's UTF-8 bytes go to BoringSSL's
    /// default callback as a C string (OpenSSL's `EVP_BytesToKey` takes the same bytes); callers reject a NUL.
    static func privateKeyInfo(pem: [UInt8], passphrase: String?) throws(KeyFailure) -> [UInt8] {
        defer { ERR_clear_error() }
        let key = pem.withUnsafeBytes { buffer -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, buffer.count) else { return nil }
            defer { BIO_free(bio) }
            guard let passphrase else {
                return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
            }
            return passphrase.withCString { cString in
                PEM_read_bio_PrivateKey(bio, nil, nil, UnsafeMutableRawPointer(mutating: cString))
            }
        }
        guard let key else {
            throw .unreadable(Self.errors())
        }
        defer { EVP_PKEY_free(key) }
        var cbb = CBB()
        guard CBB_init(&cbb, 0) == 1 else { throw .unencodable(Self.errors()) }
        defer { CBB_cleanup(&cbb) }
        guard EVP_marshal_private_key(&cbb, key) == 1 else {
            throw .unencodable(Self.errors())
        }
        return Array(UnsafeBufferPointer(start: CBB_data(&cbb), count: CBB_len(&cbb)))
    }

    /// Whether the DER private key (PKCS#8 or traditional) belongs to the DER certificate, by BoringSSL's
    /// `X509_check_private_key`.
    static func check(privateKeyDER: [UInt8], certificateDER: [UInt8]) -> KeyCheck {
        defer { ERR_clear_error() }
        return privateKeyDER.withUnsafeBufferPointer { keyBytes in
            certificateDER.withUnsafeBufferPointer { certificateBytes in
                var keyCursor = keyBytes.baseAddress
                var certificateCursor = certificateBytes.baseAddress
                guard let privateKey = d2i_AutoPrivateKey(nil, &keyCursor, keyBytes.count) else {
                    return .unreadableKey(Self.errors())
                }
                defer { EVP_PKEY_free(privateKey) }
                guard let x509 = d2i_X509(nil, &certificateCursor, certificateBytes.count) else {
                    return .unreadableCertificate(Self.errors())
                }
                defer { X509_free(x509) }
                return X509_check_private_key(x509, privateKey) == 1 ? .matches : .differs
            }
        }
    }

    /// Empties this thread's error queue, for callers that let NIOSSL fail (its errors stay queued otherwise).
    static func clearErrors() {
        ERR_clear_error()
    }

    /// Drains this thread's error queue into one line.
    private static func errors() -> String {
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
