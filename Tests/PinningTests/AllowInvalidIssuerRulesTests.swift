import Crypto
import Foundation
import Pinning
import PinningTestSupport
import SwiftASN1
import Testing
import X509

/// `allowInvalidCertificates` waives the trust anchor and the dates, never the rules that make an issuer an
/// issuer (issue 11, item 1). Before, a certificate under a pinned CA that is not itself a CA could sign a leaf
/// for any host and the chain was trusted on the signature-linked path.
///
/// The attacker here holds a certificate and key legitimately issued under the pinned CA, and uses it as an
/// issuer for a leaf naming the victim host. The client pins the genuine CA's key (or certificate), turns
/// `allowInvalidCertificates` on (its private root is not in the platform store), and checks names.
@Suite("allowInvalidCertificates keeps the issuer rules")
struct AllowInvalidIssuerRulesTests {
    static let fixture = Result { try IssuerRulesPKI() }
    static let host = "victim.example"

    /// Every way a certificate under the pinned CA may fail to be an issuer, and the code that names it.
    enum Abuse: String, CaseIterable, CustomStringConvertible, Sendable {
        /// basicConstraints present with cA FALSE.
        case notCA
        /// No basicConstraints extension at all (an ordinary TLS leaf as the issuer).
        case noBasicConstraints
        /// cA TRUE, but keyUsage present without keyCertSign.
        case keyUsageWithoutKeyCertSign
        /// A CA below a pathLenConstraint of 0 issuing a sub-CA, which issues the leaf.
        case pathLength
        /// A name-constrained CA (permitted fleet.internal) issuing for another domain.
        case nameConstraints

        var description: String { self.rawValue }

        var expectedCodes: Set<TrustFailure.Code> {
            switch self {
            case .notCA, .noBasicConstraints, .pathLength, .nameConstraints: return [.constraintViolation]
            case .keyUsageWithoutKeyCertSign: return [.keyUsage]
            }
        }
    }

    /// The policies that pin the genuine CA: by key (its own, the root's), and by certificate.
    enum Pinning: String, CaseIterable, CustomStringConvertible, Sendable {
        case intermediateKey, rootKey, intermediateCertificateAsKey, intermediateCertificate

        var description: String { self.rawValue }
    }

    struct Case: CustomStringConvertible, Sendable {
        var abuse: Abuse
        var pinning: Pinning
        var validatesDomainName: Bool
        var description: String { "\(self.abuse) / \(self.pinning) / validatesDomainName \(self.validatesDomainName)" }

        static let all: [Case] = Abuse.allCases.flatMap { abuse in
            Pinning.allCases.flatMap { pinning in
                [true, false].map { Case(abuse: abuse, pinning: pinning, validatesDomainName: $0) }
            }
        }
    }

    @Test("an issuer that is not one is refused under every pinning", arguments: Case.all)
    func abuseRefused(_ testCase: Case) async throws {
        let pki = try Self.fixture.get()
        let presented = try pki.presented(testCase.abuse)
        let policy = pki.policy(testCase.pinning, validatesDomainName: testCase.validatesDomainName)
        let verdict = await policy.evaluate(pki.trust(presented), forDomain: Self.host)
        guard case .untrusted(let failure) = verdict else {
            Issue.record("\(testCase): TRUSTED (basis \(verdict)) — a certificate that may not issue vouched for \(Self.host)")
            return
        }
        // Certificate pinning validates with the pinned certificate as the only anchor; the same rules refuse.
        #expect(
            testCase.abuse.expectedCodes.contains(failure.code),
            "\(testCase): refused with \(failure.code): \(failure.reason)"
        )
    }

    @Test("the same chains are trusted when the issuer is genuine: only the anchor and the dates are waived", arguments: Pinning.allCases)
    func genuineStillTrusted(_ pinning: Pinning) async throws {
        let pki = try Self.fixture.get()
        // Certificate pinning checks the dates even with allowInvalidCertificates, as AFNetworking does (its
        // step 4 evaluates again with the pinned certificates as anchors); public-key pinning waives them.
        let chains = pinning == .intermediateCertificate ? [pki.genuinePresented] : [pki.genuinePresented, pki.expiredGenuinePresented]
        for presented in chains {
            let verdict = await pki.policy(pinning, validatesDomainName: true).evaluate(pki.trust(presented), forDomain: Self.host)
            guard case .trusted(let chain) = verdict else {
                Issue.record("\(pinning): refused: \(verdict.failure.map(String.init(describing:)) ?? "")")
                continue
            }
            #expect(chain.path.contains(pki.intermediate.certificate) || chain.path.contains { Pin(spkiOf: $0) == Pin(spkiOf: pki.intermediate.certificate) })
        }
    }

    @Test("the refusal says which rule allowInvalidCertificates does not waive")
    func refusalExplains() async throws {
        let pki = try Self.fixture.get()
        let verdict = await pki.policy(.intermediateKey, validatesDomainName: true)
            .evaluate(pki.trust(try pki.presented(.notCA)), forDomain: Self.host)
        let failure = try #require(verdict.failure)
        #expect(failure.reason.contains("is not a CA"))
        #expect(failure.details.contains { $0.contains("allowInvalidCertificates waives the trust anchor and the dates") })
        #expect(failure.details.contains { $0.contains("the chain does not validate either") })
    }

    @Test("mode none with allowInvalidCertificates and a checked name is still refused as insecure")
    func modeNone() async throws {
        let pki = try Self.fixture.get()
        var policy = SecurityPolicy(pinningMode: .none)
        policy.allowInvalidCertificates = true
        let verdict = await policy.evaluate(pki.trust(try pki.presented(.notCA)), forDomain: Self.host)
        #expect(verdict.failure?.code == .insecurePolicy)
    }
}

/// Genuine root → genuine intermediate (the pinned CA) → ordinary certificates, plus the attacker's
/// certificates. All valid now; nothing is in the client's anchors (the private root is unknown to it).
struct IssuerRulesPKI: Sendable {
    let root: TestIdentity
    let intermediate: TestIdentity
    let genuineLeaf: TestIdentity
    let expiredGenuineLeaf: TestIdentity
    let constrainedCA: TestIdentity

    init() throws {
        self.root = try TestPKI.root("Genuine Root")
        // pathLen 1: one level of CAs below it.
        self.intermediate = try TestPKI.intermediate("Pinned Issuing CA", issuer: self.root, maxPathLength: 1)
        self.genuineLeaf = try TestPKI.leaf("victim.example", issuer: self.intermediate, dnsNames: ["victim.example"])
        self.expiredGenuineLeaf = try TestPKI.leaf(
            "victim.example", issuer: self.intermediate, dnsNames: ["victim.example"],
            notValidBefore: Date() - 400 * 86400, notValidAfter: Date() - 30 * 86400
        )
        self.constrainedCA = try TestPKI.intermediate(
            "Fleet CA", issuer: self.intermediate, maxPathLength: 0, permittedDNSDomains: ["fleet.internal"]
        )
    }

    var genuinePresented: [Certificate] { [self.genuineLeaf.certificate, self.intermediate.certificate, self.root.certificate] }
    var expiredGenuinePresented: [Certificate] {
        [self.expiredGenuineLeaf.certificate, self.intermediate.certificate, self.root.certificate]
    }

    func trust(_ presented: [Certificate]) -> ServerTrust {
        ServerTrust(certificates: presented, platformRoots: TrustRoots([]))
    }

    func policy(_ pinning: AllowInvalidIssuerRulesTests.Pinning, validatesDomainName: Bool) -> SecurityPolicy {
        var policy: SecurityPolicy
        switch pinning {
        case .intermediateKey: policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: self.intermediate.certificate)])
        case .rootKey: policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: self.root.certificate)])
        case .intermediateCertificateAsKey:
            policy = SecurityPolicy(pinningMode: .publicKey, pinnedCertificates: [self.intermediate.certificate])
        case .intermediateCertificate:
            policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [self.intermediate.certificate, self.root.certificate])
        }
        policy.allowInvalidCertificates = true
        policy.validatesDomainName = validatesDomainName
        return policy
    }

    /// The chain the attacker serves for each abuse, leaf first, with the genuine CA certificates after it.
    func presented(_ abuse: AllowInvalidIssuerRulesTests.Abuse) throws -> [Certificate] {
        let host = AllowInvalidIssuerRulesTests.host
        let genuineTail = [self.intermediate.certificate, self.root.certificate]
        switch abuse {
        case .notCA:
            let held = try TestPKI.intermediate("Attacker Device", issuer: self.intermediate, isCA: false)
            let forged = try TestPKI.leaf(host, issuer: held, dnsNames: [host])
            return [forged.certificate, held.certificate] + genuineTail
        case .noBasicConstraints:
            // An ordinary certificate with keyUsage digitalSignature and no basicConstraints extension at all.
            let held = try Self.mint("attacker.example", issuer: self.intermediate) {
                Critical(KeyUsage(digitalSignature: true))
            }
            let forged = try TestPKI.leaf(host, issuer: held, dnsNames: [host])
            return [forged.certificate, held.certificate] + genuineTail
        case .keyUsageWithoutKeyCertSign:
            let held = try Self.mint("Attacker Signing CA", issuer: self.intermediate) {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(digitalSignature: true))
            }
            let forged = try TestPKI.leaf(host, issuer: held, dnsNames: [host])
            return [forged.certificate, held.certificate] + genuineTail
        case .pathLength:
            // A genuine sub-CA with pathLen 0 issues a further CA: two CAs below the pinned CA (pathLen 1), one
            // below a CA that allows none.
            let subCA = try TestPKI.intermediate("Regional CA", issuer: self.intermediate, maxPathLength: 0)
            let rogue = try TestPKI.intermediate("Attacker CA", issuer: subCA, maxPathLength: nil)
            let forged = try TestPKI.leaf(host, issuer: rogue, dnsNames: [host])
            return [forged.certificate, rogue.certificate, subCA.certificate] + genuineTail
        case .nameConstraints:
            // A genuine CA constrained to fleet.internal issues for another domain.
            let forged = try TestPKI.leaf(host, issuer: self.constrainedCA, dnsNames: [host])
            return [forged.certificate, self.constrainedCA.certificate] + genuineTail
        }
    }

    /// A P-256 certificate under `issuer` with exactly the given extensions (swift-certificates' builder,
    /// not TestPKI, whose certificates always carry well-formed basicConstraints and keyUsage).
    static func mint(
        _ commonName: String,
        issuer: TestIdentity,
        @ExtensionsBuilder extensions: () throws -> Result<Certificate.Extensions, any Error>
    ) throws -> TestIdentity {
        let key = Certificate.PrivateKey(P256.Signing.PrivateKey())
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: key.publicKey,
            notValidBefore: now - 86400,
            notValidAfter: now + 365 * 86400,
            issuer: issuer.certificate.subject,
            subject: try DistinguishedName { CommonName(commonName) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions(builder: extensions),
            issuerPrivateKey: issuer.privateKey
        )
        return try TestIdentity(certificate: certificate, privateKey: key)
    }
}
