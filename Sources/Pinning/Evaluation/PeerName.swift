import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The name a server is expected to prove: a DNS name or an IP address.
///
/// A host string that parses as an IPv4 or IPv6 address (brackets allowed: `[::1]`) is an IP address and is
/// matched only against IP address subjectAltNames; anything else is a DNS name, matched only against DNS
/// subjectAltNames. The common name is never consulted.
public struct PeerName: Hashable, Sendable, CustomStringConvertible {
    enum Kind: Hashable, Sendable {
        /// Lower-cased, trailing dot removed.
        case dns(String)
        /// 4 or 16 bytes, network order.
        case ip([UInt8])
    }

    let kind: Kind
    /// The text the caller gave.
    public let text: String

    /// Interprets `host` as an IP address if it is one, else as a DNS name.
    ///
    /// - Throws: ``PeerNameError`` for an empty name or one that is neither an IP address nor a plausible DNS
    ///   name. An internationalised name (`σkhttp.com`) is converted to its A-labels (`xn--khttp-fde.com`)
    ///   first, as OkHttp and browsers do.
    public init(_ host: String) throws(PeerNameError) {
        self.text = host
        var candidate = host
        if candidate.hasPrefix("[") && candidate.hasSuffix("]") && candidate.count > 2 {
            candidate = String(candidate.dropFirst().dropLast())
        }
        if let bytes = Self.ipAddressBytes(candidate) {
            self.kind = .ip(bytes)
            return
        }
        // An internationalised name is checked by its A-labels, the form certificates carry (``IDNA``).
        var name: String
        do {
            name = try IDNA.toASCII(host)
        } catch {
            throw PeerNameError(text: host, problem: "not a valid internationalised host name: \(error.problem)")
        }
        if name.hasSuffix(".") { name.removeLast() }
        guard !name.isEmpty else {
            throw PeerNameError(text: host, problem: "the host name is empty")
        }
        guard name.utf8.count <= 253,
            name.utf8.allSatisfy({ Self.isDNSCharacter($0) }),
            !name.split(separator: ".", omittingEmptySubsequences: false).contains(where: { $0.isEmpty || $0.count > 63 })
        else {
            throw PeerNameError(
                text: host,
                problem: "not an IP address and not a DNS name (letters, digits, '-', '_' and '.', in A-label form)"
            )
        }
        self.kind = .dns(name)
    }

    /// Whether this is an IP address rather than a DNS name.
    public var isIPAddress: Bool {
        if case .ip = self.kind { return true }
        return false
    }

    /// The name as given (an IPv6 address without brackets).
    public var description: String { self.text }

    private static func isDNSCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }

    /// The bytes of an IPv4 (dotted quad only) or IPv6 address, or nil.
    static func ipAddressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// Renders IP address bytes as text (dotted quad, or RFC 5952 IPv6).
    static func ipAddressText(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        switch bytes.count {
        case 4:
            var address = in_addr()
            withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes) }
            guard inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)) != nil else { break }
            return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        case 16:
            var address = in6_addr()
            withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes) }
            guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { break }
            return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        default:
            break
        }
        return bytes.map { String(format: "%02x", $0) }.joined(separator: ":")
    }
}

/// A host name that cannot be checked against a certificate.
public struct PeerNameError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The text that was given.
    public var text: String
    /// What is wrong with it.
    public var problem: String

    /// `invalid host "TEXT": PROBLEM`.
    public var description: String { "invalid host \"\(self.text)\": \(self.problem)" }
}
