import Crypto
import Foundation
import SwiftASN1
package import X509

// Serial numbers, fingerprints and subjectAltNames as `pinning inspect` prints them.
extension CertificateInfo {

    static func serialHex(_ bytes: ArraySlice<UInt8>) -> String {
        let significant = bytes.drop(while: { $0 == 0 })
        guard !significant.isEmpty else { return "00" }
        return HexText.digits(significant)
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
        HexText.digits(bytes, uppercase: true, separator: ":")
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

    static func sha256Fingerprint(ofDER der: [UInt8]) -> String {
        Self.colonHex(Array(SHA256.hash(data: der)))
    }

    static func describeSubjectAlternativeNames(
        _ extensions: Certificate.Extensions
    ) -> (names: [SubjectAlternativeName], problems: [String], problemsInWords: [String]) {
        var names: [SubjectAlternativeName] = []
        var problems: [String] = []
        var problemsInWords: [String] = []
        do {
            if let extensionValue = try extensions.subjectAlternativeNames {
                for name in extensionValue {
                    let (entry, problem) = Self.describe(name)
                    names.append(entry)
                    if let problem {
                        problems.append(problem)
                        problemsInWords.append(problem)
                    }
                }
            }
        } catch {
            problems.append("subjectAltName extension is malformed: \(CertificateParser.describe(error))")
            problemsInWords.append("subjectAltName extension is malformed: \(CertificateParser.describeApart(error).words)")
        }
        return (names, problems, problemsInWords)
    }

    static func describe(_ name: GeneralName) -> (SubjectAlternativeName, String?) {
        switch name {
        case .dnsName(let dns):
            return (SubjectAlternativeName(kind: "DNS", value: dns), nil)
        case .rfc822Name(let email):
            return (SubjectAlternativeName(kind: "email", value: email), nil)
        case .uniformResourceIdentifier(let uri):
            return (SubjectAlternativeName(kind: "URI", value: uri), nil)
        case .ipAddress(let octets):
            let bytes = Array(octets.bytes)
            if let address = IPAddressText.format(bytes) {
                return (SubjectAlternativeName(kind: "IP", value: address), nil)
            }
            return (
                SubjectAlternativeName(kind: "IP", value: HexText.digits(bytes)),
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
}
