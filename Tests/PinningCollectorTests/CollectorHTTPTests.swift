import AsyncHTTPClient
import Foundation
import NIOHTTP1
import NIOSSL
import Pinning
import PinningCollector
import PinningTestSupport
import Testing

@Suite("Collector over HTTP on a real SQLite file: ingest answers, the API, the dashboard", .serialized)
struct CollectorHTTPTests {
    let fixtures: ReportFixtures
    init() throws { self.fixtures = try ReportFixtures() }

    @Test("204 for each format, stored normalised; the API's keys; identical reports counted, not stored again")
    func ingestAndAPI() async throws {
        let collector = try await CollectorHarness()
        defer { Task { await collector.stop() } }
        #expect(try await collector.post(try ReportFixtures.json(self.fixtures.trustKit())).status == 204)
        #expect(try await collector.post(try ReportFixtures.json(self.fixtures.rfc7469(host: "www.example.test"))).status == 204)
        #expect(try await collector.post(try self.fixtures.pinning(host: "ours.example.test")).status == 204)
        // The same TrustKit report twice more: one row, three occurrences.
        #expect(try await collector.post(try ReportFixtures.json(self.fixtures.trustKit())).status == 204)
        #expect(try await collector.post(try ReportFixtures.json(self.fixtures.trustKit())).status == 204)

        let summary = try await collector.json("/api/summary")
        #expect(summary["reports"] as? Int == 3)
        #expect(summary["occurrences"] as? Int == 5)
        #expect(summary["hosts"] as? Int == 3)
        #expect(summary["sources"] as? Int == 1)

        let page = try await collector.json("/api/reports?host=api.example.test")
        let rows = try #require(page["reports"] as? [[String: Any]])
        #expect(rows.count == 1)
        #expect(page.keys.contains("next") && page["next"] is NSNull)
        let row = try #require(rows.first)
        for key in [
            "id", "receivedAt", "dateTime", "host", "port", "notedHost", "result", "enforced", "appId", "appVersion", "platform", "libraryVersion", "pinsetVersion", "servedPins",
            "validatedPins", "knownPins", "occurrences",
        ] {
            #expect(row.keys.contains(key), "missing \(key)")
        }
        #expect(row["occurrences"] as? Int == 3)
        #expect(row["appId"] as? String == "com.example.bank")
        #expect(row["enforced"] as? Bool == true)
        #expect(row["validatedPins"] as? [String] == self.fixtures.intercepting.all.map { Pin(spkiOf: $0).base64 })

        let hosts = try #require(try await collector.json("/api/hosts")["hosts"] as? [[String: Any]])
        #expect(hosts.count == 3)
        let www = try #require(hosts.first { $0["host"] as? String == "www.example.test" })
        for key in ["host", "reports", "occurrences", "lastSeen", "results", "servedPins", "knownPins"] {
            #expect(www.keys.contains(key), "missing \(key)")
        }
        #expect((www["results"] as? [String: Int])?["pinMismatch"] == 1)
        let served = try #require(www["servedPins"] as? [[String: Any]])
        #expect(Set(served.compactMap { $0["pin"] as? String }) == Set(self.fixtures.intercepting.presented.map { Pin(spkiOf: $0).base64 }))
        #expect(served.allSatisfy { $0["sources"] as? Int == 1 && $0["occurrences"] as? Int == 1 })
        #expect(www["knownPins"] as? [String] == [Pin(spkiOf: self.fixtures.genuine.root.certificate).base64])
        // TrustKit sends only the validated chain (the server's chain as the device saw it): its keys are the served ones.
        let api = try #require(hosts.first { $0["host"] as? String == "api.example.test" })
        let apiServed = try #require(api["servedPins"] as? [[String: Any]])
        #expect(Set(apiServed.compactMap { $0["pin"] as? String }) == Set(self.fixtures.intercepting.all.map { Pin(spkiOf: $0).base64 }))
        #expect(apiServed.allSatisfy { $0["occurrences"] as? Int == 3 })

        // Filters, paging with the cursor, the CSV.
        let first = try await collector.json("/api/reports?limit=2")
        #expect((first["reports"] as? [Any])?.count == 2)
        let cursor = try #require(first["next"] as? String)
        let second = try await collector.json("/api/reports?limit=2&cursor=\(cursor)")
        #expect((second["reports"] as? [Any])?.count == 1)
        #expect(second["next"] is NSNull)
        #expect((try await collector.json("/api/reports?app=com.example.bank")["reports"] as? [Any])?.count == 1)
        #expect((try await collector.json("/api/reports?result=nothing")["reports"] as? [Any])?.count == 0)
        #expect((try await collector.json("/api/reports?since=2999-01-01T00:00:00Z")["reports"] as? [Any])?.count == 0)
        let csv = try await collector.request(.GET, "/api/reports.csv", authorized: true)
        #expect(csv.status == 200)
        #expect(csv.body.hasPrefix("\"id\",\"receivedAt\""))
        #expect(csv.body.components(separatedBy: "\r\n").filter { !$0.isEmpty }.count == 4)

        let status = try await collector.request(.GET, "/status")
        let statusObject = try #require(try JSONSerialization.jsonObject(with: Data(status.body.utf8)) as? [String: Any])
        #expect(statusObject["status"] as? String == "ok")
        #expect(statusObject["database"] as? String == "sqlite")
        #expect(statusObject["uptime"] is Double || statusObject["uptime"] is Int)

        let metrics = try await collector.request(.GET, "/metrics")
        #expect(metrics.body.contains("collector_reports_received_total 5"))
        #expect(metrics.body.contains("collector_reports_stored_total 3"))
        #expect(metrics.body.contains("collector_reports_deduplicated_total 2"))
    }

    @Test("400 with one line, 413 over the cap (declared or chunked), 429 over the rate: never 500")
    func refusals() async throws {
        let collector = try await CollectorHarness { settings in
            settings.maxReportBytes = 4096
            settings.ratePerMinute = 5
        }
        defer { Task { await collector.stop() } }
        let malformed = try await collector.post(Data("{\"hostname\": 7}".utf8))
        #expect(malformed.status == 400)
        #expect(malformed.body == "the report: `hostname` is a number, not a string\n")
        #expect(try await collector.post(Data([0xFF, 0xFE, 0x00])).status == 400)
        // 10 MB: refused from its Content-Length, before it is read.
        let huge = try await collector.post(Data(repeating: UInt8(ascii: " "), count: 10 * 1024 * 1024))
        #expect(huge.status == 413)
        #expect(huge.body.contains("at most 4096"))
        // Refusals so far spent no rate tokens (nothing parsed); five reports pass, the sixth is over the rate.
        for index in 0..<5 {
            #expect(try await collector.post(try ReportFixtures.json(["hostname": "h\(index).example.test"])).status == 204)
        }
        let limited = try await collector.post(try ReportFixtures.json(["hostname": "over.example.test"]))
        #expect(limited.status == 429)
        #expect(Int(limited.header("Retry-After") ?? "") ?? 0 >= 1)
        let metrics = try await collector.request(.GET, "/metrics").body
        #expect(metrics.contains("collector_requests_refused_total{reason=\"malformed\"} 2"))
        #expect(metrics.contains("collector_requests_refused_total{reason=\"too_large\"} 1"))
        #expect(metrics.contains("collector_requests_refused_total{reason=\"rate_limited\"} 1"))
    }

    @Test("SQL metacharacters in every field are stored and returned verbatim (parameterised queries)")
    func sqlMetacharacters() async throws {
        let hostile = "x'); DELETE FROM reports; -- \" ? $1 %s \\ ` <b>"
        // Host names are refused unless they are host names (``HostNameTests``): a row with this host is one an
        // older collector stored, found by `?host=` as written; every other field is posted.
        var body: [String: Any] = ["hostname": "sql.example.test"]
        for key in ["app-bundle-id", "app-version", "app-platform", "app-platform-version", "app-vendor-id", "trustkit-version", "validation-result"] {
            body[key] = hostile
        }
        body["pinset-version"] = hostile
        let collector = try await CollectorHarness(legacy: [try CollectorHarness.legacyReport(host: hostile, ["noted-hostname": "n.example.test"])])
        defer { Task { await collector.stop() } }
        #expect(try await collector.post(try ReportFixtures.json(body)).status == 204)
        #expect(try await collector.post(try ReportFixtures.json(["hostname": "second.example.test"])).status == 204)
        let encodedHost = hostile.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let legacyRows = try #require(try await collector.json("/api/reports?host=\(encodedHost)")["reports"] as? [[String: Any]])
        #expect(legacyRows.count == 1)
        #expect(legacyRows.first?["host"] as? String == hostile)
        let rows = try #require(try await collector.json("/api/reports?host=sql.example.test")["reports"] as? [[String: Any]])
        let row = try #require(rows.first)
        #expect(rows.count == 1)
        #expect(row["appId"] as? String == hostile)
        #expect(row["pinsetVersion"] as? String == hostile)
        #expect(row["result"] as? String == hostile)
        #expect(row["libraryVersion"] as? String == "TrustKit " + hostile)
        #expect(try await collector.json("/api/summary")["reports"] as? Int == 3)
    }

    @Test("the API wants the token; the dashboard shows a login form, and posting the token sets an HttpOnly cookie")
    func authorisation() async throws {
        let collector = try await CollectorHarness()
        defer { Task { await collector.stop() } }
        for path in ["/api/summary", "/api/hosts", "/api/reports", "/api/reports.csv"] {
            #expect(try await collector.request(.GET, path).status == 401, "\(path)")
            #expect(try await collector.request(.GET, path, headers: [("Authorization", "Bearer wrong-token-0123456789")]).status == 401, "\(path)")
        }
        let login = try await collector.request(.GET, "/")
        #expect(login.status == 200)
        #expect(login.body.contains("type=\"password\""))
        #expect(!login.body.contains("Hosts"))
        let wrong = try await collector.request(.POST, "/login", body: Data("token=nope".utf8), headers: [("Content-Type", "application/x-www-form-urlencoded")])
        #expect(wrong.status == 401)
        #expect(wrong.header("Set-Cookie") == nil)
        let signedIn = try await collector.request(.POST, "/login", body: Data("token=\(collector.token)".utf8), headers: [("Content-Type", "application/x-www-form-urlencoded")])
        #expect(signedIn.status == 303)
        let cookie = try #require(signedIn.header("Set-Cookie"))
        #expect(cookie.contains("HttpOnly"))
        #expect(cookie.contains("SameSite=Strict"))
        #expect(!cookie.contains(collector.token), "the cookie is not the token itself")
        let pair = String(cookie.split(separator: ";")[0])
        let page = try await collector.request(.GET, "/", headers: [("Cookie", pair)])
        #expect(page.body.contains("<table id=\"hosts\">"))
        #expect(try await collector.request(.GET, "/api/summary", headers: [("Cookie", pair)]).status == 200)
        #expect(try await collector.request(.GET, "/api/summary", headers: [("Cookie", "pinning_collector_session=forged")]).status == 401)
    }

    @Test("the dashboard escapes every report value, sends a CSP, loads nothing from outside, and judges new keys")
    func dashboard() async throws {
        // Markup in a host is refused on ingest now (``HostNameTests``); a row an older collector stored with it is
        // still shown, escaped.
        let script = "<script>alert(1)</script>.example.test"
        let legacy = try CollectorHarness.legacyReport(host: script, ["app-bundle-id": "\"><img src=x onerror=alert(2)>", "validation-result": "pinMismatch"])
        let collector = try await CollectorHarness(anchors: [self.fixtures.genuine.root.certificate], legacy: [legacy])
        defer { Task { await collector.stop() } }
        // A rotation: a new leaf from the genuine CA, whose root the collector was told about (--anchors).
        let rotated = try TestPKI.leaf("api.example.test", issuer: self.fixtures.genuine.intermediate, dnsNames: ["api.example.test"])
        #expect(
            try await collector.post(
                try self.fixtures.pinning(host: "api.example.test", served: [rotated.certificate, self.fixtures.genuine.intermediate.certificate, self.fixtures.genuine.root.certificate])
            ).status == 204)
        // An interception of another host: a chain from a root nobody knows.
        #expect(try await collector.post(try ReportFixtures.json(self.fixtures.rfc7469(host: "mitm.example.test"))).status == 204)

        let page = try await collector.request(.GET, "/", authorized: true)
        #expect(page.status == 200)
        let csp = try #require(page.header("Content-Security-Policy"))
        #expect(csp.contains("default-src 'none'"))
        #expect(!page.body.contains("<script>"))
        #expect(page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;.example.test"))
        #expect(!page.body.contains("<img src=x"))
        #expect(page.body.contains("<svg class=\"chart\""))
        #expect(!page.body.contains("http://") || !page.body.replacingOccurrences(of: "http://www.w3.org/2000/svg", with: "").contains("http://"))
        #expect(!page.body.contains("https://"))
        #expect(page.body.contains("rotation: a pinned key is on the same chain") || page.body.contains("rotation: chains to a known CA"))
        #expect(page.body.contains("possible interception"))
        #expect(page.body.contains("add sha256/\(Pin(spkiOf: rotated.certificate).base64)"))
        // Counted words agree with their number: one report of the rotated key came from one source.
        #expect(page.body.contains("add sha256/\(Pin(spkiOf: rotated.certificate).base64) (served at position 0 by 1 source): "), "\(page.body)")
        #expect(!page.body.contains(" 1 sources") && !page.body.contains(">1</strong> hosts"))
        #expect(!page.body.contains("type=\"hidden\""), "no host was asked for")
        let one = try await collector.request(.GET, "/?host=mitm.example.test", authorized: true)
        #expect(one.body.contains("<input type=\"hidden\" name=\"host\" value=\"mitm.example.test\">"))
        #expect(one.body.contains("do not add sha256/\(Pin(spkiOf: self.fixtures.intercepting.leaf.certificate).base64)"))
        #expect(try await collector.request(.GET, "/?since=garbage", authorized: true).status == 400)
        // An impossible date: refused with its reason, in the words --at gives (RFC3339.read's).
        for path in ["/?since=2030-02-30T00:00:00Z", "/api/reports?since=2030-02-30T00:00:00Z"] {
            let reply = try await collector.request(.GET, path, authorized: true)
            #expect(reply.status == 400, "\(path)")
            #expect(
                reply.body.contains("since: not an RFC 3339 date-time (2030-06-01T00:00:00Z): day 30 does not exist: February 2030 has 28 days"),
                "\(path): \(reply.body)")
        }
    }
}

@Suite("Collector over HTTPS (--tls-identity)")
struct CollectorHTTPSTests {
    /// An HTTPS client that trusts `chain`'s root only.
    static func client(trusting chain: TestChain) throws -> HTTPClient.Configuration {
        var client = HTTPClient.Configuration()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: chain.root.der, format: .der)])
        client.tlsConfiguration = tls
        return client
    }

    @Test("with a PEM identity it serves HTTPS that a client trusting the CA accepts; the sign-in cookie is Secure")
    func https() async throws {
        let chain = try TestChain(host: "localhost", rootName: "Collector Root", intermediateName: "Collector Issuing CA")
        let directory = try TemporaryDirectory(prefix: "pinning-collector-tls")
        defer { directory.remove() }
        let identity = try directory.write("identity.pem", TestPKI.pemBundle([chain.leaf.certificate, chain.intermediate.certificate]) + chain.leaf.privateKeyPEM)
        let collector = try await CollectorHarness(tlsIdentity: identity, clientConfiguration: try Self.client(trusting: chain))
        defer { Task { await collector.stop() } }
        #expect(try await collector.request(.GET, "/status").status == 200)
        #expect(try await collector.post(try ReportFixtures.json(["hostname": "tls.example.test"])).status == 204)
        let signedIn = try await collector.request(.POST, "/login", body: Data("token=\(collector.token)".utf8), headers: [("Content-Type", "application/x-www-form-urlencoded")])
        #expect(signedIn.header("Set-Cookie")?.contains("Secure") == true)
    }

    @Test("an identity in a FIFO (as `<(cat id.pem)` gives it) is read once: the chain and the key come from the same bytes")
    func identityFromFIFO() async throws {
        let chain = try TestChain(host: "localhost")
        let directory = try TemporaryDirectory(prefix: "pinning-collector-tls-fifo")
        defer { directory.remove() }
        let pem = TestPKI.pemBundle([chain.leaf.certificate, chain.intermediate.certificate]) + chain.leaf.privateKeyPEM
        let fifo = directory.path("identity.pem")
        try #require(mkfifo(fifo, 0o600) == 0)
        // One writer, once, as a shell's process substitution: a second read of the FIFO would find no writer.
        let written = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            // open(2) waits for the collector to open the FIFO for reading.
            let descriptor = open(fifo, O_WRONLY)
            if descriptor >= 0 {
                _ = Array(pem.utf8).withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                close(descriptor)
            }
            written.signal()
        }
        let collector = try await CollectorHarness(tlsIdentity: fifo, clientConfiguration: try Self.client(trusting: chain))
        defer { Task { await collector.stop() } }
        written.wait()
        #expect(try await collector.request(.GET, "/status").status == 200)
    }

    @Test("an identity file without a key is refused naming the option, before anything listens")
    func noKey() async throws {
        let chain = try TestChain(host: "localhost")
        let directory = try TemporaryDirectory(prefix: "pinning-collector-tls")
        defer { directory.remove() }
        let identity = try directory.write("identity.pem", TestPKI.pemBundle([chain.leaf.certificate]))
        await #expect {
            _ = try await CollectorHarness(tlsIdentity: identity)
        } throws: { error in
            (error as? Collector.StartError)?.description.contains("--tls-identity") == true && (error as? Collector.StartError)?.exitStatus == 2
        }
    }
}
