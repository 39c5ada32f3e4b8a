import SwiftASN1
import X509

/// Matches a leaf certificate against the expected peer name.
///
/// Rules (RFC 6125 as browsers and Apple platforms since iOS 13 apply it):
/// - Only the subjectAltName extension is consulted. Deliberate deviation from RFC 6125 §6.4.4 and from
///   swift-certificates' `ServerIdentityPolicy`, which fall back to the subject's common name when there is no
///   SAN: every browser has stopped doing that, and a CN fallback lets a certificate that was never issued for
///   TLS names satisfy the check.
/// - DNS names compare case-insensitively, ignoring one trailing dot.
/// - A wildcard is honoured only as the whole left-most label (`*.example.com`), matches exactly one label,
///   and never a name whose remaining part is a single label (`*.com` matches nothing).
/// - IP addresses match only IP-address SANs, byte for byte; DNS SANs that spell an address never match.
enum HostnameCheck {
    struct Mismatch: Error {
        /// The names the leaf carries, for the failure report.
        var presentedNames: [String]
        var problem: String
    }

    static func check(_ leaf: Certificate, against name: PeerName) -> Mismatch? {
        Self.check(Result { try leaf.extensions.subjectAlternativeNames }, against: name)
    }

    /// ``check(_:against:)`` for a leaf whose subjectAltName extension was decoded already (``CertificateFacts``).
    static func check(_ decoded: Result<SubjectAlternativeNames?, any Error>, against name: PeerName) -> Mismatch? {
        let sans: SubjectAlternativeNames?
        do {
            sans = try decoded.get()
        } catch {
            return Mismatch(presentedNames: [], problem: "the leaf's subjectAltName extension is malformed")
        }
        guard let sans else {
            return Mismatch(
                presentedNames: [],
                problem: "the leaf has no subjectAltName extension (its common name is never used as a host name)"
            )
        }
        for entry in sans {
            switch (entry, name.kind) {
            case (.dnsName(let pattern), .dns(let host)):
                if Self.dnsName(pattern, matches: host) { return nil }
            case (.ipAddress(let octets), .ip(let address)):
                if Array(octets.bytes) == address { return nil }
            default:
                continue
            }
        }
        // Described only for the refusal: a match needs no words.
        let presented = Self.describe(sans)
        let expected = name.isIPAddress ? "IP address" : "DNS name"
        return Mismatch(
            presentedNames: presented,
            problem: "the leaf is not valid for \(expected) \(name.text); it names "
                + (presented.isEmpty ? "nothing usable" : presented.joined(separator: ", "))
        )
    }

    /// `pattern` is a dNSName SAN; `host` is already lower-cased without a trailing dot.
    static func dnsName(_ pattern: String, matches host: String) -> Bool {
        var pattern = pattern.lowercased()
        if pattern.hasSuffix(".") { pattern.removeLast() }
        guard !pattern.isEmpty, pattern.utf8.allSatisfy({ $0 < 0x80 }) else { return false }
        if !pattern.contains("*") {
            return pattern == host
        }
        // Only "*." followed by at least two labels, with no other '*'.
        guard pattern.hasPrefix("*.") else { return false }
        let suffix = pattern.dropFirst(2)
        guard !suffix.contains("*"), suffix.contains("."), !suffix.hasPrefix("."), !suffix.hasSuffix(".") else {
            return false
        }
        guard let firstDot = host.firstIndex(of: ".") else { return false }
        let firstLabel = host[..<firstDot]
        let rest = host[host.index(after: firstDot)...]
        return !firstLabel.isEmpty && rest == suffix
    }

    static func describe(_ sans: SubjectAlternativeNames) -> [String] {
        sans.map { entry in
            switch entry {
            case .dnsName(let name): return "DNS:\(name)"
            case .ipAddress(let octets): return "IP:\(IPAddressText.formatOrHex(Array(octets.bytes)))"
            case .uniformResourceIdentifier(let uri): return "URI:\(uri)"
            case .rfc822Name(let email): return "email:\(email)"
            case .directoryName(let dn): return "DirName:\(dn)"
            default: return "other:\(entry)"
            }
        }
    }
}
