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
    /// The 32-byte SHA-256 digest of the SubjectPublicKeyInfo DER.
    public let sha256: [UInt8]

    /// A pin from its text form: `sha256/BASE64`, curl's `sha256//BASE64` (the form of `--pinnedpubkey`), or
    /// bare BASE64, decoding to exactly 32 bytes. The prefix is case-insensitive.
    ///
    /// - Throws: ``PinError`` when the text is not such a pin (another algorithm prefix, bad base64, a digest
    ///   that is not 32 bytes long, several pins in one text as curl's `;`-separated list).
    public init(_ text: String) throws(PinError) {
        // The form configurations write, "sha256/" and the 44 base64 characters of 32 bytes, is decoded at once,
        // without the trimming and searching below (a pin set of 10,000 hosts holds 20,000 pins). The general
        // reading gives the same pin for such a text: it has no space to trim and no ";", and its body decodes to
        // 32 bytes, so even a body that starts with "/" is read as ours, not as curl's "sha256//".
        if text.utf8.count == 51, text.utf8.starts(with: "sha256/".utf8), let digest = Self.decodeCanonicalDigest(text) {
            self.sha256 = digest
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
        self.sha256 = digest
    }

    private static func decode(_ base64: String) -> [UInt8]? {
        Data(base64Encoded: base64).map { Array($0) }
    }

    /// The 32 bytes of `sha256/` and exactly 44 characters of canonical base64 (43 from the standard alphabet, then
    /// one `=`, the 2 bits past the digest zero), as every tool writes a SHA-256 pin; nil for anything else, which
    /// the general reading (Foundation's decoder) then reads. A pin set of 10,000 hosts holds 20,000 pins: decoded
    /// here, over the string's bytes in place, each spares a `String`, a `Data` and a copy. It accepts only what
    /// Foundation's decoder reads as the same 32 bytes (canonical base64 has one decoding), so the pin read is the
    /// same either way.
    private static func decodeCanonicalDigest(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { bytes -> [UInt8]? in
            guard bytes.count == 51, bytes[50] == UInt8(ascii: "=") else { return nil }
            var digest = [UInt8](repeating: 0, count: 32)
            var accumulator: UInt32 = 0
            var bits: UInt32 = 0
            var out = 0
            for position in 7..<50 {
                let byte = bytes[position]
                let value: UInt8
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte &- UInt8(ascii: "A")
                case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte &- UInt8(ascii: "a") &+ 26
                case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte &- UInt8(ascii: "0") &+ 52
                case UInt8(ascii: "+"): value = 62
                case UInt8(ascii: "/"): value = 63
                default: return nil
                }
                accumulator = (accumulator << 6 | UInt32(value)) & 0x3FFF
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    digest[out] = UInt8(truncatingIfNeeded: accumulator >> bits)
                    out += 1
                }
            }
            // 43 characters are 258 bits: the 32 bytes, then 2 bits that canonical base64 leaves zero.
            guard out == 32, bits == 2, accumulator & 0b11 == 0 else { return nil }
            return digest
        }
    }

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
        self.sha256 = sha256Digest
    }

    /// The pin of a SubjectPublicKeyInfo given as its exact DER bytes.
    public init(subjectPublicKeyInfoDER der: some Sequence<UInt8>) {
        self.sha256 = Array(SHA256.hash(data: Array(der)))
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
    public static func < (lhs: Pin, rhs: Pin) -> Bool { lhs.sha256.lexicographicallyPrecedes(rhs.sha256) }
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
