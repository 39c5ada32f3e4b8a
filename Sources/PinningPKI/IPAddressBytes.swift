#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Text IP addresses to the network-order bytes an iPAddress SAN holds: 4 bytes for IPv4, 16 for IPv6.
enum IPAddressBytes {
    static func parse(_ text: String) throws -> [UInt8] {
        var v4 = [UInt8](repeating: 0, count: 4)
        let v4Result = v4.withUnsafeMutableBytes { buffer in
            inet_pton(AF_INET, text, buffer.baseAddress)
        }
        if v4Result == 1 {
            return v4
        }
        var v6 = [UInt8](repeating: 0, count: 16)
        let v6Result = v6.withUnsafeMutableBytes { buffer in
            inet_pton(AF_INET6, text, buffer.baseAddress)
        }
        if v6Result == 1 {
            return v6
        }
        throw TestPKIError(.invalidIPAddress, "\"\(text)\" is neither an IPv4 nor an IPv6 address")
    }
}
