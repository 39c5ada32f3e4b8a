import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The one place IP addresses are converted between text and the network-order bytes an iPAddress SAN
/// holds; every module uses it (`package`).
package enum IPAddressText {
    /// The bytes of an IPv4 (dotted quad only) or IPv6 address (without brackets), or nil.
    package static func bytes(_ text: String) -> [UInt8]? {
        // `inet_pton` reads the text up to its first NUL (it is handed over as a C string) and accepts only digits
        // and `.` (IPv4), hex digits, `:` and `.` (IPv6): text with any other byte before a NUL is no address, and is
        // answered without the two calls (a pin set's 10,000 host names are each asked).
        guard Self.mayBeAddress(text) else { return nil }
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

    /// The dotted quad an IPv4 address in one of inet_aton's older forms stands for (`127.1` → `127.0.0.1`, `0`,
    /// `0x7f.0.0.1`), which the system's resolver has always taken as a host; nil for anything else. Only for
    /// where such text was taken before (`serve --bind`); certificates and hosts to check use ``bytes(_:)``.
    package static func legacyIPv4(_ text: String) -> String? {
        guard !text.isEmpty, !text.utf8.contains(0) else { return nil }
        var address = in_addr()
        guard inet_aton(text, &address) != 0 else { return nil }
        let bytes = withUnsafeBytes(of: &address) { Array($0) }
        return bytes.map(String.init).joined(separator: ".")
    }

    /// Whether the bytes of `text` before its first NUL are all digits, hex letters, `:` or `.`.
    private static func mayBeAddress(_ text: String) -> Bool {
        func check(_ bytes: some Sequence<UInt8>) -> Bool {
            for byte in bytes {
                switch byte {
                case 0: return true
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"),
                    UInt8(ascii: ":"), UInt8(ascii: "."):
                    continue
                default: return false
                }
            }
            return true
        }
        return text.utf8.withContiguousStorageIfAvailable { check($0) } ?? check(text.utf8)
    }

    /// A dotted quad, or IPv6 in RFC 5952 form (lowercase, no leading zeros, longest zero run of two or more
    /// groups compressed to `::`, the first such run on a tie); nil unless `bytes` has 4 or 16 bytes.
    package static func format(_ bytes: [UInt8]) -> String? {
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

    /// ``format(_:)``, or the bytes in hex (`0a:00:01`) when they are not an address's 4 or 16.
    static func formatOrHex(_ bytes: [UInt8]) -> String {
        self.format(bytes) ?? HexText.digits(bytes, separator: ":")
    }
}

/// The syntax checks for DNS names, in one place: ``isPlausible(_:)`` for host names as callers give them,
/// ``isPreferredNameSyntax(_:)`` for what a certificate may carry.
package enum DNSNameSyntax {
    /// Whether `name` (already lower-cased, without a trailing dot) is a plausible DNS name in A-label form:
    /// letters, digits, `-`, `_` and `.`, at most 253 bytes, every label 1 to 63 bytes. Deliberately lenient
    /// (`_` and leading hyphens pass, as they appear in names people connect to).
    package static func isPlausible(_ name: String) -> Bool {
        // Over the bytes in place when the string holds them contiguously (as nearly every string does).
        name.utf8.withContiguousStorageIfAvailable { Self.isPlausible(bytes: $0) } ?? Self.isPlausible(bytes: name.utf8)
    }

    private static func isPlausible(bytes name: some Collection<UInt8>) -> Bool {
        guard name.count <= 253 else { return false }
        let allowed = name.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
                return true
            default:
                return false
            }
        }
        guard allowed else { return false }
        // Every label (between dots, and before the first and after the last) 1 to 63 bytes; counted, not split.
        var length = 0
        for byte in name {
            if byte == UInt8(ascii: ".") {
                guard length > 0 else { return false }
                length = 0
            } else {
                length += 1
                guard length <= 63 else { return false }
            }
        }
        return length > 0
    }
}

extension DNSNameSyntax {
    /// RFC 1034 §3.5's preferred name syntax as RFC 5280 §4.2.1.6 requires of a dNSName: letter-digit-hyphen
    /// labels of 1 to 63 bytes, no label starting or ending with a hyphen, a trailing dot tolerated, and a
    /// leading `*` label allowed (a wildcard; whether it is acceptable is the name check's business).
    ///
    /// Read over the UTF-8 bytes in one pass, without splitting into substrings: it runs on every dNSName of every
    /// certificate an evaluation meets (issue 31). Any byte outside ASCII letters, digits, `-` and `.` refuses, so
    /// reading bytes gives the same answer as reading characters.
    package static func isPreferredNameSyntax(_ name: String) -> Bool {
        name.utf8.withContiguousStorageIfAvailable { Self.isPreferredNameSyntax(bytes: $0) }
            ?? Array(name.utf8).withUnsafeBufferPointer { Self.isPreferredNameSyntax(bytes: $0) }
    }

    private static func isPreferredNameSyntax(bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var end = bytes.count
        // A trailing dot is tolerated (the root label).
        if end > 0, bytes[end - 1] == UInt8(ascii: ".") { end -= 1 }
        var start = 0
        // A leading `*` label, when another label follows it.
        if end >= 2, bytes[0] == UInt8(ascii: "*"), bytes[1] == UInt8(ascii: ".") { start = 2 }
        // Labels between dots over bytes[start..<end]; an empty one (empty name, "..", a leading dot) refuses.
        var labelStart = start
        var index = start
        while true {
            if index == end || bytes[index] == UInt8(ascii: ".") {
                let length = index - labelStart
                guard length > 0, length <= 63, bytes[labelStart] != UInt8(ascii: "-"), bytes[index - 1] != UInt8(ascii: "-") else {
                    return false
                }
                if index == end { return true }
                labelStart = index + 1
            } else {
                let byte = bytes[index]
                let allowed =
                    (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-")
                guard allowed else { return false }
            }
            index += 1
        }
    }
}
