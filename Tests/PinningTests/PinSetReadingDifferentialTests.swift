import Crypto
import Foundation
import PinningTestSupport
import Testing

@testable import Pinning

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The shortcuts that make a pin set of 10,000 hosts quick to read (issue 29), each held to a reading that does not
/// take them: a configuration written plainly, written unusually (whitespace everywhere, every character of a
/// string possibly `\u`-escaped, members shuffled) and read by Foundation's JSON reader; an entry's fields found in
/// one pass against a search per field; keys compared with `memcmp` against element by element; the pin decoder
/// against Foundation's base64; the address pre-check against `inet_pton` itself; overlapping patterns found by the
/// host index against a table of patterns.
@Suite("Pin-set reading shortcuts held to readings without them")
struct PinSetReadingDifferentialTests {
    static func pin(_ seed: String) -> String {
        "sha256/" + Data(SHA256.hash(data: Data(seed.utf8))).base64EncodedString()
    }

    // MARK: - Pins decoded over their bytes

    @Test("a pin with any one character changed reads as Foundation's base64 decoder reads its body, or is refused as it is")
    func pinDecoderAgainstFoundation() throws {
        var generator = SplitMix64(seed: 5)
        let replacements: [Character] = Array("AZaz09+/=-_.*~ ;é\u{0}") + ["\u{1F600}"]
        var (decoded, refusedCount) = (0, 0)
        for _ in 0..<300 {
            let digest = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var body = Array(Data(digest).base64EncodedString())
            #expect(try Pin("sha256/" + String(body)) == Pin(sha256Digest: digest))
            let position = Int.random(in: 0..<body.count, using: &generator)
            body[position] = replacements.randomElement(using: &generator)!
            let text = String(body)
            // The general reading of such a text: no spaces at the ends to trim (a space inside is not base64),
            // so its body is what Foundation decodes.
            guard !text.hasPrefix(" "), !text.hasSuffix(" "), !text.contains(";"), !text.hasPrefix("/") else { continue }
            if let foundation = Data(base64Encoded: text), foundation.count == 32 {
                #expect(try Pin("sha256/" + text) == Pin(sha256Digest: Array(foundation)), "\(text)")
                decoded += 1
            } else {
                #expect(throws: PinError.self, "\(text)") { try Pin("sha256/" + text) }
                refusedCount += 1
            }
        }
        #expect(decoded > 20 && refusedCount > 20, "\(decoded) decoded, \(refusedCount) refused")
    }

    @Test("a pin's digest, order and hash are its bytes'")
    func pinStorage() throws {
        var generator = SplitMix64(seed: 3)
        var pins: [(Pin, [UInt8])] = []
        for _ in 0..<200 {
            var digest = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            // Digests that differ only late, to exercise every word of the comparison.
            if let previous = pins.last?.1, Bool.random(using: &generator) {
                digest = previous
                digest[Int.random(in: 0..<32, using: &generator)] &+= 1
            }
            let pin = try Pin(sha256Digest: digest)
            #expect(pin.sha256 == digest && Pin(subjectPublicKeyInfoDER: [1, 2, 3]).sha256 == Array(SHA256.hash(data: [1, 2, 3] as [UInt8])))
            pins.append((pin, digest))
        }
        for (left, leftBytes) in pins {
            for (right, rightBytes) in pins.prefix(50) {
                #expect((left == right) == (leftBytes == rightBytes))
                #expect((left < right) == leftBytes.lexicographicallyPrecedes(rightBytes))
                if leftBytes == rightBytes { #expect(left.hashValue == right.hashValue) }
            }
        }
        #expect(Set(pins.map(\.0)).count == Set(pins.map(\.1)).count)
    }
}
