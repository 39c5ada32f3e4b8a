import Foundation
import Testing

@testable import Pinning

/// The one `strerror` wrapper and the one hex formatter: each keeps the text its callers always printed.
@Suite("SystemErrorText and HexText: the words and digits the messages always had")
struct SystemErrorAndHexTextTests {
    @Test("strerror's text as it is, or with a lower-case first letter; each caller's stand-in otherwise")
    func systemErrorText() {
        #expect(SystemErrorText.text(ENOENT) == String(cString: strerror(ENOENT)))
        #expect(SystemErrorText.text(ENOENT) == "No such file or directory")
        #expect(SystemErrorText.words(ENOENT) == "no such file or directory")
        #expect(SystemErrorText.words(ECONNREFUSED) == "connection refused")
        // The Postgres check's words: the whole text in lower case, its own stand-in.
        #expect(SystemErrorText.text(EACCES, otherwise: "system error \(EACCES)").lowercased() == "permission denied")
    }

    @Test("two digits per byte, as String(format: \"%02X\"/\"%02x\") wrote them")
    func hexText() {
        let bytes: [UInt8] = [0x00, 0x0A, 0x7F, 0x80, 0xFF]
        #expect(HexText.digits(bytes, uppercase: true) == bytes.map { String(format: "%02X", $0) }.joined())
        #expect(HexText.digits(bytes) == bytes.map { String(format: "%02x", $0) }.joined())
        #expect(HexText.digits(bytes, separator: ":") == "00:0a:7f:80:ff")
        #expect(HexText.digits([UInt8]()) == "")
        #expect((0...255).allSatisfy { HexText.byte(UInt8($0), uppercase: true) == String(format: "%02X", $0) })
    }
}
