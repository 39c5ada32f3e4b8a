import Crypto
import Foundation
import SwiftASN1
import X509

/// The unencrypted structure of a PKCS#12 file (RFC 7292), read without decrypting anything, and the rewrite
/// that makes it safe to hand to NIOSSL.
///
/// Why this exists: `NIOSSLPKCS12Bundle` calls `fatalError` when BoringSSL parses a file that has no private key
/// or no certificate matching its key, so an untrusted .p12 could crash the process. Instead of trusting the
/// input, we give NIOSSL a file that can never reach that branch:
///
/// 1. The key bags in the unencrypted safes are taken out (kept for us to decrypt separately).
/// 2. A fresh "sentinel" key and a certificate for it are added as a plain key bag and certificate bag.
/// 3. The integrity MAC is checked first (wrong passphrase) and recomputed over the rewritten content.
///
/// BoringSSL then always finds exactly one key (the sentinel; a key hidden inside an encrypted safe makes it
/// fail with "multiple private keys") and always a certificate matching it (the sentinel certificate), so the
/// `fatalError` branch is unreachable for every input. BoringSSL still does all the decryption (AES/PBKDF2,
/// 3DES, RC2) of the certificate safes. The original key is decrypted as an `ENCRYPTED PRIVATE KEY` PEM through
/// `NIOSSLPrivateKey`, which throws on failure.
struct PKCS12Container {
    /// A structural problem: `corrupt` for malformed input, `unsupported` for valid input we do not handle.
    enum Problem: Error {
        case corrupt(String)
        case unsupported(String)
    }

    /// A key bag taken out of an unencrypted safe.
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

    /// The MAC digests BoringSSL accepts and that we can compute.
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
    static let keyBagOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 1]
    static let shroudedKeyBagOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 2]
    static let certBagOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 10, 1, 3]
    static let x509CertificateOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 9, 22, 1]
    static let sha256OID: ASN1ObjectIdentifier = [2, 16, 840, 1, 101, 3, 4, 2, 1]
    static let explicitZero = ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)

    /// The AuthenticatedSafe's ContentInfos, with key bags removed from the unencrypted ones (DER of each).
    var contentInfos: [[UInt8]]
    /// The key bags that were removed, in file order.
    var keyBags: [KeyBag]
    /// The MAC over the original AuthenticatedSafe, if the file has one.
    var mac: MAC?
    /// The original AuthenticatedSafe bytes (what the MAC covers).
    var authenticatedSafe: [UInt8]

    // MARK: - Reading

    /// Reads the structure of a DER PFX.
    init(derEncoded bytes: [UInt8]) throws(Problem) {
        do {
            try self.init(parsing: bytes)
        } catch let problem as Problem {
            throw problem
        } catch {
            throw .corrupt("not a DER-encoded PKCS#12 (PFX) structure: \(error)")
        }
    }

    private init(parsing bytes: [UInt8]) throws {
        let root: ASN1Node
        do {
            root = try DER.parse(bytes)
        } catch {
            if bytes.first == 0x30, bytes.count > 1, bytes[1] == 0x80 {
                throw Problem.unsupported("BER encoding with indefinite lengths is not supported; re-encode it, e.g. `openssl pkcs12 -in F -nodes | openssl pkcs12 -export`")
            }
            throw Problem.corrupt("not a DER-encoded PKCS#12 (PFX) structure (truncated or not PKCS#12): \(error)")
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

        var contentInfos: [[UInt8]] = []
        var keyBags: [KeyBag] = []
        var safes = try Self.children(of: try DER.parse(authenticatedSafe), "AuthenticatedSafe")
        while let contentInfo = safes.next() {
            var fields = try Self.children(of: contentInfo, "ContentInfo")
            guard let typeNode = fields.next() else { throw Problem.corrupt("a ContentInfo has no content type") }
            let type = try ASN1ObjectIdentifier(derEncoded: typeNode)
            guard type == Self.dataOID, let content = fields.next() else {
                // Encrypted (or other) safes stay as they are: BoringSSL decrypts them.
                contentInfos.append(Array(contentInfo.encodedBytes))
                continue
            }
            let safeContents = try Self.explicitOctetString(content, "data ContentInfo")
            var kept: [ASN1Node] = []
            var bags = try Self.children(of: try DER.parse(safeContents), "SafeContents")
            while let bag = bags.next() {
                var bagFields = try Self.children(of: bag, "SafeBag")
                guard let idNode = bagFields.next(), let valueNode = bagFields.next() else {
                    throw Problem.corrupt("a SafeBag lacks its type or value")
                }
                let bagID = try ASN1ObjectIdentifier(derEncoded: idNode)
                if bagID == Self.keyBagOID || bagID == Self.shroudedKeyBagOID {
                    var value = try Self.children(of: valueNode, "key bag value", identifier: Self.explicitZero)
                    guard let inner = value.next() else { throw Problem.corrupt("an empty key bag") }
                    keyBags.append(KeyBag(isShrouded: bagID == Self.shroudedKeyBagOID, value: Array(inner.encodedBytes)))
                } else {
                    kept.append(bag)
                }
            }
            contentInfos.append(try Self.dataContentInfo(bags: kept.map { Array($0.encodedBytes) }))
        }
        self.contentInfos = contentInfos
        self.keyBags = keyBags
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
            throw Problem.unsupported("MAC digest \(oid) (supported: SHA-1, SHA-256, SHA-384, SHA-512; PBMAC1 is not supported)")
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
        var safeContents = DER.Serializer()
        safeContents.appendConstructedNode(identifier: .sequence) { serializer in
            for bag in bags { serializer.serializeRawBytes(bag) }
        }
        var contentInfo = DER.Serializer()
        try contentInfo.appendConstructedNode(identifier: .sequence) { serializer in
            try serializer.serialize(Self.dataOID)
            try serializer.appendConstructedNode(identifier: Self.explicitZero) { serializer in
                try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(safeContents.serializedBytes)))
            }
        }
        return contentInfo.serializedBytes
    }

    /// A plain (unencrypted) key bag holding a PrivateKeyInfo.
    static func keyBag(privateKeyInfo: [UInt8]) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.appendConstructedNode(identifier: .sequence) { serializer in
            try serializer.serialize(Self.keyBagOID)
            serializer.appendConstructedNode(identifier: Self.explicitZero) { serializer in
                serializer.serializeRawBytes(privateKeyInfo)
            }
        }
        return serializer.serializedBytes
    }

    /// A certificate bag holding an X.509 certificate.
    static func certificateBag(der: [UInt8]) throws -> [UInt8] {
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
        }
        return serializer.serializedBytes
    }

    /// The rewritten PFX: our content infos plus `extra`, MAC'd (SHA-256, one iteration) with `password`, the
    /// PKCS#12 password encoding whose MAC check succeeded on the original.
    func rewritten(appending extra: [UInt8], password: [UInt8]) throws -> [UInt8] {
        var safes = DER.Serializer()
        safes.appendConstructedNode(identifier: .sequence) { serializer in
            for contentInfo in self.contentInfos { serializer.serializeRawBytes(contentInfo) }
            serializer.serializeRawBytes(extra)
        }
        let authenticatedSafe = safes.serializedBytes
        var salt = [UInt8](repeating: 0, count: 16)
        var generator = SystemRandomNumberGenerator()
        for index in salt.indices { salt[index] = UInt8.random(in: .min ... .max, using: &generator) }
        let macValue = PKCS12KeyDerivation.mac(
            .sha256,
            password: password,
            salt: salt,
            iterations: 1,
            data: authenticatedSafe
        )

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
                        try serializer.serialize(Self.sha256OID)
                        try serializer.serialize(ASN1Null())
                    }
                    try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(macValue)))
                }
                try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(salt)))
                try serializer.serialize(1)
            }
        }
        return pfx.serializedBytes
    }
}
