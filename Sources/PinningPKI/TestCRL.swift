public import Foundation
public import Pinning
import SwiftASN1
public import X509

/// A certificate revocation list (RFC 5280 §5) issued by a test CA: version 2, the issuer's name, thisUpdate and
/// nextUpdate, the revoked serial numbers with their dates and reason codes, and the two extensions RFC 5280
/// requires of a conforming CA (authority key identifier and CRL number), signed with the issuer's key.
///
/// Made for tests and for `pinning pki crl`; `openssl crl -verify` and `openssl verify -crl_check` accept what
/// it writes (the tests check both).
public struct TestCRL: Sendable, Hashable {
    /// Why a certificate was revoked: the core's `CRLReason`, so the reader and the writer share one list.
    public typealias Reason = CertificateRevocationList.Reason

    /// One revoked certificate.
    public struct Entry: Sendable, Hashable {
        /// The certificate's serial number.
        public var serialNumber: Certificate.SerialNumber
        /// When it was revoked.
        public var revocationDate: Date
        /// Why; nil writes no reasonCode extension (RFC 5280 asks CAs to omit it rather than write `unspecified`).
        public var reason: Reason?

        /// An entry.
        public init(serialNumber: Certificate.SerialNumber, revocationDate: Date, reason: Reason? = nil) {
            self.serialNumber = serialNumber
            self.revocationDate = revocationDate
            self.reason = reason
        }
    }

    /// The CRL's DER encoding.
    public let der: [UInt8]

    /// The CRL as PEM (`-----BEGIN X509 CRL-----`).
    public var pem: String {
        let base64 = Data(self.der).base64EncodedString()
        var lines = ["-----BEGIN X509 CRL-----"]
        var index = base64.startIndex
        while index < base64.endIndex {
            let end = base64.index(index, offsetBy: 64, limitedBy: base64.endIndex) ?? base64.endIndex
            lines.append(String(base64[index..<end]))
            index = end
        }
        lines.append("-----END X509 CRL-----")
        return lines.joined(separator: "\n") + "\n"
    }

    /// Issues a CRL signed by `issuer`.
    ///
    /// - Parameters:
    ///   - issuer: The CA (its name, key identifier and private key).
    ///   - entries: The revoked certificates.
    ///   - number: The CRL number (RFC 5280 §5.2.3: increasing for each CRL the issuer makes), 0 or more.
    ///   - thisUpdate: When it is issued.
    ///   - nextUpdate: When the next one will be (RFC 5280 requires it of conforming CAs); nil omits it.
    /// - Throws: ``TestPKIError`` when the key cannot sign or a value cannot be encoded.
    public init(issuer: TestIdentity, entries: [Entry], number: Int, thisUpdate: Date, nextUpdate: Date?) throws(TestPKIError) {
        guard number >= 0 else { throw TestPKIError(.invalidValidity, "the CRL number \(number) is negative") }
        do {
            let algorithm = try Certificate.SignatureAlgorithm.forIssuer(issuer.privateKey.publicKey)
            let algorithmIdentifier = try Self.algorithmIdentifier(algorithm)
            var tbs = DER.Serializer()
            try tbs.appendConstructedNode(identifier: .sequence) { tbs in
                try tbs.serialize(1)  // version v2
                tbs.serializeRawBytes(algorithmIdentifier)
                try tbs.serialize(issuer.certificate.subject)
                try Self.serializeTime(thisUpdate, into: &tbs)
                if let nextUpdate { try Self.serializeTime(nextUpdate, into: &tbs) }
                if !entries.isEmpty {
                    try tbs.appendConstructedNode(identifier: .sequence) { list in
                        for entry in entries {
                            try list.appendConstructedNode(identifier: .sequence) { revoked in
                                // The serial's magnitude as an unsigned DER INTEGER: a 0x00 first when the top
                                // bit is set (else it would read as negative), and 0 as one zero byte.
                                let magnitude = Array(entry.serialNumber.bytes)
                                let content = magnitude.isEmpty || magnitude[0] & 0x80 != 0 ? [0x00] + magnitude : magnitude
                                revoked.appendPrimitiveNode(identifier: .integer) { $0.append(contentsOf: content) }
                                try Self.serializeTime(entry.revocationDate, into: &revoked)
                                if let reason = entry.reason {
                                    try revoked.appendConstructedNode(identifier: .sequence) { extensions in
                                        // reasonCode ::= ENUMERATED, never critical (RFC 5280 §5.3.1).
                                        let value: [UInt8] = [0x0A, 0x01, UInt8(reason.rawValue)]
                                        try extensions.serialize(Certificate.Extension(oid: [2, 5, 29, 21], critical: false, value: value[...]))
                                    }
                                }
                            }
                        }
                    }
                }
                try tbs.appendConstructedNode(identifier: ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)) { explicit in
                    try explicit.appendConstructedNode(identifier: .sequence) { extensions in
                        let keyIdentifier = AuthorityKeyIdentifier(keyIdentifier: issuer.subjectKeyIdentifier)
                        try extensions.serialize(Certificate.Extension(keyIdentifier, critical: false))
                        var integer = DER.Serializer()
                        try integer.serialize(number)
                        // cRLNumber ::= INTEGER (0..MAX), non-critical (RFC 5280 §5.2.3).
                        try extensions.serialize(Certificate.Extension(oid: [2, 5, 29, 20], critical: false, value: integer.serializedBytes[...]))
                    }
                }
            }
            let tbsBytes = tbs.serializedBytes
            let signature = try issuer.privateKey.sign(bytes: tbsBytes, signatureAlgorithm: algorithm)
            var list = DER.Serializer()
            try list.appendConstructedNode(identifier: .sequence) { list in
                list.serializeRawBytes(tbsBytes)
                list.serializeRawBytes(algorithmIdentifier)
                try list.serialize(ASN1BitString(bytes: signature.rawRepresentation[...]))
            }
            self.der = list.serializedBytes
        } catch let error as TestPKIError {
            throw error
        } catch {
            throw TestPKIError(.unsupportedKey, "cannot issue the CRL: \(error)")
        }
    }

    /// The AlgorithmIdentifier DER of the algorithms `forIssuer` picks (swift-certificates keeps its own
    /// serialization internal): ECDSA and Ed25519 without parameters, RSA with NULL (RFC 5758, 8410, 4055).
    static func algorithmIdentifier(_ algorithm: Certificate.SignatureAlgorithm) throws(TestPKIError) -> [UInt8] {
        let oid: ASN1ObjectIdentifier
        var nullParameters = false
        switch algorithm {
        case .ecdsaWithSHA256: oid = [1, 2, 840, 10045, 4, 3, 2]
        case .ecdsaWithSHA384: oid = [1, 2, 840, 10045, 4, 3, 3]
        case .ecdsaWithSHA512: oid = [1, 2, 840, 10045, 4, 3, 4]
        case .sha256WithRSAEncryption:
            oid = [1, 2, 840, 113549, 1, 1, 11]
            nullParameters = true
        case .ed25519: oid = [1, 3, 101, 112]
        default: throw TestPKIError(.unsupportedKey, "no CRL signature algorithm for \(algorithm)")
        }
        do {
            var serializer = DER.Serializer()
            try serializer.appendConstructedNode(identifier: .sequence) { sequence in
                try sequence.serialize(oid)
                if nullParameters { try sequence.serialize(ASN1Null()) }
            }
            return serializer.serializedBytes
        } catch {
            throw TestPKIError(.unsupportedKey, "cannot encode the signature algorithm: \(error)")
        }
    }

    /// UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 §5.1.2.4), in whole seconds, UTC.
    static func serializeTime(_ date: Date, into serializer: inout DER.Serializer) throws {
        guard let utc = TimeZone(identifier: "UTC") else { throw TestPKIError(.invalidValidity, "no UTC time zone") }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = utc
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        guard let year = parts.year, let month = parts.month, let day = parts.day, let hour = parts.hour, let minute = parts.minute,
            let second = parts.second
        else {
            throw TestPKIError(.invalidValidity, "cannot break \(date) into calendar fields")
        }
        if (1950...2049).contains(year) {
            try serializer.serialize(UTCTime(year: year, month: month, day: day, hours: hour, minutes: minute, seconds: second))
        } else {
            try serializer.serialize(GeneralizedTime(year: year, month: month, day: day, hours: hour, minutes: minute, seconds: second, fractionalSeconds: 0))
        }
    }
}
