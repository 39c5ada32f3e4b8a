// BoringSSL is reached directly for its block ciphers (AES, 3DES, RC2, RC4) and PBKDF2; see BoringSSL.swift in
// this folder for why CNIOBoringSSL is visible here. Nothing here goes through NIOSSL's passphrase callback or BoringSSL's
// PKCS#12 password encoding: both differ from OpenSSL 3 for some passphrases (see `PKCS12Passphrase`).
import CNIOBoringSSL
import Crypto
import SwiftASN1

/// How a passphrase becomes key material, exactly as OpenSSL 3 does it.
///
/// - PKCS#12 key derivation (RFC 7292 appendix B: the MAC key, and the key and IV of the `pbeWithSHAAnd…`
///   schemes) takes the passphrase as a BMPString: OpenSSL 3 (`OPENSSL_utf82uni`) converts the UTF-8 bytes to
///   UTF-16 big-endian, a character outside the Basic Multilingual Plane becoming a surrogate pair, and appends
///   a two-byte NUL. (BoringSSL encodes UCS-2 and refuses characters outside the BMP; swift-nio-ssl's passphrase
///   callback converts each byte to a signed `CChar` and traps on any byte over 0x7F. Neither is used.)
/// - PBES2 (PBKDF2, RFC 8018) takes the passphrase's UTF-8 bytes as they are, as does every OpenSSL version.
///
/// A Swift `String` is always valid Unicode, so UTF-8 and UTF-16 here are exact. OpenSSL 3's fallback for bytes
/// that are not UTF-8 (each byte as one character) cannot arise.
package struct PKCS12Passphrase: Sendable {
    /// The passphrase as given.
    package let text: String

    package init(_ text: String) {
        self.text = text
    }

    /// The UTF-8 bytes: the PBES2 password.
    package var utf8: [UInt8] { Array(self.text.utf8) }

    /// The BMPString (UTF-16BE, surrogate pairs for characters beyond U+FFFF) with a two-byte NUL terminator: the
    /// PKCS#12 KDF password for a non-empty passphrase, and one of the two encodings tried for an empty one.
    package var bmp: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(self.text.utf16.count * 2 + 2)
        for unit in self.text.utf16 {
            bytes.append(UInt8(unit >> 8))
            bytes.append(UInt8(unit & 0xFF))
        }
        return bytes + [0, 0]
    }
}

/// Decrypts and encrypts the password-based schemes PKCS#12 files and encrypted PKCS#8 keys use.
///
/// Read: PBES2 with PBKDF2 (HMAC-SHA-1/224/256/384/512) and AES-128/192/256-CBC or DES-EDE3-CBC; the PKCS#12
/// schemes pbeWithSHAAnd3-KeyTripleDES-CBC, …2-KeyTripleDES-CBC, …128BitRC2-CBC, …40BitRC2-CBC, …128BitRC4,
/// …40BitRC4 (what OpenSSL, Windows, macOS and Java write, current and legacy). Written: PBES2/PBKDF2-HMAC-SHA256/
/// AES-256-CBC (OpenSSL 3's default) and pbeWithSHAAnd3-KeyTripleDES-CBC (for old importers).
enum PasswordBasedEncryption {
    /// Why decryption failed. `wrongPassphrase` is a padding or structure failure after decryption: with CBC
    /// padding, a wrong passphrase is indistinguishable from damaged ciphertext.
    enum Failure: Error {
        case wrongPassphrase
        case unsupported(String)
        /// Damaged; the words say where. `underlying` is the parser's own error text, when it has one (for
        /// `--verbose`), never part of the words.
        case corrupt(String, underlying: String? = nil)
    }

    /// The largest PBKDF2 / PKCS#12 KDF iteration count accepted (as for the MAC): far above any real file
    /// (OpenSSL writes 2,048, Windows 2,000, Java 10,000), and a bound on the work a hostile file can ask for.
    static let maximumIterations = 10_000_000

    static let pbes2OID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 5, 13]
    static let pbkdf2OID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 5, 12]
    static let hmacWithSHA256OID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 2, 9]
    static let aes256CBCOID: ASN1ObjectIdentifier = [2, 16, 840, 1, 101, 3, 4, 1, 42]
    static let pbeWithSHAAnd3KeyTripleDESOID: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 12, 1, 3]

    /// The scheme chosen when writing.
    enum Scheme {
        case aes256
        case legacy3DES
    }

    // MARK: - Decryption

    /// Decrypts `ciphertext` encrypted under the scheme of `algorithm` (an AlgorithmIdentifier) with `passphrase`.
    ///
    /// - Parameter pkcs12Password: The PKCS#12 KDF password encoding to use for the `pbeWithSHAAnd…` schemes
    ///   (the one whose MAC check succeeded, for an empty passphrase); nil: `passphrase.bmp`.
    static func decrypt(
        _ ciphertext: [UInt8],
        algorithm: ASN1Node,
        passphrase: PKCS12Passphrase,
        pkcs12Password: [UInt8]? = nil
    ) throws(Failure) -> [UInt8] {
        let oid: ASN1ObjectIdentifier
        let parameters: ASN1Node?
        do {
            (oid, parameters) = try Self.algorithmIdentifier(algorithm)
        } catch {
            throw .corrupt("the encryption algorithm identifier is malformed", underlying: String(describing: error))
        }
        if oid == Self.pbes2OID {
            guard let parameters else { throw .corrupt("PBES2 without parameters") }
            return try Self.decryptPBES2(ciphertext, parameters: parameters, password: passphrase.utf8)
        }
        if let cipher = PKCS12Cipher(oid) {
            guard let parameters else { throw .corrupt("\(cipher.name) without parameters") }
            return try Self.decryptPKCS12PBE(
                ciphertext, cipher: cipher, parameters: parameters, password: pkcs12Password ?? passphrase.bmp)
        }
        throw .unsupported(
            "the encryption scheme \(oid) (supported: PBES2 with PBKDF2 and AES or 3DES; the PKCS#12 3DES, RC2 and RC4 schemes)"
        )
    }

    /// An iteration count of a PBKDF2 or PKCS#12 PBE parameter block, checked against the bound.
    private static func iterations(_ node: ASN1Node, what: String) throws(Failure) -> Int {
        let count: Int
        do {
            count = try Int(derEncoded: node)
        } catch {
            throw .corrupt("the \(what) iteration count is not an INTEGER")
        }
        guard count >= 1, count <= Self.maximumIterations else {
            throw .unsupported("\(what) iteration count \(count) (accepted: 1 to 10,000,000)")
        }
        return count
    }

    private static func decryptPBES2(
        _ ciphertext: [UInt8], parameters: ASN1Node, password: [UInt8]
    ) throws(Failure) -> [UInt8] {
        do {
            var fields = try Self.sequence(parameters, "PBES2 parameters")
            guard let kdfNode = fields.next(), let schemeNode = fields.next() else {
                throw Failure.corrupt("the PBES2 parameters are incomplete")
            }
            let (kdf, kdfParametersNode) = try Self.algorithmIdentifier(kdfNode)
            guard kdf == Self.pbkdf2OID, let kdfParametersNode else {
                throw Failure.unsupported("the PBES2 key derivation \(kdf) (only PBKDF2 is supported; scrypt is not)")
            }
            let (schemeOID, ivNode) = try Self.algorithmIdentifier(schemeNode)
            guard let cipher = PBES2Cipher(schemeOID) else {
                throw Failure.unsupported(
                    "the PBES2 cipher \(schemeOID) (supported: AES-128/192/256-CBC, DES-EDE3-CBC)")
            }
            guard let ivNode, ivNode.identifier == .octetString else {
                throw Failure.corrupt("the \(cipher.name) parameters are not an IV")
            }
            let iv = try ASN1OctetString(derEncoded: ivNode)
            guard iv.bytes.count == cipher.ivLength else {
                throw Failure.corrupt("the \(cipher.name) IV is \(iv.bytes.count) bytes, not \(cipher.ivLength)")
            }
            var kdfFields = try Self.sequence(kdfParametersNode, "PBKDF2 parameters")
            guard let saltNode = kdfFields.next(), let countNode = kdfFields.next() else {
                throw Failure.corrupt("the PBKDF2 parameters are incomplete")
            }
            guard saltNode.identifier == .octetString else {
                throw Failure.unsupported("a PBKDF2 salt that is not an OCTET STRING (otherSource)")
            }
            let salt = try ASN1OctetString(derEncoded: saltNode)
            let iterations = try Self.iterations(countNode, what: "PBKDF2")
            var digest: OpaquePointer? = EVP_sha1()
            var next = kdfFields.next()
            if let node = next, node.identifier == .integer {
                let length = try Int(derEncoded: node)
                guard length == cipher.keyLength else {
                    throw Failure.corrupt(
                        "the PBKDF2 key length \(length) does not fit \(cipher.name) (\(cipher.keyLength) bytes)")
                }
                next = kdfFields.next()
            }
            if let node = next {
                let (prf, _) = try Self.algorithmIdentifier(node)
                guard let prfDigest = Self.hmacDigest(prf) else {
                    throw Failure.unsupported(
                        "the PBKDF2 pseudo-random function \(prf) (supported: HMAC with SHA-1, SHA-224, SHA-256, SHA-384, SHA-512)"
                    )
                }
                digest = prfDigest
            }
            let key = try Self.pbkdf2(
                password: password, salt: Array(salt.bytes), iterations: iterations, digest: digest,
                length: cipher.keyLength)
            return try Self.crypt(ciphertext, cipher: cipher.evp(), key: key, iv: Array(iv.bytes), encrypt: false)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .corrupt("the PBES2 parameters are malformed", underlying: String(describing: error))
        }
    }

    private static func decryptPKCS12PBE(
        _ ciphertext: [UInt8], cipher: PKCS12Cipher, parameters: ASN1Node, password: [UInt8]
    ) throws(Failure) -> [UInt8] {
        let salt: [UInt8]
        let iterations: Int
        do {
            var fields = try Self.sequence(parameters, "\(cipher.name) parameters")
            guard let saltNode = fields.next(), let countNode = fields.next() else {
                throw Failure.corrupt("the \(cipher.name) parameters are incomplete")
            }
            salt = Array(try ASN1OctetString(derEncoded: saltNode).bytes)
            iterations = try Self.iterations(countNode, what: cipher.name)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .corrupt("the \(cipher.name) parameters are malformed", underlying: String(describing: error))
        }
        let key = PKCS12KeyDerivation.derive(
            Insecure.SHA1.self, password: password, salt: salt, id: 1, iterations: iterations, length: cipher.keyLength)
        let iv = PKCS12KeyDerivation.derive(
            Insecure.SHA1.self, password: password, salt: salt, id: 2, iterations: iterations, length: cipher.ivLength)
        return try Self.crypt(ciphertext, cipher: cipher.evp(), key: key, iv: iv, encrypt: false)
    }

    // MARK: - Encryption

    /// Encrypts `plaintext` under `scheme` with a fresh random salt (and IV): the DER AlgorithmIdentifier and the
    /// ciphertext.
    static func encrypt(
        _ plaintext: [UInt8],
        scheme: Scheme,
        passphrase: PKCS12Passphrase,
        iterations: Int
    ) throws -> (algorithm: [UInt8], ciphertext: [UInt8]) {
        var serializer = DER.Serializer()
        switch scheme {
        case .aes256:
            let salt = Self.randomBytes(16)
            let iv = Self.randomBytes(16)
            let key = try Self.pbkdf2(
                password: passphrase.utf8, salt: salt, iterations: iterations, digest: EVP_sha256(), length: 32)
            let ciphertext = try Self.crypt(plaintext, cipher: EVP_aes_256_cbc(), key: key, iv: iv, encrypt: true)
            try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                try serializer.serialize(Self.pbes2OID)
                try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                    try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                        try serializer.serialize(Self.pbkdf2OID)
                        try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                            try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(salt)))
                            try serializer.serialize(iterations)
                            try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                                try serializer.serialize(Self.hmacWithSHA256OID)
                                try serializer.serialize(ASN1Null())
                            }
                        }
                    }
                    try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                        try serializer.serialize(Self.aes256CBCOID)
                        try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(iv)))
                    }
                }
            }
            return (serializer.serializedBytes, ciphertext)
        case .legacy3DES:
            let salt = Self.randomBytes(8)
            let cipher = PKCS12Cipher.tripleDES3Key
            let password = passphrase.bmp
            let key = PKCS12KeyDerivation.derive(
                Insecure.SHA1.self, password: password, salt: salt, id: 1, iterations: iterations,
                length: cipher.keyLength)
            let iv = PKCS12KeyDerivation.derive(
                Insecure.SHA1.self, password: password, salt: salt, id: 2, iterations: iterations,
                length: cipher.ivLength)
            let ciphertext = try Self.crypt(plaintext, cipher: cipher.evp(), key: key, iv: iv, encrypt: true)
            try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                try serializer.serialize(Self.pbeWithSHAAnd3KeyTripleDESOID)
                try serializer.appendConstructedNode(identifier: .sequence) { serializer in
                    try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(salt)))
                    try serializer.serialize(iterations)
                }
            }
            return (serializer.serializedBytes, ciphertext)
        }
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    // MARK: - Primitives

    private static func pbkdf2(
        password: [UInt8], salt: [UInt8], iterations: Int, digest: OpaquePointer?, length: Int
    ) throws(Failure) -> [UInt8] {
        var key = [UInt8](repeating: 0, count: length)
        let ok = password.withUnsafeBytes { passwordBytes in
            salt.withUnsafeBufferPointer { saltBytes in
                key.withUnsafeMutableBufferPointer { keyBytes in
                    PKCS5_PBKDF2_HMAC(
                        passwordBytes.baseAddress?.assumingMemoryBound(to: CChar.self), passwordBytes.count,
                        saltBytes.baseAddress, saltBytes.count,
                        UInt32(iterations), digest, length, keyBytes.baseAddress
                    )
                }
            }
        }
        guard ok == 1 else {
            ERR_clear_error()
            throw .corrupt("PBKDF2 failed")
        }
        return key
    }

    /// One CBC (with PKCS#7 padding) or RC4 pass. A padding failure on decryption is `wrongPassphrase`.
    private static func crypt(
        _ input: [UInt8], cipher: OpaquePointer?, key: [UInt8], iv: [UInt8], encrypt: Bool
    ) throws(Failure) -> [UInt8] {
        guard let cipher, let context = EVP_CIPHER_CTX_new() else {
            throw .unsupported("the cipher is not available")
        }
        defer {
            EVP_CIPHER_CTX_free(context)
            ERR_clear_error()
        }
        let blockSize = Int(EVP_CIPHER_block_size(cipher))
        if !encrypt {
            guard !input.isEmpty else { throw .corrupt("the encrypted content is empty") }
            guard input.count % blockSize == 0 else {
                throw .corrupt(
                    "the encrypted content is \(input.count) bytes, not a whole number of \(blockSize)-byte cipher blocks"
                )
            }
        }
        let direction: Int32 = encrypt ? 1 : 0
        // Key length set before the key: RC4-40 uses the variable-length RC4 cipher with a 5-byte key.
        guard EVP_CipherInit_ex(context, cipher, nil, nil, nil, direction) == 1,
            EVP_CIPHER_CTX_set_key_length(context, UInt32(key.count)) == 1,
            Int(EVP_CIPHER_CTX_iv_length(context)) <= iv.count,
            EVP_CipherInit_ex(context, nil, nil, key, iv, direction) == 1
        else {
            throw .corrupt("internal: the cipher cannot be initialised with a \(key.count)-byte key")
        }
        var output = [UInt8](repeating: 0, count: input.count + blockSize)
        var written: Int32 = 0
        var finalWritten: Int32 = 0
        let ok = output.withUnsafeMutableBufferPointer { out -> Bool in
            input.withUnsafeBufferPointer { bytes -> Bool in
                guard let base = out.baseAddress else { return false }
                guard
                    input.isEmpty
                        || EVP_CipherUpdate(context, base, &written, bytes.baseAddress, Int32(bytes.count)) == 1
                else {
                    return false
                }
                return EVP_CipherFinal_ex(context, base + Int(written), &finalWritten) == 1
            }
        }
        guard ok else {
            if encrypt { throw .corrupt("internal: encryption failed") }
            throw .wrongPassphrase
        }
        return Array(output.prefix(Int(written + finalWritten)))
    }

    private static func hmacDigest(_ oid: ASN1ObjectIdentifier) -> OpaquePointer? {
        switch oid {
        case [1, 2, 840, 113549, 2, 7]: return EVP_sha1()
        case [1, 2, 840, 113549, 2, 8]: return EVP_sha224()
        case [1, 2, 840, 113549, 2, 9]: return EVP_sha256()
        case [1, 2, 840, 113549, 2, 10]: return EVP_sha384()
        case [1, 2, 840, 113549, 2, 11]: return EVP_sha512()
        default: return nil
        }
    }

    // MARK: - ASN.1

    /// An AlgorithmIdentifier's OID and its parameters (nil when absent).
    static func algorithmIdentifier(_ node: ASN1Node) throws -> (ASN1ObjectIdentifier, ASN1Node?) {
        var fields = try Self.sequence(node, "AlgorithmIdentifier")
        guard let oidNode = fields.next() else { throw Failure.corrupt("an AlgorithmIdentifier has no OID") }
        return (try ASN1ObjectIdentifier(derEncoded: oidNode), fields.next())
    }

    static func sequence(_ node: ASN1Node, _ what: String) throws(Failure) -> ASN1NodeCollection.Iterator {
        guard node.identifier == .sequence, case .constructed(let nodes) = node.content else {
            throw .corrupt("the \(what) is not a SEQUENCE")
        }
        return nodes.makeIterator()
    }
}

/// The PBES2 ciphers.
private enum PBES2Cipher {
    case aes128, aes192, aes256, tripleDES

    init?(_ oid: ASN1ObjectIdentifier) {
        switch oid {
        case [2, 16, 840, 1, 101, 3, 4, 1, 2]: self = .aes128
        case [2, 16, 840, 1, 101, 3, 4, 1, 22]: self = .aes192
        case [2, 16, 840, 1, 101, 3, 4, 1, 42]: self = .aes256
        case [1, 2, 840, 113549, 3, 7]: self = .tripleDES
        default: return nil
        }
    }

    var name: String {
        switch self {
        case .aes128: return "AES-128-CBC"
        case .aes192: return "AES-192-CBC"
        case .aes256: return "AES-256-CBC"
        case .tripleDES: return "DES-EDE3-CBC"
        }
    }

    var keyLength: Int {
        switch self {
        case .aes128: return 16
        case .aes192: return 24
        case .aes256: return 32
        case .tripleDES: return 24
        }
    }

    var ivLength: Int { self == .tripleDES ? 8 : 16 }

    func evp() -> OpaquePointer? {
        switch self {
        case .aes128: return EVP_aes_128_cbc()
        case .aes192: return EVP_aes_192_cbc()
        case .aes256: return EVP_aes_256_cbc()
        case .tripleDES: return EVP_des_ede3_cbc()
        }
    }
}

/// The PKCS#12 password-based schemes (RFC 7292 appendix C), keyed by the PKCS#12 KDF over SHA-1.
private enum PKCS12Cipher {
    case rc4128, rc440, tripleDES3Key, tripleDES2Key, rc2128, rc240

    init?(_ oid: ASN1ObjectIdentifier) {
        switch oid {
        case [1, 2, 840, 113549, 1, 12, 1, 1]: self = .rc4128
        case [1, 2, 840, 113549, 1, 12, 1, 2]: self = .rc440
        case [1, 2, 840, 113549, 1, 12, 1, 3]: self = .tripleDES3Key
        case [1, 2, 840, 113549, 1, 12, 1, 4]: self = .tripleDES2Key
        case [1, 2, 840, 113549, 1, 12, 1, 5]: self = .rc2128
        case [1, 2, 840, 113549, 1, 12, 1, 6]: self = .rc240
        default: return nil
        }
    }

    var name: String {
        switch self {
        case .rc4128: return "pbeWithSHAAnd128BitRC4"
        case .rc440: return "pbeWithSHAAnd40BitRC4"
        case .tripleDES3Key: return "pbeWithSHAAnd3-KeyTripleDES-CBC"
        case .tripleDES2Key: return "pbeWithSHAAnd2-KeyTripleDES-CBC"
        case .rc2128: return "pbeWithSHAAnd128BitRC2-CBC"
        case .rc240: return "pbeWithSHAAnd40BitRC2-CBC"
        }
    }

    var keyLength: Int {
        switch self {
        case .rc4128, .rc2128, .tripleDES2Key: return 16
        case .rc440, .rc240: return 5
        case .tripleDES3Key: return 24
        }
    }

    var ivLength: Int {
        switch self {
        case .rc4128, .rc440: return 0
        default: return 8
        }
    }

    func evp() -> OpaquePointer? {
        switch self {
        case .rc4128, .rc440: return EVP_rc4()
        case .tripleDES3Key: return EVP_des_ede3_cbc()
        case .tripleDES2Key: return EVP_des_ede_cbc()
        case .rc2128: return EVP_rc2_cbc()
        case .rc240: return EVP_rc2_40_cbc()
        }
    }
}
