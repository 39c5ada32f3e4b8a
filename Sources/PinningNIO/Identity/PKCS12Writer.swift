// The key is read and checked against the leaf by BoringSSL (BoringSSL/BoringSSL.swift, the one place that calls
// it directly, says why).
//
// The file itself is assembled here, not by BoringSSL's `PKCS12_create`: that encodes the passphrase as UCS-2 and
// fails on characters outside the Basic Multilingual Plane, which OpenSSL 3 encodes as UTF-16 surrogate pairs.
// Assembling it ourselves gives one passphrase encoding, OpenSSL 3's, for every file we read and write.
import Crypto
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

/// Writes PKCS#12 (PFX) files laid out as OpenSSL and BoringSSL write them: the certificates (leaf first) in one
/// encrypted safe, the key in a shrouded key bag in a plain safe, the leaf and key paired by a localKeyID and
/// named by a friendlyName, and an HMAC-SHA1 integrity MAC (the only MAC every importer accepts).
package enum PKCS12Writer {
    /// The PBE/PBKDF2 and MAC iteration count (OpenSSL's default).
    package static let iterations: Int32 = 2048

    /// A failure to write, with the reason.
    package struct WriteError: Error, CustomStringConvertible {
        package var description: String
    }

    /// The DER bytes of a PFX holding `privateKey` and `certificateChain` (leaf first).
    ///
    /// - Parameters:
    ///   - certificateChain: The leaf (matching `privateKey`) followed by its intermediates. Not empty.
    ///   - privateKeyPEM: The leaf's unencrypted private key as PEM (PKCS#8, SEC1 or PKCS#1).
    ///   - passphrase: Protects the key, the certificates and the MAC; any Unicode text without NUL, encoded as
    ///     OpenSSL 3 encodes it (UTF-8 for PBES2, UTF-16BE with surrogate pairs for the PKCS#12 KDF).
    ///   - friendlyName: The friendlyName attribute of the key and leaf (what keychains show).
    ///   - encryption: The algorithms.
    /// - Throws: ``WriteError`` for an empty chain, a NUL in the passphrase or name, a key BoringSSL cannot read,
    ///   or a key that does not match the leaf.
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
        // OpenSSL reads passphrases as C strings: a NUL would end it there, so the file would not open in OpenSSL.
        guard !passphrase.utf8.contains(0), !friendlyName.utf8.contains(0) else {
            throw WriteError(description: "the passphrase or name contains a NUL character")
        }
        var certificateDERs: [[UInt8]] = []
        for certificate in certificateChain {
            var serializer = DER.Serializer()
            do {
                try serializer.serialize(certificate)
            } catch {
                throw WriteError(description: "cannot encode \(certificate.subject): \(error)")
            }
            certificateDERs.append(serializer.serializedBytes)
        }
        let privateKeyInfo = try self.privateKeyInfo(privateKeyPEM, leafDER: certificateDERs[0], leaf: leafCertificate)

        let scheme: PasswordBasedEncryption.Scheme = encryption == .aes256 ? .aes256 : .legacy3DES
        let secret = PKCS12Passphrase(passphrase)
        let iterations = Int(self.iterations)
        do {
            let attributes = [
                try PKCS12Container.friendlyNameAttribute(friendlyName),
                // OpenSSL and BoringSSL use the SHA-1 of the leaf certificate as the key ID.
                try PKCS12Container.localKeyIDAttribute(Array(Insecure.SHA1.hash(data: certificateDERs[0]))),
            ]
            var certificateBags = [try PKCS12Container.certificateBag(der: certificateDERs[0], attributes: attributes)]
            for der in certificateDERs.dropFirst() {
                certificateBags.append(try PKCS12Container.certificateBag(der: der))
            }
            let certificates = try PasswordBasedEncryption.encrypt(
                PKCS12Container.safeContents(certificateBags), scheme: scheme, passphrase: secret,
                iterations: iterations
            )
            let key = try PasswordBasedEncryption.encrypt(
                privateKeyInfo, scheme: scheme, passphrase: secret, iterations: iterations)
            let keyBag = try PKCS12Container.shroudedKeyBag(
                algorithm: key.algorithm, ciphertext: key.ciphertext, attributes: attributes)
            return try PKCS12Container.pfx(
                contentInfos: [
                    try PKCS12Container.encryptedDataContentInfo(
                        algorithm: certificates.algorithm, ciphertext: certificates.ciphertext),
                    try PKCS12Container.dataContentInfo(bags: [keyBag]),
                ],
                password: secret.bmp,
                macIterations: iterations
            )
        } catch {
            throw WriteError(description: "cannot assemble the PKCS#12 structure: \(error)")
        }
    }

    /// The key's PKCS#8 PrivateKeyInfo DER, after checking that it is the leaf's key.
    private static func privateKeyInfo(_ pem: String, leafDER: [UInt8], leaf: Certificate) throws(WriteError) -> [UInt8] {
        let der: [UInt8]
        do {
            der = try BoringSSL.privateKeyInfo(pem: Array(pem.utf8), passphrase: nil)
        } catch {
            switch error {
            case .unreadable(let reasons):
                throw WriteError(description: "BoringSSL cannot read the private key: \(reasons)")
            case .unencodable(let reasons):
                throw WriteError(description: "BoringSSL cannot encode the private key as PKCS#8: \(reasons)")
            }
        }
        switch BoringSSL.check(privateKeyDER: der, certificateDER: leafDER) {
        case .matches:
            return der
        case .differs:
            throw WriteError(description: "the private key does not belong to \(leaf.subject)")
        case .unreadableKey(let reasons):
            throw WriteError(description: "BoringSSL cannot read the private key: \(reasons)")
        case .unreadableCertificate(let reasons):
            throw WriteError(description: "BoringSSL cannot read \(leaf.subject): \(reasons)")
        }
    }
}
