import Foundation
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// What no ``TLSIdentityError`` description may contain: the words of a library below (swift-asn1, NIOSSL,
/// BoringSSL), a Swift type name or a source location. Such text belongs in `underlyingError` only.
let identityInternalsMarkers = [
    "Error", "ASN1", "BoringSSL", "NIOSSL", "CNIO", ".swift:", "TLSIdentity", "PKCS12Container", "PasswordBased", "OPENSSL_", "invalidPEMDocument", "failedToLoad",
]

/// `error`'s description is `ORIGIN: CODE: WORDS`, in words only; returns it for further checks.
@discardableResult
func expectWordsOnly(
    _ error: TLSIdentityError?, origin: String, code: TLSIdentityError.Code?, _ label: String,
    sourceLocation: SourceLocation = #_sourceLocation
) -> String {
    guard let error else {
        Issue.record("\(label): no TLSIdentityError", sourceLocation: sourceLocation)
        return ""
    }
    let text = error.description
    if let code {
        #expect(error.code == code, "\(label): \(text)", sourceLocation: sourceLocation)
    }
    #expect(text.hasPrefix("\(origin): \(error.code): "), "\(label): \(text)", sourceLocation: sourceLocation)
    #expect(!error.problem.isEmpty, "\(label)", sourceLocation: sourceLocation)
    for marker in identityInternalsMarkers {
        #expect(!text.contains(marker), "\(label): internals (\(marker)) in \(text)", sourceLocation: sourceLocation)
    }
    return text
}

/// Issue 28 item 5: every way an identity fails to load is told in words built from the kind of failure
/// (``TLSIdentityError/Reason``); what a library reported is kept apart in `underlyingError`.
@Suite("TLSIdentityError: words only; the library's own error apart")
struct TLSIdentityErrorWordsTests {
    struct Files {
        let directory: TemporaryDirectory
        let chain: TestChain
        let chainPEM: String
        let key: String
        let otherKey: String

        init() throws {
            let directory = try TemporaryDirectory(prefix: "pinning-identity-words")
            self.directory = directory
            // Until the fixture is whole no test holds it: a step that throws removes the directory here.
            var ready = false
            defer { if !ready { directory.remove() } }
            self.chain = try TestChain(host: "client-7", ipAddresses: [], leafUsage: .clientAuth)
            self.chainPEM = try self.directory.write("chain.pem", TestPKI.pemBundle(self.chain.presented))
            self.key = try self.directory.write("client.key", self.chain.leaf.privateKeyPEM)
            self.otherKey = try self.directory.write("other.key", try TestPKI.selfSigned("unrelated").privateKeyPEM)
            ready = true
        }

        func write(_ name: String, _ bytes: [UInt8]) throws -> String {
            let path = self.directory.path(name)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }

        func pem(_ chain: String, _ key: String, passphrase: String? = nil) -> TLSIdentityError? {
            #expect(throws: TLSIdentityError.self) {
                try TLSIdentity.pem(certificateChainFile: chain, privateKeyFile: key, passphrase: passphrase)
            }
        }

        func pkcs12(_ path: String, passphrase: String) -> TLSIdentityError? {
            #expect(throws: TLSIdentityError.self) { try TLSIdentity.pkcs12(file: path, passphrase: passphrase) }
        }
    }

    @Test("PKCS#12: wrong passphrase, none given, not PKCS#12 (PEM, a DER certificate, text), truncated, missing")
    func pkcs12Kinds() throws {
        let files = try Files()
        defer { files.directory.remove() }
        let p12 = try files.write("client.p12", try files.chain.leaf.pkcs12(passphrase: "s3cret"))

        let wrong = expectWordsOnly(files.pkcs12(p12, passphrase: "wrong"), origin: p12, code: .wrongPassphrase, "wrong")
        #expect(wrong.hasSuffix("the passphrase does not unlock this PKCS#12 file (its integrity check fails)"))
        let none = expectWordsOnly(files.pkcs12(p12, passphrase: ""), origin: p12, code: .wrongPassphrase, "none")
        #expect(none.hasSuffix("the file is protected by a passphrase and none was given"))

        let notPKCS12 = "not a PKCS#12 (PFX) file: truncated, damaged, or another kind of file (PEM, text)"
        for (name, bytes) in [
            ("pem.p12", Array(files.chain.leaf.certificatePEM.utf8)),
            ("der-certificate.p12", files.chain.leaf.der),
            ("text.p12", Array("garbage\n".utf8)),
        ] {
            let path = try files.write(name, bytes)
            let error = files.pkcs12(path, passphrase: "s3cret")
            #expect(expectWordsOnly(error, origin: path, code: .corruptFile, name).hasSuffix(notPKCS12))
            // swift-asn1 said why; that is kept, apart from the words.
            #expect(error?.underlyingError?.isEmpty == false, "\(name)")
        }

        let bytes = try files.chain.leaf.pkcs12(passphrase: "s3cret")
        for length in [1, 10, bytes.count / 2, bytes.count - 1] {
            let path = try files.write("cut-\(length).p12", Array(bytes.prefix(length)))
            expectWordsOnly(files.pkcs12(path, passphrase: "s3cret"), origin: path, code: .corruptFile, "cut \(length)")
        }

        let missing = files.directory.path("missing.p12")
        expectWordsOnly(files.pkcs12(missing, passphrase: ""), origin: missing, code: .unreadableFile, "missing")
    }

    @Test("PEM: truncated certificate or key, a DER certificate as the key, text, mismatch, no key block, missing")
    func pemKinds() throws {
        let files = try Files()
        defer { files.directory.remove() }
        let certificatePEM = files.chain.leaf.certificatePEM
        let truncatedCertificate = try files.write(
            "truncated-chain.pem", Array(certificatePEM.prefix(certificatePEM.count / 2).utf8))
        let cut = files.pem(truncatedCertificate, files.key)
        expectWordsOnly(cut, origin: truncatedCertificate, code: .corruptFile, "truncated certificate")
        #expect(cut?.underlyingError?.isEmpty == false)

        let keyPEM = files.chain.leaf.privateKeyPEM
        let truncatedKey = try files.write("truncated.key", Array(keyPEM.prefix(keyPEM.count / 2).utf8))
        let cutKey = files.pem(files.chainPEM, truncatedKey)
        expectWordsOnly(cutKey, origin: truncatedKey, code: .corruptFile, "truncated key")
        #expect(cutKey?.underlyingError?.isEmpty == false)

        let derAsKey = try files.write("certificate.der", files.chain.leaf.der)
        let der = expectWordsOnly(files.pem(files.chainPEM, derAsKey), origin: derAsKey, code: .noPrivateKey, "DER as key")
        #expect(der.hasSuffix("a DER certificate, not a private key"))

        let text = try files.write("text.pem", Array("hello\n".utf8))
        // Text is "no certificate" or "corrupt" by how the loader reads it; either way in words.
        let textError = files.pem(text, files.key)
        expectWordsOnly(textError, origin: text, code: nil, "text as certificates")
        #expect(textError?.code == .corruptFile || textError?.code == .noCertificate)

        let mismatch = expectWordsOnly(
            files.pem(files.chainPEM, files.otherKey), origin: files.otherKey, code: .noCertificateMatchingKey, "mismatch")
        #expect(mismatch.contains("the key does not belong to the first certificate of \(files.chainPEM)"))

        let noKeyBlock = expectWordsOnly(
            files.pem(files.chainPEM, files.chainPEM), origin: files.chainPEM, code: .noPrivateKey, "no key block")
        #expect(noKeyBlock.hasSuffix("no PRIVATE KEY block in the PEM input"))

        let missing = files.directory.path("missing.pem")
        expectWordsOnly(files.pem(missing, files.key), origin: missing, code: .unreadableFile, "missing")
        expectWordsOnly(
            files.pem(files.directory.path, files.key), origin: files.directory.path, code: .unreadableFile, "directory")
    }

    @Test(
        "encrypted PEM keys made by OpenSSL (PKCS#8 and traditional): wrong passphrase, none given",
        .enabled(if: opensslAvailable))
    func encryptedPEMKinds() async throws {
        let files = try Files()
        defer { files.directory.remove() }
        let pkcs8 = files.directory.path("pkcs8.key")
        let traditional = files.directory.path("traditional.key")
        let made = [
            try await openssl(["pkcs8", "-topk8", "-in", files.key, "-out", pkcs8, "-passout", "pass:pem-secret"]),
            try await openssl(["pkey", "-in", files.key, "-traditional", "-aes256", "-out", traditional, "-passout", "pass:pem-secret"]),
        ]
        for result in made { #expect(result.status == 0, "\(result.output)") }
        #expect(try String(contentsOfFile: traditional, encoding: .utf8).contains("Proc-Type: 4,ENCRYPTED"))
        for key in [pkcs8, traditional] {
            let wrong = expectWordsOnly(files.pem(files.chainPEM, key, passphrase: "wrong"), origin: key, code: .wrongPassphrase, key)
            #expect(wrong.hasSuffix("the passphrase does not decrypt the private key"), "\(wrong)")
            let none = expectWordsOnly(files.pem(files.chainPEM, key), origin: key, code: .wrongPassphrase, key)
            #expect(none.hasSuffix("the private key is encrypted and no passphrase was given"))
            _ = try TLSIdentity.pem(certificateChainFile: files.chainPEM, privateKeyFile: key, passphrase: "pem-secret")
        }
    }

    @Test("a mutual-TLS server's client CAs: none given")
    func noClientCA() throws {
        let files = try Files()
        defer { files.directory.remove() }
        let identity = try TLSIdentity.pem(certificateChainFile: files.chainPEM, privateKeyFile: files.key)
        let error = #expect(throws: TLSIdentityError.self) {
            _ = try TLSConfiguration.makeMutualTLSServerConfiguration(identity: identity, clientCertificateAuthorities: [])
        }
        expectWordsOnly(error, origin: "clientCertificateAuthorities", code: .noCertificate, "no client CA")
    }

    @Test("the caller's own errors keep their words; underlyingError is nil")
    func publicInitialiser() {
        let error = TLSIdentityError(code: .corruptFile, origin: "in", problem: "damaged")
        #expect(error.description == "in: corrupt file: damaged")
        #expect(error.underlyingError == nil)
    }
}
