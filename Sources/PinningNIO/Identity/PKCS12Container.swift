import Crypto
import Foundation
import SwiftASN1
import X509

/// The structure of a PKCS#12 file (RFC 7292): its safes (plain or password-encrypted), its integrity MAC, and
/// the bags inside a decrypted safe; and the pieces a written file is made of.
///
/// Everything is parsed and decrypted here and in ``PasswordBasedEncryption``, never by `NIOSSLPKCS12Bundle`:
/// that type calls `fatalError` on a file without a key or without a certificate matching it, its passphrase
/// reaches BoringSSL, whose PKCS#12 password encoding (UCS-2) refuses characters outside the Basic
/// Multilingual Plane that OpenSSL 3 accepts, and NIOSSL's passphrase callback traps on any non-ASCII byte.
/// Keys and certificates leave as DER, which NIOSSL reads without a passphrase.
struct PKCS12Container {
    /// A structural problem: `corrupt` for malformed input, `unsupported` for valid input we do not handle.
    enum Problem: Error {
        /// Damaged; the words say where. `underlying` is the parser's own error text, when it has one: kept apart
        /// from the words (for `--verbose`), never part of them.
        case corrupt(String, underlying: String? = nil)
        case unsupported(String)
        /// Not a PKCS#12 (PFX) structure at all: not DER, or another kind of file.
        case notPKCS12(underlying: String)
    }

    /// One ContentInfo of the AuthenticatedSafe.
    enum Safe {
        /// A `data` ContentInfo: the DER of its SafeContents.
        case plain([UInt8])
        /// An `encryptedData` ContentInfo: the DER of the encryption AlgorithmIdentifier and the ciphertext of
        /// a SafeContents.
        case encrypted(algorithm: [UInt8], ciphertext: [UInt8])
    }

    /// A SafeBag we use.
    enum Bag {
        case key(KeyBag)
        case certificate([UInt8])
    }

    /// A key bag.
    struct KeyBag {
        /// true: `pkcs8ShroudedKeyBag` (value is an EncryptedPrivateKeyInfo); false: `keyBag` (a PrivateKeyInfo).
        var isShrouded: Bool
        /// The DER of the bag's value.
        var value: [UInt8]
    }

    /// The integrity MAC (`MacData`).
    struct MAC {
        var digest: Digest
        var expected: [UInt8]
        var salt: [UInt8]
        var iterations: Int
    }

    /// The MAC digests we compute (those OpenSSL and BoringSSL write).
    enum Digest {
        case sha1, sha256, sha384, sha512

        init?(_ oid: ASN1ObjectIdentifier) {
            switch oid {
            case [1, 3, 14, 3, 2, 26]: self = .sha1
            case [2, 16, 840, 1, 101, 3, 4, 2, 1]: self = .sha256
            case [2, 16, 840, 1, 101, 3, 4, 2, 2]: self = .sha384
            case [2, 16, 840, 1, 101, 3, 4, 2, 3]: self = .sha512
            default: return nil
            }
        }
    }

    static let dataOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 7, 1]
    static let encryptedDataOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 7, 6]
    static let keyBagOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 1]
    static let shroudedKeyBagOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 2]
    static let certBagOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 3]
    static let safeContentsBagOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 6]
    static let x509CertificateOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 22, 1]
    static let friendlyNameOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 20]
    static let localKeyIDOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 21]
    static let sha1OID: ASN1ObjectIdentifier = [1, 3, 14, 3, 2, 26]
    static let explicitZero = ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)

    /// The AuthenticatedSafe's ContentInfos, in file order.
    var safes: [Safe]
    /// The MAC over the AuthenticatedSafe, if the file has one.
    var mac: MAC?
    /// The AuthenticatedSafe bytes (what the MAC covers).
    var authenticatedSafe: [UInt8]

    // MARK: - Reading

    /// Reads the structure of a DER PFX.
    init(derEncoded bytes: [UInt8]) throws(Problem) {
        do {
            try self.init(parsing: bytes)
        } catch let problem as Problem {
            throw problem
        } catch {
            throw .notPKCS12(underlying: String(describing: error))
        }
    }

    private init(parsing bytes: [UInt8]) throws {
        let root: ASN1Node
        do {
            root = try DER.parse(bytes)
        } catch {
            if bytes.first == 0x30, bytes.count > 1, bytes[1] == 0x80 {
                throw Problem.unsupported(
                    "BER encoding with indefinite lengths is not supported; re-encode it, e.g. `openssl pkcs12 -in F -nodes | openssl pkcs12 -export`"
                )
            }
            throw Problem.notPKCS12(underlying: String(describing: error))
        }
        var pfx = try Self.children(of: root, "PFX")
        guard let versionNode = pfx.next() else { throw Problem.corrupt("the PFX is empty") }
        let version = try Int(derEncoded: versionNode)
        guard version == 3 else { throw Problem.unsupported("PFX version \(version) (only version 3 exists)") }
        guard let authSafeNode = pfx.next() else { throw Problem.corrupt("the PFX has no authSafe") }
        var authSafe = try Self.children(of: authSafeNode, "authSafe ContentInfo")
        guard let typeNode = authSafe.next() else { throw Problem.corrupt("the authSafe has no content type") }
        let type = try ASN1ObjectIdentifier(derEncoded: typeNode)
        guard type == Self.dataOID else {
            throw Problem.unsupported("the authSafe is \(type), not data: public-key integrity mode is not supported")
        }
        guard let wrapped = authSafe.next() else { throw Problem.corrupt("the authSafe has no content") }
        let authenticatedSafe = try Self.explicitOctetString(wrapped, "authSafe content")
        self.authenticatedSafe = authenticatedSafe

        if let macNode = pfx.next() {
            self.mac = try Self.parseMAC(macNode)
        } else {
            self.mac = nil
        }
        guard pfx.next() == nil else { throw Problem.corrupt("unexpected data after the MAC") }

        var safes: [Safe] = []
        var contentInfos = try Self.children(of: try DER.parse(authenticatedSafe), "AuthenticatedSafe")
        while let contentInfo = contentInfos.next() {
            var fields = try Self.children(of: contentInfo, "ContentInfo")
            guard let typeNode = fields.next() else { throw Problem.corrupt("a ContentInfo has no content type") }
            let type = try ASN1ObjectIdentifier(derEncoded: typeNode)
            guard let content = fields.next() else { throw Problem.corrupt("a ContentInfo has no content") }
            switch type {
            case Self.dataOID:
                safes.append(.plain(try Self.explicitOctetString(content, "data ContentInfo")))
            case Self.encryptedDataOID:
                safes.append(try Self.encryptedSafe(content))
            default:
                throw Problem.unsupported(
                    "a safe of content type \(type) (public-key privacy mode is not supported; only data and encryptedData)"
                )
            }
        }
        self.safes = safes
    }

    /// `[0] EXPLICIT EncryptedData`: version, then EncryptedContentInfo { contentType, contentEncryptionAlgorithm,
    /// [0] IMPLICIT OCTET STRING }.
    private static func encryptedSafe(_ node: ASN1Node) throws -> Safe {
        var wrapper = try Self.children(of: node, "encryptedData ContentInfo", identifier: Self.explicitZero)
        guard let encryptedData = wrapper.next() else { throw Problem.corrupt("an empty encryptedData ContentInfo") }
        var fields = try Self.children(of: encryptedData, "EncryptedData")
        guard let versionNode = fields.next(), let infoNode = fields.next() else {
            throw Problem.corrupt("the EncryptedData is incomplete")
        }
        _ = try Int(derEncoded: versionNode)
        var info = try Self.children(of: infoNode, "EncryptedContentInfo")
        guard info.next() != nil, let algorithm = info.next() else {
            throw Problem.corrupt("the EncryptedContentInfo is incomplete")
        }
        guard let content = info.next() else {
            throw Problem.unsupported("an encrypted safe whose content is detached")
        }
        let implicitZero = ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)
        guard content.identifier == implicitZero else {
            throw Problem.corrupt("the encrypted content is not [0] IMPLICIT OCTET STRING")
        }
        var ciphertext: [UInt8] = []
        switch content.content {
        case .primitive(let bytes):
            ciphertext = Array(bytes)
        case .constructed(let parts):
            // A constructed (segmented) OCTET STRING, as some BER writers produce: the concatenated segments.
            for part in parts {
                ciphertext += try ASN1OctetString(derEncoded: part).bytes
            }
        }
        return .encrypted(algorithm: Array(algorithm.encodedBytes), ciphertext: ciphertext)
    }

    /// The key and certificate bags of a (decrypted) SafeContents, in order. Other bags (CRLs, secrets) are
    /// skipped; nested SafeContents are refused rather than recursed into.
    static func bags(inSafeContents bytes: [UInt8]) throws(Problem) -> [Bag] {
        do {
            var result: [Bag] = []
            var bags = try Self.children(of: try DER.parse(bytes), "SafeContents")
            while let bag = bags.next() {
                var bagFields = try Self.children(of: bag, "SafeBag")
                guard let idNode = bagFields.next(), let valueNode = bagFields.next() else {
                    throw Problem.corrupt("a SafeBag lacks its type or value")
                }
                let bagID = try ASN1ObjectIdentifier(derEncoded: idNode)
                var value = try Self.children(of: valueNode, "SafeBag value", identifier: Self.explicitZero)
                guard let inner = value.next() else { throw Problem.corrupt("an empty SafeBag") }
                switch bagID {
                case Self.keyBagOID, Self.shroudedKeyBagOID:
                    result.append(
                        .key(KeyBag(isShrouded: bagID == Self.shroudedKeyBagOID, value: Array(inner.encodedBytes))))
                case Self.certBagOID:
                    var certBag = try Self.children(of: inner, "CertBag")
                    guard let typeNode = certBag.next(), let certValue = certBag.next() else {
                        throw Problem.corrupt("a CertBag lacks its type or value")
                    }
                    // SDSI certificates (the only other type) are skipped like any bag we do not use.
                    if try ASN1ObjectIdentifier(derEncoded: typeNode) == Self.x509CertificateOID {
                        result.append(.certificate(try Self.explicitOctetString(certValue, "X.509 CertBag")))
                    }
                case Self.safeContentsBagOID:
                    throw Problem.unsupported("nested SafeContents bags")
                default:
                    continue
                }
            }
            return result
        } catch let problem as Problem {
            throw problem
        } catch {
            throw .corrupt("a SafeContents is malformed", underlying: String(describing: error))
        }
    }

    private static func children(
        of node: ASN1Node,
        _ what: String,
        identifier: ASN1Identifier = .sequence
    ) throws -> ASN1NodeCollection.Iterator {
        guard node.identifier == identifier, case .constructed(let nodes) = node.content else {
            throw Problem.corrupt("the \(what) is not a \(identifier == .sequence ? "SEQUENCE" : "\(identifier)")")
        }
        return nodes.makeIterator()
    }

    /// `[0] EXPLICIT OCTET STRING`, the content of a data ContentInfo.
    private static func explicitOctetString(_ node: ASN1Node, _ what: String) throws -> [UInt8] {
        var inner = try Self.children(of: node, what, identifier: Self.explicitZero)
        guard let octets = inner.next(), inner.next() == nil else {
            throw Problem.corrupt("the \(what) is not one OCTET STRING")
        }
        return Array(try ASN1OctetString(derEncoded: octets).bytes)
    }

    private static func parseMAC(_ node: ASN1Node) throws -> MAC {
        var fields = try Self.children(of: node, "MacData")
        guard let digestInfoNode = fields.next(), let saltNode = fields.next() else {
            throw Problem.corrupt("the MacData is incomplete")
        }
        var digestInfo = try Self.children(of: digestInfoNode, "MAC DigestInfo")
        guard let algorithmNode = digestInfo.next(), let valueNode = digestInfo.next() else {
            throw Problem.corrupt("the MAC DigestInfo is incomplete")
        }
        var algorithm = try Self.children(of: algorithmNode, "MAC digest algorithm")
        guard let oidNode = algorithm.next() else { throw Problem.corrupt("the MAC digest algorithm has no OID") }
        let oid = try ASN1ObjectIdentifier(derEncoded: oidNode)
        guard let digest = Digest(oid) else {
            throw Problem.unsupported(
                "MAC digest \(oid) (supported: SHA-1, SHA-256, SHA-384, SHA-512; PBMAC1 is not supported)")
        }
        let expected = Array(try ASN1OctetString(derEncoded: valueNode).bytes)
        let salt = Array(try ASN1OctetString(derEncoded: saltNode).bytes)
        var iterations = 1
        if let iterationsNode = fields.next() {
            iterations = try Int(derEncoded: iterationsNode)
        }
        // BoringSSL's own bound is 100 million; far above any real file and far beyond a reasonable load time.
        guard iterations >= 1, iterations <= 10_000_000 else {
            throw Problem.unsupported("MAC iteration count \(iterations) (accepted: 1 to 10,000,000)")
        }
        return MAC(digest: digest, expected: expected, salt: salt, iterations: iterations)
    }

    // MARK: - Writing

    /// A `data` ContentInfo holding a SafeContents of these bags (each the DER of a SafeBag).
    static func dataContentInfo(bags: [[UInt8]]) throws -> [UInt8] {
        var contentInfo = DER.Serializer()
        try contentInfo.appendConstructedNode(identifier: .sequence) { serializer in
            try serializer.serialize(Self.dataOID)
            try serializer.appendConstructedNode(identifier: Self.explicitZero) { serializer in
                try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(Self.safeContents(bags))))
            }
        }
        return contentInfo.serializedBytes
    }

    /// An `encryptedData` ContentInfo: `ciphertext` is a SafeContents encrypted under `algorithm`.
    static func encryptedDataContentInfo(algorithm: [UInt8], ciphertext: [UInt8]) throws -> [UInt8] {
        var contentInfo = DER.Serializer()
        try contentInfo.appendConstructedNode(identifier: .sequence) { serializer in
            try serializer.serialize(Self.encryptedDataOID)
            try serializer.appendConstructedNode(identifier: Self.explicitZero) { serializer in
                try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                    try serializer.serialize(0)
                    try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                        try serializer.serialize(Self.dataOID)
                        serializer.serializeRawBytes(algorithm)
                        serializer.appendPrimitiveNode(
                            identifier: ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)
                        ) { bytes in
                            bytes.append(contentsOf: ciphertext)
                        }
                    }
                }
            }
        }
        return contentInfo.serializedBytes
    }

    /// A SafeContents: the SEQUENCE of these SafeBags.
    static func safeContents(_ bags: [[UInt8]]) -> [UInt8] {
        var serializer = DER.Serializer()
        serializer.appendConstructedNode(identifier: .sequence) { serializer in
            for bag in bags { serializer.serializeRawBytes(bag) }
        }
        return serializer.serializedBytes
    }

    /// A pkcs8ShroudedKeyBag holding an EncryptedPrivateKeyInfo.
    static func shroudedKeyBag(algorithm: [UInt8], ciphertext: [UInt8], attributes: [[UInt8]]) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { serializer in
            try serializer.serialize(Self.shroudedKeyBagOID)
            try serializer.appendConstructedNode(identifier: Self.explicitZero) { serializer in
                try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                    serializer.serializeRawBytes(algorithm)
                    try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(ciphertext)))
                }
            }
            Self.appendAttributes(attributes, to: &serializer)
        }
        return serializer.serializedBytes
    }

    /// A certificate bag holding an X.509 certificate.
    static func certificateBag(der: [UInt8], attributes: [[UInt8]] = []) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { serializer in
            try serializer.serialize(Self.certBagOID)
            try serializer.appendConstructedNode(identifier: Self.explicitZero) { serializer in
                try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                    try serializer.serialize(Self.x509CertificateOID)
                    try serializer.appendConstructedNode(identifier: Self.explicitZero) { serializer in
                        try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(der)))
                    }
                }
            }
            Self.appendAttributes(attributes, to: &serializer)
        }
        return serializer.serializedBytes
    }

    /// The friendlyName attribute (a BMPString: UTF-16BE, as keychains read it).
    static func friendlyNameAttribute(_ name: String) throws -> [UInt8] {
        let bmp = name.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        return try Self.attribute(Self.friendlyNameOID) { serializer in
            serializer.appendPrimitiveNode(identifier: ASN1Identifier(tagWithNumber: 30, tagClass: .universal)) {
                bytes in
                bytes.append(contentsOf: bmp)
            }
        }
    }

    /// The localKeyID attribute that pairs a key bag with its certificate bag.
    static func localKeyIDAttribute(_ id: [UInt8]) throws -> [UInt8] {
        try Self.attribute(Self.localKeyIDOID) { serializer in
            try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(id)))
        }
    }

    private static func attribute(
        _ oid: ASN1ObjectIdentifier, value: (inout DER.Serializer) throws -> Void
    ) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { serializer in
            try serializer.serialize(oid)
            try serializer.appendConstructedNode(identifier: .set) { serializer in
                try value(&serializer)
            }
        }
        return serializer.serializedBytes
    }

    /// `bagAttributes SET OF PKCS12Attribute`, in DER order (sorted encodings); nothing when there are none.
    private static func appendAttributes(_ attributes: [[UInt8]], to serializer: inout DER.Serializer) {
        guard !attributes.isEmpty else { return }
        serializer.appendConstructedNode(identifier: .set) { serializer in
            for attribute in attributes.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                serializer.serializeRawBytes(attribute)
            }
        }
    }

    /// The PFX: version 3, the AuthenticatedSafe of `contentInfos`, and an HMAC-SHA1 MAC (the MAC every importer
    /// accepts) keyed from `password` (a PKCS#12 KDF password encoding) with a random salt.
    static func pfx(contentInfos: [[UInt8]], password: [UInt8], macIterations: Int) throws -> [UInt8] {
        var safes = DER.Serializer()
        safes.appendConstructedNode(identifier: .sequence) { serializer in
            for contentInfo in contentInfos { serializer.serializeRawBytes(contentInfo) }
        }
        let authenticatedSafe = safes.serializedBytes
        let salt = PasswordBasedEncryption.randomBytes(8)
        let macValue = PKCS12KeyDerivation.mac(
            .sha1, password: password, salt: salt, iterations: macIterations, data: authenticatedSafe)

        var pfx = DER.Serializer()
        try pfx.appendConstructedNode(identifier: .sequence) { serializer in
            try serializer.serialize(3)
            try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                try serializer.serialize(Self.dataOID)
                try serializer.appendConstructedNode(identifier: Self.explicitZero) { serializer in
                    try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(authenticatedSafe)))
                }
            }
            try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                    try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                        try serializer.serialize(Self.sha1OID)
                        try serializer.serialize(ASN1Null())
                    }
                    try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(macValue)))
                }
                try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(salt)))
                try serializer.serialize(macIterations)
            }
        }
        return pfx.serializedBytes
    }
}
