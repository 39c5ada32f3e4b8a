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
            throw self.error(.emptyFile)
        }
        guard bytes.count <= TLSIdentity.maximumFileSize else {
            throw self.error(.fileTooLarge("\(bytes.count) bytes, more than \(TLSIdentity.maximumFileSize)"))
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
            throw self.error(.pkcs12SeveralKeys(keyBags.count))
        }
        var certificates: [NIOSSLCertificate] = []
        for (index, der) in certificateDERs.enumerated() {
            do {
                certificates.append(try NIOSSLCertificate(bytes: der, format: .der))
            } catch {
                throw self.error(.unusableCertificate(index: index + 1), underlying: error)
            }
        }
        guard let keyBag = keyBags.first else {
            throw self.error(.pkcs12WithoutKey(certificates: certificates.count))
        }
        guard !certificates.isEmpty else {
            throw self.error(.pkcs12WithoutCertificate)
        }
        let key = try self.privateKey(keyBag, passphrase: passphrase, pkcs12Password: pkcs12Password)
        guard let leafIndex = certificates.firstIndex(where: { TLSIdentity.key(key, matches: $0) }) else {
            throw self.error(.keyMatchesNoCertificate(certificates: certificates.count))
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
            throw self.error(.unsupportedPKCS12("the file has no integrity MAC (exported with -nomac?)"))
        }
        let candidates = passphrase.text.isEmpty ? [[], passphrase.bmp] : [passphrase.bmp]
        for candidate in candidates
        where PKCS12KeyDerivation.verify(mac, password: candidate, data: container.authenticatedSafe) {
            return candidate
        }
        throw self.error(passphrase.text.isEmpty ? .pkcs12PassphraseMissing : .wrongPKCS12Passphrase)
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
                throw self.error(.damagedEncryptedKey(part: "its EncryptedPrivateKeyInfo"), underlying: error)
            }
            privateKeyInfo = try self.decrypt(
                ciphertext, algorithm: algorithm, passphrase: passphrase, pkcs12Password: pkcs12Password,
                what: "the private key")
        }
        do {
            return try NIOSSLPrivateKey(bytes: privateKeyInfo, format: .der)
        } catch {
            throw self.error(.unreadableKey, underlying: error)
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
            throw self.error(.damagedPKCS12(part: "the encryption algorithm of \(what)"), underlying: error)
        }
        do {
            return try PasswordBasedEncryption.decrypt(
                ciphertext, algorithm: node, passphrase: passphrase, pkcs12Password: pkcs12Password)
        } catch {
            switch error {
            case .wrongPassphrase:
                throw self.error(.secondPassphrase(what: what))
            case .unsupported(let problem):
                throw self.error(.unsupportedPKCS12("\(what): \(problem)"))
            case .corrupt(let problem, let underlying):
                throw self.error(.damagedPKCS12(part: "\(what): \(problem)"), underlyingText: underlying)
            }
        }
    }

    private func mapped(_ problem: PKCS12Container.Problem) -> TLSIdentityError {
        switch problem {
        case .corrupt(let text, let underlying): return self.error(.damagedPKCS12(part: text), underlyingText: underlying)
        case .unsupported(let text): return self.error(.unsupportedPKCS12(text))
        case .notPKCS12(let underlying): return self.error(.notPKCS12, underlyingText: underlying)
        }
    }

    private func error(_ reason: TLSIdentityError.Reason, underlying: (any Error)? = nil) -> TLSIdentityError {
        TLSIdentityError(reason, origin: self.origin, underlying: underlying)
    }

    private func error(_ reason: TLSIdentityError.Reason, underlyingText: String?) -> TLSIdentityError {
        var error = TLSIdentityError(reason, origin: self.origin)
        error.underlyingError = underlyingText
        return error
    }
}
