import SwiftASN1
public import X509
import _CryptoExtras

/// A certificate together with its private key, as ``TestPKI`` mints them.
public struct TestIdentity: Sendable, Hashable {
    /// The certificate.
    public let certificate: Certificate
    /// The certificate's private key.
    public let privateKey: Certificate.PrivateKey
    /// The private key as PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`) for every key type, RSA included.
    public let privateKeyPEM: String

    /// Pairs a certificate with its private key.
    ///
    /// - Parameters:
    ///   - certificate: The certificate.
    ///   - privateKey: The private key whose public key is `certificate.publicKey`.
    /// - Throws: ``TestPKIError/Code/keyDoesNotMatchCertificate`` when the keys differ,
    ///   ``TestPKIError/Code/unsupportedKey`` when the key cannot be written as PKCS#8 PEM.
    public init(certificate: Certificate, privateKey: Certificate.PrivateKey) throws {
        guard privateKey.publicKey == certificate.publicKey else {
            throw TestPKIError(
                .keyDoesNotMatchCertificate,
                "the private key does not belong to \(certificate.subject)"
            )
        }
        self.certificate = certificate
        self.privateKey = privateKey
        self.privateKeyPEM = try Self.pkcs8PEM(privateKey)
    }

    /// The certificate as PEM (`-----BEGIN CERTIFICATE-----`), ending in a newline.
    public var certificatePEM: String {
        TestPKI.pemBundle([self.certificate])
    }

    /// The certificate's DER encoding.
    public var der: [UInt8] {
        Self.der(self.certificate)
    }

    /// The certificate's subject key identifier (from its extension, else SHA-1 of the key bits).
    public var subjectKeyIdentifier: ArraySlice<UInt8> {
        Self.subjectKeyIdentifier(of: self.certificate)
    }

    static func subjectKeyIdentifier(of certificate: Certificate) -> ArraySlice<UInt8> {
        do {
            if let ski = try certificate.extensions.subjectKeyIdentifier {
                return ski.keyIdentifier
            }
        } catch {
            // A malformed SKI extension: fall back to the RFC 5280 method 1 identifier below.
        }
        return SubjectKeyIdentifier(hash: certificate.publicKey).keyIdentifier
    }

    static func der(_ certificate: Certificate) -> [UInt8] {
        var serializer = DER.Serializer()
        do {
            try serializer.serialize(certificate)
        } catch {
            // Serializing a certificate that was built or parsed by swift-certificates does not fail.
            return []
        }
        return serializer.serializedBytes
    }

    /// swift-certificates writes RSA keys as PKCS#1 ("RSA PRIVATE KEY"); every other key type is already PKCS#8.
    static func pkcs8PEM(_ key: Certificate.PrivateKey) throws -> String {
        let document: PEMDocument
        do {
            document = try key.serializeAsPEM()
        } catch {
            throw TestPKIError(.unsupportedKey, "cannot serialize \(key): \(error)")
        }
        switch document.discriminator {
        case "PRIVATE KEY":
            return document.pemString + "\n"
        case "RSA PRIVATE KEY":
            let rsa = try _RSA.Signing.PrivateKey(derRepresentation: document.derBytes)
            let pem = rsa.pkcs8PEMRepresentation
            return pem.hasSuffix("\n") ? pem : pem + "\n"
        default:
            throw TestPKIError(.unsupportedKey, "unexpected PEM type \(document.discriminator) for \(key)")
        }
    }
}
