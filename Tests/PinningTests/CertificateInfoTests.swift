import Crypto
import Foundation
import SwiftASN1
import Testing
import X509
import _CryptoExtras

@testable import Pinning

@Suite("Certificate info")
struct CertificateInfoTests {
    /// A leaf with every kind of SAN, issued by a P-256 CA, with a fixed serial number.
    static func richLeaf() throws -> (leaf: Certificate, issuer: Certificate) {
        let root = try LoadingFixtures.selfSigned("Info Root")
        let leaf = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(bytes: [0x01, 0x02, 0xAB]),
            publicKey: Certificate.PrivateKey(P256.Signing.PrivateKey()).publicKey,
            notValidBefore: Date(timeIntervalSince1970: 1_767_225_600),  // 2026-01-01T00:00:00Z
            notValidAfter: Date(timeIntervalSince1970: 1_798_761_599),  // 2026-12-31T23:59:59Z
            issuer: root.certificate.subject,
            subject: try LoadingFixtures.name("api.example.com", organization: "Example"),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, keyEncipherment: true))
                try ExtendedKeyUsage([.serverAuth, .clientAuth, ExtendedKeyUsage.Usage(oid: [1, 2, 3, 4])])
                SubjectAlternativeNames([
                    .dnsName("api.example.com"),
                    .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                    .ipAddress(ASN1OctetString(contentBytes: [0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])),
                    .uniformResourceIdentifier("https://api.example.com/"),
                    .rfc822Name("ops@example.com"),
                ])
            },
            issuerPrivateKey: root.key
        )
        return (leaf, root.certificate)
    }

    @Test("the facts of a P-256 leaf")
    func leafFacts() throws {
        let (leaf, _) = try Self.richLeaf()
        let info = CertificateInfo(leaf)
        #expect(info.subject == "CN=api.example.com,O=Example")
        #expect(info.issuer == "CN=Info Root")
        #expect(info.serialNumber == "0102ab")
        #expect(info.notValidBefore == Date(timeIntervalSince1970: 1_767_225_600))
        #expect(info.notValidAfter == Date(timeIntervalSince1970: 1_798_761_599))
        #expect(
            info.subjectAlternativeNames == [
                .init(kind: "DNS", value: "api.example.com"),
                .init(kind: "IP", value: "127.0.0.1"),
                .init(kind: "IP", value: "2001:db8::1"),
                .init(kind: "URI", value: "https://api.example.com/"),
                .init(kind: "email", value: "ops@example.com"),
            ]
        )
        #expect(info.keyType == "EC P-256")
        #expect(info.keySize == 256)
        #expect(info.signatureAlgorithm == "ecdsa-with-SHA256")
        #expect(info.basicConstraints == .init(isCA: false, pathLength: nil))
        #expect(info.isCA == false)
        #expect(info.keyUsage == ["digitalSignature", "keyEncipherment"])
        #expect(info.extendedKeyUsage == ["serverAuth", "clientAuth", "1.2.3.4"])
        #expect(info.spkiPin == Pin(spkiOf: leaf).description)
        #expect(info.isSelfSigned == false)
        #expect(info.problems.isEmpty)
        #expect(info.sha256Fingerprint.count == 32 * 3 - 1)
        #expect(info.sha1Fingerprint.count == 20 * 3 - 1)
    }

    @Test("CA facts: basic constraints, key usage, self-signed")
    func caFacts() throws {
        let root = try LoadingFixtures.selfSigned("CA", key: Certificate.PrivateKey(P384.Signing.PrivateKey()))
        let info = CertificateInfo(root.certificate)
        #expect(info.isCA)
        #expect(info.basicConstraints == .init(isCA: true, pathLength: nil))
        #expect(info.keyUsage == ["keyCertSign", "cRLSign"])
        #expect(info.extendedKeyUsage == nil)
        #expect(info.subjectAlternativeNames.isEmpty)
        #expect(info.isSelfSigned)
        #expect(info.keyType == "EC P-384")
        #expect(info.keySize == 384)
        #expect(info.signatureAlgorithm == "ecdsa-with-SHA384")

        let chain = try LoadingFixtures.chain()
        #expect(CertificateInfo(chain[1]).basicConstraints == .init(isCA: true, pathLength: 0))
    }

    @Test("subject equal to issuer is not enough to be self-signed")
    func sameNameDifferentKey() throws {
        let root = try LoadingFixtures.selfSigned("Twin")
        let twin = try LoadingFixtures.issue(
            root.certificate.subject,
            by: root,
            extensions: Certificate.Extensions()
        )
        #expect(twin.certificate.subject == twin.certificate.issuer)
        #expect(CertificateInfo(twin.certificate).isSelfSigned == false)
    }

    @Test("Ed25519, P-521 and RSA keys")
    func keyTypes() throws {
        let ed = CertificateInfo(try LoadingFixtures.selfSigned(key: Certificate.PrivateKey(Curve25519.Signing.PrivateKey())).certificate)
        #expect(ed.keyType == "Ed25519")
        #expect(ed.keySize == 256)
        #expect(ed.signatureAlgorithm == "ED25519")
        #expect(ed.isSelfSigned)
        let p521 = CertificateInfo(try LoadingFixtures.selfSigned(key: Certificate.PrivateKey(P521.Signing.PrivateKey())).certificate)
        #expect(p521.keyType == "EC P-521")
        #expect(p521.keySize == 521)
        let rsa = CertificateInfo(try LoadingFixtures.selfSigned(key: Certificate.PrivateKey(try _RSA.Signing.PrivateKey(keySize: .bits2048))).certificate)
        #expect(rsa.keyType == "RSA")
        #expect(rsa.keySize == 2048)
        #expect(rsa.signatureAlgorithm == "sha256WithRSAEncryption")
        #expect(rsa.isSelfSigned)
    }

    @Test("malformed extensions make their field nil and are reported, nothing throws")
    func malformedExtensions() throws {
        let root = try LoadingFixtures.selfSigned()
        let garbage: [UInt8] = [0x04, 0x01, 0xFF]
        var extensions = Certificate.Extensions()
        try extensions.append(Certificate.Extension(oid: .X509ExtensionID.keyUsage, critical: true, value: garbage[...]))
        try extensions.append(Certificate.Extension(oid: .X509ExtensionID.basicConstraints, critical: true, value: garbage[...]))
        try extensions.append(Certificate.Extension(oid: .X509ExtensionID.extendedKeyUsage, critical: false, value: garbage[...]))
        try extensions.append(Certificate.Extension(oid: .X509ExtensionID.subjectAlternativeName, critical: false, value: garbage[...]))
        let leaf = try LoadingFixtures.issue(try LoadingFixtures.name("broken"), by: root, extensions: extensions)
        let info = CertificateInfo(leaf.certificate)
        #expect(info.keyUsage == nil)
        #expect(info.basicConstraints == nil)
        #expect(info.extendedKeyUsage == nil)
        #expect(info.subjectAlternativeNames.isEmpty)
        #expect(info.isCA == false)
        #expect(info.problems.count == 4)
        #expect(info.problems.contains { $0.hasPrefix("keyUsage extension is malformed") })
        #expect(info.problems.contains { $0.hasPrefix("subjectAltName extension is malformed") })
    }

    @Test(
        "IPv6 addresses in RFC 5952 form",
        arguments: [
            ([0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], "2001:db8::1"),
            ([UInt8](repeating: 0, count: 16), "::"),
            ([UInt8](repeating: 0, count: 15) + [1], "::1"),
            ([0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1], "2001:db8:0:1:1:1:1:1"),
            ([0x20, 0x01, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1], "2001:0:0:1::1"),
            ([0x20, 0x01, 0x0D, 0xB8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1], "2001:db8::1:0:0:1"),
            ([0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0xAB, 0xCD, 0, 0x12, 0, 0, 0, 0], "fe80::abcd:12:0:0"),
            ([192, 168, 0, 1], "192.168.0.1"),
        ] as [([UInt8], String)]
    )
    func ipv6(bytes: [UInt8], expected: String) {
        #expect(IPAddressText.format(bytes) == expected)
    }

    @Test("JSON: RFC 3339 dates, optional fields omitted when absent, round trip")
    func json() throws {
        let (leaf, _) = try Self.richLeaf()
        let info = CertificateInfo(leaf)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(info)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["notValidBefore"] as? String == "2026-01-01T00:00:00Z")
        #expect(object["notValidAfter"] as? String == "2026-12-31T23:59:59Z")
        #expect(object["spkiPin"] as? String == info.spkiPin)
        #expect(try JSONDecoder().decode(CertificateInfo.self, from: data) == info)

        let root = CertificateInfo(try LoadingFixtures.selfSigned().certificate)
        let rootObject = try #require(try JSONSerialization.jsonObject(with: try encoder.encode(root)) as? [String: Any])
        #expect(rootObject["extendedKeyUsage"] == nil)
        #expect(try JSONDecoder().decode(CertificateInfo.self, from: try encoder.encode(root)) == root)
    }

    @Test("JSON: an impossible date is refused with the reason, as --at refuses it")
    func impossibleDate() throws {
        let (leaf, _) = try Self.richLeaf()
        let data = try JSONEncoder().encode(CertificateInfo(leaf))
        var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        object["notValidAfter"] = "2030-02-30T00:00:00Z"
        do {
            _ = try JSONDecoder().decode(CertificateInfo.self, from: try JSONSerialization.data(withJSONObject: object))
            Issue.record("2030-02-30 was accepted")
        } catch DecodingError.dataCorrupted(let context) {
            #expect(context.debugDescription.contains("\"2030-02-30T00:00:00Z\" is not an RFC 3339 date such as 2026-01-31T12:00:00Z"), "\(context)")
            #expect(context.debugDescription.hasSuffix(": day 30 does not exist: February 2030 has 28 days"), "\(context)")
        }
    }
}

@Suite("Certificate info: openssl cross-checks", .enabled(if: LoadingFixtures.hasOpenSSL, "needs /usr/bin/openssl"))
struct CertificateInfoOpenSSLTests {
    static func opensslPin(_ certificate: Certificate) async throws -> String {
        let pem = Array(try LoadingFixtures.pem([certificate]).utf8)
        let publicKey = try await LoadingFixtures.openssl(["x509", "-pubkey", "-noout"], input: pem)
        let der = try await LoadingFixtures.openssl(["pkey", "-pubin", "-outform", "der"], input: publicKey)
        let digest = try await LoadingFixtures.openssl(["dgst", "-sha256", "-binary"], input: der)
        return "sha256/" + Data(digest).base64EncodedString()
    }

    static func opensslFingerprint(_ certificate: Certificate, _ digest: String) async throws -> String {
        let pem = Array(try LoadingFixtures.pem([certificate]).utf8)
        let output = String(decoding: try await LoadingFixtures.openssl(["x509", "-noout", "-fingerprint", "-\(digest)"], input: pem), as: UTF8.self)
        // "sha256 Fingerprint=AB:CD:…"
        return String(output.split(separator: "=", maxSplits: 1).last ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("SPKI pins, fingerprints and serial numbers equal openssl's for P-256 and RSA certificates")
    func crossCheck() async throws {
        let p256 = try CertificateInfoTests.richLeaf().leaf
        let rsa = try LoadingFixtures.selfSigned(
            "RSA Root",
            key: Certificate.PrivateKey(try _RSA.Signing.PrivateKey(keySize: .bits2048))
        ).certificate
        for certificate in [p256, rsa] {
            let info = CertificateInfo(certificate)
            let opensslPin = try await Self.opensslPin(certificate)
            #expect(Pin(spkiOf: certificate).description == opensslPin)
            #expect(info.spkiPin == opensslPin)
            let sha256 = try await Self.opensslFingerprint(certificate, "sha256")
            let sha1 = try await Self.opensslFingerprint(certificate, "sha1")
            #expect(info.sha256Fingerprint == sha256)
            #expect(info.sha1Fingerprint == sha1)
            let serial = String(
                decoding: try await LoadingFixtures.openssl(["x509", "-noout", "-serial"], input: Array(try LoadingFixtures.pem([certificate]).utf8)),
                as: UTF8.self
            )
            #expect("serial=" + info.serialNumber.uppercased() == serial.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }
}
