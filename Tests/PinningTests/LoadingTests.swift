import Crypto
import Foundation
import PinningTestSupport
import SwiftASN1
import Testing
import X509
import _CryptoExtras

@testable import Pinning

// MARK: - Fixtures (private to the Loading tests; PinningTestSupport is being built separately)

/// A certificate with the key that signed it... and the key it holds, so it can issue others.
struct IssuedCertificate {
    var certificate: Certificate
    var key: Certificate.PrivateKey
}

/// Mints certificates at test time with swift-certificates; nothing is checked in.
enum LoadingFixtures {
    static let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))

    static func name(_ commonName: String, organization: String? = nil) throws -> DistinguishedName {
        if let organization {
            return try DistinguishedName {
                OrganizationName(organization)
                CommonName(commonName)
            }
        }
        return try DistinguishedName { CommonName(commonName) }
    }

    static func signatureAlgorithm(for key: Certificate.PrivateKey) -> Certificate.SignatureAlgorithm {
        let publicKey = key.publicKey
        if P384.Signing.PublicKey(publicKey) != nil { return .ecdsaWithSHA384 }
        if P521.Signing.PublicKey(publicKey) != nil { return .ecdsaWithSHA512 }
        if _RSA.Signing.PublicKey(publicKey) != nil { return .sha256WithRSAEncryption }
        if Curve25519.Signing.PublicKey(publicKey) != nil { return .ed25519 }
        return .ecdsaWithSHA256
    }

    /// A self-signed certificate; a CA unless `isCA` is false.
    static func selfSigned(
        _ commonName: String = "Loading Test Root",
        key: Certificate.PrivateKey = Certificate.PrivateKey(P256.Signing.PrivateKey()),
        isCA: Bool = true,
        serial: Certificate.SerialNumber = Certificate.SerialNumber()
    ) throws -> IssuedCertificate {
        let subject = try Self.name(commonName)
        let extensions = try Certificate.Extensions {
            if isCA {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            } else {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
            }
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: serial,
            publicKey: key.publicKey,
            notValidBefore: Self.now - 3600,
            notValidAfter: Self.now + 86_400 * 30,
            issuer: subject,
            subject: subject,
            signatureAlgorithm: Self.signatureAlgorithm(for: key),
            extensions: extensions,
            issuerPrivateKey: key
        )
        return IssuedCertificate(certificate: certificate, key: key)
    }

    /// A certificate issued by `issuer`.
    static func issue(
        _ subject: DistinguishedName,
        by issuer: IssuedCertificate,
        key: Certificate.PrivateKey = Certificate.PrivateKey(P256.Signing.PrivateKey()),
        extensions: Certificate.Extensions
    ) throws -> IssuedCertificate {
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: key.publicKey,
            notValidBefore: Self.now - 3600,
            notValidAfter: Self.now + 86_400 * 30,
            issuer: issuer.certificate.subject,
            subject: subject,
            signatureAlgorithm: Self.signatureAlgorithm(for: issuer.key),
            extensions: extensions,
            issuerPrivateKey: issuer.key
        )
        return IssuedCertificate(certificate: certificate, key: key)
    }

    /// Root → intermediate → leaf (P-256), leaf for `api.example.com`.
    static func chain() throws -> [Certificate] {
        let root = try Self.selfSigned()
        let intermediate = try Self.issue(
            try Self.name("Loading Test Intermediate"),
            by: root,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            }
        )
        let leaf = try Self.issue(
            try Self.name("api.example.com", organization: "Example"),
            by: intermediate,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("api.example.com")])
            }
        )
        return [leaf.certificate, intermediate.certificate, root.certificate]
    }

    static func pem(_ certificates: [Certificate], lineEnding: String = "\n") throws -> String {
        try certificates.map { try $0.serializeAsPEM().pemString + "\n" }.joined()
            .replacingOccurrences(of: "\n", with: lineEnding)
    }

    // MARK: Hand-made ASN.1

    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        var length: [UInt8]
        if content.count < 0x80 {
            length = [UInt8(content.count)]
        } else {
            var value = content.count
            var bytes: [UInt8] = []
            while value > 0 {
                bytes.insert(UInt8(value & 0xFF), at: 0)
                value >>= 8
            }
            length = [0x80 | UInt8(bytes.count)] + bytes
        }
        return [tag] + length + content
    }

    /// An indefinite-length constructed element.
    static func indefiniteTLV(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag, 0x80] + content + [0x00, 0x00]
    }

    static let signedDataOID: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02]
    static let dataOID: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01]

    /// A degenerate (certificates-only) SignedData, like `openssl crl2pkcs7 -nocrl`, built by hand.
    ///
    /// - Parameters:
    ///   - indefinite: BER: every constructed wrapper uses an indefinite length (the certificates stay DER).
    ///   - extraChoices: Non-certificate CertificateChoices to put before the certificates (must be skipped).
    ///   - includeCertificateSet: false for a SignedData without the [0] certificates field.
    static func pkcs7(
        _ certificates: [Certificate],
        indefinite: Bool = false,
        extraChoices: [[UInt8]] = [],
        includeCertificateSet: Bool = true
    ) -> [UInt8] {
        let wrap = { (tag: UInt8, content: [UInt8]) -> [UInt8] in
            indefinite ? Self.indefiniteTLV(tag, content) : Self.tlv(tag, content)
        }
        let version: [UInt8] = [0x02, 0x01, 0x01]
        let digestAlgorithms = wrap(0x31, [])
        let encapContentInfo = wrap(0x30, Self.dataOID)
        let certificateSet = wrap(0xA0, extraChoices.flatMap { $0 } + certificates.flatMap { $0.derBytes })
        let signerInfos = wrap(0x31, [])
        let signedData = wrap(
            0x30,
            version + digestAlgorithms + encapContentInfo + (includeCertificateSet ? certificateSet : [])
                + signerInfos
        )
        return wrap(0x30, Self.signedDataOID + wrap(0xA0, signedData))
    }

    // MARK: Files

    /// A fresh temporary directory.
    static func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory
            .appendingPathComponent("pinning-loading-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func remove(_ path: String) {
        do {
            try FileManager.default.removeItem(atPath: path)
        } catch {
            // A leftover temporary directory is harmless.
        }
    }

    @discardableResult
    static func write(_ bytes: [UInt8], to directory: String, _ name: String) throws -> String {
        let path = directory + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @discardableResult
    static func write(_ text: String, to directory: String, _ name: String) throws -> String {
        try Self.write(Array(text.utf8), to: directory, name)
    }

    // MARK: openssl

    static let opensslPath = TestTools.opensslPath
    static let hasOpenSSL = TestTools.opensslAvailable

    struct CommandFailed: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs `openssl ARGS` with `input` on stdin and returns stdout; throws when it exits non-zero.
    static func openssl(_ arguments: [String], input: [UInt8] = []) async throws -> [UInt8] {
        let result = try await TestTools.run(self.opensslPath, arguments, input: Data(input))
        guard result.exited, result.status == 0 else {
            throw CommandFailed(description: "openssl \(arguments.joined(separator: " ")) failed: \(result.stderr)")
        }
        return Array(result.stdoutData)
    }
}

/// Asserts that loading fails with `code`, that the error names `origin`, and that its problem mentions
/// each of `mentions`.
func expectLoadingError<T>(
    _ code: CertificateLoadingError.Code,
    origin: String,
    mentions: [String] = [],
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> T
) {
    do {
        _ = try body()
        Issue.record("expected a \(code) error, but loading succeeded", sourceLocation: sourceLocation)
    } catch let error as CertificateLoadingError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(error.origin == origin, "\(error)", sourceLocation: sourceLocation)
        #expect(error.description.hasPrefix(origin + ": "), "\(error)", sourceLocation: sourceLocation)
        for text in mentions {
            #expect(error.problem.contains(text), "\(error) should mention \"\(text)\"", sourceLocation: sourceLocation)
        }
    } catch {
        Issue.record("expected a CertificateLoadingError, got \(error)", sourceLocation: sourceLocation)
    }
}

// MARK: - Tests

@Suite("Certificate loading")
struct LoadingTests {
    @Test("a DER file holds one certificate")
    func derFile() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let chain = try LoadingFixtures.chain()
        // The extension says PEM, the content is DER: the content decides.
        let path = try LoadingFixtures.write(chain[0].derBytes, to: directory, "leaf.pem")
        #expect(try CertificateLoader.certificates(fromFile: path) == [chain[0]])
        #expect(try CertificateLoader.certificates(atPath: path) == [chain[0]])
    }

    @Test("PEM with one and with several certificates keeps file order")
    func pemSingleAndMultiple() throws {
        let chain = try LoadingFixtures.chain()
        let single = try LoadingFixtures.pem([chain[1]])
        #expect(try CertificateLoader.certificates(from: Array(single.utf8), origin: "single") == [chain[1]])
        let multiple = try LoadingFixtures.pem(chain)
        #expect(try CertificateLoader.certificates(from: Array(multiple.utf8), origin: "multi") == chain)
    }

    @Test("text around and between blocks, CRLF, indentation and trailing whitespace are tolerated")
    func tolerantPEM() throws {
        let chain = try LoadingFixtures.chain()
        let blocks = try chain.map { try $0.serializeAsPEM().pemString }
        let withTrailingSpaces = blocks[1].split(separator: "\n").map { $0 + " \t" }.joined(separator: "\n")
        let text =
            "subject=CN = api.example.com\nissuer=whatever: this is openssl -text style noise\n\n"
            + blocks[0] + "\n\nBag Attributes\n    friendlyName: intermediate\n"
            + withTrailingSpaces + "\n  " + blocks[2] + "\n\ntrailing text without newline"
        #expect(try CertificateLoader.certificates(from: Array(text.utf8), origin: "noise") == chain)
        let crlf = text.replacingOccurrences(of: "\n", with: "\r\n")
        #expect(try CertificateLoader.certificates(from: Array(crlf.utf8), origin: "crlf") == chain)
    }

    @Test("headers inside a block and other labels (keys) are skipped")
    func headersAndOtherLabels() throws {
        let chain = try LoadingFixtures.chain()
        let body = try chain[0].serializeAsPEM().derBytes
        let base64 = Data(body).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        let text =
            "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"
            + "-----BEGIN X509 CERTIFICATE-----\nProc-Type: 4,TEST\nComment: hello\n\n" + base64
            + "\n-----END X509 CERTIFICATE-----\n"
        #expect(try CertificateLoader.certificates(from: Array(text.utf8), origin: "x") == [chain[0]])
    }

    @Test("TRUSTED CERTIFICATE: the certificate is read, OpenSSL's trust settings after it are ignored")
    func trustedCertificate() throws {
        let chain = try LoadingFixtures.chain()
        // X509_CERT_AUX ::= SEQUENCE { trust SEQUENCE OF OBJECT IDENTIFIER (serverAuth) }
        let aux = LoadingFixtures.tlv(0x30, LoadingFixtures.tlv(0x30, [0x06, 0x08, 0x2B, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01]))
        let base64 = Data(chain[2].derBytes + aux).base64EncodedString(options: [.lineLength64Characters])
        let text = "-----BEGIN TRUSTED CERTIFICATE-----\n\(base64)\n-----END TRUSTED CERTIFICATE-----\n"
        #expect(try CertificateLoader.certificates(from: Array(text.utf8), origin: "t") == [chain[2]])
    }

    @Test("PKCS#7 built by hand: DER, BER with indefinite lengths, PEM, and non-certificate choices skipped")
    func pkcs7ByHand() throws {
        let chain = try LoadingFixtures.chain()
        let der = LoadingFixtures.pkcs7(chain)
        #expect(try CertificateLoader.certificates(from: der, origin: "der.p7b") == chain)

        let ber = LoadingFixtures.pkcs7(chain, indefinite: true)
        #expect(ber[1] == 0x80)
        #expect(try CertificateLoader.certificates(from: ber, origin: "ber.p7b") == chain)

        // [1] v1AttrCert and [3] other are CertificateChoices that are not X.509 certificates.
        let withOthers = LoadingFixtures.pkcs7(
            chain,
            indefinite: true,
            extraChoices: [LoadingFixtures.tlv(0xA1, [0x05, 0x00]), LoadingFixtures.tlv(0xA3, [0x05, 0x00])]
        )
        #expect(try CertificateLoader.certificates(from: withOthers, origin: "others.p7b") == chain)

        let pem =
            "-----BEGIN PKCS7-----\n"
            + Data(ber).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
            + "\n-----END PKCS7-----\n"
        #expect(try CertificateLoader.certificates(from: Array(pem.utf8), origin: "p7.pem") == chain)
    }

    @Test("directories: only .cer/.crt/.der/.pem (any case), sorted by name, not recursive")
    func directoryLoading() async throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let chain = try LoadingFixtures.chain()
        let other = try LoadingFixtures.selfSigned("Other").certificate
        try LoadingFixtures.write(chain[2].derBytes, to: directory, "4-root.Der")
        try LoadingFixtures.write(try LoadingFixtures.pem([chain[0]]), to: directory, "1-leaf.PEM")
        try LoadingFixtures.write(try LoadingFixtures.pem([chain[1]]), to: directory, "2-intermediate.crt")
        try LoadingFixtures.write(other.derBytes, to: directory, "3-other.cer")
        try LoadingFixtures.write(try LoadingFixtures.pem([other]), to: directory, "0-ignored.txt")
        try LoadingFixtures.write(LoadingFixtures.pkcs7(chain), to: directory, "0-ignored.p7b")
        try LoadingFixtures.write("not a certificate", to: directory, "pem")  // no extension
        let subdirectory = directory + "/0-sub.pem"
        try FileManager.default.createDirectory(atPath: subdirectory, withIntermediateDirectories: false)
        try LoadingFixtures.write(try LoadingFixtures.pem([other]), to: subdirectory, "deep.pem")

        // A FIFO with a certificate name must be skipped, not opened (that would block forever).
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/mkfifo") {
            let mkfifo = try await TestTools.run("/usr/bin/mkfifo", [directory + "/0-fifo.pem"])
            #expect(mkfifo.exited && mkfifo.status == 0, "\(mkfifo)")
        }
        // Symbolic links are followed, as in /etc/ssl/certs.
        try FileManager.default.createSymbolicLink(atPath: directory + "/5-link.pem", withDestinationPath: directory + "/1-leaf.PEM")

        let expected = [chain[0], chain[1], other, chain[2], chain[0]]
        #expect(try CertificateLoader.certificates(inDirectory: directory) == expected)
        #expect(try CertificateLoader.certificates(atPath: directory + "/") == expected)
    }

    // MARK: Bad input

    @Test("an empty file, a whitespace-only input")
    func emptyInput() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let path = try LoadingFixtures.write([], to: directory, "empty.pem")
        expectLoadingError(.emptyInput, origin: path, mentions: ["empty"]) {
            try CertificateLoader.certificates(fromFile: path)
        }
        expectLoadingError(.emptyInput, origin: "<stdin>", mentions: ["whitespace"]) {
            try CertificateLoader.certificates(from: Array(" \r\n\t\n".utf8), origin: "<stdin>")
        }
    }

    @Test("random bytes and plain text are not certificates, and the message says what was seen")
    func randomBytesAndText() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        var generator = SplitMix64(seed: 42)
        var random = (0..<512).map { _ in UInt8.random(in: 0...255, using: &generator) }
        random[0] = 0x89  // like a PNG: not a SEQUENCE
        let path = try LoadingFixtures.write(random, to: directory, "random.der")
        expectLoadingError(.malformedDER, origin: path, mentions: ["not a DER certificate", "0x89"]) {
            try CertificateLoader.certificates(fromFile: path)
        }
        let textPath = try LoadingFixtures.write("hello world\n", to: directory, "hello.crt")
        expectLoadingError(.malformedDER, origin: textPath, mentions: ["looks like text", "hello world"]) {
            try CertificateLoader.certificates(fromFile: textPath)
        }
    }

    @Test("truncated DER says it is truncated")
    func truncatedDER() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let der = try LoadingFixtures.chain()[0].derBytes
        let path = try LoadingFixtures.write(Array(der.prefix(der.count - 20)), to: directory, "cut.der")
        expectLoadingError(.malformedDER, origin: path, mentions: ["truncated"]) {
            try CertificateLoader.certificates(fromFile: path)
        }
        let trailing = try LoadingFixtures.write(der + [0x00, 0x01], to: directory, "trailing.der")
        expectLoadingError(.malformedDER, origin: trailing, mentions: ["2 bytes of trailing data"]) {
            try CertificateLoader.certificates(fromFile: trailing)
        }
    }

    @Test("PEM with bad base64 names the block and its label")
    func badBase64() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let chain = try LoadingFixtures.chain()
        let blocks = try chain.map { try $0.serializeAsPEM().pemString }
        var lines = blocks[1].split(separator: "\n").map(String.init)
        lines[3] = "!!!!" + lines[3].dropFirst(4)
        let text = blocks[0] + "\n" + lines.joined(separator: "\n") + "\n" + blocks[2] + "\n"
        let path = try LoadingFixtures.write(text, to: directory, "x.pem")
        expectLoadingError(.malformedPEM, origin: path, mentions: ["block 2 (CERTIFICATE) is not valid base64"]) {
            try CertificateLoader.certificates(fromFile: path)
        }
        // Bad padding / length.
        let badLength = "-----BEGIN CERTIFICATE-----\nMIIB=\n-----END CERTIFICATE-----\n"
        expectLoadingError(.malformedPEM, origin: "pad", mentions: ["block 1 (CERTIFICATE) is not valid base64"]) {
            try CertificateLoader.certificates(from: Array(badLength.utf8), origin: "pad")
        }
        #expect(
            CertificateLoadingError(code: .malformedPEM, origin: "/tmp/x.pem", problem: "block 2 (CERTIFICATE) is not valid base64").description
                == "/tmp/x.pem: malformed PEM: block 2 (CERTIFICATE) is not valid base64")
    }

    @Test("valid base64 that is not a certificate is malformed DER naming the block")
    func pemBlockNotACertificate() throws {
        let text = "-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n"
        expectLoadingError(.malformedDER, origin: "b", mentions: ["block 1 (CERTIFICATE) is not a valid certificate"]) {
            try CertificateLoader.certificates(from: Array(text.utf8), origin: "b")
        }
    }

    @Test("a PEM file with only a private key has no certificates and says what it found")
    func onlyPrivateKey() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let key = P256.Signing.PrivateKey()
        let path = try LoadingFixtures.write(key.pemRepresentation, to: directory, "key.pem")
        expectLoadingError(.noCertificates, origin: path, mentions: ["found PRIVATE KEY, no CERTIFICATE"]) {
            try CertificateLoader.certificates(fromFile: path)
        }
    }

    @Test("missing and mismatched END lines")
    func missingAndMismatchedEnd() throws {
        let chain = try LoadingFixtures.chain()
        let block = try chain[0].serializeAsPEM().pemString
        let noEnd = block.replacingOccurrences(of: "-----END CERTIFICATE-----", with: "")
        expectLoadingError(.malformedPEM, origin: "a.pem", mentions: ["block 1 (CERTIFICATE) has no -----END CERTIFICATE----- line"]) {
            try CertificateLoader.certificates(from: Array(noEnd.utf8), origin: "a.pem")
        }
        let twoBlocks = noEnd + "\n" + block
        expectLoadingError(.malformedPEM, origin: "b.pem", mentions: ["block 1 (CERTIFICATE) has no -----END"]) {
            try CertificateLoader.certificates(from: Array(twoBlocks.utf8), origin: "b.pem")
        }
        let mismatched = block.replacingOccurrences(of: "-----END CERTIFICATE-----", with: "-----END PRIVATE KEY-----")
        expectLoadingError(.malformedPEM, origin: "c.pem", mentions: ["block 1 (CERTIFICATE) ends with -----END PRIVATE KEY-----"]) {
            try CertificateLoader.certificates(from: Array(mismatched.utf8), origin: "c.pem")
        }
        let noBeginLine = "-----BEGIN CERTIFICATE\nAAAA\n"
        expectLoadingError(.malformedPEM, origin: "d.pem", mentions: ["no well-formed -----BEGIN"]) {
            try CertificateLoader.certificates(from: Array(noBeginLine.utf8), origin: "d.pem")
        }
    }

    @Test("a UTF-8 byte order mark before the first block is not text: every certificate is read (as OpenSSL does)")
    func byteOrderMark() throws {
        let chain = try LoadingFixtures.chain()
        let text = try chain.map { try $0.serializeAsPEM().pemString }.joined(separator: "\n") + "\n"
        let read = try CertificateLoader.certificates(from: [0xEF, 0xBB, 0xBF] + Array(text.utf8), origin: "bom.pem")
        #expect(read == chain)
        // With CRLF line endings too.
        let crlf = text.replacingOccurrences(of: "\n", with: "\r\n")
        #expect(try CertificateLoader.certificates(from: [0xEF, 0xBB, 0xBF] + Array(crlf.utf8), origin: "bom.pem") == chain)
    }

    @Test("a BEGIN marker with text before it on its line is a bad block, never a certificate silently missing")
    func hiddenBeginLine() throws {
        let chain = try LoadingFixtures.chain()
        let blocks = try chain.map { try $0.serializeAsPEM().pemString }
        // The first BEGIN line has text before it, so it does not open a block: its END line says so.
        let text = "x" + blocks[0] + "\n" + blocks[1] + "\n"
        expectLoadingError(.malformedPEM, origin: "e.pem", mentions: ["the -----BEGIN line at line 1 has text before it on its line"]) {
            try CertificateLoader.certificates(from: Array(text.utf8), origin: "e.pem")
        }
        // A byte order mark anywhere but the start of the file stays text, so the same holds for it.
        let late = blocks[0] + "\n" + "\u{FEFF}" + blocks[1] + "\n"
        expectLoadingError(.malformedPEM, origin: "f.pem", mentions: ["has text before it on its line, so the block it starts"]) {
            try CertificateLoader.certificates(from: Array(late.utf8), origin: "f.pem")
        }
    }

    @Test("a stray END line (a duplicated one in a hand-made bundle) is ignored, as OpenSSL ignores it")
    func strayEndLine() throws {
        let chain = try LoadingFixtures.chain()
        let blocks = try chain.map { try $0.serializeAsPEM().pemString }
        let text = blocks[0] + "\n-----END CERTIFICATE-----\n" + blocks[1] + "\n" + blocks[2] + "\n-----END CERTIFICATE-----\n"
        #expect(try CertificateLoader.certificates(from: Array(text.utf8), origin: "g.pem") == chain)
        // A comment that mentions a BEGIN marker, then a real block, reads as before.
        let commented = "# paste the -----BEGIN CERTIFICATE----- block below\n" + blocks[0] + "\n"
        #expect(try CertificateLoader.certificates(from: Array(commented.utf8), origin: "h.pem") == [chain[0]])
    }

    @Test("PKCS#7 that is not signedData, or holds no certificates")
    func badPKCS7() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let data = LoadingFixtures.tlv(0x30, LoadingFixtures.dataOID + LoadingFixtures.tlv(0xA0, [0x04, 0x00]))
        let path = try LoadingFixtures.write(data, to: directory, "data.p7b")
        expectLoadingError(.malformedPKCS7, origin: path, mentions: ["1.2.840.113549.1.7.1 (data), not signedData"]) {
            try CertificateLoader.certificates(fromFile: path)
        }
        let empty = try LoadingFixtures.write(LoadingFixtures.pkcs7([], includeCertificateSet: false), to: directory, "empty.p7b")
        expectLoadingError(.noCertificates, origin: empty, mentions: ["holds no certificates"]) {
            try CertificateLoader.certificates(fromFile: empty)
        }
        let emptySet = try LoadingFixtures.write(LoadingFixtures.pkcs7([], indefinite: true), to: directory, "empty-set.p7b")
        expectLoadingError(.noCertificates, origin: emptySet, mentions: ["no X.509 certificates"]) {
            try CertificateLoader.certificates(fromFile: emptySet)
        }
        let chain = try LoadingFixtures.chain()
        var truncated = LoadingFixtures.pkcs7(chain, indefinite: true)
        truncated.removeLast(3)
        let cut = try LoadingFixtures.write(truncated, to: directory, "cut.p7b")
        expectLoadingError(.malformedPKCS7, origin: cut, mentions: ["truncated"]) {
            try CertificateLoader.certificates(fromFile: cut)
        }
        // A certificate inside the bundle is broken: its position is named.
        var broken = LoadingFixtures.pkcs7(chain)
        let second = chain[1].derBytes
        if let start = Self.firstIndex(of: second, in: broken) {
            broken[start + 8] ^= 0xFF
        }
        expectLoadingError(.malformedPKCS7, origin: "broken", mentions: ["certificate 2 in the PKCS#7 bundle"]) {
            try CertificateLoader.certificates(from: broken, origin: "broken")
        }
    }

    static func firstIndex(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        return (0...(haystack.count - needle.count)).first { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    @Test("hostile nesting of indefinite lengths is refused, not recursed into")
    func deepNesting() {
        var bytes = [0x30, 0x80] + LoadingFixtures.signedDataOID
        for _ in 0..<10_000 { bytes += [0xA0, 0x80] }
        expectLoadingError(.malformedPKCS7, origin: "deep", mentions: ["deeper than"]) {
            try CertificateLoader.certificates(from: bytes, origin: "deep")
        }
    }

    @Test("a file over the size limit is refused before it is read")
    func fileTooLarge() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let path = try LoadingFixtures.write([], to: directory, "huge.pem")
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: UInt64(CertificateLoader.maximumFileSize + 1))  // sparse: no disk used
        try handle.close()
        expectLoadingError(.fileTooLarge, origin: path, mentions: ["\(CertificateLoader.maximumFileSize + 1) bytes"]) {
            try CertificateLoader.certificates(fromFile: path)
        }
    }

    @Test("a nonexistent path, a directory given as a file, a file given as a directory")
    func wrongPaths() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let missing = directory + "/nope.pem"
        expectLoadingError(.unreadableFile, origin: missing, mentions: ["no such file"]) {
            try CertificateLoader.certificates(fromFile: missing)
        }
        expectLoadingError(.unreadableFile, origin: missing) {
            try CertificateLoader.certificates(atPath: missing)
        }
        expectLoadingError(.unreadableFile, origin: directory, mentions: ["directory"]) {
            try CertificateLoader.certificates(fromFile: directory)
        }
        let file = try LoadingFixtures.write(try LoadingFixtures.chain()[0].derBytes, to: directory, "a.der")
        expectLoadingError(.notADirectory, origin: file) {
            try CertificateLoader.certificates(inDirectory: file)
        }
        // A path through a file: the system's words for why (ENOTDIR), not "no such file or directory".
        expectLoadingError(.unreadableFile, origin: file + "/x.pem", mentions: ["not a directory"]) {
            try CertificateLoader.certificates(atPath: file + "/x.pem")
        }
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: false)
        expectLoadingError(.noCertificates, origin: directory + "/sub", mentions: [".cer, .crt, .der or .pem"]) {
            try CertificateLoader.certificates(inDirectory: directory + "/sub")
        }
    }

    @Test("the reader judges the file it opened: a name swapped between a file and a directory is never read as the other")
    func readerJudgesWhatItOpened() throws {
        // A symbolic link flipped between a small file and a directory while the reader reads it. A reader that
        // stats the path and then opens it sees the file and reads the directory (read(2): "is a directory"), or
        // the other way round; one that opens first and judges the descriptor says "the path is a directory" or
        // returns the file's bytes, nothing else.
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let file = try LoadingFixtures.write("small", to: directory, "file")
        let subdirectory = directory + "/dir"
        try FileManager.default.createDirectory(atPath: subdirectory, withIntermediateDirectories: false)
        let link = directory + "/link"
        #expect(symlink(file, link) == 0)
        final class Flag: @unchecked Sendable {
            private let lock = NSLock()
            private var value = false
            var isSet: Bool { self.lock.withLock { self.value } }
            func set() { self.lock.withLock { self.value = true } }
        }
        let stop = Flag()
        let stopped = DispatchSemaphore(value: 0)
        let temporary = directory + "/link.tmp"
        Thread.detachNewThread {
            var toDirectory = true
            while !stop.isSet {
                unlink(temporary)
                _ = symlink(toDirectory ? subdirectory : file, temporary)
                _ = rename(temporary, link)
                toDirectory.toggle()
            }
            stopped.signal()
        }
        defer {
            stop.set()
            stopped.wait()
        }
        var files = 0
        var directories = 0
        // At least 20,000 reads, and on until both forms have been read (the swapping thread may start late on a
        // loaded machine), at most 1,000,000.
        for read in 0..<1_000_000 where read < 20_000 || files == 0 || directories == 0 {
            do {
                let bytes = try BoundedFileReader.read(atPath: link, maximumSize: 1024)
                #expect(bytes == Array("small".utf8))
                files += 1
            } catch {
                guard error.code == .unreadableFile, error.problem == "the path is a directory, not a file" else {
                    Issue.record("a read of the swapped name was judged as another file: \(error)")
                    return
                }
                directories += 1
            }
        }
        // Not vacuous: the name was read as each of the two things it was swapped between.
        #expect(files > 0 && directories > 0, "\(files) reads of the file, \(directories) of the directory")
    }

    #if os(Linux)
        @Test("a read(2) that fails is told by its own errno: /proc/self/mem at offset 0 (never mapped) answers EIO")
        func readFailureWords() throws {
            // fstat calls it a regular file of 0 bytes; the first read fails with EIO, copied right after the call.
            // A wording check: it passed before errno was copied at once too (no call between clobbered it then).
            #expect(throws: CertificateLoadingError(code: .unreadableFile, origin: "/proc/self/mem", problem: "the file cannot be read (input/output error)")) {
                try BoundedFileReader.read(atPath: "/proc/self/mem", maximumSize: 1024)
            }
        }
    #endif

    @Test("the FIFO bound is handed in by the program: what PINNING_INPUT_WAIT's text means, and a FIFO with no writer told within it")
    func waitBoundIsHandedIn() throws {
        #expect(BoundedFileReader.waitSeconds(fromVariable: nil) == 30)
        #expect(BoundedFileReader.waitSeconds(fromVariable: "0.5") == 0.5)
        #expect(BoundedFileReader.waitSeconds(fromVariable: "3600") == 3600)
        for text in ["", "abc", "0", "0.05", "3601", "nan", "inf", "-1"] {
            #expect(BoundedFileReader.waitSeconds(fromVariable: text) == 30, "\(text)")
        }
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let fifo = directory + "/fifo.pem"
        #expect(mkfifo(fifo, 0o600) == 0)
        // The bound the reader is handed (the process-wide one is left alone: other tests read FIFOs beside this one).
        let bound = BoundedFileReader.waitSeconds(fromVariable: "0.2")
        expectLoadingError(.unreadableFile, origin: fifo, mentions: ["nothing was written to this FIFO or pipe within 0.2 s", "PINNING_INPUT_WAIT"]) {
            try BoundedFileReader.read(atPath: fifo, maximumSize: 1024, waitSeconds: bound)
        }
    }

    @Test("the core reads no environment but the platform trust store's SSL_CERT_FILE and SSL_CERT_DIR (Docs/Architecture.md)")
    func coreReadsNoEnvironment() throws {
        // Sources/Pinning, found from this file: Tests/PinningTests/LoadingTests.swift.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let sources = root.appendingPathComponent("Sources/Pinning").path
        let enumerator = try #require(FileManager.default.enumerator(atPath: sources))
        var readers: [String] = []
        var files = 0
        while let name = enumerator.nextObject() as? String {
            guard name.hasSuffix(".swift") else { continue }
            files += 1
            let text = try String(contentsOfFile: sources + "/" + name, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains("getenv(") || line.contains("processInfo.environment") || line.contains("environ[") {
                // The one documented reader: TrustRoots.platform(environment:), whose default argument is the
                // process's environment (OpenSSL's variables for the platform store).
                if name == "Loading/TrustRoots.swift" && line.contains("ProcessInfo.processInfo.environment") { continue }
                readers.append("\(name):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(files > 20, "Sources/Pinning was not found from \(#filePath)")
        #expect(readers.isEmpty, "the core reads the environment: \(readers)")
    }

    @Test("a certificate file whose name is not UTF-8 is refused naming the directory and the name; other names are left alone")
    func nameNotUTF8InDirectory() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        // b\xFF.pem and c\x1B\xFE.txt, made with open(2): no String can name them.
        func create(_ name: [UInt8], _ contents: [UInt8]) throws {
            let path = Array(directory.utf8).map { CChar(bitPattern: $0) } + [CChar(bitPattern: 0x2F)] + name.map { CChar(bitPattern: $0) } + [0]
            let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
            try #require(descriptor >= 0)
            _ = contents.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            close(descriptor)
        }
        let chain = try LoadingFixtures.chain()
        try create(Array("a.pem".utf8), Array(try LoadingFixtures.pem([chain[0]]).utf8))
        try create([0x63, 0x1B, 0xFE] + Array(".txt".utf8), Array("not read".utf8))
        #expect(try CertificateLoader.certificates(inDirectory: directory) == [chain[0]], "a name the loader does not read stays unread")
        try create([0x62, 0xFF] + Array(".pem".utf8), Array(try LoadingFixtures.pem([chain[1]]).utf8))
        let entries = try DirectoryListing.entries(atPath: directory)
        // ESC is a character (VisibleText's \u{1b}), 0xFF and 0xFE are bytes that are not UTF-8 (\xNN).
        #expect(Set(entries.map(\.escaped)) == ["a.pem", "b\\xFF.pem", "c\\u{1b}\\xFE.txt"])
        #expect(entries.filter { $0.name == nil }.count == 2)
        let problem = "the file name is not UTF-8; rename it (a file of this directory is read under its exact name or refused, never skipped)"
        expectLoadingError(.unreadableFile, origin: directory + "/b\\xFF.pem", mentions: [problem]) {
            try CertificateLoader.certificates(inDirectory: directory)
        }
        expectLoadingError(.unreadableFile, origin: directory + "/b\\xFF.pem", mentions: [problem]) {
            try TrustRoots.load(atPath: directory)
        }
    }

    @Test("a *.pem in SSL_CERT_DIR whose name is not UTF-8 is skipped and reported (escaped); the directory's other roots are kept")
    func platformDirectoryNameNotUTF8() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let roots = try (0..<2).map { try LoadingFixtures.selfSigned("Root \($0)").certificate }
        try LoadingFixtures.write(try LoadingFixtures.pem([roots[0]]), to: directory, "good.pem")
        // b\xFF.pem, made with open(2): no String can name it.
        let name: [UInt8] = [0x62, 0xFF] + Array(".pem".utf8)
        let path = Array(directory.utf8).map { CChar(bitPattern: $0) } + [CChar(bitPattern: 0x2F)] + name.map { CChar(bitPattern: $0) } + [0]
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        try #require(descriptor >= 0)
        let contents = Array(try LoadingFixtures.pem([roots[1]]).utf8)
        let written = contents.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        try #require(written == contents.count)
        let loaded = TrustRoots.platform(environment: ["SSL_CERT_FILE": directory + "/none.pem", "SSL_CERT_DIR": directory])
        #expect(loaded.certificates == [roots[0]])
        #expect(loaded.sources == [directory])
        #expect(loaded.skipped.map(\.origin) == [directory + "/none.pem", directory + "/b\\xFF.pem"], "\(loaded.skipped)")
        #expect(loaded.skipped.map(\.code) == [.unreadableFile, .unreadableFile])
        #expect(loaded.skipped.last?.problem == "the file name is not UTF-8; skipped (rename it to have it read)")
        // --roots DIR still refuses the name (TrustRoots.load): only the platform store, which never throws, skips it.
        #expect(throws: CertificateLoadingError.self) { try TrustRoots.load(atPath: directory) }
    }

    @Test("a name with a control or invisible character is refused in a certificate directory and skipped in the platform store, named escaped")
    func nameWithHiddenCharacterInDirectory() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let roots = try (0..<2).map { try LoadingFixtures.selfSigned("Root \($0)").certificate }
        try LoadingFixtures.write(try LoadingFixtures.pem([roots[0]]), to: directory, "good.pem")
        try LoadingFixtures.write(try LoadingFixtures.pem([roots[1]]), to: directory, "b\u{1B}[2J\u{202E}.pem")
        let shown = directory + "/b\\u{1b}[2J\\u{202e}.pem"
        let problem = "the file name has a control or invisible character; rename it (a file of this directory is read under its exact name or refused, never skipped)"
        expectLoadingError(.unreadableFile, origin: shown, mentions: [problem]) {
            try CertificateLoader.certificates(inDirectory: directory)
        }
        expectLoadingError(.unreadableFile, origin: shown, mentions: [problem]) {
            try TrustRoots.load(atPath: directory)
        }
        let loaded = TrustRoots.platform(environment: ["SSL_CERT_FILE": directory + "/none.pem", "SSL_CERT_DIR": directory])
        #expect(loaded.certificates == [roots[0]])
        #expect(loaded.skipped.last?.origin == shown, "\(loaded.skipped)")
        #expect(loaded.skipped.last?.problem == "the file name has a control or invisible character; skipped (rename it to have it read)")
        // A name outside ASCII that shows is read like any other.
        try FileManager.default.removeItem(atPath: directory + "/b\u{1B}[2J\u{202E}.pem")
        try LoadingFixtures.write(try LoadingFixtures.pem([roots[1]]), to: directory, "racine-é-例.pem")
        #expect(Set(try CertificateLoader.certificates(inDirectory: directory)) == Set(roots))
    }

    @Test("a directory with a bad file fails naming that file")
    func directoryWithBadFile() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let chain = try LoadingFixtures.chain()
        try LoadingFixtures.write(try LoadingFixtures.pem([chain[0]]), to: directory, "a.pem")
        let bad = try LoadingFixtures.write("-----BEGIN CERTIFICATE-----\n@@@@\n-----END CERTIFICATE-----\n", to: directory, "b.pem")
        expectLoadingError(.malformedPEM, origin: bad, mentions: ["block 1 (CERTIFICATE)"]) {
            try CertificateLoader.certificates(inDirectory: directory)
        }
    }

    @Test("an unsupported key type is reported as such")
    func unsupportedKey() throws {
        // Rewrite the SPKI algorithm of a P-256 certificate to Ed448 (1.3.101.113): swift-certificates refuses it.
        var der = try LoadingFixtures.chain()[0].derBytes
        let p256Algorithm: [UInt8] = [0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]
        let index = try #require(LoadingTests.firstIndex(of: p256Algorithm, in: der))
        // Same length: 06 07 <1.3.101.113 padded into an unknown 7-byte arc sequence>.
        der.replaceSubrange(index..<(index + 9), with: [0x06, 0x07, 0x2B, 0x65, 0x71, 0x81, 0x80, 0x80, 0x01])
        expectLoadingError(.unsupportedKey, origin: "k", mentions: ["P-256, P-384 and P-521, RSA and Ed25519"]) {
            try CertificateLoader.certificates(from: der, origin: "k")
        }
    }

    @Test("the bytes API refuses more than the size limit")
    func bytesTooLarge() {
        let bytes = [UInt8](repeating: 0x30, count: CertificateLoader.maximumFileSize + 1)
        expectLoadingError(.fileTooLarge, origin: "big") {
            try CertificateLoader.certificates(from: bytes, origin: "big")
        }
    }

    @Test("2,000 seeded mutations of DER, PEM and PKCS#7 inputs either load or throw a loading error")
    func mutations() throws {
        let chain = try LoadingFixtures.chain()
        let inputs: [[UInt8]] = [
            chain[0].derBytes,
            Array(try LoadingFixtures.pem(chain).utf8),
            LoadingFixtures.pkcs7(chain),
            LoadingFixtures.pkcs7(chain, indefinite: true),
        ]
        var generator = SplitMix64(seed: 0x5EED)
        var loaded = 0
        var failed = 0
        for round in 0..<2_000 {
            var bytes = inputs[round % inputs.count]
            let position = Int.random(in: 0..<bytes.count, using: &generator)
            switch Int.random(in: 0..<3, using: &generator) {
            case 0: bytes[position] ^= UInt8.random(in: 1...255, using: &generator)
            case 1: bytes.removeSubrange(position...)
            default: bytes[position] = [0x00, 0x80, 0xFF, 0x30, 0x0A][Int.random(in: 0..<5, using: &generator)]
            }
            do {
                let certificates = try CertificateLoader.certificates(from: bytes, origin: "mutant-\(round)")
                #expect(!certificates.isEmpty)
                for certificate in certificates {
                    _ = CertificateInfo(certificate)
                }
                loaded += 1
            } catch {
                #expect(error.origin == "mutant-\(round)")
                #expect(!error.problem.isEmpty)
                // Words for the user: never a library's type name (`ASN1Error.…`, `CertificateError.…`) or the
                // source location its description ends with.
                #expect(!error.problem.contains("Error.") && !error.problem.contains(".swift:"), "\(error.problem)")
                failed += 1
            }
            // The tolerant path must hold up too, with the same words.
            for entry in CertificateParser.entries(from: bytes, origin: "mutant-\(round)") {
                if case .failure(let problem) = entry {
                    #expect(!problem.problem.contains("Error.") && !problem.problem.contains(".swift:"), "\(problem.problem)")
                }
            }
        }
        #expect(loaded + failed == 2_000)
        #expect(failed > 0)
    }
}

// MARK: - openssl interoperability

@Suite("Certificate loading: openssl interoperability", .enabled(if: LoadingFixtures.hasOpenSSL, "needs /usr/bin/openssl"))
struct LoadingOpenSSLTests {
    @Test("openssl crl2pkcs7 output loads, DER and PEM")
    func crl2pkcs7() async throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let chain = try LoadingFixtures.chain()
        let chainPath = try LoadingFixtures.write(try LoadingFixtures.pem(chain), to: directory, "chain.pem")
        for format in ["DER", "PEM"] {
            let output = directory + "/chain-\(format).p7b"
            _ = try await LoadingFixtures.openssl(["crl2pkcs7", "-nocrl", "-certfile", chainPath, "-outform", format, "-out", output])
            #expect(try CertificateLoader.certificates(fromFile: output) == chain, "\(format)")
        }
    }

    @Test("openssl -trustout TRUSTED CERTIFICATE loads")
    func trustout() async throws {
        let chain = try LoadingFixtures.chain()
        let trusted = try await LoadingFixtures.openssl(
            ["x509", "-addtrust", "serverAuth", "-trustout"],
            input: Array(try LoadingFixtures.pem([chain[2]]).utf8)
        )
        #expect(String(decoding: trusted, as: UTF8.self).contains("BEGIN TRUSTED CERTIFICATE"))
        #expect(try CertificateLoader.certificates(from: trusted, origin: "trusted") == [chain[2]])
    }
}

// MARK: - TrustRoots

@Suite("Trust roots")
struct TrustRootsTests {
    @Test("a bad block in a bundle is skipped and reported; the others are kept")
    func badBlockSkipped() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let chain = try LoadingFixtures.chain()
        let blocks = try chain.map { try $0.serializeAsPEM().pemString }
        let broken = blocks[1].replacingOccurrences(of: "-----BEGIN CERTIFICATE-----\nMII", with: "-----BEGIN CERTIFICATE-----\n#II")
        let bundle = try LoadingFixtures.write([blocks[0], broken, blocks[2]].joined(separator: "\n"), to: directory, "bundle.crt")
        let roots = try TrustRoots.load(atPath: bundle)
        #expect(roots.certificates == [chain[0], chain[2]])
        #expect(roots.sources == [bundle])
        #expect(roots.skipped.count == 1)
        #expect(roots.skipped.first?.code == .malformedPEM)
        #expect(roots.skipped.first?.origin == bundle)
        #expect(roots.skipped.first?.problem.contains("block 2 (CERTIFICATE)") == true)

        // The platform loader behaves the same with the bundle as SSL_CERT_FILE.
        let platform = TrustRoots.platform(environment: ["SSL_CERT_FILE": bundle, "SSL_CERT_DIR": directory + "/none"])
        #expect(platform.certificates == [chain[0], chain[2]])
        #expect(platform.skipped.map(\.code) == [.malformedPEM, .unreadableFile])
    }

    @Test("SSL_CERT_FILE and SSL_CERT_DIR (colon-separated) are honoured; hash names, .pem and .crt are read")
    func environment() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let roots = try (0..<5).map { try LoadingFixtures.selfSigned("Root \($0)").certificate }
        let bundle = try LoadingFixtures.write(try LoadingFixtures.pem([roots[0], roots[1]]), to: directory, "bundle.txt")
        let first = directory + "/hashed"
        let second = directory + "/more"
        try FileManager.default.createDirectory(atPath: first, withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: second, withIntermediateDirectories: false)
        try LoadingFixtures.write(try LoadingFixtures.pem([roots[2]]), to: first, "5ad8a5d6.0")
        try LoadingFixtures.write(try LoadingFixtures.pem([roots[1]]), to: first, "5ad8a5d6.1")  // duplicate
        try LoadingFixtures.write(try LoadingFixtures.pem([roots[4]]), to: first, "ignored.txt")
        try LoadingFixtures.write("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n", to: first, "5ad8a5d6.r0")
        try LoadingFixtures.write(try LoadingFixtures.pem([roots[3]]), to: second, "three.pem")

        let loaded = TrustRoots.platform(environment: ["SSL_CERT_FILE": bundle, "SSL_CERT_DIR": "\(first)::\(second)"])
        #expect(loaded.certificates == [roots[0], roots[1], roots[2], roots[3]])
        #expect(loaded.sources == [bundle, first, second])
        #expect(loaded.skipped.isEmpty, "\(loaded.skipped)")
    }

    @Test(
        "a store laid out as Debian's (X.pem linked to the real file, a hash link to X.pem, the bundle inside the directory) reads each file once: a bad file is reported once, not per name; a dangling link is reported"
    )
    func linkedFilesReadOnce() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let roots = try (0..<2).map { try LoadingFixtures.selfSigned("Root \($0)").certificate }
        let shared = directory + "/share"
        let certs = directory + "/certs"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: certs, withIntermediateDirectories: false)
        let real = try LoadingFixtures.write(try LoadingFixtures.pem([roots[1]]), to: shared, "Root_1.crt")
        let bad = try LoadingFixtures.write("-----BEGIN CERTIFICATE-----\n#AAA\n-----END CERTIFICATE-----\n", to: shared, "Bad.crt")
        let bundle = try LoadingFixtures.write(try LoadingFixtures.pem(roots), to: certs, "ca-certificates.crt")
        try FileManager.default.createSymbolicLink(atPath: certs + "/Root_1.pem", withDestinationPath: real)
        try FileManager.default.createSymbolicLink(atPath: certs + "/0a1b2c3d.0", withDestinationPath: "Root_1.pem")
        try FileManager.default.createSymbolicLink(atPath: certs + "/Bad.pem", withDestinationPath: bad)
        try FileManager.default.createSymbolicLink(atPath: certs + "/0a1b2c3e.0", withDestinationPath: "Bad.pem")
        try FileManager.default.createSymbolicLink(atPath: certs + "/Gone.pem", withDestinationPath: shared + "/gone.crt")

        let loaded = TrustRoots.platform(environment: ["SSL_CERT_FILE": bundle, "SSL_CERT_DIR": certs])
        #expect(loaded.certificates == roots)
        #expect(loaded.sources == [bundle, certs])
        // The bad file once (under its first name in order, the hash link), the dangling link once.
        #expect(loaded.skipped.map(\.origin) == [certs + "/0a1b2c3e.0", certs + "/Gone.pem"], "\(loaded.skipped)")
        #expect(loaded.skipped.map(\.code) == [.malformedPEM, .unreadableFile], "\(loaded.skipped)")
    }

    @Test("a missing SSL_CERT_FILE is reported, not fatal")
    func missingFile() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let root = try LoadingFixtures.selfSigned().certificate
        try LoadingFixtures.write(root.derBytes, to: directory, "root.crt")
        let loaded = TrustRoots.platform(environment: ["SSL_CERT_FILE": directory + "/missing.pem", "SSL_CERT_DIR": directory])
        #expect(loaded.certificates == [root])
        #expect(loaded.skipped.count == 1)
        #expect(loaded.skipped.first?.code == .unreadableFile)
        #expect(loaded.skipped.first?.origin == directory + "/missing.pem")
    }

    @Test("duplicates are dropped by DER, order is kept")
    func dedupe() throws {
        let a = try LoadingFixtures.selfSigned("A").certificate
        let b = try LoadingFixtures.selfSigned("B").certificate
        #expect(TrustRoots([a, b, a, b, a]).certificates == [a, b])
        #expect(TrustRoots([b, a]).certificates == [b, a])
    }

    @Test("load(atPath:): directories, files without certificates, missing paths")
    func load() throws {
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let chain = try LoadingFixtures.chain()
        try LoadingFixtures.write(chain[2].derBytes, to: directory, "root.der")
        try LoadingFixtures.write("garbage", to: directory, "bad.pem")
        let roots = try TrustRoots.load(atPath: directory)
        #expect(roots.certificates == [chain[2]])
        #expect(roots.sources == [directory])
        #expect(roots.skipped.map(\.origin) == [directory + "/bad.pem"])

        let keyOnly = try LoadingFixtures.write(P256.Signing.PrivateKey().pemRepresentation, to: directory, "key.txt")
        expectLoadingError(.noCertificates, origin: keyOnly, mentions: ["PRIVATE KEY"]) {
            try TrustRoots.load(atPath: keyOnly)
        }
        expectLoadingError(.unreadableFile, origin: directory + "/missing") {
            try TrustRoots.load(atPath: directory + "/missing")
        }
        let empty = directory + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false)
        expectLoadingError(.noCertificates, origin: empty) {
            try TrustRoots.load(atPath: empty)
        }
    }

    @Test(
        "the process-wide platform store loads this machine's CA bundle",
        .enabled(if: FileManager.default.fileExists(atPath: "/etc/ssl/certs/ca-certificates.crt"))
    )
    func processPlatform() {
        let roots = TrustRoots.platform
        #expect(roots.certificates.count > 10)
        #expect(roots.sources.contains("/etc/ssl/certs/ca-certificates.crt"))
        #expect(TrustRoots.platform == roots)
    }
}

// MARK: - Why BERReader stays (Loading/BERReader.swift)

/// The two facts the decision in `BERReader.swift` rests on, so that a swift-asn1 update that changes either
/// shows up here: `BER.parse` reads every vector (so none needs our reader), but it parses certificates inside a
/// bundle too, so one broken certificate fails the whole bundle without saying which.
@Suite("BERReader versus swift-asn1's BER.parse")
struct BERReaderDecisionTests {
    /// The certificates of a SignedData as `BER.parse` sees them.
    static func certificateNodes(_ bytes: [UInt8]) throws -> [ASN1Node] {
        let contentInfo = try BER.parse(bytes)
        guard case .constructed(let info) = contentInfo.content, let content = Array(info).last,
            case .constructed(let explicit) = content.content, let signedDataNode = Array(explicit).first,
            case .constructed(let signedData) = signedDataNode.content,
            let certificates = Array(signedData).first(where: { $0.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) }),
            case .constructed(let set) = certificates.content
        else {
            throw BERShapeError()
        }
        return Array(set)
    }

    /// The bytes parsed, but not into ContentInfo → [0] → SignedData → [0] certificates.
    struct BERShapeError: Error {}

    @Test("BER.parse reads hand-built DER and indefinite-length BER bundles and openssl crl2pkcs7 output")
    func berParseReadsTheVectors() async throws {
        let chain = try LoadingFixtures.chain()
        for bytes in [LoadingFixtures.pkcs7(chain), LoadingFixtures.pkcs7(chain, indefinite: true)] {
            let nodes = try Self.certificateNodes(bytes)
            #expect(try nodes.map { try Certificate(derEncoded: Array($0.encodedBytes)) } == chain)
        }
        guard LoadingFixtures.hasOpenSSL else { return }
        let directory = try LoadingFixtures.temporaryDirectory()
        defer { LoadingFixtures.remove(directory) }
        let chainPath = try LoadingFixtures.write(try LoadingFixtures.pem(chain), to: directory, "chain.pem")
        let output = directory + "/chain.p7b"
        _ = try await LoadingFixtures.openssl(["crl2pkcs7", "-nocrl", "-certfile", chainPath, "-outform", "DER", "-out", output])
        let nodes = try Self.certificateNodes(Array(try Data(contentsOf: URL(fileURLWithPath: output))))
        #expect(try Set(nodes.map { try Certificate(derEncoded: Array($0.encodedBytes)) }) == Set(chain))
    }

    @Test("BER.parse fails a whole bundle for one broken certificate; the loader names the certificate")
    func berParseCannotNameTheBrokenCertificate() throws {
        let chain = try LoadingFixtures.chain()
        var broken = LoadingFixtures.pkcs7(chain)
        let start = try #require(LoadingTests.firstIndex(of: chain[1].derBytes, in: broken))
        broken[start + 8] ^= 0xFF
        #expect(throws: (any Error).self) { try BER.parse(broken) }
        let error = try #require(throws: CertificateLoadingError.self) {
            try CertificateLoader.certificates(from: broken, origin: "broken")
        }
        #expect(error.description.contains("certificate 2 in the PKCS#7 bundle"))
    }
}
