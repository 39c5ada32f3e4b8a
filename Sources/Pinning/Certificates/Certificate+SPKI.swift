import Crypto
import SwiftASN1
package import X509

extension Certificate {
    /// The exact SubjectPublicKeyInfo DER of this certificate, as it appears in the TBSCertificate.
    ///
    /// `publicKey.subjectPublicKeyInfoBytes` in swift-certificates is only the BIT STRING contents, not the
    /// SubjectPublicKeyInfo, so pins computed over it would not match anyone else's. We walk the
    /// TBSCertificate instead, so the bytes are the ones the CA signed (algorithm parameters included).
    package var subjectPublicKeyInfoDER: [UInt8] {
        if let bytes = Self.spkiBytes(fromTBS: self.tbsCertificateBytes) {
            return bytes
        }
        // The certificate parsed, so its TBS is well formed and the walk above cannot fail; re-serializing
        // the parsed key is the same encoding for every key type swift-certificates accepts.
        var serializer = DER.Serializer()
        do {
            try serializer.serialize(self.publicKey)
        } catch {
            return []
        }
        return serializer.serializedBytes
    }

    /// TBSCertificate ::= SEQUENCE { [0] version OPTIONAL, serialNumber, signature, issuer, validity, subject,
    /// subjectPublicKeyInfo, ... }
    ///
    /// Only the headers of TBSCertificate's direct children are read, as for ``serialNumberContentBytes``:
    /// `DER.parse` built the whole tree (names, extensions) to find one element, on every pin a pinning policy
    /// checked. swift-certificates has already parsed these exact bytes as DER, so the element found is the same.
    static func spkiBytes(fromTBS tbs: ArraySlice<UInt8>) -> [UInt8]? {
        let reader = BERReader(Array(tbs))
        do {
            let root = try reader.element(at: 0, limit: reader.bytes.count)
            guard root.isUniversalSequence, root.end == reader.bytes.count else { return nil }
            var fields = try reader.children(of: root)[...]
            if let version = fields.first, version.tagClass == 2, version.tagNumber == 0 {
                fields = fields.dropFirst()
            }
            // serialNumber, signature, issuer, validity and subject come first.
            guard fields.count > 5 else { return nil }
            let spki = fields[fields.startIndex + 5]
            guard spki.isUniversalSequence else { return nil }
            return Array(reader.encodedBytes(of: spki))
        } catch {
            return nil
        }
    }

    /// The serial number's INTEGER content octets exactly as encoded (two's complement, so a leading 0x00 pads a
    /// positive number whose top bit is set). swift-certificates exposes the magnitude only, which hides
    /// negative and over-long serials.
    var serialNumberContentBytes: [UInt8]? {
        // Fast path, over the bytes in place: a TBSCertificate swift-certificates parsed as DER starts with an
        // optional [0] version and then the serial INTEGER, so two definite-length headers find it, with no copy
        // of the TBSCertificate (its copy and the list of all its children were ~0.7% of a cold evaluation).
        // Anything else is read by the general reader below, which gave this answer before the fast path.
        if let serial = Self.serialByHeaders(self.tbsCertificateBytes) { return serial }
        return self.serialNumberContentBytesByReader
    }

    /// ``serialNumberContentBytes`` by the general reader (the only reading before the fast path; tests hold the
    /// two to the same answer).
    var serialNumberContentBytesByReader: [UInt8]? {
        // Only the headers of TBSCertificate's direct children are read: parsing the whole tree with
        // `DER.parse` took an eighth of an evaluation (profile checks ask for every certificate on every
        // candidate path). swift-certificates has already parsed these exact bytes as DER.
        let reader = BERReader(Array(self.tbsCertificateBytes))
        do {
            let root = try reader.element(at: 0, limit: reader.bytes.count)
            guard root.isUniversalSequence else { return nil }
            for child in try reader.children(of: root) where child.tagClass == 0 && child.tagNumber == 2 {
                guard !child.isConstructed else { return nil }
                return Array(reader.bytes[child.contentStart..<child.contentEnd])
            }
        } catch {
            return nil
        }
        return nil
    }

    /// The serial INTEGER's content octets when `tbs` is a definite-length SEQUENCE whose first child is the
    /// INTEGER, or a constructed [0] followed by the INTEGER; nil for any other shape (the caller then reads it in
    /// full). Lengths are checked against the bytes that remain; nothing is read outside `tbs`.
    private static func serialByHeaders(_ tbs: ArraySlice<UInt8>) -> [UInt8]? {
        /// The tag byte and content range of the definite-length element at `start`, low tag numbers only.
        func element(at start: Int, end: Int) -> (tag: UInt8, content: Range<Int>)? {
            guard start < end, end - start >= 2, tbs[start] & 0x1F != 0x1F else { return nil }
            var position = start + 1
            let first = tbs[position]
            position += 1
            var length = 0
            if first < 0x80 {
                length = Int(first)
            } else {
                let count = Int(first & 0x7F)
                guard (1...3).contains(count), end - position >= count else { return nil }
                for _ in 0..<count {
                    length = length << 8 | Int(tbs[position])
                    position += 1
                }
            }
            guard length <= end - position else { return nil }
            return (tbs[start], position..<(position + length))
        }
        guard let root = element(at: tbs.startIndex, end: tbs.endIndex), root.tag == 0x30,
            var child = element(at: root.content.lowerBound, end: root.content.upperBound)
        else { return nil }
        if child.tag == 0xA0 {
            guard let next = element(at: child.content.upperBound, end: root.content.upperBound) else { return nil }
            child = next
        }
        guard child.tag == 0x02 else { return nil }
        return Array(tbs[child.content])
    }

    /// The certificate's DER encoding.
    package var derBytes: [UInt8] {
        var serializer = DER.Serializer()
        do {
            try serializer.serialize(self)
        } catch {
            return []
        }
        return serializer.serializedBytes
    }
}
