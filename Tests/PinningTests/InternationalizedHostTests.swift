import Foundation
import PinningTestSupport
import Testing
import X509

@testable import Pinning

/// Issue 11, item 14 (from OkHttp's CertificatePinnerTest and HostnamesTest): internationalised host patterns
/// in the configuration are converted to their A-labels, and hosts are matched the same way.
@Suite("Internationalised host names")
struct InternationalizedHostTests {
    @Test(
        "Punycode matches RFC 3492 and OkHttp",
        arguments: [
            ("σkhttp.com", "xn--khttp-fde.com"),  // OkHttp's CertificatePinnerTest
            ("ΣKHTTP.com", "xn--khttp-fde.com"),  // upper case folds to the same host
            ("bücher.example", "xn--bcher-kva.example"),
            ("例え.テスト", "xn--r8jz45g.xn--zckzah"),
            ("straße.de", "xn--strae-oqa.de"),  // non-transitional: ß is kept
            ("ｅｘａｍｐｌｅ。com", "example.com"),  // full-width letters and the ideographic full stop
            ("Ⅷ.example", "viii.example"),  // NFKC
            ("api.example.com", "api.example.com"),
            ("API.Example.com", "api.example.com"),
            ("*.bücher.example", "*.xn--bcher-kva.example"),
        ]
    )
    func toASCII(_ unicode: String, _ ascii: String) throws {
        #expect(try IDNA.toASCII(unicode) == ascii)
    }

    @Test(
        "RFC 3492 §7.1 sample strings",
        arguments: [
            // (A) Arabic (Egyptian), (B) Chinese (simplified), (L) 3<nen>B<gumi><kinpachi><sensei>
            ([0x0644, 0x064A, 0x0647, 0x0645, 0x0627, 0x0628, 0x062A, 0x0643, 0x0644, 0x0645, 0x0648, 0x0634, 0x0639, 0x0631, 0x0628, 0x064A, 0x061F] as [UInt32], "egbpdaj6bu4bxfgehfvwxn"),
            ([0x4ED6, 0x4EEC, 0x4E3A, 0x4EC0, 0x4E48, 0x4E0D, 0x8BF4, 0x4E2D, 0x6587], "ihqwcrb4cv8a8dqg056pqjye"),
            ([0x0033, 0x5E74, 0x0042, 0x7D44, 0x91D1, 0x516B, 0x5148, 0x751F], "3B-ww4c5e180e575a65lsy2b"),
        ])
    func rfcSamples(_ codePoints: [UInt32], _ expected: String) {
        #expect(Punycode.encode(codePoints) == expected)
    }

    @Test("the label or character a refusal quotes is escaped: no control, format or default-ignorable character in it")
    func refusalEscaped() {
        let cases: [(String, String, String)] = [
            ("\u{00FC}\u{1B}[31mb.example", "\"\\u{1b}\" cannot appear", "\u{1B}"),
            ("-b\u{00FC}\u{FE0F}.example", "the label \"-b\u{00FC}\\u{fe0f}\" begins or ends", "\u{FE0F}"),
            ("\u{0301}a\u{1160}.example", "the label \"\u{0301}a\\u{1160}\" begins with a combining mark", "\u{1160}"),
        ]
        for (host, words, hidden) in cases {
            do {
                _ = try IDNA.toASCII(host)
                Issue.record("accepted \(host.debugDescription)")
            } catch {
                #expect(error.problem.contains(words), "\(error.problem.debugDescription)")
                #expect(!error.problem.contains(hidden) && !error.description.contains(hidden), "\(error.description.debugDescription)")
            }
        }
    }

    @Test(
        "names with no ASCII form are refused with the character named",
        arguments: [
            ("bü cher.example", "cannot appear"),
            ("ex\u{200D}ample.com", "U+200D"),  // ZERO WIDTH JOINER
            ("\u{0301}abc.example", "combining mark"),
            ("-bücher.example", "begins or ends"),
            ("😀.example", "U+1F600"),
            (String(repeating: "ü", count: 70) + ".example", "longer than 63"),
        ])
    func refused(_ host: String, _ fragment: String) {
        #expect(throws: IDNAError.self) { try IDNA.toASCII(host) }
        do {
            _ = try IDNA.toASCII(host)
        } catch {
            #expect(error.description.contains(fragment), "\(error.description)")
        }
        // The peer-name check says why, in words.
        #expect(throws: PeerNameError.self) { try PeerName(host) }
    }

    @Test("a configuration keyed by the Unicode name pins the host however it is written")
    func configurationMatches() async throws {
        let root = try TestPKI.root("IDN Root")
        let leaf = try TestPKI.leaf("xn--khttp-fde.com", issuer: root, dnsNames: ["xn--khttp-fde.com"])
        let pin = Pin(spkiOf: root.certificate).description
        let other = Pin(spkiOf: leaf.certificate).description
        let json = """
            {"version": 1, "unlistedHosts": "reject", "domains": {
              "σkhttp.com": {"pins": ["\(pin)", "\(other)"]},
              "**.bücher.example": {"pins": ["\(pin)", "\(other)"]}
            }}
            """
        let configuration = try PinningConfiguration(data: Data(json.utf8), baseDirectory: "/")
        for host in ["σkhttp.com", "ΣKHTTP.COM", "xn--khttp-fde.com"] {
            #expect(configuration.entry(forHost: host)?.key == "σkhttp.com", "\(host)")
        }
        #expect(configuration.entry(forHost: "shop.bücher.example")?.key == "**.bücher.example")
        #expect(configuration.entry(forHost: "shop.xn--bcher-kva.example")?.key == "**.bücher.example")

        // Evaluated end to end: the certificate carries the A-label; the host is given in Unicode.
        let trust = ServerTrust(certificates: [leaf.certificate], platformRoots: TrustRoots([root.certificate]))
        let result = await configuration.evaluate(trust, forHost: "σkhttp.com", port: 443)
        #expect(result.isTrusted, "\(String(describing: result.verdict.failure))")
        #expect(result.matchedEntry == "σkhttp.com")
    }

    @Test("the Unicode and the A-label key of one host are the same entry twice")
    func duplicateKeys() throws {
        let json = """
            {"version": 1, "domains": {
              "σkhttp.com": {"pins": ["sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="]},
              "xn--khttp-fde.com": {"pins": ["sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="]}
            }}
            """
        let error = #expect(throws: PinningConfigurationError.self) {
            try PinningConfiguration(data: Data(json.utf8), baseDirectory: "/")
        }
        #expect(error?.description.contains("covers exactly the same hosts") == true)
    }

    @Test("an invalid internationalised key is a configuration error naming the entry")
    func invalidKey() throws {
        let json = """
            {"version": 1, "domains": {"ex\u{200D}ample.com": {"pins": ["sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="]}}}
            """
        let error = #expect(throws: PinningConfigurationError.self) {
            try PinningConfiguration(data: Data(json.utf8), baseDirectory: "/")
        }
        #expect(error?.description.contains("not a valid internationalised host name") == true, "\(String(describing: error))")
        #expect(error?.description.contains("U+200D") == true)
    }

    /// NU3 entry 10: an `xn--` label that is not Punycode of a valid label passed as plain ASCII, so a
    /// configuration could pin `xn--zz.example`. IDNA2008 requires an A-label to decode to a U-label that encodes
    /// back to itself.
    @Test(
        "an xn-- label that is not a valid A-label is refused",
        arguments: [
            ("xn--zz.example", "does not decode"),  // cut short
            ("xn--a.example", "U+0080"),  // decodes to a control character
            ("api.XN--ZZ.example", "does not decode"),  // any label, any case
            ("xn--abc-.example", "does not decode"),  // all-ASCII: not a U-label
            ("xn--bcher-kva.xn--zz.example", "does not decode"),
            ("bücher.xn--zz.example", "does not decode"),  // beside a U-label
            ("*.xn--zz.example", "does not decode"),
            ("xn--b-ö.example", "third and fourth"),
        ])
    func invalidALabel(_ host: String, _ fragment: String) {
        do {
            let ascii = try IDNA.toASCII(host)
            Issue.record("accepted \(host) as \(ascii)")
        } catch {
            #expect(error.description.contains(fragment), "\(error.description)")
        }
        #expect(throws: PeerNameError.self) { try PeerName(host) }
    }

    @Test(
        "valid A-labels pass unchanged, and decode to what they encode",
        arguments: [
            ("xn--bcher-kva.example", [0x62, 0x00FC, 0x63, 0x68, 0x65, 0x72] as [UInt32]),
            ("xn--r8jz45g.xn--zckzah", [0x4F8B, 0x3048]),
            ("XN--Bcher-KVA.example", [0x62, 0x00FC, 0x63, 0x68, 0x65, 0x72]),
            ("api.xn--strae-oqa.de", [0x73, 0x74, 0x72, 0x61, 0x00DF, 0x65]),
        ])
    func validALabel(_ host: String, _ firstALabel: [UInt32]) throws {
        #expect(try IDNA.toASCII(host) == host.lowercased())
        let label = host.lowercased().split(separator: ".").first { $0.hasPrefix("xn--") }!
        #expect(Punycode.decode(label.utf8.dropFirst(4)) == firstALabel)
        #expect(try PeerName(host).canonical == host.lowercased())
    }

    @Test("Punycode decoding inverts the RFC 3492 samples and refuses what is not Punycode")
    func decode() {
        let arabic: [UInt32] = [
            0x0644, 0x064A, 0x0647, 0x0645, 0x0627, 0x0628, 0x062A, 0x0643, 0x0644, 0x0645, 0x0648, 0x0634, 0x0639, 0x0631, 0x0628, 0x064A, 0x061F,
        ]
        #expect(Punycode.decode("egbpdaj6bu4bxfgehfvwxn".utf8) == arabic)
        #expect(Punycode.decode("3B-ww4c5e180e575a65lsy2b".utf8) == [0x0033, 0x5E74, 0x0042, 0x7D44, 0x91D1, 0x516B, 0x5148, 0x751F])
        for text in ["zz", "9999999999999999", "a!", "\u{FC}-a"] {
            #expect(Punycode.decode(text.utf8) == nil, "\(text)")
        }
    }

    @Test("an invalid A-label key is a configuration error naming the entry (NU3 entry 10)")
    func invalidALabelKey() throws {
        let json = """
            {"version": 1, "domains": {"xn--zz.example": {"pins": ["sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="]}, "xn--bcher-kva.example": {"pins": ["sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="]}}}
            """
        let error = #expect(throws: PinningConfigurationError.self) {
            try PinningConfiguration(data: Data(json.utf8), baseDirectory: "/")
        }
        let text = error?.description ?? ""
        #expect(text.contains("xn--zz.example") && text.contains("not a valid A-label"), "\(text)")
        #expect(!text.contains("xn--bcher-kva.example"), "\(text)")
    }
}
