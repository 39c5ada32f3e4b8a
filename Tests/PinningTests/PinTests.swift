import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

@Suite("Pin")
struct PinTests {
    /// 32 distinct bytes and their base64 (44 characters, one '=' of padding).
    static let digest: [UInt8] = (0..<32).map { UInt8($0 * 7 + 3) }
    static let digestBase64 = Data(digest).base64EncodedString()

    static func base64(bytes count: Int) -> String {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 1) }).base64EncodedString()
    }

    // MARK: - Parsing

    @Test("sha256/BASE64 and bare BASE64 are accepted and mean the same digest")
    func accepted() throws {
        #expect(Self.digestBase64.count == 44)
        let prefixed = try Pin("sha256/" + Self.digestBase64)
        let bare = try Pin(Self.digestBase64)
        #expect(prefixed.sha256 == Self.digest)
        #expect(bare == prefixed)
        #expect(prefixed.base64 == Self.digestBase64)
        #expect(prefixed.description == "sha256/" + Self.digestBase64)
        // The text form round-trips.
        #expect(try Pin(prefixed.description) == prefixed)
        #expect(try Pin(sha256Digest: Self.digest) == prefixed)
        // The prefix is case-insensitive, as HPKP wrote it (pin-sha256 is a header name, not a prefix here).
        #expect(try Pin("SHA256/" + Self.digestBase64) == prefixed)
    }

    @Test("curl's sha256//BASE64 (--pinnedpubkey) is the same pin; a digest whose base64 starts with \"/\" keeps one meaning")
    func curlSyntax() throws {
        let pin = try Pin("sha256/" + Self.digestBase64)
        #expect(try Pin("sha256//" + Self.digestBase64) == pin)
        #expect(try Pin("SHA256//" + Self.digestBase64) == pin)
        #expect(try Pin(" sha256//" + Self.digestBase64 + " ") == pin)
        // A digest whose base64 starts with "/" (first byte 0xFC-0xFF): "sha256//…" is then our own form, and
        // curl writes it "sha256///…"; both read as that digest.
        let slashDigest: [UInt8] = [0xFF] + Array(Self.digest.dropFirst())
        let slashBase64 = Data(slashDigest).base64EncodedString()
        #expect(slashBase64.hasPrefix("/"))
        #expect(try Pin("sha256/" + slashBase64).sha256 == slashDigest)
        #expect(try Pin("sha256//" + slashBase64).sha256 == slashDigest)
        #expect(try Pin("sha256//" + slashBase64) == Pin("sha256/" + slashBase64))
    }

    @Test("A bare pin whose base64 happens to start like an algorithm name is still a bare pin")
    func bareBase64ThatLooksPrefixed() throws {
        // "sha1/" + 38 more base64 characters + "=" decodes to exactly 32 bytes.
        let text = "sha1/" + String(repeating: "A", count: 38) + "="
        let decoded = try #require(Data(base64Encoded: text))
        #expect(decoded.count == 32)
        let pin = try Pin(text)
        #expect(pin.sha256 == Array(decoded))
    }

    struct Invalid: Sendable, CustomTestStringConvertible {
        var text: String
        /// Words the `problem` must contain to be useful.
        var problemMentions: [String]
        /// Why the library is known to get this case wrong, if it is.
        var knownIssue: String? = nil
        var testDescription: String { "\"\(self.text.prefix(20))…\" → \(self.problemMentions)" }
    }

    static let invalid: [Invalid] = [
        Invalid(text: "sha1/" + base64(bytes: 20), problemMentions: ["sha1", "sha256"]),
        Invalid(text: "md5/" + base64(bytes: 16), problemMentions: ["md5"]),
        Invalid(text: "sha384/" + base64(bytes: 48), problemMentions: ["sha384"]),
        Invalid(text: "", problemMentions: ["empty"]),
        Invalid(text: "   ", problemMentions: ["empty"]),
        Invalid(text: "sha256/", problemMentions: ["empty"]),
        Invalid(text: "sha256/not base64 at all!", problemMentions: ["base64"]),
        Invalid(text: "sha256/" + String(Self.digestBase64.dropLast()), problemMentions: ["base64"]),
        Invalid(text: "sha256/" + base64(bytes: 31), problemMentions: ["32", "31"]),
        Invalid(text: "sha256/" + base64(bytes: 33), problemMentions: ["32", "33"]),
        // Bare base64 of 31 bytes without a '/': the length is the problem.
        Invalid(text: Data(repeating: 0x41, count: 31).base64EncodedString(), problemMentions: ["32", "31"]),
        // Bare base64 of 31 bytes that happens to contain a '/' early ("ASA/Xn2c…"): only the length is wrong,
        // and the problem must say so rather than call "ASA" an algorithm.
        Invalid(text: base64(bytes: 31), problemMentions: ["32", "31"]),
        Invalid(text: "sha256/" + base64(bytes: 20), problemMentions: ["32", "20"]),
        Invalid(text: "sha256//", problemMentions: ["empty"]),
        Invalid(text: "sha256//" + base64(bytes: 20), problemMentions: ["32", "20"]),
        // curl's list in one text: named as such, not "not valid base64".
        Invalid(text: "sha256//" + Self.digestBase64 + ";sha256//" + Self.digestBase64, problemMentions: [";", "curl", "each pin"]),
    ]

    @Test("Invalid pin texts throw a PinError that says what is wrong", arguments: invalid)
    func rejected(_ invalid: Invalid) {
        if let knownIssue = invalid.knownIssue {
            withKnownIssue(Comment(rawValue: knownIssue)) { Self.checkRejected(invalid) }
        } else {
            Self.checkRejected(invalid)
        }
    }

    static func checkRejected(_ invalid: Invalid) {
        do {
            let pin = try Pin(invalid.text)
            Issue.record("\"\(invalid.text)\" was accepted as \(pin)")
        } catch {
            #expect(error.text == invalid.text)
            for word in invalid.problemMentions {
                #expect(error.problem.localizedCaseInsensitiveContains(word), "problem \"\(error.problem)\" does not mention \(word)")
            }
            #expect(error.description.contains(error.problem))
            #expect(error.description.contains("\"\(invalid.text)\""))
        }
    }

    @Test("Pin(sha256Digest:) accepts exactly 32 bytes", arguments: [0, 20, 31, 33, 64])
    func digestLength(_ count: Int) {
        #expect(throws: PinError.self) { try Pin(sha256Digest: [UInt8](repeating: 1, count: count)) }
    }

    // MARK: - SPKI

    @Test("Pin(spkiOf:) is SHA-256 over the certificate's SubjectPublicKeyInfo DER")
    func spkiPinIsStable() throws {
        let leaf = try TestPKI.selfSigned("localhost")
        let pin = Pin(spkiOf: leaf.certificate)
        #expect(pin == Pin(subjectPublicKeyInfoDER: leaf.certificate.subjectPublicKeyInfoDER))
        #expect(pin.sha256.count == 32)
        // Renewal with the same key keeps the pin; a new key changes it.
        let other = try TestPKI.selfSigned("localhost")
        #expect(Pin(spkiOf: other.certificate) != pin)
        let root = try TestPKI.root("Root")
        let renewed = try TestPKI.crossSign(root, by: root)
        #expect(renewed.certificate != root.certificate)
        #expect(Pin(spkiOf: renewed.certificate) == Pin(spkiOf: root.certificate))
    }

    static let hasOpenSSL = TestTools.opensslAvailable

    @Test(
        "Pin(spkiOf:) equals the pin openssl computes",
        .enabled(if: hasOpenSSL),
        arguments: TestKeyType.allCases
    )
    func matchesOpenSSL(_ key: TestKeyType) async throws {
        let root = try TestPKI.root("OpenSSL Pin Root", key: key)
        let leaf = try TestPKI.leaf("localhost", issuer: root, dnsNames: ["localhost"], key: key)
        let directory = try TemporaryDirectory(prefix: "pin-test")
        defer { directory.remove() }
        let path = try directory.write("leaf.pem", leaf.certificatePEM)

        let expected = try await Self.opensslPin(certificatePath: path)
        #expect(expected.count == 44, "openssl printed \(expected)")
        #expect(Pin(spkiOf: leaf.certificate).base64 == expected, "\(key)")
        #expect(try Pin("sha256/" + expected) == Pin(spkiOf: leaf.certificate))
    }

    /// `openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64`.
    static func opensslPin(certificatePath: String) async throws -> String {
        let result = try await TestTools.run(
            "/bin/sh",
            [
                "-c",
                "/usr/bin/openssl x509 -in \"$1\" -pubkey -noout | /usr/bin/openssl pkey -pubin -outform der | /usr/bin/openssl dgst -sha256 -binary | base64",
                "sh", certificatePath,
            ])
        #expect(result.exited && result.status == 0, "\(result)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

@Suite("SecurityPolicy pinned certificates from a directory")
struct SecurityPolicyDirectoryTests {
    @Test("certificates(inDirectory:) pins every certificate file, and a pinned directory drives certificate mode")
    func directoryPins() async throws {
        let chain = try TestChain(host: "localhost")
        let directory = try TemporaryDirectory(prefix: "pinning-policy-dir")
        defer { directory.remove() }
        try directory.write("b-intermediate.pem", chain.intermediate.certificatePEM)
        try directory.write("a-root.cer", bytes: chain.root.der)
        try directory.write("notes.txt", "not a certificate, and not read")
        let pinned = try SecurityPolicy.certificates(inDirectory: directory.path)
        #expect(pinned == [chain.root.certificate, chain.intermediate.certificate])

        let policy = SecurityPolicy.pinningMode(.certificate, pinnedCertificates: pinned)
        #expect(Set(policy.pinnedPublicKeys) == Set([Pin(spkiOf: chain.root.certificate), Pin(spkiOf: chain.intermediate.certificate)]))
        let trust = ServerTrust(certificates: chain.presented, platformRoots: TrustRoots([chain.root.certificate]))
        #expect(await policy.evaluate(trust, forDomain: "localhost").isTrusted)
    }
}
