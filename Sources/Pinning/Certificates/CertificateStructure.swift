import Foundation
import SwiftASN1
import X509

/// An X.509 certificate read field by field with swift-asn1, without swift-certificates' `Certificate` parser.
///
/// Why: a pin is a hash of the SubjectPublicKeyInfo, and `inspect`/`pins` must work for every well-formed
/// certificate, including those swift-certificates refuses to parse because it cannot *verify* them: RSASSA-PSS or
/// MD5 signatures, RSA keys under 2048 bits, DSA keys, negative serial numbers, v2 unique identifiers. This type
/// checks only the RFC 5280 §4.1 structure (DER lengths, the fields in order, their ASN.1 types) and keeps
/// every field's exact bytes; whether the certificate can be used for path validation is decided separately
/// (``VerificationSupport``). Nothing read here is trusted: it only feeds facts and pins.
struct CertificateStructure: Sendable {
    /// An AlgorithmIdentifier: `SEQUENCE { algorithm OID, parameters ANY OPTIONAL }`.
    struct Algorithm: Sendable, Hashable {
        var oid: String
        /// The parameters element's exact encoding, `nil` when absent.
        var parameters: ArraySlice<UInt8>?
        /// The whole AlgorithmIdentifier's encoding.
        var encoded: ArraySlice<UInt8>
    }

    /// A Name, with its text when swift-certificates can render it.
    struct Name: Sendable, Hashable {
        var encoded: ArraySlice<UInt8>
        /// RFC 4514 text, most specific attribute first, as `String(describing: DistinguishedName)`.
        var text: String
    }

    /// Why the bytes are not a certificate.
    struct Malformed: Error, Sendable {
        var message: String
        init(_ message: String) { self.message = message }
    }

    /// The whole certificate's DER.
    var der: [UInt8]
    /// The TBSCertificate's exact DER (what the signature covers).
    var tbs: ArraySlice<UInt8>
    /// 1, 2 or 3.
    var version: Int
    /// The serialNumber INTEGER's content octets (two's complement).
    var serialContent: ArraySlice<UInt8>
    /// The TBSCertificate's signature field.
    var innerSignatureAlgorithm: Algorithm
    var issuer: Name
    var notValidBefore: Date
    var notValidAfter: Date
    var subject: Name
    /// The SubjectPublicKeyInfo's exact DER: the pin is SHA-256 of these bytes.
    var subjectPublicKeyInfo: ArraySlice<UInt8>
    var publicKeyAlgorithm: Algorithm
    /// The subjectPublicKey BIT STRING's contents (after the unused-bits octet).
    var publicKeyBits: ArraySlice<UInt8>
    /// The extensions, in order; empty for v1/v2 certificates.
    var extensions: [Certificate.Extension]
    /// The outer signatureAlgorithm.
    var signatureAlgorithm: Algorithm
    /// The signatureValue BIT STRING's contents (after the unused-bits octet).
    var signature: ArraySlice<UInt8>
    /// Deviations from DER/RFC 5280 that were tolerated while reading (time formats, BOOLEAN encodings, …).
    var quirks: [String]

    /// Reads `der` as one X.509 certificate.
    ///
    /// - Throws: ``Malformed`` naming the first field that is not what RFC 5280 §4.1 requires.
    init(der bytes: [UInt8]) throws(Malformed) {
        self.der = bytes
        var quirks: [String] = []
        let root: ASN1Node
        do {
            root = try DER.parse(bytes)
        } catch {
            throw Malformed("not DER: \(CertificateParser.describe(error))")
        }
        let top = try Self.children(root, "the Certificate")
        guard top.count == 3 else {
            throw Malformed("the Certificate SEQUENCE has \(top.count) fields, not 3 (tbsCertificate, signatureAlgorithm, signatureValue)")
        }
        self.signatureAlgorithm = try Self.algorithm(top[1], "signatureAlgorithm")
        self.signature = try Self.bitString(top[2], "signatureValue").bytes

        let tbsNode = top[0]
        self.tbs = tbsNode.encodedBytes
        var fields = try Self.children(tbsNode, "the TBSCertificate")[...]

        // version [0] EXPLICIT Version DEFAULT v1
        var version = 1
        if let first = fields.first, first.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) {
            let inner = try Self.children(first, "the [0] version", sequence: false)
            guard inner.count == 1, inner[0].identifier == .integer, case .primitive(let content) = inner[0].content,
                content.count == 1, content[content.startIndex] <= 2
            else {
                throw Malformed("the version is not v1, v2 or v3")
            }
            version = Int(content[content.startIndex]) + 1
            if version == 1 {
                quirks.append("the version v1 is encoded although it is the default (DER omits it)")
            }
            fields = fields.dropFirst()
        }
        self.version = version

        func next(_ name: String) throws(Malformed) -> ASN1Node {
            guard let node = fields.popFirst() else {
                throw Malformed("the TBSCertificate ends before its \(name)")
            }
            return node
        }

        let serialNode = try next("serialNumber")
        guard serialNode.identifier == .integer, case .primitive(let serial) = serialNode.content, !serial.isEmpty else {
            throw Malformed("the serialNumber is not an INTEGER")
        }
        if serial.count > 1,
            serial[serial.startIndex] == 0x00 && serial[serial.startIndex + 1] & 0x80 == 0
                || serial[serial.startIndex] == 0xFF && serial[serial.startIndex + 1] & 0x80 != 0
        {
            // BER-valid, DER-invalid (X.690 §8.3.2): the value is still unambiguous.
            quirks.append("the serialNumber INTEGER is not minimally encoded (X.690 §8.3.2)")
        }
        self.serialContent = serial
        self.innerSignatureAlgorithm = try Self.algorithm(try next("signature"), "signature")
        self.issuer = try Self.name(try next("issuer"), "issuer")

        let validity = try Self.children(try next("validity"), "the validity")
        guard validity.count == 2 else {
            throw Malformed("the validity has \(validity.count) fields, not 2")
        }
        self.notValidBefore = try Self.time(validity[0], "notBefore", quirks: &quirks)
        self.notValidAfter = try Self.time(validity[1], "notAfter", quirks: &quirks)
        self.subject = try Self.name(try next("subject"), "subject")

        let spkiNode = try next("subjectPublicKeyInfo")
        let spki = try Self.children(spkiNode, "the subjectPublicKeyInfo")
        guard spki.count == 2 else {
            throw Malformed("the subjectPublicKeyInfo has \(spki.count) fields, not 2")
        }
        self.subjectPublicKeyInfo = spkiNode.encodedBytes
        self.publicKeyAlgorithm = try Self.algorithm(spki[0], "subjectPublicKeyInfo algorithm")
        self.publicKeyBits = try Self.bitString(spki[1], "subjectPublicKey").bytes

        // issuerUniqueID [1] IMPLICIT BIT STRING, subjectUniqueID [2] IMPLICIT BIT STRING (v2 and v3 only).
        for tag in [1, 2] where fields.first?.identifier == ASN1Identifier(tagWithNumber: UInt(tag), tagClass: .contextSpecific) {
            guard version >= 2 else {
                throw Malformed("a v1 certificate carries a unique identifier ([\(tag)]), which RFC 5280 §4.1.2.8 allows only from v2")
            }
            fields = fields.dropFirst()
        }

        var extensions: [Certificate.Extension] = []
        if let node = fields.first, node.identifier == ASN1Identifier(tagWithNumber: 3, tagClass: .contextSpecific) {
            fields = fields.dropFirst()
            guard version == 3 else {
                throw Malformed("a v\(version) certificate carries extensions, which RFC 5280 §4.1.2.9 allows only in v3")
            }
            let wrapper = try Self.children(node, "the [3] extensions", sequence: false)
            guard wrapper.count == 1 else {
                throw Malformed("the [3] extensions field does not hold exactly one SEQUENCE")
            }
            for element in try Self.children(wrapper[0], "the extensions") {
                extensions.append(try Self.extensionField(element, quirks: &quirks))
            }
            guard !extensions.isEmpty else {
                throw Malformed("the extensions SEQUENCE is empty (RFC 5280 requires at least one)")
            }
        }
        self.extensions = extensions
        if let extra = fields.first {
            throw Malformed("unexpected field after the TBSCertificate's known fields (tag \(extra.identifier))")
        }
        self.quirks = quirks
    }

    // MARK: Fields

    private static func children(
        _ node: ASN1Node,
        _ what: String,
        sequence: Bool = true
    ) throws(Malformed) -> [ASN1Node] {
        guard case .constructed(let nodes) = node.content else {
            throw Malformed("\(what) is not constructed")
        }
        if sequence && node.identifier != .sequence {
            throw Malformed("\(what) is not a SEQUENCE (tag \(node.identifier))")
        }
        return Array(nodes)
    }

    private static func algorithm(_ node: ASN1Node, _ what: String) throws(Malformed) -> Algorithm {
        let parts = try Self.children(node, "the \(what) AlgorithmIdentifier")
        guard (1...2).contains(parts.count), parts[0].identifier == .objectIdentifier else {
            throw Malformed("the \(what) is not an AlgorithmIdentifier (OID, optional parameters)")
        }
        let oid: ASN1ObjectIdentifier
        do {
            oid = try ASN1ObjectIdentifier(derEncoded: parts[0])
        } catch {
            throw Malformed("the \(what) algorithm OID is malformed: \(CertificateParser.describe(error))")
        }
        return Algorithm(
            oid: String(describing: oid),
            parameters: parts.count == 2 ? parts[1].encodedBytes : nil,
            encoded: node.encodedBytes
        )
    }

    private static func bitString(_ node: ASN1Node, _ what: String) throws(Malformed) -> ASN1BitString {
        do {
            return try ASN1BitString(derEncoded: node)
        } catch {
            throw Malformed("the \(what) is not a DER BIT STRING: \(CertificateParser.describe(error))")
        }
    }

    private static func name(_ node: ASN1Node, _ what: String) throws(Malformed) -> Name {
        // Name ::= SEQUENCE OF SET OF SEQUENCE { type OID, value ANY }: checked here, rendered by swift-certificates
        // when it can.
        var fallback: [String] = []
        for rdn in try Self.children(node, "the \(what)") {
            guard rdn.identifier == .set, case .constructed(let attributes) = rdn.content else {
                throw Malformed("the \(what) holds an element that is not a SET (RelativeDistinguishedName)")
            }
            var parts: [String] = []
            for attribute in attributes {
                guard attribute.identifier == .sequence, case .constructed(let pair) = attribute.content else {
                    throw Malformed("the \(what) holds an attribute that is not a SEQUENCE")
                }
                let pieces = Array(pair)
                guard pieces.count == 2, pieces[0].identifier == .objectIdentifier else {
                    throw Malformed("the \(what) holds an attribute that is not (type OID, value)")
                }
                let type: String
                do {
                    type = String(describing: try ASN1ObjectIdentifier(derEncoded: pieces[0]))
                } catch {
                    throw Malformed("the \(what) holds a malformed attribute type OID")
                }
                parts.append("\(type)=#" + HexText.digits(pieces[1].encodedBytes))
            }
            fallback.append(parts.joined(separator: "+"))
        }
        let text: String
        do {
            text = String(describing: try DistinguishedName(derEncoded: node))
        } catch {
            // RFC 4514 §2.4: an attribute swift-certificates cannot render is shown as OID=#hex of its encoding.
            text = fallback.reversed().joined(separator: ",")
        }
        return Name(encoded: node.encodedBytes, text: text)
    }

    private static func extensionField(_ node: ASN1Node, quirks: inout [String]) throws(Malformed) -> Certificate.Extension {
        let parts = try Self.children(node, "an extension")
        guard (2...3).contains(parts.count), parts[0].identifier == .objectIdentifier,
            parts[parts.count - 1].identifier == .octetString,
            case .primitive(let value) = parts[parts.count - 1].content
        else {
            throw Malformed("an extension is not (extnID OID, critical BOOLEAN, extnValue OCTET STRING)")
        }
        let oid: ASN1ObjectIdentifier
        do {
            oid = try ASN1ObjectIdentifier(derEncoded: parts[0])
        } catch {
            throw Malformed("an extension's OID is malformed")
        }
        var critical = false
        if parts.count == 3 {
            guard parts[1].identifier == .boolean, case .primitive(let flag) = parts[1].content, flag.count == 1 else {
                throw Malformed("extension \(oid)'s critical flag is not a BOOLEAN")
            }
            // BER (X.690 §8.2.2): any non-zero octet is TRUE; DER (§11.1) requires 0xFF, and omits the DEFAULT FALSE.
            critical = flag[flag.startIndex] != 0
            if flag[flag.startIndex] != 0 && flag[flag.startIndex] != 0xFF {
                quirks.append("extension \(oid)'s critical flag is BER TRUE 0x\(HexText.byte(flag[flag.startIndex])), not DER 0xff")
            }
            if !critical {
                quirks.append("extension \(oid) encodes critical FALSE, the DEFAULT that DER omits")
            }
        }
        return Certificate.Extension(oid: oid, critical: critical, value: value)
    }

    // MARK: Time

    /// UTCTime or GeneralizedTime. DER's forms (`YYMMDDHHMMSSZ`, `YYYYMMDDHHMMSSZ`) are read strictly by swift-asn1;
    /// the other forms X.680 allows and old certificates carry (no seconds, a `±HHMM` offset, fractional seconds)
    /// are read here and reported as quirks.
    private static func time(_ node: ASN1Node, _ what: String, quirks: inout [String]) throws(Malformed) -> Date {
        guard node.identifier == .utcTime || node.identifier == .generalizedTime,
            case .primitive(let content) = node.content
        else {
            throw Malformed("the \(what) is not a UTCTime or GeneralizedTime")
        }
        let isUTC = node.identifier == .utcTime
        let text = String(decoding: content, as: UTF8.self)
        guard content.allSatisfy({ $0 < 0x80 }), let date = Self.parseTime(text, utcTime: isUTC) else {
            throw Malformed("the \(what) \(isUTC ? "UTCTime" : "GeneralizedTime") \"\(text)\" is not a valid time")
        }
        let derLength = isUTC ? 13 : 15
        if content.count != derLength || content.last != UInt8(ascii: "Z") {
            quirks.append("the \(what) time \"\(text)\" is not in the DER form (\(isUTC ? "YYMMDDHHMMSSZ" : "YYYYMMDDHHMMSSZ"))")
        }
        return date
    }

    /// Parses `YY[YY]MMDDHHMM[SS][.fff](Z|±HHMM)`; the two-digit UTCTime year is 1950-2049 (RFC 5280 §4.1.2.5.1).
    static func parseTime(_ text: String, utcTime: Bool) -> Date? {
        var chars = Array(text.utf8)[...]
        func digits(_ count: Int) -> Int? {
            guard chars.count >= count else { return nil }
            var value = 0
            for _ in 0..<count {
                let c = chars.removeFirst()
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) else { return nil }
                value = value * 10 + Int(c - UInt8(ascii: "0"))
            }
            return value
        }
        guard var year = digits(utcTime ? 2 : 4), let month = digits(2), let day = digits(2), let hour = digits(2),
            let minute = digits(2)
        else { return nil }
        if utcTime { year += year < 50 ? 2000 : 1900 }
        var second = 0
        if let c = chars.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) {
            guard let s = digits(2) else { return nil }
            second = s
        }
        var fraction = 0.0
        if !utcTime, chars.first == UInt8(ascii: ".") || chars.first == UInt8(ascii: ",") {
            chars.removeFirst()
            var scale = 0.1
            var any = false
            while let c = chars.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) {
                chars.removeFirst()
                fraction += Double(c - UInt8(ascii: "0")) * scale
                scale /= 10
                any = true
            }
            guard any else { return nil }
        }
        var offset = 0
        switch chars.first {
        case UInt8(ascii: "Z"):
            chars.removeFirst()
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign = chars.removeFirst() == UInt8(ascii: "+") ? 1 : -1
            guard let hours = digits(2), let minutes = digits(2), hours < 24, minutes < 60 else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        default:
            // GeneralizedTime without a zone is local time (X.680 §46.3): its instant is unknown, so refuse it.
            return nil
        }
        guard chars.isEmpty, (1...12).contains(month), hour < 24, minute < 60, second < 60 else { return nil }
        guard (1...CivilCalendar.daysIn(month: month, year: year)).contains(day) else { return nil }
        let days = CivilCalendar.daysFromCivil(year: year, month: month, day: day)
        let seconds = Double(days * 86_400 + hour * 3600 + minute * 60 + second - offset) + fraction
        return Date(timeIntervalSince1970: seconds)
    }
}
