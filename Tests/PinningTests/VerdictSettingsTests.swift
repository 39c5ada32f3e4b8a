import Foundation
import Pinning
import PinningPKI
import PinningTestSupport
import Testing
import X509

/// Issue 28, item 2: a verdict records the settings and the instant it was judged under, so a report shows them
/// without rebuilding them (`pinning check` rebuilt a configuration entry's revocation policy to show it).
@Suite("Verdicts record the settings they were judged under")
struct VerdictSettingsTests {
    @Test("ServerTrust and SecurityPolicy verdicts, trusted and refused, carry the trust's settings and instant")
    func direct() async throws {
        let chain = try TestChain(host: "api.example.com")
        var settings = TrustSettings(anchors: [chain.root.certificate], anchorsOnly: true)
        settings.limits.maximumIntermediates = 3
        let instant = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        var trust = settings.trust(for: chain.presented)
        trust.validationTime = instant
        let trusted = await trust.evaluate(.ssl(host: "api.example.com"))
        let refused = await SecurityPolicy.default.evaluate(trust, forDomain: "www.example.com")
        for verdict in [trusted, refused] {
            let judged = try #require(verdict.judgedTrust)
            #expect(judged.anchors == [chain.root.certificate] && judged.anchorsOnly)
            #expect(judged.limits.maximumIntermediates == 3)
            #expect(judged.validationTime == instant)
            #expect(judged.certificates == chain.presented)
        }
        #expect(trusted.isTrusted && refused.failure?.code == .hostnameMismatch)
    }

    @Test("a configuration's verdict records the entry's revocation policy combined with the client's")
    func configurationEntry() async throws {
        let chain = try TestChain(host: "api.example.com")
        let directory = try TemporaryDirectory(prefix: "pinning-verdict-settings")
        defer { directory.remove() }
        try directory.write("root.pem", chain.root.certificatePEM)
        let crl = try TestCRL(issuer: chain.intermediate, entries: [], number: 1, thisUpdate: Date() - 60, nextUpdate: Date() + 86400)
        try directory.write("fleet.crl", crl.pem)
        let pin = Pin(spkiOf: chain.intermediate.certificate).description
        let backup = "sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString()
        let configuration = try PinningConfiguration(
            data: Data(
                #"{"version": 1, "domains": {"api.example.com": {"pins": ["\#(pin)", "\#(backup)"], "anchors": ["root.pem"], "anchorsOnly": true, "revocation": {"crls": ["fleet.crl"], "mode": "soft", "scope": "leaf"}}}}"#
                    .utf8),
            baseDirectory: directory.path)
        let verdict = await configuration.evaluate(ServerTrust(certificates: chain.presented), forDomain: "api.example.com")
        #expect(verdict.isTrusted, "\(verdict)")
        let judged = try #require(verdict.judgedTrust)
        #expect(judged.revocation == configuration.revocationPolicy(for: ServerTrust(certificates: chain.presented), forDomain: "api.example.com"))
        #expect(judged.revocation?.mode == .soft)
        #expect(judged.anchors == [chain.root.certificate])
    }

    @Test("a verdict answered from the cache records the moment it was answered")
    func cachedVerdict() async throws {
        let chain = try TestChain(host: "api.example.com")
        let clock = ManualClock(Date())
        let cache = EvaluationCache(maximumEntries: 16, timeToLive: .seconds(3600), clock: { clock.now })
        let trust = TrustSettings(anchors: [chain.root.certificate], anchorsOnly: true).trust(for: chain.presented)
        let first = await trust.evaluate(.ssl(host: "api.example.com"), cache: cache)
        clock.advance(by: 60)
        let second = await trust.evaluate(.ssl(host: "api.example.com"), cache: cache)
        #expect(cache.statistics.hits == 1)
        let answered = try #require(second.judgedTrust?.validationTime as Date?)
        let judged = try #require(first.judgedTrust?.validationTime as Date?)
        #expect(answered.timeIntervalSince(judged) >= 59, "\(judged) \(answered)")
    }
}
