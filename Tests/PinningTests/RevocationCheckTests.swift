import Foundation
import Pinning
import PinningPKI
import Testing
import X509

/// The evaluator's revocation stage (issue 14): ``RevocationPolicy`` applied to the validated path, in hard and
/// soft mode, leaf and chain scope, through every entry point (ServerTrust, SecurityPolicy in each pinning
/// mode, allowInvalidCertificates, host configurations with report-only) and through the verified-result cache.
@Suite("Revocation checking in the evaluator")
struct RevocationCheckTests {
    /// root → intermediate → leaf, with CRLs made on demand.
    struct Fleet {
        let chain: TestChain
        let now = Date()

        init(key: TestKeyType = .p256) throws {
            self.chain = try TestChain(key: key)
        }

        func crl(
            by issuer: TestIdentity,
            revoking revoked: [TestIdentity] = [],
            reason: TestCRL.Reason? = .keyCompromise,
            number: Int = 1,
            thisUpdate: Date? = nil,
            nextUpdate: Date? = nil
        ) throws -> CertificateRevocationList {
            let thisUpdate = thisUpdate ?? self.now.addingTimeInterval(-3600)
            let made = try TestCRL(
                issuer: issuer,
                entries: revoked.map { .init(serialNumber: $0.certificate.serialNumber, revocationDate: self.now.addingTimeInterval(-1800), reason: reason) },
                number: number,
                thisUpdate: thisUpdate,
                nextUpdate: nextUpdate ?? self.now.addingTimeInterval(7 * 86400)
            )
            return try CertificateRevocationList(derEncoded: made.der)
        }

        func trust(_ revocation: RevocationPolicy?, at time: Date? = nil) -> ServerTrust {
            var trust = ServerTrust(certificates: self.chain.presented, anchors: [self.chain.root.certificate], anchorsOnly: true, validationTime: time ?? self.now)
            trust.revocation = revocation
            return trust
        }

        var host: String { "localhost" }
    }

    @Test("a revoked leaf is refused with code revoked: serial, reason, revocation date and the CRL in the failure; soft mode refuses it too")
    func revokedLeaf() async throws {
        let fleet = try Fleet()
        let crl = try fleet.crl(by: fleet.chain.intermediate, revoking: [fleet.chain.leaf], number: 7)
        for mode in RevocationPolicy.Mode.allCases {
            let verdict = await fleet.trust(RevocationPolicy(crls: [crl], mode: mode)).evaluate(.ssl(host: fleet.host))
            let failure = try #require(verdict.failure)
            #expect(failure.code == .revoked)
            let status = try #require(failure.revocation?.firstRevoked)
            #expect(status.index == 0)
            #expect(status.serialNumber == CertificateInfo(fleet.chain.leaf.certificate).serialNumber)
            #expect(status.revocationReason == .keyCompromise && status.reason == "keyCompromise")
            #expect(status.revocationDate == crl.entries.first?.revocationDate)
            #expect(status.crlDescription == "\(fleet.chain.intermediate.certificate.subject), CRL number 7")
            #expect(failure.reason.contains("revoked") && failure.reason.contains("keyCompromise"), "\(failure.reason)")
            #expect(failure.failedCertificateIndex == 0)
            #expect(failure.multilineDescription.contains("revoked"))
        }
    }

    @Test("a leaf not on its issuer's current CRL is trusted, and the verdict says which CRL vouched for it")
    func goodLeaf() async throws {
        let fleet = try Fleet()
        let other = try TestPKI.leaf("other.example.com", issuer: fleet.chain.intermediate, dnsNames: ["other.example.com"])
        let crl = try fleet.crl(by: fleet.chain.intermediate, revoking: [other])
        let verdict = await fleet.trust(RevocationPolicy(crls: [crl])).evaluate(.ssl(host: fleet.host))
        let chain = try verdict.get()
        let report = try #require(chain.revocation)
        #expect(report.mode == .hard && report.scope == .leaf)
        #expect(report.certificates.map(\.status) == [.good])
        #expect(report.certificates.first?.crl == crl)
        #expect(chain.warnings.isEmpty)
        // Without a policy nothing is checked and the verdict carries no report.
        #expect(try await fleet.trust(nil).evaluate(.ssl(host: fleet.host)).get().revocation == nil)
    }

    @Test("no usable CRL: hard mode refuses with revocationUnknown and says why; soft mode trusts with a warning", arguments: ["none", "stale", "notYetValid", "otherKey", "noNextUpdate"])
    func unknownStatus(_ kind: String) async throws {
        let fleet = try Fleet()
        let crls: [CertificateRevocationList]
        let expected: String
        switch kind {
        case "none":
            crls = []
            expected = "no CRL from \(fleet.chain.intermediate.certificate.subject) was given"
        case "stale":
            crls = [try fleet.crl(by: fleet.chain.intermediate, thisUpdate: fleet.now.addingTimeInterval(-7200), nextUpdate: fleet.now.addingTimeInterval(-60))]
            expected = "is stale: its nextUpdate was"
        case "notYetValid":
            crls = [try fleet.crl(by: fleet.chain.intermediate, thisUpdate: fleet.now.addingTimeInterval(3600))]
            expected = "is not valid before its thisUpdate"
        case "otherKey":
            // Same issuer name, another key: the name matches, the signature does not. It must not revoke either.
            let impostor = try TestPKI.intermediate("Test Intermediate CA", issuer: fleet.chain.root)
            #expect(impostor.certificate.subject == fleet.chain.intermediate.certificate.subject)
            crls = [try fleet.crl(by: impostor, revoking: [fleet.chain.leaf])]
            expected = "is not signed by the issuer on the path"
        default:
            crls = [
                try CertificateRevocationList(derEncoded: try TestCRL(issuer: fleet.chain.intermediate, entries: [], number: 1, thisUpdate: fleet.now.addingTimeInterval(-60), nextUpdate: nil).der)
            ]
            expected = "it has no nextUpdate"
        }
        let hard = await fleet.trust(RevocationPolicy(crls: crls, mode: .hard)).evaluate(.ssl(host: fleet.host))
        let failure = try #require(hard.failure)
        #expect(failure.code == .revocationUnknown)
        #expect(failure.reason.contains(expected), "\(failure.reason)")
        #expect(failure.revocation?.unknown.count == 1)

        let soft = try await fleet.trust(RevocationPolicy(crls: crls, mode: .soft)).evaluate(.ssl(host: fleet.host)).get()
        #expect(soft.revocation?.certificates.map(\.status) == [.unknown])
        #expect(soft.warnings.contains { $0.contains(expected) && $0.contains("accepted because revocation mode is soft") }, "\(soft.warnings)")
    }

    @Test("a CRL from another issuer never revokes: the same serial on another CA's CRL is ignored (x509-limbo's case)")
    func otherIssuer() async throws {
        let fleet = try Fleet()
        let stranger = try TestPKI.root("Stranger CA")
        let strangers = try TestCRL(
            issuer: stranger,
            entries: [.init(serialNumber: fleet.chain.leaf.certificate.serialNumber, revocationDate: fleet.now.addingTimeInterval(-60), reason: .keyCompromise)],
            number: 1, thisUpdate: fleet.now.addingTimeInterval(-60), nextUpdate: fleet.now.addingTimeInterval(600))
        let own = try fleet.crl(by: fleet.chain.intermediate)
        let verdict = await fleet.trust(RevocationPolicy(crls: [try CertificateRevocationList(derEncoded: strangers.der), own])).evaluate(.ssl(host: fleet.host))
        #expect(try verdict.get().revocation?.certificates.map(\.status) == [.good])
    }

    @Test("scope chain checks the intermediate too (and needs the root's CRL); scope leaf does not, as openssl -crl_check")
    func chainScope() async throws {
        let fleet = try Fleet()
        let leafCRL = try fleet.crl(by: fleet.chain.intermediate)
        let rootCRL = try fleet.crl(by: fleet.chain.root, revoking: [fleet.chain.intermediate], reason: .cACompromise)
        let cleanRootCRL = try fleet.crl(by: fleet.chain.root, number: 2)

        let leafOnly = await fleet.trust(RevocationPolicy(crls: [leafCRL, rootCRL], scope: .leaf)).evaluate(.ssl(host: fleet.host))
        #expect(leafOnly.isTrusted)

        let chain = await fleet.trust(RevocationPolicy(crls: [leafCRL, rootCRL], scope: .chain)).evaluate(.ssl(host: fleet.host))
        let failure = try #require(chain.failure)
        #expect(failure.code == .revoked && failure.failedCertificateIndex == 1)
        #expect(failure.revocation?.certificates.map(\.status) == [.good, .revoked])
        #expect(failure.revocation?.firstRevoked?.reason == "cACompromise")

        let missingRoot = await fleet.trust(RevocationPolicy(crls: [leafCRL], scope: .chain)).evaluate(.ssl(host: fleet.host))
        #expect(missingRoot.failure?.code == .revocationUnknown)
        #expect(missingRoot.failure?.failedCertificateIndex == 1)

        let clean = try await fleet.trust(RevocationPolicy(crls: [leafCRL, cleanRootCRL], scope: .chain)).evaluate(.ssl(host: fleet.host)).get()
        #expect(clean.revocation?.certificates.map(\.status) == [.good, .good])
    }

    @Test("a revoked intermediate sends path building to another path: the cross-signed one is trusted")
    func alternativePath() async throws {
        let fleet = try Fleet()
        let otherRoot = try TestPKI.root("Other Root")
        let crossSigned = try TestPKI.crossSign(fleet.chain.intermediate, by: otherRoot, maxPathLength: 0)
        let revokesIntermediate = try fleet.crl(by: fleet.chain.root, revoking: [fleet.chain.intermediate])
        let otherRootCRL = try fleet.crl(by: otherRoot)
        let leafCRL = try fleet.crl(by: fleet.chain.intermediate)
        var trust = ServerTrust(
            certificates: fleet.chain.presented + [crossSigned.certificate],
            anchors: [fleet.chain.root.certificate, otherRoot.certificate],
            anchorsOnly: true,
            validationTime: fleet.now
        )
        trust.revocation = RevocationPolicy(crls: [leafCRL, revokesIntermediate, otherRootCRL], scope: .chain)
        let chain = try await trust.evaluate(.ssl(host: fleet.host)).get()
        #expect(chain.path.last == otherRoot.certificate)
        #expect(chain.revocation?.certificates.map(\.status) == [.good, .good])
    }

    @Test("every pinning mode, and allowInvalidCertificates' signature-linked path, still refuse a revoked leaf")
    func policies() async throws {
        let fleet = try Fleet()
        let crl = try fleet.crl(by: fleet.chain.intermediate, revoking: [fleet.chain.leaf])
        let revocation = RevocationPolicy(crls: [crl])
        let policies: [(String, SecurityPolicy)] = [
            ("none", SecurityPolicy(pinningMode: .none)),
            ("publicKey", .publicKeys([Pin(spkiOf: fleet.chain.intermediate.certificate)])),
            ("certificate", .pinnedCertificates([fleet.chain.leaf.certificate])),
        ]
        for (name, policy) in policies {
            let verdict = await policy.evaluate(fleet.trust(revocation), forDomain: fleet.host)
            #expect(verdict.failure?.code == .revoked, "\(name): \(String(describing: verdict.failure))")
            // The same policy without the revocation trusts the chain: the refusal is the revocation's.
            #expect(await policy.evaluate(fleet.trust(nil), forDomain: fleet.host).isTrusted, "\(name)")
        }
        // allowInvalidCertificates with a pinned key: the anchor and the dates are waived, revocation is not.
        var lenient = SecurityPolicy.publicKeys([Pin(spkiOf: fleet.chain.intermediate.certificate)])
        lenient.allowInvalidCertificates = true
        var unanchored = fleet.trust(revocation)
        unanchored.anchors = []
        let refused = await lenient.evaluate(unanchored, forDomain: fleet.host)
        #expect(refused.failure?.code == .revoked, "\(String(describing: refused.failure))")
        unanchored.revocation = RevocationPolicy(crls: [try fleet.crl(by: fleet.chain.intermediate, number: 2)])
        let linked = try await lenient.evaluate(unanchored, forDomain: fleet.host).get()
        #expect(linked.basis == .pinOnSignatureLinkedPath)
        #expect(linked.revocation?.certificates.map(\.status) == [.good])
    }

    @Test("a report-only configuration entry waives the pins, not revocation")
    func reportOnly() async throws {
        let fleet = try Fleet()
        let crl = try fleet.crl(by: fleet.chain.intermediate, revoking: [fleet.chain.leaf])
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try directory.write("root.pem", fleet.chain.root.certificatePEM)
        // One pin that matches nothing on the path and a backup: a mismatch, reported, not enforced.
        let json = """
            {"version": 1, "domains": {"\(fleet.host)": {"pins": ["sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "sha256/BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA="], "enforce": false, "anchors": ["root.pem"], "anchorsOnly": true}}}
            """
        let configuration = try PinningConfiguration(data: Data(json.utf8), baseDirectory: directory.path)
        var trust = ServerTrust(certificates: fleet.chain.presented, validationTime: fleet.now)
        let mismatch = await configuration.evaluate(trust, forHost: fleet.host)
        #expect(mismatch.verdict.isTrusted && mismatch.pinMismatch)
        trust.revocation = RevocationPolicy(crls: [crl])
        let evaluation = await configuration.evaluate(trust, forHost: fleet.host)
        #expect(evaluation.verdict.failure?.code == .revoked)
    }

    @Test("the verified-result cache keys on the CRLs and ends an entry at the CRL's nextUpdate")
    func cache() async throws {
        let fleet = try Fleet()
        let clean = try fleet.crl(by: fleet.chain.intermediate, nextUpdate: fleet.now.addingTimeInterval(600))
        let revoking = try fleet.crl(by: fleet.chain.intermediate, revoking: [fleet.chain.leaf], number: 2)
        let clock = LockedClock(fleet.now)
        let cache = EvaluationCache(maximumEntries: 16, timeToLive: .seconds(86400), clock: { clock.now })
        var trust = fleet.trust(RevocationPolicy(crls: [clean]))
        trust.validationTime = nil
        #expect(await trust.evaluate(.ssl(host: fleet.host), cache: cache).isTrusted)
        #expect(await trust.evaluate(.ssl(host: fleet.host), cache: cache).isTrusted)
        #expect(cache.statistics.hits == 1)
        // Another CRL set is another key: the revoking CRL is looked at, not the cached verdict.
        trust.revocation = RevocationPolicy(crls: [revoking])
        #expect(await trust.evaluate(.ssl(host: fleet.host), cache: cache).failure?.code == .revoked)
        // Past the clean CRL's nextUpdate the cached verdict no longer counts: the CRL is stale, so unknown.
        trust.revocation = RevocationPolicy(crls: [clean])
        clock.now = fleet.now.addingTimeInterval(601)
        #expect(await trust.evaluate(.ssl(host: fleet.host), cache: cache).failure?.code == .revocationUnknown)
    }

    @Test("policies compare by their CRLs' bytes, mode and scope")
    func equality() throws {
        let fleet = try Fleet()
        let a = try fleet.crl(by: fleet.chain.intermediate)
        let b = try fleet.crl(by: fleet.chain.intermediate, number: 2)
        #expect(RevocationPolicy(crls: [a]) == RevocationPolicy(crls: [try CertificateRevocationList(derEncoded: a.der)]))
        #expect(RevocationPolicy(crls: [a]) != RevocationPolicy(crls: [b]))
        #expect(RevocationPolicy(crls: [a], mode: .hard) != RevocationPolicy(crls: [a], mode: .soft))
        #expect(RevocationPolicy(crls: [a], scope: .leaf) != RevocationPolicy(crls: [a], scope: .chain))
        var changed = RevocationPolicy(crls: [a])
        changed.crls = [b]
        #expect(changed == RevocationPolicy(crls: [b]))
    }
}

/// A settable clock for the cache.
final class LockedClock: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Date
    init(_ value: Date) { self.value = value }
    var now: Date {
        get { self.lock.withLock { self.value } }
        set { self.lock.withLock { self.value = newValue } }
    }
}
