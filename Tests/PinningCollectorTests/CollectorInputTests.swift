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
}
