import Crypto
import Foundation
import Pinning
import PinningTestSupport
import SwiftASN1
import Testing
import X509

/// Reading CRLs (issue 14): ours (PinningPKI's `TestCRL`) and OpenSSL's (`openssl ca -gencrl`), their facts, their
/// signatures, the RFC 5280 §5 rules that make a well-formed CRL unusable, and bad input that must never crash.
@Suite("Reading certificate revocation lists")
struct CRLReadingTests {
    @Test("a CRL made by PinningPKI: issuer, dates, number, entries with reasons, found by serial; signed by its CA only")
    func ours() throws {
        let root = try TestPKI.root("CRL Root")
        let other = try TestPKI.root("CRL Root")  // same name, other key
        let revoked = try TestPKI.leaf("revoked.test", issuer: root, dnsNames: ["revoked.test"])
        let kept = try TestPKI.leaf("kept.test", issuer: root, dnsNames: ["kept.test"])
        let revocationDate = Date(timeIntervalSince1970: 1_780_000_000)
        let thisUpdate = Date(timeIntervalSince1970: 1_780_000_100)
        let crl = try TestCRL(
            issuer: root, entries: [.init(serialNumber: revoked.certificate.serialNumber, revocationDate: revocationDate, reason: .keyCompromise)],
            number: 300, thisUpdate: thisUpdate, nextUpdate: thisUpdate.addingTimeInterval(86400))
        for list in [try CertificateRevocationList.read(Array(crl.pem.utf8)), try CertificateRevocationList.read(crl.der)] {
            let read = try #require(list.first)
            #expect(list.count == 1)
            #expect(read.version == 2)
            #expect(read.issuer == root.certificate.subject)
            #expect(read.thisUpdate == thisUpdate && read.nextUpdate == thisUpdate.addingTimeInterval(86400))
            #expect(read.crlNumber == [0x01, 0x2C])
            #expect(read.authorityKeyIdentifier == Array(root.subjectKeyIdentifier))
            #expect(read.unusable == nil)
            let entry = try #require(read.entry(for: revoked.certificate))
            #expect(entry.reason == .keyCompromise && entry.revocationDate == revocationDate)
            #expect(read.entry(for: kept.certificate) == nil)
            try read.verifySignature(issuer: root.certificate)
            #expect(throws: CRLError(.badSignature, "the signature does not verify with the key of \(other.certificate.subject)")) {
                try read.verifySignature(issuer: other.certificate)
            }
            #expect(throws: CRLError.self) { try read.verifySignature(issuer: revoked.certificate) }
        }
        // One flipped byte inside the signed part: the signature no longer verifies.
        var tampered = crl.der
        let entryOffset = try #require(tampered.indices.dropFirst(40).first { tampered[$0] == 0x2C })
        tampered[entryOffset] = 0x2D
        let read = try CertificateRevocationList(derEncoded: tampered)
        #expect(throws: CRLError.self) { try read.verifySignature(issuer: root.certificate) }
    }

    @Test("every key type the PKI mints signs CRLs that verify: P-256, P-384, RSA, Ed25519", arguments: [TestKeyType.p256, .p384, .rsa2048, .ed25519])
    func keyTypes(_ key: TestKeyType) throws {
        let root = try TestPKI.root("CRL Root \(key)", key: key)
        let crl = try TestCRL(issuer: root, entries: [], number: 1, thisUpdate: Date(), nextUpdate: Date().addingTimeInterval(60))
        let read = try CertificateRevocationList(derEncoded: crl.der)
        try read.verifySignature(issuer: root.certificate)
        #expect(read.entries.isEmpty && read.unusable == nil)
    }

    @Test(
        "serial numbers whose first byte has its top bit set (DER adds a 0x00) are found, and openssl agrees they are revoked",
        .enabled(if: TestTools.opensslAvailable))
    func highBitSerials() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-crl-serial")
        defer { directory.remove() }
        let root = try TestPKI.root("Serial Root")
        let key = P256.Signing.PrivateKey()
        var revoked: [Certificate] = []
        for serial: [UInt8] in [[0x9A, 0x01, 0x02], [0xFF], [0x80], [0x7F, 0xFF]] {
            let certificate = try Certificate(
                version: .v3, serialNumber: Certificate.SerialNumber(bytes: serial), publicKey: .init(key.publicKey),
                notValidBefore: Date().addingTimeInterval(-60), notValidAfter: Date().addingTimeInterval(3600), issuer: root.certificate.subject,
                subject: try DistinguishedName { CommonName("serial \(serial)") }, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: Certificate.Extensions(), issuerPrivateKey: root.privateKey)
            revoked.append(certificate)
        }
        let crl = try TestCRL(
            issuer: root, entries: revoked.map { .init(serialNumber: $0.serialNumber, revocationDate: Date(), reason: nil) }, number: 1,
            thisUpdate: Date().addingTimeInterval(-60), nextUpdate: Date().addingTimeInterval(3600))
        let read = try CertificateRevocationList(derEncoded: crl.der)
        for certificate in revoked {
            #expect(read.entry(for: certificate) != nil, "\(certificate.serialNumber)")
        }
        let crlPath = try directory.write("crl.pem", crl.pem)
        let rootPath = try directory.write("root.pem", root.certificatePEM)
        for (index, certificate) in revoked.enumerated() {
            let path = try directory.write("leaf-\(index).pem", try certificate.serializeAsPEM().pemString)
            let verdict = try await TestTools.openssl(["verify", "-crl_check", "-CAfile", rootPath, "-CRLfile", crlPath, path], in: directory)
            #expect(verdict.output.contains("certificate revoked"), "\(certificate.serialNumber): \(verdict)")
        }
    }

    @Test(
        "bad input is a typed error, never a crash",
        arguments: [
            ("empty", [UInt8]()), ("text", Array("hello".utf8)), ("certificate only", Array("-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n".utf8)),
            ("truncated", [0x30, 0x82, 0x01, 0x00, 0x30]), ("two parts", [0x30, 0x04, 0x30, 0x00, 0x30, 0x00]),
        ])
    func badInput(_ name: String, _ bytes: [UInt8]) {
        #expect(throws: CRLError.self, "\(name)") { try CertificateRevocationList.read(bytes) }
    }

    @Test("2,000 seeded mutations of a real CRL either read or throw CRLError")
    func mutations() throws {
        let root = try TestPKI.root("Mutation Root")
        let leaf = try TestPKI.leaf("m.test", issuer: root, dnsNames: ["m.test"])
        let crl = try TestCRL(
            issuer: root, entries: [.init(serialNumber: leaf.certificate.serialNumber, revocationDate: Date(), reason: .superseded)], number: 9,
            thisUpdate: Date(), nextUpdate: Date().addingTimeInterval(3600))
        var generator = SplitMix64(seed: 0x5EED_C2_1)
        var read = 0
        for _ in 0..<2000 {
            var bytes = crl.der
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[index] = UInt8.random(in: 0...255, using: &generator)
                case 1: bytes.remove(at: index)
                default: bytes.insert(UInt8.random(in: 0...255, using: &generator), at: index)
                }
            }
            do {
                let list = try CertificateRevocationList(derEncoded: bytes)
                read += 1
                // A mutation that still reads must not verify unless the signed bytes are intact.
                if (try? list.verifySignature(issuer: root.certificate)) != nil {
                    #expect(list.tbsBytes == (try CertificateRevocationList(derEncoded: crl.der)).tbsBytes)
                }
            } catch {
                // Typed by the signature: only CRLError can arrive here.
            }
        }
        #expect(read < 2000)
    }
}

/// CRLs made by `openssl ca -gencrl` in a throwaway CA directory.
@Suite("Reading CRLs made by OpenSSL", .serialized, .enabled(if: TestTools.opensslAvailable))
struct OpenSSLCRLReadingTests {
    /// A minimal `openssl ca` directory: `ca.pem`/`ca.key`, one issued leaf, an index and optional CRL number.
    struct OpenSSLCA {
        let directory: TemporaryDirectory
        let ca: TestIdentity
        let leaf: TestIdentity

        init(crlNumber: Bool, crlExtensions: String = "") throws {
            let directory = try TemporaryDirectory(prefix: "pinning-openssl-crl")
            self.directory = directory
            // Until the fixture is whole no test holds it: a step that throws removes the directory here.
            var ready = false
            defer { if !ready { directory.remove() } }
            self.ca = try TestPKI.root("OpenSSL CRL CA")
            self.leaf = try TestPKI.leaf("device-ü.test", issuer: self.ca, dnsNames: ["device.test"])
            try self.directory.write("ca.pem", self.ca.certificatePEM)
            try self.directory.write("ca.key", self.ca.privateKeyPEM)
            try self.directory.write("leaf.pem", self.leaf.certificatePEM)
            try self.directory.write("index.txt", "")
            if crlNumber { try self.directory.write("crlnumber", "1000\n") }
            try self.directory.write(
                "ca.cnf",
                """
                [ ca ]
                default_ca = test_ca
                [ test_ca ]
                dir = \(self.directory.path)
                database = $dir/index.txt
                certificate = $dir/ca.pem
                private_key = $dir/ca.key
                \(crlNumber ? "crlnumber = $dir/crlnumber" : "")
                default_md = sha256
                default_crl_days = 7
                \(crlExtensions.isEmpty ? "" : "crl_extensions = crl_ext")
                [ crl_ext ]
                \(crlExtensions)

                """)
            ready = true
        }

        func openssl(_ arguments: [String]) async throws -> TestTools.ProcessResult {
            try await TestTools.openssl(arguments, in: self.directory)
        }

        func revokeAndGenerate() async throws -> [UInt8] {
            let revoke = try await self.openssl(["ca", "-config", self.directory.path("ca.cnf"), "-revoke", self.directory.path("leaf.pem"), "-crl_reason", "keyCompromise"])
            #expect(revoke.status == 0, "\(revoke)")
            let crl = try await self.openssl(["ca", "-config", self.directory.path("ca.cnf"), "-gencrl", "-out", self.directory.path("crl.pem")])
            #expect(crl.status == 0, "\(crl)")
            return Array(try Data(contentsOf: URL(fileURLWithPath: self.directory.path("crl.pem"))))
        }
    }

    @Test("a CRL with a number and a revoked leaf: read from PEM and DER, signature verified, entry found with its reason")
    func usable() async throws {
        let ca = try OpenSSLCA(crlNumber: true)
        defer { ca.directory.remove() }
        let pem = try await ca.revokeAndGenerate()
        let der = try await ca.openssl(["crl", "-in", ca.directory.path("crl.pem"), "-outform", "DER", "-out", ca.directory.path("crl.der")])
        #expect(der.status == 0)
        for bytes in [pem, Array(try Data(contentsOf: URL(fileURLWithPath: ca.directory.path("crl.der"))))] {
            let crl = try #require(try CertificateRevocationList.read(bytes).first)
            #expect(crl.unusable == nil, "\(crl.unusable ?? "")")
            #expect(crl.crlNumber == [0x10, 0x00])
            #expect(crl.entry(for: ca.leaf.certificate)?.reason == .keyCompromise)
            try crl.verifySignature(issuer: ca.ca.certificate)
        }
    }

    @Test("no CRL number: read, but unusable, with the RFC's reason")
    func noNumber() async throws {
        let ca = try OpenSSLCA(crlNumber: false)
        defer { ca.directory.remove() }
        let crl = try #require(try CertificateRevocationList.read(try await ca.revokeAndGenerate()).first)
        #expect(crl.unusable?.contains("it has no CRL number (RFC 5280 §5.2.3 requires one)") == true, "\(crl.unusable ?? "nil")")
        // The signature still verifies: unusable is about meaning, not about who signed it.
        try crl.verifySignature(issuer: ca.ca.certificate)
    }

    @Test("a critical extension we do not understand makes the CRL unusable; a non-critical one does not")
    func criticalExtension() async throws {
        let critical = try OpenSSLCA(crlNumber: true, crlExtensions: "1.2.3.4 = critical,ASN1:NULL")
        defer { critical.directory.remove() }
        let refused = try #require(try CertificateRevocationList.read(try await critical.revokeAndGenerate()).first)
        #expect(refused.unusable?.contains("critical extension this checker does not understand (1.2.3.4)") == true, "\(refused.unusable ?? "nil")")
        let plain = try OpenSSLCA(crlNumber: true, crlExtensions: "1.2.3.4 = ASN1:NULL")
        defer { plain.directory.remove() }
        let kept = try #require(try CertificateRevocationList.read(try await plain.revokeAndGenerate()).first)
        #expect(kept.unusable == nil, "\(kept.unusable ?? "")")
    }
}
