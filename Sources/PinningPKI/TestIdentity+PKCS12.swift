// PKCS#12 export lives in PinningNIO (Identity/BoringSSL), beside the PKCS#12 reader that shares its structures
// and ciphers; this file is the public face of it for PinningPKI users. PinningPKI depends on PinningNIO, never
// the other way round, so the one writer that `pinning pki export` ships is the one users' tests call, and every
// file it writes is one TLSIdentity.pkcs12 reads back.
import PinningNIO
public import X509

extension TestIdentity {
    /// How ``pkcs12(passphrase:intermediates:friendlyName:encryption:)`` encrypts the key and certificates.
    public enum PKCS12Encryption: Sendable, Hashable, CaseIterable {
        /// PBES2 with AES-256-CBC and PBKDF2-HMAC-SHA256 (OpenSSL 3's and BoringSSL's default).
        case aes256
        /// pbeWithSHAAnd3-KeyTripleDES-CBC: the form older importers need (macOS before 10.15, Windows before
        /// Server 2019, Java 8 before 8u301, OpenSSL 1.0).
        case legacy3DES
    }

    /// This identity as a PKCS#12 (`.p12`/`.pfx`) file: the key and the certificate, then `intermediates`, laid
    /// out as OpenSSL writes them (localKeyID and friendlyName on the key and leaf, an HMAC-SHA1 MAC, 2,048
    /// iterations).
    ///
    /// ```swift
    /// let chain = try TestChain()
    /// let p12 = try chain.leaf.pkcs12(passphrase: "secret", intermediates: [chain.intermediate.certificate])
    /// ```
    ///
    /// - Parameters:
    ///   - passphrase: Protects the key, the certificates and the MAC; any text without NUL, encoded as OpenSSL 3
    ///     encodes it, so `openssl pkcs12` opens the file with the same passphrase.
    ///   - intermediates: The certificates to store after the leaf, nearest issuer first (not the root).
    ///   - friendlyName: The name keychains show for the key and certificate.
    ///   - encryption: The algorithms; ``PKCS12Encryption/aes256`` unless an old importer needs
    ///     ``PKCS12Encryption/legacy3DES``.
    /// - Returns: The DER bytes of the file.
    /// - Throws: ``TestPKIError/Code/pkcs12Export`` with the reason when the file cannot be written.
    public func pkcs12(
        passphrase: String,
        intermediates: [Certificate] = [],
        friendlyName: String = "identity",
        encryption: PKCS12Encryption = .aes256
    ) throws(TestPKIError) -> [UInt8] {
        do {
            return try PKCS12Writer.serialize(
                certificateChain: [self.certificate] + intermediates,
                privateKeyPEM: self.privateKeyPEM,
                passphrase: passphrase,
                friendlyName: friendlyName,
                encryption: encryption == .aes256 ? .aes256 : .legacy3DES
            )
        } catch {
            throw TestPKIError(.pkcs12Export, error.description)
        }
    }
}
