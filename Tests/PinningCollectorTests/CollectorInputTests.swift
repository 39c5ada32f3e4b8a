import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Pinning
import PinningTestSupport
import Testing

@testable import PinningCollector

/// What a second new user sent the collector (2026-11-28): sign-in bodies that stopped the process, methods it
/// answered 404, a batch it refused forever with 429, host names in many forms, a `pin-sha1` directive.
@Suite("Collector input from a new user: the sign-in form, methods, batches over the rate, host names", .serialized)
struct CollectorInputTests {
    static let form = [("Content-Type", "application/x-www-form-urlencoded")]

    @Test("the form reader: + is a space, %XX a byte, pairs split at & and the first =; a bad escape or non-UTF-8 refused")
    func formBody() throws {
        let parsed = try FormBody(parsing: Array("token=a+b%2Bc%3d&&x&y=1=2&%E4%BE%8B=%C3%A9".utf8))
        #expect(parsed.fields.map(\.name) == ["token", "x", "y", "例"])
        #expect(parsed.fields.map(\.value) == ["a b+c=", "", "1=2", "é"])
        #expect(parsed.values("token") == ["a b+c="])
        #expect(try FormBody(parsing: []).fields.isEmpty)
        for (body, words) in [
            ("token=%zz", "the value of field 1 has a % that is not followed by two hexadecimal digits"),
            ("token=abc%", "the value of field 1 has a % that is not followed by two hexadecimal digits"),
            ("a=1&%4=2", "field 2's name has a % that is not followed by two hexadecimal digits"),
            ("token=%FF", "the value of field 1 is not UTF-8 text"),
            ("token=%C3", "the value of field 1 is not UTF-8 text"),
        ] {
            #expect(throws: FormBody.Refusal(description: words), "\(body)") { try FormBody(parsing: Array(body.utf8)) }
        }
        #expect(throws: FormBody.Refusal(description: "the value of field 1 is not UTF-8 text")) { try FormBody(parsing: Array("token=".utf8) + [0xFF, 0xFE]) }
    }

    @Test("POST /login with the new user's bodies: 400 or 401 in words, never a crash; the collector keeps serving")
    func loginBodies() async throws {
        let collector = try await CollectorHarness()
        defer { Task { await collector.stop() } }
        let cases: [([UInt8], [(String, String)], Int, String?)] = [
            (Array("token=a b".utf8), [], 401, nil),
            (Array("token=%zz".utf8), [], 400, "the login form is not application/x-www-form-urlencoded: the value of field 1 has a % that is not followed by two hexadecimal digits\n"),
            (Array("token=%zz".utf8), Self.form, 400, nil),
            (Array("{\"a\":1}".utf8), [], 400, "the login form has no token field (token=…)\n"),
            (Array("x\"".utf8), Self.form, 400, "the login form has no token field (token=…)\n"),
            (Array("token=<>".utf8), Self.form, 401, nil),
            (Array("token=".utf8) + [0xC3, 0x28], Self.form, 400, "the login form is not application/x-www-form-urlencoded: the value of field 1 is not UTF-8 text\n"),
            ([0xFF, 0xFE, 0x00, 0x80], Self.form, 400, nil),
            (Array("token=a&token=\(collector.token)".utf8), Self.form, 400, "the login form has 2 token fields; send one\n"),
            (Array("token=%3Cscript%3E".utf8), Self.form, 401, nil),
        ]
        for (body, headers, status, words) in cases {
            let reply = try await collector.request(.POST, "/login", body: Data(body), headers: headers)
            #expect(reply.status == status, "\(body): \(reply.status) \(reply.body)")
            if let words { #expect(reply.body == words) }
            #expect(reply.header("Set-Cookie") == nil)
        }
        // The token itself, percent-encoded in part and with its `-` as %2D, still signs in.
        let encoded = collector.token.replacingOccurrences(of: "-", with: "%2D")
        let signedIn = try await collector.request(.POST, "/login", body: Data("other=1&token=\(encoded)".utf8), headers: Self.form)
        #expect(signedIn.status == 303)
        #expect(signedIn.header("Set-Cookie")?.contains("pinning_collector_session=") == true)
        #expect(try await collector.request(.GET, "/status").status == 200)
    }

    @Test("500 seeded random bodies to POST /login: each 400 or 401, and the collector still answers")
    func loginFuzz() async throws {
        let collector = try await CollectorHarness()
        defer { Task { await collector.stop() } }
        var generator = SplitMix64(seed: 0x10_6111)
        // Bytes a form would have, its delimiters and escapes, and any byte at all.
        let alphabet = Array("token=%&+abcXYZ019<>\" {}".utf8) + [0x00, 0x0A, 0x80, 0xC3, 0xFF]
        var counts: [Int: Int] = [:]
        for round in 0..<500 {
            let length = Int(generator.next() % 64)
            var body: [UInt8] = round % 2 == 0 ? Array("token=".utf8) : []
            for _ in 0..<length {
                body.append(round % 3 == 0 ? UInt8(truncatingIfNeeded: generator.next()) : alphabet[Int(generator.next() % UInt64(alphabet.count))])
            }
            let reply = try await collector.request(.POST, "/login", body: Data(body), headers: round % 4 == 0 ? [] : Self.form)
            #expect(reply.status == 400 || reply.status == 401, "round \(round) \(body): \(reply.status) \(reply.body)")
            #expect(!reply.body.isEmpty)
            counts[reply.status, default: 0] += 1
        }
        #expect(counts[400, default: 0] > 0 && counts[401, default: 0] > 0, "\(counts)")
        #expect(try await collector.request(.GET, "/status").status == 200)
    }

    @Test("GET, PUT, DELETE on /reports, /login and /logout: 405 with Allow: POST, not 404")
    func methods() async throws {
        let collector = try await CollectorHarness()
        defer { Task { await collector.stop() } }
        for path in ["/reports", "/login", "/logout"] {
            for method in [HTTPMethod.GET, .PUT, .DELETE, .PATCH] {
                let reply = try await collector.request(method, path, body: method == .GET ? nil : Data("x".utf8))
                #expect(reply.status == 405, "\(method) \(path): \(reply.status)")
                #expect(reply.header("Allow") == "POST")
                #expect(reply.body == "\(path) takes POST only\n")
            }
        }
        #expect(try await collector.request(.GET, "/nothing-here").status == 404)
    }

    @Test("a request with more reports than the rate allows a minute: 413 saying so, no Retry-After; the rate is not spent")
    func batchOverRate() async throws {
        let collector = try await CollectorHarness { settings in
            settings.ratePerMinute = 5
        }
        defer { Task { await collector.stop() } }
        let six = try ReportFixtures.json((0..<6).map { ["hostname": "b\($0).example.test"] })
        let refused = try await collector.post(six)
        #expect(refused.status == 413)
        #expect(refused.header("Retry-After") == nil)
        #expect(
            refused.body
                == "the body has 6 reports, more than this collector accepts from one source in a minute (--rate 5/min), so it can never be accepted whole; send at most 5 reports per request\n"
        )
        // Refused before the rate was consulted: five now pass, then the rate refuses with 429 as before.
        let five = try ReportFixtures.json((0..<5).map { ["hostname": "b\($0).example.test"] })
        #expect(try await collector.post(five).status == 204)
        let limited = try await collector.post(try ReportFixtures.json(["hostname": "one.example.test"]))
        #expect(limited.status == 429)
        #expect(limited.header("Retry-After") != nil)
        let metrics = try await collector.request(.GET, "/metrics").body
        #expect(metrics.contains("collector_requests_refused_total{reason=\"too_large\"} 1"))
        #expect(metrics.contains("collector_requests_refused_total{reason=\"rate_limited\"} 1"))
    }

    @Test("RFC 7469 §2.1.1: a pin directive of another algorithm (pin-sha1) is ignored; the report and its SHA-256 pins kept")
    func otherPinDirectives() throws {
        let pin = try Pin(sha256Digest: Array(repeating: 7, count: 32)).base64
        let body = try ReportFixtures.json([
            "hostname": "a.example.test",
            "known-pins": ["pin-sha1=\"AAAAAAAAAAAAAAAAAAAAAAAAAAA=\"", "pin-sha256=\"\(pin)\"", "PIN-SHA512=\"x\"", "pin-sha256=\"\(pin)\""],
        ])
        let report = try #require(try ReportParser().parse(Array(body)).first)
        #expect(report.knownPins == [pin, pin])
        #expect(report.raw.contains("pin-sha1="))
        // What is not a directive of another algorithm is still judged as a pin.
        for written in ["pin-sha256=\"short\"", "garbage", "pin-=\"x\"", "pin-sha 1=\"x\""] {
            let bad = try ReportFixtures.json(["hostname": "a.example.test", "known-pins": [written]])
            #expect(throws: ReportRefusal.self, "\(written)") { try ReportParser().parse(Array(bad)) }
        }
        #expect(ReportParser.isOtherPinDirective("pin-sha1=\"x\""))
        #expect(!ReportParser.isOtherPinDirective("Pin-SHA256=\"x\""))
    }

    @Test("a --listen that fails: no 'retention failed … CancellationError' line before the real error")
    func noRetentionLineOnStartFailure() async throws {
        let logs = CapturedLogs()
        let taken = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        defer { taken.close(promise: nil) }
        let port = try #require(taken.localAddress?.port)
        let directory = try TemporaryDirectory(prefix: "pinning-collector-retention")
        defer { directory.remove() }
        // The retention's first run races the failed bind; five starts made the old line appear nearly always.
        for attempt in 0..<5 {
            let collector = Collector(
                listen: ListenAddress(host: "127.0.0.1", port: port), database: .sqlite(path: directory.path("r\(attempt).db")),
                settings: CollectorSettings(token: "test-token-0123456789abcdef"), logger: Logger(label: "collector") { _ in logs })
            do {
                try await collector.run(signals: []) { _, _ in }
                Issue.record("listened on a port in use")
            } catch let error as Collector.StartError {
                #expect(error.exitStatus == 3)
            }
        }
        #expect(!logs.all.contains { $0.contains("retention") }, "\(logs.all)")
    }
}

@Suite("Host names on ingest and in ?host=: one form (A-labels, lower case, no trailing dot); what is not a host name refused", .serialized)
struct HostNameTests {
    @Test("the parser: A-labels, lower case, one trailing dot dropped, IP literals canonical; noted-hostname too")
    func parser() throws {
        let cases: [(String, String)] = [
            ("例え.テスト", "xn--r8jz45g.xn--zckzah"),
            ("xn--r8jz45g.xn--zckzah", "xn--r8jz45g.xn--zckzah"),
            ("EXAMPLE.com.", "example.com"),
            ("Bücher.Example", "xn--bcher-kva.example"),
            ("例え。テスト", "xn--r8jz45g.xn--zckzah"),
            ("192.0.2.1", "192.0.2.1"),
            ("[2001:DB8:0:0::1]", "2001:db8::1"),
            ("2001:db8::1", "2001:db8::1"),
            ("my_host.internal", "my_host.internal"),
        ]
        for (sent, stored) in cases {
            let body = try ReportFixtures.json(["hostname": sent, "noted-hostname": sent])
            let report = try #require(try ReportParser().parse(Array(body)).first)
            #expect(report.host == stored, "\(sent)")
            #expect(report.notedHost == stored, "\(sent)")
        }
    }

    @Test("what is not a host name is refused naming the key: markup, spaces, U+202E, a slash, an empty label")
    func refused() throws {
        let cases: [(String, String)] = [
            ("<script>alert(1)</script>.example", "the report: `hostname` is not a host name"),
            ("\u{202E}moc.example", "U+202E RIGHT-TO-LEFT OVERRIDE cannot appear in a host name"),
            ("a b.example", "the report: `hostname` is not a host name"),
            ("a/b.test", "the report: `hostname` is not a host name"),
            ("a..example", "the report: `hostname` is not a host name"),
            ("bad\u{0301}.ex ample", "the report: `hostname` is not a host name"),
        ]
        for (sent, words) in cases {
            let body = try ReportFixtures.json(["hostname": sent])
            do {
                _ = try ReportParser().parse(Array(body))
                Issue.record("accepted \(sent.debugDescription)")
            } catch {
                #expect(error.message.contains(words), "\(sent.debugDescription): \(error.message)")
                #expect(!error.message.contains("\n") && !error.message.contains("\u{202E}"), "\(error.message)")
            }
        }
        let noted = try ReportFixtures.json(["hostname": "a.example", "noted-hostname": "<b>"])
        #expect(throws: ReportRefusal.self) { try ReportParser().parse(Array(noted)) }
        do {
            _ = try ReportParser().parse(Array(noted))
        } catch {
            #expect(error.message.hasPrefix("the report: `noted-hostname` is not a host name ("))
        }
    }

    /// The report the core builds when a host matched by a wildcard entry fails its pins (a pin mismatch: the
    /// genuine chain, pinned to the intercepting PKI's keys).
    static func wildcardReport(key: String, fixtures: ReportFixtures) async throws -> Data {
        let pins = [fixtures.intercepting.intermediate.certificate, fixtures.intercepting.root.certificate].map { Pin(spkiOf: $0).description }
        let domains = "{\"\(key)\": {\"pins\": [\"\(pins[0])\", \"\(pins[1])\"]}}"
        let configuration = try PinningConfiguration(
            data: Data("{\"version\": 1, \"unlistedHosts\": \"default\", \"domains\": \(domains)}".utf8),
            baseDirectory: "/"
        )
        let trust = ServerTrust(
            certificates: fixtures.genuine.presented,
            platformRoots: TrustRoots([fixtures.genuine.root.certificate]),
            validationTime: Date()
        )
        let evaluation = await configuration.evaluate(trust, forHost: "api.example.test", port: 443)
        #expect(evaluation.verdict.failure?.code == .pinMismatch)
        return try #require(evaluation.failureReport).jsonData()
    }

    @Test("our own reports for \"*.\" and \"**.\" entries are accepted: the wildcard kept, the rest normalised")
    func wildcardNotedHost() async throws {
        let fixtures = try ReportFixtures()
        for (key, stored) in [("*.example.test", "*.example.test"), ("**.Example.TEST", "**.example.test")] {
            let body = try await Self.wildcardReport(key: key, fixtures: fixtures)
            let report = try #require(try ReportParser().parse(Array(body)).first, "\(key)")
            #expect(report.format == .pinning)
            #expect(report.host == "api.example.test")
            #expect(report.notedHost == stored, "\(key)")
        }
        // The rest is normalised as a host name is (an internationalised entry's key, a trailing dot).
        for (sent, stored) in [("*.テスト.Example.", "*.xn--zckzah.example"), ("**.例え.テスト", "**.xn--r8jz45g.xn--zckzah")] {
            let body = try ReportFixtures.json(["hostname": "a.example.test", "noted-hostname": sent])
            #expect(try ReportParser().parse(Array(body)).first?.notedHost == stored, "\(sent)")
        }
        // Anything else that is not a host name is still refused.
        for noted in ["*.", "**.", "*.*.example.test", "***.example.test", "a.*.example.test", "*.192.0.2.1", "**.[2001:db8::1]", "*.<b>.test", "*.\u{202E}moc.test"] {
            let body = try ReportFixtures.json(["hostname": "a.example.test", "noted-hostname": noted])
            do {
                let report = try ReportParser().parse(Array(body))
                Issue.record("accepted \(noted.debugDescription) as \(report.map(\.notedHost))")
            } catch {
                #expect(error.message.hasPrefix("the report: `noted-hostname` "), "\(noted.debugDescription): \(error.message)")
                #expect(!error.message.contains("\u{202E}"), "\(error.message)")
            }
        }
    }

    @Test("a batch with a wildcard report is stored; one bad report refuses the whole body (400 naming it), nothing stored")
    func wildcardBatch() async throws {
        let fixtures = try ReportFixtures()
        let one = try await Self.wildcardReport(key: "*.example.test", fixtures: fixtures)
        let two = try await Self.wildcardReport(key: "**.example.test", fixtures: fixtures)
        let bad = try ReportFixtures.json(["hostname": "b.example.test", "noted-hostname": "*.*.example.test"])
        func array(_ parts: [Data]) -> Data { Data("[".utf8) + parts.joined(separator: Data(",".utf8)) + Data("]".utf8) }

        // The parser as documented: the first problem, with the report's index.
        #expect(try ReportParser().parse(Array(array([one, two]))).map(\.notedHost) == ["*.example.test", "**.example.test"])
        do {
            _ = try ReportParser().parse(Array(array([one, bad, two])))
            Issue.record("a batch with a bad report was accepted")
        } catch {
            #expect(error.message.hasPrefix("report [1]: `noted-hostname` is not a host name"), "\(error.message)")
        }

        let collector = try await CollectorHarness()
        defer { Task { await collector.stop() } }
        let refused = try await collector.post(array([one, bad, two]))
        #expect(refused.status == 400)
        #expect(refused.body.hasPrefix("report [1]: `noted-hostname`"), "\(refused.body)")
        let none = try #require(try await collector.json("/api/hosts")["hosts"] as? [[String: Any]])
        #expect(none.isEmpty, "\(none)")
        #expect(try await collector.post(array([one, two])).status == 204)
        let hosts = try #require(try await collector.json("/api/hosts")["hosts"] as? [[String: Any]])
        #expect(hosts.compactMap { $0["host"] as? String } == ["api.example.test"])
    }

    @Test("over HTTP: the new user's forms are one host each, found by ?host= in any form; refused names are 400")
    func overHTTP() async throws {
        let legacy = try CollectorHarness.legacyReport(host: "<b>old</b>.example")
        let collector = try await CollectorHarness(legacy: [legacy])
        defer { Task { await collector.stop() } }
        for host in ["例え.テスト", "xn--r8jz45g.xn--zckzah", "EXAMPLE.com.", "example.com"] {
            #expect(try await collector.post(try ReportFixtures.json(["hostname": host, "app-version": host])).status == 204, "\(host)")
        }
        for host in ["<script>x</script>.example", "\u{202E}moc.example"] {
            let reply = try await collector.post(try ReportFixtures.json(["hostname": host]))
            #expect(reply.status == 400)
            #expect(reply.body.hasPrefix("the report: `hostname` is not a host name ("), "\(reply.body)")
        }
        let hosts = try #require(try await collector.json("/api/hosts")["hosts"] as? [[String: Any]])
        #expect(Set(hosts.compactMap { $0["host"] as? String }) == ["xn--r8jz45g.xn--zckzah", "example.com", "<b>old</b>.example"])
        func count(_ query: String) async throws -> Int? {
            let encoded = query.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            return (try await collector.json("/api/reports?host=\(encoded)")["reports"] as? [Any])?.count
        }
        #expect(try await count("例え.テスト") == 2)
        #expect(try await count("XN--R8JZ45G.xn--zckzah.") == 2)
        #expect(try await count("Example.COM.") == 2)
        // A row stored before normalisation is still found by its exact text (it is not a host name).
        #expect(try await count("<b>old</b>.example") == 1)
        let one = try #require(try await collector.json("/api/hosts?host=%E4%BE%8B%E3%81%88.%E3%83%86%E3%82%B9%E3%83%88")["hosts"] as? [[String: Any]])
        #expect(one.compactMap { $0["host"] as? String } == ["xn--r8jz45g.xn--zckzah"])
        let page = try await collector.request(.GET, "/?host=EXAMPLE.com.", authorized: true)
        #expect(page.body.contains("<h2>example.com</h2>"))
    }
}

/// Every message a `Logger` made with it logs, for tests that look for a line.
final class CapturedLogs: LogHandler, @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    var all: [String] { self.lock.withLock { self.lines } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        self.lock.withLock { self.lines.append("\(event.level) \(event.message)") }
    }
}
