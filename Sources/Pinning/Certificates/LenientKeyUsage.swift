import SwiftASN1
import X509

/// The keyUsage of a certificate, read strictly by swift-certificates first and, only when that refuses it, by a
/// small decoder that tolerates the non-DER encodings real trust anchors carry.
///
/// Why: two roots that Debian, Mozilla and every browser ship (Trustwave Global ECC P256 and P384 Certification
/// Authority) encode keyUsage as `03 03 07 06 00`: a BIT STRING with a trailing zero octet and 7 unused bits,
/// where DER (X.690 §11.2.2, a named bit list without trailing zero bits) requires `03 02 01 06`.
/// swift-certificates refuses it ("Too many bits for Key Usage"), so these roots could not anchor any path,
/// while OpenSSL, curl, Python, Go and Node read them as keyCertSign + cRLSign.
///
/// What is tolerated, and why each is safe (the meaning of every bit is unambiguous in BER, X.690 §8.6):
/// - trailing zero bits or zero octets after the last set bit (X.690 §11.2.2 is a DER-only rule; BER allows them);
/// - a non-minimal count of unused bits in the last octet (the same DER-only rule);
/// - unused bits that are not zero (X.690 §11.2.1 is DER-only; BER decoders, OpenSSL's `c2i_ASN1_BIT_STRING`
///   and Go's `encoding/asn1` ignore them): their value is discarded, never read as a usage.
///
/// What is still refused (thrown), because it is not an encoding quirk but content that has no meaning or
/// cannot be read: a value that is not exactly one primitive BIT STRING, an unused-bit count over 7, unused
/// bits in an empty BIT STRING, and any set bit after decipherOnly (bit 8), which RFC 5280 §4.2.1.3 does not
/// define.
enum LenientKeyUsage {
    /// Why a keyUsage extension cannot be read even leniently.
    struct DecodingError: Error, Hashable, Sendable, CustomStringConvertible {
        /// What is wrong, in words.
        var problem: String
        /// ``problem`` without the library's own text, where it has some (`pinning inspect` without `--verbose`).
        var problemInWords: String? = nil

        /// `"keyUsage extension is malformed: …"`
        var description: String { "keyUsage extension is malformed: \(self.problem)" }
        /// ``description`` in words only.
        var descriptionInWords: String { "keyUsage extension is malformed: \(self.problemInWords ?? self.problem)" }
    }

    /// A decoded keyUsage and the encoding quirks that were tolerated to read it (empty when it is valid DER).
    struct Decoded: Hashable, Sendable {
        /// The usages.
        var usage: KeyUsage
        /// The deviations from DER that were tolerated, in words; empty for a DER-conforming value.
        var quirks: [String]
    }

    /// The effective keyUsage of `certificate`: `nil` when the extension is absent.
    ///
    /// swift-certificates' strict DER parser is tried first; the lenient decoder runs only when it throws.
    ///
    /// - Throws: ``DecodingError`` when the value cannot be read even under BER rules.
    static func effectiveKeyUsage(of certificate: Certificate) throws(DecodingError) -> KeyUsage? {
        try self.decoded(of: certificate)?.usage
    }

    /// ``effectiveKeyUsage(of:)`` with the quirks that were tolerated.
    static func decoded(of certificate: Certificate) throws(DecodingError) -> Decoded? {
        try self.decoded(of: certificate.extensions)
    }

    /// The keyUsage of a set of extensions, strictly first, then leniently; `nil` when absent.
    static func decoded(of extensions: Certificate.Extensions) throws(DecodingError) -> Decoded? {
        let strictError: any Error
        do {
            guard let usage = try extensions.keyUsage else { return nil }
            return Decoded(usage: usage, quirks: [])
        } catch {
            strictError = error
        }
        guard let ext = extensions[oid: .X509ExtensionID.keyUsage] else {
            // The strict accessor threw for a reason other than the value (it found the extension before).
            throw DecodingError(problem: CertificateParser.describe(strictError), problemInWords: CertificateParser.describeApart(strictError).words)
        }
        return try self.decode(extensionValue: ext.value)
    }

    /// The keyUsage of one extension (the certificate's keyUsage extension, found by its OID), strictly first,
    /// then leniently; `nil` when absent. The same as ``decoded(of:)-(Certificate.Extensions)`` for a caller that
    /// has found the extension already (``CertificateFacts`` reads every extension in one pass).
    static func decoded(keyUsageExtension ext: Certificate.Extension?) throws(DecodingError) -> Decoded? {
        guard let ext else { return nil }
        do {
            return Decoded(usage: try KeyUsage(ext), quirks: [])
        } catch {
            return try self.decode(extensionValue: ext.value)
        }
    }

    /// Decodes a keyUsage extension value (the contents of extnValue's OCTET STRING) under the rules above.
    static func decode(extensionValue value: ArraySlice<UInt8>) throws(DecodingError) -> Decoded {
        let node: ASN1Node
        do {
            // DER.parse refuses indefinite and non-minimal lengths and trailing bytes after the BIT STRING: no real
            // root needs those, so they stay refused.
            node = try DER.parse(value)
        } catch {
            throw DecodingError(
                problem: "not a single DER element (\(CertificateParser.describe(error)))",
                problemInWords: "not a single DER element (\(CertificateParser.describeApart(error).words))")
        }
        guard node.identifier == .bitString else {
            throw DecodingError(problem: "the value is not a BIT STRING (tag \(node.identifier))")
        }
        guard case .primitive(let content) = node.content else {
            throw DecodingError(problem: "the BIT STRING uses the constructed encoding")
        }
        guard let unusedBits = content.first else {
            throw DecodingError(problem: "the BIT STRING has no unused-bits octet")
        }
        guard unusedBits <= 7 else {
            throw DecodingError(problem: "the BIT STRING declares \(unusedBits) unused bits (at most 7)")
        }
        var octets = Array(content.dropFirst())
        guard !octets.isEmpty || unusedBits == 0 else {
            throw DecodingError(problem: "an empty BIT STRING declares \(unusedBits) unused bits")
        }

        var quirks: [String] = []
        if let last = octets.last {
            let unusedMask = ~(UInt8.max << unusedBits)
            if last & unusedMask != 0 {
                quirks.append("its \(unusedBits) unused bit(s) are not zero (ignored, as BER allows)")
                octets[octets.count - 1] = last & ~unusedMask
            }
        }
        // Bit n of a named bit list is bit (7 - n % 8) of octet n / 8.
        func isSet(_ bit: Int) -> Bool {
            bit / 8 < octets.count && octets[bit / 8] & (0x80 >> UInt8(bit % 8)) != 0
        }
        let totalBits = octets.count * 8 - Int(unusedBits)
        if let undefined = (9..<max(totalBits, 9)).first(where: isSet) {
            throw DecodingError(problem: "bit \(undefined) is set; RFC 5280 defines keyUsage bits 0 to 8 only")
        }
        let highestSet = (0..<min(totalBits, 9)).last(where: isSet)
        let minimalOctets = highestSet.map { $0 / 8 + 1 } ?? 0
        let minimalUnused = highestSet.map { 7 - $0 % 8 } ?? 0
        if octets.count != minimalOctets || Int(unusedBits) != minimalUnused {
            let hex = value.map { byte in
                let digits = Array("0123456789abcdef")
                return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
            }.joined(separator: " ")
            quirks.append(
                "it is not minimally encoded (\(hex): trailing zero bits or octets that DER, X.690 §11.2.2, "
                    + "forbids; read under BER rules as OpenSSL does)"
            )
        }
        let usage = KeyUsage(
            digitalSignature: isSet(0),
            nonRepudiation: isSet(1),
            keyEncipherment: isSet(2),
            dataEncipherment: isSet(3),
            keyAgreement: isSet(4),
            keyCertSign: isSet(5),
            cRLSign: isSet(6),
            encipherOnly: isSet(7),
            decipherOnly: isSet(8)
        )
        return Decoded(usage: usage, quirks: quirks.map { "keyUsage: \($0)" })
    }
}
