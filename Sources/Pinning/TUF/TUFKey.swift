import Crypto
import Foundation
import _CryptoExtras

/// A public key as TUF metadata lists it (`{"keytype", "scheme", "keyval": {"public"}}`), with the verifier its
/// type and scheme name.
///
/// Supported, with swift-crypto only (the schemes of the TUF specification and securesystemslib):
/// - `ed25519` / `ed25519`: `public` is the 32-byte key in hex; signatures are 64 bytes in hex.
/// - `ecdsa` (or the older `ecdsa-sha2-nistp256`) / `ecdsa-sha2-nistp256`: `public` is a PEM
///   SubjectPublicKeyInfo of a P-256 key; signatures are DER ECDSA-Sig-Value in hex, over SHA-256.
/// - `rsa` / `rsassa-pss-sha256`: `public` is a PEM SubjectPublicKeyInfo of an RSA key of 2048 bits or more;
///   signatures are RSASSA-PSS with SHA-256, MGF1-SHA-256 and a 32-byte salt. securesystemslib signs with that
///   salt length but verifies any (`PSS.AUTO`); swift-crypto's `.PSS` checks only a salt as long as the digest, so a
///   signature another signer made with a longer salt is not counted here (a refusal, never a false acceptance).
///
/// A key of any other type or scheme is kept (its metadata stays readable) but can never sign: a signature under
/// it does not count toward any threshold. python-tuf refuses the whole file instead; counting nothing is as safe
/// and lets a repository add a key type before every client knows it.
package struct TUFKey: Sendable {
    package let keyID: String
    package let keyType: String
    package let scheme: String
    /// `keyval.public` as written.
    package let publicValue: String
    let verifier: Verifier?
    /// Why this key cannot verify, when it cannot.
    package let unusableReason: String?

    enum Verifier: Sendable {
        case ed25519(Curve25519.Signing.PublicKey)
        case p256(P256.Signing.PublicKey)
        case rsaPSS(_RSA.Signing.PublicKey)
    }

    /// Reads a key object; throws only when it is not shaped as a key (an unknown type or scheme is kept, unusable).
    init(keyID: String, json: TUFJSON, role: String) throws(TUFError) {
        guard let object = json.objectValue else {
            throw TUFError(role: role, rule: .malformed, "key \(TUFError.short(keyID)) is \(json.kindWords), not an object", keyIDs: [keyID])
        }
        guard let keyType = object["keytype"]?.stringValue, let scheme = object["scheme"]?.stringValue,
            let keyval = object["keyval"]?.objectValue, let publicValue = keyval["public"]?.stringValue
        else {
            throw TUFError(role: role, rule: .malformed, "key \(TUFError.short(keyID)) lacks a keytype, scheme or keyval.public string", keyIDs: [keyID])
        }
        self.keyID = keyID
        self.keyType = keyType
        self.scheme = scheme
        self.publicValue = publicValue
        switch (keyType, scheme) {
        case ("ed25519", "ed25519"):
            if let raw = TUFHex.decode(publicValue), raw.count == 32, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw) {
                self.verifier = .ed25519(key)
                self.unusableReason = nil
            } else {
                self.verifier = nil
                self.unusableReason = "its ed25519 public value is not 32 bytes of hex"
            }
        case ("ecdsa", "ecdsa-sha2-nistp256"), ("ecdsa-sha2-nistp256", "ecdsa-sha2-nistp256"):
            if let key = try? P256.Signing.PublicKey(pemRepresentation: publicValue) {
                self.verifier = .p256(key)
                self.unusableReason = nil
            } else {
                self.verifier = nil
                self.unusableReason = "its public value is not a PEM P-256 public key"
            }
        case ("rsa", "rsassa-pss-sha256"):
            // swift-crypto refuses RSA keys below 2048 bits for signing use, as NIST SP 800-131A does.
            if let key = try? _RSA.Signing.PublicKey(pemRepresentation: publicValue) {
                self.verifier = .rsaPSS(key)
                self.unusableReason = nil
            } else {
                self.verifier = nil
                self.unusableReason = "its public value is not a PEM RSA public key of 2048 bits or more"
            }
        default:
            self.verifier = nil
            self.unusableReason = "key type \(TUFError.printable(keyType)) with scheme \(TUFError.printable(scheme)) is not supported"
        }
    }

    /// Whether `signatureHex` is this key's valid signature over `message`. Malformed signatures (not hex, empty,
    /// not DER) are simply not valid.
    package func isValidSignature(_ signatureHex: String, for message: [UInt8]) -> Bool {
        guard let verifier = self.verifier, let signature = TUFHex.decode(signatureHex), !signature.isEmpty else { return false }
        switch verifier {
        case .ed25519(let key):
            return key.isValidSignature(signature, for: message)
        case .p256(let key):
            guard let parsed = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(parsed, for: message)
        case .rsaPSS(let key):
            return key.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signature), for: message, padding: .PSS)
        }
    }

    /// The key's identity for counting signatures: type, scheme and public value. Two key ids naming the same key
    /// count once toward a threshold (see ``TUFSignatures/verifyThreshold``).
    var material: String { "\(self.keyType)\u{0}\(self.scheme)\u{0}\(self.publicValue)" }
}

/// Hexadecimal, as securesystemslib writes it (lower case; `bytes.fromhex` also reads upper case).
enum TUFHex {
    static func decode(_ text: String) -> [UInt8]? {
        let bytes = Array(text.utf8)
        guard bytes.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count / 2)
        var index = 0
        while index < bytes.count {
            guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
