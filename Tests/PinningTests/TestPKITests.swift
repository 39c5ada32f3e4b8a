import Foundation
import PinningTestSupport
import SwiftASN1
import Testing
@_spi(FixedExpiryValidationTime) import X509

/// The test PKI is the foundation of every other test: check it against swift-certificates' verifier and,
/// when available, against OpenSSL, which is stricter about key identifiers and key usage.
@Suite("TestPKI")
struct TestPKITests {
    // MARK: - swift-certificates

    @Test("A minted chain verifies with RFC5280Policy", arguments: TestKeyType.allCases)
    func chainVerifies(key: TestKeyType) async throws {
        let chain = try TestChain(key: key)
        let result = try await Self.validate(chain.leaf.certificate, intermediates: [chain.intermediate.certificate], roots: [chain.root.certificate])
        #expect(result == chain.all)
    }

    @Test("Mixed key types: the signature algorithm follows the issuer's key")
    func signatureAlgorithmFollowsIssuer() async throws {
        let root = try TestPKI.root("RSA Root", key: .rsa2048)
        let intermediate = try TestPKI.intermediate("P-384 Intermediate", issuer: root, key: .p384)
        let leaf = try TestPKI.leaf("localhost", issuer: intermediate, dnsNames: ["localhost"], key: .ed25519)
        let edRoot = try TestPKI.root("Ed25519 Root", key: .ed25519)
        let p256Leaf = try TestPKI.leaf("localhost", issuer: try TestPKI.root("P-256 Root"))

        #expect(root.certificate.signatureAlgorithm == .sha256WithRSAEncryption)
        #expect(intermediate.certificate.signatureAlgorithm == .sha256WithRSAEncryption)
        #expect(leaf.certificate.signatureAlgorithm == .ecdsaWithSHA384)
        #expect(edRoot.certificate.signatureAlgorithm == .ed25519)
        #expect(p256Leaf.certificate.signatureAlgorithm == .ecdsaWithSHA256)

        let result = try await Self.validate(leaf.certificate, intermediates: [intermediate.certificate], roots: [root.certificate])
        #expect(result == [leaf.certificate, intermediate.certificate, root.certificate])
    }

    @Test("Key identifiers: SKI is SHA-1 of the key bits, AKI equals the issuer's SKI")
    func keyIdentifiers() throws {
        let chain = try TestChain()
        for identity in [chain.root, chain.intermediate, chain.leaf] {
            let ski = try #require(try identity.certificate.extensions.subjectKeyIdentifier)
            #expect(ski == SubjectKeyIdentifier(hash: identity.certificate.publicKey))
            #expect(ski.keyIdentifier.count == 20)
        }
        #expect(try chain.root.certificate.extensions.authorityKeyIdentifier == nil)
        let intermediateAKI = try #require(try chain.intermediate.certificate.extensions.authorityKeyIdentifier)
        let leafAKI = try #require(try chain.leaf.certificate.extensions.authorityKeyIdentifier)
        #expect(intermediateAKI.keyIdentifier == chain.root.subjectKeyIdentifier)
        #expect(leafAKI.keyIdentifier == chain.intermediate.subjectKeyIdentifier)
    }

    @Test("Serial numbers are random, positive and 20 bytes")
    func serialNumbers() throws {
        let chain = try TestChain()
        let serials = [chain.root, chain.intermediate, chain.leaf].map(\.certificate.serialNumber)
        for serial in serials {
            #expect(serial.bytes.count == 20)
            #expect(try #require(serial.bytes.first) < 0x80)
            #expect(try #require(serial.bytes.first) != 0)
        }
        #expect(Set(serials).count == 3)
    }

    @Test("CA and leaf extensions")
    func extensions() throws {
        let chain = try TestChain(key: .rsa2048)
        let rootExtensions = chain.root.certificate.extensions
        #expect(try rootExtensions.basicConstraints == .isCertificateAuthority(maxPathLength: nil))
        #expect(rootExtensions[oid: .X509ExtensionID.basicConstraints]?.critical == true)
        #expect(try rootExtensions.keyUsage == KeyUsage(keyCertSign: true, cRLSign: true))
        #expect(rootExtensions[oid: .X509ExtensionID.keyUsage]?.critical == true)
        #expect(try rootExtensions.extendedKeyUsage == nil)
        #expect(try chain.intermediate.certificate.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: 0))

        let leafExtensions = chain.leaf.certificate.extensions
        #expect(try leafExtensions.basicConstraints == .notCertificateAuthority)
        #expect(try leafExtensions.keyUsage == KeyUsage(digitalSignature: true, keyEncipherment: true))
        #expect(try leafExtensions.extendedKeyUsage == ExtendedKeyUsage([.serverAuth]))

        let p256Leaf = try TestPKI.leaf("client", issuer: chain.intermediate, usage: .clientAuth)
        #expect(try p256Leaf.certificate.extensions.keyUsage == KeyUsage(digitalSignature: true))
        #expect(try p256Leaf.certificate.extensions.extendedKeyUsage == ExtendedKeyUsage([.clientAuth]))
        let both = try TestPKI.leaf("both", issuer: chain.intermediate, usage: .serverAndClientAuth)
        #expect(try both.certificate.extensions.extendedKeyUsage == ExtendedKeyUsage([.serverAuth, .clientAuth]))
        let noEKU = try TestPKI.leaf("any", issuer: chain.intermediate, usage: .none)
        #expect(try noEKU.certificate.extensions.extendedKeyUsage == nil)
    }

    @Test("Subject alternative names: DNS, IPv4 as 4 bytes, IPv6 as 16 bytes")
    func subjectAlternativeNames() throws {
        let chain = try TestChain(host: "api.example.com")
        let names = try #require(try chain.leaf.certificate.extensions.subjectAlternativeNames)
        var loopback6 = [UInt8](repeating: 0, count: 16)
        loopback6[15] = 1
        #expect(
            Array(names) == [
                .dnsName("api.example.com"),
                .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                .ipAddress(ASN1OctetString(contentBytes: loopback6[...])),
            ]
        )

        let cnOnly = try TestPKI.leaf("localhost", issuer: chain.intermediate, includeSAN: false)
        #expect(try cnOnly.certificate.extensions.subjectAlternativeNames == nil)

        let defaulted = try TestPKI.leaf("localhost", issuer: chain.intermediate)
        #expect(try defaulted.certificate.extensions.subjectAlternativeNames.map(Array.init) == [.dnsName("localhost")])

        #expect(throws: TestPKIError.self) {
            try TestPKI.leaf("bad", issuer: chain.intermediate, ipAddresses: ["300.1.1.1"])
        }
    }

    @Test("Validity windows: defaults around now, explicit around the reference time")
    func validity() async throws {
        #expect(TestPKI.referenceTime == ISO8601DateFormatter().date(from: "2030-06-01T00:00:00Z"))
        let chain = try TestChain()
        let now = Date()
        #expect(chain.leaf.certificate.notValidBefore < now.addingTimeInterval(-86000))
        #expect(chain.leaf.certificate.notValidAfter > now.addingTimeInterval(364 * 86400))
        #expect(chain.leaf.certificate.notValidAfter < now.addingTimeInterval(366 * 86400))
        #expect(chain.root.certificate.notValidAfter > now.addingTimeInterval(9 * 365 * 86400))

        let start = TestPKI.referenceTime.addingTimeInterval(-86400)
        let end = TestPKI.referenceTime.addingTimeInterval(86400)
        let future = try TestChain(notValidBefore: start, notValidAfter: end)
        #expect(future.leaf.certificate.notValidBefore == start)
        #expect(future.leaf.certificate.notValidAfter == end)
        let atReference = try await Self.validate(
            future.leaf.certificate,
            intermediates: [future.intermediate.certificate],
            roots: [future.root.certificate],
            at: TestPKI.referenceTime
        )
        #expect(atReference == future.all)
        let today = try await Self.validate(
            future.leaf.certificate,
            intermediates: [future.intermediate.certificate],
            roots: [future.root.certificate]
        )
        #expect(today == nil)

        #expect(throws: TestPKIError.self) {
            try TestPKI.root("backwards", notValidBefore: end, notValidAfter: start)
        }
    }

    @Test("Name constraints are written and enforced")
    func nameConstraints() async throws {
        let root = try TestPKI.root("Constrained Root", permittedDNSDomains: ["example.com"], excludedDNSDomains: ["bad.example.com"])
        let constraints = try #require(try root.certificate.extensions.nameConstraints)
        #expect(Array(constraints.permittedDNSDomains) == ["example.com"])
        #expect(Array(constraints.excludedDNSDomains) == ["bad.example.com"])
        #expect(root.certificate.extensions[oid: .X509ExtensionID.nameConstraints]?.critical == true)

        let intermediate = try TestPKI.intermediate("Intermediate", issuer: root)
        let inside = try TestPKI.leaf("api.example.com", issuer: intermediate, dnsNames: ["api.example.com"])
        let excluded = try TestPKI.leaf("x.bad.example.com", issuer: intermediate, dnsNames: ["x.bad.example.com"])
        let outside = try TestPKI.leaf("evil.test", issuer: intermediate, dnsNames: ["evil.test"])
        let roots = [root.certificate]
        let intermediates = [intermediate.certificate]
        #expect(try await Self.validate(inside.certificate, intermediates: intermediates, roots: roots) != nil)
        #expect(try await Self.validate(excluded.certificate, intermediates: intermediates, roots: roots) == nil)
        #expect(try await Self.validate(outside.certificate, intermediates: intermediates, roots: roots) == nil)
    }

    @Test("A non-CA in the intermediate position and an exhausted path length are rejected")
    func caConstraints() async throws {
        let root = try TestPKI.root("Root")
        let notCA = try TestPKI.intermediate("Not a CA", issuer: root, isCA: false)
        #expect(try notCA.certificate.extensions.basicConstraints == .notCertificateAuthority)
        let leaf = try TestPKI.leaf("localhost", issuer: notCA)
        #expect(try await Self.validate(leaf.certificate, intermediates: [notCA.certificate], roots: [root.certificate]) == nil)

        let first = try TestPKI.intermediate("First", issuer: root, maxPathLength: 0)
        let second = try TestPKI.intermediate("Second", issuer: first)
        let deep = try TestPKI.leaf("localhost", issuer: second)
        let intermediates = [first.certificate, second.certificate]
        #expect(try await Self.validate(deep.certificate, intermediates: intermediates, roots: [root.certificate]) == nil)
    }

    @Test("Cross-signing: a chain under the old root validates through the new root")
    func crossSigning() async throws {
        let oldRoot = try TestPKI.root("Old Root", key: .rsa2048)
        let newRoot = try TestPKI.root("New Root")
        let crossSigned = try TestPKI.crossSign(oldRoot, by: newRoot, maxPathLength: 1)
        #expect(crossSigned.certificate.subject == oldRoot.certificate.subject)
        #expect(crossSigned.certificate.issuer == newRoot.certificate.subject)
        #expect(crossSigned.certificate.publicKey == oldRoot.certificate.publicKey)
        #expect(crossSigned.certificate.signatureAlgorithm == .ecdsaWithSHA256)
        #expect(crossSigned.subjectKeyIdentifier == oldRoot.subjectKeyIdentifier)
        #expect(try crossSigned.certificate.extensions.authorityKeyIdentifier?.keyIdentifier == newRoot.subjectKeyIdentifier)
        #expect(try crossSigned.certificate.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: 1))

        let intermediate = try TestPKI.intermediate("Intermediate", issuer: oldRoot)
        let leaf = try TestPKI.leaf("localhost", issuer: intermediate)
        let result = try await Self.validate(
            leaf.certificate,
            intermediates: [intermediate.certificate, crossSigned.certificate],
            roots: [newRoot.certificate]
        )
        #expect(result == [leaf.certificate, intermediate.certificate, crossSigned.certificate, newRoot.certificate])
    }

    @Test("Private keys are PKCS#8 PEM and round-trip", arguments: TestKeyType.allCases)
    func privateKeyPEM(key: TestKeyType) throws {
        let identity = try TestPKI.selfSigned("localhost", key: key)
        #expect(identity.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(identity.privateKeyPEM.hasSuffix("-----END PRIVATE KEY-----\n"))
        let parsed = try Certificate.PrivateKey(pemEncoded: identity.privateKeyPEM)
        #expect(parsed.publicKey == identity.certificate.publicKey)
        #expect(TestKeyType(identity.certificate.publicKey) == key)
    }

    @Test("PEM and DER round-trip")
    func pemAndDER() throws {
        let chain = try TestChain()
        #expect(try Certificate(pemEncoded: chain.leaf.certificatePEM) == chain.leaf.certificate)
        #expect(try Certificate(derEncoded: chain.leaf.der) == chain.leaf.certificate)
        let bundle = TestPKI.pemBundle(chain.presented)
        let parsed = try PEMDocument.parseMultiple(pemString: bundle).map { try Certificate(pemDocument: $0) }
        #expect(parsed == chain.presented)
        #expect(bundle.hasSuffix("-----END CERTIFICATE-----\n"))
    }

    @Test("Self-signed leaves")
    func selfSigned() async throws {
        let identity = try TestPKI.selfSigned("localhost", dnsNames: ["localhost"], ipAddresses: ["::1"])
        #expect(identity.certificate.issuer == identity.certificate.subject)
        #expect(try identity.certificate.extensions.basicConstraints == .notCertificateAuthority)
        let ca = try TestPKI.selfSigned("localhost", isCA: true)
        #expect(try ca.certificate.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: nil))
        #expect(try ca.certificate.extensions.keyUsage?.keyCertSign == true)
        // A self-signed certificate is its own trust anchor.
        #expect(try await Self.validate(ca.certificate, intermediates: [], roots: [ca.certificate]) == [ca.certificate])
    }

    @Test("TestIdentity rejects a key that is not the certificate's")
    func identityKeyMismatch() throws {
        let chain = try TestChain()
        #expect(throws: TestPKIError.self) {
            try TestIdentity(certificate: chain.leaf.certificate, privateKey: chain.root.privateKey)
        }
    }

    @Test("TestPKIError's codes print as their names (the start of the description a failing test shows)")
    func errorCodeNames() {
        let codes: [(TestPKIError.Code, String)] = [
            (.invalidIPAddress, "invalidIPAddress"), (.invalidValidity, "invalidValidity"), (.invalidPathLength, "invalidPathLength"),
            (.keyDoesNotMatchCertificate, "keyDoesNotMatchCertificate"), (.unsupportedKey, "unsupportedKey"), (.fileSystem, "fileSystem"),
            (.pkcs12Export, "pkcs12Export"),
        ]
        for (code, name) in codes {
            #expect(code.description == name)
        }
    }

    @Test("TemporaryDirectory writes files and removes itself")
    func temporaryDirectory() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }  // when a step throws before the removal under test
        let text = try directory.write("sub/a.pem", "hello\n")
        let binary = try directory.write("b.der", bytes: [0, 1, 2])
        #expect(text == directory.path + "/sub/a.pem")
        #expect(try String(contentsOfFile: text, encoding: .utf8) == "hello\n")
        #expect(FileManager.default.contents(atPath: binary) == Data([0, 1, 2]))
        #expect(throws: TestPKIError.self) { try directory.write("../escape", "x") }
        directory.remove()
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }

    // MARK: - OpenSSL

    static let opensslPath = TestTools.opensslPath
    static let hasOpenSSL = TestTools.opensslAvailable

    @Test(
        "openssl verify accepts the chain for sslserver by hostname and IP",
        .enabled(if: hasOpenSSL),
        arguments: TestKeyType.allCases
    )
    func opensslVerifiesServer(key: TestKeyType) async throws {
        let chain = try TestChain(key: key)
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let files = try Self.write(chain, to: directory)
        let base = ["verify", "-x509_strict", "-CAfile", files.root, "-untrusted", files.intermediate]

        try await Self.expectOpenSSL(base + ["-purpose", "sslserver", "-verify_hostname", "localhost", files.leaf], succeeds: true)
        try await Self.expectOpenSSL(base + ["-purpose", "sslserver", "-verify_ip", "127.0.0.1", files.leaf], succeeds: true)
        try await Self.expectOpenSSL(base + ["-purpose", "sslserver", "-verify_ip", "::1", files.leaf], succeeds: true)
        // OpenSSL really checks: a wrong name, a wrong IP and the wrong purpose fail.
        try await Self.expectOpenSSL(base + ["-purpose", "sslserver", "-verify_hostname", "example.com", files.leaf], succeeds: false)
        try await Self.expectOpenSSL(base + ["-purpose", "sslserver", "-verify_ip", "10.0.0.1", files.leaf], succeeds: false)
        try await Self.expectOpenSSL(base + ["-purpose", "sslclient", files.leaf], succeeds: false)
    }

    @Test("openssl verify accepts a clientAuth leaf for sslclient", .enabled(if: hasOpenSSL))
    func opensslVerifiesClient() async throws {
        let chain = try TestChain(leafUsage: .clientAuth)
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let files = try Self.write(chain, to: directory)
        let base = ["verify", "-x509_strict", "-CAfile", files.root, "-untrusted", files.intermediate]
        try await Self.expectOpenSSL(base + ["-purpose", "sslclient", files.leaf], succeeds: true)
        try await Self.expectOpenSSL(base + ["-purpose", "sslserver", files.leaf], succeeds: false)
    }

    @Test("openssl pkey accepts the private key PEM", .enabled(if: hasOpenSSL), arguments: TestKeyType.allCases)
    func opensslAcceptsPrivateKey(key: TestKeyType) async throws {
        let identity = try TestPKI.selfSigned("localhost", key: key)
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let keyPath = try directory.write("key.pem", identity.privateKeyPEM)
        try await Self.expectOpenSSL(["pkey", "-in", keyPath, "-noout"], succeeds: true)
        // And the key is the certificate's: the public keys OpenSSL derives from both are identical.
        let certificatePath = try directory.write("cert.pem", identity.certificatePEM)
        let fromKey = try await Self.openssl(["pkey", "-in", keyPath, "-pubout"])
        let fromCertificate = try await Self.openssl(["x509", "-in", certificatePath, "-noout", "-pubkey"])
        #expect(fromKey.status == 0 && fromCertificate.status == 0)
        #expect(fromKey.output == fromCertificate.output)
    }

    // MARK: - Helpers

    /// The validated chain (leaf first), or nil when no chain validates.
    static func validate(
        _ leaf: Certificate,
        intermediates: [Certificate],
        roots: [Certificate],
        at time: Date? = nil
    ) async throws -> [Certificate]? {
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            if let time {
                RFC5280Policy(fixedExpiryValidationTime: time)
            } else {
                RFC5280Policy()
            }
        }
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore(intermediates)) {
        case .validCertificate(let chain):
            return Array(chain)
        case .couldNotValidate:
            return nil
        }
    }

    static func write(_ chain: TestChain, to directory: TemporaryDirectory) throws -> (root: String, intermediate: String, leaf: String) {
        (
            try directory.write("root.pem", chain.root.certificatePEM),
            try directory.write("int.pem", chain.intermediate.certificatePEM),
            try directory.write("leaf.pem", chain.leaf.certificatePEM)
        )
    }

    static func openssl(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        let result = try await TestTools.openssl(arguments)
        return (result.exited ? result.status : -1, result.output)
    }

    static func expectOpenSSL(
        _ arguments: [String],
        succeeds: Bool,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let result = try await self.openssl(arguments)
        #expect(
            (result.status == 0) == succeeds,
            "openssl \(arguments.joined(separator: " ")) exited \(result.status): \(result.output)",
            sourceLocation: sourceLocation
        )
    }
}
