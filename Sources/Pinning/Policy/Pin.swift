import Crypto
import Foundation
public import X509

/// An SPKI SHA-256 pin: the SHA-256 digest of a certificate's exact SubjectPublicKeyInfo DER.
///
/// Its text form is `sha256/BASE64` (as OkHttp, TrustKit and HPKP write it); curl's `sha256//BASE64` is read as
/// the same pin. A pin survives certificate renewal as long as the key is kept, which is why public-key pinning
/// is the recommended mode.
///
/// <!-- snippet: given(certificate: Certificate)
/// import X509
/// -->
/// ```swift
/// let pin = try Pin("sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E=")
/// let served = Pin(spkiOf: certificate)
/// ```
public struct Pin: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The digest, held inline as four big-endian 64-bit words (bytes 0–7, 8–15, 16–23, 24–31), not as an array:
    /// a pin set of 10,000 hosts holds 20,000 pins, each of which would otherwise be an allocation, and comparing
    /// two pins is four word comparisons. Equality and hashing are the digest bytes'; the order is theirs too
    /// (big-endian words compare as their bytes do).
    private let words: (UInt64, UInt64, UInt64, UInt64)

    /// The 32-byte SHA-256 digest of the SubjectPublicKeyInfo DER.
    public var sha256: [UInt8] {
        let words = (self.words.0.bigEndian, self.words.1.bigEndian, self.words.2.bigEndian, self.words.3.bigEndian)
        return withUnsafeBytes(of: words) { Array($0) }
    }

    /// A pin from the 32 bytes of a digest (the caller checked the count).
    private init(digestBytes bytes: some Sequence<UInt8>) {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { memory in
            for (index, byte) in bytes.prefix(32).enumerated() { memory[index] = byte }
        }
        self.words = (UInt64(bigEndian: words.0), UInt64(bigEndian: words.1), UInt64(bigEndian: words.2), UInt64(bigEndian: words.3))
    }

    private init(words: (UInt64, UInt64, UInt64, UInt64)) {
        self.words = words
    }

    public static func == (lhs: Pin, rhs: Pin) -> Bool {
        lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.words.2 == rhs.words.2 && lhs.words.3 == rhs.words.3
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.words.0)
        hasher.combine(self.words.1)
        hasher.combine(self.words.2)
        hasher.combine(self.words.3)
    }

    /// A pin from its text form: `sha256/BASE64`, curl's `sha256//BASE64` (the form of `--pinnedpubkey`), or
    /// bare BASE64, decoding to exactly 32 bytes. The prefix is case-insensitive.
    ///
    /// - Throws: ``PinError`` when the text is not such a pin (another algorithm prefix, bad base64, a digest
    ///   that is not 32 bytes long, several pins in one text as curl's `;`-separated list).
    public init(_ text: String) throws(PinError) {
        // The form configurations write, "sha256/" and the 44 base64 characters of 32 bytes, is decoded at once,
        // without the trimming and searching below (a pin set of 10,000 hosts holds 20,000 pins). The general
        // reading gives the same pin for such a text: it has no space to trim and no ";", and its body decodes to
        // 32 bytes, so even a body that starts with "/" is read as ours, not as curl's "sha256//". The bare 44
        // characters (as reports and most tools write a digest) are decoded at once too, unless they begin with
        // "sha256/", which the general reading takes as the prefix.
        if text.utf8.count == 51 || text.utf8.count == 44, let words = Self.decodeCanonicalDigest(text) {
            self.init(words: words)
            return
        }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let body: String
        if trimmed.contains(";") {
            // curl's --pinnedpubkey takes "sha256//A;sha256//B". Base64 never contains ";", so say what it is.
            throw PinError(
                text: text,
                problem: "several pins separated by \";\" (curl's --pinnedpubkey list); give each pin on its own"
            )
        }
        if trimmed.lowercased().hasPrefix("sha256//"), Self.decode(String(trimmed.dropFirst("sha256/".count)))?.count != 32 {
            // curl's form (its --pinnedpubkey syntax). A digest's base64 may itself start with "/", so
            // "sha256//…" is first read as our form; both readings cannot decode to 32 bytes (44 base64
            // characters), so the text has exactly one meaning.
            body = String(trimmed.dropFirst("sha256//".count))
        } else if trimmed.lowercased().hasPrefix("sha256/") {
            body = String(trimmed.dropFirst("sha256/".count))
        } else if let slash = trimmed.firstIndex(of: "/"), Self.looksLikeAlgorithmName(trimmed[..<slash]),
            Self.decode(trimmed)?.count != 32
        {
            // "sha1/…" and friends. Base64 text may itself contain "/", so a prefix is taken as an algorithm
            // name only when the whole text is not already a valid bare pin.
            throw PinError(
                text: text,
                problem: "unsupported pin algorithm \"\(trimmed[..<slash])\"; only sha256/ pins are accepted"
            )
        } else {
            body = trimmed
        }
        guard !body.isEmpty else {
            throw PinError(text: text, problem: "the pin is empty")
        }
        guard let digest = Self.decode(body) else {
            throw PinError(text: text, problem: "the pin is not valid base64")
        }
        guard digest.count == 32 else {
            throw PinError(text: text, problem: "a SHA-256 pin is 32 bytes, this one decodes to \(digest.count)")
        }
        // Foundation's decoder ignores the 2 bits past the digest in the last character, so `…BBB=` and `…BBA=`
        // read as one digest; the pin was then shown, reported and exported as the other text, and a user could
        // not find what they wrote (NU3). One digest has one Base64 text (RFC 4648 §3.5 lets a decoder refuse the
        // others), so the other texts are refused, naming the one meant.
        let canonical = Data(digest).base64EncodedString()
        guard body == canonical else {
            throw PinError(text: text, problem: "not canonical Base64; did you mean sha256/\(canonical)?")
        }
        self.init(digestBytes: digest)
    }

    private static func decode(_ base64: String) -> [UInt8]? {
        Data(base64Encoded: base64).map { Array($0) }
    }

    /// The digest of exactly 44 characters of canonical base64 (43 from the standard alphabet, then one `=`, the 2
    /// bits past the digest zero), as every tool writes a SHA-256 pin, after `sha256/` or bare (a bare text that
    /// begins with `sha256/` in any case is left to the general reading); nil for anything else, which
    /// the general reading (Foundation's decoder) then reads. A pin set of 10,000 hosts holds 20,000 pins: decoded
    /// here, over the string's bytes in place, each spares a `String`, a `Data` and a copy. It accepts only what
    /// Foundation's decoder reads as the same 32 bytes (canonical base64 has one decoding), so the pin read is the
    /// same either way.
    private static func decodeCanonicalDigest(_ text: String) -> (UInt64, UInt64, UInt64, UInt64)? {
        var text = text
        return text.withUTF8 { Self.decodeCanonicalDigest(utf8: $0) }
    }

    /// A pin from the UTF-8 bytes of a text in the usual form (``decodeCanonicalDigest(_:)``'s: `sha256/` and 44
    /// characters of canonical base64, or the bare 44); nil for any other text. For such a text it is the pin
    /// ``init(_:)`` reads from the same text, by the same decoder, which ``init(_:)`` tries first. A configuration's
    /// one-pass reading (``ConfigurationDocument``) decodes pins where they stand in the text, without a `String`.
    init?(usualFormUTF8 bytes: UnsafeBufferPointer<UInt8>) {
        guard let words = Self.decodeCanonicalDigest(utf8: bytes) else { return nil }
        self.init(words: words)
    }

    /// ``decodeCanonicalDigest(_:)`` over the text's UTF-8 bytes.
    private static func decodeCanonicalDigest(utf8 bytes: UnsafeBufferPointer<UInt8>) -> (UInt64, UInt64, UInt64, UInt64)? {
        // The table is read once here, not once per character (a static is reached through a lazy-initialisation check).
        let values = Self.base64Values
        let prefixed = bytes.count == 51
        guard prefixed || bytes.count == 44, bytes[bytes.count - 1] == UInt8(ascii: "=") else { return nil }
        // "sha256/" in any case, compared in place (no array per pin): OR-ing 0x20 lower-cases the letters and
        // leaves the digits and "/" as they are.
        var startsWithOurPrefix = true
        for (offset, expected) in "sha256/".utf8.enumerated() where bytes[offset] | 0x20 != expected {
            startsWithOurPrefix = false
            break
        }
        guard prefixed ? bytes.starts(with: "sha256/".utf8) : !startsWithOurPrefix else { return nil }
        // 43 characters of 6 bits are 258 bits: the 256 of the digest, shifted into four words, then 2 bits
        // that canonical base64 leaves zero. Any byte outside the alphabet has the table's 0xFF, so OR-ing the
        // values together finds one.
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var invalid: UInt8 = 0
        let start = prefixed ? 7 : 0
        var position = start
        func next() -> UInt64 {
            let value = values[Int(bytes[position])]
            invalid |= value
            position += 1
            return UInt64(value & 0x3F)
        }
        // Each word's 64 bits are 10 characters and 4 bits of the next; the next word starts with its other 2.
        var carry: UInt64 = 0
        var carryBits: UInt64 = 0
        for word in 0..<4 {
            var value = carry
            var bits = carryBits
            while bits + 6 <= 64 {
                value = value << 6 | next()
                bits += 6
            }
            let remaining = 64 - bits  // 4, 2 or 0 bits still needed from one more character
            if remaining > 0 {
                let sixBits = next()
                value = value << remaining | sixBits >> (6 - remaining)
                carry = sixBits & ((1 << (6 - remaining)) - 1)
                carryBits = 6 - remaining
            } else {
                carry = 0
                carryBits = 0
            }
            switch word {
            case 0: words.0 = value
            case 1: words.1 = value
            case 2: words.2 = value
            default: words.3 = value
            }
        }
        guard position == start + 43, invalid & 0xC0 == 0, carryBits == 2, carry == 0 else { return nil }
        return words
    }

    /// The value of each byte as a base64 digit (standard alphabet), 0xFF for a byte that is not one.
    private static let base64Values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            table[Int(byte)] = UInt8(value)
        }
        return table
    }()

    /// `sha1`, `SHA-384`, `md5`…: the prefixes other pin formats use. Base64 text can itself look like
    /// "ASA/…", so only names of digest families count.
    private static func looksLikeAlgorithmName(_ prefix: Substring) -> Bool {
        let name = prefix.lowercased()
        return (name.hasPrefix("sha") || name.hasPrefix("md")) && name.count <= 8
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
    }

    /// A pin from a 32-byte SHA-256 digest of a SubjectPublicKeyInfo.
    public init(sha256Digest: [UInt8]) throws(PinError) {
        guard sha256Digest.count == 32 else {
            throw PinError(text: "\(sha256Digest.count) bytes", problem: "a SHA-256 pin is 32 bytes")
        }
        self.init(digestBytes: sha256Digest)
    }

    /// The pin of a SubjectPublicKeyInfo given as its exact DER bytes.
    public init(subjectPublicKeyInfoDER der: some Sequence<UInt8>) {
        self.init(digestBytes: SHA256.hash(data: Array(der)))
    }

    /// The pin of a certificate's public key: SHA-256 over the exact SubjectPublicKeyInfo DER in the certificate.
    public init(spkiOf certificate: Certificate) {
        self.init(subjectPublicKeyInfoDER: certificate.subjectPublicKeyInfoDER)
    }

    /// The base64 of the digest, without the `sha256/` prefix.
    public var base64: String { Data(self.sha256).base64EncodedString() }

    /// `sha256/BASE64`.
    public var description: String { "sha256/" + self.base64 }

    /// Orders pins by their digest bytes, so sorted pin lists are stable across runs.
    public static func < (lhs: Pin, rhs: Pin) -> Bool {
        (lhs.words.0, lhs.words.1, lhs.words.2, lhs.words.3) < (rhs.words.0, rhs.words.1, rhs.words.2, rhs.words.3)
    }
}

/// A pin string that is not an SPKI SHA-256 pin.
public struct PinError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `invalidPin`: the error's stable code (for logs, metrics and JSON; the words may change).
    public var code: String { "invalidPin" }

    /// The text that was given.
    public var text: String
    /// What is wrong with it.
    public var problem: String

    /// `invalid pin "TEXT": PROBLEM`.
    public var description: String { "invalid pin \"\(self.text)\": \(self.problem)" }
}
