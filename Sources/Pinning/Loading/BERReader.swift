/// A minimal, bounds-checked reader of BER/DER type-length-value elements.
///
/// Why this is not swift-asn1's `BER.parse` (checked against swift-asn1 1.7.4): `BER.parse` does read the
/// `openssl crl2pkcs7` vectors (DER with unsorted SETs, and BER with indefinite lengths), so no vector needs
/// this reader. Diagnostics do. `BER.parse` parses every definite-length constructed element of the input
/// recursively, certificates included, so one malformed certificate in a bundle fails the whole bundle with
/// an error that names neither the certificate nor a byte offset. The loader's messages name both: "certificate
/// 2 in the PKCS#7 bundle is not a valid certificate" (`LoadingTests.badPKCS7`), "truncated: the element at
/// offset 0 declares 412 bytes of content but only 96 follow" (the bad-input catalogue, which the CLI
/// prints). This reader only finds element boundaries; the certificates themselves are parsed by
/// swift-certificates from their exact bytes.
///
/// Resource bounds: indefinite-length elements are the only ones whose end has to be found by reading their
/// children, so they are the only source of recursion, and it stops at ``maximumDepth``. Every element
/// consumes at least two bytes, so loops over children are bounded by the input size.
struct BERReader {
    /// One element: where it is in ``BERReader/bytes``.
    struct Element {
        /// 0 universal, 1 application, 2 context-specific, 3 private.
        var tagClass: UInt8
        var isConstructed: Bool
        var tagNumber: UInt32
        /// Index of the first identifier byte.
        var start: Int
        /// Index of the first content byte.
        var contentStart: Int
        /// End of the content (exclusive); for an indefinite length, the index of the end-of-contents octets.
        var contentEnd: Int
        /// End of the whole element (exclusive), end-of-contents octets included.
        var end: Int
        var isIndefiniteLength: Bool

        var isUniversalSequence: Bool { self.tagClass == 0 && self.isConstructed && self.tagNumber == 16 }
        var isUniversalSet: Bool { self.tagClass == 0 && self.isConstructed && self.tagNumber == 17 }
        var isObjectIdentifier: Bool { self.tagClass == 0 && !self.isConstructed && self.tagNumber == 6 }
        var isInteger: Bool { self.tagClass == 0 && !self.isConstructed && self.tagNumber == 2 }

        /// The element whose identifier and length octets are `header`, starting at `start`; indefinite-length
        /// when `header` has no length.
        init(_ header: Header, start: Int, contentEnd: Int, end: Int) {
            self.tagClass = header.tagClass
            self.isConstructed = header.isConstructed
            self.tagNumber = header.tagNumber
            self.start = start
            self.contentStart = header.contentStart
            self.contentEnd = contentEnd
            self.end = end
            self.isIndefiniteLength = header.length == nil
        }

        func isContextSpecific(_ number: UInt32, constructed: Bool = true) -> Bool {
            self.tagClass == 2 && self.isConstructed == constructed && self.tagNumber == number
        }

        /// A short name for messages: "SEQUENCE", "[0]", "OBJECT IDENTIFIER", "tag 0x04".
        var name: String {
            switch (self.tagClass, self.tagNumber) {
            case (0, 2): return "INTEGER"
            case (0, 3): return "BIT STRING"
            case (0, 4): return "OCTET STRING"
            case (0, 5): return "NULL"
            case (0, 6): return "OBJECT IDENTIFIER"
            case (0, 16): return "SEQUENCE"
            case (0, 17): return "SET"
            case (2, let n): return "[\(n)]"
            case (1, let n): return "[APPLICATION \(n)]"
            case (3, let n): return "[PRIVATE \(n)]"
            case (_, let n): return "universal tag \(n)"
            }
        }
    }

    /// A structural problem, described for a person (offsets are byte offsets into the input).
    struct Failure: Error {
        var message: String
    }

    /// Nesting of indefinite-length elements deeper than this is refused.
    static let maximumDepth = 32

    let bytes: [UInt8]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The identifier and length octets of an element.
    struct Header {
        var tagClass: UInt8
        var isConstructed: Bool
        var tagNumber: UInt32
        var contentStart: Int
        /// nil for an indefinite length.
        var length: Int?

        var isUniversalSequence: Bool { self.tagClass == 0 && self.isConstructed && self.tagNumber == 16 }
        var isObjectIdentifier: Bool { self.tagClass == 0 && !self.isConstructed && self.tagNumber == 6 }
    }

    /// Reads only the identifier and length of the element at `offset`; a definite length is checked against
    /// `limit`, an indefinite one is not followed.
    func header(at offset: Int, limit: Int) throws(Failure) -> Header {
        let limit = min(limit, self.bytes.count)
        var position = offset
        guard position >= 0, position < limit else {
            throw Failure(message: "unexpected end of data at offset \(offset)")
        }
        let first = self.bytes[position]
        position += 1
        let tagClass = first >> 6
        let isConstructed = first & 0x20 != 0
        var tagNumber = UInt32(first & 0x1F)
        if tagNumber == 0x1F {
            // High tag number form: base-128, at most 4 bytes (28 bits) here.
            tagNumber = 0
            var count = 0
            while true {
                guard position < limit else {
                    throw Failure(message: "truncated tag at offset \(offset)")
                }
                let byte = self.bytes[position]
                position += 1
                count += 1
                if count == 1 && byte == 0x80 {
                    throw Failure(message: "badly encoded tag number at offset \(offset)")
                }
                guard count <= 4 else {
                    throw Failure(message: "tag number too large at offset \(offset)")
                }
                tagNumber = (tagNumber << 7) | UInt32(byte & 0x7F)
                if byte & 0x80 == 0 { break }
            }
        }
        guard position < limit else {
            throw Failure(message: "truncated: no length after the tag at offset \(offset)")
        }
        let lengthByte = self.bytes[position]
        position += 1
        if lengthByte == 0x80 {
            guard isConstructed else {
                throw Failure(message: "primitive element at offset \(offset) has an indefinite length")
            }
            return Header(
                tagClass: tagClass,
                isConstructed: isConstructed,
                tagNumber: tagNumber,
                contentStart: position,
                length: nil
            )
        }
        let length: Int
        if lengthByte < 0x80 {
            length = Int(lengthByte)
        } else {
            let count = Int(lengthByte & 0x7F)
            guard count <= 4, lengthByte != 0xFF else {
                throw Failure(message: "length field of \(count) bytes at offset \(offset) is too long")
            }
            guard position + count <= limit else {
                throw Failure(message: "truncated: the length of the element at offset \(offset) is cut off")
            }
            var value = 0
            for byte in self.bytes[position..<(position + count)] {
                value = (value << 8) | Int(byte)
            }
            position += count
            length = value
        }
        guard length <= limit - position else {
            throw Failure(
                message: "truncated: the element at offset \(offset) declares \(length) bytes of content "
                    + "but only \(limit - position) follow"
            )
        }
        return Header(
            tagClass: tagClass,
            isConstructed: isConstructed,
            tagNumber: tagNumber,
            contentStart: position,
            length: length
        )
    }

    /// Reads the element that starts at `offset` and must end at or before `limit`.
    func element(at offset: Int, limit: Int, depth: Int = 0) throws(Failure) -> Element {
        let limit = min(limit, self.bytes.count)
        let header = try self.header(at: offset, limit: limit)
        if let length = header.length {
            let end = header.contentStart + length
            return Element(header, start: offset, contentEnd: end, end: end)
        }
        guard depth < Self.maximumDepth else {
            throw Failure(message: "indefinite-length elements nested deeper than \(Self.maximumDepth) levels")
        }
        // The end of an indefinite-length element is found by reading its children up to end-of-contents.
        var cursor = header.contentStart
        while true {
            guard cursor + 2 <= limit else {
                throw Failure(
                    message: "truncated: the indefinite-length element at offset \(offset) has no end-of-contents"
                )
            }
            if self.bytes[cursor] == 0, self.bytes[cursor + 1] == 0 {
                return Element(header, start: offset, contentEnd: cursor, end: cursor + 2)
            }
            cursor = try self.element(at: cursor, limit: limit, depth: depth + 1).end
        }
    }

    /// The elements inside a constructed element, in order.
    func children(of parent: Element, depth: Int = 0) throws(Failure) -> [Element] {
        guard parent.isConstructed else {
            throw Failure(message: "\(parent.name) at offset \(parent.start) is not constructed")
        }
        var result: [Element] = []
        var cursor = parent.contentStart
        while cursor < parent.contentEnd {
            let child = try self.element(at: cursor, limit: parent.contentEnd, depth: depth)
            result.append(child)
            cursor = child.end
        }
        return result
    }

    /// The exact encoded bytes of an element.
    func encodedBytes(of element: Element) -> ArraySlice<UInt8> {
        self.bytes[element.start..<element.end]
    }

    /// The dotted form of an OBJECT IDENTIFIER element ("1.2.840.113549.1.7.2"), or nil if it is malformed.
    func objectIdentifier(_ element: Element) -> String? {
        guard element.isObjectIdentifier else { return nil }
        return Self.dottedOID(self.bytes[element.contentStart..<element.contentEnd])
    }

    /// Decodes OID content octets to dotted form; nil when malformed (empty, over-long arc, truncated arc).
    static func dottedOID(_ content: ArraySlice<UInt8>) -> String? {
        guard !content.isEmpty else { return nil }
        var arcs: [UInt64] = []
        var value: UInt64 = 0
        var arcLength = 0
        for byte in content {
            if arcLength == 0 && byte == 0x80 { return nil }
            arcLength += 1
            guard arcLength <= 9 else { return nil }
            value = (value << 7) | UInt64(byte & 0x7F)
            if byte & 0x80 == 0 {
                arcs.append(value)
                value = 0
                arcLength = 0
            }
        }
        guard arcLength == 0, let firstArc = arcs.first else { return nil }
        let head: [UInt64] = firstArc < 40 ? [0, firstArc] : firstArc < 80 ? [1, firstArc - 40] : [2, firstArc - 80]
        return (head + arcs.dropFirst()).map { String($0) }.joined(separator: ".")
    }
}
