import Crypto
import SwiftASN1
import _CryptoExtras

/// What our verifier (swift-certificates on swift-crypto) cannot use in a certificate, in words.
///
/// Path validation runs on swift-certificates' `Certificate`, which can only be built for certificates whose
/// signature algorithm, key and fields it implements. When `Certificate(derEncoded:)` refuses a certificate that
/// ``CertificateStructure`` reads as well-formed X.509, these are the reasons we can name; the certificate can
/// still be inspected and pinned (a pin is a hash of the SPKI bytes), never used for verification.
///
/// RSASSA-PSS, in particular: swift-crypto's `_RSA.Signing.PublicKey.isValidSignature(_:for:padding: .PSS)`
/// verifies PSS soundly for the parameters the Web PKI and RFC 8017 recommend (SHA-256/384/512, MGF1 with the same
/// hash, a salt as long as the digest, trailer 1), and ``SignatureCheck`` uses it for `inspect`'s self-signed
/// fact. It cannot be used for path validation without forking swift-certificates: its `Certificate.Signature`
/// has no case for PSS (only ECDSA, RSA PKCS#1 v1.5 and Ed25519), so `Certificate(derEncoded:)` throws for
/// every PSS-signed certificate, and its `Verifier`, which builds and checks every path, accepts nothing but
/// `Certificate` values. A second path validator for such chains would duplicate name chaining, basic and name
/// constraints, key usage and policy processing outside the one we test against RFC 5280 and x509-limbo; that
/// is not sound, so PSS-signed certificates are refused for evaluation with this reason.
enum VerificationSupport {
    /// One reason a certificate cannot be verified.
    struct Problem: Sendable, Hashable {
        /// Whether the reason is the public key (reported as ``CertificateLoadingError/Code/unsupportedKey``).
        var isKey: Bool
        var text: String
    }

    static let signatureAlgorithmNames: [String: String] = [
        "1.2.840.10045.4.3.1": "ecdsa-with-SHA224",
        "1.2.840.10045.4.3.2": "ecdsa-with-SHA256",
        "1.2.840.10045.4.3.3": "ecdsa-with-SHA384",
        "1.2.840.10045.4.3.4": "ecdsa-with-SHA512",
        "1.2.840.10045.4.1": "ecdsa-with-SHA1",
        "1.2.840.113549.1.1.2": "md2WithRSAEncryption",
        "1.2.840.113549.1.1.4": "md5WithRSAEncryption",
        "1.2.840.113549.1.1.5": "sha1WithRSAEncryption",
        "1.3.14.3.2.29": "sha1WithRSA (OIW)",
        "1.2.840.113549.1.1.14": "sha224WithRSAEncryption",
        "1.2.840.113549.1.1.11": "sha256WithRSAEncryption",
        "1.2.840.113549.1.1.12": "sha384WithRSAEncryption",
        "1.2.840.113549.1.1.13": "sha512WithRSAEncryption",
        "1.2.840.113549.1.1.10": "rsassaPss",
        "1.2.840.10040.4.3": "dsa-with-SHA1",
        "2.16.840.1.101.3.4.3.1": "dsa-with-SHA224",
        "2.16.840.1.101.3.4.3.2": "dsa-with-SHA256",
        "1.3.101.112": "ED25519",
        "1.3.101.113": "ED448",
    ]

    /// The signature algorithms swift-certificates' `Certificate.Signature` implements.
    private static let supportedSignatureAlgorithms: Set<String> = [
        "1.2.840.10045.4.3.2", "1.2.840.10045.4.3.3", "1.2.840.10045.4.3.4",
        "1.2.840.113549.1.1.5", "1.2.840.113549.1.1.11", "1.2.840.113549.1.1.12", "1.2.840.113549.1.1.13",
        "1.3.101.112",
    ]

    static let rsaEncryption = "1.2.840.113549.1.1.1"
    static let rsassaPSS = "1.2.840.113549.1.1.10"
    static let ecPublicKey = "1.2.840.10045.2.1"
    static let ed25519 = "1.3.101.112"

    static let namedCurves: [String: (name: String, bits: Int)] = [
        "1.2.840.10045.3.1.7": ("P-256", 256),
        "1.3.132.0.34": ("P-384", 384),
        "1.3.132.0.35": ("P-521", 521),
    ]

    static let otherCurveNames: [String: String] = [
        "1.3.132.0.10": "secp256k1",
        "1.2.840.10045.3.1.1": "P-192",
        "1.3.132.0.33": "P-224",
        "1.3.36.3.3.2.8.1.1.7": "brainpoolP256r1",
        "1.3.36.3.3.2.8.1.1.11": "brainpoolP384r1",
        "1.3.36.3.3.2.8.1.1.13": "brainpoolP512r1",
    ]

    static let keyAlgorithmNames: [String: String] = [
        "1.2.840.10040.4.1": "DSA",
        "1.2.840.10046.2.1": "DH",
        "1.3.101.110": "X25519",
        "1.3.101.111": "X448",
        "1.3.101.113": "Ed448",
        "1.2.840.113549.1.1.10": "RSASSA-PSS",
        "1.2.643.7.1.1.1.1": "GOST R 34.10-2012 256",
        "1.2.156.10197.1.301": "SM2",
    ]

    /// The usual (OpenSSL) name of a signature algorithm; RSASSA-PSS with its parameters.
    static func signatureAlgorithmName(_ algorithm: CertificateStructure.Algorithm) -> String {
        if algorithm.oid == Self.rsassaPSS {
            switch PSSParameters.parse(algorithm.parameters) {
            case .success(let parameters): return "rsassaPss (\(parameters))"
            case .failure: return "rsassaPss (malformed parameters)"
            }
        }
        return Self.signatureAlgorithmNames[algorithm.oid] ?? algorithm.oid
    }

    /// Why swift-certificates refused `structure`, in words; `libraryError` is what it threw.
    ///
    /// Never empty: when none of the known reasons applies, the library's own error is the reason.
    static func problems(of structure: CertificateStructure, libraryError: any Error) -> [Problem] {
        var problems: [Problem] = []

        let algorithm = structure.signatureAlgorithm
        if !Self.supportedSignatureAlgorithms.contains(algorithm.oid) {
            problems.append(Problem(isKey: false, text: Self.signatureProblem(algorithm)))
        }
        if structure.innerSignatureAlgorithm.encoded != algorithm.encoded {
            problems.append(
                Problem(
                    isKey: false,
                    text: "the TBSCertificate's signature algorithm (\(Self.signatureAlgorithmName(structure.innerSignatureAlgorithm))) "
                        + "differs from the outer one (\(Self.signatureAlgorithmName(algorithm))), which RFC 5280 §4.1.1.2 forbids"
                )
            )
        }
        if let key = Self.keyProblem(structure) {
            problems.append(Problem(isKey: true, text: key))
        }
        if let first = structure.serialContent.first, first & 0x80 != 0 {
            problems.append(
                Problem(
                    isKey: false,
                    text: "its serial number is negative (\(CertificateInfo.serialText(structure.serialContent))), which "
                        + "RFC 5280 §4.1.2.2 forbids; swift-certificates cannot parse a negative serial number"
                )
            )
        }
        if problems.isEmpty {
            var text = "swift-certificates cannot parse it (\(CertificateParser.describe(libraryError)))"
            if !structure.quirks.isEmpty {
                text += "; it deviates from DER: " + structure.quirks.joined(separator: "; ")
            }
            problems.append(Problem(isKey: false, text: text))
        }
        return problems
    }

    private static func signatureProblem(_ algorithm: CertificateStructure.Algorithm) -> String {
        let name = Self.signatureAlgorithmName(algorithm)
        let prefix = "signature algorithm \(name) is not supported for verification: "
        switch algorithm.oid {
        case Self.rsassaPSS:
            return prefix
                + "swift-certificates' Certificate type cannot represent an RSASSA-PSS signature, so no path through "
                + "this certificate can be validated (swift-crypto could check the signature itself, but path "
                + "validation would need a second verifier; see Docs/BadInput.md)"
        case "1.2.840.113549.1.1.2", "1.2.840.113549.1.1.4":
            return prefix + "MD2 and MD5 are broken (practical collisions) and swift-certificates does not implement them"
        case "1.2.840.10040.4.3", "2.16.840.1.101.3.4.3.1", "2.16.840.1.101.3.4.3.2":
            return prefix + "swift-certificates does not implement DSA"
        default:
            return prefix
                + "swift-certificates implements ecdsa-with-SHA256/384/512, sha1/256/384/512WithRSAEncryption and Ed25519"
        }
    }

    /// Why the public key cannot be used, or nil when swift-certificates supports it.
    private static func keyProblem(_ structure: CertificateStructure) -> String? {
        let algorithm = structure.publicKeyAlgorithm
        let supported = "swift-certificates accepts only ECDSA P-256, P-384 and P-521, RSA and Ed25519 keys (RSA of 2048 bits or more)"
        switch algorithm.oid {
        case Self.rsaEncryption:
            switch Self.rsaModulusBits(structure.publicKeyBits) {
            case .some(let bits) where bits < 2048:
                return "its RSA key of \(bits) bits is not supported for verification: swift-crypto, under "
                    + "swift-certificates, accepts RSA keys of 2048 bits or more"
            case .some:
                return nil
            case .none:
                return "its RSA public key is not a DER RSAPublicKey (modulus, exponent)"
            }
        case Self.ed25519:
            return nil
        case Self.ecPublicKey:
            guard let parameters = algorithm.parameters else {
                return "its EC key has no curve parameters; " + supported
            }
            let node: ASN1Node
            do {
                node = try DER.parse(parameters)
            } catch {
                return "its EC key's curve parameters are malformed"
            }
            if node.identifier == .objectIdentifier {
                let curve: String
                do {
                    curve = String(describing: try ASN1ObjectIdentifier(derEncoded: node))
                } catch {
                    return "its EC key's curve OID is malformed"
                }
                if Self.namedCurves[curve] != nil { return nil }
                let name = Self.otherCurveNames[curve].map { "\($0) " } ?? ""
                return "it has a public key type (EC curve \(name)\(curve)) that is not supported: " + supported
            }
            return "it has a public key type (EC key with explicit curve parameters) that is not supported: RFC 5480 "
                + "§2.1.1 requires a named curve, and " + supported
        default:
            let name = Self.keyAlgorithmNames[algorithm.oid].map { "\($0) " } ?? ""
            return "it has a public key type (\(name)\(algorithm.oid)) that is not supported: " + supported
        }
    }

    /// The modulus size of an RSAPublicKey (`SEQUENCE { modulus INTEGER, publicExponent INTEGER }`).
    static func rsaModulusBits(_ keyBits: ArraySlice<UInt8>) -> Int? {
        do {
            let node = try DER.parse(keyBits)
            guard case .constructed(let fields) = node.content, node.identifier == .sequence else { return nil }
            let parts = Array(fields)
            guard parts.count == 2, parts[0].identifier == .integer, case .primitive(let modulus) = parts[0].content
            else { return nil }
            let significant = modulus.drop(while: { $0 == 0 })
            guard let first = significant.first else { return 0 }
            return significant.count * 8 - first.leadingZeroBitCount
        } catch {
            return nil
        }
    }
}

/// RSASSA-PSS-params (RFC 4055 §3.1): every field is EXPLICIT and has a default.
struct PSSParameters: Sendable, Hashable, CustomStringConvertible {
    /// The hash OID (default SHA-1).
    var hash: String
    /// The mask generation function OID (default MGF1) and its hash OID (default SHA-1).
    var maskGeneration: String
    var maskGenerationHash: String?
    var saltLength: Int
    var trailerField: Int

    static let sha1 = "1.3.14.3.2.26"
    static let mgf1 = "1.2.840.113549.1.1.8"
    static let hashNames: [String: (name: String, length: Int)] = [
        "1.3.14.3.2.26": ("SHA-1", 20),
        "2.16.840.1.101.3.4.2.4": ("SHA-224", 28),
        "2.16.840.1.101.3.4.2.1": ("SHA-256", 32),
        "2.16.840.1.101.3.4.2.2": ("SHA-384", 48),
        "2.16.840.1.101.3.4.2.3": ("SHA-512", 64),
    ]

    var description: String {
        let hashName = Self.hashNames[self.hash]?.name ?? self.hash
        let mgf =
            self.maskGeneration == Self.mgf1
            ? "MGF1 with \(self.maskGenerationHash.map { Self.hashNames[$0]?.name ?? $0 } ?? "?")"
            : "mask generation \(self.maskGeneration)"
        let trailer = self.trailerField == 1 ? "" : ", trailer \(self.trailerField)"
        return "\(hashName), \(mgf), salt \(self.saltLength) bytes\(trailer)"
    }

    struct Malformed: Error {}

    static func parse(_ encoded: ArraySlice<UInt8>?) -> Result<PSSParameters, Malformed> {
        var parameters = PSSParameters(
            hash: Self.sha1,
            maskGeneration: Self.mgf1,
            maskGenerationHash: Self.sha1,
            saltLength: 20,
            trailerField: 1
        )
        // RFC 4055 §3.1: the parameters of a PSS *signature* algorithm are required.
        guard let encoded else { return .failure(Malformed()) }
        do {
            let root = try DER.parse(encoded)
            guard root.identifier == .sequence, case .constructed(let fields) = root.content else {
                return .failure(Malformed())
            }
            func explicit(_ node: ASN1Node) throws -> ASN1Node {
                guard case .constructed(let inner) = node.content else { throw Malformed() }
                let items = Array(inner)
                guard items.count == 1 else { throw Malformed() }
                return items[0]
            }
            func algorithmOID(_ node: ASN1Node) throws -> (String, ASN1Node?) {
                guard node.identifier == .sequence, case .constructed(let parts) = node.content else { throw Malformed() }
                let items = Array(parts)
                guard (1...2).contains(items.count) else { throw Malformed() }
                return (String(describing: try ASN1ObjectIdentifier(derEncoded: items[0])), items.count == 2 ? items[1] : nil)
            }
            var lastTag = -1
            for field in fields {
                guard field.identifier.tagClass == .contextSpecific, Int(field.identifier.tagNumber) > lastTag,
                    field.identifier.tagNumber <= 3
                else {
                    return .failure(Malformed())
                }
                lastTag = Int(field.identifier.tagNumber)
                let value = try explicit(field)
                switch field.identifier.tagNumber {
                case 0:
                    parameters.hash = try algorithmOID(value).0
                case 1:
                    let (oid, inner) = try algorithmOID(value)
                    parameters.maskGeneration = oid
                    parameters.maskGenerationHash = try inner.map { try algorithmOID($0).0 }
                case 2:
                    parameters.saltLength = try Int(derEncoded: value)
                default:
                    parameters.trailerField = try Int(derEncoded: value)
                }
            }
        } catch {
            return .failure(Malformed())
        }
        return .success(parameters)
    }
}

/// Checks one certificate's signature with swift-crypto directly, for `inspect`'s self-signed fact only: never
/// for trust decisions, which belong to path validation.
enum SignatureCheck {
    enum Outcome: Sendable, Hashable {
        case valid
        case invalid
        case notChecked(String)
    }

    /// Whether `issuer`'s key made `structure`'s signature.
    static func verify(_ structure: CertificateStructure, by issuer: CertificateStructure) -> Outcome {
        let issuerSPKI = issuer.subjectPublicKeyInfo
        let issuerKeyAlgorithm = issuer.publicKeyAlgorithm.oid
        let algorithm = structure.signatureAlgorithm
        let tbs = structure.tbs
        let signatureBytes = structure.signature
        switch algorithm.oid {
        case VerificationSupport.rsassaPSS:
            let parameters: PSSParameters
            switch PSSParameters.parse(algorithm.parameters) {
            case .success(let parsed): parameters = parsed
            case .failure: return .notChecked("its RSASSA-PSS parameters are malformed")
            }
            // The only parameter sets swift-crypto's `.PSS` padding verifies, and the ones RFC 8017 §9.1 and the
            // CA/Browser Forum's profile allow: MGF1 with the message hash, salt as long as the digest, trailer 1.
            // Any other set would need BoringSSL calls swift-crypto does not expose: refused, not approximated.
            guard let hash = PSSParameters.hashNames[parameters.hash], hash.length >= 32,
                parameters.maskGeneration == PSSParameters.mgf1,
                parameters.maskGenerationHash == parameters.hash,
                parameters.saltLength == hash.length,
                parameters.trailerField == 1
            else {
                return .notChecked(
                    "RSASSA-PSS with \(parameters) is not checked: only SHA-256/384/512 with MGF1 of the same hash, "
                        + "a salt as long as the digest and trailer 1 are"
                )
            }
            guard issuerKeyAlgorithm == VerificationSupport.rsaEncryption else {
                return .notChecked("the signing key is not an rsaEncryption key")
            }
            let key: _RSA.Signing.PublicKey
            do {
                key = try _RSA.Signing.PublicKey(derRepresentation: Array(issuerSPKI))
            } catch {
                return .notChecked("the RSA key is not accepted by swift-crypto (\(error))")
            }
            let signature = _RSA.Signing.RSASignature(rawRepresentation: Array(signatureBytes))
            let valid: Bool
            switch hash.length {
            case 32: valid = key.isValidSignature(signature, for: SHA256.hash(data: Array(tbs)), padding: .PSS)
            case 48: valid = key.isValidSignature(signature, for: SHA384.hash(data: Array(tbs)), padding: .PSS)
            default: valid = key.isValidSignature(signature, for: SHA512.hash(data: Array(tbs)), padding: .PSS)
            }
            return valid ? .valid : .invalid
        case "1.2.840.113549.1.1.5", "1.2.840.113549.1.1.11", "1.2.840.113549.1.1.12", "1.2.840.113549.1.1.13":
            guard issuerKeyAlgorithm == VerificationSupport.rsaEncryption else {
                return .notChecked("the signing key is not an rsaEncryption key")
            }
            let key: _RSA.Signing.PublicKey
            do {
                // Keys of 1024 to 2047 bits are read only to state this fact; they are never used for trust.
                key = try _RSA.Signing.PublicKey(unsafeDERRepresentation: Array(issuerSPKI))
            } catch {
                return .notChecked("the RSA key is not accepted by swift-crypto (\(error))")
            }
            let signature = _RSA.Signing.RSASignature(rawRepresentation: Array(signatureBytes))
            let data = Array(tbs)
            let valid: Bool
            switch algorithm.oid {
            case "1.2.840.113549.1.1.5":
                valid = key.isValidSignature(signature, for: Insecure.SHA1.hash(data: data), padding: .insecurePKCS1v1_5)
            case "1.2.840.113549.1.1.11":
                valid = key.isValidSignature(signature, for: SHA256.hash(data: data), padding: .insecurePKCS1v1_5)
            case "1.2.840.113549.1.1.12":
                valid = key.isValidSignature(signature, for: SHA384.hash(data: data), padding: .insecurePKCS1v1_5)
            default:
                valid = key.isValidSignature(signature, for: SHA512.hash(data: data), padding: .insecurePKCS1v1_5)
            }
            return valid ? .valid : .invalid
        case "1.2.840.10045.4.3.2", "1.2.840.10045.4.3.3", "1.2.840.10045.4.3.4":
            guard issuerKeyAlgorithm == VerificationSupport.ecPublicKey else {
                return .notChecked("the signing key is not an EC key")
            }
            let data = Array(tbs)
            let signature = Array(signatureBytes)
            // The curve is named by the issuer key's parameters (explicit parameters are not checked).
            let curve: String
            do {
                guard let parameters = issuer.publicKeyAlgorithm.parameters else {
                    return .notChecked("the signing EC key names no curve")
                }
                curve = String(describing: try ASN1ObjectIdentifier(derEncoded: parameters))
            } catch {
                return .notChecked("the signing EC key does not name its curve")
            }
            do {
                switch curve {
                case "1.2.840.10045.3.1.7":
                    let key = try P256.Signing.PublicKey(derRepresentation: Array(issuerSPKI))
                    let value = try P256.Signing.ECDSASignature(derRepresentation: signature)
                    return Self.check(algorithm.oid, data) { key.isValidSignature(value, for: $0) } ? .valid : .invalid
                case "1.3.132.0.34":
                    let key = try P384.Signing.PublicKey(derRepresentation: Array(issuerSPKI))
                    let value = try P384.Signing.ECDSASignature(derRepresentation: signature)
                    return Self.check(algorithm.oid, data) { key.isValidSignature(value, for: $0) } ? .valid : .invalid
                case "1.3.132.0.35":
                    let key = try P521.Signing.PublicKey(derRepresentation: Array(issuerSPKI))
                    let value = try P521.Signing.ECDSASignature(derRepresentation: signature)
                    return Self.check(algorithm.oid, data) { key.isValidSignature(value, for: $0) } ? .valid : .invalid
                default:
                    return .notChecked("the signing key is not on P-256, P-384 or P-521")
                }
            } catch {
                // The key or the signature is not what its algorithm requires: it cannot be a valid signature.
                return .invalid
            }
        case VerificationSupport.ed25519:
            guard issuerKeyAlgorithm == VerificationSupport.ed25519 else {
                return .notChecked("the signing key is not an Ed25519 key")
            }
            do {
                let key = try Curve25519.Signing.PublicKey(rawRepresentation: Array(issuer.publicKeyBits))
                return key.isValidSignature(Array(signatureBytes), for: Array(tbs)) ? .valid : .invalid
            } catch {
                return .notChecked("the Ed25519 key is malformed")
            }
        default:
            return .notChecked("\(VerificationSupport.signatureAlgorithmName(algorithm)) signatures are not implemented here")
        }
    }

    /// Hashes `data` with the ECDSA algorithm's hash and hands the digest to `isValid`.
    private static func check(_ oid: String, _ data: [UInt8], _ isValid: (any Digest) -> Bool) -> Bool {
        switch oid {
        case "1.2.840.10045.4.3.2": return isValid(SHA256.hash(data: data))
        case "1.2.840.10045.4.3.3": return isValid(SHA384.hash(data: data))
        default: return isValid(SHA512.hash(data: data))
        }
    }
}
