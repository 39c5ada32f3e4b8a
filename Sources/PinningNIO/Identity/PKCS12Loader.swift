import Foundation
import NIOSSL
import SwiftASN1
import X509

/// Loads a PKCS#12 file: the structure and MAC are read by ``PKCS12Container``, every safe and key is decrypted by
/// ``PasswordBasedEncryption`` with the passphrase encoded as OpenSSL 3 encodes it, and NIOSSL only ever sees
/// plain DER certificates and keys (never the file, never the passphrase).
struct PKCS12Loader {
    var origin: String
    var passphrase: String

    func load(_ bytes: [UInt8]) throws(TLSIdentityError) -> TLSIdentity {
        guard !bytes.isEmpty else {
            throw self.error(.corruptFile, "the file is empty")
        }
        guard bytes.count <= TLSIdentity.maximumFileSize else {
            throw self.error(.fileTooLarge, "\(bytes.count) bytes, more than \(TLSIdentity.maximumFileSize)")
        }
        let container: PKCS12Container
        do {
            container = try PKCS12Container(derEncoded: bytes)
        } catch {
            throw self.mapped(error)
        }
        let passphrase = PKCS12Passphrase(self.passphrase)
        let pkcs12Password = try self.checkedPassword(container, passphrase)

        var keyBags: [PKCS12Container.KeyBag] = []
        var certificateDERs: [[UInt8]] = []
        for safe in container.safes {
            let safeContents: [UInt8]
            switch safe {
            case .plain(let bytes):
                safeContents = bytes
            case .encrypted(let algorithm, let ciphertext):
                safeContents = try self.decrypt(
                    ciphertext, algorithm: algorithm, passphrase: passphrase, pkcs12Password: pkcs12Password,
                    what: "the certificates")
            }
            let bags: [PKCS12Container.Bag]
            do {
                bags = try PKCS12Container.bags(inSafeContents: safeContents)
            } catch {
                throw self.mapped(error)
            }
            for bag in bags {
                switch bag {
                case .key(let keyBag): keyBags.append(keyBag)
                case .certificate(let der): certificateDERs.append(der)
                }
            }
        }
        guard keyBags.count <= 1 else {
            throw self.error(
                .unsupportedFormat, "the file holds \(keyBags.count) private keys; exactly one is supported")
        }
        var certificates: [NIOSSLCertificate] = []
        for (index, der) in certificateDERs.enumerated() {
            do {
                certificates.append(try NIOSSLCertificate(bytes: der, format: .der))
            } catch {
                throw self.error(
                    .corruptFile, "certificate \(index + 1) of the file is not a readable X.509 certificate")
            }
        }
        guard let keyBag = keyBags.first else {
            throw self.error(
                .noPrivateKey,
                "the file holds \(certificates.count) certificate(s) but no private key (exported with -nokeys?)"
            )
        }
        guard !certificates.isEmpty else {
            throw self.error(.noCertificate, "the file holds a private key but no certificate")
        }
        let key = try self.privateKey(keyBag, passphrase: passphrase, pkcs12Password: pkcs12Password)
        guard let leafIndex = certificates.firstIndex(where: { TLSIdentity.key(key, matches: $0) }) else {
            throw self.error(
                .noCertificateMatchingKey,
                "none of the file's \(certificates.count) certificate(s) carries the public key of its private key"
            )
        }
        var chain = certificates
        let leaf = chain.remove(at: leafIndex)
        return try TLSIdentity(chain: [leaf] + chain, key: key, origin: self.origin)
    }

    /// Checks the integrity MAC with the passphrase and returns the PKCS#12 KDF password encoding that matched.
    ///
    /// A non-empty passphrase is its BMPString with the two-byte NUL (OpenSSL 3). For an empty one both the
    /// empty byte string and `{0, 0}` are tried, as OpenSSL's `PKCS12_parse` does ("no password" and "the empty
    /// password" are different in PKCS#12); the one that matched also decrypts the `pbeWithSHAAnd…` safes.
    private func checkedPassword(
        _ container: PKCS12Container, _ passphrase: PKCS12Passphrase
    ) throws(TLSIdentityError) -> [UInt8] {
        guard let mac = container.mac else {
            throw self.error(.unsupportedFormat, "the file has no integrity MAC (exported with -nomac?)")
        }
        let candidates = passphrase.text.isEmpty ? [[], passphrase.bmp] : [passphrase.bmp]
        for candidate in candidates
        where PKCS12KeyDerivation.verify(mac, password: candidate, data: container.authenticatedSafe) {
            return candidate
        }
        throw self.error(
            .wrongPassphrase,
            passphrase.text.isEmpty
                ? "the file is protected by a passphrase and none was given"
                : "the passphrase does not unlock this PKCS#12 file (its integrity check fails)"
        )
    }

    private func privateKey(
        _ bag: PKCS12Container.KeyBag,
        passphrase: PKCS12Passphrase,
        pkcs12Password: [UInt8]
    ) throws(TLSIdentityError) -> NIOSSLPrivateKey {
        var privateKeyInfo = bag.value
        if bag.isShrouded {
            // EncryptedPrivateKeyInfo ::= SEQUENCE { encryptionAlgorithm AlgorithmIdentifier, encryptedData OCTET STRING }
            let algorithm: [UInt8]
            let ciphertext: [UInt8]
            do {
                var fields = try PasswordBasedEncryption.sequence(try DER.parse(bag.value), "EncryptedPrivateKeyInfo")
                guard let algorithmNode = fields.next(), let dataNode = fields.next() else {
                    throw PasswordBasedEncryption.Failure.corrupt("the EncryptedPrivateKeyInfo is incomplete")
                }
                algorithm = Array(algorithmNode.encodedBytes)
                ciphertext = Array(try ASN1OctetString(derEncoded: dataNode).bytes)
            } catch {
                throw self.error(.corruptFile, "the encrypted private key is malformed")
            }
            privateKeyInfo = try self.decrypt(
                ciphertext, algorithm: algorithm, passphrase: passphrase, pkcs12Password: pkcs12Password,
                what: "the private key")
        }
        do {
            return try NIOSSLPrivateKey(bytes: privateKeyInfo, format: .der)
        } catch {
            throw self.error(
                .corruptFile, "the private key cannot be read (damaged, or a key type BoringSSL does not support)")
        }
    }

    /// Decrypts a safe or key. The MAC already matched, so a failure means damage, a second passphrase (OpenSSL's
    /// `-twopass`), or a scheme we do not support.
    private func decrypt(
        _ ciphertext: [UInt8],
        algorithm: [UInt8],
        passphrase: PKCS12Passphrase,
        pkcs12Password: [UInt8],
        what: String
    ) throws(TLSIdentityError) -> [UInt8] {
        let node: ASN1Node
        do {
            node = try DER.parse(algorithm)
        } catch {
            throw self.error(.corruptFile, "the encryption algorithm of \(what) is malformed")
        }
        do {
            return try PasswordBasedEncryption.decrypt(
                ciphertext, algorithm: node, passphrase: passphrase, pkcs12Password: pkcs12Password)
        } catch {
            switch error {
            case .wrongPassphrase:
                throw self.error(
                    .wrongPassphrase,
                    "the passphrase unlocks the file's integrity check but does not decrypt \(what) (damaged, or encrypted with a second passphrase)"
                )
            case .unsupported(let problem):
                throw self.error(.unsupportedFormat, "\(what): \(problem)")
            case .corrupt(let problem):
                throw self.error(.corruptFile, "\(what): \(problem)")
            }
        }
    }

    private func mapped(_ problem: PKCS12Container.Problem) -> TLSIdentityError {
        switch problem {
        case .corrupt(let text): return self.error(.corruptFile, text)
        case .unsupported(let text): return self.error(.unsupportedFormat, text)
        }
    }

    private func error(_ code: TLSIdentityError.Code, _ problem: String) -> TLSIdentityError {
        TLSIdentityError(code: code, origin: self.origin, problem: problem)
    }
}
