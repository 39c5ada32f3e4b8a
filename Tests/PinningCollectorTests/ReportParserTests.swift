import Foundation
import Pinning
import PinningCollector
import PinningTestSupport
import Testing

@Suite("Collector: reading reports (RFC 7469, TrustKit, swift-pinning) and refusing bad ones")
struct ReportParserTests {
    let fixtures: ReportFixtures
    init() throws { self.fixtures = try ReportFixtures() }

    @Test("a TrustKit report in the shape of its sample_report.json: app keys, integer result, CRLF PEM, pins computed here")
    func trustKit() throws {
        let reports = try ReportParser().parse(Array(try ReportFixtures.json(self.fixtures.trustKit())))
        let report = try #require(reports.first)
        #expect(reports.count == 1)
        #expect(report.format == .trustkit)
        #expect(report.host == "api.example.test")
        #expect(report.port == 443)
        #expect(report.result == "pinMismatch")
        #expect(report.enforced == true)
        #expect(report.appId == "com.example.bank")
        #expect(report.appVersion == "4.2")
        #expect(report.platform == "IOS")
        #expect(report.libraryVersion == "TrustKit 3.0.4")
        #expect(report.pinsExpiration == "2027-06-01")
        #expect(report.deviceHash != nil && report.deviceHash != "599F9C00-92DC-4B5C-9464-7971F01F8370")
        // Each pin computed from the certificate, not taken from the report.
        #expect(report.validatedPins == self.fixtures.intercepting.all.map { Pin(spkiOf: $0).base64 })
        #expect(report.servedPins.isEmpty)
        #expect(report.knownPins == [Pin(spkiOf: self.fixtures.genuine.intermediate.certificate).base64, Pin(spkiOf: self.fixtures.genuine.root.certificate).base64])
        #expect(report.validatedChain.last?.subject.contains("Intercepting Proxy Root") == true)
    }

    @Test("an RFC 7469 §3 report: served and validated chains, no result (a pin validation failure)")
    func rfc7469() throws {
        let report = try #require(try ReportParser().parse(Array(try ReportFixtures.json(self.fixtures.rfc7469()))).first)
        #expect(report.format == .rfc7469)
        #expect(report.result == "pinMismatch")
        #expect(report.enforced == nil)
        #expect(report.notedHost == "example.test")
        #expect(report.includeSubdomains == true)
        #expect(report.servedPins == self.fixtures.intercepting.presented.map { Pin(spkiOf: $0).base64 })
        #expect(report.pinsExpiration == "2027-06-01T00:00:00Z")
    }

    @Test("our own report, as the core's PinFailureReport encodes it; an array of several")
    func ours() throws {
        let ours = try self.fixtures.pinning()
        let report = try #require(try ReportParser().parse(Array(ours)).first)
        #expect(report.format == .pinning)
        #expect(report.port == 8443)
        #expect(report.result == "pinMismatch")
        #expect(report.dateTime == Date(timeIntervalSince1970: 1_795_000_000))
        let array = Data("[".utf8) + ours + Data(",".utf8) + (try ReportFixtures.json(self.fixtures.trustKit())) + Data("]".utf8)
        #expect(try ReportParser().parse(Array(array)).map(\.format) == [.pinning, .trustkit])
    }

    func refusal(_ body: [UInt8]) -> String? {
        do {
            _ = try ReportParser().parse(body)
            return nil
        } catch {
            return error.message
        }
    }

    @Test("malformed bodies are refused with one line naming the problem")
    func malformed() throws {
        let cases: [(String, String)] = [
            ("{\"hostname\":", "the body is not valid JSON: it ends with 1 array or object not closed (cut short?)"),
            ("{\"hostname\":\"a", "the body is not valid JSON: it ends inside a string (cut short?)"),
            ("", "the body is empty: send one report object or an array of them"),
            (" \r\n", "the body is only whitespace"),
            ("42", "a number, not a report"),
            ("[]", "empty array"),
            ("[1]", "report [0] is a number, not an object"),
            ("{}", "has no `hostname`"),
            ("{\"hostname\":\"\"}", "has no `hostname`"),
            ("{\"hostname\":[\"a\"]}", "`hostname` is an array, not a string"),
            ("{\"hostname\":\"a\",\"port\":\"443\"}", "`port` is a string, not an integer"),
            ("{\"hostname\":\"a\",\"port\":70000}", "not a TCP port"),
            // Whole numbers beyond Int64 (Foundation keeps them as Doubles): integers out of range, not fractions.
            ("{\"hostname\":\"a\",\"port\":99999999999999999999}", "`port` is an integer out of range, not a TCP port (0-65535)"),
            ("{\"hostname\":\"a\",\"port\":-1e19}", "`port` is an integer out of range, not a TCP port (0-65535)"),
            ("{\"hostname\":\"a\",\"port\":1.5}", "`port` is a number, not an integer"),
            ("{\"hostname\":\"a\",\"validation-result\":99999999999999999999}", "`validation-result` is an integer out of range"),
            ("{\"hostname\":\"a\",\"port\":true}", "`port` is a boolean"),
            ("{\"hostname\":\"a\",\"include-subdomains\":1}", "`include-subdomains` is a number, not a boolean"),
            ("{\"hostname\":\"a\",\"date-time\":\"yesterday\"}", "`date-time` is not an RFC 3339"),
            ("{\"hostname\":\"a\",\"date-time\":\"2026-02-30T00:00:00Z\"}", "`date-time` is not an RFC 3339 date-time: day 30 does not exist"),
            ("{\"hostname\":\"a\",\"date-time\":\"2026-06-01T24:00:00Z\"}", "`date-time` is not an RFC 3339 date-time: hour 24 does not exist"),
            ("{\"hostname\":\"a\",\"known-pins\":[\"pin-sha256=\\\"short\\\"\"]}", "`known-pins`[0] is not a SHA-256 pin"),
            (
                "{\"hostname\":\"a\",\"served-certificate-chain\":[\"-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END CERTIFICATE-----\"]}",
                "`served-certificate-chain`[0] is not a readable PEM certificate (malformed DER: "
            ),
            ("{\"hostname\":\"a\",\"served-certificate-chain\":\"x\"}", "`served-certificate-chain` is a string, not an array"),
            ("{\"hostname\":\"a\",\"validation-result\":{}}", "`validation-result` is an object"),
            ("{\"hostname\":\"a\\u0000b\"}", "contains a NUL character"),
            ("{\"hostname\":\"\(String(repeating: "a", count: 2000))\"}", "longer than 1024 bytes"),
        ]
        for (body, expected) in cases {
            let message = try #require(self.refusal(Array(body.utf8)), "accepted: \(body.prefix(80))")
            #expect(message.contains(expected), "\(body.prefix(80)) → \(message)")
            #expect(!message.contains("\n"))
            #expect(!message.contains("DecodingError") && !message.contains("Swift."), "type names in: \(message)")
            #expect(!message.contains("The given data") && !message.contains("swift-certificates"), "Foundation's or a library's words in: \(message)")
        }
    }

    @Test("invalid UTF-8, deep nesting and too many reports are refused, never a crash")
    func hostileBodies() throws {
        // Invalid UTF-8 inside a string, and a lone continuation byte.
        #expect(
            self.refusal([0x7B, 0x22, 0x68, 0x6F, 0x73, 0x74, 0x6E, 0x61, 0x6D, 0x65, 0x22, 0x3A, 0x22, 0xC3, 0x28, 0x22, 0x7D])
                == "the body is not UTF-8: the byte at offset 13 does not begin a UTF-8 character (RFC 8259 §8.1: JSON between systems is UTF-8)")
        #expect(self.refusal([0x80])?.hasPrefix("the body is not UTF-8: the byte at offset 0 ") == true)
        // 50,000 nested arrays: Foundation's parser has a depth limit, so nothing recurses that deep; the words are ours.
        let deep = String(repeating: "[", count: 50_000) + String(repeating: "]", count: 50_000)
        #expect(self.refusal(Array(deep.utf8)) == "the body nests arrays and objects 50000 deep; a report is three levels deep")
        let unclosed = String(repeating: "{\"a\":", count: 5000)
        #expect(self.refusal(Array(unclosed.utf8)) == "the body nests arrays and objects 5000 deep; a report is three levels deep")
        let many = "[" + Array(repeating: "{\"hostname\":\"a\"}", count: 1001).joined(separator: ",") + "]"
        #expect(self.refusal(Array(many.utf8))?.contains("at most 1000") == true)
        let longChain = "{\"hostname\":\"a\",\"served-certificate-chain\":[" + Array(repeating: "\"x\"", count: 17).joined(separator: ",") + "]}"
        #expect(self.refusal(Array(longChain.utf8))?.contains("at most 16") == true)
    }

    @Test("`raw` is the report's text as sent: every JSON type, numbers Foundation would rewrite, key order, spacing")
    func rawKeepsTypes() throws {
        let body =
            #"{"port":443,"hostname":"a.b.test","x-path":"a/b","x-extra":{"t":true,"f":false,"n":null,"i":-7,"d":1.5,"big":12345678901234567890,"s":"1","#
            + #""list":[1,"x",[true],{}]},"validation-result":"pinMismatch"}"#
        let report = try #require(try ReportParser().parse(Array(body.utf8)).first)
        #expect(report.port == 443)
        #expect(Array(report.raw.utf8) == Array(body.utf8), "\(report.raw)")
        // One object with whitespace around it: the object's own bytes.
        let spaced = try #require(try ReportParser().parse(Array((" \r\n\t" + body + "\n\n").utf8)).first)
        #expect(Array(spaced.raw.utf8) == Array(body.utf8))
    }

    @Test("each report of an array keeps its own bytes: non-ASCII, escapes, brackets inside strings, odd whitespace")
    func rawOfEachReport() throws {
        let reports = try ReportParser().parse(Array(StoreScenarios.rawBody.utf8))
        #expect(reports.map(\.host) == ["raw1.test", "raw2.test", "raw3.test"])
        #expect(reports.map { Array($0.raw.utf8) } == StoreScenarios.rawTexts.map { Array($0.utf8) })
    }

    @Test("each report's text found in 300 generated arrays reads back as the element it is (Foundation writes them)")
    func rawOfGeneratedArrays() throws {
        // A fixed generator, so a failure repeats: strings from an alphabet of JSON's delimiters, escapes and
        // non-ASCII, nested in objects and arrays, written compact or pretty-printed by JSONSerialization.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let alphabet: [String] = ["a", "\"", "\\", "/", ",", "[", "]", "{", "}", ":", " ", "\t", "\n", "é", "日", "😀", "\u{1}", "\u{7F}", "\u{2028}"]
        func text() -> String { (0..<next(12)).map { _ in alphabet[next(alphabet.count)] }.joined() }
        func value(_ depth: Int) -> Any {
            switch next(depth > 2 ? 4 : 6) {
            case 0: return text()
            case 1: return next(1000) - 500
            case 2: return next(2) == 0
            case 3: return NSNull()
            case 4: return (0..<next(4)).map { _ in value(depth + 1) }
            default: return Dictionary((0..<next(4)).map { _ in (text(), value(depth + 1)) }, uniquingKeysWith: { first, _ in first })
            }
        }
        for round in 0..<300 {
            let elements: [[String: Any]] = (0..<(1 + next(5))).map { index in
                var object: [String: Any] = ["hostname": "g\(round)-\(index).test"]
                for _ in 0..<next(4) { object["x-" + text()] = value(0) }
                return object
            }
            let options: JSONSerialization.WritingOptions = round % 2 == 0 ? [] : [.prettyPrinted]
            let body = try JSONSerialization.data(withJSONObject: elements, options: options)
            let reports = try ReportParser().parse(Array(body))
            #expect(reports.count == elements.count)
            for (report, element) in zip(reports, elements) {
                // The same value: both written again, keys sorted, by the same writer.
                let read = try JSONSerialization.jsonObject(with: Data(report.raw.utf8))
                let again = try JSONSerialization.data(withJSONObject: read, options: [.sortedKeys])
                #expect(again == (try JSONSerialization.data(withJSONObject: element, options: [.sortedKeys])), "round \(round): \(report.raw)")
                #expect(body.range(of: Data(report.raw.utf8)) != nil, "round \(round): not a part of the body")
            }
        }
    }

    @Test("every key the parser reads, sent as the wrong type, is refused naming it; unknown keys are kept in raw without being decoded")
    func knownKeysTyped() throws {
        let keys = [
            "hostname", "port", "date-time", "noted-hostname", "include-subdomains", "enforce-pinning", "report-only", "validation-result", "app-bundle-id",
            "app-id", "app-version", "app-platform", "app-platform-version", "app-vendor-id", "library-version", "trustkit-version", "pinset-version",
            "effective-expiration-date", "known-pins-expiration-date", "served-certificate-chain", "validated-certificate-chain", "known-pins",
        ]
        for key in keys {
            for wrong in [#"{"a":1}"#, "[[1]]", "1.5"] where !(key == "port" && wrong == "1.5") {
                // An array is a wrong type for every key but the chains and the known pins, whose elements are
                // then wrong; a fraction for every key (port's own message says it is not an integer).
                let body = key == "hostname" ? #"{"hostname":\#(wrong)}"# : #"{"hostname":"a.test","\#(key)":\#(wrong)}"#
                let message = try #require(self.refusal(Array(body.utf8)), "accepted: \(body)")
                #expect(message.contains("`\(key)`"), "\(body) → \(message)")
            }
        }
        // A value Foundation could not decode as a Double, under a key no one reads: stored as sent.
        let body = #"{"hostname":"a.test","x-huge":1e400,"x-deep":[[[{"k":[null]}]]]}"#
        let report = try #require(try ReportParser().parse(Array(body.utf8)).first)
        #expect(report.raw == body)
    }

    @Test("a UTF-16 or UTF-32 body is refused in words (JSON between systems is UTF-8), never stored")
    func notUTF8() throws {
        let text = #"{"hostname":"a.test"}"#
        for encoding in [String.Encoding.utf16LittleEndian, .utf16BigEndian, .utf16, .utf32LittleEndian] {
            let body = try #require(text.data(using: encoding))
            let message = try #require(self.refusal(Array(body)), "accepted as \(encoding)")
            #expect(message.contains("not UTF-8"), "\(encoding): \(message)")
        }
    }

    @Test("known pins are read as the core's general reading reads them: canonical digests, odd ones, prefixes, spaces")
    func knownPinsAsTheCoreReadsThem() throws {
        let digest = try Pin(sha256Digest: Array(0..<32)).base64
        let head36 = String(digest.prefix(36))
        let head38 = String(digest.prefix(38))
        let allButLast = String(digest.dropLast())
        let candidates: [String] = [
            digest,
            // The same 32 bytes with the 2 bits past the digest set: not canonical base64.
            String(digest.dropLast(2)) + "B=",
            "/" + String(digest.dropFirst()),
            // 44 base64 characters that begin with our own prefix, in two cases.
            "sha256/\(head36)=",
            "SHA256/\(head36)=",
            "sha256/" + digest,
            "sha256//" + digest,
            "sha1/\(head38)=",
            " \(digest) ",
            "\u{00A0}\(digest)\u{3000}",
            "\u{00A0}\u{0301}\(digest)",
            allButLast + "A",
            allButLast + "==",
            "",
        ]
        for candidate in candidates {
            for written in [candidate, "pin-sha256=\"\(candidate)\"", " PIN-SHA256=\"\(candidate)\" "] {
                // What the parser did before it took the core's fast path: trim, unwrap, and the general reading.
                var expected = written.trimmingCharacters(in: .whitespaces)
                if expected.lowercased().hasPrefix("pin-sha256=") {
                    expected = String(expected.dropFirst("pin-sha256=".count))
                    if expected.count >= 2, expected.hasPrefix("\""), expected.hasSuffix("\"") { expected = String(expected.dropFirst().dropLast()) }
                }
                let general: String?
                do { general = try Pin(expected).base64 } catch { general = nil }
                let body = try ReportFixtures.json(["hostname": "a.test", "known-pins": [written]])
                let read: String?
                do { read = try ReportParser().parse(Array(body)).first?.knownPins.first } catch { read = nil }
                #expect(read == general, "\(written.debugDescription): \(read ?? "refused") against \(general ?? "refused")")
            }
        }
    }

    @Test("SQL metacharacters and markup are ordinary text to the parser")
    func metacharacters() throws {
        let hostile = "'; DROP TABLE reports; -- \" <script>alert(1)</script> ` $1 ? \\"
        let body: [String: Any] = ["hostname": "a.example.test", "app-bundle-id": hostile, "app-version": hostile, "validation-result": hostile]
        let report = try #require(try ReportParser().parse(Array(try ReportFixtures.json(body))).first)
        #expect(report.appVersion == hostile)
        #expect(report.appId == hostile)
        #expect(report.result == hostile)
    }
}
