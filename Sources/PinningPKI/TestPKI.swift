import Crypto
public import Foundation
import Pinning
import SwiftASN1
public import X509

/// Mints certificate authorities, leaves and cross-signatures at test time, so no test depends on a
/// checked-in certificate that expires.
///
/// Every certificate gets a random positive 20-byte serial number and a subject key identifier (SHA-1 of the
/// public key bits, RFC 5280 §4.2.1.2 method 1); every certificate issued by another gets an authority key
/// identifier equal to the issuer's subject key identifier. The signature algorithm follows the ISSUER's key:
/// ecdsa-with-SHA256 (P-256), ecdsa-with-SHA384 (P-384), sha256WithRSAEncryption (RSA), Ed25519.
///
/// Default validity windows are computed around the current time, from one day ago to 365 days (leaves) or
/// ten years (CAs) ahead, so tests evaluating "now" work. Pass `notValidBefore`/`notValidAfter` (for
/// example around ``referenceTime``) for deterministic expiry tests.
public enum TestPKI {
    /// A fixed reference instant for deterministic tests: 2030-06-01T00:00:00Z.
    public static let referenceTime = Date(timeIntervalSince1970: 1_906_502_400)

    /// What a leaf certificate may be used for, written as its extended key usage extension.
    public enum LeafUsage: Sendable, Hashable, CaseIterable {
        /// EKU serverAuth.
        case serverAuth
        /// EKU clientAuth.
        case clientAuth
        /// EKU serverAuth and clientAuth.
        case serverAndClientAuth
        /// No extended key usage extension at all (any purpose, by RFC 5280).
        case none
        /// EKU codeSigning only: a certificate that must NOT be accepted for TLS.
        case codeSigning

        var extendedKeyUsage: [ExtendedKeyUsage.Usage]? {
            switch self {
            case .serverAuth: return [.serverAuth]
            case .clientAuth: return [.clientAuth]
            case .serverAndClientAuth: return [.serverAuth, .clientAuth]
            case .none: return nil
            case .codeSigning: return [.codeSigning]
            }
        }
    }

    static let caValidity: TimeInterval = 10 * 365 * 86400
    static let leafValidity: TimeInterval = 365 * 86400

    // MARK: - Certificate authorities

    /// A self-signed root CA.
    ///
    /// - Parameters:
    ///   - commonName: The subject and issuer common name.
    ///   - key: The root's key type.
    ///   - notValidBefore: Defaults to one day ago.
    ///   - notValidAfter: Defaults to ten years from now.
    ///   - maxPathLength: The basic constraints path length; `nil` is unlimited.
    ///   - permittedDNSDomains: Permitted DNS subtrees of a critical name constraints extension.
    ///   - excludedDNSDomains: Excluded DNS subtrees of a critical name constraints extension.
    ///   - extendedKeyUsage: An extended key usage extension on the CA itself; `nil` writes none.
    /// - Returns: The root certificate and its private key.
    public static func root(
        _ commonName: String,
        key: TestKeyType = .p256,
        notValidBefore: Date? = nil,
        notValidAfter: Date? = nil,
        maxPathLength: Int? = nil,
        permittedDNSDomains: [String] = [],
        excludedDNSDomains: [String] = [],
        extendedKeyUsage: [ExtendedKeyUsage.Usage]? = nil
    ) throws -> TestIdentity {
        try self.mint(commonName, key: key, issuer: nil, notValidBefore: notValidBefore, notValidAfter: notValidAfter, length: self.caValidity) { publicKey in
            try self.caExtensions(
                publicKey: publicKey,
                issuerKeyIdentifier: nil,
                maxPathLength: maxPathLength,
                permittedDNSDomains: permittedDNSDomains,
                excludedDNSDomains: excludedDNSDomains,
                extendedKeyUsage: extendedKeyUsage
            )
        }
    }

    /// An intermediate CA issued by `issuer`.
    ///
    /// - Parameters:
    ///   - commonName: The subject common name.
    ///   - issuer: The issuing CA.
    ///   - key: The intermediate's key type.
    ///   - notValidBefore: Defaults to one day ago.
    ///   - notValidAfter: Defaults to ten years from now.
    ///   - maxPathLength: The basic constraints path length; `nil` is unlimited. Defaults to 0 (issues leaves only).
    ///   - permittedDNSDomains: Permitted DNS subtrees of a critical name constraints extension.
    ///   - excludedDNSDomains: Excluded DNS subtrees of a critical name constraints extension.
    ///   - extendedKeyUsage: An extended key usage extension on the CA itself; `nil` writes none.
    ///   - isCA: `false` mints a certificate in the intermediate's position that is NOT a CA (basic constraints
    ///     cA FALSE, key usage digitalSignature only), for tests that must reject such a chain.
    /// - Returns: The intermediate certificate and its private key.
    public static func intermediate(
        _ commonName: String,
        issuer: TestIdentity,
        key: TestKeyType = .p256,
        notValidBefore: Date? = nil,
        notValidAfter: Date? = nil,
        maxPathLength: Int? = 0,
        permittedDNSDomains: [String] = [],
        excludedDNSDomains: [String] = [],
        extendedKeyUsage: [ExtendedKeyUsage.Usage]? = nil,
        isCA: Bool = true
    ) throws -> TestIdentity {
        try self.mint(commonName, key: key, issuer: issuer, notValidBefore: notValidBefore, notValidAfter: notValidAfter, length: self.caValidity) { publicKey in
            guard isCA else {
                return try Certificate.Extensions {
                    SubjectKeyIdentifier(hash: publicKey)
                    AuthorityKeyIdentifier(keyIdentifier: issuer.subjectKeyIdentifier)
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true))
                    if let extendedKeyUsage {
                        try ExtendedKeyUsage(extendedKeyUsage)
                    }
                    if let constraints = self.nameConstraints(permittedDNSDomains, excludedDNSDomains) {
                        Critical(constraints)
                    }
                }
            }
            return try self.caExtensions(
                publicKey: publicKey,
                issuerKeyIdentifier: issuer.subjectKeyIdentifier,
                maxPathLength: maxPathLength,
                permittedDNSDomains: permittedDNSDomains,
                excludedDNSDomains: excludedDNSDomains,
                extendedKeyUsage: extendedKeyUsage
            )
        }
    }

    // MARK: - Leaves

    /// An end-entity certificate issued by `issuer`.
    ///
    /// - Parameters:
    ///   - commonName: The subject common name.
    ///   - issuer: The issuing CA.
    ///   - dnsNames: DNS subject alternative names.
    ///   - ipAddresses: IP subject alternative names as text, IPv4 (`"127.0.0.1"`) or IPv6 (`"::1"`).
    ///   - usage: The extended key usage.
    ///   - key: The leaf's key type.
    ///   - notValidBefore: Defaults to one day ago.
    ///   - notValidAfter: Defaults to 365 days from now.
    ///   - keyUsage: The (critical) key usage; defaults to digitalSignature, plus keyEncipherment for RSA keys.
    ///   - includeSAN: `false` writes no subject alternative names extension at all (a CN-only certificate).
    ///     When `true` and both `dnsNames` and `ipAddresses` are empty, `commonName` becomes the one DNS name,
    ///     because an empty SAN extension is invalid DER.
    /// - Returns: The leaf certificate and its private key.
    /// - Throws: ``TestPKIError/Code/invalidIPAddress`` for an address `inet_pton` rejects.
    public static func leaf(
        _ commonName: String,
        issuer: TestIdentity,
        dnsNames: [String] = [],
        ipAddresses: [String] = [],
        usage: LeafUsage = .serverAuth,
        key: TestKeyType = .p256,
        notValidBefore: Date? = nil,
        notValidAfter: Date? = nil,
        keyUsage: KeyUsage? = nil,
        includeSAN: Bool = true
    ) throws -> TestIdentity {
        try self.endEntity(
            commonName, issuer: issuer, dnsNames: dnsNames, ipAddresses: ipAddresses, usage: usage, key: key,
            notValidBefore: notValidBefore, notValidAfter: notValidAfter, keyUsage: keyUsage,
            includeSAN: includeSAN, isCA: false
        )
    }

    /// A self-signed end-entity certificate, like `openssl req -x509` makes.
    ///
    /// - Parameters:
    ///   - commonName: The subject and issuer common name.
    ///   - dnsNames: DNS subject alternative names (`commonName` when both lists are empty).
    ///   - ipAddresses: IP subject alternative names as text.
    ///   - usage: The extended key usage.
    ///   - key: The key type.
    ///   - notValidBefore: Defaults to one day ago.
    ///   - notValidAfter: Defaults to 365 days from now.
    ///   - isCA: `true` marks it a CA (critical basic constraints cA TRUE with no path length, key usage adding
    ///     keyCertSign and cRLSign), as OpenSSL's default `req -x509` configuration does.
    /// - Returns: The certificate and its private key.
    public static func selfSigned(
        _ commonName: String,
        dnsNames: [String] = [],
        ipAddresses: [String] = [],
        usage: LeafUsage = .serverAuth,
        key: TestKeyType = .p256,
        notValidBefore: Date? = nil,
        notValidAfter: Date? = nil,
        isCA: Bool = false
    ) throws -> TestIdentity {
        try self.endEntity(
            commonName, issuer: nil, dnsNames: dnsNames, ipAddresses: ipAddresses, usage: usage, key: key,
            notValidBefore: notValidBefore, notValidAfter: notValidAfter, keyUsage: nil, includeSAN: true, isCA: isCA
        )
    }

    /// A leaf issued by `issuer`, or self-signed when `issuer` is nil.
    private static func endEntity(
        _ commonName: String,
        issuer: TestIdentity?,
        dnsNames: [String],
        ipAddresses: [String],
        usage: LeafUsage,
        key: TestKeyType,
        notValidBefore: Date?,
        notValidAfter: Date?,
        keyUsage: KeyUsage?,
        includeSAN: Bool,
        isCA: Bool
    ) throws -> TestIdentity {
        try self.mint(commonName, key: key, issuer: issuer, notValidBefore: notValidBefore, notValidAfter: notValidAfter, length: self.leafValidity) { publicKey in
            try self.leafExtensions(
                commonName: commonName,
                publicKey: publicKey,
                keyType: key,
                issuerKeyIdentifier: issuer?.subjectKeyIdentifier,
                dnsNames: dnsNames,
                ipAddresses: ipAddresses,
                usage: usage,
                keyUsage: keyUsage,
                includeSAN: includeSAN,
                isCA: isCA
            )
        }
    }

    /// A new `key` certified for `commonName` by `issuer` (self-signed when nil), with the extensions
    /// `makeExtensions` makes for its public key, valid from `notValidBefore` to `notValidAfter` (defaults: one day
    /// ago, and `length` from now).
    private static func mint(
        _ commonName: String,
        key: TestKeyType,
        issuer: TestIdentity?,
        notValidBefore: Date?,
        notValidAfter: Date?,
        length: TimeInterval,
        makeExtensions: (Certificate.PublicKey) throws -> Certificate.Extensions
    ) throws -> TestIdentity {
        let privateKey = try key.makePrivateKey()
        let extensions = try makeExtensions(privateKey.publicKey)
        let name = try DistinguishedName { CommonName(commonName) }
        return try self.issue(
            subject: name,
            privateKey: privateKey,
            validity: self.validity(notValidBefore, notValidAfter, length: length),
            extensions: extensions,
            issuerName: issuer?.certificate.subject ?? name,
            issuerKey: issuer?.privateKey ?? privateKey
        )
    }

    // MARK: - Cross-signing

    /// Re-issues `subject`'s name and key under `issuer` (cross-signing), keeping its private key.
    ///
    /// The new certificate keeps the subject's extensions (subject key identifier included) except the
    /// authority key identifier, which now names `issuer`.
    ///
    /// - Parameters:
    ///   - subject: The identity to re-issue, typically a root or intermediate CA.
    ///   - issuer: The CA that signs the new certificate.
    ///   - maxPathLength: When given, replaces the basic constraints with a critical
    ///     `isCertificateAuthority(maxPathLength:)`; `nil` keeps the subject's basic constraints.
    ///   - notValidBefore: Defaults to the subject certificate's.
    ///   - notValidAfter: Defaults to the subject certificate's.
    /// - Returns: The cross-signed certificate with `subject`'s private key.
    public static func crossSign(
        _ subject: TestIdentity,
        by issuer: TestIdentity,
        maxPathLength: Int? = nil,
        notValidBefore: Date? = nil,
        notValidAfter: Date? = nil
    ) throws -> TestIdentity {
        try self.checkPathLength(maxPathLength)
        var extensions = subject.certificate.extensions
        extensions.update(
            try Certificate.Extension(
                AuthorityKeyIdentifier(keyIdentifier: issuer.subjectKeyIdentifier),
                critical: false
            )
        )
        if let maxPathLength {
            extensions.update(
                try Certificate.Extension(
                    BasicConstraints.isCertificateAuthority(maxPathLength: maxPathLength),
                    critical: true
                )
            )
        }
        return try self.issue(
            subject: subject.certificate.subject,
            privateKey: subject.privateKey,
            validity: self.validity(
                notValidBefore ?? subject.certificate.notValidBefore,
                notValidAfter ?? subject.certificate.notValidAfter,
                length: self.caValidity
            ),
            extensions: extensions,
            issuerName: issuer.certificate.subject,
            issuerKey: issuer.privateKey
        )
    }

    /// `subject` re-issued by `issuer` with a CRL distribution points extension naming `urls` (one
    /// distribution point, each URL a full name), so tests can serve its CRL over HTTP. Same key, subject,
    /// validity and other extensions; a new serial number.
    public static func withCRLDistributionPoints(_ subject: TestIdentity, issuer: TestIdentity, urls: [String]) throws -> TestIdentity {
        var names = DER.Serializer()
        names.appendConstructedNode(identifier: .sequence) { points in
            points.appendConstructedNode(identifier: .sequence) { point in
                point.appendConstructedNode(identifier: ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)) { name in
                    name.appendConstructedNode(identifier: ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)) { full in
                        for url in urls {
                            full.appendPrimitiveNode(identifier: ASN1Identifier(tagWithNumber: 6, tagClass: .contextSpecific)) { bytes in
                                bytes.append(contentsOf: Array(url.utf8))
                            }
                        }
                    }
                }
            }
        }
        var extensions = subject.certificate.extensions
        extensions.update(Certificate.Extension(oid: [2, 5, 29, 31], critical: false, value: names.serializedBytes[...]))
        return try self.issue(
            subject: subject.certificate.subject,
            privateKey: subject.privateKey,
            validity: self.validity(subject.certificate.notValidBefore, subject.certificate.notValidAfter, length: self.caValidity),
            extensions: extensions,
            issuerName: issuer.certificate.subject,
            issuerKey: issuer.privateKey
        )
    }

    // MARK: - PEM

    /// Concatenated `CERTIFICATE` PEM blocks, in order, each ending in a newline (written in linear time; swift-asn1's
    /// `PEMDocument.pemString` is quadratic in the size of a certificate).
    public static func pemBundle(_ certificates: [Certificate]) -> String {
        certificates.map { certificate in
            PEMText.encode(label: "CERTIFICATE", der: TestIdentity.der(certificate))
        }.joined()
    }

    // MARK: - Internals

    struct Validity {
        var notValidBefore: Date
        var notValidAfter: Date
    }

    /// Whole seconds: X.509 times carry no fractions, so tests comparing dates see what was encoded.
    static func now() -> Date {
        Date(timeIntervalSince1970: Foundation.floor(Date().timeIntervalSince1970))
    }

    static func validity(_ notValidBefore: Date?, _ notValidAfter: Date?, length: TimeInterval) throws -> Validity {
        let now = self.now()
        let before = notValidBefore ?? now.addingTimeInterval(-86400)
        let after = notValidAfter ?? now.addingTimeInterval(length)
        guard after > before else {
            throw TestPKIError(.invalidValidity, "notValidAfter \(after) is not later than notValidBefore \(before)")
        }
        return Validity(notValidBefore: before, notValidAfter: after)
    }

    static func checkPathLength(_ maxPathLength: Int?) throws {
        if let maxPathLength, maxPathLength < 0 {
            throw TestPKIError(.invalidPathLength, "maxPathLength \(maxPathLength) is negative")
        }
    }

    /// A random positive 20-byte serial: the first byte is 0x01...0x7F, so the INTEGER needs neither a
    /// leading 0x00 nor trimming and is always exactly 20 bytes (the RFC 5280 maximum).
    static func randomSerialNumber() -> Certificate.SerialNumber {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<20).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        bytes[0] = UInt8.random(in: 0x01...0x7F, using: &generator)
        return Certificate.SerialNumber(bytes: bytes)
    }

    static func nameConstraints(_ permitted: [String], _ excluded: [String]) -> NameConstraints? {
        if permitted.isEmpty && excluded.isEmpty {
            return nil
        }
        return NameConstraints(permittedDNSDomains: permitted, excludedDNSDomains: excluded)
    }

    static func caExtensions(
        publicKey: Certificate.PublicKey,
        issuerKeyIdentifier: ArraySlice<UInt8>?,
        maxPathLength: Int?,
        permittedDNSDomains: [String],
        excludedDNSDomains: [String],
        extendedKeyUsage: [ExtendedKeyUsage.Usage]?
    ) throws -> Certificate.Extensions {
        try self.checkPathLength(maxPathLength)
        return try Certificate.Extensions {
            SubjectKeyIdentifier(hash: publicKey)
            if let issuerKeyIdentifier {
                AuthorityKeyIdentifier(keyIdentifier: issuerKeyIdentifier)
            }
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: maxPathLength))
            Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            if let extendedKeyUsage {
                try ExtendedKeyUsage(extendedKeyUsage)
            }
            if let constraints = self.nameConstraints(permittedDNSDomains, excludedDNSDomains) {
                Critical(constraints)
            }
        }
    }

    static func leafExtensions(
        commonName: String,
        publicKey: Certificate.PublicKey,
        keyType: TestKeyType,
        issuerKeyIdentifier: ArraySlice<UInt8>?,
        dnsNames: [String],
        ipAddresses: [String],
        usage: LeafUsage,
        keyUsage: KeyUsage?,
        includeSAN: Bool,
        isCA: Bool
    ) throws -> Certificate.Extensions {
        var names: [GeneralName] = dnsNames.map { .dnsName($0) }
        for address in ipAddresses {
            names.append(.ipAddress(ASN1OctetString(contentBytes: try Self.ipAddressBytes(address)[...])))
        }
        if names.isEmpty {
            names = [.dnsName(commonName)]
        }
        var resolvedKeyUsage = keyUsage ?? KeyUsage(digitalSignature: true, keyEncipherment: keyType == .rsa2048)
        if isCA {
            resolvedKeyUsage.keyCertSign = true
            resolvedKeyUsage.cRLSign = true
        }
        let finalKeyUsage = resolvedKeyUsage
        let subjectAlternativeNames = names
        return try Certificate.Extensions {
            SubjectKeyIdentifier(hash: publicKey)
            if let issuerKeyIdentifier {
                AuthorityKeyIdentifier(keyIdentifier: issuerKeyIdentifier)
            }
            if isCA {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
            } else {
                Critical(BasicConstraints.notCertificateAuthority)
            }
            Critical(finalKeyUsage)
            if let usages = usage.extendedKeyUsage {
                try ExtendedKeyUsage(usages)
            }
            if includeSAN {
                SubjectAlternativeNames(subjectAlternativeNames)
            }
        }
    }

    static func issue(
        subject: DistinguishedName,
        privateKey: Certificate.PrivateKey,
        validity: Validity,
        extensions: Certificate.Extensions,
        issuerName: DistinguishedName,
        issuerKey: Certificate.PrivateKey
    ) throws -> TestIdentity {
        let certificate = try Certificate(
            version: .v3,
            serialNumber: self.randomSerialNumber(),
            publicKey: privateKey.publicKey,
            notValidBefore: validity.notValidBefore,
            notValidAfter: validity.notValidAfter,
            issuer: issuerName,
            subject: subject,
            signatureAlgorithm: try .forIssuer(issuerKey.publicKey),
            extensions: extensions,
            issuerPrivateKey: issuerKey
        )
        return try TestIdentity(certificate: certificate, privateKey: privateKey)
    }
}

extension TestPKI {
    /// The bytes an iPAddress SAN holds for `text` (4 for IPv4, 16 for IPv6), through the core's one IP parser.
    static func ipAddressBytes(_ text: String) throws(TestPKIError) -> [UInt8] {
        guard let bytes = IPAddressText.bytes(text) else {
            throw TestPKIError(.invalidIPAddress, "\"\(text)\" is neither an IPv4 nor an IPv6 address")
        }
        return bytes
    }
}
