import Foundation
public import Pinning
import SwiftASN1

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a key file cannot be used: the file and the problem, one line (`FILE: PROBLEM`).
public struct TUFKeyFileError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var code: TUFKeyError.Code
    public var problem: String

    public init(path: String, code: TUFKeyError.Code, problem: String) {
        self.path = path
        self.code = code
        self.problem = problem
    }

    public var description: String { "\(self.path): \(self.problem)" }
}

extension TUFSigningKey {
    /// Reads a private key file: PEM or DER, PKCS#8 (what `openssl genpkey` writes), SEC1 or PKCS#1, or encrypted
    /// PKCS#8 (`ENCRYPTED PRIVATE KEY`, PBES2 or the PKCS#12 schemes) decrypted with `passphrase`.
    ///
    /// - Throws: ``TUFKeyFileError`` naming the file: unreadable, not a private key, encrypted without a
    ///   passphrase, a wrong passphrase, an unsupported type or curve, RSA under 2048 bits.
    public static func load(file path: String, passphrase: String? = nil) throws(TUFKeyFileError) -> TUFSigningKey {
        let bytes: [UInt8]
        do {
            bytes = try CertificateLoader.readFile(atPath: path)
        } catch {
            throw TUFKeyFileError(path: path, code: .unreadable, problem: error.problem)
        }
        func failed(_ error: TUFKeyError) -> TUFKeyFileError {
            TUFKeyFileError(path: path, code: error.code, problem: error.message)
        }
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.contains("-----BEGIN") else {
            // DER: a PrivateKeyInfo, or an EncryptedPrivateKeyInfo (whose first member is a SEQUENCE, not an INTEGER).
            if let node = try? DER.parse(bytes), case .constructed(let children) = node.content, let first = children.first(where: { _ in true }),
                first.identifier == .sequence
            {
                return try Self.decrypt(bytes, passphrase: passphrase, path: path)
            }
            do {
                return try TUFSigningKey(derRepresentation: bytes)
            } catch {
                throw failed(error)
            }
        }
        do {
            return try TUFSigningKey(pemRepresentation: text)
        } catch  where error.code == .encrypted {
            guard let block = TUFPEM.blocks(text).first(where: { $0.label == "ENCRYPTED PRIVATE KEY" }) else {
                throw TUFKeyFileError(
                    path: path, code: .encrypted,
                    problem: "the key is in OpenSSL's traditional encrypted PEM; convert it to PKCS#8 (openssl pkcs8 -topk8 -in KEY -out NEW.pem)")
            }
            guard let der = block.der else { throw TUFKeyFileError(path: path, code: .unreadable, problem: "the ENCRYPTED PRIVATE KEY block is not valid base64") }
            return try Self.decrypt(der, passphrase: passphrase, path: path)
        } catch {
            throw failed(error)
        }
    }

    private static func decrypt(_ der: [UInt8], passphrase: String?, path: String) throws(TUFKeyFileError) -> TUFSigningKey {
        guard let passphrase else {
            throw TUFKeyFileError(path: path, code: .encrypted, problem: "the private key is encrypted; give its passphrase (--passphrase-env or --passphrase-file)")
        }
        let algorithm: ASN1Node
        let ciphertext: [UInt8]
        do {
            var fields = try PasswordBasedEncryption.sequence(try DER.parse(der), "EncryptedPrivateKeyInfo")
            guard let algorithmNode = fields.next(), let dataNode = fields.next() else { throw PasswordBasedEncryption.Failure.corrupt("incomplete") }
            algorithm = algorithmNode
            ciphertext = Array(try ASN1OctetString(derEncoded: dataNode).bytes)
        } catch {
            throw TUFKeyFileError(path: path, code: .unreadable, problem: "the encrypted private key is malformed")
        }
        let plaintext: [UInt8]
        do {
            plaintext = try PasswordBasedEncryption.decrypt(ciphertext, algorithm: algorithm, passphrase: PKCS12Passphrase(passphrase))
        } catch {
            switch error {
            case .wrongPassphrase: throw TUFKeyFileError(path: path, code: .unreadable, problem: "the passphrase does not decrypt the private key")
            case .unsupported(let problem): throw TUFKeyFileError(path: path, code: .unreadable, problem: "the encrypted private key uses \(problem)")
            case .corrupt(let problem, _): throw TUFKeyFileError(path: path, code: .unreadable, problem: "the encrypted private key: \(problem)")
            }
        }
        // CBC padding checks only the last bytes: a wrong passphrase sometimes "decrypts" to bytes that are not DER.
        guard (try? DER.parse(plaintext)) != nil else {
            throw TUFKeyFileError(path: path, code: .unreadable, problem: "the passphrase does not decrypt the private key")
        }
        do {
            return try TUFSigningKey(derRepresentation: plaintext)
        } catch {
            throw TUFKeyFileError(path: path, code: error.code, problem: error.message)
        }
    }

    /// Writes the key to a new file (mode 0600; an existing file is never replaced): unencrypted PKCS#8 PEM, or
    /// with `passphrase` encrypted PKCS#8 (PBES2, PBKDF2-HMAC-SHA256, AES-256-CBC, as `openssl pkcs8 -topk8`
    /// writes by default), which `openssl pkey` reads.
    public func write(toNewFile path: String, passphrase: String? = nil) throws(TUFKeyFileError) {
        var text = self.pkcs8PEMRepresentation
        if let passphrase {
            do {
                let (algorithm, ciphertext) = try PasswordBasedEncryption.encrypt(
                    self.pkcs8DERRepresentation, scheme: .aes256, passphrase: PKCS12Passphrase(passphrase), iterations: 100_000)
                var serializer = DER.Serializer()
                try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                    serializer.serializeRawBytes(algorithm)
                    try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(ciphertext)))
                }
                text = TUFPEM.encode(serializer.serializedBytes, label: "ENCRYPTED PRIVATE KEY")
            } catch {
                throw TUFKeyFileError(path: path, code: .unreadable, problem: "cannot encrypt the key: \(error)")
            }
        }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let reason = errno == EEXIST ? "the file exists; a key file is never overwritten (remove it first, or choose another name)" : SystemErrorText.text(errno)
            throw TUFKeyFileError(path: path, code: .unreadable, problem: reason)
        }
        if let code = DescriptorWriter.writeAll(Array(text.utf8), to: descriptor) {
            close(descriptor)
            unlink(path)
            throw TUFKeyFileError(path: path, code: .unreadable, problem: "cannot write: \(SystemErrorText.text(code))")
        }
        let synced = fsync(descriptor) == 0
        let syncError = errno
        let closed = close(descriptor) == 0
        guard synced, closed else {
            let reason = SystemErrorText.text(synced ? errno : syncError)
            unlink(path)
            throw TUFKeyFileError(path: path, code: .unreadable, problem: "cannot write: \(reason)")
        }
    }
}
