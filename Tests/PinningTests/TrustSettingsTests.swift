import Foundation
@_spi(FixedValidationTime) import Pinning
import PinningTestSupport
import Testing
import X509

/// Issue 17, item 2: what a peer presents (``ServerTrust/certificates``) is kept apart from how it is judged
/// (``TrustSettings``, held by clients, servers and configurations); the fixed validation clock of long-lived
/// settings is behind SPI.
@Suite("TrustSettings: the presented chain apart from how it is judged")
struct TrustSettingsTests {
    static let fixture = Result { try TestChain(host: "api.example.com") }

    @Test("settings applied to a chain judge it exactly as the all-in-one ServerTrust did")
    func sameVerdicts() async throws {
        let chain = try Self.fixture.get()
        let other = try TestChain(host: "api.example.com")
        let settings = TrustSettings(anchors: [chain.root.certificate], anchorsOnly: true)
        for (presented, host, trusted) in [
            (chain.presented, "api.example.com", true),
            (chain.presented, "www.example.com", false),
            (other.presented, "api.example.com", false),
        ] {
            let old = ServerTrust(certificates: presented, anchors: [chain.root.certificate], anchorsOnly: true)
            let new = settings.trust(for: presented)
            let a = await old.evaluate(.ssl(host: host))
            let b = await new.evaluate(.ssl(host: host))
            #expect(a.isTrusted == trusted && b.isTrusted == trusted, "\(host)")
            #expect(a.failure?.code == b.failure?.code)
            #expect(new.certificates == presented && new.validationTime == nil)
        }
    }

    @Test("ServerTrust's setting fields read and write its settings")
    func forwarding() throws {
        let chain = try Self.fixture.get()
        var trust = ServerTrust(certificates: chain.presented)
        trust.anchors = [chain.root.certificate]
        trust.anchorsOnly = true
        trust.purpose = .clientAuthentication
        trust.limits.maximumIntermediates = 2
        #expect(trust.settings.anchors == [chain.root.certificate])
        #expect(trust.settings.anchorsOnly)
        #expect(trust.settings.purpose == .clientAuthentication)
        #expect(trust.settings.limits.maximumIntermediates == 2)
        trust.settings = .default
        #expect(trust.anchors.isEmpty && !trust.anchorsOnly && trust.purpose == .serverAuthentication)
        #expect(trust.certificates == chain.presented)
    }

    @Test("settings evaluate at the current time unless a fixed instant is asked for by name (SPI)")
    func fixedClockOnlyByName() async throws {
        let root = try TestPKI.root("Settings Root", notValidBefore: Date() - 30 * 86400, notValidAfter: Date() + 365 * 86400)
        let leaf = try TestPKI.leaf(
            "api.example.com", issuer: root, dnsNames: ["api.example.com"],
            notValidBefore: Date() - 10 * 86400, notValidAfter: Date() - 86400
        )
        let settings = TrustSettings(anchors: [root.certificate], anchorsOnly: true)
        #expect(settings.validationTime == nil)
        let now = await settings.trust(for: [leaf.certificate]).evaluate(.ssl(host: "api.example.com"))
        #expect(now.failure?.code == .certificateExpired)

        let replay = settings.validatingAt(Date() - 5 * 86400)
        let trust = replay.trust(for: [leaf.certificate])
        #expect(trust.validationTime == replay.validationTime)
        #expect(await trust.evaluate(.ssl(host: "api.example.com")).isTrusted)
        // The copy it was made from is unchanged: a long-lived holder keeps the live clock.
        #expect(settings.validationTime == nil)
    }
}
