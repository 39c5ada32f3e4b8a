import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

/// Issue 11, item 13 (found by translating OkHttp's CertificatePinnerChainValidationTest): a pinned root must be
/// found when one of its intermediates is itself a trust anchor and the server sends only its leaf. Path
/// building stops at the first anchor; pins may match any certificate of any valid path, including the
/// anchors beyond a configured intermediate anchor.
@Suite("Pins beyond an intermediate trust anchor")
struct PinBeyondAnchorTests {
    static let fixture = Result { try TestChain(host: "api.example.com") }

    /// The client trusts the intermediate explicitly and the root through the platform store.
    func trust(_ presented: [Certificate], _ chain: TestChain, anchorsOnly: Bool = false) -> ServerTrust {
        var trust = ServerTrust(certificates: presented, platformRoots: TrustRoots([chain.root.certificate]))
        trust.anchors = [chain.intermediate.certificate]
        trust.anchorsOnly = anchorsOnly
        return trust
    }

    @Test("a root pin is found past the intermediate anchor, whether or not the server sends the intermediate")
    func rootPinFound() async throws {
        let chain = try Self.fixture.get()
        for presented in [[chain.leaf.certificate], [chain.leaf.certificate, chain.intermediate.certificate]] {
            let trust = self.trust(presented, chain)
            let verdict = await trust.evaluate(.ssl(host: "api.example.com"), pins: .publicKeys([Pin(spkiOf: chain.root.certificate)]))
            let trusted = try #require(try? verdict.get(), "\(presented.count) presented: \(String(describing: verdict.failure))")
            #expect(trusted.path == [chain.leaf.certificate, chain.intermediate.certificate, chain.root.certificate])

            // The same through SecurityPolicy, the way an AFNetworking user writes it.
            let policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: chain.root.certificate)])
            #expect(await policy.evaluate(trust, forDomain: "api.example.com").isTrusted)
        }
    }

    @Test("pins on the short path still match first; unrelated pins still fail")
    func otherPins() async throws {
        let chain = try Self.fixture.get()
        let trust = self.trust([chain.leaf.certificate], chain)
        let onShortPath = await trust.evaluate(.ssl(host: "api.example.com"), pins: .publicKeys([Pin(spkiOf: chain.intermediate.certificate)]))
        #expect(try onShortPath.get().path == [chain.leaf.certificate, chain.intermediate.certificate])

        let unrelated = try TestPKI.root("Unrelated Root")
        let verdict = await trust.evaluate(.ssl(host: "api.example.com"), pins: .publicKeys([Pin(spkiOf: unrelated.certificate)]))
        #expect(verdict.failure?.code == .pinMismatch)
        // The explanation is about the path that validated (ending at the configured anchor).
        #expect(verdict.failure?.validatedPath == [chain.leaf.certificate, chain.intermediate.certificate])
    }

    @Test("the root is only beyond the anchor when the client trusts it: anchorsOnly without it fails closed")
    func rootNotTrusted() async throws {
        let chain = try Self.fixture.get()
        let trust = self.trust([chain.leaf.certificate, chain.intermediate.certificate, chain.root.certificate], chain, anchorsOnly: true)
        let verdict = await trust.evaluate(.ssl(host: "api.example.com"), pins: .publicKeys([Pin(spkiOf: chain.root.certificate)]))
        #expect(verdict.failure?.code == .pinMismatch)
    }

    @Test("every rule holds past the anchor: an expired root above the anchor does not carry a pin")
    func rulesHoldBeyondAnchor() async throws {
        let root = try TestPKI.root("Expired Root", notValidBefore: Date() - 800 * 86400, notValidAfter: Date() - 86400)
        let intermediate = try TestPKI.intermediate("Issuing CA", issuer: root, notValidBefore: Date() - 86400, notValidAfter: Date() + 365 * 86400)
        let leaf = try TestPKI.leaf("api.example.com", issuer: intermediate, dnsNames: ["api.example.com"])
        var trust = ServerTrust(certificates: [leaf.certificate], platformRoots: TrustRoots([root.certificate]))
        trust.anchors = [intermediate.certificate]
        #expect(await trust.evaluate(.ssl(host: "api.example.com")).isTrusted)
        let verdict = await trust.evaluate(.ssl(host: "api.example.com"), pins: .publicKeys([Pin(spkiOf: root.certificate)]))
        #expect(verdict.failure?.code == .pinMismatch)
    }
}
