import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

/// The rows of Docs/BadInput.md that no other test pins down to the exact text: each row feeds one class of bad
/// input to the library and compares the whole error the user gets. The row id is the one the table quotes.
@Suite("Bad-input catalogue (Docs/BadInput.md)")
struct BadInputCatalogueTests {
    // MARK: - Certificate files (CertificateLoader, and every CLI option that takes a certificate file)

    struct LoadingRow: Sendable, CustomTestStringConvertible {
        var id: String
        var input: @Sendable (CatalogueFixture) -> [UInt8]
        /// The exact `description`, or its exact beginning when `isPrefix` (the rest quotes a dependency).
        var expected: @Sendable (CatalogueFixture) -> String
        var isPrefix = false
        var testDescription: String { self.id }
    }

    static let loadingRows: [LoadingRow] = [
        LoadingRow(id: "file.empty", input: { _ in [] }, expected: { _ in "in: empty input: the input is empty" }),
        LoadingRow(
            id: "file.whitespace",
            input: { _ in Array(" \n\t\r\n".utf8) },
            expected: { _ in "in: empty input: the input contains only whitespace" }
        ),
        LoadingRow(
            id: "file.text",
            input: { _ in Array("hello world\n".utf8) },
            expected: { _ in
                "in: malformed DER: not a DER certificate or PKCS#7 bundle: the data looks like text (\"hello world\") but has no -----BEGIN line"
            }
        ),
        LoadingRow(
            id: "file.binary",
            input: { _ in [0x4d, 0x5a, 0x90, 0x00, 0x03, 0x00, 0x00, 0x00, 0xff, 0xfe, 0x01] },
            expected: { _ in
                "in: malformed DER: not a DER certificate or PKCS#7 bundle: the data starts with byte 0x4d, not a SEQUENCE (0x30)"
            }
        ),
        LoadingRow(
            id: "file.truncatedDER",
            input: { f in Array(f.leafDER.prefix(100)) },
            expected: { f in
                "in: malformed DER: not a DER certificate or PKCS#7 bundle: truncated: the element at offset 0 declares \(f.leafDER.count - 4) bytes of content but only 96 follow"
            }
        ),
        LoadingRow(
            id: "file.badBase64",
            input: { _ in Array("-----BEGIN CERTIFICATE-----\nnot*base64!!\n-----END CERTIFICATE-----\n".utf8) },
            expected: { _ in "in: malformed PEM: block 1 (CERTIFICATE) is not valid base64 (line 2)" }
        ),
        LoadingRow(
            id: "file.base64NotACertificate",
            input: { _ in Array("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8) },
            // SwiftASN1's code in words, then its own reason; never its type name or source location.
            expected: { _ in
                "in: malformed DER: block 1 (CERTIFICATE) is not a valid certificate: a field is not valid DER (Unexpected end-of-contents octets or [UNIVERSAL 0] tag)"
            }
        ),
        LoadingRow(
            id: "file.missingEnd",
            input: { f in Array(f.leafPEM.replacingOccurrences(of: "-----END CERTIFICATE-----\n", with: "").utf8) },
            expected: { _ in "in: malformed PEM: block 1 (CERTIFICATE) has no -----END CERTIFICATE----- line" }
        ),
        LoadingRow(
            id: "file.mismatchedEnd",
            input: { f in Array(f.leafPEM.replacingOccurrences(of: "END CERTIFICATE", with: "END PRIVATE KEY").utf8) },
            expected: { f in
                "in: malformed PEM: block 1 (CERTIFICATE) ends with -----END PRIVATE KEY----- at line \(f.leafPEM.split(separator: "\n").count)"
            }
        ),
        LoadingRow(
            id: "file.keyOnly",
            input: { f in Array(f.leafKeyPEM.utf8) },
            expected: { _ in "in: no certificates: found PRIVATE KEY, no CERTIFICATE" }
        ),
        LoadingRow(
            id: "file.tooLarge",
            input: { _ in [UInt8](repeating: 0x30, count: CertificateLoader.maximumFileSize + 1) },
            expected: { _ in "in: file too large: 16777217 bytes is more than the limit of 16777216 bytes" }
        ),
        LoadingRow(
            id: "pkcs7.notSignedData",
            // ContentInfo { id-data, [0] OCTET STRING "" }
            input: { _ in [0x30, 0x0f, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01, 0xa0, 0x02, 0x04, 0x00] },
            expected: { _ in "in: malformed PKCS#7: " },
            isPrefix: true
        ),
    ]

    @Test("certificate input rows", arguments: loadingRows)
    func loading(_ row: LoadingRow) throws {
        let fixture = try CatalogueFixture.shared.get()
        let error = try #require(throws: CertificateLoadingError.self) {
            try CertificateLoader.certificates(from: row.input(fixture), origin: "in")
        }
        let expected = row.expected(fixture)
        if row.isPrefix {
            #expect(error.description.hasPrefix(expected), "\(row.id): \(error.description)")
        } else {
            #expect(error.description == expected, "\(row.id)")
        }
    }

    // MARK: - Pin strings (Pin(_:), --pin-sha256, the configuration's pins)

    static let pinRows: [(id: String, text: String, expected: String)] = [
        ("pin.empty", "", "invalid pin \"\": the pin is empty"),
        ("pin.prefixOnly", "sha256/", "invalid pin \"sha256/\": the pin is empty"),
        ("pin.badBase64", "sha256/not*base64", "invalid pin \"sha256/not*base64\": the pin is not valid base64"),
        ("pin.wrongLength", "sha256/AAAA", "invalid pin \"sha256/AAAA\": a SHA-256 pin is 32 bytes, this one decodes to 3"),
        (
            "pin.otherAlgorithm", "sha1/2jmj7l5rSw0yVb/vlWAYkK/YBwk=",
            "invalid pin \"sha1/2jmj7l5rSw0yVb/vlWAYkK/YBwk=\": unsupported pin algorithm \"sha1\"; only sha256/ pins are accepted"
        ),
    ]

    @Test("pin rows", arguments: pinRows.map(\.id))
    func pin(_ id: String) throws {
        let row = try #require(Self.pinRows.first { $0.id == id })
        let error = try #require(throws: PinError.self) { try Pin(row.text) }
        #expect(error.description == row.expected)
    }

    // MARK: - Configuration (PinningConfiguration(data:baseDirectory:origin:), --config, config lint)

    static let pinA = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    static let pinB = "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="
    static func domain(_ key: String, _ body: String) -> String {
        "{\"version\": 1, \"domains\": {\"\(key)\": \(body)}}"
    }

    static let configurationRows: [(id: String, json: String, expected: String)] = [
        (
            "config.tooLarge", String(repeating: " ", count: PinningConfiguration.maximumFileSize + 1),
            "invalid pinning configuration pinning.json: 1 problem\n  (file): the configuration is larger than 1048576 bytes (1 MiB); a pinning configuration is a few kilobytes"
        ),
        ("config.notJSON", "{\"version\": 1, \"domains\": {", "invalid pinning configuration pinning.json: 1 problem\n  (file): not valid JSON: an object that never ends at byte 27"),
        ("config.notAnObject", "[1]", "invalid pinning configuration pinning.json: 1 problem\n  (file): the configuration must be a JSON object, not an array"),
        (
            "config.unknownField", "{\"version\": 1, \"domains\": {}, \"unlistedHost\": \"reject\"}",
            "invalid pinning configuration pinning.json: 1 problem\n  unlistedHost: unknown field; the top level has only domains, unlistedHosts, version"
        ),
        ("config.missingVersion", "{\"domains\": {}}", "invalid pinning configuration pinning.json: 1 problem\n  version: missing; this library reads version 1"),
        ("config.unsupportedVersion", "{\"version\": 2, \"domains\": {}}", "invalid pinning configuration pinning.json: 1 problem\n  version: unsupported version 2; this library reads version 1"),
        (
            "config.unlistedHosts", "{\"version\": 1, \"domains\": {}, \"unlistedHosts\": \"block\"}",
            "invalid pinning configuration pinning.json: 1 problem\n  unlistedHosts: unknown value \"block\"; use \"default\" or \"reject\""
        ),
        ("config.missingDomains", "{\"version\": 1}", "invalid pinning configuration pinning.json: 1 problem\n  domains: missing; list the pinned hosts (it may be {} to pin none)"),
        (
            "config.patternTooBroad", domain("*.com", "{\"pins\": [\"\(pinA)\", \"\(pinB)\"]}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"*.com\"]: too broad: a wildcard or includeSubdomains needs a suffix of at least two labels (\"*.com\" would cover a whole top-level domain)"
        ),
        (
            "config.patternInnerWildcard", domain("a.*.example.com", "{\"pins\": [\"\(pinA)\", \"\(pinB)\"]}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"a.*.example.com\"]: a wildcard must be a whole leading label, \"*.\" or \"**.\""
        ),
        (
            "config.entryUnknownField", domain("api.example.com", "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"enforcePinning\": false}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"api.example.com\"].enforcePinning: unknown field; an entry has only anchors, anchorsOnly, clientIdentity, enforce, excludeSubdomainFromParentPolicy, expires, includeSubdomains, pins, reportURIs, revocation"
        ),
        (
            "config.missingPins", domain("api.example.com", "{\"enforce\": false}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"api.example.com\"].pins: missing; an entry needs its SPKI pins (\"sha256/…\"), at least two when enforced"
        ),
        (
            "config.badPin", domain("api.example.com", "{\"pins\": [\"\(pinA)\", \"sha256/not-base64!\"]}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"api.example.com\"].pins[1]: invalid pin \"sha256/not-base64!\": the pin is not valid base64"
        ),
        (
            "config.onePinEnforced", domain("api.example.com", "{\"pins\": [\"\(pinA)\"]}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"api.example.com\"].pins: an enforced entry needs at least two distinct pins (a backup key makes rotation possible without locking clients out); found 1. Add a backup pin, or set \"enforce\": false for report-only"
        ),
        (
            "config.duplicatePin", domain("api.example.com", "{\"pins\": [\"\(pinA)\", \"\(pinA)\"]}"),
            "invalid pinning configuration pinning.json: 2 problems\n  domains[\"api.example.com\"].pins[1]: repeats pins[0]; a backup pin must be a different key\n  domains[\"api.example.com\"].pins: an enforced entry needs at least two distinct pins (a backup key makes rotation possible without locking clients out); found 1. Add a backup pin, or set \"enforce\": false for report-only"
        ),
        (
            "config.wrongType", domain("api.example.com", "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"enforce\": \"false\"}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"api.example.com\"].enforce: must be true or false, not a string"
        ),
        (
            "config.badExpires", domain("api.example.com", "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"expires\": \"2031-01-01\"}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"api.example.com\"].expires: \"2031-01-01\" is not an RFC 3339 date-time such as 2031-01-01T00:00:00Z: expected YYYY-MM-DDTHH:MM:SS, optional fractional seconds, then Z or ±HH:MM"
        ),
        (
            "config.impossibleExpires", domain("api.example.com", "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"expires\": \"2030-02-30T00:00:00Z\"}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"api.example.com\"].expires: \"2030-02-30T00:00:00Z\" is not an RFC 3339 date-time such as 2031-01-01T00:00:00Z: day 30 does not exist: February 2030 has 28 days"
        ),
        (
            "config.missingAnchor", domain("api.example.com", "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"anchors\": [\"no-such-root.pem\"]}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"api.example.com\"].anchors[0]: /nonexistent-base/no-such-root.pem: unreadable file: no such file or directory"
        ),
        (
            "config.anchorsOnlyWithoutAnchors", domain("api.example.com", "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"anchorsOnly\": true}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"api.example.com\"].anchorsOnly: is true but the entry lists no anchors, so nothing could be trusted"
        ),
        (
            "config.badReportURI", domain("api.example.com", "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"reportURIs\": [\"ftp://x.example.com/\"]}"),
            "invalid pinning configuration pinning.json: 1 problem\n  domains[\"api.example.com\"].reportURIs[0]: \"ftp://x.example.com/\" is not an absolute http:// or https:// URI"
        ),
    ]

    @Test("configuration rows", arguments: configurationRows.map(\.id))
    func configuration(_ id: String) throws {
        let row = try #require(Self.configurationRows.first { $0.id == id })
        let error = try #require(throws: PinningConfigurationError.self) {
            try PinningConfiguration(data: Data(row.json.utf8), baseDirectory: "/nonexistent-base", origin: "pinning.json")
        }
        #expect(error.description == row.expected, "\(id)")
    }

    // MARK: - Handshake failures (ServerTrust.evaluate: what a hostile or broken server makes the client see)

    struct HandshakeRow: Sendable, CustomTestStringConvertible {
        var id: String
        var code: TrustFailure.Code
        var evaluate: @Sendable (CatalogueFixture) async throws -> TrustEvaluation
        var expected: String
        var testDescription: String { self.id }
    }

    static func trust(
        _ f: CatalogueFixture,
        _ chain: [Certificate],
        at time: Date = CatalogueFixture.time,
        limits: TrustLimits = .default,
        purpose: TrustPurpose = .serverAuthentication
    ) -> ServerTrust {
        ServerTrust(
            certificates: chain,
            anchors: [f.chain.root.certificate],
            anchorsOnly: true,
            validationTime: time,
            purpose: purpose,
            limits: limits
        )
    }

    static let handshakeRows: [HandshakeRow] = [
        HandshakeRow(
            id: "handshake.noCertificates", code: .noPeerCertificates,
            evaluate: { f in
                await trust(f, []).evaluate(.ssl(host: "api.example.com"))
            }, expected: "TrustFailure.noPeerCertificates: api.example.com: the peer presented no certificate"),
        HandshakeRow(
            id: "handshake.tooManyCertificates", code: .tooManyCertificates,
            evaluate: { f in
                await trust(f, f.chain.presented + Array(repeating: f.chain.root.certificate, count: 63)).evaluate(.ssl(host: "api.example.com"))
            }, expected: "TrustFailure.tooManyCertificates: api.example.com: the peer presented 65 certificates; at most 64 are accepted"),
        HandshakeRow(
            id: "handshake.invalidHost", code: .invalidHost,
            evaluate: { f in
                await trust(f, f.chain.presented).evaluate(.ssl(host: "a..b"))
            }, expected: "TrustFailure.invalidHost: a..b: invalid host \"a..b\": not an IP address and not a DNS name (letters, digits, '-', '_' and '.', in A-label form)"),
        HandshakeRow(
            id: "handshake.unknownRoot", code: .noPathToAnchor,
            evaluate: { f in
                await trust(f, f.stranger.presented).evaluate(.ssl(host: "api.example.com"))
            }, expected: "TrustFailure.noPathToAnchor: api.example.com: the issuer CN=Stranger Root CA of CN=Stranger Issuing CA is neither presented nor a trust anchor (1 anchor)"),
        HandshakeRow(
            id: "handshake.pathBuildingLimit", code: .pathBuildingLimitExceeded,
            evaluate: { f in
                let none = TrustLimits(maximumPresentedCertificates: 64, maximumIntermediates: 8, maximumIssuerLookups: 0)
                return await trust(f, f.chain.presented, limits: none).evaluate(.ssl(host: "api.example.com"))
            }, expected: "TrustFailure.pathBuildingLimitExceeded: api.example.com: path building gave up after 0 issuer look-ups"),
        HandshakeRow(
            id: "handshake.pathTooLong", code: .pathTooLong,
            evaluate: { f in
                let short = TrustLimits(maximumPresentedCertificates: 64, maximumIntermediates: 0, maximumIssuerLookups: 1024)
                return await trust(f, f.chain.presented, limits: short).evaluate(.ssl(host: "api.example.com"))
            }, expected: "TrustFailure.pathTooLong: api.example.com: the path has 1 intermediate CAs, more than the limit of 0"),
        HandshakeRow(
            id: "handshake.expired", code: .certificateExpired,
            evaluate: { f in
                await trust(f, f.chain.presented, at: CatalogueFixture.time.addingTimeInterval(400 * 86400)).evaluate(.ssl(host: "api.example.com"))
            }, expected: "TrustFailure.certificateExpired: api.example.com: certificate 0 (CN=api.example.com) expired at 2030-07-01T00:00:00Z"),
        HandshakeRow(
            id: "handshake.notYetValid", code: .certificateNotYetValid,
            evaluate: { f in
                await trust(f, f.chain.presented, at: CatalogueFixture.time.addingTimeInterval(-400 * 86400)).evaluate(.ssl(host: "api.example.com"))
            }, expected: "TrustFailure.certificateNotYetValid: api.example.com: certificate 0 (CN=api.example.com) is not valid before 2030-05-02T00:00:00Z"),
        HandshakeRow(
            id: "handshake.wrongHost", code: .hostnameMismatch,
            evaluate: { f in
                await trust(f, f.chain.presented).evaluate(.ssl(host: "www.example.org"))
            }, expected: "TrustFailure.hostnameMismatch: www.example.org: the leaf is not valid for DNS name www.example.org; it names DNS:api.example.com"),
        HandshakeRow(
            id: "handshake.clientCertificateAsServer", code: .extendedKeyUsage,
            evaluate: { f in
                await trust(f, f.chain.presented, purpose: .clientAuthentication).evaluate(.basicX509)
            },
            expected: "TrustFailure.extendedKeyUsage: (no host checked): certificate 0 (CN=api.example.com) is not valid for client authentication (clientAuth): its extendedKeyUsage lists serverAuth"),
        HandshakeRow(
            id: "handshake.pinMismatch", code: .pinMismatch,
            evaluate: { f in
                await trust(f, f.chain.presented).evaluate(.ssl(host: "api.example.com"), pins: .publicKeys([Pin(spkiOf: f.stranger.leaf.certificate)]))
            }, expected: "TrustFailure.pinMismatch: api.example.com: no certificate on the validated path matches a pin"),
    ]

    @Test("handshake rows", arguments: handshakeRows)
    func handshake(_ row: HandshakeRow) async throws {
        let fixture = try CatalogueFixture.shared.get()
        let evaluation = try await row.evaluate(fixture)
        let failure = try #require(evaluation.failure, "\(row.id) was trusted")
        #expect(failure.code == row.code, "\(row.id): \(failure)")
        #expect(failure.description == row.expected, "\(row.id)")
    }
}

/// Fixed names and validity windows, so that the expected texts are fixed too.
struct CatalogueFixture: Sendable {
    static let shared = Result { try CatalogueFixture() }
    /// 2030-06-01T00:00:00Z.
    static let time = TestPKI.referenceTime
    static let notBefore = time.addingTimeInterval(-30 * 86400)
    static let notAfter = time.addingTimeInterval(30 * 86400)

    let chain: TestChain
    let stranger: TestChain
    let leafDER: [UInt8]
    let leafPEM: String
    let leafKeyPEM: String

    init() throws {
        func chain(_ prefix: String) throws -> TestChain {
            let root = try TestPKI.root("\(prefix) Root CA", notValidBefore: Self.notBefore, notValidAfter: Self.notAfter.addingTimeInterval(86400))
            let intermediate = try TestPKI.intermediate(
                "\(prefix) Issuing CA", issuer: root, notValidBefore: Self.notBefore, notValidAfter: Self.notAfter.addingTimeInterval(86400)
            )
            let leaf = try TestPKI.leaf(
                "api.example.com", issuer: intermediate, dnsNames: ["api.example.com"],
                notValidBefore: Self.notBefore, notValidAfter: Self.notAfter
            )
            return TestChain(root: root, intermediate: intermediate, leaf: leaf)
        }
        self.chain = try chain("Catalogue")
        self.stranger = try chain("Stranger")
        self.leafDER = self.chain.leaf.der
        self.leafPEM = TestPKI.pemBundle([self.chain.leaf.certificate])
        self.leafKeyPEM = self.chain.leaf.privateKeyPEM
    }
}
