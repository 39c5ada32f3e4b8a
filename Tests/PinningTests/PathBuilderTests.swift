import Crypto
import Foundation
import PinningTestSupport
import SwiftASN1
import Testing
import X509

@testable import Pinning

/// Our own path builder (issue 31, item 2): the verified-link memo saves signature checks only for links of
/// trusted paths, byte for byte, never changes a verdict, and is bounded; the builder gives the verdicts
/// swift-certificates' `Verifier` gave (here on generated chains; `limbo --differential` on x509-limbo).
@Suite("PathBuilder and the verified-link memo")
struct PathBuilderTests {
    static let t = TestPKI.referenceTime
    static let day: TimeInterval = 86400

    /// Validates the way every evaluation does and returns the verdict with the signatures path building
    /// verified and the links the memo answered.
    static func validate(
        _ presented: [Certificate],
        root: Certificate,
        host: String = "localhost",
        at time: Date = t
    ) async -> (trusted: Bool, code: TrustFailure.Code?, verified: Int, remembered: Int) {
        let trust = ServerTrust(certificates: presented, anchors: [root], anchorsOnly: true)
        let validation = PathValidation(trust: trust, validationTime: time)
        let result = validation.validate(anchors: AnchorSet([root]), namePolicy: .ssl(host: host), pins: nil, expectedPins: [])
        let signatures = validation.budget.signatures
        switch result {
        case .success: return (true, nil, signatures.verified, signatures.remembered)
        case .failure(let failure): return (false, failure.code, signatures.verified, signatures.remembered)
        }
    }

    static func window() -> (Date, Date) { (Self.t - Self.day, Self.t + Self.day) }

    @Test("A new leaf under a known intermediate costs one signature check: the intermediate → root link is remembered")
    func secondLeafVerifiesOneSignature() async throws {
        let (from, to) = Self.window()
        let chain = try TestChain(notValidBefore: from, notValidAfter: to)
        let first = await Self.validate(chain.presented, root: chain.root.certificate)
        #expect(first.trusted && first.verified == 2 && first.remembered == 0)

        let leaf = try TestPKI.leaf("localhost", issuer: chain.intermediate, dnsNames: ["localhost"], notValidBefore: from, notValidAfter: to)
        let second = await Self.validate([leaf.certificate, chain.intermediate.certificate], root: chain.root.certificate)
        #expect(second.trusted && second.verified == 1 && second.remembered == 1)

        // The same leaf again: both links are known now.
        let third = await Self.validate([leaf.certificate, chain.intermediate.certificate], root: chain.root.certificate)
        #expect(third.trusted && third.verified == 0 && third.remembered == 2)
    }

    @Test("Under the webPKI profile the anchor's own signature is not checked: two signature checks for a new chain, not three")
    func webPKIAnchorSignatureNotChecked() async throws {
        let (from, to) = Self.window()
        let chain = try TestChain(notValidBefore: from, notValidAfter: to)
        let trust = ServerTrust(
            certificates: chain.presented, anchors: [chain.root.certificate], anchorsOnly: true, profile: .webPKI(publicSuffixList: .empty))
        let validation = PathValidation(trust: trust, validationTime: Self.t)
        let result = validation.validate(
            anchors: AnchorSet([chain.root.certificate]), namePolicy: .ssl(host: "localhost"), pins: nil, expectedPins: [])
        if case .failure(let failure) = result { Issue.record("refused: \(failure)") }
        // The two links path building verified; the profile's own check (is a self-issued certificate
        // self-signed?) is not made for the anchor, whose answer could not change the verdict.
        #expect(validation.budget.charged.checks == 2 && validation.budget.signatures.verified == 2)
    }

    @Test("A refused chain leaves nothing in the memo, whatever stage refused it")
    func refusedPathsAreNotRemembered() async throws {
        let (from, to) = Self.window()
        let chain = try TestChain(notValidBefore: from, notValidAfter: to)
        let memo = VerifiedLinkMemo.shared
        let wrongHost = await Self.validate(chain.presented, root: chain.root.certificate, host: "other.example")
        #expect(wrongHost.code == .hostnameMismatch)
        let expired = await Self.validate(chain.presented, root: chain.root.certificate, at: to + Self.day)
        #expect(expired.code == .certificateExpired)
        #expect(!memo.isVerified(issuer: chain.intermediate.certificate, subject: chain.leaf.certificate))
        #expect(!memo.isVerified(issuer: chain.root.certificate, subject: chain.intermediate.certificate))
        // Each refusal verified the signatures again: nothing was remembered from the first.
        #expect(wrongHost.verified == 2 && expired.verified == 2 && expired.remembered == 0)
    }

    @Test("A remembered link changes no verdict: the same chain is still refused later for its dates and its name")
    func memoNeverDecides() async throws {
        let (from, to) = Self.window()
        let chain = try TestChain(notValidBefore: from, notValidAfter: to)
        #expect(await Self.validate(chain.presented, root: chain.root.certificate).trusted)
        #expect(VerifiedLinkMemo.shared.isVerified(issuer: chain.root.certificate, subject: chain.intermediate.certificate))

        let expired = await Self.validate(chain.presented, root: chain.root.certificate, at: to + Self.day)
        #expect(expired.code == .certificateExpired && expired.remembered == 2)
        let wrongHost = await Self.validate(chain.presented, root: chain.root.certificate, host: "other.example")
        #expect(wrongHost.code == .hostnameMismatch)
        // A different root with the same name and key identifier is not the remembered issuer.
        let impostor = try TestPKI.root("Test Root CA", notValidBefore: from, notValidAfter: to)
        let refused = await Self.validate(chain.presented, root: impostor.certificate)
        #expect(refused.code == .noPathToAnchor && refused.remembered == 1 && refused.verified == 1)
    }

    @Test("Links are remembered by exact bytes: a re-issued intermediate (same name and key) is checked again")
    func exactBytes() async throws {
        let (from, to) = Self.window()
        let chain = try TestChain(notValidBefore: from, notValidAfter: to)
        #expect(await Self.validate(chain.presented, root: chain.root.certificate).trusted)
        let reissued = try TestPKI.crossSign(chain.intermediate, by: chain.root, notValidBefore: from, notValidAfter: to)
        let again = await Self.validate([chain.leaf.certificate, reissued.certificate], root: chain.root.certificate)
        #expect(again.trusted && again.verified == 2 && again.remembered == 0)
    }

    @Test("The memos' sample covers the signature: two certificates with one TBSCertificate hash apart")
    func sampleCoversSignature() throws {
        // ECDSA signatures are randomised, so signing one TBSCertificate twice gives two certificates whose TBS
        // samples (length, first and last 64 bytes) are the same: what an issuer can also get by varying the middle.
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("Sample Collision CA") }
        func make() throws -> Certificate {
            try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(bytes: [1, 2, 3]),
                publicKey: .init(key.publicKey),
                notValidBefore: Date(timeIntervalSince1970: 1_700_000_000),
                notValidAfter: Date(timeIntervalSince1970: 1_900_000_000),
                issuer: name,
                subject: name,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: Certificate.Extensions {},
                issuerPrivateKey: .init(key)
            )
        }
        let one = try make()
        let two = try make()
        #expect(one.tbsCertificateBytes == two.tbsCertificateBytes && one != two)
        func sample(_ certificate: Certificate) -> Int {
            var hasher = Hasher()
            certificate.combineSample(into: &hasher)
            return hasher.finalize()
        }
        #expect(sample(one) == sample(one))
        #expect(sample(one) != sample(two))
    }

    @Test("The memo holds at most its capacity, the oldest forgotten first")
    func bounded() throws {
        let chain = try TestChain()
        let memo = VerifiedLinkMemo(capacity: 2)
        memo.remember(trustedPath: chain.all)
        let other = try TestChain()
        memo.remember(trustedPath: [other.leaf.certificate, other.intermediate.certificate])
        #expect(memo.count == 2)
        #expect(!memo.isVerified(issuer: chain.intermediate.certificate, subject: chain.leaf.certificate))
        #expect(memo.isVerified(issuer: chain.root.certificate, subject: chain.intermediate.certificate))
        #expect(memo.isVerified(issuer: other.intermediate.certificate, subject: other.leaf.certificate))
        // Remembering a link already held changes nothing.
        memo.remember(trustedPath: [other.leaf.certificate, other.intermediate.certificate])
        #expect(memo.count == 2 && memo.isVerified(issuer: chain.root.certificate, subject: chain.intermediate.certificate))
    }

    @Test("Generated chains: our builder and swift-certificates' Verifier give the same verdict", arguments: [UInt64(11), 12])
    func differential(seed: UInt64) async throws {
        var generator = RandomChainGenerator(seed: seed)
        var verdicts: [String: Int] = [:]
        for _ in 0..<150 {
            let testCase = try generator.next()
            let trust = ServerTrust(certificates: testCase.presented, anchors: testCase.anchors, anchorsOnly: true, validationTime: testCase.validationTime)
            let ours = Self.verdict(await trust.evaluate(.ssl(host: testCase.host)))
            let reference = Self.verdict(await PathBuilderReference.$isActive.withValue(true) { await trust.evaluate(.ssl(host: testCase.host)) })
            #expect(ours == reference, "\(testCase.label)")
            verdicts[ours, default: 0] += 1
        }
        // Not a vacuous comparison: the cases reach trust and several different refusals.
        #expect(verdicts["trusted", default: 0] >= 8, "\(verdicts)")
        #expect(verdicts.count >= 5, "\(verdicts)")
    }

    static func verdict(_ evaluation: TrustEvaluation) -> String {
        switch evaluation {
        case .trusted: return "trusted"
        case .untrusted(let failure): return "\(failure.code)"
        }
    }

    @Test("Name constraints, as RFC 5280 §4.2.1.10 and swift-certificates read them")
    func nameConstraintMatching() {
        #expect(DNSNameConstraint.matches(name: "www.host.example.com", constraint: "host.example.com"))
        #expect(DNSNameConstraint.matches(name: "host.example.com", constraint: "host.example.com"))
        #expect(!DNSNameConstraint.matches(name: "host1.example.com", constraint: "host.example.com"))
        #expect(DNSNameConstraint.matches(name: "a.example.com", constraint: ".example.com"))
        #expect(!DNSNameConstraint.matches(name: "example.com", constraint: ".example.com"))
        #expect(DNSNameConstraint.matches(name: "A.Example.COM", constraint: "example.com"))
        #expect(DNSNameConstraint.matches(name: "anything.test", constraint: ""))
        #expect(!DNSNameConstraint.matches(name: "a.example.com.", constraint: "example.com"))
        #expect(!DNSNameConstraint.matches(name: "bad..example.com", constraint: "example.com"))
        #expect(!DNSNameConstraint.matches(name: "bücher.example.com", constraint: "example.com"))
        #expect(DNSNameConstraint.matches(name: "*.example.com", constraint: "example.com"))
        #expect(!DNSNameConstraint.matches(name: "*.com", constraint: "com"))
        #expect(IPAddressConstraint.matches(address: [10, 1, 2, 3], constraint: [10, 0, 0, 0, 255, 0, 0, 0]))
        #expect(!IPAddressConstraint.matches(address: [11, 1, 2, 3], constraint: [10, 0, 0, 0, 255, 0, 0, 0]))
        #expect(IPAddressConstraint.matches(address: [11, 1, 2, 3], constraint: [0, 0, 0, 0, 0, 0, 0, 0]))
        #expect(!IPAddressConstraint.matches(address: [10, 1, 2, 3], constraint: [10, 0, 0, 0, 255, 0, 255, 0]))
        #expect(!IPAddressConstraint.matches(address: [10, 1, 2, 3], constraint: ArraySlice(repeating: 0, count: 32)))
        #expect(URIConstraint.matches(uri: "https://a.example.com:8443/x", constraint: ".example.com"))
        #expect(!URIConstraint.matches(uri: "https://127.0.0.1/", constraint: ".example.com"))
        #expect(!URIConstraint.matches(uri: "urn:no-host", constraint: "example.com"))
    }
}
