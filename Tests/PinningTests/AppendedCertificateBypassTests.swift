import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

/// The appended-certificate attack (CVE-2016-2402 class): an attacker who holds a certificate from a CA the
/// client trusts serves `[attackerLeaf, …, genuinePinnedCertificate(s)…]`, hoping a pin check over the
/// presented chain finds the genuine pin. Pins must count only on the path the leaf really chains through.
@Suite("Appended-certificate bypass")
struct AppendedCertificateBypassTests {
    static let fixture = Result { try BypassPKI() }

    // MARK: - Attacks

    @Test("An attacker's chain with genuine certificates appended is never trusted", arguments: BypassAttack.all)
    func attackIsRefused(_ attack: BypassAttack) async throws {
        let pki = try Self.fixture.get()
        let presented = pki.presented(attack)
        let verdict = await pki.policy(attack).evaluate(pki.trust(presented), forDomain: "localhost")
        let failure = try #require(verdict.failure, "\(attack): TRUSTED — the appended genuine certificate bypassed pinning")

        // A pin mismatch; or a chain failure: no path to the pinned anchor (certificate mode).
        #expect(
            failure.code == .pinMismatch || failure.code == .noPathToAnchor,
            "\(attack): unexpected code \(failure.code): \(failure.reason)"
        )
        #expect(failure.host == "localhost")

        // The report lists every presented certificate, in order, with its own pin…
        #expect(failure.presentedChain == presented)
        #expect(failure.presentedCertificates.count == presented.count)
        for (index, certificate) in presented.enumerated() where index < failure.presentedCertificates.count {
            let shown = failure.presentedCertificates[index]
            #expect(shown.index == index)
            #expect(shown.pin == Pin(spkiOf: certificate), "\(attack): certificate \(index) listed with a wrong pin")
            #expect(shown.subject == certificate.subject.description)
            #expect(shown.issuer == certificate.issuer.description)
            #expect(shown.notValidBefore == certificate.notValidBefore)
            #expect(shown.notValidAfter == certificate.notValidAfter)
            // …and none of the appended genuine certificates is on the validated path.
            if pki.isGenuine(certificate) {
                #expect(!shown.isOnValidatedPath, "\(attack): appended genuine certificate \(index) marked on the validated path")
            }
        }
        // The markers agree with the validated path the failure reports, when there is one.
        let onPath = Set((failure.validatedPath ?? []).map { Pin(spkiOf: $0) })
        for shown in failure.presentedCertificates {
            #expect(shown.isOnValidatedPath == onPath.contains(shown.pin))
        }
        // The validated path (when reported) is the attacker's, not the genuine one.
        if let validatedPath = failure.validatedPath {
            #expect(validatedPath.first == presented.first)
            #expect(!validatedPath.contains { pki.isGenuine($0) })
        }
        // The expected pins are listed for public-key pinning.
        if attack.mode == .publicKey {
            #expect(Set(failure.expectedPins) == Set(pki.pinnedCertificates(attack).map { Pin(spkiOf: $0) }))
        }
        // The report names the pins a reader must compare.
        let text = failure.multilineDescription
        for certificate in presented {
            #expect(text.contains(Pin(spkiOf: certificate).description))
        }
    }

    // MARK: - Positive controls

    @Test("Positive control: the genuine chain passes", arguments: BypassAttack.controls)
    func genuineChainPasses(_ control: BypassAttack) async throws {
        let pki = try Self.fixture.get()
        let presented = pki.presented(control)
        let verdict = await pki.policy(control).evaluate(pki.trust(presented), forDomain: "localhost")
        let chain = try verdict.get()
        // A validating chain is trusted on its validated path, whether or not invalid certificates are allowed.
        #expect(chain.basis == .validatedPath)
        #expect(chain.path.first == pki.genuineLeaf.certificate)
        let pinned = Set(pki.pinnedCertificates(control).map { Pin(spkiOf: $0) })
        #expect(chain.path.contains { pinned.contains(Pin(spkiOf: $0)) })
    }

    @Test("Positive control: the attacker's own chain is trusted without pinning (the CA really is trusted)")
    func attackerChainIsOtherwiseValid() async throws {
        let pki = try Self.fixture.get()
        let presented = [pki.attackerLeaf.certificate, pki.attackerIntermediate.certificate]
        let verdict = await SecurityPolicy.default.evaluate(pki.trust(presented), forDomain: "localhost")
        #expect(verdict.isTrusted, "the attack scenarios would prove nothing if the attacker's chain did not validate")
    }
}

// MARK: - The cases

/// Which genuine certificates are pinned.
enum BypassPin: String, Sendable, Hashable, CaseIterable {
    case leaf, intermediate, root, all
}

/// How the attacker builds the chain.
enum BypassAttacker: String, Sendable, Hashable {
    /// A leaf for localhost from the attacker's own CA, which the platform trusts; its intermediate first.
    case trustedCA
    /// The same, with the attacker's intermediate sent last, after the genuine certificates.
    case trustedCAIntermediateLast
    /// A self-signed leaf (no trusted CA at all): only allowInvalidCertificates could let it through.
    case selfSigned
    /// A leaf whose issuer name equals the genuine intermediate's, signed by the attacker's look-alike
    /// intermediate (not sent): only a signature check tells it apart.
    case lookalikeIssuerName
    /// No attack: the genuine chain (positive controls).
    case none
}

struct BypassAttack: Sendable, Hashable, CustomTestStringConvertible {
    var attacker: BypassAttacker
    /// The genuine certificates appended, in order.
    var appended: [BypassRole]
    var mode: SecurityPolicy.PinningMode
    var pin: BypassPin
    var allowInvalidCertificates: Bool

    enum BypassRole: String, Sendable, Hashable { case leaf, intermediate, root }

    static let appendOrders: [[BypassRole]] = [
        [.leaf], [.intermediate], [.root],
        [.intermediate, .root], [.root, .intermediate],
        [.leaf, .intermediate, .root], [.root, .intermediate, .leaf], [.intermediate, .leaf],
    ]

    static let all: [BypassAttack] = {
        var attacks: [BypassAttack] = []
        for attacker in [BypassAttacker.trustedCA, .trustedCAIntermediateLast, .selfSigned, .lookalikeIssuerName] {
            for appended in appendOrders {
                for mode in [SecurityPolicy.PinningMode.publicKey, .certificate] {
                    for pin in BypassPin.allCases {
                        for allowInvalid in [false, true] {
                            attacks.append(
                                BypassAttack(
                                    attacker: attacker, appended: appended, mode: mode, pin: pin,
                                    allowInvalidCertificates: allowInvalid
                                )
                            )
                        }
                    }
                }
            }
        }
        return attacks
    }()

    static let controls: [BypassAttack] = {
        var controls: [BypassAttack] = []
        for mode in [SecurityPolicy.PinningMode.publicKey, .certificate] {
            // Certificate mode trusts the pinned certificates as anchors; the root is the usual pin, and
            // pinning the intermediate or the leaf makes them anchors too.
            for pin in BypassPin.allCases {
                for allowInvalid in [false, true] {
                    // [leaf, intermediate] as servers send it, and with the root appended.
                    for appended in [[], [BypassRole.root]] {
                        controls.append(
                            BypassAttack(attacker: .none, appended: appended, mode: mode, pin: pin, allowInvalidCertificates: allowInvalid)
                        )
                    }
                }
            }
        }
        return controls
    }()

    var testDescription: String {
        "\(self.attacker.rawValue) + [\(self.appended.map(\.rawValue).joined(separator: ","))] mode=\(self.mode.rawValue) pin=\(self.pin.rawValue) allowInvalid=\(self.allowInvalidCertificates)"
    }
}

struct BypassPKI: Sendable {
    let genuineRoot: TestIdentity
    let genuineIntermediate: TestIdentity
    let genuineLeaf: TestIdentity
    let attackerRoot: TestIdentity
    let attackerIntermediate: TestIdentity
    let attackerLeaf: TestIdentity
    let attackerSelfSigned: TestIdentity
    let lookalikeIntermediate: TestIdentity
    let lookalikeLeaf: TestIdentity

    static let validationTime = TestPKI.referenceTime

    init() throws {
        let t = Self.validationTime
        let from = t - 30 * 86400
        let until = t + 365 * 86400
        self.genuineRoot = try TestPKI.root("Genuine Root CA", notValidBefore: from, notValidAfter: until)
        self.genuineIntermediate = try TestPKI.intermediate(
            "Genuine Intermediate CA", issuer: self.genuineRoot, notValidBefore: from, notValidAfter: until
        )
        self.genuineLeaf = try TestPKI.leaf(
            "localhost", issuer: self.genuineIntermediate, dnsNames: ["localhost"], notValidBefore: from, notValidAfter: until
        )
        self.attackerRoot = try TestPKI.root("Attacker Root CA", notValidBefore: from, notValidAfter: until)
        self.attackerIntermediate = try TestPKI.intermediate(
            "Attacker Intermediate CA", issuer: self.attackerRoot, notValidBefore: from, notValidAfter: until
        )
        self.attackerLeaf = try TestPKI.leaf(
            "localhost", issuer: self.attackerIntermediate, dnsNames: ["localhost"], notValidBefore: from, notValidAfter: until
        )
        self.attackerSelfSigned = try TestPKI.selfSigned(
            "localhost", dnsNames: ["localhost"], notValidBefore: from, notValidAfter: until
        )
        // Same subject as the genuine intermediate, the attacker's key.
        self.lookalikeIntermediate = try TestPKI.intermediate(
            "Genuine Intermediate CA", issuer: self.attackerRoot, notValidBefore: from, notValidAfter: until
        )
        self.lookalikeLeaf = try TestPKI.leaf(
            "localhost", issuer: self.lookalikeIntermediate, dnsNames: ["localhost"], notValidBefore: from, notValidAfter: until
        )
    }

    var genuine: [Certificate] {
        [self.genuineLeaf.certificate, self.genuineIntermediate.certificate, self.genuineRoot.certificate]
    }

    func isGenuine(_ certificate: Certificate) -> Bool { self.genuine.contains(certificate) }

    func genuine(_ role: BypassAttack.BypassRole) -> Certificate {
        switch role {
        case .leaf: return self.genuineLeaf.certificate
        case .intermediate: return self.genuineIntermediate.certificate
        case .root: return self.genuineRoot.certificate
        }
    }

    func presented(_ attack: BypassAttack) -> [Certificate] {
        let appended = attack.appended.map(self.genuine)
        switch attack.attacker {
        case .trustedCA:
            return [self.attackerLeaf.certificate, self.attackerIntermediate.certificate] + appended
        case .trustedCAIntermediateLast:
            return [self.attackerLeaf.certificate] + appended + [self.attackerIntermediate.certificate]
        case .selfSigned:
            return [self.attackerSelfSigned.certificate] + appended
        case .lookalikeIssuerName:
            return [self.lookalikeLeaf.certificate] + appended
        case .none:
            return [self.genuineLeaf.certificate, self.genuineIntermediate.certificate] + appended
        }
    }

    func pinnedCertificates(_ attack: BypassAttack) -> [Certificate] {
        switch attack.pin {
        case .leaf: return [self.genuineLeaf.certificate]
        case .intermediate: return [self.genuineIntermediate.certificate]
        case .root: return [self.genuineRoot.certificate]
        case .all: return self.genuine
        }
    }

    func policy(_ attack: BypassAttack) -> SecurityPolicy {
        var policy = SecurityPolicy.pinningMode(attack.mode, pinnedCertificates: self.pinnedCertificates(attack))
        policy.allowInvalidCertificates = attack.allowInvalidCertificates
        policy.validatesDomainName = true
        return policy
    }

    /// Both CAs are trusted by the platform: the attacker's CA is a real, trusted CA (mis-issuance, a
    /// corporate proxy, a user-installed root).
    func trust(_ presented: [Certificate]) -> ServerTrust {
        ServerTrust(
            certificates: presented,
            platformRoots: TrustRoots([self.genuineRoot.certificate, self.attackerRoot.certificate]),
            validationTime: Self.validationTime
        )
    }
}
