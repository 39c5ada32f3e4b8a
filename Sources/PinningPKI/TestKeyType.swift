import Crypto
public import X509
import _CryptoExtras

/// The key algorithms ``TestPKI`` can mint certificates for.
public enum TestKeyType: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// ECDSA over NIST P-256; certificates it issues are signed with ecdsa-with-SHA256.
    case p256
    /// ECDSA over NIST P-384; certificates it issues are signed with ecdsa-with-SHA384.
    case p384
    /// RSA 2048 (slow to generate: about 0.1 s); certificates it issues are signed with sha256WithRSAEncryption.
    case rsa2048
    /// Ed25519; certificates it issues are signed with Ed25519.
    case ed25519

    /// The key type's name, e.g. `P-256`.
    public var description: String {
        switch self {
        case .p256: return "p256"
        case .p384: return "p384"
        case .rsa2048: return "rsa2048"
        case .ed25519: return "ed25519"
        }
    }

    /// A fresh private key of this type.
    public func makePrivateKey() throws -> Certificate.PrivateKey {
        switch self {
        case .p256:
            return Certificate.PrivateKey(P256.Signing.PrivateKey())
        case .p384:
            return Certificate.PrivateKey(P384.Signing.PrivateKey())
        case .rsa2048:
            return Certificate.PrivateKey(try _RSA.Signing.PrivateKey(keySize: .bits2048))
        case .ed25519:
            return Certificate.PrivateKey(Curve25519.Signing.PrivateKey())
        }
    }

    /// The key type of `publicKey`, or `nil` for a key type this module does not mint (P-521).
    public init?(_ publicKey: Certificate.PublicKey) {
        if P256.Signing.PublicKey(publicKey) != nil {
            self = .p256
        } else if P384.Signing.PublicKey(publicKey) != nil {
            self = .p384
        } else if _RSA.Signing.PublicKey(publicKey) != nil {
            self = .rsa2048
        } else if Curve25519.Signing.PublicKey(publicKey) != nil {
            self = .ed25519
        } else {
            return nil
        }
    }
}

extension Certificate.SignatureAlgorithm {
    /// The algorithm a certificate is signed with, chosen by the ISSUER's key.
    static func forIssuer(_ issuerKey: Certificate.PublicKey) throws -> Certificate.SignatureAlgorithm {
        if P256.Signing.PublicKey(issuerKey) != nil { return .ecdsaWithSHA256 }
        if P384.Signing.PublicKey(issuerKey) != nil { return .ecdsaWithSHA384 }
        if P521.Signing.PublicKey(issuerKey) != nil { return .ecdsaWithSHA512 }
        if _RSA.Signing.PublicKey(issuerKey) != nil { return .sha256WithRSAEncryption }
        if Curve25519.Signing.PublicKey(issuerKey) != nil { return .ed25519 }
        throw TestPKIError(.unsupportedKey, "no signature algorithm for issuer key \(issuerKey)")
    }
}
