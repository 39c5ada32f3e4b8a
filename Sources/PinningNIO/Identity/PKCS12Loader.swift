import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// Loads a PKCS#12 file without ever letting NIOSSL reach its `fatalError` (see ``PKCS12Container``).
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
            switch error {
            case .corrupt(let problem): throw self.error(.corruptFile, problem)
            case .unsupported(let problem): throw self.error(.unsupportedFormat, problem)
            }
        }
        let password = try self.checkedPassword(container)
        guard container.keyBags.count <= 1 else {
            throw self.error(.unsupportedFormat, "the file holds \(container.keyBags.count) private keys; exactly one is supported")
        }

        // The sentinel guarantees BoringSSL finds one key and a certificate matching it (no fatalError path).
        let sentinel = try self.makeSentinel()
        let rewritten: [UInt8]
        do {
            let extra = try PKCS12Container.dataContentInfo(bags: [
                try PKCS12Container.keyBag(privateKeyInfo: sentinel.privateKeyInfo),
                try PKCS12Container.certificateBag(der: sentinel.certificateDER),
            ])
            rewritten = try container.rewritten(appending: extra, password: password)
        } catch {
            throw self.error(.corruptFile, "cannot re-encode the file's structure: \(error)")
        }
        let bundle: NIOSSLPKCS12Bundle
        do {
            bundle = try NIOSSLPKCS12Bundle(buffer: rewritten, passphrase: Array(self.passphrase.utf8))
        } catch {
            throw self.classified(error)
        }
        var certificates: [NIOSSLCertificate] = []
        for certificate in bundle.certificateChain {
            let der: [UInt8]
            do {
                der = try certificate.toDERBytes()
            } catch {
                throw self.error(.corruptFile, "a certificate cannot be re-encoded: \(error)")
            }
            if der != sentinel.certificateDER { certificates.append(certificate) }
        }

        guard let keyBag = container.keyBags.first else {
            throw self.error(
                .noPrivateKey,
                "the file holds \(certificates.count) certificate(s) but no private key (exported with -nokeys?)"
            )
        }
        guard !certificates.isEmpty else {
            throw self.error(.noCertificate, "the file holds a private key but no certificate")
        }
        let key = try self.decrypt(keyBag)
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

    /// Checks the integrity MAC with the passphrase, as BoringSSL does (for an empty passphrase both the
    /// `{0,0}` and the empty encoding are tried), and returns the encoding that matched.
    private func checkedPassword(_ container: PKCS12Container) throws(TLSIdentityError) -> [UInt8] {
        guard let mac = container.mac else {
            throw self.error(.unsupportedFormat, "the file has no integrity MAC (exported with -nomac?)")
        }
        guard let encoded = PKCS12KeyDerivation.bmpPassword(self.passphrase) else {
            throw self.error(.unsupportedFormat, "the passphrase has characters PKCS#12 cannot encode (outside the Basic Multilingual Plane)")
        }
        if PKCS12KeyDerivation.verify(mac, password: encoded, data: container.authenticatedSafe) {
            return encoded
        }
        if self.passphrase.isEmpty, PKCS12KeyDerivation.verify(mac, password: [], data: container.authenticatedSafe) {
            return []
        }
        throw self.error(
            .wrongPassphrase,
            self.passphrase.isEmpty
                ? "the file is protected by a passphrase and none was given"
                : "the passphrase does not unlock this PKCS#12 file (its integrity check fails)"
        )
    }

    private func decrypt(_ bag: PKCS12Container.KeyBag) throws(TLSIdentityError) -> NIOSSLPrivateKey {
        if !bag.isShrouded {
            do {
                return try NIOSSLPrivateKey(bytes: bag.value, format: .der)
            } catch {
                throw self.error(.corruptFile, "the private key cannot be read: \(error)")
            }
        }
        let pem = "-----BEGIN ENCRYPTED PRIVATE KEY-----\n"
            + Data(bag.value).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
            + "\n-----END ENCRYPTED PRIVATE KEY-----\n"
        let secret = Array(self.passphrase.utf8)
        do {
            return try NIOSSLPrivateKey(bytes: Array(pem.utf8), format: .pem) { (setter: ([UInt8]) -> Void) in
                setter(secret)
            }
        } catch {
            throw self.error(.wrongPassphrase, "the passphrase unlocks the file but does not decrypt its private key: \(error)")
        }
    }

    /// Maps a BoringSSL failure on the rewritten file. The MAC already matched, so failures here are
    /// damaged encrypted content or layouts we do not support.
    private func classified(_ error: any Error) -> TLSIdentityError {
        let text = String(describing: error)
        if text.contains("MULTIPLE_PRIVATE_KEYS") {
            return self.error(.unsupportedFormat, "the private key is stored inside an encrypted safe, or there are several keys; only a key in its own shrouded key bag (as OpenSSL, Windows and macOS export) is supported")
        }
        if text.contains("INCORRECT_PASSWORD") || text.contains("DECRYPT") {
            return self.error(.wrongPassphrase, "the passphrase does not decrypt the certificates: \(text)")
        }
        return self.error(.corruptFile, "the encrypted content cannot be read: \(text)")
    }

    private struct Sentinel {
        var privateKeyInfo: [UInt8]
        var certificateDER: [UInt8]
    }

    private func makeSentinel() throws(TLSIdentityError) -> Sentinel {
        do {
            let key = P256.Signing.PrivateKey()
            let name = try DistinguishedName { CommonName("swift-pinning PKCS#12 sentinel") }
            let now = Date()
            let certificate = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: Certificate.PublicKey(key.publicKey),
                notValidBefore: now.addingTimeInterval(-60),
                notValidAfter: now.addingTimeInterval(3600),
                issuer: name,
                subject: name,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: Certificate.Extensions(),
                issuerPrivateKey: Certificate.PrivateKey(key)
            )
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return Sentinel(privateKeyInfo: Array(key.derRepresentation), certificateDER: serializer.serializedBytes)
        } catch {
            throw self.error(.unsupportedFormat, "internal: cannot mint the sentinel certificate: \(error)")
        }
    }

    private func error(_ code: TLSIdentityError.Code, _ problem: String) -> TLSIdentityError {
        TLSIdentityError(code: code, origin: self.origin, problem: problem)
    }
}
