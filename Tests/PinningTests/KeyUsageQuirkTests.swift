import Crypto
import Foundation
import SwiftASN1
import Testing
import X509

@testable import Pinning

/// Issue 11, item 5: roots whose keyUsage BIT STRING is not minimal DER (Trustwave Global ECC P256/P384 in
/// Debian's store carry `03 03 07 06 00`) must anchor paths, as they do for OpenSSL, curl, Python, Go and Node.
@Suite("keyUsage encoding quirks")
struct KeyUsageQuirkTests {
    /// The Trustwave roots' exact keyUsage value: keyCertSign + cRLSign with a trailing zero octet, 7 unused bits.
    static let trustwaveValue: [UInt8] = [0x03, 0x03, 0x07, 0x06, 0x00]

    /// A CA whose keyUsage extension carries `value` verbatim (signed over it, as a real CA would).
    static func caWithKeyUsage(_ value: [UInt8], commonName: String = "Quirky KU Root") throws -> IssuedCertificate {
        let key = Certificate.PrivateKey(P256.Signing.PrivateKey())
        let subject = try LoadingFixtures.name(commonName)
        let extensions = try Certificate.Extensions([
            try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: nil), critical: true),
            Certificate.Extension(oid: .X509ExtensionID.keyUsage, critical: true, value: value[...]),
        ])
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: key.publicKey,
            notValidBefore: LoadingFixtures.now - 3600,
            notValidAfter: LoadingFixtures.now + 86_400 * 30,
            issuer: subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: key
        )
        return IssuedCertificate(certificate: certificate, key: key)
    }

    static func leaf(for host: String, by issuer: IssuedCertificate) throws -> Certificate {
        try LoadingFixtures.issue(
            try LoadingFixtures.name(host),
            by: issuer,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName(host)])
            }
        ).certificate
    }

    @Test(
        "the lenient decoder reads BER-valid keyUsage values and reports each quirk",
        arguments: [
            // value, expected usages, whether a quirk is reported
            ([0x03, 0x02, 0x01, 0x06], ["keyCertSign", "cRLSign"], false),
            ([0x03, 0x03, 0x07, 0x06, 0x00], ["keyCertSign", "cRLSign"], true),  // Trustwave ECC P256/P384
            ([0x03, 0x02, 0x00, 0x06], ["keyCertSign", "cRLSign"], true),  // unused-bit count not minimal
            ([0x03, 0x02, 0x01, 0x07], ["keyCertSign", "cRLSign"], true),  // a set unused bit: ignored
            ([0x03, 0x04, 0x00, 0x86, 0x00, 0x00], ["digitalSignature", "keyCertSign", "cRLSign"], true),
            ([0x03, 0x03, 0x07, 0x80, 0x80], ["digitalSignature", "decipherOnly"], false),
            ([0x03, 0x01, 0x00], [], false),
            ([0x03, 0x02, 0x07, 0x00], [], true),
        ] as [([UInt8], [String], Bool)]
    )
    func lenientValues(value: [UInt8], usages: [String], hasQuirk: Bool) throws {
        let decoded = try LenientKeyUsage.decode(extensionValue: value[...])
        let usage = decoded.usage
        let names = [
            (usage.digitalSignature, "digitalSignature"), (usage.nonRepudiation, "nonRepudiation"),
            (usage.keyEncipherment, "keyEncipherment"), (usage.dataEncipherment, "dataEncipherment"),
            (usage.keyAgreement, "keyAgreement"), (usage.keyCertSign, "keyCertSign"), (usage.cRLSign, "cRLSign"),
            (usage.encipherOnly, "encipherOnly"), (usage.decipherOnly, "decipherOnly"),
        ].filter(\.0).map(\.1)
        #expect(names == usages)
        #expect(decoded.quirks.isEmpty == !hasQuirk, "\(decoded.quirks)")
    }

    @Test(
        "values that are not an encoding quirk stay refused",
        arguments: [
            ([0x03, 0x03, 0x06, 0x06, 0x40], "bit 9 is set"),  // a bit RFC 5280 does not define
            ([0x03, 0x01, 0x05], "empty BIT STRING declares 5 unused bits"),
            ([0x03, 0x02, 0x08, 0x00], "declares 8 unused bits"),
            ([0x04, 0x01, 0x00], "not a BIT STRING"),
            ([0x23, 0x04, 0x03, 0x02, 0x01, 0x06], "constructed"),
            ([0x03, 0x02, 0x01, 0x06, 0x00], "not a single DER element"),  // trailing byte after the BIT STRING
            ([0x03, 0x81, 0x02, 0x01, 0x06], "not a single DER element"),  // non-minimal length
            ([], "not a single DER element"),
        ] as [([UInt8], String)]
    )
    func refusedValues(value: [UInt8], mention: String) {
        #expect {
            _ = try LenientKeyUsage.decode(extensionValue: value[...])
        } throws: { error in
            guard let error = error as? LenientKeyUsage.DecodingError else { return false }
            return error.description.contains(mention)
        }
    }

    @Test("swift-certificates refuses the quirk; our effective keyUsage reads it, only when the strict parser throws")
    func effectiveKeyUsage() throws {
        let root = try Self.caWithKeyUsage(Self.trustwaveValue)
        #expect(throws: (any Error).self) { try root.certificate.extensions.keyUsage }
        let usage = try #require(try LenientKeyUsage.effectiveKeyUsage(of: root.certificate))
        #expect(usage.keyCertSign && usage.cRLSign && !usage.digitalSignature)

        let plain = try LoadingFixtures.selfSigned()
        #expect(try LenientKeyUsage.decoded(of: plain.certificate)?.quirks == [])
        #expect(
            try LenientKeyUsage.effectiveKeyUsage(
                of: LoadingFixtures.issue(
                    try LoadingFixtures.name("no-ku"), by: plain, extensions: Certificate.Extensions()
                ).certificate) == nil)
    }

    @Test("a root with the Trustwave keyUsage encoding anchors a chain; its facts show the usages and the quirk")
    func quirkyRootAnchorsChain() async throws {
        let root = try Self.caWithKeyUsage(Self.trustwaveValue)
        let leaf = try Self.leaf(for: "quirk.example", by: root)
        let trust = ServerTrust(certificates: [leaf], anchors: [root.certificate], anchorsOnly: true)
        let evaluation = await SecurityPolicy.default.evaluate(trust, forDomain: "quirk.example")
        #expect(evaluation.isTrusted, "\(evaluation)")

        // As an intermediate too (ChainPolicy's keyCertSign rule reads it).
        let top = try LoadingFixtures.selfSigned("Top Root")
        let intermediateKey = Certificate.PrivateKey(P256.Signing.PrivateKey())
        let intermediate = try LoadingFixtures.issue(
            try LoadingFixtures.name("Quirky Intermediate"),
            by: top,
            key: intermediateKey,
            extensions: try Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: 0), critical: true),
                Certificate.Extension(oid: .X509ExtensionID.keyUsage, critical: true, value: Self.trustwaveValue[...]),
            ])
        )
        let leaf2 = try Self.leaf(for: "quirk.example", by: intermediate)
        let chained = ServerTrust(
            certificates: [leaf2, intermediate.certificate],
            anchors: [top.certificate],
            anchorsOnly: true
        )
        let evaluation2 = await SecurityPolicy.default.evaluate(chained, forDomain: "quirk.example")
        #expect(evaluation2.isTrusted, "\(evaluation2)")

        let info = CertificateInfo(root.certificate)
        #expect(info.keyUsage == ["keyCertSign", "cRLSign"])
        #expect(info.problems.isEmpty, "\(info.problems)")
        #expect(info.notes.contains { $0.contains("not minimally encoded") && $0.contains("03 03 07 06 00") }, "\(info.notes)")
    }

    @Test("leniency never grants a usage: a quirky keyUsage without keyCertSign still cannot issue; an undefined bit is refused")
    func leniencyGrantsNothing() async throws {
        // digitalSignature only, with the same trailing-zero quirk.
        let noCertSign = try Self.caWithKeyUsage([0x03, 0x03, 0x07, 0x80, 0x00], commonName: "No CertSign")
        let intermediateLeaf = try Self.leaf(for: "quirk.example", by: noCertSign)
        let top = try LoadingFixtures.selfSigned("Top")
        let intermediate = try LoadingFixtures.issue(
            try LoadingFixtures.name("No CertSign Intermediate"),
            by: top,
            extensions: try Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: 0), critical: true),
                Certificate.Extension(oid: .X509ExtensionID.keyUsage, critical: true, value: [0x03, 0x03, 0x07, 0x80, 0x00]),
            ])
        )
        let leaf = try Self.leaf(for: "quirk.example", by: intermediate)
        let trust = ServerTrust(certificates: [leaf, intermediate.certificate], anchors: [top.certificate], anchorsOnly: true)
        let evaluation = await SecurityPolicy.default.evaluate(trust, forDomain: "quirk.example")
        guard case .untrusted(let failure) = evaluation else {
            Issue.record("a CA without keyCertSign issued a trusted leaf")
            return
        }
        #expect("\(failure)".contains("keyCertSign"), "\(failure)")
        _ = intermediateLeaf

        // A set bit RFC 5280 does not define is not an encoding quirk: the path is refused, naming it.
        let undefined = try Self.caWithKeyUsage([0x03, 0x03, 0x06, 0x06, 0x40], commonName: "Undefined Bit")
        let leaf3 = try Self.leaf(for: "quirk.example", by: undefined)
        let evaluation3 = await SecurityPolicy.default.evaluate(
            ServerTrust(certificates: [leaf3], anchors: [undefined.certificate], anchorsOnly: true),
            forDomain: "quirk.example"
        )
        guard case .untrusted(let failure3) = evaluation3 else {
            Issue.record("a keyUsage with an undefined bit was accepted")
            return
        }
        #expect("\(failure3)".contains("keyUsage") || "\(failure3)".contains("extension is malformed"), "\(failure3)")
    }
    @Test("a root whose basicConstraints is not critical (Go Daddy Class 2, Starfield Class 2, ePKI) anchors a chain; an intermediate with it is still refused")
    func nonCriticalBasicConstraintsRoot() async throws {
        func ca(_ name: String, by issuer: IssuedCertificate?) throws -> IssuedCertificate {
            let key = Certificate.PrivateKey(P256.Signing.PrivateKey())
            let extensions = try Certificate.Extensions {
                BasicConstraints.isCertificateAuthority(maxPathLength: nil)  // not critical
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            }
            let subject = try LoadingFixtures.name(name)
            let certificate = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: key.publicKey,
                notValidBefore: LoadingFixtures.now - 3600,
                notValidAfter: LoadingFixtures.now + 86_400,
                issuer: issuer?.certificate.subject ?? subject,
                subject: subject,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: extensions,
                issuerPrivateKey: issuer?.key ?? key
            )
            return IssuedCertificate(certificate: certificate, key: key)
        }
        let root = try ca("Old Style Root", by: nil)
        let trusted = await SecurityPolicy.default.evaluate(
            ServerTrust(certificates: [try Self.leaf(for: "old.example", by: root)], anchors: [root.certificate], anchorsOnly: true),
            forDomain: "old.example"
        )
        #expect(trusted.isTrusted, "\(trusted)")

        let modernRoot = try LoadingFixtures.selfSigned("Modern Root 2")
        let intermediate2 = try ca("Old Style Intermediate 2", by: modernRoot)
        let refused = await SecurityPolicy.default.evaluate(
            ServerTrust(
                certificates: [try Self.leaf(for: "old.example", by: intermediate2), intermediate2.certificate],
                anchors: [modernRoot.certificate],
                anchorsOnly: true
            ),
            forDomain: "old.example"
        )
        guard case .untrusted(let failure) = refused else {
            Issue.record("an intermediate with non-critical basicConstraints was accepted")
            return
        }
        #expect("\(failure)".contains("basicConstraints extension is not critical"), "\(failure)")
    }
}

/// The exact Trustwave roots and every other root of Debian's store, when this machine has them
/// (`apt-get install ca-certificates`).
@Suite("Debian trust store")
struct DebianStoreTests {
    static let mozillaDirectory = "/usr/share/ca-certificates/mozilla"
    static let bundle = "/etc/ssl/certs/ca-certificates.crt"
    static let trustwave = [
        "Trustwave_Global_ECC_P256_Certification_Authority.crt",
        "Trustwave_Global_ECC_P384_Certification_Authority.crt",
    ]
    static var hasTrustwave: Bool {
        Self.trustwave.allSatisfy { FileManager.default.fileExists(atPath: "\(Self.mozillaDirectory)/\($0)") }
    }

    /// Why `root` cannot anchor a path, or nil: a fresh serverAuth leaf under it is evaluated with the default
    /// policy at the middle of the root's validity.
    ///
    /// The store root's private key is not available, so the leaf is issued by its twin: the same version,
    /// serial, names, validity and extensions (extension bytes verbatim, quirks included) with a key of ours. A
    /// trust anchor's own key and signature are not checked by path validation (RFC 5280 §6.1.1), so every rule
    /// that could make the real root unusable as an anchor applies to the twin the same way.
    static func anchorFailure(_ root: Certificate) async throws -> String? {
        let middle = root.notValidBefore + root.notValidAfter.timeIntervalSince(root.notValidBefore) / 2
        let twinKey = Certificate.PrivateKey(P256.Signing.PrivateKey())
        let twin = try Certificate(
            version: root.version,
            serialNumber: root.serialNumber,
            publicKey: twinKey.publicKey,
            notValidBefore: root.notValidBefore,
            notValidAfter: root.notValidAfter,
            issuer: root.issuer,
            subject: root.subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: root.extensions,
            issuerPrivateKey: twinKey
        )
        let leafKey = Certificate.PrivateKey(P256.Signing.PrivateKey())
        let leaf = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: leafKey.publicKey,
            notValidBefore: middle - 3600,
            notValidAfter: middle + 3600,
            issuer: root.subject,
            subject: try LoadingFixtures.name("anchor.test"),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("anchor.test")])
            },
            issuerPrivateKey: twinKey
        )
        let trust = ServerTrust(certificates: [leaf], anchors: [twin], anchorsOnly: true, validationTime: middle)
        switch await SecurityPolicy.default.evaluate(trust, forDomain: "anchor.test") {
        case .trusted: return nil
        case .untrusted(let failure): return "\(failure)"
        }
    }

    @Test("the Trustwave ECC roots load, show keyCertSign and cRLSign, and can anchor a path", .enabled(if: hasTrustwave))
    func trustwaveRoots() async throws {
        for name in Self.trustwave {
            let path = "\(Self.mozillaDirectory)/\(name)"
            let certificates = try CertificateLoader.certificates(fromFile: path)
            let root = try #require(certificates.first)
            #expect(throws: (any Error).self, "swift-certificates alone refuses it (the quirk is still there)") {
                try root.extensions.keyUsage
            }
            let info = CertificateInfo(root)
            #expect(info.keyUsage == ["keyCertSign", "cRLSign"], "\(name)")
            #expect(info.problems.isEmpty, "\(name): \(info.problems)")
            #expect(info.notes.contains { $0.contains("03 03 07 06 00") }, "\(name): \(info.notes)")
            let failure = try await Self.anchorFailure(root)
            #expect(failure == nil, "\(name): \(failure ?? "")")
        }
    }

    @Test("every root of the system bundle loads, shows its facts without problems and can anchor a path", .enabled(if: FileManager.default.fileExists(atPath: bundle)))
    func wholeStore() async throws {
        let roots = try TrustRoots.load(atPath: Self.bundle)
        #expect(roots.skipped.isEmpty, "skipped: \(roots.skipped.map(\.description))")
        #expect(roots.certificates.count > 100)
        var failures: [String] = []
        for root in roots.certificates {
            let info = CertificateInfo(root)
            if !info.problems.isEmpty {
                failures.append("\(info.subject): facts: \(info.problems)")
            }
            if let failure = try await Self.anchorFailure(root) {
                failures.append("\(info.subject): \(failure)")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) roots fail:\n\(failures.joined(separator: "\n"))")

        // The listing path (inspect, pins) sees the same roots, none unsupported.
        let listing = try CertificateLoader.inspect(atPath: Self.bundle)
        #expect(listing.failures.isEmpty)
        #expect(listing.certificates.count >= roots.certificates.count)
        #expect(listing.certificates.allSatisfy { $0.unsupported == nil && $0.info.unsupportedForVerification.isEmpty })
    }
}
