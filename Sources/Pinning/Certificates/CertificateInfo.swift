public import X509
public import Foundation
import SwiftASN1
import Crypto

/// The facts of one certificate, for display and JSON output (`pinning inspect`).
///
/// Building it never throws or crashes: when an extension is malformed, the field taken from it is `nil` (or
/// empty, for ``subjectAlternativeNames``) and ``problems`` says what was wrong.
///
/// In JSON, dates are RFC 3339 strings (`"2026-01-31T12:00:00Z"`).
public struct CertificateInfo: Sendable, Hashable, Codable {
    /// One entry of the subjectAltName extension.
    public struct SubjectAlternativeName: Sendable, Hashable, Codable {
        /// `"DNS"`, `"IP"`, `"URI"`, `"email"` or `"other"`.
        public var kind: String
        /// The name; IP addresses as a dotted quad or in RFC 5952 IPv6 form.
        public var value: String

        /// A subject alternative name.
        ///
        /// - Parameters:
        ///   - kind: `"DNS"`, `"IP"`, `"URI"`, `"email"` or `"other"`.
        ///   - value: The name as text.
        public init(kind: String, value: String) {
            self.kind = kind
            self.value = value
        }
    }

    /// The basicConstraints extension.
    public struct BasicConstraints: Sendable, Hashable, Codable {
        /// Whether the certificate may issue certificates (`cA`).
        public var isCA: Bool
        /// The maximum number of intermediate CAs below this one (`pathLenConstraint`), if limited.
        public var pathLength: Int?

        /// A basicConstraints value.
        ///
        /// - Parameters:
        ///   - isCA: Whether the certificate is a CA.
        ///   - pathLength: The path length constraint, if any.
        public init(isCA: Bool, pathLength: Int?) {
            self.isCA = isCA
            self.pathLength = pathLength
        }
    }

    /// The subject, RFC 4514 style, most specific attribute first: `CN=api.example.com,O=Example`.
    public var subject: String
    /// The issuer, in the same form as ``subject``.
    public var issuer: String
    /// The serial number in lowercase hex without colons or leading zero bytes, e.g. `"1a2b3c"`.
    public var serialNumber: String
    /// The start of the validity period.
    public var notValidBefore: Date
    /// The end of the validity period.
    public var notValidAfter: Date
    /// The subjectAltName entries in certificate order; empty when the extension is absent or malformed.
    public var subjectAlternativeNames: [SubjectAlternativeName]
    /// `"EC P-256"`, `"EC P-384"`, `"EC P-521"`, `"RSA"` or `"Ed25519"`.
    public var keyType: String
    /// The key size in bits: the RSA modulus size, 256/384/521 for EC keys, 256 for Ed25519.
    public var keySize: Int
    /// The signature algorithm by its usual (OpenSSL) name, e.g. `"ecdsa-with-SHA256"`,
    /// `"sha256WithRSAEncryption"`; a dotted OID when unknown.
    public var signatureAlgorithm: String
    /// The basicConstraints extension, `nil` when absent or malformed.
    public var basicConstraints: BasicConstraints?
    /// The keyUsage bits that are set (`digitalSignature`, `keyCertSign`, …), `nil` when absent or malformed.
    public var keyUsage: [String]?
    /// The extendedKeyUsage purposes (`serverAuth`, `clientAuth`, … or a dotted OID), `nil` when absent or
    /// malformed.
    public var extendedKeyUsage: [String]?
    /// SHA-1 of the DER certificate, uppercase hex with colons (as `openssl x509 -fingerprint -sha1` prints).
    public var sha1Fingerprint: String
    /// SHA-256 of the DER certificate, uppercase hex with colons.
    public var sha256Fingerprint: String
    /// The SPKI pin of the certificate's key, `sha256/BASE64` (see ``Pin``).
    public var spkiPin: String
    /// Whether subject equals issuer and the certificate's own key verifies its signature.
    public var isSelfSigned: Bool
    /// Whether basicConstraints marks the certificate as a CA.
    public var isCA: Bool
    /// What could not be read (malformed extensions); empty for a healthy certificate.
    public var problems: [String]

    /// The facts of `certificate`. Never throws: unreadable parts are reported in ``problems``.
    ///
    /// - Parameter certificate: The certificate to describe.
    public init(_ certificate: Certificate) {
        var problems: [String] = []
        self.subject = String(describing: certificate.subject)
        self.issuer = String(describing: certificate.issuer)
        self.serialNumber = Self.serialHex(certificate.serialNumber.bytes)
        self.notValidBefore = certificate.notValidBefore
        self.notValidAfter = certificate.notValidAfter

        let names = Self.describeSubjectAlternativeNames(certificate)
        self.subjectAlternativeNames = names.names
        problems += names.problems

        let key = Self.keyFacts(certificate.subjectPublicKeyInfoDER)
        self.keyType = key.type
        self.keySize = key.bits
        if let problem = key.problem { problems.append(problem) }

        self.signatureAlgorithm = Self.signatureAlgorithmName(certificate)

        var basicConstraints: BasicConstraints? = nil
        do {
            switch try certificate.extensions.basicConstraints {
            case .some(.isCertificateAuthority(let maxPathLength)):
                basicConstraints = BasicConstraints(isCA: true, pathLength: maxPathLength)
            case .some(.notCertificateAuthority):
                basicConstraints = BasicConstraints(isCA: false, pathLength: nil)
            case .none:
                basicConstraints = nil
            }
        } catch {
            problems.append("basicConstraints extension is malformed: \(CertificateParser.describe(error))")
        }
        self.basicConstraints = basicConstraints
        self.isCA = basicConstraints?.isCA ?? false

        var keyUsage: [String]? = nil
        do {
            if let usage = try certificate.extensions.keyUsage {
                let bits: [(Bool, String)] = [
                    (usage.digitalSignature, "digitalSignature"),
                    (usage.nonRepudiation, "nonRepudiation"),
                    (usage.keyEncipherment, "keyEncipherment"),
                    (usage.dataEncipherment, "dataEncipherment"),
                    (usage.keyAgreement, "keyAgreement"),
                    (usage.keyCertSign, "keyCertSign"),
                    (usage.cRLSign, "cRLSign"),
                    (usage.encipherOnly, "encipherOnly"),
                    (usage.decipherOnly, "decipherOnly"),
                ]
                keyUsage = bits.filter { $0.0 }.map { $0.1 }
            }
        } catch {
            problems.append("keyUsage extension is malformed: \(CertificateParser.describe(error))")
        }
        self.keyUsage = keyUsage

        var extendedKeyUsage: [String]? = nil
        do {
            if let usages = try certificate.extensions.extendedKeyUsage {
                extendedKeyUsage = usages.map { usage in
                    usage == .any ? "anyExtendedKeyUsage" : String(describing: usage)
                }
            }
        } catch {
            problems.append("extendedKeyUsage extension is malformed: \(CertificateParser.describe(error))")
        }
        self.extendedKeyUsage = extendedKeyUsage

        let der = certificate.derBytes
        self.sha1Fingerprint = Self.colonHex(Array(Insecure.SHA1.hash(data: der)))
        self.sha256Fingerprint = Self.sha256Fingerprint(ofDER: der)
        self.spkiPin = Pin(spkiOf: certificate).description
        self.isSelfSigned =
            certificate.subject == certificate.issuer
            && certificate.publicKey.isValidSignature(certificate.signature, for: certificate)
        self.problems = problems
    }

    // MARK: Codable

    private enum CodingKeys: String, CodingKey {
        case subject, issuer, serialNumber, notValidBefore, notValidAfter, subjectAlternativeNames, keyType
        case keySize, signatureAlgorithm, basicConstraints, keyUsage, extendedKeyUsage, sha1Fingerprint
        case sha256Fingerprint, spkiPin, isSelfSigned, isCA, problems
    }

    /// Encodes the facts; dates as RFC 3339 strings, whatever the encoder's date strategy.
    ///
    /// - Parameter encoder: The encoder to write to.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.subject, forKey: .subject)
        try container.encode(self.issuer, forKey: .issuer)
        try container.encode(self.serialNumber, forKey: .serialNumber)
        try container.encode(Self.rfc3339(self.notValidBefore), forKey: .notValidBefore)
        try container.encode(Self.rfc3339(self.notValidAfter), forKey: .notValidAfter)
        try container.encode(self.subjectAlternativeNames, forKey: .subjectAlternativeNames)
        try container.encode(self.keyType, forKey: .keyType)
        try container.encode(self.keySize, forKey: .keySize)
        try container.encode(self.signatureAlgorithm, forKey: .signatureAlgorithm)
        try container.encodeIfPresent(self.basicConstraints, forKey: .basicConstraints)
        try container.encodeIfPresent(self.keyUsage, forKey: .keyUsage)
        try container.encodeIfPresent(self.extendedKeyUsage, forKey: .extendedKeyUsage)
        try container.encode(self.sha1Fingerprint, forKey: .sha1Fingerprint)
        try container.encode(self.sha256Fingerprint, forKey: .sha256Fingerprint)
        try container.encode(self.spkiPin, forKey: .spkiPin)
        try container.encode(self.isSelfSigned, forKey: .isSelfSigned)
        try container.encode(self.isCA, forKey: .isCA)
        try container.encode(self.problems, forKey: .problems)
    }

    /// Decodes facts written by ``encode(to:)``; dates must be RFC 3339 strings.
    ///
    /// - Parameter decoder: The decoder to read from.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.subject = try container.decode(String.self, forKey: .subject)
        self.issuer = try container.decode(String.self, forKey: .issuer)
        self.serialNumber = try container.decode(String.self, forKey: .serialNumber)
        self.notValidBefore = try Self.date(container, .notValidBefore)
        self.notValidAfter = try Self.date(container, .notValidAfter)
        self.subjectAlternativeNames = try container.decode(
            [SubjectAlternativeName].self,
            forKey: .subjectAlternativeNames
        )
        self.keyType = try container.decode(String.self, forKey: .keyType)
        self.keySize = try container.decode(Int.self, forKey: .keySize)
        self.signatureAlgorithm = try container.decode(String.self, forKey: .signatureAlgorithm)
        self.basicConstraints = try container.decodeIfPresent(BasicConstraints.self, forKey: .basicConstraints)
        self.keyUsage = try container.decodeIfPresent([String].self, forKey: .keyUsage)
        self.extendedKeyUsage = try container.decodeIfPresent([String].self, forKey: .extendedKeyUsage)
        self.sha1Fingerprint = try container.decode(String.self, forKey: .sha1Fingerprint)
        self.sha256Fingerprint = try container.decode(String.self, forKey: .sha256Fingerprint)
        self.spkiPin = try container.decode(String.self, forKey: .spkiPin)
        self.isSelfSigned = try container.decode(Bool.self, forKey: .isSelfSigned)
        self.isCA = try container.decode(Bool.self, forKey: .isCA)
        self.problems = try container.decodeIfPresent([String].self, forKey: .problems) ?? []
    }

    static func rfc3339(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: false, timeZone: .gmt))
    }

    private static func date(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> Date {
        let text = try container.decode(String.self, forKey: key)
        do {
            return try Date.ISO8601FormatStyle(includingFractionalSeconds: false, timeZone: .gmt).parse(text)
        } catch {
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: container,
                debugDescription: "\"\(text)\" is not an RFC 3339 date such as 2026-01-31T12:00:00Z"
            )
        }
    }

    // MARK: Facts

    static func serialHex(_ bytes: ArraySlice<UInt8>) -> String {
        let significant = bytes.drop(while: { $0 == 0 })
        guard !significant.isEmpty else { return "00" }
        return significant.map { Self.hexByte($0, uppercase: false) }.joined()
    }

    static func colonHex(_ bytes: [UInt8]) -> String {
        bytes.map { Self.hexByte($0, uppercase: true) }.joined(separator: ":")
    }

    private static func hexByte(_ byte: UInt8, uppercase: Bool) -> String {
        let digits = Array(uppercase ? "0123456789ABCDEF" : "0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }

    /// The subject alternative names of `certificate` as ``subjectAlternativeNames`` lists them (empty when the
    /// extension is absent or malformed), without computing the other facts: for a connection that reports
    /// its peer on every handshake.
    package static func subjectAlternativeNames(of certificate: Certificate) -> [SubjectAlternativeName] {
        Self.describeSubjectAlternativeNames(certificate).names
    }

    /// ``sha256Fingerprint`` of `certificate` alone.
    package static func sha256Fingerprint(of certificate: Certificate) -> String {
        Self.sha256Fingerprint(ofDER: certificate.derBytes)
    }

    private static func sha256Fingerprint(ofDER der: [UInt8]) -> String {
        Self.colonHex(Array(SHA256.hash(data: der)))
    }

    private static func describeSubjectAlternativeNames(_ certificate: Certificate) -> (names: [SubjectAlternativeName], problems: [String]) {
        var names: [SubjectAlternativeName] = []
        var problems: [String] = []
        do {
            if let extensionValue = try certificate.extensions.subjectAlternativeNames {
                for name in extensionValue {
                    let (entry, problem) = Self.describe(name)
                    names.append(entry)
                    if let problem { problems.append(problem) }
                }
            }
        } catch {
            problems.append("subjectAltName extension is malformed: \(CertificateParser.describe(error))")
        }
        return (names, problems)
    }

    private static func describe(_ name: GeneralName) -> (SubjectAlternativeName, String?) {
        switch name {
        case .dnsName(let dns):
            return (SubjectAlternativeName(kind: "DNS", value: dns), nil)
        case .rfc822Name(let email):
            return (SubjectAlternativeName(kind: "email", value: email), nil)
        case .uniformResourceIdentifier(let uri):
            return (SubjectAlternativeName(kind: "URI", value: uri), nil)
        case .ipAddress(let octets):
            let bytes = Array(octets.bytes)
            if let address = Self.ipAddress(bytes) {
                return (SubjectAlternativeName(kind: "IP", value: address), nil)
            }
            return (
                SubjectAlternativeName(kind: "IP", value: bytes.map { Self.hexByte($0, uppercase: false) }.joined()),
                "subjectAltName has an IP address of \(bytes.count) bytes (expected 4 or 16)"
            )
        case .directoryName(let name):
            return (SubjectAlternativeName(kind: "other", value: "DirName:\(name)"), nil)
        case .registeredID(let oid):
            return (SubjectAlternativeName(kind: "other", value: "RID:\(oid)"), nil)
        case .otherName(let other):
            return (SubjectAlternativeName(kind: "other", value: "othername:\(other.typeID)"), nil)
        default:
            return (SubjectAlternativeName(kind: "other", value: String(describing: name)), nil)
        }
    }

    /// A dotted quad, or IPv6 in RFC 5952 form (lowercase, no leading zeros, longest zero run of two or more
    /// groups compressed to `::`, the first such run on a tie).
    static func ipAddress(_ bytes: [UInt8]) -> String? {
        if bytes.count == 4 {
            return bytes.map { String($0) }.joined(separator: ".")
        }
        guard bytes.count == 16 else { return nil }
        let groups = (0..<8).map { UInt16(bytes[2 * $0]) << 8 | UInt16(bytes[2 * $0 + 1]) }
        var bestStart = -1
        var bestLength = 0
        var index = 0
        while index < 8 {
            guard groups[index] == 0 else {
                index += 1
                continue
            }
            var end = index
            while end < 8, groups[end] == 0 { end += 1 }
            if end - index > bestLength {
                bestStart = index
                bestLength = end - index
            }
            index = end
        }
        func text(_ range: Range<Int>) -> String {
            groups[range].map { String($0, radix: 16) }.joined(separator: ":")
        }
        guard bestLength >= 2 else { return text(0..<8) }
        return text(0..<bestStart) + "::" + text((bestStart + bestLength)..<8)
    }

    private static let curves: [String: (String, Int)] = [
        "1.2.840.10045.3.1.7": ("EC P-256", 256),
        "1.3.132.0.34": ("EC P-384", 384),
        "1.3.132.0.35": ("EC P-521", 521),
    ]

    /// Key type and size from the SubjectPublicKeyInfo DER:
    /// `SEQUENCE { algorithm SEQUENCE { OID, parameters }, subjectPublicKey BIT STRING }`.
    private static func keyFacts(_ spki: [UInt8]) -> (type: String, bits: Int, problem: String?) {
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
                let curve = String(describing: try ASN1ObjectIdentifier(derEncoded: curveNode))
                guard let (name, bits) = Self.curves[curve] else {
                    return ("EC \(curve)", 0, "unknown EC curve \(curve)")
                }
                return (name, bits, nil)
            case "1.3.101.112":
                return ("Ed25519", 256, nil)
            case "1.2.840.113549.1.1.1":
                // RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER }, inside the BIT STRING.
                let bitString = try ASN1BitString(derEncoded: keyNode)
                let rsaKey = try DER.parse(bitString.bytes)
                let modulus = try DER.sequence(rsaKey, identifier: .sequence) { nodes in
                    let modulus = try ArraySlice<UInt8>(derEncoded: &nodes)
                    _ = try ArraySlice<UInt8>(derEncoded: &nodes)
                    return modulus
                }
                let significant = modulus.drop(while: { $0 == 0 })
                guard let first = significant.first else {
                    return ("RSA", 0, "the RSA modulus is zero")
                }
                return ("RSA", significant.count * 8 - first.leadingZeroBitCount, nil)
            default:
                return (algorithm, 0, "unknown public key algorithm \(algorithm)")
            }
        } catch {
            return ("unknown", 0, "the public key cannot be read: \(CertificateParser.describe(error))")
        }
    }

    private static let signatureAlgorithmNames: [String: String] = [
        "1.2.840.10045.4.3.2": "ecdsa-with-SHA256",
        "1.2.840.10045.4.3.3": "ecdsa-with-SHA384",
        "1.2.840.10045.4.3.4": "ecdsa-with-SHA512",
        "1.2.840.10045.4.1": "ecdsa-with-SHA1",
        "1.2.840.113549.1.1.5": "sha1WithRSAEncryption",
        "1.2.840.113549.1.1.11": "sha256WithRSAEncryption",
        "1.2.840.113549.1.1.12": "sha384WithRSAEncryption",
        "1.2.840.113549.1.1.13": "sha512WithRSAEncryption",
        "1.2.840.113549.1.1.4": "md5WithRSAEncryption",
        "1.2.840.113549.1.1.10": "rsassaPss",
        "1.3.101.112": "ED25519",
    ]

    /// The OpenSSL name of the outer signatureAlgorithm: `Certificate ::= SEQUENCE { tbs, algorithm, signature }`.
    private static func signatureAlgorithmName(_ certificate: Certificate) -> String {
        let der = certificate.derBytes
        let reader = BERReader(der)
        do {
            let top = try reader.element(at: 0, limit: der.count)
            let fields = try reader.children(of: top)
            guard fields.count == 3, let oidElement = try reader.children(of: fields[1]).first,
                let oid = reader.objectIdentifier(oidElement)
            else {
                return String(describing: certificate.signatureAlgorithm)
            }
            return Self.signatureAlgorithmNames[oid] ?? oid
        } catch {
            return String(describing: certificate.signatureAlgorithm)
        }
    }
}
