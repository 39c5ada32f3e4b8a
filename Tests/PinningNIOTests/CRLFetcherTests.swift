import Foundation
import NIOCore
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// Fetching CRLs from distribution points (issue 14): the extension read, the download bounded and cached, and
/// the fetched CRLs judged by the same revocation stage as CRLs from files.
@Suite("CRL distribution points and CRLFetcher", .serialized)
struct CRLFetcherTests {
    /// root → intermediate → leaf, the leaf re-issued naming `urls` as its CRL distribution points.
    struct Fixture {
        let chain: TestChain
        let leaf: TestIdentity

        init(urls: [String]) throws {
            self.chain = try TestChain()
            self.leaf = try TestPKI.withCRLDistributionPoints(self.chain.leaf, issuer: self.chain.intermediate, urls: urls)
        }

        func crl(revoking revoked: [TestIdentity], number: Int = 1, nextUpdate: TimeInterval = 86400) throws -> [UInt8] {
            try TestCRL(
                issuer: self.chain.intermediate,
                entries: revoked.map { .init(serialNumber: $0.certificate.serialNumber, revocationDate: Date().addingTimeInterval(-1), reason: .keyCompromise) },
                number: number,
                thisUpdate: Date().addingTimeInterval(-60),
                nextUpdate: Date().addingTimeInterval(nextUpdate)
            ).der
        }

        /// The chain, with a revocation policy asking for fetching (unless `fetch` is false).
        func trust(mode: RevocationPolicy.Mode = .hard, fetch: Bool = true) -> ServerTrust {
            var trust = ServerTrust(certificates: [self.leaf.certificate, self.chain.intermediate.certificate], anchors: [self.chain.root.certificate], anchorsOnly: true)
            trust.revocation = RevocationPolicy(crls: [], mode: mode, fetch: fetch)
            return trust
        }
    }

    @Test("the extension: http and https URLs in order; ldap skipped; none without the extension")
    func distributionPoints() throws {
        let fixture = try Fixture(urls: ["ldap://dir.example/cn=crl", "http://crl.example/int.crl", "https://crl.example/int.crl"])
        #expect(fixture.leaf.certificate.crlDistributionPointURLs.map(\.absoluteString) == ["http://crl.example/int.crl", "https://crl.example/int.crl"])
        #expect(fixture.chain.leaf.certificate.crlDistributionPointURLs.isEmpty)
    }

    @Test("a revoked leaf is refused with the downloaded CRL; the download is cached until nextUpdate")
    func revokedByFetchedCRL() async throws {
        let server = try LoopbackHTTPServer(statuses: [200])
        defer { server.stop() }
        let fixture = try Fixture(urls: [server.url("/int.crl").absoluteString])
        server.responseBody = try fixture.crl(revoking: [fixture.leaf])
        let fetcher = CRLFetcher(timeout: .seconds(5))
        let evaluator = RevocationFetchingEvaluator(SecurityPolicy.defaultEvaluation, fetcher: fetcher)
        let verdict = await evaluator.evaluate(fixture.trust(), forDomain: "localhost")
        #expect(verdict.failure?.code == .revoked, "\(String(describing: verdict.failure))")
        let again = await evaluator.evaluate(fixture.trust(), forDomain: "localhost")
        #expect(again.failure?.code == .revoked)
        #expect(fetcher.downloadCount == 1)
        let requests = await server.waitForRequests(1)
        #expect(requests.first?.requestLine == "GET /int.crl HTTP/1.1", "\(requests)")

        // Within the refresh margin of its nextUpdate the cached CRL still answers, and a new one is fetched in
        // the background.
        server.responseBody = try fixture.crl(revoking: [fixture.leaf], number: 2, nextUpdate: 600)
        let soon = CRLFetcher(timeout: .seconds(5), refreshMargin: 3600)
        let first = await soon.crls(for: [fixture.leaf.certificate])
        #expect(first.crls.count == 1 && soon.downloadCount == 1)
        let second = await soon.crls(for: [fixture.leaf.certificate])
        #expect(second.crls.count == 1)
        let deadline = Date().addingTimeInterval(60)
        while soon.downloadCount < 2 && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(soon.downloadCount == 2)
    }

    @Test("a leaf not on the fetched CRL is trusted, the report naming the CRL")
    func goodByFetchedCRL() async throws {
        let server = try LoopbackHTTPServer(statuses: [200])
        defer { server.stop() }
        let fixture = try Fixture(urls: [server.url("/int.crl").absoluteString])
        server.responseBody = try fixture.crl(revoking: [fixture.chain.leaf])  // another certificate of the same CA
        let evaluator = RevocationFetchingEvaluator(SecurityPolicy.defaultEvaluation, fetcher: CRLFetcher())
        let chain = try await evaluator.evaluate(fixture.trust(), forDomain: "localhost").get()
        #expect(chain.revocation?.certificates.map(\.status) == [.good])
    }

    @Test("no CRL to be had (404, refused connection, not a CRL, too large): unknown with the download's reason; hard refuses, soft warns", arguments: ["404", "refused", "garbage", "tooLarge"])
    func unavailable(_ kind: String) async throws {
        let server = try LoopbackHTTPServer(statuses: [kind == "404" ? 404 : 200])
        defer { server.stop() }
        let url = kind == "refused" ? "http://127.0.0.1:1/int.crl" : server.url("/int.crl").absoluteString
        let fixture = try Fixture(urls: [url])
        var maximumSize = 16 * 1024 * 1024
        let expected: String
        switch kind {
        case "404":
            expected = "the server answered HTTP 404"
        case "refused":
            expected = "fetching http://127.0.0.1:1/int.crl:"
        case "garbage":
            server.responseBody = Array("<html>not a CRL</html>".utf8)
            expected = "not a CRL"
        default:
            server.responseBody = try fixture.crl(revoking: [])
            maximumSize = 100
            expected = "larger than 100 bytes"
        }
        let fetcher = CRLFetcher(timeout: .seconds(5), maximumSize: maximumSize)
        let hard = await RevocationFetchingEvaluator(SecurityPolicy.defaultEvaluation, fetcher: fetcher).evaluate(fixture.trust(), forDomain: "localhost")
        let failure = try #require(hard.failure)
        #expect(failure.code == .revocationUnknown, "\(failure)")
        #expect(failure.reason.contains(expected), "\(failure.reason)")
        let soft = await RevocationFetchingEvaluator(SecurityPolicy.defaultEvaluation, fetcher: fetcher).evaluate(fixture.trust(mode: .soft), forDomain: "localhost")
        #expect(try soft.get().warnings.contains { $0.contains(expected) }, "\(soft)")
        // The failure is remembered for the back-off: no second download.
        #expect(fetcher.downloadCount == 1)
    }

    @Test("nothing is fetched unless the policy asks; asked but not fetched is unknown, never good")
    func onlyWhenAsked() async throws {
        let server = try LoopbackHTTPServer(statuses: [200])
        defer { server.stop() }
        let fixture = try Fixture(urls: [server.url("/int.crl").absoluteString])
        server.responseBody = try fixture.crl(revoking: [fixture.leaf])
        let fetcher = CRLFetcher(timeout: .seconds(5))
        let evaluator = RevocationFetchingEvaluator(SecurityPolicy.defaultEvaluation, fetcher: fetcher)

        // No revocation policy: passed through, nothing downloaded, nothing checked.
        var plain = fixture.trust()
        plain.revocation = nil
        let unchecked = try await evaluator.evaluate(plain, forDomain: "localhost").get()
        #expect(unchecked.revocation == nil)
        // A policy with CRL files only (fetch false): checked against those, nothing downloaded.
        let filesOnly = await evaluator.evaluate(fixture.trust(fetch: false), forDomain: "localhost")
        #expect(filesOnly.failure?.code == .revocationUnknown)
        #expect(fetcher.downloadCount == 0)

        // Fetching asked for, but the evaluator does not fetch: unknown, and the reason says so.
        let notFetched = await SecurityPolicy.defaultEvaluation.evaluate(fixture.trust(), forDomain: "localhost")
        let failure = try #require(notFetched.failure)
        #expect(failure.code == .revocationUnknown)
        #expect(failure.reason.contains("this evaluator does not fetch"), "\(failure.reason)")
        #expect(fetcher.downloadCount == 0)
    }

    @Test("a certificate that names no CRL distribution point: the reason says so (nothing could be fetched), and only then")
    func noDistributionPoint() async throws {
        let fixture = try Fixture(urls: [])
        let fetcher = CRLFetcher(timeout: .seconds(5))
        let evaluator = RevocationFetchingEvaluator(SecurityPolicy.defaultEvaluation, fetcher: fetcher)
        // The test chain's own leaf has no CRLDistributionPoints extension.
        func trust(fetch: Bool) -> ServerTrust {
            var trust = ServerTrust(
                certificates: [fixture.chain.leaf.certificate, fixture.chain.intermediate.certificate], anchors: [fixture.chain.root.certificate], anchorsOnly: true)
            trust.revocation = RevocationPolicy(crls: [], mode: .hard, fetch: fetch)
            return trust
        }
        let issuer = fixture.chain.intermediate.certificate.subject
        let fetched = await evaluator.evaluate(trust(fetch: true), forDomain: "localhost")
        let failure = try #require(fetched.failure)
        #expect(failure.code == .revocationUnknown)
        #expect(
            failure.reason.contains("it names no CRL distribution point (http or https), so no CRL could be fetched, and none from \(issuer) was given"),
            "\(failure.reason)")
        #expect(fetcher.downloadCount == 0)

        // Without fetching, nothing was to be fetched: the words are as before.
        let unfetched = await evaluator.evaluate(trust(fetch: false), forDomain: "localhost")
        let filesOnly = try #require(unfetched.failure)
        #expect(filesOnly.reason.contains("no CRL from \(issuer) was given") && !filesOnly.reason.contains("distribution point"), "\(filesOnly.reason)")

        // A distribution point whose download fails: that failure is the reason, not a missing distribution point.
        let server = try LoopbackHTTPServer(statuses: [404])
        defer { server.stop() }
        let listed = try Fixture(urls: [server.url("/int.crl").absoluteString])
        let afterDownload = await evaluator.evaluate(listed.trust(), forDomain: "localhost")
        let downloadFailed = try #require(afterDownload.failure)
        #expect(downloadFailed.code == .revocationUnknown)
        #expect(!downloadFailed.reason.contains("names no CRL distribution point"), "\(downloadFailed.reason)")
    }

    @Test("a configuration entry with \"fetch\": true: its hosts' CRLs are downloaded and combined with the entry's files")
    func configurationEntryFetches() async throws {
        let server = try LoopbackHTTPServer(statuses: [200])
        defer { server.stop() }
        let fixture = try Fixture(urls: [server.url("/int.crl").absoluteString])
        server.responseBody = try fixture.crl(revoking: [fixture.leaf])
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        _ = try directory.write("root.pem", fixture.chain.root.certificatePEM)
        // An older CRL file from the same CA that does not list the leaf: the fetched one, newer, does.
        _ = try directory.write("old.crl", bytes: fixture.crl(revoking: []))
        func configuration(_ revocation: String) throws -> PinningConfiguration {
            let json = """
                {"version": 1, "domains": {"localhost": {"pins": ["\(Pin(spkiOf: fixture.chain.root.certificate).description)", "\(Pin(spkiOf: fixture.chain.intermediate.certificate).description)"],
                  "anchors": ["root.pem"], "anchorsOnly": true, "revocation": \(revocation)}}}
                """
            return try PinningConfiguration(data: Data(json.utf8), baseDirectory: directory.path)
        }
        var chainOnly = fixture.trust()
        chainOnly.revocation = nil

        let fetcher = CRLFetcher(timeout: .seconds(5))
        let fetching = try configuration(#"{"fetch": true}"#)
        #expect(fetching.entries.first?.revocation?.fetch == true)
        let revoked = await RevocationFetchingEvaluator(fetching, fetcher: fetcher).evaluate(chainOnly, forDomain: "localhost")
        #expect(revoked.failure?.code == .revoked, "\(String(describing: revoked.failure))")
        #expect(fetcher.downloadCount == 1)

        // Files and fetching together: the entry's file is kept beside the download, and a listing on either revokes.
        let both = try configuration(#"{"crls": ["old.crl"], "fetch": true}"#)
        let stillRevoked = await RevocationFetchingEvaluator(both, fetcher: fetcher).evaluate(chainOnly, forDomain: "localhost")
        #expect(stillRevoked.failure?.code == .revoked)

        // The same entry without fetch: only the old file, which does not list the leaf.
        let filesOnly = try configuration(#"{"crls": ["old.crl"]}"#)
        let good = try await RevocationFetchingEvaluator(filesOnly, fetcher: fetcher).evaluate(chainOnly, forDomain: "localhost").get()
        #expect(good.revocation?.certificates.map(\.status) == [.good])
        #expect(fetcher.downloadCount == 1)
    }
}
