import Crypto
public import Foundation
import SwiftASN1
public import X509

/// The facts of one certificate, for display and JSON output (`pinning inspect`).
///
/// Building it never throws or crashes: when an extension is malformed, the field taken from it is `nil` (or
/// empty, for ``subjectAlternativeNames``) and ``problems`` says what was wrong.
///
/// In JSON, dates are RFC 3339 strings (`"2026-01-31T12:00:00Z"`).
public struct CertificateInfo: Sendable, Hashable, Codable {
    /// One entry of the subjectAltName extension.
    public struct SubjectAlternativeName: Sendable, Hashable, Codable {
        /// `"DNS"`, `"IP"`, `"URI"`, `"email"` or `"other"`.
        public var kind: String
        /// The name; IP addresses as a dotted quad or in RFC 5952 IPv6 form.
        public var value: String

        /// A subject alternative name.
        ///
        /// - Parameters:
        ///   - kind: `"DNS"`, `"IP"`, `"URI"`, `"email"` or `"other"`.
        ///   - value: The name as text.
        package init(kind: String, value: String) {
            self.kind = kind
            self.value = value
        }
    }

    /// The basicConstraints extension.
    package struct BasicConstraints: Sendable, Hashable, Codable {
        /// Whether the certificate may issue certificates (`cA`).
        package var isCA: Bool
        /// The maximum number of intermediate CAs below this one (`pathLenConstraint`), if limited.
        package var pathLength: Int?

        /// A basicConstraints value.
        ///
        /// - Parameters:
        ///   - isCA: Whether the certificate is a CA.
        ///   - pathLength: The path length constraint, if any.
        package init(isCA: Bool, pathLength: Int?) {
            self.isCA = isCA
            self.pathLength = pathLength
        }
    }

    /// The subject, RFC 4514 style, most specific attribute first: `CN=api.example.com,O=Example`.
    public var subject: String
    /// The issuer, in the same form as ``subject``.
    public var issuer: String
    /// The serial number in lowercase hex without colons or leading zero bytes, e.g. `"1a2b3c"`; a negative one
    /// (which RFC 5280 forbids but some certificates carry) as `-` and the hex of its magnitude, e.g. `"-05"`.
    public var serialNumber: String
    /// The start of the validity period.
    public var notValidBefore: Date
    /// The end of the validity period.
    public var notValidAfter: Date
    /// The subjectAltName entries in certificate order; empty when the extension is absent or malformed.
    public var subjectAlternativeNames: [SubjectAlternativeName]
    /// `"EC P-256"`, `"EC P-384"`, `"EC P-521"`, `"RSA"` or `"Ed25519"`; for keys the verifier does not support,
    /// e.g. `"DSA"`, `"RSASSA-PSS"`, `"EC explicit parameters"`, `"EC brainpoolP256r1"`, `"Ed448"`.
    public var keyType: String
    /// The key size in bits: the RSA modulus size, 256/384/521 for EC keys, 256 for Ed25519.
    public var keySize: Int
    /// The signature algorithm by its usual (OpenSSL) name, e.g. `"ecdsa-with-SHA256"`,
    /// `"sha256WithRSAEncryption"`; a dotted OID when unknown.
    public var signatureAlgorithm: String
    /// The basicConstraints extension, `nil` when absent or malformed.
    package var basicConstraints: BasicConstraints?
    /// The keyUsage bits that are set (`digitalSignature`, `keyCertSign`, …), `nil` when absent or malformed.
    public var keyUsage: [String]?
    /// The extendedKeyUsage purposes (`serverAuth`, `clientAuth`, … or a dotted OID), `nil` when absent or
    /// malformed.
    public var extendedKeyUsage: [String]?
    /// SHA-1 of the DER certificate, uppercase hex with colons (as `openssl x509 -fingerprint -sha1` prints).
    public var sha1Fingerprint: String
    /// SHA-256 of the DER certificate, uppercase hex with colons.
    public var sha256Fingerprint: String
    /// The SPKI pin of the certificate's key, `sha256/BASE64` (see ``Pin``).
    public var spkiPin: String
    /// Whether subject equals issuer and the certificate's own key verifies its signature.
    public var isSelfSigned: Bool
    /// Whether basicConstraints marks the certificate as a CA.
    public var isCA: Bool
    /// What could not be read (malformed extensions); empty for a healthy certificate.
    public var problems: [String]
    /// ``problems`` in words only, without a library's own text in parentheses (swift-asn1's "Invalid bytes for
    /// ASN1IA5String"): what `pinning inspect` prints without `--verbose` (NU3). Not encoded; decoded facts have
    /// ``problems`` here.
    package var problemsInWords: [String]
    /// The X.509 version: 1, 2 or 3.
    public var version: Int
    /// What the verifier does not support in this certificate, in words ("signature algorithm rsassaPss (…) is not
    /// supported for verification: …"); empty when it can be used for evaluation. Such a certificate can still be
    /// inspected and pinned.
    public var unsupportedForVerification: [String]
    /// Encoding quirks that were tolerated to read the certificate (a keyUsage BIT STRING that is not minimal DER,
    /// a non-DER time form, …) and facts that could not be established (a self-signature not checked); empty for
    /// a plain DER certificate.
    public var notes: [String]

    /// The facts of `certificate`. Never throws: unreadable parts are reported in ``problems``.
    ///
    /// - Parameter certificate: The certificate to describe.
    public init(_ certificate: Certificate) {
        let der = certificate.derBytes
        self.init(
            base: BaseFacts(
                subject: String(describing: certificate.subject),
                issuer: String(describing: certificate.issuer),
                serialNumber: Self.serialHex(certificate.serialNumber.bytes),
                notValidBefore: certificate.notValidBefore,
                notValidAfter: certificate.notValidAfter,
                version: certificate.version == .v1 ? 1 : certificate.version == .v3 ? 3 : 2,
                extensions: certificate.extensions,
                extensionsProblem: nil,
                extensionsProblemInWords: nil,
                spki: certificate.subjectPublicKeyInfoDER,
                signatureAlgorithm: Self.signatureAlgorithmName(der: der, fallback: String(describing: certificate.signatureAlgorithm)),
                der: der,
                isSelfSigned: certificate.subject == certificate.issuer
                    && certificate.publicKey.isValidSignature(certificate.signature, for: certificate),
                unsupportedForVerification: [],
                notes: []
            )
        )
    }

    /// The facts of a certificate that swift-certificates could not parse, read by ``CertificateStructure``.
    init(structure: CertificateStructure, unsupportedForVerification: [String]) {
        var notes = structure.quirks
        let extensions: Certificate.Extensions
        var extensionsProblem: String? = nil
        var extensionsProblemInWords: String? = nil
        do {
            extensions = try Certificate.Extensions(structure.extensions)
        } catch {
            extensions = Certificate.Extensions()
            extensionsProblem = "the extensions cannot be read: \(CertificateParser.describe(error))"
            extensionsProblemInWords = "the extensions cannot be read: \(CertificateParser.describeApart(error).words)"
        }
        var isSelfSigned = false
        if structure.subject.encoded.elementsEqual(structure.issuer.encoded) {
            switch SignatureCheck.verify(structure, by: structure) {
            case .valid:
                isSelfSigned = true
            case .invalid:
                notes.append("subject equals issuer, but the certificate's own key does not verify its signature")
            case .notChecked(let reason):
                notes.append("subject equals issuer; the self-signature was not checked: \(reason)")
            }
        }
        self.init(
            base: BaseFacts(
                subject: structure.subject.text,
                issuer: structure.issuer.text,
                serialNumber: Self.serialText(structure.serialContent),
                notValidBefore: structure.notValidBefore,
                notValidAfter: structure.notValidAfter,
                version: structure.version,
                extensions: extensions,
                extensionsProblem: extensionsProblem,
                extensionsProblemInWords: extensionsProblemInWords,
                spki: Array(structure.subjectPublicKeyInfo),
                signatureAlgorithm: VerificationSupport.signatureAlgorithmName(structure.signatureAlgorithm),
                der: structure.der,
                isSelfSigned: isSelfSigned,
                unsupportedForVerification: unsupportedForVerification,
                notes: notes
            )
        )
    }

    /// The facts of any well-formed X.509 certificate, whether or not the verifier supports it.
    ///
    /// - Parameter der: One DER certificate.
    /// - Throws: ``CertificateLoadingError`` (origin `"certificate"`) with code
    ///   ``CertificateLoadingError/Code/malformedDER`` when the bytes are not an X.509 certificate.
    public init(derEncoded der: [UInt8]) throws(CertificateLoadingError) {
        let raw = CertificateParser.RawCertificate(der: der, what: "the certificate", failureCode: .malformedDER)
        self = try CertificateParser.inspect(raw, origin: "certificate").get().info
    }

    /// What both initialisers know before the extension-derived facts are computed.
    private struct BaseFacts {
        var subject: String
        var issuer: String
        var serialNumber: String
        var notValidBefore: Date
        var notValidAfter: Date
        var version: Int
        var extensions: Certificate.Extensions
        var extensionsProblem: String?
        var extensionsProblemInWords: String?
        var spki: [UInt8]
        var signatureAlgorithm: String
        var der: [UInt8]
        var isSelfSigned: Bool
        var unsupportedForVerification: [String]
        var notes: [String]
    }

    private init(base: BaseFacts) {
        var problems: [String] = []
        var problemsInWords: [String] = []
        var notes = base.notes
        self.subject = base.subject
        self.issuer = base.issuer
        self.serialNumber = base.serialNumber
        self.notValidBefore = base.notValidBefore
        self.notValidAfter = base.notValidAfter
        self.version = base.version

        let extensions = base.extensions
        if let problem = base.extensionsProblem {
            problems.append(problem)
            problemsInWords.append(base.extensionsProblemInWords ?? problem)
        }

        let names = Self.describeSubjectAlternativeNames(extensions)
        self.subjectAlternativeNames = names.names
        problems += names.problems
        problemsInWords += names.problemsInWords

        let key = Self.keyFacts(base.spki)
        self.keyType = key.type
        self.keySize = key.bits
        if let problem = key.problem {
            problems.append(problem)
            problemsInWords.append(Self.keyProblemInWords(base.spki, problem: problem))
        }

        self.signatureAlgorithm = base.signatureAlgorithm

        var basicConstraints: BasicConstraints? = nil
        do {
            switch try extensions.basicConstraints {
            case .some(.isCertificateAuthority(let maxPathLength)):
                basicConstraints = BasicConstraints(isCA: true, pathLength: maxPathLength)
            case .some(.notCertificateAuthority):
                basicConstraints = BasicConstraints(isCA: false, pathLength: nil)
            case .none:
                basicConstraints = nil
            }
        } catch {
            problems.append("basicConstraints extension is malformed: \(CertificateParser.describe(error))")
            problemsInWords.append("basicConstraints extension is malformed: \(CertificateParser.describeApart(error).words)")
        }
        self.basicConstraints = basicConstraints
        self.isCA = basicConstraints?.isCA ?? false

        var keyUsage: [String]? = nil
        do {
            if let decoded = try LenientKeyUsage.decoded(of: extensions) {
                let usage = decoded.usage
                let bits: [(Bool, String)] = [
                    (usage.digitalSignature, "digitalSignature"),
                    (usage.nonRepudiation, "nonRepudiation"),
                    (usage.keyEncipherment, "keyEncipherment"),
                    (usage.dataEncipherment, "dataEncipherment"),
                    (usage.keyAgreement, "keyAgreement"),
                    (usage.keyCertSign, "keyCertSign"),
                    (usage.cRLSign, "cRLSign"),
                    (usage.encipherOnly, "encipherOnly"),
                    (usage.decipherOnly, "decipherOnly"),
                ]
                keyUsage = bits.filter { $0.0 }.map { $0.1 }
                notes += decoded.quirks
            }
        } catch {
            problems.append(error.description)
            problemsInWords.append(error.descriptionInWords)
        }
        self.keyUsage = keyUsage

        var extendedKeyUsage: [String]? = nil
        do {
            if let usages = try extensions.extendedKeyUsage {
                extendedKeyUsage = usages.map { usage in
                    usage == .any ? "anyExtendedKeyUsage" : String(describing: usage)
                }
            }
        } catch {
            problems.append("extendedKeyUsage extension is malformed: \(CertificateParser.describe(error))")
            problemsInWords.append("extendedKeyUsage extension is malformed: \(CertificateParser.describeApart(error).words)")
        }
        self.extendedKeyUsage = extendedKeyUsage

        self.sha1Fingerprint = Self.colonHex(Array(Insecure.SHA1.hash(data: base.der)))
        self.sha256Fingerprint = Self.sha256Fingerprint(ofDER: base.der)
        self.spkiPin = Pin(subjectPublicKeyInfoDER: base.spki).description
        self.isSelfSigned = base.isSelfSigned
        self.problems = problems
        self.problemsInWords = problemsInWords
        self.unsupportedForVerification = base.unsupportedForVerification
        self.notes = notes
    }
}
