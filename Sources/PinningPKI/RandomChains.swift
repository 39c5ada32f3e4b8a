import Crypto
public import Foundation
import SwiftASN1
public import X509

/// One generated case for differential path-building tests: what a peer presents, what the client anchors, the
/// host it expects and the instant of validation.
public struct RandomChainCase: Sendable {
    /// Leaf first, then the other presented certificates in the order presented.
    public var presented: [Certificate]
    public var anchors: [Certificate]
    public var host: String
    public var validationTime: Date
    /// Which case of which seed, to reproduce it.
    public var label: String
}

/// Random certificate graphs for comparing two path builders (issue 31): certificate authorities with shared
/// names and keys, cross-signatures in both directions, and every extension path validation reads, each present,
/// absent, wrong or malformed at random: basicConstraints (cA, pathLen, criticality), keyUsage, extendedKeyUsage,
/// name constraints of every form (dNSName, iPAddress, URI, and the forms no one evaluates: directoryName,
/// rfc822Name), key identifiers that match, mismatch or are missing, version 1 certificates, unknown critical
/// extensions, validity windows that have ended or not begun, and signatures by the wrong key. Leaves carry DNS,
/// IP and URI names, valid and not.
///
/// Everything is drawn from a seeded generator, keys included (P-256 scalars from the same stream), so a seed and a
/// case number reproduce a case exactly but for ECDSA's random signature nonces; nothing is checked in.
public struct RandomChainGenerator: Sendable {
    public static let validationTime = TestPKI.referenceTime

    private var random: SplitMix64
    private let keys: [P256.Signing.PrivateKey]
    private let seed: UInt64
    private var index = 0

    private static let caNames = ["Root A", "Root B", "CA One", "CA Two", "CA Zwei ü", "Root A"]
    private static let hosts = ["a.example.com", "example.com", "b.other.test", "127.0.0.1", "c.example.com", "x.sub.example.com"]
    private static let dnsNames = [
        "a.example.com", "example.com", "*.example.com", "b.other.test", "c.example.com", "x.sub.example.com", "bad..name", "-bad.example.com",
        "*.sub.example.com", "xn--nxasmq6b.example.com", "A.EXAMPLE.COM", "a.example.com.",
    ]
    private static let dnsConstraints = ["example.com", ".example.com", "other.test", "", "sub.example.com", "EXAMPLE.com", ".", "b.other.test."]
    private static let uriNames = ["https://a.example.com/x", "https://127.0.0.1/", "urn:no-host", "https://b.other.test:8443/"]

    public init(seed: UInt64, keyCount: Int = 6) {
        self.seed = seed
        var random = SplitMix64(seed: seed)
        self.keys = (0..<max(2, keyCount)).map { _ in Self.key(from: &random) }
        self.random = random
    }

    /// A P-256 key whose scalar is the next 32 bytes of `random` (drawn again in the negligible case that they
    /// are zero or not below the group order).
    private static func key(from random: inout SplitMix64) -> P256.Signing.PrivateKey {
        while true {
            let scalar = (0..<4).flatMap { _ in withUnsafeBytes(of: random.next().bigEndian) { Array($0) } }
            do {
                return try P256.Signing.PrivateKey(rawRepresentation: scalar)
            } catch {
                continue
            }
        }
    }

    /// The next case.
    public mutating func next() throws -> RandomChainCase {
        defer { self.index += 1 }
        let t = Self.validationTime

        // Certificate authorities: each an entity (name, key) with one or more certificates, the first issued by
        // itself or by an earlier entity, further ones cross-signed by any other entity (loops included).
        struct Entity {
            var name: DistinguishedName
            var key: Int
            var certificates: [Certificate]
        }
        var entities: [Entity] = []
        let entityCount = self.int(2...6)
        for position in 0..<entityCount {
            let name = try DistinguishedName { CommonName(Self.caNames[self.int(0...(Self.caNames.count - 1))]) }
            let key = self.int(0...(self.keys.count - 1))
            let issuer: (name: DistinguishedName, key: Int)
            if position == 0 || self.chance(0.25) {
                issuer = (name, key)
            } else {
                let parent = entities[self.int(0...(position - 1))]
                issuer = (parent.name, parent.key)
            }
            let certificate = try self.caCertificate(name: name, key: key, issuerName: issuer.name, issuerKey: issuer.key, t: t)
            entities.append(Entity(name: name, key: key, certificates: [certificate]))
        }
        for _ in 0..<self.int(0...3) {
            let subject = self.int(0...(entities.count - 1))
            let issuer = self.int(0...(entities.count - 1))
            guard subject != issuer else { continue }
            let certificate = try self.caCertificate(
                name: entities[subject].name,
                key: entities[subject].key,
                issuerName: entities[issuer].name,
                issuerKey: entities[issuer].key,
                t: t
            )
            entities[subject].certificates.append(certificate)
        }

        // Mostly the newest authority, which is the most likely to sit below others.
        let issuing = self.chance(0.5) ? entities[entities.count - 1] : entities[self.int(0...(entities.count - 1))]
        let leaf = try self.leafCertificate(issuerName: issuing.name, issuerKey: issuing.key, t: t)

        let all = entities.flatMap(\.certificates)
        var anchors = all.filter { $0.subject == $0.issuer && self.chance(0.8) }
        if anchors.isEmpty || self.chance(0.15) { anchors.append(all[self.int(0...(all.count - 1))]) }
        var others = all.filter { _ in self.chance(0.6) }
        self.shuffle(&others)
        if self.chance(0.05) { others.append(leaf) }
        return RandomChainCase(
            presented: [leaf] + others,
            anchors: anchors,
            host: self.host(for: leaf),
            validationTime: t,
            label: "seed \(self.seed) case \(self.index)"
        )
    }

    /// Mostly a name the leaf carries (so that most cases reach the later stages), else any of the hosts.
    private mutating func host(for leaf: Certificate) -> String {
        let names: [String]
        do {
            names = (try leaf.extensions.subjectAlternativeNames ?? SubjectAlternativeNames()).compactMap { name in
                if case .dnsName(let dns) = name, !dns.hasPrefix("*") { return dns }
                return nil
            }
        } catch {
            names = []
        }
        if !names.isEmpty && self.chance(0.7) { return names[self.int(0...(names.count - 1))] }
        return Self.hosts[self.int(0...(Self.hosts.count - 1))]
    }

    // MARK: - Certificates

    private mutating func caCertificate(name: DistinguishedName, key: Int, issuerName: DistinguishedName, issuerKey: Int, t: Date) throws -> Certificate {
        var extensions = Certificate.Extensions()
        let publicKey = Certificate.PublicKey(self.keys[key].publicKey)
        let roll = self.double()
        if roll < 0.92 {
            let pathLength = self.chance(0.5) ? nil : self.int(0...2)
            try extensions.append(Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: pathLength), critical: self.chance(0.85)))
        } else if roll < 0.96 {
            try extensions.append(Certificate.Extension(BasicConstraints.notCertificateAuthority, critical: true))
        }
        let usage = self.double()
        if usage < 0.75 {
            try extensions.append(Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true))
        } else if usage < 0.83 {
            try extensions.append(Certificate.Extension(KeyUsage(digitalSignature: true), critical: true))
        }
        try self.appendExtendedKeyUsage(to: &extensions, probability: 0.15)
        if self.chance(0.25) {
            try extensions.append(Certificate.Extension(self.nameConstraints(), critical: true))
        }
        try self.appendKeyIdentifiers(to: &extensions, publicKey: publicKey, issuerKey: issuerKey)
        if self.chance(0.02) {
            try extensions.append(Certificate.Extension(oid: [1, 3, 6, 1, 4, 1, 99999, 1], critical: true, value: [0x05, 0x00]))
        }
        let version: Certificate.Version = self.chance(0.02) ? .v1 : .v3
        if version == .v1 && self.chance(0.5) { extensions = Certificate.Extensions() }
        return try self.sign(
            version: version,
            publicKey: publicKey,
            subject: name,
            issuerName: issuerName,
            issuerKey: issuerKey,
            validity: self.validity(t: t),
            extensions: extensions
        )
    }

    private mutating func leafCertificate(issuerName: DistinguishedName, issuerKey: Int, t: Date) throws -> Certificate {
        let key = Self.key(from: &self.random)
        let publicKey = Certificate.PublicKey(key.publicKey)
        var extensions = Certificate.Extensions()
        let constraints = self.double()
        if constraints < 0.05 {
            try extensions.append(Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: nil), critical: true))
        } else if constraints < 0.6 {
            try extensions.append(Certificate.Extension(BasicConstraints.notCertificateAuthority, critical: self.chance(0.5)))
        }
        if self.chance(0.7) {
            try extensions.append(Certificate.Extension(KeyUsage(digitalSignature: true), critical: true))
        }
        try self.appendExtendedKeyUsage(to: &extensions, probability: 0.8)
        var names: [GeneralName] = []
        for _ in 0..<self.int(0...3) { names.append(.dnsName(Self.dnsNames[self.int(0...(Self.dnsNames.count - 1))])) }
        if self.chance(0.6) { names.append(.dnsName(Self.hosts[self.int(0...2)])) }
        if self.chance(0.25) { names.append(.ipAddress(ASN1OctetString(contentBytes: self.chance(0.5) ? [127, 0, 0, 1] : [10, 1, 2, 3]))) }
        if self.chance(0.1) { names.append(.uniformResourceIdentifier(Self.uriNames[self.int(0...(Self.uriNames.count - 1))])) }
        if self.chance(0.05) { names.append(.rfc822Name("someone@example.com")) }
        if !names.isEmpty {
            try extensions.append(Certificate.Extension(SubjectAlternativeNames(names), critical: false))
        }
        try self.appendKeyIdentifiers(to: &extensions, publicKey: publicKey, issuerKey: issuerKey)
        if self.chance(0.02) {
            try extensions.append(Certificate.Extension(oid: [1, 3, 6, 1, 4, 1, 99999, 2], critical: true, value: [0x05, 0x00]))
        }
        let subject = try DistinguishedName { CommonName(Self.hosts[self.int(0...(Self.hosts.count - 1))]) }
        return try self.sign(
            version: .v3,
            publicKey: publicKey,
            subject: subject,
            issuerName: issuerName,
            issuerKey: issuerKey,
            validity: self.validity(t: t),
            extensions: extensions
        )
    }

    private mutating func appendExtendedKeyUsage(to extensions: inout Certificate.Extensions, probability: Double) throws {
        guard self.chance(probability) else { return }
        let choices: [[ExtendedKeyUsage.Usage]] = [[.serverAuth], [.serverAuth], [.serverAuth], [.clientAuth], [.any], [.serverAuth, .clientAuth], [.codeSigning]]
        try extensions.append(Certificate.Extension(ExtendedKeyUsage(choices[self.int(0...(choices.count - 1))]), critical: false))
    }

    private mutating func appendKeyIdentifiers(to extensions: inout Certificate.Extensions, publicKey: Certificate.PublicKey, issuerKey: Int) throws {
        let subject = self.double()
        if subject < 0.85 {
            try extensions.append(Certificate.Extension(SubjectKeyIdentifier(hash: publicKey), critical: false))
        } else if subject < 0.9 {
            try extensions.append(Certificate.Extension(SubjectKeyIdentifier(keyIdentifier: [1, 2, 3, 4]), critical: false))
        }
        let authority = self.double()
        if authority < 0.8 {
            let issuerIdentifier = SubjectKeyIdentifier(hash: Certificate.PublicKey(self.keys[issuerKey].publicKey)).keyIdentifier
            try extensions.append(Certificate.Extension(AuthorityKeyIdentifier(keyIdentifier: issuerIdentifier), critical: false))
        } else if authority < 0.9 {
            try extensions.append(Certificate.Extension(AuthorityKeyIdentifier(keyIdentifier: [9, 9, 9]), critical: false))
        }
    }

    private mutating func nameConstraints() throws -> NameConstraints {
        var constraints = NameConstraints()
        for _ in 0..<self.int(1...3) {
            let subtree: GeneralName
            let form = self.double()
            if form < 0.55 {
                subtree = .dnsName(Self.dnsConstraints[self.int(0...(Self.dnsConstraints.count - 1))])
            } else if form < 0.75 {
                let ranges: [[UInt8]] = [[127, 0, 0, 0, 255, 0, 0, 0], [10, 0, 0, 0, 255, 255, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0], [10, 0, 0, 0, 255, 0, 255, 0]]
                subtree = .ipAddress(ASN1OctetString(contentBytes: ranges[self.int(0...(ranges.count - 1))][...]))
            } else if form < 0.88 {
                subtree = .uniformResourceIdentifier(self.chance(0.5) ? "example.com" : ".example.com")
            } else if form < 0.94 {
                subtree = .directoryName(try DistinguishedName { CommonName("CA One") })
            } else {
                subtree = .rfc822Name("example.com")
            }
            if self.chance(0.6) { constraints.permittedSubtrees.append(subtree) } else { constraints.excludedSubtrees.append(subtree) }
        }
        return constraints
    }

    private mutating func validity(t: Date) -> (notValidBefore: Date, notValidAfter: Date) {
        let roll = self.double()
        if roll < 0.03 { return (t - 20 * 86400, t - 10 * 86400) }
        if roll < 0.06 { return (t + 10 * 86400, t + 20 * 86400) }
        return (t - 86400, t + 365 * 86400)
    }

    private mutating func sign(
        version: Certificate.Version,
        publicKey: Certificate.PublicKey,
        subject: DistinguishedName,
        issuerName: DistinguishedName,
        issuerKey: Int,
        validity: (notValidBefore: Date, notValidAfter: Date),
        extensions: Certificate.Extensions
    ) throws -> Certificate {
        // Now and then signed by a key other than the issuer's: a certificate that names an issuer it does not
        // chain to.
        let signer = self.chance(0.03) ? (issuerKey + 1) % self.keys.count : issuerKey
        let serial = (0..<8).map { _ in UInt8(truncatingIfNeeded: self.random.next()) }
        return try Certificate(
            version: version,
            serialNumber: Certificate.SerialNumber(bytes: [0x01] + serial),
            publicKey: publicKey,
            notValidBefore: validity.notValidBefore,
            notValidAfter: validity.notValidAfter,
            issuer: issuerName,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(self.keys[signer])
        )
    }

    // MARK: - Randomness

    private mutating func double() -> Double { Double(self.random.next() >> 11) / Double(1 << 53) }
    private mutating func chance(_ probability: Double) -> Bool { self.double() < probability }
    private mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(self.random.next() % UInt64(range.count)) }
    private mutating func shuffle<T>(_ values: inout [T]) {
        guard values.count > 1 else { return }
        for index in stride(from: values.count - 1, to: 0, by: -1) { values.swapAt(index, self.int(0...index)) }
    }
}

/// SplitMix64 (Steele, Lea and Flood, 2014): a small seeded generator, for tests whose random inputs must be
/// reproducible (generated chains, seeded mutations, random record streams).
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { self.state = seed }

    public mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
