import Foundation
import SwiftASN1
import X509

// Key type and size, and the signature algorithm, read from the DER (OpenSSL's names).
extension CertificateInfo {
    static let curves: [String: (String, Int)] = [
        "1.2.840.10045.3.1.7": ("EC P-256", 256),
        "1.3.132.0.34": ("EC P-384", 384),
        "1.3.132.0.35": ("EC P-521", 521),
    ]

    static let otherCurveBits: [String: Int] = [
        "1.3.132.0.10": 256, "1.2.840.10045.3.1.1": 192, "1.3.132.0.33": 224,
        "1.3.36.3.3.2.8.1.1.7": 256, "1.3.36.3.3.2.8.1.1.11": 384, "1.3.36.3.3.2.8.1.1.13": 512,
    ]

    /// The bit length of an unsigned big-endian integer.
    static func bitLength(_ bytes: ArraySlice<UInt8>) -> Int {
        let significant = bytes.drop(while: { $0 == 0 })
        guard let first = significant.first else { return 0 }
        return significant.count * 8 - first.leadingZeroBitCount
    }

    /// Key type and size from the SubjectPublicKeyInfo DER:
    /// `SEQUENCE { algorithm SEQUENCE { OID, parameters }, subjectPublicKey BIT STRING }`.
    static func keyFacts(_ spki: [UInt8]) -> (type: String, bits: Int, problem: String?) {
        do {
            return try Self.readKeyFacts(spki)
        } catch {
            return ("unknown", 0, "the public key cannot be read: \(CertificateParser.describe(error))")
        }
    }

    /// ``keyFacts(_:)``'s problem without the library's own text (`pinning inspect` without `--verbose`).
    static func keyProblemInWords(_ spki: [UInt8], problem: String) -> String {
        do {
            _ = try Self.readKeyFacts(spki)
            return problem
        } catch {
            return "the public key cannot be read: \(CertificateParser.describeApart(error).words)"
        }
    }

    /// ``keyFacts(_:)`` but for a field that cannot be read, which it throws.
    private static func readKeyFacts(_ spki: [UInt8]) throws -> (type: String, bits: Int, problem: String?) {
        do {
            let root = try DER.parse(spki)
            guard case .constructed(let fields) = root.content else {
                return ("unknown", 0, "the SubjectPublicKeyInfo is not a SEQUENCE")
            }
            var iterator = fields.makeIterator()
            guard let algorithmNode = iterator.next(), let keyNode = iterator.next(),
                case .constructed(let algorithmFields) = algorithmNode.content
            else {
                return ("unknown", 0, "the SubjectPublicKeyInfo is incomplete")
            }
            var algorithmIterator = algorithmFields.makeIterator()
            guard let oidNode = algorithmIterator.next() else {
                return ("unknown", 0, "the SubjectPublicKeyInfo has no algorithm")
            }
            let algorithm = String(describing: try ASN1ObjectIdentifier(derEncoded: oidNode))
            switch algorithm {
            case "1.2.840.10045.2.1":
                guard let curveNode = algorithmIterator.next() else {
                    return ("EC", 0, "the EC key has no named curve")
                }
                if curveNode.identifier == .sequence {
                    // SpecifiedECDomain (RFC 3279 §2.3.5): { version, fieldID, curve, base, order, cofactor }; the
                    // key size is the size of the order, as OpenSSL reports it.
                    let order = try DER.sequence(curveNode, identifier: .sequence) { nodes in
                        for _ in 0..<4 { _ = nodes.next() }
                        guard let node = nodes.next(), case .primitive(let bytes) = node.content else {
                            throw ASN1Error.invalidASN1Object(reason: "no order in the explicit curve parameters")
                        }
                        while nodes.next() != nil {}
                        return bytes
                    }
                    return ("EC explicit parameters", Self.bitLength(order), nil)
                }
                guard curveNode.identifier == .objectIdentifier else {
                    return ("EC", 0, "the EC key's parameters are neither a named curve nor explicit parameters")
                }
                let curve = String(describing: try ASN1ObjectIdentifier(derEncoded: curveNode))
                guard let (name, bits) = Self.curves[curve] else {
                    if let name = VerificationSupport.otherCurveNames[curve] {
                        return ("EC \(name)", Self.otherCurveBits[curve] ?? 0, nil)
                    }
                    return ("EC \(curve)", 0, "unknown EC curve \(curve)")
                }
                return (name, bits, nil)
            case "1.3.101.112":
                return ("Ed25519", 256, nil)
            case "1.3.101.113":
                return ("Ed448", 456, nil)
            case "1.3.101.110":
                return ("X25519", 253, nil)
            case "1.3.101.111":
                return ("X448", 448, nil)
            case "1.2.840.10040.4.1":
                // Dss-Parms ::= SEQUENCE { p, q, g } (RFC 3279 §2.3.2): the key size is the size of p.
                guard let parameters = algorithmIterator.next() else {
                    return ("DSA", 0, "the DSA key has no parameters (inherited from the issuer)")
                }
                let p = try DER.sequence(parameters, identifier: .sequence) { nodes in
                    let p = try ArraySlice<UInt8>(derEncoded: &nodes)
                    while nodes.next() != nil {}
                    return p
                }
                return ("DSA", Self.bitLength(p), nil)
            case "1.2.840.113549.1.1.1", "1.2.840.113549.1.1.10":
                // RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER }, inside the BIT STRING; the
                // same for an id-RSASSA-PSS key (RFC 4055 §1.2).
                let type = algorithm == "1.2.840.113549.1.1.1" ? "RSA" : "RSASSA-PSS"
                let bitString = try ASN1BitString(derEncoded: keyNode)
                let rsaKey = try DER.parse(bitString.bytes)
                let modulus = try DER.sequence(rsaKey, identifier: .sequence) { nodes in
                    let modulus = try ArraySlice<UInt8>(derEncoded: &nodes)
                    _ = try ArraySlice<UInt8>(derEncoded: &nodes)
                    return modulus
                }
                guard Self.bitLength(modulus) > 0 else {
                    return (type, 0, "the RSA modulus is zero")
                }
                return (type, Self.bitLength(modulus), nil)
            default:
                if let name = VerificationSupport.keyAlgorithmNames[algorithm] {
                    return ("\(name) \(algorithm)", 0, nil)
                }
                return (algorithm, 0, "unknown public key algorithm \(algorithm)")
            }
        }
    }

    /// The OpenSSL name of the outer signatureAlgorithm: `Certificate ::= SEQUENCE { tbs, algorithm, signature }`.
    static func signatureAlgorithmName(der: [UInt8], fallback: String) -> String {
        let reader = BERReader(der)
        do {
            let top = try reader.element(at: 0, limit: der.count)
            let fields = try reader.children(of: top)
            guard fields.count == 3, let oidElement = try reader.children(of: fields[1]).first,
                let oid = reader.objectIdentifier(oidElement)
            else {
                return fallback
            }
            return VerificationSupport.signatureAlgorithmNames[oid] ?? oid
        } catch {
            return fallback
        }
    }
}
