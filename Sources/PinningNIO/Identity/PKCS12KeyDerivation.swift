import Crypto

/// The PKCS#12 key derivation (RFC 7292 appendix B.2) and MAC: the integrity MAC of files we read (a wrong
/// passphrase) and write, and the key and IV of the `pbeWithSHAAnd…` schemes. The password is a
/// ``PKCS12Passphrase`` encoding.
enum PKCS12KeyDerivation {
    /// The MAC key purpose byte (ID 3).
    static let macID: UInt8 = 3

    /// HMAC of `data` under the PKCS#12-derived MAC key.
    static func mac(
        _ digest: PKCS12Container.Digest,
        password: [UInt8],
        salt: [UInt8],
        iterations: Int,
        data: [UInt8]
    ) -> [UInt8] {
        switch digest {
        case .sha1:
            return Self.mac(Insecure.SHA1.self, password: password, salt: salt, iterations: iterations, data: data)
        case .sha256: return Self.mac(SHA256.self, password: password, salt: salt, iterations: iterations, data: data)
        case .sha384: return Self.mac(SHA384.self, password: password, salt: salt, iterations: iterations, data: data)
        case .sha512: return Self.mac(SHA512.self, password: password, salt: salt, iterations: iterations, data: data)
        }
    }

    /// Whether `expected` is the MAC of `data`, compared in constant time.
    static func verify(_ mac: PKCS12Container.MAC, password: [UInt8], data: [UInt8]) -> Bool {
        let computed = Self.mac(mac.digest, password: password, salt: mac.salt, iterations: mac.iterations, data: data)
        guard computed.count == mac.expected.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(computed, mac.expected) { difference |= a ^ b }
        return difference == 0
    }

    private static func mac<H: HashFunction>(
        _ hash: H.Type,
        password: [UInt8],
        salt: [UInt8],
        iterations: Int,
        data: [UInt8]
    ) -> [UInt8] {
        let key = Self.derive(
            hash, password: password, salt: salt, id: Self.macID, iterations: iterations, length: H.Digest.byteCount)
        let code = HMAC<H>.authenticationCode(for: data, using: SymmetricKey(data: key))
        return Array(code)
    }

    /// RFC 7292 B.2: `length` bytes of key material for purpose `id`.
    static func derive<H: HashFunction>(
        _ hash: H.Type,
        password: [UInt8],
        salt: [UInt8],
        id: UInt8,
        iterations: Int,
        length: Int
    ) -> [UInt8] {
        let u = H.Digest.byteCount
        let v = H.blockByteCount
        let diversifier = [UInt8](repeating: id, count: v)
        func fill(_ bytes: [UInt8]) -> [UInt8] {
            guard !bytes.isEmpty else { return [] }
            let count = v * ((bytes.count + v - 1) / v)
            return (0..<count).map { bytes[$0 % bytes.count] }
        }
        var input = fill(salt) + fill(password)
        var output: [UInt8] = []
        while output.count < length {
            var block = Array(H.hash(data: diversifier + input))
            var round = 1
            while round < iterations {
                block = Array(H.hash(data: block))
                round += 1
            }
            output += block
            guard output.count < length else { break }
            let b = (0..<v).map { block[$0 % u] }
            var offset = 0
            while offset < input.count {
                // input[offset ..< offset+v] = (input block + b + 1) mod 2^(8v)
                var carry: UInt16 = 1
                var k = v - 1
                while k >= 0 {
                    let sum = UInt16(input[offset + k]) + UInt16(b[k]) + carry
                    input[offset + k] = UInt8(sum & 0xFF)
                    carry = sum >> 8
                    k -= 1
                }
                offset += v
            }
        }
        return Array(output.prefix(length))
    }
}
