import Foundation

/// One `-----BEGIN LABEL-----` … `-----END LABEL-----` block found by ``PEMBlocks``.
struct PEMBlock {
    /// 1-based position among all blocks of the input, whatever their label.
    var index: Int
    /// The label, e.g. `CERTIFICATE` or `PRIVATE KEY`.
    var label: String
    /// The decoded body, or why the block is malformed (always a ``CertificateLoadingError/Code/malformedPEM``).
    var body: Result<[UInt8], CertificateLoadingError>

    /// "block 2 (CERTIFICATE)": how messages refer to this block.
    var name: String { PEMBlocks.name(index: self.index, label: self.label) }
}

/// A tolerant PEM scanner (RFC 7468 "lax" parsing, as OpenSSL reads files).
///
/// It accepts text before, between and after blocks, CRLF line endings, leading and trailing whitespace on a
/// line, and RFC 1421 header lines (`Proc-Type: …`, `DEK-Info: …`) between the BEGIN line and the base64 body.
/// It is strict about what matters: the END label must match the BEGIN label, every block must end, and the
/// body must be valid base64. Each block is judged on its own, so a caller can skip one bad block and keep
/// the others (see ``TrustRoots``).
///
/// Works on bytes, not `String`, so that invalid UTF-8 cannot change how a file is split into lines.
enum PEMBlocks {
    static let beginMarker: [UInt8] = Array("-----BEGIN".utf8)
    private static let beginPrefix: [UInt8] = Array("-----BEGIN ".utf8)
    private static let endPrefix: [UInt8] = Array("-----END ".utf8)
    private static let dashes: [UInt8] = Array("-----".utf8)

    /// Whether the input contains `-----BEGIN`, i.e. is to be read as PEM.
    static func containsBeginMarker(_ bytes: [UInt8]) -> Bool {
        let marker = Self.beginMarker
        guard bytes.count >= marker.count else { return false }
        var start = 0
        while start <= bytes.count - marker.count {
            if bytes[start] == marker[0], bytes[start..<(start + marker.count)].elementsEqual(marker) {
                return true
            }
            start += 1
        }
        return false
    }

    /// Whether `marker` occurs anywhere in `line`.
    private static func contains(_ line: ArraySlice<UInt8>, _ marker: [UInt8]) -> Bool {
        guard line.count >= marker.count else { return false }
        var start = line.startIndex
        while start <= line.endIndex - marker.count {
            if line[start] == marker[0], line[start..<(start + marker.count)].elementsEqual(marker) { return true }
            start += 1
        }
        return false
    }

    static func name(index: Int, label: String) -> String {
        "block \(index) (\(label))"
    }

    /// Every block of the input, in order.
    static func scan(_ bytes: [UInt8], origin: String) -> [PEMBlock] {
        self.scanCountingCopies(bytes, origin: origin).blocks
    }

    /// ``scan(_:origin:)``, and how many times a block's base64 had to be copied on the way (tests check it stays
    /// 0: issue 27, item 6 was one copy of everything read so far on every line, quadratic in the block's size).
    static func scanCountingCopies(_ bytes: [UInt8], origin: String) -> (blocks: [PEMBlock], copies: Int) {
        var copies = 0
        var blocks: [PEMBlock] = []
        var open: OpenBlock? = nil
        var lineNumber = 0
        // A UTF-8 byte order mark before the first line (Windows editors write one) is not part of the text, as
        // OpenSSL reads such a file: left in, it hid the first BEGIN line and with it the first block.
        var lineStart = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        var blockCount = 0
        // The line of a BEGIN marker that had text before it (so it did not open a block), until a block opens.
        var hiddenBegin: Int? = nil

        func fail(_ block: OpenBlock, _ problem: String) {
            blocks.append(
                PEMBlock(
                    index: block.index,
                    label: block.label,
                    body: .failure(CertificateLoadingError(code: .malformedPEM, origin: origin, problem: problem))
                )
            )
        }

        while lineStart < bytes.count {
            var lineEnd = lineStart
            while lineEnd < bytes.count, bytes[lineEnd] != UInt8(ascii: "\n") {
                lineEnd += 1
            }
            lineNumber += 1
            let line = Self.trimmed(bytes[lineStart..<lineEnd])
            lineStart = lineEnd + 1

            if let label = Self.label(of: line, prefix: Self.beginPrefix) {
                if let unfinished = open {
                    copies += unfinished.base64.copies
                    fail(
                        unfinished,
                        "\(unfinished.name) has no -----END \(unfinished.label)----- line "
                            + "(a new BEGIN line follows at line \(lineNumber))"
                    )
                }
                blockCount += 1
                open = OpenBlock(index: blockCount, label: label)
                hiddenBegin = nil
                continue
            }
            guard var block = open else {
                // Text outside blocks is allowed, and a stray END line there is ignored, as OpenSSL ignores it (a
                // duplicated END line in a hand-made bundle, say). But an END line after a line that holds a BEGIN
                // marker with text before it (a byte order mark in the middle of the file, "x-----BEGIN …") closes a
                // block this reader could not see: without a word, that certificate would go missing.
                if let endLabel = Self.label(of: line, prefix: Self.endPrefix) {
                    if let hidden = hiddenBegin {
                        blockCount += 1
                        blocks.append(
                            PEMBlock(
                                index: blockCount,
                                label: endLabel,
                                body: .failure(
                                    CertificateLoadingError(
                                        code: .malformedPEM, origin: origin,
                                        problem:
                                            "the -----BEGIN line at line \(hidden) has text before it on its line, so the block it starts (to line \(lineNumber)) cannot be read"
                                    ))
                            )
                        )
                        hiddenBegin = nil
                    }
                } else if hiddenBegin == nil, Self.contains(line, Self.beginMarker) {
                    hiddenBegin = lineNumber
                }
                continue
            }
            // The block is taken out of `open` while this line is read, so that its base64 buffer is held once
            // and appending to it appends: left in `open` as well, every line's first append copied all the
            // base64 read so far, a copy per line (a certificate with a 1 MB subject took seconds; issue 27, item 6). Every path that
            // keeps the block open puts it back.
            open = nil
            if let endLabel = Self.label(of: line, prefix: Self.endPrefix) {
                copies += block.base64.copies
                guard endLabel == block.label else {
                    fail(block, "\(block.name) ends with -----END \(Self.shortened(endLabel))----- at line \(lineNumber)")
                    continue
                }
                if let problem = block.problem {
                    fail(block, problem)
                    continue
                }
                guard let decoded = Self.decodeBase64(block.base64.bytes) else {
                    fail(block, "\(block.name) is not valid base64 (bad length or padding)")
                    continue
                }
                blocks.append(PEMBlock(index: block.index, label: block.label, body: .success(decoded)))
                continue
            }
            if line.isEmpty {
                open = block
                continue
            }
            if !block.bodyStarted && line.contains(UInt8(ascii: ":")) {
                open = block
                continue  // an RFC 1421 header such as "Proc-Type: 4,ENCRYPTED"
            }
            block.bodyStarted = true
            if block.problem == nil {
                for byte in line where byte != UInt8(ascii: " ") && byte != UInt8(ascii: "\t") {
                    guard Self.isBase64Character(byte) else {
                        block.problem = "\(block.name) is not valid base64 (line \(lineNumber))"
                        break
                    }
                    block.base64.append(byte)
                }
            }
            open = block
        }
        if let unfinished = open {
            copies += unfinished.base64.copies
            fail(unfinished, "\(unfinished.name) has no -----END \(unfinished.label)----- line")
        }
        return (blocks, copies)
    }

    private struct OpenBlock {
        var index: Int
        var label: String
        var base64 = Accumulator()
        var bodyStarted = false
        var problem: String? = nil

        var name: String { PEMBlocks.name(index: self.index, label: self.label) }
    }

    /// Bytes appended one at a time, as an array would take them, but copy-on-write done here so that it can be
    /// counted: a copy happens only when the storage is shared, which the scanner never lets happen.
    struct Accumulator {
        private final class Storage {
            var bytes: [UInt8] = []
        }

        private var storage = Storage()
        /// How many times an append found the storage shared and copied it first.
        private(set) var copies = 0

        var bytes: [UInt8] { self.storage.bytes }

        mutating func append(_ byte: UInt8) {
            if !isKnownUniquelyReferenced(&self.storage) {
                let copy = Storage()
                copy.bytes = self.storage.bytes
                self.storage = copy
                self.copies += 1
            }
            self.storage.bytes.append(byte)
        }
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
            || byte == 0x0B || byte == 0x0C
    }

    private static func trimmed(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var line = line
        while let first = line.first, Self.isWhitespace(first) { line = line.dropFirst() }
        while let last = line.last, Self.isWhitespace(last) { line = line.dropLast() }
        return line
    }

    /// The label of a `-----BEGIN LABEL-----` / `-----END LABEL-----` line, or nil if the line is not one.
    private static func label(of line: ArraySlice<UInt8>, prefix: [UInt8]) -> String? {
        guard line.count >= prefix.count + Self.dashes.count,
            line.prefix(prefix.count).elementsEqual(prefix),
            line.suffix(Self.dashes.count).elementsEqual(Self.dashes)
        else {
            return nil
        }
        let label = line.dropFirst(prefix.count).dropLast(Self.dashes.count)
        return Self.shortened(String(decoding: label, as: UTF8.self))
    }

    /// Labels end up in messages; keep a hostile one from flooding them.
    private static func shortened(_ label: String) -> String {
        label.count <= 64 ? label : String(label.prefix(64)) + "…"
    }

    private static func isBase64Character(_ byte: UInt8) -> Bool {
        Self.base64Value(byte) != nil || byte == UInt8(ascii: "=")
    }

    private static func base64Value(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }

    /// Standard base64 (RFC 4648 §4), whitespace already removed, decoded by Foundation. `=` may appear only
    /// as final padding (at most two); unpadded input is accepted unless its length cannot be base64 (4n+1),
    /// as before: the missing padding is added for Foundation, which insists on it.
    static func decodeBase64(_ characters: [UInt8]) -> [UInt8]? {
        guard characters.count % 4 != 1 else { return nil }
        var text = String(decoding: characters, as: UTF8.self)
        if !text.hasSuffix("=") {
            text += String(repeating: "=", count: (4 - characters.count % 4) % 4)
        }
        return Data(base64Encoded: text).map { Array($0) }
    }
}

/// Writing PEM.
package enum PEMText {
    /// One PEM block, `-----BEGIN LABEL-----`, the base64 of `der` in 64-character lines, `-----END LABEL-----`,
    /// each line ending in a newline: what swift-asn1's `PEMDocument(type:derBytes:).pemString` gives plus a final
    /// newline, in time linear in the size. `pemString` counts the characters left (`Substring.count`, itself
    /// linear) before cutting each line, quadratic in the size: seconds for a certificate of a megabyte, and a
    /// pin-failure report holds every certificate a server presented (issue 27, item 6).
    package static func encode(label: String, der: [UInt8]) -> String {
        let base64 = Array(Data(der).base64EncodedString().utf8)
        var text: [UInt8] = []
        text.reserveCapacity(base64.count + base64.count / 64 + 2 * label.utf8.count + 32)
        text += Array("-----BEGIN \(label)-----\n".utf8)
        var start = 0
        while start < base64.count {
            let end = min(start + 64, base64.count)
            text += base64[start..<end]
            text.append(UInt8(ascii: "\n"))
            start = end
        }
        text += Array("-----END \(label)-----\n".utf8)
        return String(decoding: text, as: UTF8.self)
    }
}
