import Crypto
import Foundation
import PinningTestSupport
import SwiftASN1
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

    @Test("The memo finds a certificate by its bytes: a fresh parse of them is found, a different one with the same sample is not")
    func keyedByEveryByte() throws {
        let chain = try TestChain()
        let leaf = chain.leaf.certificate
        let memo = CertificateFactsMemo(capacity: 4)
        memo.remember([CertificateFacts(leaf)])

        // The same bytes parsed again: other storage, the same key.
        var serializer = DER.Serializer()
        try serializer.serialize(leaf)
        let der = serializer.serializedBytes
        #expect(memo.facts(of: try Certificate(derEncoded: der)) != nil)

        // One letter of the subject's common name changed: outside the 64 bytes at each end of the TBSCertificate
        // that the key's hash samples, so both hash alike and only comparing every byte tells them apart.
        let tbsStart = try #require(der.firstRange(of: Array(leaf.tbsCertificateBytes))?.lowerBound)
        let name = try #require(der.firstRange(of: Array("localhost".utf8)))
        try #require(name.lowerBound - tbsStart >= 64 && tbsStart + leaf.tbsCertificateBytes.count - name.upperBound >= 64)
        var altered = der
        altered[name.upperBound - 1] = UInt8(ascii: "T")
        let other = try Certificate(derEncoded: altered)
        var leafHasher = Hasher()
        leaf.combineSample(into: &leafHasher)
        var otherHasher = Hasher()
        other.combineSample(into: &otherHasher)
        #expect(leafHasher.finalize() == otherHasher.finalize())
        #expect(memo.facts(of: other) == nil)
        #expect(memo.facts(of: leaf) != nil)
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

    /// What each decoding gave, in words (`Result` of a non-Equatable error does not compare): the value, or
    /// "throws".
    static func outcome<T>(_ result: Result<T, some Error>) -> String {
        switch result {
        case .success(let value): return "\(value)"
        case .failure: return "throws"
        }
    }

    static func outcome<T>(_ body: () throws -> T) -> String {
        do { return "\(try body())" } catch { return "throws" }
    }

    @Test("Facts read in one pass are what the accessors decode, on generated certificates with malformed extensions")
    func onePassMatchesAccessors() throws {
        var generator = RandomChainGenerator(seed: 31)
        var certificates = 0
        var malformed = 0
        // The generator's extensions all decode; these carry values that do not (garbage, an empty value, a BIT
        // STRING keyUsage with the padding quirk LenientKeyUsage tolerates), one extension at a time and all at once.
        let oids: [ASN1ObjectIdentifier] = [
            .X509ExtensionID.basicConstraints, .X509ExtensionID.keyUsage, .X509ExtensionID.extendedKeyUsage,
            .X509ExtensionID.subjectAlternativeName, .X509ExtensionID.nameConstraints, .X509ExtensionID.authorityKeyIdentifier,
            .X509ExtensionID.subjectKeyIdentifier, .X509ExtensionID.authorityInformationAccess, [2, 5, 29, 36],
        ]
        let key = P256.Signing.PrivateKey()
        var handMade: [Certificate] = []
        for value: ArraySlice<UInt8> in [[0x04, 0x01, 0xFF], [], [0x30, 0x03, 0x02, 0x01], [0x03, 0x03, 0x07, 0x06, 0x00]] {
            for chosen in oids.indices.map({ [$0] }) + [Array(oids.indices)] {
                let extensions = try Certificate.Extensions(chosen.map { Certificate.Extension(oid: oids[$0], critical: $0 % 2 == 0, value: value) })
                let name = try DistinguishedName { CommonName("facts") }
                handMade.append(
                    try Certificate(
                        version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey), notValidBefore: Self.t - Self.day,
                        notValidAfter: Self.t + Self.day, issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
                        extensions: extensions, issuerPrivateKey: .init(key)
                    )
                )
            }
        }
        for round in 0..<61 {
            let testCase = try generator.next()
            for certificate in round == 60 ? handMade : testCase.presented + testCase.anchors {
                certificates += 1
                let facts = CertificateFacts(certificate)
                let extensions = certificate.extensions
                #expect(Self.outcome(facts.basicConstraints) == Self.outcome { try extensions.basicConstraints })
                #expect(
                    Self.outcome(facts.keyUsage) == Self.outcome { () throws(LenientKeyUsage.DecodingError) in try LenientKeyUsage.decoded(of: extensions)?.usage }
                )
                #expect(Self.outcome(facts.extendedKeyUsage) == Self.outcome { try extensions.extendedKeyUsage })
                #expect(Self.outcome(facts.subjectAlternativeNames) == Self.outcome { try extensions.subjectAlternativeNames })
                #expect(Self.outcome(facts.nameConstraints) == Self.outcome { try extensions.nameConstraints })
                #expect(Self.outcome(facts.authorityKeyIdentifier) == Self.outcome { try extensions.authorityKeyIdentifier })
                #expect(Self.outcome(facts.subjectKeyIdentifier) == Self.outcome { try extensions.subjectKeyIdentifier })
                #expect(Self.outcome(facts.authorityInformationAccess) == Self.outcome { try extensions.authorityInformationAccess })
                for (criticality, oid) in [
                    (facts.basicConstraintsExtension, ASN1ObjectIdentifier.X509ExtensionID.basicConstraints),
                    (facts.subjectAlternativeNameExtension, .X509ExtensionID.subjectAlternativeName),
                    (facts.nameConstraintsExtension, .X509ExtensionID.nameConstraints),
                    (facts.extendedKeyUsageExtension, .X509ExtensionID.extendedKeyUsage),
                    (facts.policyConstraintsExtension, [2, 5, 29, 36] as ASN1ObjectIdentifier),
                ] {
                    #expect(criticality.isPresent == (extensions[oid: oid] != nil))
                    #expect(criticality.isCritical == (extensions[oid: oid]?.critical ?? false))
                }
                let decoded = [
                    Self.outcome(facts.basicConstraints), Self.outcome(facts.keyUsage), Self.outcome(facts.nameConstraints),
                    Self.outcome(facts.subjectAlternativeNames), Self.outcome(facts.authorityKeyIdentifier),
                    Self.outcome(facts.extendedKeyUsage), Self.outcome(facts.subjectKeyIdentifier),
                    Self.outcome(facts.authorityInformationAccess),
                ]
                if decoded.contains("throws") { malformed += 1 }
                #expect(certificate.serialNumberContentBytes == certificate.serialNumberContentBytesByReader)
            }
        }
        // Not vacuous: many certificates, some of them with an extension that does not decode.
        #expect(certificates >= 200 && malformed >= 20, "\(certificates) certificates, \(malformed) with a malformed extension")
    }

    /// The preferred-name-syntax check as it was written before it read bytes in one pass (split into labels),
    /// the reference the byte reader must agree with.
    static func referencePreferredNameSyntax(_ name: String) -> Bool {
        var labels = name.split(separator: ".", omittingEmptySubsequences: false)
        if name.hasSuffix(".") { labels.removeLast() }
        if labels.first == "*" && labels.count > 1 { labels.removeFirst() }
        guard !labels.isEmpty else { return false }
        return labels.allSatisfy { label in
            !label.isEmpty && label.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.utf8.allSatisfy { byte in
                    (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                        || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                        || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-")
                }
        }
    }

    @Test("The preferred name syntax read over bytes agrees with the label-splitting reference on generated names")
    func preferredNameSyntaxDifferential() {
        let fixed = [
            "", ".", "..", "*", "*.", "*..", "*.a", "*.a.", "a.*", "**.a", "a", "a.", "a..b", ".a", "-a", "a-", "a-b", "a_b",
            "bench.example", "xn--nxasmq6b.example.com", "A.EXAMPLE.COM", String(repeating: "a", count: 63) + ".com",
            String(repeating: "a", count: 64) + ".com", "é.example", "a.\u{301}b", "\u{600}.a", "a\r\n.b", "*.\u{301}",
        ]
        for name in fixed {
            #expect(DNSNameSyntax.isPreferredNameSyntax(name) == Self.referencePreferredNameSyntax(name), "\(name.debugDescription)")
        }
        var random = SplitMix64(seed: 7)
        let alphabet: [String] = ["a", "Z", "0", "-", ".", "*", "_", "é", "\u{301}", " "]
        var accepted = 0
        for _ in 0..<20_000 {
            let length = Int(random.next() % 12)
            let name = (0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }.joined()
            let ours = DNSNameSyntax.isPreferredNameSyntax(name)
            #expect(ours == Self.referencePreferredNameSyntax(name), "\(name.debugDescription)")
            if ours { accepted += 1 }
        }
        #expect(accepted > 500, "both answers occur: \(accepted) of 20,000 accepted")
    }
}
