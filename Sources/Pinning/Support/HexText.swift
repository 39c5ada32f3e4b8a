/// Bytes as hexadecimal digits, two per byte: the one formatter for serial numbers, fingerprints, hashes and byte
/// dumps (`package`), in place of `String(format: "%02X")` (Foundation's format parser, per byte) and the copies
/// of a digit table that each file kept.
package enum HexText {
    private static let lower = Array("0123456789abcdef")
    private static let upper = Array("0123456789ABCDEF")

    /// `0a`, or `0A` when `uppercase`.
    package static func byte(_ byte: UInt8, uppercase: Bool = false) -> String {
        let digits = uppercase ? Self.upper : Self.lower
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }

    /// Every byte's two digits, joined by `separator` (`0a:00:01`).
    package static func digits<Bytes: Sequence>(_ bytes: Bytes, uppercase: Bool = false, separator: String = "") -> String
    where Bytes.Element == UInt8 {
        bytes.map { Self.byte($0, uppercase: uppercase) }.joined(separator: separator)
    }
}
