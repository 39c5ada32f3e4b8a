import Foundation
import PinningTestSupport
import SwiftASN1
import Testing
import X509

@testable import Pinning

// Issue 27, item 6: `pinning inspect`/`evaluate` of a certificate with a large subject grew faster than its size
// (256 KB: 0.2 s, 1 MB: 4–5 s). The PEM scanner copied all the base64 read so far on every line of a block
// (copy-on-write of a buffer held twice), quadratic in the block's size; and swift-asn1's `PEMDocument.pemString`,
// which wrote our PEM (pin-failure reports, test PKIs), is quadratic too (it counts the characters left before each
// line). The scanner now counts such copies, and PEM is written by our own linear encoder; these tests count
// copies and compare output, rather than time anything.

@Suite("PEM scanning is linear: a block's base64 is never copied while it is read")
struct LargePEMTests {
    @Test("the accumulator counts an append to shared storage as a copy, and only that")
    func accumulatorCountsCopies() {
        var first = PEMBlocks.Accumulator()
        first.append(1)
        first.append(2)
        #expect(first.copies == 0)
        var second = first
        second.append(3)
        #expect(second.copies == 1, "the storage was shared with `first`")
        #expect(first.bytes == [1, 2] && second.bytes == [1, 2, 3], "value semantics kept")
        second.append(4)
        #expect(second.copies == 1, "unique again: appended in place")
    }

    @Test("a certificate with a 256 KB subject: written and scanned with no copy, read back whole, its subject rendered whole")
    func largeSubject() throws {
        let commonName = String(repeating: "a", count: 256 * 1024)
        let root = try TestPKI.root(commonName)
        let pem = TestPKI.pemBundle([root.certificate])
        let (blocks, copies) = PEMBlocks.scanCountingCopies(Array(pem.utf8), origin: "large.pem")
        #expect(copies == 0, "one copy per line was the quadratic cost")
        #expect(blocks.count == 1)
        if case .success(let der)? = blocks.first?.body {
            #expect(der == root.der)
        } else {
            Issue.record("the block did not decode: \(String(describing: blocks.first))")
        }
        let loaded = try CertificateParser.certificates(from: Array(pem.utf8), origin: "large.pem")
        #expect(loaded == [root.certificate])
        #expect(CertificateInfo(root.certificate).subject == "CN=" + commonName)
    }

    @Test("PEM is written as swift-asn1 writes it (64-character lines), plus the final newline, for every length around a line")
    func encodingMatchesSwiftASN1() {
        for count in [0, 1, 2, 3, 47, 48, 49, 95, 96, 97, 200, 1000] {
            let der = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            #expect(PEMText.encode(label: "CERTIFICATE", der: der) == PEMDocument(type: "CERTIFICATE", derBytes: der).pemString + "\n", "\(count) bytes")
        }
    }

    @Test("a pin-failure report holds each presented certificate as PEM, however large (written in linear time)")
    func reportPEM() throws {
        let root = try TestPKI.root("Report " + String(repeating: "r", count: 64 * 1024))
        let pem = PinFailureReport.pem(root.certificate)
        #expect(pem == TestPKI.pemBundle([root.certificate]))
        let (blocks, copies) = PEMBlocks.scanCountingCopies(Array(pem.utf8), origin: "report")
        #expect(copies == 0 && blocks.count == 1)
        if case .success(let der)? = blocks.first?.body { #expect(der == root.der) } else { Issue.record("\(blocks)") }
    }

    @Test("every path through a block keeps it unshared: header lines, blank lines, CRLF, several blocks, an unfinished one")
    func everyPathCopyFree() throws {
        let one = try TestPKI.root("Scan One")
        let two = try TestPKI.root("Scan Two")
        let body = TestPKI.pemBundle([one.certificate]).split(separator: "\n").dropFirst().dropLast().joined(separator: "\r\n")
        let text =
            "text before\n-----BEGIN CERTIFICATE-----\r\nProc-Type: 4,NONE\r\n\r\n" + body + "\r\n\r\n-----END CERTIFICATE-----\r\n"
            + TestPKI.pemBundle([two.certificate]) + "-----BEGIN CERTIFICATE-----\n" + body + "\n"
        let (blocks, copies) = PEMBlocks.scanCountingCopies(Array(text.utf8), origin: "mixed.pem")
        #expect(copies == 0)
        #expect(blocks.count == 3, "\(blocks.map(\.name))")
        if case .success(let der)? = blocks.first?.body { #expect(der == one.der) } else { Issue.record("first block: \(blocks)") }
        if blocks.count == 3, case .success(let der) = blocks[1].body { #expect(der == two.der) } else { Issue.record("second block: \(blocks)") }
        if blocks.count == 3, case .failure = blocks[2].body {} else { Issue.record("the unfinished block must fail: \(blocks)") }
    }
}
