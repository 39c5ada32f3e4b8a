import Crypto
package import Foundation
package import SwiftASN1
package import X509
import _CryptoExtras

/// An X.509 certificate revocation list (RFC 5280 §5), read from DER or PEM (`-----BEGIN X509 CRL-----`).
///
/// Reading and using are kept apart, as the issue of revocation asks: bytes that are not a CRL at all throw a
/// ``CRLError`` (bad input), while a CRL that is well-formed but must not be relied on (no CRL number, a critical
/// extension we do not understand, a delta or indirect CRL) is read and carries the reason in `unusable`, so
/// that a checker can say "revocation status unknown, because …" for the certificates it was meant for.
///
/// swift-certificates has no CRL type; this one is built on swift-asn1, and its signature is checked with
/// swift-crypto (`verifySignature(issuer:)`), never with hand-written cryptography.
public struct CertificateRevocationList: Sendable, Hashable {
    /// Why a certificate was revoked (RFC 5280 §5.3.1; 7 is unused).
    public enum Reason: Int, Sendable, Hashable, CaseIterable {
        case unspecified = 0
        case keyCompromise = 1
        case cACompromise = 2
        case affiliationChanged = 3
        case superseded = 4
        case cessationOfOperation = 5
        case certificateHold = 6
        case removeFromCRL = 8
        case privilegeWithdrawn = 9
        case aACompromise = 10

        /// The name RFC 5280 and OpenSSL use (`keyCompromise`).
        package var name: String {
            switch self {
            case .unspecified: return "unspecified"
            case .keyCompromise: return "keyCompromise"
            case .cACompromise: return "cACompromise"
            case .affiliationChanged: return "affiliationChanged"
            case .superseded: return "superseded"
            case .cessationOfOperation: return "cessationOfOperation"
            case .certificateHold: return "certificateHold"
            case .removeFromCRL: return "removeFromCRL"
            case .privilegeWithdrawn: return "privilegeWithdrawn"
            case .aACompromise: return "aACompromise"
            }
        }
    }

    /// One revoked certificate.
    package struct Entry: Sendable, Hashable {
        /// The certificate's serial number as swift-certificates gives it (`Certificate.SerialNumber.bytes`): the
        /// INTEGER's content without the 0x00 that DER puts before a first byte with its top bit set.
        package let serialNumber: [UInt8]
        /// When it was revoked.
        package let revocationDate: Date
        /// The reason code, when the entry has one.
        package let reason: Reason?
    }

    /// The whole CRL, DER.
    package let der: [UInt8]
    /// The signed part (TBSCertList), DER.
    package let tbsBytes: [UInt8]
    /// 1 (v1, no extensions) or 2.
    package let version: Int
    /// The issuer's name.
    package let issuer: DistinguishedName
    /// When this CRL was issued.
    package let thisUpdate: Date
    /// When the next one will be; nil when the CRL does not say (then it is never fresh: see ``unusable``).
    package let nextUpdate: Date?
    /// The CRL number's content bytes (big-endian), when present.
    package let crlNumber: [UInt8]?
    /// The authority key identifier, when present.
    package let authorityKeyIdentifier: [UInt8]?
    /// The CRL's own extensions.
    package let extensions: [Certificate.Extension]
    /// The revoked certificates, in file order.
    package let entries: [Entry]
    /// The signature algorithm's OID.
    package let signatureAlgorithmOID: ASN1ObjectIdentifier
    /// Why this CRL must not be used to decide anything (RFC 5280 §5 violations, delta and indirect CRLs), or nil.
    package let unusable: String?

    private let signatureParametersAreNull: Bool?
    private let signatureBytes: [UInt8]
    private let index: [[UInt8]: Int]

    /// The largest CRL read: 64 MiB (a 100,000-entry CRL is about 4 MiB).
    package static let maximumSize = 64 * 1024 * 1024
    /// The most entries read: 2,000,000.
    package static let maximumEntries = 2_000_000

    /// The entry for `serialNumber` (as `Certificate.SerialNumber.bytes` gives it), found by hash, not by scan.
    package func entry(forSerialNumber serialNumber: some Sequence<UInt8>) -> Entry? {
        self.index[Array(serialNumber)].map { self.entries[$0] }
    }

    /// The entry for `certificate`, when its serial number is listed.
    package func entry(for certificate: Certificate) -> Entry? {
        self.entry(forSerialNumber: certificate.serialNumber.bytes)
    }

    // MARK: - Reading

    /// Every CRL in `bytes`: the `X509 CRL` blocks of PEM text, or one DER CRL.
    ///
    /// - Throws: ``CRLError`` when the input holds no CRL or one that is not well-formed.
    public static func read(_ bytes: [UInt8]) throws(CRLError) -> [CertificateRevocationList] {
        guard bytes.count <= Self.maximumSize else {
            throw CRLError(.tooLarge, "\(bytes.count) bytes is more than the limit of \(Self.maximumSize)")
        }
        guard PEMBlocks.containsBeginMarker(bytes) else {
            return [try CertificateRevocationList(derEncoded: bytes)]
        }
        var lists: [CertificateRevocationList] = []
        var labels: [String] = []
        for block in PEMBlocks.scan(bytes, origin: "CRL") {
            labels.append(block.label)
            guard block.label == "X509 CRL" else { continue }
            switch block.body {
            case .success(let der):
                do {
                    lists.append(try CertificateRevocationList(derEncoded: der))
                } catch {
                    throw CRLError(error.code, "\(block.name): \(error.message)")
                }
            case .failure(let error):
                throw CRLError(.malformed, "\(block.name): \(error.problem)")
            }
        }
        guard !lists.isEmpty else {
            let found = labels.isEmpty ? "no PEM block" : "only " + labels.joined(separator: ", ")
            throw CRLError(.notACRL, "no X509 CRL block (found \(found))")
        }
        return lists
    }

    /// Reads one DER CRL.
    ///
    /// - Throws: ``CRLError`` when the bytes are not a well-formed CRL.
    public init(derEncoded bytes: [UInt8]) throws(CRLError) {
        guard bytes.count <= Self.maximumSize else {
            throw CRLError(.tooLarge, "\(bytes.count) bytes is more than the limit of \(Self.maximumSize)")
        }
        guard bytes.first == 0x30 else {
            throw CRLError(.notACRL, bytes.isEmpty ? "the input is empty" : "the data does not start with a SEQUENCE")
        }
        let root: ASN1Node
        do {
            root = try DER.parse(bytes)
        } catch {
            throw CRLError(.malformed, "not DER: \(error)")
        }
        guard case .constructed(let top) = root.content, root.identifier == .sequence else {
            throw CRLError(.notACRL, "the outer element is not a SEQUENCE")
        }
        let parts = Array(top)
        guard parts.count == 3 else {
            throw CRLError(.notACRL, "a CRL has 3 parts (to-be-signed list, algorithm, signature); this has \(parts.count)")
        }
        let tbsNode = parts[0]
        guard tbsNode.identifier == .sequence, case .constructed(let tbsChildren) = tbsNode.content else {
            throw CRLError(.notACRL, "the to-be-signed part is not a SEQUENCE")
        }
        var fields = Array(tbsChildren)[...]
        func next(_ what: String) throws(CRLError) -> ASN1Node {
            guard let node = fields.popFirst() else { throw CRLError(.malformed, "the \(what) is missing") }
            return node
        }

        var problems: [String] = []
        var version = 1
        if let first = fields.first, first.identifier == .integer {
            _ = fields.popFirst()
            let value: Int
            do {
                value = try Int(derEncoded: first)
            } catch {
                throw CRLError(.malformed, "the version is not an INTEGER")
            }
            // RFC 5280 §5.1.2.1: when present, the version is v2 (1).
            guard value == 1 else { throw CRLError(.malformed, "version \(value + 1) is not a CRL version (v2 is 1)") }
            version = 2
        }
        let innerAlgorithm = try Self.algorithm(next("signature algorithm"), "inner signature algorithm")
        let issuer: DistinguishedName
        do {
            issuer = try DistinguishedName(derEncoded: next("issuer"))
        } catch let error as CRLError {
            throw error
        } catch {
            throw CRLError(.malformed, "the issuer is not a Name: \(error)")
        }
        let thisUpdate = try Self.time(next("thisUpdate"), "thisUpdate")
        var nextUpdate: Date?
        if let node = fields.first, node.identifier == .utcTime || node.identifier == .generalizedTime {
            _ = fields.popFirst()
            nextUpdate = try Self.time(node, "nextUpdate")
        }
        var entries: [Entry] = []
        var index: [[UInt8]: Int] = [:]
        if let node = fields.first, node.identifier == .sequence {
            _ = fields.popFirst()
            guard case .constructed(let revoked) = node.content else { throw CRLError(.malformed, "revokedCertificates is not a SEQUENCE") }
            for entryNode in revoked {
                guard entries.count < Self.maximumEntries else {
                    throw CRLError(.tooManyEntries, "more than \(Self.maximumEntries) revoked certificates")
                }
                let entry = try Self.entry(entryNode, number: entries.count + 1, problems: &problems)
                // A serial listed twice: the first entry counts (both say "revoked").
                if index[entry.serialNumber] == nil { index[entry.serialNumber] = entries.count }
                entries.append(entry)
            }
        }
        var extensions: [Certificate.Extension] = []
        if let node = fields.first, node.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) {
            _ = fields.popFirst()
            guard case .constructed(let explicit) = node.content, let list = Array(explicit).first, list.identifier == .sequence,
                case .constructed(let items) = list.content
            else {
                throw CRLError(.malformed, "crlExtensions is not [0] { SEQUENCE OF Extension }")
            }
            for item in items {
                do {
                    extensions.append(try Certificate.Extension(derEncoded: item))
                } catch {
                    throw CRLError(.malformed, "a CRL extension is not an Extension: \(error)")
                }
            }
        }
        guard fields.isEmpty else { throw CRLError(.malformed, "unexpected data after the CRL extensions") }
        if !extensions.isEmpty && version != 2 {
            throw CRLError(.malformed, "a v1 CRL cannot carry extensions (RFC 5280 §5.1.2.1)")
        }

        let outerAlgorithm = try Self.algorithm(parts[1], "signature algorithm")
        // RFC 5280 §5.1.1.2: the outer algorithm must equal the signed one, or a signature could be reinterpreted.
        guard outerAlgorithm.oid == innerAlgorithm.oid, outerAlgorithm.parameters == innerAlgorithm.parameters else {
            throw CRLError(.malformed, "the signature algorithm outside (\(outerAlgorithm.oid)) differs from the signed one (\(innerAlgorithm.oid))")
        }
        let signature: ASN1BitString
        do {
            signature = try ASN1BitString(derEncoded: parts[2])
        } catch {
            throw CRLError(.malformed, "the signature is not a BIT STRING")
        }

        var crlNumber: [UInt8]?
        var authorityKeyIdentifier: [UInt8]?
        for item in extensions {
            switch item.oid {
            case [2, 5, 29, 20]:
                // cRLNumber: RFC 5280 §5.2.3, "non-critical", an INTEGER 0..MAX.
                if item.critical { problems.append("its CRL number extension is marked critical (RFC 5280 §5.2.3: it must not be)") }
                do {
                    let node = try DER.parse(item.value)
                    guard node.identifier == .integer, case .primitive(let content) = node.content else { throw CRLError(.malformed, "") }
                    crlNumber = Array(content)
                } catch {
                    problems.append("its CRL number is not an INTEGER")
                }
            case [2, 5, 29, 35]:
                do {
                    authorityKeyIdentifier = (try AuthorityKeyIdentifier(item)).keyIdentifier.map(Array.init)
                } catch {
                    problems.append("its authority key identifier cannot be read")
                }
            case [2, 5, 29, 27]:
                // deltaCRLIndicator: a delta CRL lists only changes since a base CRL; used alone it would let a
                // revoked certificate pass. Refused, never half-handled.
                problems.append("it is a delta CRL (deltaCRLIndicator), which this checker does not support")
            case [2, 5, 29, 28]:
                // issuingDistributionPoint: its scope (only some certificates, reasons, or another issuer's
                // certificates) changes what "not listed" means. Any IDP is refused rather than half-applied.
                problems.append("it has an issuing distribution point (scoped or indirect CRL), which this checker does not support")
            case [2, 5, 29, 46]:
                problems.append("it has a freshest-CRL pointer (delta CRLs), which this checker does not support")
            default:
                if item.critical {
                    problems.append("it has a critical extension this checker does not understand (\(item.oid))")
                }
            }
        }
        if crlNumber == nil {
            // RFC 5280 §5.2.3: conforming CRL issuers MUST include the CRL number (x509-limbo tests this).
            problems.append("it has no CRL number (RFC 5280 §5.2.3 requires one)")
        }
        if nextUpdate == nil {
            // RFC 5280 §5.1.2.5: conforming CRL issuers MUST include nextUpdate; without it freshness is unknowable.
            problems.append("it has no nextUpdate, so its freshness cannot be judged")
        }

        self.der = bytes
        self.tbsBytes = Array(tbsNode.encodedBytes)
        self.version = version
        self.issuer = issuer
        self.thisUpdate = thisUpdate
        self.nextUpdate = nextUpdate
        self.crlNumber = crlNumber
        self.authorityKeyIdentifier = authorityKeyIdentifier
        self.extensions = extensions
        self.entries = entries
        self.index = index
        self.signatureAlgorithmOID = innerAlgorithm.oid
        self.signatureParametersAreNull = innerAlgorithm.parameters
        self.signatureBytes = Array(signature.bytes)
        self.unusable = problems.isEmpty ? nil : problems.joined(separator: "; ")
    }

    // MARK: - Signature

    /// Checks that `issuer` signed this CRL: the names match, `cRLSign` is asserted when the issuer has a
    /// keyUsage extension (RFC 5280 §4.2.1.3), and the signature verifies with the issuer's key (swift-crypto).
    ///
    /// - Throws: ``CRLError`` saying which of these fails.
    package func verifySignature(issuer certificate: Certificate) throws(CRLError) {
        guard certificate.subject == self.issuer else {
            throw CRLError(.wrongIssuer, "the CRL's issuer \(self.issuer) is not \(certificate.subject)")
        }
        let keyUsage: KeyUsage?
        do {
            keyUsage = try certificate.extensions.keyUsage
        } catch {
            throw CRLError(.wrongIssuer, "the issuer's keyUsage cannot be read")
        }
        if let keyUsage, !keyUsage.cRLSign {
            throw CRLError(.wrongIssuer, "\(certificate.subject) may not sign CRLs (its keyUsage has no cRLSign)")
        }
        guard try self.signatureVerifies(with: certificate.publicKey) else {
            throw CRLError(.badSignature, "the signature does not verify with the key of \(certificate.subject)")
        }
    }

    private func signatureVerifies(with key: Certificate.PublicKey) throws(CRLError) -> Bool {
        let data = self.tbsBytes
        let signature = self.signatureBytes
        switch self.signatureAlgorithmOID {
        case [1, 2, 840, 10045, 4, 3, 2], [1, 2, 840, 10045, 4, 3, 3], [1, 2, 840, 10045, 4, 3, 4]:
            // RFC 5758 §3.2: ECDSA identifiers carry no parameters.
            guard self.signatureParametersAreNull == nil else { throw CRLError(.malformed, "ECDSA signature algorithm with parameters") }
            let digest: any Digest
            switch self.signatureAlgorithmOID {
            case [1, 2, 840, 10045, 4, 3, 2]: digest = SHA256.hash(data: data)
            case [1, 2, 840, 10045, 4, 3, 3]: digest = SHA384.hash(data: data)
            default: digest = SHA512.hash(data: data)
            }
            if let p256 = P256.Signing.PublicKey(key) {
                guard let value = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
                return p256.isValidSignature(value, for: digest)
            }
            if let p384 = P384.Signing.PublicKey(key) {
                guard let value = try? P384.Signing.ECDSASignature(derRepresentation: signature) else { return false }
                return p384.isValidSignature(value, for: digest)
            }
            if let p521 = P521.Signing.PublicKey(key) {
                guard let value = try? P521.Signing.ECDSASignature(derRepresentation: signature) else { return false }
                return p521.isValidSignature(value, for: digest)
            }
            return false
        case [1, 2, 840, 113549, 1, 1, 11], [1, 2, 840, 113549, 1, 1, 12], [1, 2, 840, 113549, 1, 1, 13]:
            guard let rsa = _RSA.Signing.PublicKey(key) else { return false }
            let value = _RSA.Signing.RSASignature(rawRepresentation: signature)
            switch self.signatureAlgorithmOID {
            case [1, 2, 840, 113549, 1, 1, 11]: return rsa.isValidSignature(value, for: SHA256.hash(data: data), padding: .insecurePKCS1v1_5)
            case [1, 2, 840, 113549, 1, 1, 12]: return rsa.isValidSignature(value, for: SHA384.hash(data: data), padding: .insecurePKCS1v1_5)
            default: return rsa.isValidSignature(value, for: SHA512.hash(data: data), padding: .insecurePKCS1v1_5)
            }
        case [1, 3, 101, 112]:
            guard let ed25519 = Curve25519.Signing.PublicKey(key) else { return false }
            return ed25519.isValidSignature(signature, for: data)
        default:
            // SHA-1, MD5, RSASSA-PSS and others: the same set of algorithms certificates are verified with
            // (swift-certificates' RFC 5280 policy), so a CRL is never weaker than the chain it judges.
            throw CRLError(.unsupportedAlgorithm, "the signature algorithm \(self.signatureAlgorithmOID) is not supported")
        }
    }

    // MARK: - Parts

    /// An AlgorithmIdentifier: its OID, and nil (no parameters), true (NULL) or false (other parameters).
    private static func algorithm(_ node: ASN1Node, _ what: String) throws(CRLError) -> (oid: ASN1ObjectIdentifier, parameters: Bool?) {
        guard node.identifier == .sequence, case .constructed(let children) = node.content else {
            throw CRLError(.malformed, "the \(what) is not an AlgorithmIdentifier")
        }
        let items = Array(children)
        guard let first = items.first, items.count <= 2 else { throw CRLError(.malformed, "the \(what) is not an AlgorithmIdentifier") }
        let oid: ASN1ObjectIdentifier
        do {
            oid = try ASN1ObjectIdentifier(derEncoded: first)
        } catch {
            throw CRLError(.malformed, "the \(what) has no OID")
        }
        guard items.count == 2 else { return (oid, nil) }
        return (oid, items[1].identifier == .null)
    }

    /// `what` names the field in an error; an autoclosure, since it is built only on failure (one string per
    /// entry was a large part of reading a 100,000-entry CRL).
    private static func time(_ node: ASN1Node, _ what: @autoclosure () -> String) throws(CRLError) -> Date {
        guard node.identifier == .utcTime || node.identifier == .generalizedTime, case .primitive(let content) = node.content else {
            throw CRLError(.malformed, "the \(what()) is not a UTCTime or GeneralizedTime")
        }
        let text = String(decoding: content, as: UTF8.self)
        guard content.allSatisfy({ $0 < 0x80 }), let date = CertificateStructure.parseTime(text, utcTime: node.identifier == .utcTime) else {
            throw CRLError(.malformed, "the \(what()) \"\(text)\" is not a valid time")
        }
        return date
    }

    /// Built once: an OID literal in a `case` is constructed on every comparison, once per entry.
    private static let reasonCodeOID: ASN1ObjectIdentifier = [2, 5, 29, 21]
    private static let certificateIssuerOID: ASN1ObjectIdentifier = [2, 5, 29, 29]

    private static func entry(_ node: ASN1Node, number: Int, problems: inout [String]) throws(CRLError) -> Entry {
        guard node.identifier == .sequence, case .constructed(let children) = node.content else {
            throw CRLError(.malformed, "revoked entry \(number) is not a SEQUENCE")
        }
        let items = Array(children)
        guard items.count == 2 || items.count == 3 else { throw CRLError(.malformed, "revoked entry \(number) has \(items.count) fields") }
        guard items[0].identifier == .integer, case .primitive(let serial) = items[0].content, !serial.isEmpty else {
            throw CRLError(.malformed, "revoked entry \(number) has no serial number INTEGER")
        }
        let date = try Self.time(items[1], "revocation date of entry \(number)")
        var reason: Reason?
        if items.count == 3 {
            guard items[2].identifier == .sequence, case .constructed(let extensionNodes) = items[2].content else {
                throw CRLError(.malformed, "the extensions of entry \(number) are not a SEQUENCE")
            }
            for extensionNode in extensionNodes {
                let item: Certificate.Extension
                do {
                    item = try Certificate.Extension(derEncoded: extensionNode)
                } catch {
                    throw CRLError(.malformed, "an extension of entry \(number) is not an Extension")
                }
                switch item.oid {
                case Self.reasonCodeOID:
                    // reasonCode ::= ENUMERATED.
                    guard item.value.count == 3, item.value.first == 0x0A, item.value.dropFirst().first == 0x01,
                        let value = item.value.last, let code = Reason(rawValue: Int(value))
                    else {
                        throw CRLError(.malformed, "the reason code of entry \(number) is not a CRLReason")
                    }
                    reason = code
                case Self.certificateIssuerOID:
                    // certificateIssuer: the entry is about another CA's certificate (indirect CRL).
                    problems.append("entry \(number) names another certificate issuer (indirect CRL), which this checker does not support")
                default:
                    if item.critical {
                        problems.append("entry \(number) has a critical extension this checker does not understand (\(item.oid))")
                    }
                }
            }
        }
        // The same normalisation swift-asn1 applies to a certificate's serial (an unsigned INTEGER loses its
        // leading 0x00), so that a serial with its top bit set matches the certificate it names. Without it such
        // a revoked certificate would never be found: a fail-open look-up.
        var magnitude = Array(serial)
        if magnitude.first == 0x00 { magnitude.removeFirst() }
        return Entry(serialNumber: magnitude, revocationDate: date, reason: reason)
    }
}

/// Why bytes are not a usable CRL, in words.
public struct CRLError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem.
    public enum Code: String, Sendable, Hashable {
        /// Not a CRL at all (another kind of file, or no X509 CRL block).
        case notACRL
        /// Looks like a CRL but is not well-formed DER/ASN.1.
        case malformed
        /// Over 64 MiB, the largest CRL read.
        case tooLarge
        /// Over 2,000,000 entries, the most a CRL read may have.
        case tooManyEntries
        /// Signed by another issuer than the one given, or by a certificate without `cRLSign`.
        case wrongIssuer
        /// The signature does not verify.
        case badSignature
        /// The signature algorithm is not one this checker verifies.
        case unsupportedAlgorithm
    }

    /// The kind.
    public let code: Code
    /// What is wrong.
    public let message: String

    /// An error.
    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(self.code.rawValue): \(self.message)" }
}
