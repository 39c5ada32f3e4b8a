import Crypto
import Foundation
import PinningTestSupport
import SwiftASN1
import Testing
import X509

@testable import Pinning

/// Issue 11, item 6: well-formed certificates that the verifier does not support (RSASSA-PSS, MD5, small RSA
/// keys, negative serials, DSA, explicit EC parameters, …) must be inspectable and pinnable, never "malformed
/// DER", and must not hide the other certificates of their file. Every fixture is made by OpenSSL at test time.
@Suite("Unsupported but well-formed certificates (OpenSSL-made)", .enabled(if: LoadingFixtures.hasOpenSSL, "needs /usr/bin/openssl"))
struct UnsupportedCertificateTests {
    /// One OpenSSL-made certificate kind: how to make it, and what must be said about it.
    struct Variant: Sendable, CustomTestStringConvertible {
        var name: String
        /// `openssl` argument lists run in order in a scratch directory; the last writes `cert.pem`.
        var commands: [[String]]
        /// The loading error code for evaluation, or nil when swift-certificates supports it.
        var code: CertificateLoadingError.Code?
        /// Words the reason must contain.
        var mentions: [String]
        var testDescription: String { self.name }
    }

    static func req(_ subject: String, _ extra: [String]) -> [String] {
        ["req", "-x509", "-subj", "/CN=\(subject)", "-days", "2", "-out", "cert.pem"] + extra
    }

    static let variants: [Variant] = [
        Variant(
            name: "RSASSA-PSS SHA-256 (salt = digest)",
            commands: [Self.req("pss-sha256", ["-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest"])],
            code: .unsupportedCertificate,
            mentions: ["rsassaPss (SHA-256, MGF1 with SHA-256, salt 32 bytes)", "not supported for verification", "cannot represent an RSASSA-PSS signature"]
        ),
        Variant(
            name: "RSASSA-PSS SHA-384",
            commands: [Self.req("pss-sha384", ["-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-sha384", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest"])],
            code: .unsupportedCertificate,
            mentions: ["SHA-384, MGF1 with SHA-384, salt 48 bytes"]
        ),
        Variant(
            name: "RSASSA-PSS SHA-512, OpenSSL's default (maximum) salt",
            commands: [Self.req("pss-sha512", ["-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-sha512", "-sigopt", "rsa_padding_mode:pss"])],
            code: .unsupportedCertificate,
            mentions: ["SHA-512, MGF1 with SHA-512, salt"]
        ),
        Variant(
            name: "RSA 1024",
            commands: [Self.req("rsa-1024", ["-newkey", "rsa:1024", "-nodes", "-keyout", "k.pem"])],
            code: .unsupportedKey,
            mentions: ["RSA key of 1024 bits", "2048 bits or more"]
        ),
        Variant(
            name: "RSA 512",
            commands: [["genrsa", "-out", "k.pem", "512"], Self.req("rsa-512", ["-key", "k.pem"])],
            code: .unsupportedKey,
            mentions: ["RSA key of 512 bits"]
        ),
        Variant(
            name: "MD5 signature",
            commands: [Self.req("md5", ["-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-md5"])],
            code: .unsupportedCertificate,
            mentions: ["md5WithRSAEncryption", "MD5 are broken"]
        ),
        Variant(
            name: "negative serial",
            commands: [Self.req("negative", ["-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-set_serial", "-5"])],
            code: .unsupportedCertificate,
            mentions: ["serial number is negative (-05)", "RFC 5280 §4.1.2.2"]
        ),
        Variant(
            name: "DSA key and signature",
            commands: [
                ["genpkey", "-genparam", "-algorithm", "DSA", "-pkeyopt", "dsa_paramgen_bits:1024", "-out", "p.pem"],
                Self.req("dsa", ["-newkey", "dsa:p.pem", "-nodes", "-keyout", "k.pem", "-sha256"]),
            ],
            code: .unsupportedCertificate,
            mentions: ["dsa-with-SHA256", "does not implement DSA", "DSA 1.2.840.10040.4.1"]
        ),
        Variant(
            name: "EC explicit parameters",
            commands: [
                ["ecparam", "-name", "prime256v1", "-param_enc", "explicit", "-genkey", "-noout", "-out", "k.pem"],
                Self.req("explicit-ec", ["-key", "k.pem"]),
            ],
            code: .unsupportedKey,
            mentions: ["explicit curve parameters", "RFC 5480"]
        ),
        Variant(
            name: "Ed448",
            commands: [Self.req("ed448", ["-newkey", "ed448", "-nodes", "-keyout", "k.pem"])],
            code: .unsupportedCertificate,
            mentions: ["ED448", "Ed448 1.3.101.113"]
        ),
        Variant(
            name: "brainpoolP256r1",
            commands: [Self.req("brainpool", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:brainpoolP256r1", "-nodes", "-keyout", "k.pem"])],
            code: .unsupportedKey,
            mentions: ["brainpoolP256r1"]
        ),
        Variant(
            name: "v1 certificate (supported: control)",
            commands: [
                ["req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-subj", "/CN=v1", "-out", "r.csr"],
                ["x509", "-req", "-in", "r.csr", "-key", "k.pem", "-days", "2", "-out", "cert.pem"],
            ],
            code: nil,
            mentions: []
        ),
        Variant(
            name: "SHA-1 RSA (supported: control)",
            commands: [Self.req("sha1", ["-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-sha1"])],
            code: nil,
            mentions: []
        ),
    ]

    /// Runs the variant's commands in a fresh directory, removed afterwards, and returns the PEM certificate.
    static func make(_ variant: Variant) async throws -> [UInt8] {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        for command in variant.commands {
            var arguments = command
            // Paths are relative to the scratch directory.
            for (index, argument) in arguments.enumerated() where ["k.pem", "p.pem", "r.csr", "cert.pem"].contains(argument) {
                arguments[index] = "\(directory)/\(argument)"
            }
            arguments = arguments.map { $0 == "dsa:p.pem" ? "dsa:\(directory)/p.pem" : $0 }
            _ = try await LoadingFixtures.openssl(arguments)
        }
        return try Array(Data(contentsOf: URL(fileURLWithPath: "\(directory)/cert.pem")))
    }

    /// `openssl x509 -pubkey | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`.
    static func opensslPin(_ pem: [UInt8]) async throws -> String {
        let publicKey = try await LoadingFixtures.openssl(["x509", "-pubkey", "-noout"], input: pem)
        let der = try await LoadingFixtures.openssl(["pkey", "-pubin", "-outform", "der"], input: publicKey)
        let digest = try await LoadingFixtures.openssl(["dgst", "-sha256", "-binary"], input: der)
        return "sha256/" + Data(digest).base64EncodedString()
    }

    @Test("inspect and pins work, the pin equals openssl's, and evaluation loading names the reason", arguments: variants)
    func variant(_ variant: Variant) async throws {
        let pem = try await Self.make(variant)
        let listing = CertificateLoader.inspect(from: pem, origin: "in.pem")
        #expect(listing.failures.isEmpty, "\(listing.failures)")
        let certificate = try #require(listing.certificates.first)
        #expect(certificate.pin.description == (try await Self.opensslPin(pem)))
        #expect(certificate.info.spkiPin == certificate.pin.description)
        #expect(certificate.info.problems.isEmpty, "\(certificate.info.problems)")

        guard let code = variant.code else {
            #expect(certificate.certificate != nil)
            #expect(certificate.info.unsupportedForVerification.isEmpty)
            #expect(try CertificateLoader.certificates(from: pem, origin: "in.pem").count == 1)
            return
        }
        #expect(certificate.certificate == nil)
        let reasons = certificate.info.unsupportedForVerification.joined(separator: "; ")
        for mention in variant.mentions {
            #expect(reasons.contains(mention), "\(reasons)")
        }
        // Evaluation refuses it with a typed error naming the reason in words, never "malformed DER".
        do {
            _ = try CertificateLoader.certificates(from: pem, origin: "in.pem")
            Issue.record("\(variant.name) loaded for evaluation")
        } catch {
            #expect(error.code == code, "\(error)")
            #expect(error.code != .malformedDER)
            #expect(error.description.contains("in.pem"))
            #expect(error.description.contains("cannot be used for verification"), "\(error)")
            for mention in variant.mentions {
                #expect(error.description.contains(mention), "\(error)")
            }
        }
    }

    @Test("one unsupported certificate does not hide the others: every certificate of the file is listed")
    func mixedBundle() async throws {
        var bundle: [UInt8] = []
        var expected: [String] = []
        for variant in Self.variants {
            let pem = try await Self.make(variant)
            bundle += pem
            expected.append(try await Self.opensslPin(pem))
        }
        // A block that is not a certificate at all is reported separately, after the others.
        bundle += Array("-----BEGIN CERTIFICATE-----\nMIIBAA==\n-----END CERTIFICATE-----\n".utf8)
        let listing = CertificateLoader.inspect(from: bundle, origin: "mixed.pem")
        #expect(listing.certificates.map(\.pin.description) == expected)
        #expect(listing.certificates.map(\.position) == (1...Self.variants.count).map { "block \($0) (CERTIFICATE)" })
        #expect(listing.failures.count == 1)
        #expect(listing.failures.first?.code == .malformedDER)
        #expect(listing.failures.first?.problem.contains("block \(Self.variants.count + 1) (CERTIFICATE)") == true)

        // The trust-store loader skips the unsupported roots, naming each subject and reason, and keeps the others.
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let path = try LoadingFixtures.write(bundle, to: directory, "roots.pem")
        let roots = try TrustRoots.load(atPath: path)
        #expect(roots.certificates.count == Self.variants.filter { $0.code == nil }.count)
        let skipped = roots.skipped.map(\.description)
        #expect(skipped.count == Self.variants.filter { $0.code != nil }.count + 1)
        #expect(skipped.contains { $0.contains("\"CN=pss-sha256\"") && $0.contains("RSASSA-PSS") })
        #expect(skipped.contains { $0.contains("\"CN=negative\"") && $0.contains("negative") })
    }

    @Test("negative serials and other facts of unsupported certificates match openssl")
    func facts() async throws {
        let negative = try await Self.make(Self.variants.first { $0.name == "negative serial" }!)
        let info = try #require(CertificateLoader.inspect(from: negative, origin: "n").certificates.first?.info)
        #expect(info.serialNumber == "-05")
        #expect(info.subject == "CN=negative")
        #expect(info.keyType == "RSA" && info.keySize == 2048)
        // A self-signed PKCS#1 v1.5 certificate's signature is checked with swift-crypto directly.
        #expect(info.isSelfSigned)
        #expect(info.version == 3)

        let small = try await Self.make(Self.variants.first { $0.name == "RSA 1024" }!)
        let smallInfo = try #require(CertificateLoader.inspect(from: small, origin: "s").certificates.first?.info)
        #expect(smallInfo.keySize == 1024)
        #expect(smallInfo.isSelfSigned)
        let sha256 = String(decoding: try await LoadingFixtures.openssl(["x509", "-noout", "-fingerprint", "-sha256"], input: small), as: UTF8.self)
        #expect(sha256.contains(smallInfo.sha256Fingerprint))

        let dsa = try await Self.make(Self.variants.first { $0.name == "DSA key and signature" }!)
        let dsaInfo = try #require(CertificateLoader.inspect(from: dsa, origin: "d").certificates.first?.info)
        #expect(dsaInfo.keyType == "DSA" && dsaInfo.keySize == 1024)
        #expect(!dsaInfo.isSelfSigned)
        #expect(dsaInfo.notes.contains { $0.contains("self-signature was not checked") })

        let explicit = try await Self.make(Self.variants.first { $0.name == "EC explicit parameters" }!)
        let explicitInfo = try #require(CertificateLoader.inspect(from: explicit, origin: "e").certificates.first?.info)
        #expect(explicitInfo.keyType == "EC explicit parameters" && explicitInfo.keySize == 256)
    }

    @Test("RSASSA-PSS signatures are verified with swift-crypto where its PSS padding applies, and never guessed")
    func pssSignatures() async throws {
        for name in ["RSASSA-PSS SHA-256 (salt = digest)", "RSASSA-PSS SHA-384"] {
            let made = try await Self.make(Self.variants.first { $0.name == name }!)
            let info = try #require(CertificateLoader.inspect(from: made, origin: "p").certificates.first?.info)
            #expect(info.isSelfSigned, "\(name): \(info.notes)")

            // The same certificate with one signature bit flipped: the check says so.
            var der = try #require(CertificateLoader.inspect(from: made, origin: "p").certificates.first?.derBytes)
            der[der.count - 10] ^= 0x01
            let tampered = try CertificateInfo(derEncoded: der)
            #expect(!tampered.isSelfSigned)
            #expect(tampered.notes.contains { $0.contains("does not verify its signature") }, "\(tampered.notes)")
        }
        // OpenSSL 3.0's default salt is the maximum, not the digest length: swift-crypto's PSS verifier requires
        // salt = digest length, so the signature is reported as not checked, with the reason.
        let maxSalt = try await Self.make(Self.variants.first { $0.name == "RSASSA-PSS SHA-512, OpenSSL's default (maximum) salt" }!)
        let info = try #require(CertificateLoader.inspect(from: maxSalt, origin: "p").certificates.first?.info)
        #expect(!info.isSelfSigned)
        #expect(info.notes.contains { $0.contains("not checked") && $0.contains("salt as long as the digest") }, "\(info.notes)")
    }
}

@Suite("Certificate structure")
struct CertificateStructureTests {
    @Test(
        "time forms: DER, and the BER forms old certificates carry",
        arguments: [
            ("260131120000Z", true, 1_769_860_800.0),
            ("2601311200Z", true, 1_769_860_800.0),  // no seconds
            ("260131130000+0100", true, 1_769_860_800.0),  // offset
            ("20260131120000Z", false, 1_769_860_800.0),
            ("20260131120000.5Z", false, 1_769_860_800.5),
            ("500101000000Z", true, -631_152_000.0),  // 1950
            ("491231235959Z", true, 2_524_607_999.0),  // 2049
        ] as [(String, Bool, Double)]
    )
    func times(text: String, utc: Bool, seconds: Double) {
        #expect(CertificateStructure.parseTime(text, utcTime: utc)?.timeIntervalSince1970 == seconds)
    }

    @Test("invalid times are refused", arguments: ["260231120000Z", "261301120000Z", "2601311200", "20260131120000", "26013112000Z", "260131246000Z", ""])
    func badTimes(text: String) {
        #expect(CertificateStructure.parseTime(text, utcTime: text.count < 15) == nil)
    }

    @Test("a supported certificate reads the same through the structure as through swift-certificates")
    func sameFacts() throws {
        let chain = try LoadingFixtures.chain()
        for certificate in chain {
            let structure = try CertificateStructure(der: certificate.derBytes)
            #expect(structure.subject.text == String(describing: certificate.subject))
            #expect(structure.issuer.text == String(describing: certificate.issuer))
            #expect(Array(structure.subjectPublicKeyInfo) == certificate.subjectPublicKeyInfoDER)
            #expect(structure.notValidBefore == certificate.notValidBefore)
            #expect(structure.notValidAfter == certificate.notValidAfter)
            #expect(structure.quirks.isEmpty)
            let viaStructure = CertificateInfo(structure: structure, unsupportedForVerification: [])
            let viaLibrary = CertificateInfo(certificate)
            #expect(viaStructure == viaLibrary)
        }
    }

    @Test("2,000 seeded mutations of a certificate either parse or throw, never crash")
    func mutations() throws {
        let der = try LoadingFixtures.chain()[0].derBytes
        var generator = SplitMix64(seed: 11)
        for _ in 0..<2000 {
            var mutated = der
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: 0..<mutated.count, using: &generator)
                mutated[index] = UInt8.random(in: 0...255, using: &generator)
            }
            do {
                let structure = try CertificateStructure(der: mutated)
                _ = CertificateInfo(structure: structure, unsupportedForVerification: [])
            } catch {
                #expect(!error.message.isEmpty)
            }
            _ = CertificateLoader.inspect(from: mutated, origin: "m")
        }
    }
}

@Suite("Unusual but well-formed encodings")
struct UnusualEncodingTests {
    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var value = count
        while value > 0 {
            bytes.insert(UInt8(value & 0xFF), at: 0)
            value >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag] + Self.length(content.count) + content }

    /// A self-signed certificate whose TBSCertificate fields are `edit`ed, then signed again with the same key.
    static func reencoded(_ edit: (inout [[UInt8]]) -> Void) throws -> [UInt8] {
        let key = P256.Signing.PrivateKey()
        let subject = try LoadingFixtures.name("Unusual")
        let original = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(bytes: [0x2A]),
            publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: Date(timeIntervalSince1970: 1_769_860_800),  // 2026-01-31T12:00:00Z
            notValidAfter: Date(timeIntervalSince1970: 1_801_396_800),  // 2027-01-31T12:00:00Z
            issuer: subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions { Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil)) },
            issuerPrivateKey: Certificate.PrivateKey(key)
        )
        let root = try DER.parse(original.derBytes)
        guard case .constructed(let top) = root.content, let tbsNode = Array(top).first,
            case .constructed(let tbsChildren) = tbsNode.content
        else { throw LoadingFixtures.CommandFailed(description: "not a certificate") }
        var fields = tbsChildren.map { Array($0.encodedBytes) }
        edit(&fields)
        let tbs = Self.tlv(0x30, fields.flatMap { $0 })
        let signature = try key.signature(for: tbs).derRepresentation
        let algorithm = Array(Array(top)[1].encodedBytes)
        return Self.tlv(0x30, tbs + algorithm + Self.tlv(0x03, [0x00] + Array(signature)))
    }

    @Test("BER time forms (no seconds, an offset) are read, reported as quirks, and refused for evaluation with the reason")
    func berTimes() throws {
        let der = try Self.reencoded { fields in
            // version [0], serial, signature, issuer, validity (index 4), subject, spki, extensions
            let notBefore = Self.tlv(0x17, Array("2601311200Z".utf8))  // UTCTime without seconds
            let notAfter = Self.tlv(0x17, Array("270131130000+0100".utf8))  // UTCTime with an offset
            fields[4] = Self.tlv(0x30, notBefore + notAfter)
        }
        let listing = CertificateLoader.inspect(from: der, origin: "t.der")
        let certificate = try #require(listing.certificates.first, "\(listing.failures)")
        #expect(certificate.info.notValidBefore == Date(timeIntervalSince1970: 1_769_860_800))
        #expect(certificate.info.notValidAfter == Date(timeIntervalSince1970: 1_801_396_800))
        #expect(certificate.info.isSelfSigned)
        #expect(certificate.info.notes.contains { $0.contains("\"2601311200Z\" is not in the DER form") }, "\(certificate.info.notes)")
        let error = try #require(certificate.unsupported)
        #expect(error.code == .unsupportedCertificate)
        #expect(error.description.contains("swift-certificates cannot parse it"), "\(error)")
        #expect(error.description.contains("it deviates from DER"), "\(error)")
        #expect(throws: CertificateLoadingError.self) { try CertificateLoader.certificates(from: der, origin: "t.der") }
    }

    @Test("a v2 certificate with unique identifiers is listed with its facts")
    func v2UniqueIdentifiers() throws {
        let der = try Self.reencoded { fields in
            fields[0] = Self.tlv(0xA0, Self.tlv(0x02, [0x01]))  // v2
            fields.removeLast()  // extensions are v3 only
            fields.append(Self.tlv(0x81, [0x00, 0x01, 0x02]))  // issuerUniqueID [1] IMPLICIT BIT STRING
            fields.append(Self.tlv(0x82, [0x00, 0x03, 0x04]))  // subjectUniqueID [2] IMPLICIT BIT STRING
        }
        let listing = CertificateLoader.inspect(from: der, origin: "v2.der")
        let certificate = try #require(listing.certificates.first, "\(listing.failures)")
        #expect(certificate.info.version == 2)
        #expect(certificate.info.subject == "CN=Unusual")
        #expect(certificate.info.isSelfSigned)
        // swift-certificates reads the IMPLICIT [1]/[2] BIT STRINGs as EXPLICIT, so it refuses them: the
        // certificate is listed, and refused for evaluation in words.
        #expect(certificate.certificate == nil)
        #expect(certificate.unsupported?.code == .unsupportedCertificate)
        #expect(certificate.unsupported?.description.contains("swift-certificates cannot parse it") == true, "\(String(describing: certificate.unsupported))")
    }
}
