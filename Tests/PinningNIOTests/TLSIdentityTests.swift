import Foundation
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// PKCS#12 files made by `openssl pkcs12 -export` at test time from a minted PKI: root → intermediate → client.
struct PKCS12Files {
    let directory: TemporaryDirectory
    let chain: TestChain
    let passphrase = "correct horse"

    init() throws {
        let directory = try TemporaryDirectory(prefix: "pinning-p12")
        self.directory = directory
        // Until the fixture is whole no test holds it: a step that throws removes the directory here.
        var ready = false
        defer { if !ready { directory.remove() } }
        self.chain = try TestChain(host: "client-7", ipAddresses: [], leafUsage: .clientAuth, rootName: "Device Root CA")
        try self.directory.write("client.pem", self.chain.leaf.certificatePEM)
        try self.directory.write("client.key", self.chain.leaf.privateKeyPEM)
        try self.directory.write("cas.pem", TestPKI.pemBundle([self.chain.intermediate.certificate, self.chain.root.certificate]))
        let other = try TestPKI.selfSigned("unrelated")
        try self.directory.write("other.key", other.privateKeyPEM)
        ready = true
    }

    var path: String { self.directory.path }

    /// `openssl pkcs12 -export` with `extra` arguments, writing `name`.
    @discardableResult
    func export(_ name: String, _ extra: [String], passphrase: String? = nil) async throws -> String {
        let out = self.directory.path(name)
        let result = try await openssl(["pkcs12", "-export", "-out", out, "-passout", "pass:\(passphrase ?? self.passphrase)"] + extra)
        #expect(result.status == 0, "openssl pkcs12 -export failed: \(result.output)")
        return out
    }

    func full(_ name: String, legacy: Bool = false) async throws -> String {
        try await self.export(
            name,
            [
                "-in", self.directory.path("client.pem"), "-inkey", self.directory.path("client.key"),
                "-certfile", self.directory.path("cas.pem"),
            ] + (legacy ? ["-legacy"] : [])
        )
    }
}

@Suite("TLSIdentity: PKCS#12 and PEM identities; no input crashes")
struct TLSIdentityTests {
    @Test("modern PKCS#12 (AES-256/PBKDF2): leaf, chain in issuer order, chain root", .enabled(if: opensslAvailable))
    func modernPKCS12() async throws {
        let files = try PKCS12Files()
        defer { files.directory.remove() }
        let identity = try TLSIdentity.pkcs12(file: try await files.full("modern.p12"), passphrase: files.passphrase)
        #expect(identity.leaf == files.chain.leaf.certificate)
        #expect(identity.certificateChain == files.chain.all)
        #expect(identity.chainRoot == files.chain.root.certificate)
    }

    @Test("legacy PKCS#12 (3DES / RC2-40)", .enabled(if: opensslAvailable))
    func legacyPKCS12() async throws {
        let files = try PKCS12Files()
        defer { files.directory.remove() }
        let path = try await files.full("legacy.p12", legacy: true)
        let info = try await openssl(["pkcs12", "-in", path, "-info", "-noout", "-passin", "pass:\(files.passphrase)", "-legacy"])
        #expect(info.output.contains("RC2") || info.output.contains("3DES") || info.output.contains("TripleDES"), "\(info.output)")
        let identity = try TLSIdentity.pkcs12(file: path, passphrase: files.passphrase)
        #expect(identity.leaf == files.chain.leaf.certificate)
        #expect(identity.chainRoot == files.chain.root.certificate)
    }

    @Test("wrong passphrase: typed error naming the file", .enabled(if: opensslAvailable))
    func wrongPassphrase() async throws {
        let files = try PKCS12Files()
        defer { files.directory.remove() }
        let path = try await files.full("modern.p12")
        let error = #expect(throws: TLSIdentityError.self) {
            try TLSIdentity.pkcs12(file: path, passphrase: "wrong")
        }
        #expect(error?.code == .wrongPassphrase)
        #expect(error?.description == "\(path): wrong passphrase: the passphrase does not unlock this PKCS#12 file (its integrity check fails)")
        let legacy = try await files.full("legacy.p12", legacy: true)
        #expect(throws: TLSIdentityError.self) { try TLSIdentity.pkcs12(file: legacy, passphrase: "") }
    }

    @Test("no private key (-nokeys): typed error, no crash", .enabled(if: opensslAvailable))
    func noKey() async throws {
        let files = try PKCS12Files()
        defer { files.directory.remove() }
        let path = try await files.export("nokey.p12", ["-nokeys", "-in", files.directory.path("client.pem")])
        let error = #expect(throws: TLSIdentityError.self) {
            try TLSIdentity.pkcs12(file: path, passphrase: files.passphrase)
        }
        #expect(error?.code == .noPrivateKey)
        #expect(error?.description.hasPrefix("\(path): no private key:") == true)
    }

    @Test("a key no certificate matches: typed error, no crash", .enabled(if: opensslAvailable))
    func mismatchedKey() async throws {
        let files = try PKCS12Files()
        defer { files.directory.remove() }
        let path = try await files.export(
            "mismatch.p12",
            ["-nocerts", "-inkey", files.directory.path("other.key"), "-certfile", files.directory.path("client.pem")]
        )
        let error = #expect(throws: TLSIdentityError.self) {
            try TLSIdentity.pkcs12(file: path, passphrase: files.passphrase)
        }
        #expect(error?.code == .noCertificateMatchingKey)
    }

    @Test("a key and no certificate at all", .enabled(if: opensslAvailable))
    func keyOnly() async throws {
        let files = try PKCS12Files()
        defer { files.directory.remove() }
        let path = try await files.export("keyonly.p12", ["-nocerts", "-inkey", files.directory.path("client.key")])
        let error = #expect(throws: TLSIdentityError.self) {
            try TLSIdentity.pkcs12(file: path, passphrase: files.passphrase)
        }
        #expect(error?.code == .noCertificate)
    }

    @Test("truncated and damaged files: corrupt, never a crash", .enabled(if: opensslAvailable))
    func truncated() async throws {
        let files = try PKCS12Files()
        defer { files.directory.remove() }
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: try await files.full("modern.p12"))))
        for length in [0, 1, 2, 10, bytes.count / 2, bytes.count - 1] {
            let error = #expect(throws: TLSIdentityError.self) {
                try TLSIdentity.pkcs12(bytes: Array(bytes.prefix(length)), passphrase: files.passphrase, origin: "cut-\(length)")
            }
            #expect(error?.code == .corruptFile, "length \(length): \(String(describing: error))")
        }
        // Every single-byte flip in the first 200 bytes: a typed error or (if the flip is harmless) an identity.
        for index in 0..<min(200, bytes.count) {
            var damaged = bytes
            damaged[index] ^= 0x5A
            do {
                _ = try TLSIdentity.pkcs12(bytes: damaged, passphrase: files.passphrase, origin: "flip-\(index)")
            } catch {
                #expect(!error.description.isEmpty)
            }
        }
        let text = try files.directory.write("not.p12", "-----BEGIN CERTIFICATE-----\nnope\n")
        #expect(throws: TLSIdentityError.self) { try TLSIdentity.pkcs12(file: text, passphrase: "") }
        #expect(throws: TLSIdentityError.self) { try TLSIdentity.pkcs12(file: files.directory.path("missing.p12"), passphrase: "") }
    }

    @Test("PEM chain + key; the key must belong to the first certificate")
    func pemIdentity() throws {
        let files = try PKCS12Files()
        defer { files.directory.remove() }
        let chainPath = try files.directory.write("chain.pem", TestPKI.pemBundle(files.chain.all))
        let identity = try TLSIdentity.pem(certificateChainFile: chainPath, privateKeyFile: files.directory.path("client.key"))
        #expect(identity.leaf == files.chain.leaf.certificate)
        #expect(identity.chainRoot == files.chain.root.certificate)

        let error = #expect(throws: TLSIdentityError.self) {
            try TLSIdentity.pem(certificateChainFile: chainPath, privateKeyFile: files.directory.path("other.key"))
        }
        #expect(error?.code == .noCertificateMatchingKey)
        let noKey = #expect(throws: TLSIdentityError.self) {
            try TLSIdentity.pem(certificateChainFile: chainPath, privateKeyFile: chainPath)
        }
        #expect(noKey?.code == .noPrivateKey)
    }

    @Test("PEM identities of every key type load; another key of the same type is refused", arguments: TestKeyType.allCases)
    func everyKeyType(_ keyType: TestKeyType) throws {
        let chain = try TestChain(key: keyType)
        let other = try TestChain(key: keyType)
        let pem = Array(TestPKI.pemBundle([chain.leaf.certificate, chain.intermediate.certificate]).utf8)
        let identity = try TLSIdentity.pem(
            certificateChain: pem,
            privateKey: Array(chain.leaf.privateKeyPEM.utf8),
            certificateOrigin: "chain.pem",
            keyOrigin: "leaf.key"
        )
        #expect(identity.leaf == chain.leaf.certificate)
        let error = #expect(throws: TLSIdentityError.self) {
            try TLSIdentity.pem(
                certificateChain: pem,
                privateKey: Array(other.leaf.privateKeyPEM.utf8),
                certificateOrigin: "chain.pem",
                keyOrigin: "other.key"
            )
        }
        #expect(error?.code == .noCertificateMatchingKey)
    }

    @Test("encrypted PEM key: right and wrong passphrase", .enabled(if: opensslAvailable))
    func encryptedPEMKey() async throws {
        let files = try PKCS12Files()
        defer { files.directory.remove() }
        let encrypted = files.directory.path("client.enc.key")
        let result = try await openssl(["pkcs8", "-topk8", "-in", files.directory.path("client.key"), "-out", encrypted, "-passout", "pass:pem-secret"])
        #expect(result.status == 0, "\(result.output)")
        let chainPath = try files.directory.write("chain.pem", TestPKI.pemBundle(files.chain.presented))
        let identity = try TLSIdentity.pem(certificateChainFile: chainPath, privateKeyFile: encrypted, passphrase: "pem-secret")
        #expect(identity.leaf == files.chain.leaf.certificate)
        let error = #expect(throws: TLSIdentityError.self) {
            try TLSIdentity.pem(certificateChainFile: chainPath, privateKeyFile: encrypted, passphrase: "nope")
        }
        #expect(error?.code == .wrongPassphrase)
    }
}
