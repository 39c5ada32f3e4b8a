import Crypto
import Foundation
import SwiftASN1
import _CryptoExtras

/// A private key that signs TUF metadata, with its public half as metadata lists it and its key id as the
/// specification computes it (the SHA-256 of the canonical JSON of `{"keytype", "keyval": {"public"}, "scheme"}`,
/// as securesystemslib's `_get_keyid` does).
///
/// The types are those `TUFKey` verifies, written as securesystemslib writes them, so python-tuf and go-tuf read
/// them too:
/// - Ed25519: `ed25519` / `ed25519`, the 32-byte public key in hex.
/// - ECDSA P-256: `ecdsa` / `ecdsa-sha2-nistp256`, a PEM SubjectPublicKeyInfo; DER signatures over
///   SHA-256.
/// - RSA: `rsa` / `rsassa-pss-sha256`, a PEM SubjectPublicKeyInfo of 2048 bits or more; RSASSA-PSS
///   with SHA-256, MGF1-SHA-256 and a 32-byte salt (what securesystemslib signs with, and what `TUFKey` checks).
///
/// Keys are read from PKCS#8 (`-----BEGIN PRIVATE KEY-----`, what `openssl genpkey` writes for all three), SEC1
/// (`EC PRIVATE KEY`) or PKCS#1 (`RSA PRIVATE KEY`), PEM or DER. Encrypted keys are decrypted by `PinningNIO`
/// (`TUFSigningKey.load(file:passphrase:)`), which hands the PKCS#8 it decrypted to the reader
/// of unencrypted DER.
public struct TUFSigningKey: Sendable {
    /// The three key types a pin-set repository signs with.
    package enum KeyType: String, Sendable, CaseIterable {
        case ed25519
        case ecdsaP256 = "ecdsa-p256"
        case rsa
    }

    enum Signer: Sendable {
        case ed25519(Curve25519.Signing.PrivateKey)
        case p256(P256.Signing.PrivateKey)
        case rsa(_RSA.Signing.PrivateKey)
    }

    package let type: KeyType
    /// The key id: lower-case hex SHA-256 of the canonical public key object.
    package let keyID: String
    /// The public key object as metadata lists it: `{"keytype", "keyval": {"public"}, "scheme"}`.
    package let publicKeyJSON: TUFJSON
    let signer: Signer

    /// The smallest RSA modulus accepted, in bits (NIST SP 800-131A; swift-crypto refuses smaller keys for signing).
    package static let minimumRSABits = 2048

    init(signer: Signer) {
        self.signer = signer
        let keyType: String
        let scheme: String
        let publicValue: String
        switch signer {
        case .ed25519(let key):
            (keyType, scheme, publicValue) = ("ed25519", "ed25519", TUFHex.encode(key.publicKey.rawRepresentation))
            self.type = .ed25519
        case .p256(let key):
            // securesystemslib writes the PEM with its final line break; the value is kept byte for byte, so the
            // key id is the same whichever tool reads it.
            (keyType, scheme, publicValue) = ("ecdsa", "ecdsa-sha2-nistp256", key.publicKey.pemRepresentation + "\n")
            self.type = .ecdsaP256
        case .rsa(let key):
            (keyType, scheme, publicValue) = ("rsa", "rsassa-pss-sha256", key.publicKey.pemRepresentation + "\n")
            self.type = .rsa
        }
        let json = TUFJSON.object(
            TUFJSONObject([
                ("keytype", .string(keyType)), ("scheme", .string(scheme)),
                ("keyval", .object(TUFJSONObject([("public", .string(publicValue))])!)),
            ])!)
        self.publicKeyJSON = json
        // A value of strings only always has a canonical form.
        self.keyID = TUFHex.encode(SHA256.hash(data: (try? json.canonicalBytes()) ?? []))
    }

    /// A new random key. RSA keys are 3072 bits (securesystemslib's default).
    package static func generate(_ type: KeyType) throws(TUFKeyError) -> TUFSigningKey {
        switch type {
        case .ed25519:
            return TUFSigningKey(signer: .ed25519(Curve25519.Signing.PrivateKey()))
        case .ecdsaP256:
            return TUFSigningKey(signer: .p256(P256.Signing.PrivateKey()))
        case .rsa:
            do {
                return TUFSigningKey(signer: .rsa(try _RSA.Signing.PrivateKey(keySize: .bits3072)))
            } catch {
                throw TUFKeyError(.unreadable, "RSA key generation failed: \(error)")
            }
        }
    }

    /// The key as unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), as `openssl genpkey` writes it.
    package var pkcs8PEMRepresentation: String {
        switch self.signer {
        case .ed25519(let key):
            // PrivateKeyInfo { 0, { id-Ed25519 }, OCTET STRING { OCTET STRING (32 bytes) } } (RFC 8410 §7).
            let der = [0x30, 0x2E, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20] + Array(key.rawRepresentation)
            return TUFPEM.encode(der, label: "PRIVATE KEY")
        case .p256(let key):
            return key.pemRepresentation
        case .rsa(let key):
            return key.pkcs8PEMRepresentation
        }
    }

    /// The PKCS#8 DER of ``pkcs8PEMRepresentation``.
    package var pkcs8DERRepresentation: [UInt8] {
        TUFPEM.blocks(self.pkcs8PEMRepresentation).first?.der ?? []
    }

    /// Signs `message` (the canonical bytes of a `signed` object); the signature in lower-case hex.
    package func sign(_ message: [UInt8]) throws(TUFKeyError) -> String {
        do {
            switch self.signer {
            case .ed25519(let key):
                return TUFHex.encode(try key.signature(for: message))
            case .p256(let key):
                return TUFHex.encode(try key.signature(for: message).derRepresentation)
            case .rsa(let key):
                return TUFHex.encode(try key.signature(for: message, padding: .PSS).rawRepresentation)
            }
        } catch {
            // swift-crypto's error is a type name and a BoringSSL number: not for the user's line, which says
            // which key could not sign.
            throw TUFKeyError(.unreadable, "signing with key \(TUFError.short(self.keyID)) failed: the cryptography library could not sign with it")
        }
    }

    // MARK: - Reading

    /// Reads an unencrypted private key from PEM text: PKCS#8 `PRIVATE KEY`, SEC1 `EC PRIVATE KEY` or PKCS#1
    /// `RSA PRIVATE KEY`; other blocks (`EC PARAMETERS`, certificates) beside it are ignored.
    ///
    /// - Throws: ``TUFKeyError``: ``TUFKeyError/Code/encrypted`` for an `ENCRYPTED PRIVATE KEY` block or a
    ///   traditional encrypted PEM (`Proc-Type: 4,ENCRYPTED`), ``TUFKeyError/Code/notPrivateKey`` when no
    ///   private key block is there, and as ``init(derRepresentation:)``.
    package init(pemRepresentation text: String) throws(TUFKeyError) {
        let blocks = TUFPEM.blocks(text)
        let keys = blocks.filter { $0.label.hasSuffix("PRIVATE KEY") }
        guard let block = keys.first else {
            if let other = blocks.first {
                throw TUFKeyError(.notPrivateKey, "it holds a \(other.label) block, not a private key")
            }
            throw TUFKeyError(.notPrivateKey, "no PEM private key block (-----BEGIN PRIVATE KEY-----)")
        }
        guard keys.count == 1 else { throw TUFKeyError(.notPrivateKey, "it holds \(keys.count) private keys; give one key per file") }
        if block.label == "ENCRYPTED PRIVATE KEY" || block.headers.contains(where: { $0.hasPrefix("Proc-Type:") && $0.contains("ENCRYPTED") }) {
            throw TUFKeyError(.encrypted, "the private key is encrypted")
        }
        guard let der = block.der else { throw TUFKeyError(.unreadable, "the \(block.label) block is not valid base64") }
        switch block.label {
        case "PRIVATE KEY":
            try self.init(derRepresentation: der)
        case "EC PRIVATE KEY":
            self.init(signer: .p256(try Self.sec1(der)))
        case "RSA PRIVATE KEY":
            self.init(signer: .rsa(try Self.rsa(pkcs1: der, whole: der)))
        default:
            throw TUFKeyError(.unsupportedAlgorithm, "a \(block.label) is not supported (Ed25519, EC P-256 or RSA in PKCS#8, as openssl genpkey writes them)")
        }
    }

    /// Reads an unencrypted PKCS#8 PrivateKeyInfo (DER).
    ///
    /// - Throws: ``TUFKeyError``: ``TUFKeyError/Code/unsupportedAlgorithm`` (X25519, Ed448, RSA-PSS-restricted and
    ///   other keys), ``TUFKeyError/Code/unsupportedCurve`` (an EC key not on P-256),
    ///   ``TUFKeyError/Code/rsaTooSmall`` (RSA under ``minimumRSABits``), ``TUFKeyError/Code/unreadable``.
    package init(derRepresentation der: [UInt8]) throws(TUFKeyError) {
        let algorithm: ASN1ObjectIdentifier
        let parameters: ASN1Node?
        let privateKey: [UInt8]
        do {
            (algorithm, parameters, privateKey) = try DER.sequence(try DER.parse(der), identifier: .sequence) { nodes in
                _ = try Int(derEncoded: &nodes)
                guard let algorithmNode = nodes.next() else { throw TUFKeyError(.unreadable, "not a PKCS#8 private key: no algorithm") }
                let (oid, parameters) = try DER.sequence(algorithmNode, identifier: .sequence) { inner in
                    let oid = try ASN1ObjectIdentifier(derEncoded: &inner)
                    let parameters = inner.next()
                    while inner.next() != nil {}
                    return (oid, parameters)
                }
                let key = try ASN1OctetString(derEncoded: &nodes)
                // Attributes and (in OneAsymmetricKey v2) the public key may follow; they are not needed.
                while nodes.next() != nil {}
                return (oid, parameters, Array(key.bytes))
            }
        } catch let error as TUFKeyError {
            throw error
        } catch {
            throw TUFKeyError(.unreadable, "not a private key: neither a PEM block nor a DER PKCS#8 key")
        }
        switch algorithm {
        case Self.ed25519OID:
            guard let inner = try? ASN1OctetString(derEncoded: privateKey), inner.bytes.count == 32,
                let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: Array(inner.bytes))
            else { throw TUFKeyError(.unreadable, "the Ed25519 private key is not 32 bytes") }
            self.init(signer: .ed25519(key))
        case Self.ecPublicKeyOID:
            let curve = parameters.flatMap { try? ASN1ObjectIdentifier(derEncoded: $0) }
            guard curve == Self.p256OID else { throw TUFKeyError(.unsupportedCurve, Self.curveWords(curve)) }
            do {
                self.init(signer: .p256(try P256.Signing.PrivateKey(derRepresentation: der)))
            } catch {
                throw TUFKeyError(.unreadable, "the EC P-256 private key is damaged")
            }
        case Self.rsaOID:
            self.init(signer: .rsa(try Self.rsa(pkcs1: privateKey, whole: der)))
        case Self.rsaPSSOID:
            throw TUFKeyError(
                .unsupportedAlgorithm, "an RSA-PSS-restricted key (openssl genpkey -algorithm RSA-PSS) is not supported; make one with -algorithm RSA (it signs rsassa-pss-sha256)")
        default:
            throw TUFKeyError(.unsupportedAlgorithm, "the key's algorithm, \(Self.algorithmWords(algorithm)), is not supported (Ed25519, EC P-256 or RSA of 2048 bits or more)")
        }
    }

    static let ed25519OID: ASN1ObjectIdentifier = [1, 3, 101, 112]
    static let ecPublicKeyOID: ASN1ObjectIdentifier = [1, 2, 840, 10045, 2, 1]
    static let p256OID: ASN1ObjectIdentifier = [1, 2, 840, 10045, 3, 1, 7]
    static let rsaOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 1, 1]
    static let rsaPSSOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 1, 10]

    static func algorithmWords(_ oid: ASN1ObjectIdentifier) -> String {
        switch oid {
        case [1, 3, 101, 110]: "X25519 (key agreement, not signing)"
        case [1, 3, 101, 111]: "X448 (key agreement, not signing)"
        case [1, 3, 101, 113]: "Ed448"
        case [1, 2, 840, 10040, 4, 1]: "DSA"
        default: "\(oid)"
        }
    }

    static func curveWords(_ curve: ASN1ObjectIdentifier?) -> String {
        let name: String
        switch curve {
        case [1, 3, 132, 0, 34]?: name = "P-384"
        case [1, 3, 132, 0, 35]?: name = "P-521"
        case [1, 3, 132, 0, 10]?: name = "secp256k1"
        case let oid?: name = "\(oid)"
        case nil: name = "explicit parameters"
        }
        return "an EC key on curve \(name) is not supported; TUF's ecdsa-sha2-nistp256 needs P-256 (openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256)"
    }

    /// A SEC1 ECPrivateKey, which must be on P-256.
    static func sec1(_ der: [UInt8]) throws(TUFKeyError) -> P256.Signing.PrivateKey {
        var curve: ASN1ObjectIdentifier?
        do {
            curve = try DER.sequence(try DER.parse(der), identifier: .sequence) { nodes in
                _ = try Int(derEncoded: &nodes)
                _ = try ASN1OctetString(derEncoded: &nodes)
                var found: ASN1ObjectIdentifier?
                while let node = nodes.next() {
                    if node.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific), case .constructed(let children) = node.content,
                        let first = children.first(where: { _ in true })
                    {
                        found = try ASN1ObjectIdentifier(derEncoded: first)
                    }
                }
                return found
            }
        } catch {
            throw TUFKeyError(.unreadable, "the EC PRIVATE KEY block is damaged (not SEC1 DER)")
        }
        guard curve == Self.p256OID else { throw TUFKeyError(.unsupportedCurve, Self.curveWords(curve)) }
        do {
            return try P256.Signing.PrivateKey(derRepresentation: der)
        } catch {
            throw TUFKeyError(.unreadable, "the EC P-256 private key is damaged")
        }
    }

    /// An RSA key from its PKCS#1 RSAPrivateKey (`pkcs1`), checked for size before swift-crypto reads `whole`
    /// (the PKCS#8 or PKCS#1 DER it was found in), so a small key is refused with its size in words.
    static func rsa(pkcs1: [UInt8], whole: [UInt8]) throws(TUFKeyError) -> _RSA.Signing.PrivateKey {
        let bits: Int
        do {
            bits = try DER.sequence(try DER.parse(pkcs1), identifier: .sequence) { nodes in
                _ = try Int(derEncoded: &nodes)
                guard let modulus = nodes.next(), modulus.identifier == .integer, case .primitive(let bytes) = modulus.content else {
                    throw TUFKeyError(.unreadable, "the RSA private key has no modulus")
                }
                while nodes.next() != nil {}
                let significant = bytes.drop { $0 == 0 }
                guard let first = significant.first else { return 0 }
                return (significant.count - 1) * 8 + (8 - first.leadingZeroBitCount)
            }
        } catch let error as TUFKeyError {
            throw error
        } catch {
            throw TUFKeyError(.unreadable, "the RSA private key is damaged (not PKCS#1 DER)")
        }
        guard bits >= Self.minimumRSABits else {
            throw TUFKeyError(.rsaTooSmall, "the RSA key is \(bits) bits; rsassa-pss-sha256 keys must have at least \(Self.minimumRSABits)")
        }
        do {
            return try _RSA.Signing.PrivateKey(derRepresentation: whole)
        } catch {
            throw TUFKeyError(.unreadable, "the RSA private key is damaged")
        }
    }
}

/// Why a signing key cannot be used, in words (the caller names the file).
///
/// Only package code throws it; users meet its ``Code`` through `PinningNIO`'s `TUFKeyFileError`, which names the
/// file, so the code and message are package.
public struct TUFKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, Equatable {
        /// Not a private key at all (a certificate, a public key, no PEM block).
        case notPrivateKey
        /// Encrypted, and no passphrase was given.
        case encrypted
        /// A key type TUF signing here does not support.
        case unsupportedAlgorithm
        /// An EC key on a curve other than P-256.
        case unsupportedCurve
        /// An RSA key under 2048 bits.
        case rsaTooSmall
        /// Damaged, or a passphrase that does not decrypt it.
        case unreadable
    }

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { self.message }
}

/// PEM blocks (RFC 7468), with the headers of OpenSSL's traditional encrypted form.
package enum TUFPEM {
    package struct Block {
        package var label: String
        /// Lines such as `Proc-Type: 4,ENCRYPTED` before the base64.
        package var headers: [String]
        /// The decoded body; nil when it is not base64.
        package var der: [UInt8]?
    }

    package static func blocks(_ text: String) -> [Block] {
        var out: [Block] = []
        var label: String?
        var headers: [String] = []
        var body = ""
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if let current = label {
                if line == "-----END \(current)-----" {
                    out.append(Block(label: current, headers: headers, der: Data(base64Encoded: body).map(Array.init)))
                    label = nil
                } else if line.contains(":") {
                    headers.append(line)
                } else {
                    body += line
                }
            } else if line.hasPrefix("-----BEGIN "), line.hasSuffix("-----") {
                label = String(line.dropFirst(11).dropLast(5))
                headers = []
                body = ""
            }
        }
        return out
    }

    package static func encode(_ der: [UInt8], label: String) -> String {
        let base64 = Data(der).base64EncodedString()
        var lines: [Substring] = []
        var rest = Substring(base64)
        while !rest.isEmpty {
            lines.append(rest.prefix(64))
            rest = rest.dropFirst(64)
        }
        return "-----BEGIN \(label)-----\n" + lines.joined(separator: "\n") + "\n-----END \(label)-----\n"
    }
}
