import Crypto
import Dispatch
public import Foundation
import Pinning
import SwiftASN1
public import X509

/// The fuzzing PKI: a root, an intermediate and a leaf for `fuzz.example`, with FIXED keys, so that the seeds
/// written by one run and the anchor used by every later run agree (ECDSA signatures differ between runs, the
/// keys and names do not).
public struct FuzzPKI: Sendable {
    public static let host = "fuzz.example"
    /// 2026-01-01T00:00:00Z: inside every certificate's validity.
    public static let validationTime = Date(timeIntervalSince1970: 1_767_225_600)

    public let root: Certificate
    public let intermediate: Certificate
    public let leaf: Certificate
    public let leafKey: Certificate.PrivateKey

    /// Built once per process.
    public static let shared: FuzzPKI = {
        do {
            return try FuzzPKI()
        } catch {
            preconditionFailure("cannot build the fuzzing PKI: \(error)")
        }
    }()

    init() throws {
        let rootKey = try Self.key(1)
        let intermediateKey = try Self.key(2)
        let leafKey = try Self.key(3)
        let rootName = try DistinguishedName { CommonName("Fuzz Root CA") }
        let intermediateName = try DistinguishedName { CommonName("Fuzz Issuing CA") }
        let leafName = try DistinguishedName { CommonName(Self.host) }
        let notBefore = Date(timeIntervalSince1970: 1_577_836_800)  // 2020-01-01
        let notAfter = Date(timeIntervalSince1970: 2_208_988_800)  // 2040-01-01
        self.root = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(bytes: [1]),
            publicKey: rootKey.publicKey,
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: rootName,
            subject: rootName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                SubjectKeyIdentifier(hash: rootKey.publicKey)
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: rootKey
        )
        self.intermediate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(bytes: [2]),
            publicKey: intermediateKey.publicKey,
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: rootName,
            subject: intermediateName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                SubjectKeyIdentifier(hash: intermediateKey.publicKey)
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: rootKey.publicKey).keyIdentifier)
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                Critical(NameConstraints(permittedDNSDomains: ["example"], excludedDNSDomains: ["bad.example"]))
            },
            issuerPrivateKey: rootKey
        )
        self.leaf = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(bytes: [3]),
            publicKey: leafKey.publicKey,
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: intermediateName,
            subject: leafName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                SubjectKeyIdentifier(hash: leafKey.publicKey)
                AuthorityKeyIdentifier(
                    keyIdentifier: SubjectKeyIdentifier(hash: intermediateKey.publicKey).keyIdentifier
                )
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName(Self.host), .dnsName("*.fuzz.example")])
            },
            issuerPrivateKey: intermediateKey
        )
        self.leafKey = leafKey
    }

    /// A fixed P-256 key: the scalar is `seed` repeated (a valid scalar for small seeds).
    static func key(_ seed: UInt8) throws -> Certificate.PrivateKey {
        Certificate.PrivateKey(try P256.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: seed, count: 32)))
    }

    public static func der(_ certificate: Certificate) -> [UInt8] {
        var serializer = DER.Serializer()
        do {
            try serializer.serialize(certificate)
        } catch {
            preconditionFailure("cannot serialize a certificate: \(error)")
        }
        return serializer.serializedBytes
    }

    /// The leaf's private key as PEM, followed by a newline.
    public static var leafKeyPEM: [UInt8] {
        do {
            return Array((try FuzzPKI.shared.leafKey.serializeAsPEM().pemString + "\n").utf8)
        } catch {
            preconditionFailure("cannot serialize the leaf key: \(error)")
        }
    }

    public static func pem(_ certificates: [Certificate]) -> [UInt8] {
        var text = ""
        for certificate in certificates {
            let body = Data(Self.der(certificate)).base64EncodedString(options: [.lineLength64Characters])
            text += "-----BEGIN CERTIFICATE-----\n\(body)\n-----END CERTIFICATE-----\n"
        }
        return Array(text.utf8)
    }

    /// The certificates' DER in the evaluation target's record format: a 2-byte big-endian length, then DER.
    public static func records(_ certificates: [Certificate]) -> [UInt8] {
        var bytes: [UInt8] = []
        for certificate in certificates {
            let der = Self.der(certificate)
            bytes.append(UInt8(truncatingIfNeeded: der.count >> 8))
            bytes.append(UInt8(truncatingIfNeeded: der.count))
            bytes.append(contentsOf: der)
        }
        return bytes
    }

    /// Splits the evaluation target's input into records (a truncated last record is dropped).
    public static func splitRecords(_ bytes: UnsafeBufferPointer<UInt8>) -> [ArraySlice<UInt8>] {
        let all = Array(bytes)
        var records: [ArraySlice<UInt8>] = []
        var offset = 0
        while offset + 2 <= all.count {
            let length = Int(all[offset]) << 8 | Int(all[offset + 1])
            offset += 2
            guard offset + length <= all.count else { break }
            records.append(all[offset..<(offset + length)])
            offset += length
        }
        return records
    }
}

/// Runs async work from libFuzzer's synchronous callback, waiting for it to finish.
public func runBlocking(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task {
        await body()
        done.signal()
    }
    done.wait()
}

/// Seeds: written into the directory named by `PINNING_FUZZ_SEEDS` (when set) from `LLVMFuzzerInitialize`,
/// before libFuzzer reads its corpus directories. Nothing is checked in, so nothing expires.
public enum FuzzSeeds {
    public static func write(_ seeds: [String: [UInt8]]) {
        guard let directory = ProcessInfo.processInfo.environment["PINNING_FUZZ_SEEDS"] else { return }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for (name, bytes) in seeds {
                try Data(bytes).write(to: URL(fileURLWithPath: directory).appendingPathComponent("seed-\(name)"))
            }
        } catch {
            preconditionFailure("cannot write seeds to \(directory): \(error)")
        }
    }

    /// Extra seed files written by scripts/fuzz.sh (openssl PKCS#7 and PKCS#12 of this PKI) are in the corpus
    /// directory already; the PKI's own material is exported here so the script can build them.
    public static func exportPKI() {
        guard let directory = ProcessInfo.processInfo.environment["PINNING_FUZZ_PKI"] else { return }
        let pki = FuzzPKI.shared
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let url = URL(fileURLWithPath: directory)
            try Data(FuzzPKI.pem([pki.leaf])).write(to: url.appendingPathComponent("leaf.pem"))
            try Data(FuzzPKI.pem([pki.intermediate, pki.root])).write(to: url.appendingPathComponent("chain.pem"))
            try Data(FuzzPKI.leafKeyPEM).write(to: url.appendingPathComponent("leaf.key"))
        } catch {
            preconditionFailure("cannot export the fuzzing PKI to \(directory): \(error)")
        }
    }
}

/// libFuzzer's driver, for an entry point of our own: on Linux SwiftPM links every executable with
/// `--defsym main=<Module>_main` (so that tests can link executables), which replaces libFuzzer's `main`.
@_silgen_name("LLVMFuzzerRunDriver")
func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// Runs libFuzzer with the process arguments and `callback` as the target.
public func runFuzzer(
    _ argc: CInt,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt {
    var count = argc
    var vector = argv
    return llvmFuzzerRunDriver(&count, &vector, callback)
}
