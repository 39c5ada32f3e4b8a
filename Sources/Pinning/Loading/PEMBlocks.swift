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

    static func name(index: Int, label: String) -> String {
        "block \(index) (\(label))"
    }

    /// Every block of the input, in order.
    static func scan(_ bytes: [UInt8], origin: String) -> [PEMBlock] {
        var blocks: [PEMBlock] = []
        var open: OpenBlock? = nil
        var lineNumber = 0
        var lineStart = 0
        var blockCount = 0

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
                    fail(
                        unfinished,
                        "\(unfinished.name) has no -----END \(unfinished.label)----- line "
                            + "(a new BEGIN line follows at line \(lineNumber))"
                    )
                }
                blockCount += 1
                open = OpenBlock(index: blockCount, label: label)
                continue
            }
            guard var block = open else {
                continue  // text outside blocks is allowed
            }
            if let endLabel = Self.label(of: line, prefix: Self.endPrefix) {
                open = nil
                guard endLabel == block.label else {
                    fail(block, "\(block.name) ends with -----END \(Self.shortened(endLabel))----- at line \(lineNumber)")
                    continue
                }
                if let problem = block.problem {
                    fail(block, problem)
                    continue
                }
                guard let decoded = Self.decodeBase64(block.base64) else {
                    fail(block, "\(block.name) is not valid base64 (bad length or padding)")
                    continue
                }
                blocks.append(PEMBlock(index: block.index, label: block.label, body: .success(decoded)))
                continue
            }
            if line.isEmpty {
                continue
            }
            if !block.bodyStarted && line.contains(UInt8(ascii: ":")) {
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
            fail(unfinished, "\(unfinished.name) has no -----END \(unfinished.label)----- line")
        }
        return blocks
    }

    private struct OpenBlock {
        var index: Int
        var label: String
        var base64: [UInt8] = []
        var bodyStarted = false
        var problem: String? = nil

        var name: String { PEMBlocks.name(index: self.index, label: self.label) }
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
