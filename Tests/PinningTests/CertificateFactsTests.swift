import Foundation
import PinningTestSupport
import Testing
import X509

@testable import Pinning

/// Per-certificate facts (issue 31, item 1): decoded once, kept across evaluations only for certificates of a
/// trusted path, bounded, and never changing a verdict.
@Suite("CertificateFacts")
struct CertificateFactsTests {
    static let t = TestPKI.referenceTime
    static let day: TimeInterval = 86400

    static func trust(_ chain: TestChain) -> ServerTrust {
        ServerTrust(certificates: chain.presented, anchors: [chain.root.certificate], anchorsOnly: true, validationTime: Self.t)
    }

    @Test("A trusted path's certificates are remembered; a refused chain's are not")
    func filledOnlyFromTrustedPaths() async throws {
        let memo = CertificateFactsMemo.shared
        let trusted = try TestChain(notValidBefore: Self.t - Self.day, notValidAfter: Self.t + Self.day)
        let refused = try TestChain(notValidBefore: Self.t - Self.day, notValidAfter: Self.t + Self.day)
        // Freshly minted certificates: nothing can have remembered them yet.
        for certificate in trusted.all + refused.all { #expect(memo.facts(of: certificate) == nil) }

        #expect(await Self.trust(trusted).evaluate(.ssl(host: "localhost")).isTrusted)
        for certificate in trusted.all { #expect(memo.facts(of: certificate) != nil) }

        let failure = await Self.trust(refused).evaluate(.ssl(host: "other.example")).failure
        #expect(failure?.code == .hostnameMismatch)
        for certificate in refused.all { #expect(memo.facts(of: certificate) == nil) }
    }

    @Test("With the memo warm, verdicts and refusals are the same as cold")
    func sameVerdictWarm() async throws {
        let chain = try TestChain(notValidBefore: Self.t - Self.day, notValidAfter: Self.t + Self.day)
        // Cold: the refusal comes first, so nothing is remembered yet.
        let coldRefusal = await Self.trust(chain).evaluate(.ssl(host: "other.example")).failure
        let cold = await Self.trust(chain).evaluate(.ssl(host: "localhost"))
        #expect(CertificateFactsMemo.shared.facts(of: chain.leaf.certificate) != nil)
        let warm = await Self.trust(chain).evaluate(.ssl(host: "localhost"))
        let warmRefusal = await Self.trust(chain).evaluate(.ssl(host: "other.example")).failure
        #expect(cold.isTrusted && warm.isTrusted)
        #expect(try cold.get().path == warm.get().path)
        #expect(coldRefusal?.code == .hostnameMismatch)
        #expect(coldRefusal?.code == warmRefusal?.code && coldRefusal?.reason == warmRefusal?.reason)
    }

    @Test("The memo holds at most its capacity, the oldest forgotten first")
    func bounded() throws {
        let chain = try TestChain()
        let memo = CertificateFactsMemo(capacity: 2)
        memo.remember(chain.all.map { CertificateFacts($0) })
        #expect(memo.count == 2)
        #expect(memo.facts(of: chain.leaf.certificate) == nil)
        #expect(memo.facts(of: chain.intermediate.certificate) != nil)
        #expect(memo.facts(of: chain.root.certificate) != nil)
        // Remembering one already held changes nothing.
        memo.remember([CertificateFacts(chain.root.certificate)])
        #expect(memo.count == 2 && memo.facts(of: chain.intermediate.certificate) != nil)
    }

    @Test("Facts are what the certificate's own accessors decode")
    func factsMatchAccessors() throws {
        let chain = try TestChain(host: "api.example.com")
        for certificate in chain.all {
            let facts = CertificateFacts(certificate)
            #expect(try facts.basicConstraints.get() == certificate.extensions.basicConstraints)
            #expect(try facts.keyUsage.get() == certificate.extensions.keyUsage)
            #expect(try facts.extendedKeyUsage.get() == certificate.extensions.extendedKeyUsage)
            #expect(try facts.subjectAlternativeNames.get() == certificate.extensions.subjectAlternativeNames)
            #expect(facts.isSelfIssued == (certificate.subject == certificate.issuer))
            #expect(facts.notValidAfter == certificate.notValidAfter)
            #expect(facts.spkiPin == Pin(spkiOf: certificate))
        }
        #expect(CertificateFacts(chain.leaf.certificate).isCertificateAuthority == false)
        #expect(CertificateFacts(chain.root.certificate).isCertificateAuthority)
    }
}
