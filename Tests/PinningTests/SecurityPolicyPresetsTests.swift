import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

/// The Alamofire-style presets: each is the policy it names, and each fails closed.
@Suite("SecurityPolicy presets")
struct SecurityPolicyPresetsTests {
    static let fixture = Result {
        (genuine: try TestChain(host: "api.example.com"), other: try TestChain(host: "api.example.com", rootName: "Other Root"))
    }

    static func trust(_ chain: TestChain) -> ServerTrust {
        ServerTrust(certificates: chain.presented, platformRoots: TrustRoots([chain.root.certificate]))
    }

    @Test("defaultEvaluation: a valid chain for the host, nothing pinned")
    func defaultEvaluation() async throws {
        let (genuine, _) = try Self.fixture.get()
        let policy = SecurityPolicy.defaultEvaluation
        #expect(policy.pinningMode == .none && !policy.allowInvalidCertificates && policy.validatesDomainName)
        #expect(await policy.evaluate(Self.trust(genuine), forDomain: "api.example.com").isTrusted)
        #expect(await policy.evaluate(Self.trust(genuine), forDomain: "other.example.com").failure?.code == .hostnameMismatch)
        var foreign = Self.trust(genuine)
        foreign.platformRoots = TrustRoots([])
        #expect(await policy.evaluate(foreign, forDomain: "api.example.com").isTrusted == false)
    }

    @Test("publicKeys(_:) and publicKeys(in:): a pinned key on the validated path; nothing pinned trusts nothing")
    func publicKeys() async throws {
        let (genuine, other) = try Self.fixture.get()
        let trust = Self.trust(genuine)
        let byPin = SecurityPolicy.publicKeys([Pin(spkiOf: genuine.intermediate.certificate)])
        #expect(byPin.pinningMode == .publicKey)
        #expect(await byPin.evaluate(trust, forDomain: "api.example.com").isTrusted)
        let byCertificate = SecurityPolicy.publicKeys(in: [genuine.root.certificate])
        #expect(byCertificate.acceptedPins == [Pin(spkiOf: genuine.root.certificate)])
        #expect(await byCertificate.evaluate(trust, forDomain: "api.example.com").isTrusted)

        let wrong = SecurityPolicy.publicKeys([Pin(spkiOf: other.intermediate.certificate)])
        #expect(await wrong.evaluate(trust, forDomain: "api.example.com").failure?.code == .pinMismatch)
        #expect(await SecurityPolicy.publicKeys([]).evaluate(trust, forDomain: "api.example.com").failure?.code == .pinMismatch)
        #expect(await SecurityPolicy.publicKeys(in: []).evaluate(trust, forDomain: "api.example.com").failure?.code == .pinMismatch)
        // The name is still checked.
        #expect(await byPin.evaluate(trust, forDomain: "other.example.com").failure?.code == .hostnameMismatch)
    }

    @Test("pinnedCertificates(_:): the path must reach a pinned certificate; nothing pinned trusts nothing")
    func pinnedCertificates() async throws {
        let (genuine, other) = try Self.fixture.get()
        let trust = Self.trust(genuine)
        let policy = SecurityPolicy.pinnedCertificates([genuine.intermediate.certificate])
        #expect(policy.pinningMode == .certificate)
        #expect(await policy.evaluate(trust, forDomain: "api.example.com").isTrusted)
        let wrong = SecurityPolicy.pinnedCertificates([other.root.certificate])
        #expect(await wrong.evaluate(trust, forDomain: "api.example.com").failure?.code == .pinMismatch)
        #expect(await SecurityPolicy.pinnedCertificates([]).evaluate(trust, forDomain: "api.example.com").failure?.code == .pinMismatch)
    }
}
