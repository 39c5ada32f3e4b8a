import Foundation

/// Internationalised host names to their ASCII form (A-labels, `xn--…`), so that a configuration key, a host a
/// program connects to and a certificate's DNS names (which are always A-labels) compare as the same text.
///
/// OkHttp canonicalises every host this way before matching pins (`σkhttp.com` → `xn--khttp-fde.com`), and so
/// do browsers; a configuration written with the Unicode name must pin the same host.
///
/// What is done, per UTS #46 (non-transitional) and RFC 5891, as far as Foundation allows without a mapping
/// table of our own:
/// - the ideographic full stops U+3002, U+FF0E and U+FF61 separate labels like `.`;
/// - the name is mapped with NFKC and lower-cased (UTS #46's mapping is NFKC with case folding plus a table;
///   for letters, digits and marks the two agree, which is what host names are made of); `ß` and final sigma
///   are kept, as in non-transitional processing;
/// - a label with non-ASCII characters may hold only letters, combining marks (not first), decimal digits and
///   `-` (IDNA2008's PVALID categories), must not begin or end with `-` or have `--` in positions 3–4, and is
///   Punycode-encoded (RFC 3492) with the `xn--` prefix;
/// - every label is at most 63 bytes and the name at most 253 once encoded.
///
/// Not done: RFC 5893's bidi rule (a right-to-left label is converted as given; it can only ever match a
/// certificate name converted the same way) and the CONTEXTJ/CONTEXTO rules (the joiners they govern are
/// refused outright, as format characters).
enum IDNA {
    /// The ASCII form of `host`. An all-ASCII name is returned lower-cased and otherwise unchanged (its
    /// syntax is the caller's to check, as for any DNS name).
    ///
    /// - Throws: ``IDNAError`` saying which character or label cannot be part of a host name.
    static func toASCII(_ host: String) throws(IDNAError) -> String {
        switch Self.asciiCase(host) {
        case .lowercaseASCII:
            try Self.checkALabels(host, in: host)
            return host
        case .ascii:
            let lowered = host.lowercased()
            try Self.checkALabels(lowered, in: host)
            return lowered
        case .notASCII: break
        }
        // Bound the work before mapping: a host name has at most 253 bytes, and mapping only shortens
        // compatibility forms by a little, never by a factor of four.
        guard host.unicodeScalars.count <= 4 * 253 else {
            throw IDNAError(host: host, problem: "longer than any host name can be")
        }
        var separated = ""
        for scalar in host.unicodeScalars {
            switch scalar.value {
            case 0x3002, 0xFF0E, 0xFF61: separated.unicodeScalars.append(".")
            default: separated.unicodeScalars.append(scalar)
            }
        }
        let mapped = separated.precomposedStringWithCompatibilityMapping.lowercased().precomposedStringWithCanonicalMapping
        var labels: [String] = []
        for label in mapped.split(separator: ".", omittingEmptySubsequences: false) {
            labels.append(try Self.encode(String(label), in: host))
        }
        let ascii = labels.joined(separator: ".")
        guard ascii.utf8.count <= 253 else {
            throw IDNAError(host: host, problem: "its ASCII form (\(ascii.utf8.count) bytes) is longer than 253 bytes")
        }
        return ascii
    }

    private enum ASCIICase { case lowercaseASCII, ascii, notASCII }

    /// Whether `text` is ASCII, and then whether it has an upper-case letter (`lowercased()` of ASCII text only maps
    /// `A`–`Z`, so text without one is its own lower-cased form, and is not copied to make it).
    private static func asciiCase(_ text: String) -> ASCIICase {
        func scan(_ bytes: some Sequence<UInt8>) -> ASCIICase {
            var upper = false
            for byte in bytes {
                if byte >= 0x80 { return .notASCII }
                if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { upper = true }
            }
            return upper ? .ascii : .lowercaseASCII
        }
        return text.utf8.withContiguousStorageIfAvailable { scan($0) } ?? scan(text.utf8)
    }

    /// Checks every `xn--` label of the lower-cased ASCII `name` (``checkALabel(_:in:)``). Most names have none,
    /// and are only scanned.
    private static func checkALabels(_ name: String, in host: String) throws(IDNAError) {
        let prefix: [UInt8] = [UInt8(ascii: "x"), UInt8(ascii: "n"), UInt8(ascii: "-"), UInt8(ascii: "-")]
        var hasALabel = false
        var offset = 0  // the byte's offset in its label
        var matched = 0  // how many bytes of "xn--" the label begins with
        for byte in name.utf8 {
            if byte == UInt8(ascii: ".") {
                offset = 0
                matched = 0
                continue
            }
            if offset == matched, matched < 4, byte == prefix[matched] {
                matched += 1
                if matched == 4 {
                    hasALabel = true
                    break
                }
            }
            offset += 1
        }
        guard hasALabel else { return }
        for label in name.split(separator: ".", omittingEmptySubsequences: false) where label.hasPrefix("xn--") {
            try Self.checkALabel(String(label), in: host)
        }
    }

    /// An `xn--` label is an A-label only if its Punycode decodes to a U-label, one with a character outside ASCII
    /// that this conversion accepts, and that encodes back to the same text (RFC 5890 §2.3.2.1, RFC 5891 §5.4).
    /// `xn--zz` (no decoding) and `xn--a` (U+0080) are not host names; without this check they passed as ASCII
    /// and a configuration could pin a name no certificate can validly carry.
    private static func checkALabel(_ label: String, in host: String) throws(IDNAError) {
        let quoted = VisibleText.quoted(label)
        guard let decoded = Punycode.decode(label.utf8.dropFirst(4)), decoded.contains(where: { $0 >= 0x80 }) else {
            throw IDNAError(host: host, problem: "the label \(quoted) is not a valid A-label (its Punycode does not decode to a Unicode label)")
        }
        var unicode = ""
        for value in decoded {
            // Punycode.decode returns Unicode scalar values only.
            guard let scalar = Unicode.Scalar(value) else {
                throw IDNAError(host: host, problem: "the label \(quoted) is not a valid A-label (its Punycode does not decode to a Unicode label)")
            }
            unicode.unicodeScalars.append(scalar)
        }
        let mapped = unicode.precomposedStringWithCompatibilityMapping.lowercased().precomposedStringWithCanonicalMapping
        guard mapped.unicodeScalars.elementsEqual(unicode.unicodeScalars) else {
            throw IDNAError(host: host, problem: "the label \(quoted) is not a valid A-label (it decodes to a label not in its normalised, lower-case form)")
        }
        let encoded: String
        do {
            encoded = try Self.encode(unicode, in: host)
        } catch {
            throw IDNAError(host: host, problem: "the label \(quoted) is not a valid A-label (decoded: \(error.problem))")
        }
        guard encoded == label else {
            throw IDNAError(host: host, problem: "the label \(quoted) is not a valid A-label (it does not encode back to itself)")
        }
    }

    private static func encode(_ label: String, in host: String) throws(IDNAError) -> String {
        let scalars = Array(label.unicodeScalars)
        if scalars.allSatisfy({ $0.isASCII }) {
            if label.hasPrefix("xn--") { try Self.checkALabel(label, in: host) }
            return label
        }
        for (index, scalar) in scalars.enumerated() {
            if scalar == "-" || scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)) {
                continue
            }
            if scalar.isASCII {
                throw IDNAError(host: host, problem: "\(VisibleText.quoted(String(Character(scalar)))) cannot appear in a host name")
            }
            switch scalar.properties.generalCategory {
            case .lowercaseLetter, .otherLetter, .modifierLetter, .decimalNumber:
                continue
            case .nonspacingMark, .spacingMark:
                guard index > 0 else {
                    throw IDNAError(host: host, problem: "the label \(VisibleText.quoted(label)) begins with a combining mark (\(Self.name(of: scalar)))")
                }
            default:
                throw IDNAError(host: host, problem: "\(Self.name(of: scalar)) cannot appear in a host name")
            }
        }
        if label.hasPrefix("-") || label.hasSuffix("-") {
            throw IDNAError(host: host, problem: "the label \(VisibleText.quoted(label)) begins or ends with \"-\"")
        }
        if scalars.count >= 4 && scalars[2] == "-" && scalars[3] == "-" {
            throw IDNAError(host: host, problem: "the label \(VisibleText.quoted(label)) has \"--\" in its third and fourth positions")
        }
        let encoded = "xn--" + Punycode.encode(scalars.map(\.value))
        guard encoded.utf8.count <= 63 else {
            throw IDNAError(host: host, problem: "the label \(VisibleText.quoted(label)) is longer than 63 bytes in its ASCII form (\(encoded))")
        }
        return encoded
    }

    private static func name(of scalar: Unicode.Scalar) -> String {
        let code = "U+" + String(scalar.value, radix: 16, uppercase: true).leftPadded(to: 4)
        if let name = scalar.properties.name { return "\(code) \(name)" }
        return code
    }
}

/// A host name that has no ASCII form.
///
/// The texts quote the sender's label or character through ``VisibleText/quoted(_:limit:)``: they reach the
/// collector's `400` bodies and logs (a report's host name), and a label that gets this far may still carry a
/// default-ignorable mark such as U+FE0F or a Hangul filler, or an ASCII control character.
struct IDNAError: Error, Sendable {
    var host: String
    var problem: String

    var description: String { "\(VisibleText.quoted(self.host)) is not a valid internationalised host name: \(self.problem)" }
}

/// RFC 3492 Punycode: encoding, and decoding to check that an `xn--` label is one (host names are compared in
/// their encoded form).
enum Punycode {
    private static let base = 36
    private static let tMin = 1
    private static let tMax = 26
    private static let skew = 38
    private static let damp = 700
    private static let initialBias = 72
    private static let initialN: UInt32 = 0x80

    /// The Punycode of `codePoints` (without the `xn--` prefix). Callers bound the input to a host label's
    /// length, far below where RFC 3492's integer arithmetic could overflow an `Int`.
    static func encode(_ codePoints: [UInt32]) -> String {
        var output: [UInt8] = codePoints.filter { $0 < 0x80 }.map { UInt8($0) }
        let basicCount = output.count
        var handled = basicCount
        if basicCount > 0 { output.append(UInt8(ascii: "-")) }
        var n = Self.initialN
        var delta = 0
        var bias = Self.initialBias
        while handled < codePoints.count {
            // The smallest code point not handled yet; one exists while handled < count.
            var m = UInt32.max
            for codePoint in codePoints where codePoint >= n && codePoint < m { m = codePoint }
            delta += Int(m - n) * (handled + 1)
            n = m
            for codePoint in codePoints {
                if codePoint < n { delta += 1 }
                guard codePoint == n else { continue }
                var q = delta
                var k = Self.base
                while true {
                    let t = k <= bias ? Self.tMin : (k >= bias + Self.tMax ? Self.tMax : k - bias)
                    if q < t { break }
                    output.append(Self.digit(t + (q - t) % (Self.base - t)))
                    q = (q - t) / (Self.base - t)
                    k += Self.base
                }
                output.append(Self.digit(q))
                bias = Self.adapt(delta, points: handled + 1, first: handled == basicCount)
                delta = 0
                handled += 1
            }
            delta += 1
            n += 1
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The code points `encoded` (without the `xn--` prefix) stands for, or nil when it is not Punycode: a
    /// character that is not a digit, a number cut short, an overflow, or a code point that is not a Unicode
    /// scalar or is basic (RFC 3492 §6.2). Case-insensitive, as the encoder's output is.
    static func decode(_ encoded: some Collection<UInt8>) -> [UInt32]? {
        let input = Array(encoded)
        guard input.count <= 63 else { return nil }  // a label; also keeps the arithmetic far from overflow
        var output: [UInt32] = []
        var position = 0
        if let delimiter = input.lastIndex(of: UInt8(ascii: "-")) {
            for byte in input[..<delimiter] {
                guard byte < 0x80 else { return nil }
                output.append(UInt32(byte))
            }
            position = delimiter + 1
        }
        var n = Int(Self.initialN)
        var i = 0
        var bias = Self.initialBias
        while position < input.count {
            let oldI = i
            var w = 1
            var k = Self.base
            while true {
                guard position < input.count, let digit = Self.value(of: input[position]) else { return nil }
                position += 1
                let (product, overflow1) = digit.multipliedReportingOverflow(by: w)
                let (sum, overflow2) = i.addingReportingOverflow(product)
                guard !overflow1, !overflow2 else { return nil }
                i = sum
                let t = k <= bias ? Self.tMin : (k >= bias + Self.tMax ? Self.tMax : k - bias)
                if digit < t { break }
                let (nextW, overflow3) = w.multipliedReportingOverflow(by: Self.base - t)
                guard !overflow3 else { return nil }
                w = nextW
                k += Self.base
            }
            bias = Self.adapt(i - oldI, points: output.count + 1, first: oldI == 0)
            let (nextN, overflow) = n.addingReportingOverflow(i / (output.count + 1))
            guard !overflow, nextN <= 0x10FFFF, nextN >= 0x80, Unicode.Scalar(UInt32(nextN)) != nil else { return nil }
            n = nextN
            i %= output.count + 1
            output.insert(UInt32(n), at: i)
            i += 1
        }
        return output
    }

    private static func value(of byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return Int(byte - UInt8(ascii: "a"))
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return Int(byte - UInt8(ascii: "A"))
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(byte - UInt8(ascii: "0")) + 26
        default: return nil
        }
    }

    private static func digit(_ value: Int) -> UInt8 {
        value < 26 ? UInt8(ascii: "a") + UInt8(value) : UInt8(ascii: "0") + UInt8(value - 26)
    }

    private static func adapt(_ delta: Int, points: Int, first: Bool) -> Int {
        var delta = first ? delta / Self.damp : delta / 2
        delta += delta / points
        var k = 0
        while delta > ((Self.base - Self.tMin) * Self.tMax) / 2 {
            delta /= Self.base - Self.tMin
            k += Self.base
        }
        return k + (Self.base - Self.tMin + 1) * delta / (delta + Self.skew)
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        self.count >= width ? self : String(repeating: "0", count: width - self.count) + self
    }
}
