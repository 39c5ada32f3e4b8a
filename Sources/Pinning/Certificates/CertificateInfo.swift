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
    /// The serial number in lowercase hex without colons or leading zero bytes, e.g. `"1a2b3c"`; a negative one
    /// (which RFC 5280 forbids but some certificates carry) as `-` and the hex of its magnitude, e.g. `"-05"`.
    public var serialNumber: String
    /// The start of the validity period.
    public var notValidBefore: Date
    /// The end of the validity period.
    public var notValidAfter: Date
    /// The subjectAltName entries in certificate order; empty when the extension is absent or malformed.
    public var subjectAlternativeNames: [SubjectAlternativeName]
    /// `"EC P-256"`, `"EC P-384"`, `"EC P-521"`, `"RSA"` or `"Ed25519"`; for keys the verifier does not support,
    /// e.g. `"DSA"`, `"RSASSA-PSS"`, `"EC explicit parameters"`, `"EC brainpoolP256r1"`, `"Ed448"`.
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
    /// The X.509 version: 1, 2 or 3.
    public var version: Int
    /// What the verifier does not support in this certificate, in words ("signature algorithm rsassaPss (…) is not
    /// supported for verification: …"); empty when it can be used for evaluation. Such a certificate can still be
    /// inspected and pinned.
    public var unsupportedForVerification: [String]
    /// Encoding quirks that were tolerated to read the certificate (a keyUsage BIT STRING that is not minimal DER,
    /// a non-DER time form, …) and facts that could not be established (a self-signature not checked); empty for
    /// a plain DER certificate.
    public var notes: [String]

    /// The facts of `certificate`. Never throws: unreadable parts are reported in ``problems``.
    ///
    /// - Parameter certificate: The certificate to describe.
    public init(_ certificate: Certificate) {
        let der = certificate.derBytes
        self.init(
            base: BaseFacts(
                subject: String(describing: certificate.subject),
                issuer: String(describing: certificate.issuer),
                serialNumber: Self.serialHex(certificate.serialNumber.bytes),
                notValidBefore: certificate.notValidBefore,
                notValidAfter: certificate.notValidAfter,
                version: certificate.version == .v1 ? 1 : certificate.version == .v3 ? 3 : 2,
                extensions: certificate.extensions,
                extensionsProblem: nil,
                spki: certificate.subjectPublicKeyInfoDER,
                signatureAlgorithm: Self.signatureAlgorithmName(der: der, fallback: String(describing: certificate.signatureAlgorithm)),
                der: der,
                isSelfSigned: certificate.subject == certificate.issuer
                    && certificate.publicKey.isValidSignature(certificate.signature, for: certificate),
                unsupportedForVerification: [],
                notes: []
            )
        )
    }

    /// The facts of a certificate that swift-certificates could not parse, read by ``CertificateStructure``.
    init(structure: CertificateStructure, unsupportedForVerification: [String]) {
        var notes = structure.quirks
        let extensions: Certificate.Extensions
        var extensionsProblem: String? = nil
        do {
            extensions = try Certificate.Extensions(structure.extensions)
        } catch {
            extensions = Certificate.Extensions()
            extensionsProblem = "the extensions cannot be read: \(CertificateParser.describe(error))"
        }
        var isSelfSigned = false
        if structure.subject.encoded.elementsEqual(structure.issuer.encoded) {
            switch SignatureCheck.verify(structure, by: structure) {
            case .valid:
                isSelfSigned = true
            case .invalid:
                notes.append("subject equals issuer, but the certificate's own key does not verify its signature")
            case .notChecked(let reason):
                notes.append("subject equals issuer; the self-signature was not checked: \(reason)")
            }
        }
        self.init(
            base: BaseFacts(
                subject: structure.subject.text,
                issuer: structure.issuer.text,
                serialNumber: Self.serialText(structure.serialContent),
                notValidBefore: structure.notValidBefore,
                notValidAfter: structure.notValidAfter,
                version: structure.version,
                extensions: extensions,
                extensionsProblem: extensionsProblem,
                spki: Array(structure.subjectPublicKeyInfo),
                signatureAlgorithm: VerificationSupport.signatureAlgorithmName(structure.signatureAlgorithm),
                der: structure.der,
                isSelfSigned: isSelfSigned,
                unsupportedForVerification: unsupportedForVerification,
                notes: notes
            )
        )
    }

    /// The facts of any well-formed X.509 certificate, whether or not the verifier supports it.
    ///
    /// - Parameter der: One DER certificate.
    /// - Throws: ``CertificateLoadingError`` (origin `"certificate"`) with code
    ///   ``CertificateLoadingError/Code/malformedDER`` when the bytes are not an X.509 certificate.
    public init(derEncoded der: [UInt8]) throws(CertificateLoadingError) {
        let raw = CertificateParser.RawCertificate(der: der, what: "the certificate", failureCode: .malformedDER)
        self = try CertificateParser.inspect(raw, origin: "certificate").get().info
    }

    /// What both initialisers know before the extension-derived facts are computed.
    private struct BaseFacts {
        var subject: String
        var issuer: String
        var serialNumber: String
        var notValidBefore: Date
        var notValidAfter: Date
        var version: Int
        var extensions: Certificate.Extensions
        var extensionsProblem: String?
        var spki: [UInt8]
        var signatureAlgorithm: String
        var der: [UInt8]
        var isSelfSigned: Bool
        var unsupportedForVerification: [String]
        var notes: [String]
    }

    private init(base: BaseFacts) {
        var problems: [String] = []
        var notes = base.notes
        self.subject = base.subject
        self.issuer = base.issuer
        self.serialNumber = base.serialNumber
        self.notValidBefore = base.notValidBefore
        self.notValidAfter = base.notValidAfter
        self.version = base.version

        let extensions = base.extensions
        if let problem = base.extensionsProblem { problems.append(problem) }

        let names = Self.describeSubjectAlternativeNames(extensions)
        self.subjectAlternativeNames = names.names
        problems += names.problems

        let key = Self.keyFacts(base.spki)
        self.keyType = key.type
        self.keySize = key.bits
        if let problem = key.problem { problems.append(problem) }

        self.signatureAlgorithm = base.signatureAlgorithm

        var basicConstraints: BasicConstraints? = nil
        do {
            switch try extensions.basicConstraints {
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
            if let decoded = try LenientKeyUsage.decoded(of: extensions) {
                let usage = decoded.usage
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
                notes += decoded.quirks
            }
        } catch {
            problems.append(error.description)
        }
        self.keyUsage = keyUsage

        var extendedKeyUsage: [String]? = nil
        do {
            if let usages = try extensions.extendedKeyUsage {
                extendedKeyUsage = usages.map { usage in
                    usage == .any ? "anyExtendedKeyUsage" : String(describing: usage)
                }
            }
        } catch {
            problems.append("extendedKeyUsage extension is malformed: \(CertificateParser.describe(error))")
        }
        self.extendedKeyUsage = extendedKeyUsage

        self.sha1Fingerprint = Self.colonHex(Array(Insecure.SHA1.hash(data: base.der)))
        self.sha256Fingerprint = Self.sha256Fingerprint(ofDER: base.der)
        self.spkiPin = Pin(subjectPublicKeyInfoDER: base.spki).description
        self.isSelfSigned = base.isSelfSigned
        self.problems = problems
        self.unsupportedForVerification = base.unsupportedForVerification
        self.notes = notes
    }

    // MARK: Codable

    private enum CodingKeys: String, CodingKey {
        case subject, issuer, serialNumber, notValidBefore, notValidAfter, subjectAlternativeNames, keyType
        case keySize, signatureAlgorithm, basicConstraints, keyUsage, extendedKeyUsage, sha1Fingerprint
        case sha256Fingerprint, spkiPin, isSelfSigned, isCA, problems, version, unsupportedForVerification, notes
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
        try container.encode(self.version, forKey: .version)
        try container.encode(self.unsupportedForVerification, forKey: .unsupportedForVerification)
        try container.encode(self.notes, forKey: .notes)
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
        // Added later: absent in JSON written by earlier versions.
        self.version = try container.decodeIfPresent(Int.self, forKey: .version) ?? 3
        self.unsupportedForVerification =
            try container.decodeIfPresent([String].self, forKey: .unsupportedForVerification) ?? []
        self.notes = try container.decodeIfPresent([String].self, forKey: .notes) ?? []
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

    /// ``serialHex(_:)`` of an INTEGER's two's-complement content octets; a negative number as `-` and the hex of
    /// its magnitude (`-05`), as OpenSSL prints `-0x5`.
    static func serialText(_ content: ArraySlice<UInt8>) -> String {
        guard let first = content.first, first & 0x80 != 0 else { return Self.serialHex(content) }
        // Magnitude of a negative two's-complement number: invert and add one.
        var magnitude = content.map { ~$0 }
        var index = magnitude.count - 1
        while index >= 0 {
            let (sum, overflow) = magnitude[index].addingReportingOverflow(1)
            magnitude[index] = sum
            if !overflow { break }
            index -= 1
        }
        return "-" + Self.serialHex(magnitude[...])
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
        Self.describeSubjectAlternativeNames(certificate.extensions).names
    }

    /// ``sha256Fingerprint`` of `certificate` alone.
    package static func sha256Fingerprint(of certificate: Certificate) -> String {
        Self.sha256Fingerprint(ofDER: certificate.derBytes)
    }

    private static func sha256Fingerprint(ofDER der: [UInt8]) -> String {
        Self.colonHex(Array(SHA256.hash(data: der)))
    }

    private static func describeSubjectAlternativeNames(_ extensions: Certificate.Extensions) -> (names: [SubjectAlternativeName], problems: [String]) {
        var names: [SubjectAlternativeName] = []
        var problems: [String] = []
        do {
            if let extensionValue = try extensions.subjectAlternativeNames {
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

    private static let otherCurveBits: [String: Int] = [
        "1.3.132.0.10": 256, "1.2.840.10045.3.1.1": 192, "1.3.132.0.33": 224,
        "1.3.36.3.3.2.8.1.1.7": 256, "1.3.36.3.3.2.8.1.1.11": 384, "1.3.36.3.3.2.8.1.1.13": 512,
    ]

    /// The bit length of an unsigned big-endian integer.
    private static func bitLength(_ bytes: ArraySlice<UInt8>) -> Int {
        let significant = bytes.drop(while: { $0 == 0 })
        guard let first = significant.first else { return 0 }
        return significant.count * 8 - first.leadingZeroBitCount
    }

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
        } catch {
            return ("unknown", 0, "the public key cannot be read: \(CertificateParser.describe(error))")
        }
    }

    /// The OpenSSL name of the outer signatureAlgorithm: `Certificate ::= SEQUENCE { tbs, algorithm, signature }`.
    private static func signatureAlgorithmName(der: [UInt8], fallback: String) -> String {
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
