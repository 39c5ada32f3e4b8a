import X509

/// Reads the certificates out of a PKCS#7 / CMS SignedData bundle (`.p7b`, `.p7c`), DER or BER.
///
/// ```
/// ContentInfo ::= SEQUENCE { contentType OBJECT IDENTIFIER (signedData), content [0] EXPLICIT SignedData }
/// SignedData ::= SEQUENCE { version, digestAlgorithms SET, encapContentInfo SEQUENCE,
///                           certificates [0] IMPLICIT SET OF CertificateChoices OPTIONAL,
///                           crls [1] IMPLICIT … OPTIONAL, signerInfos SET }
/// ```
///
/// swift-certificates has CMS only as SPI, and it rejects `openssl crl2pkcs7` output ("SET OF fields are not
/// lexicographically ordered"), so this walker finds the element boundaries itself with ``BERReader`` and
/// hands each certificate's exact bytes to `Certificate(derEncoded:)`. Signatures of the bundle are not
/// checked: a certificate bundle is a container, and trust comes from path validation, not from the bundle.
enum PKCS7Certificates {
    static let signedDataOID = "1.2.840.113549.1.7.2"

    private static let contentTypeNames: [String: String] = [
        "1.2.840.113549.1.7.1": "data",
        "1.2.840.113549.1.7.2": "signedData",
        "1.2.840.113549.1.7.3": "envelopedData",
        "1.2.840.113549.1.7.4": "signedAndEnvelopedData",
        "1.2.840.113549.1.7.5": "digestedData",
        "1.2.840.113549.1.7.6": "encryptedData",
        "1.2.840.113549.1.9.16.1.2": "authData",
    ]

    /// Whether the bytes are shaped like a ContentInfo (a SEQUENCE starting with an OBJECT IDENTIFIER), i.e.
    /// whether a failure to read them should be reported as a PKCS#7 problem rather than a certificate one.
    static func looksLikeContentInfo(_ bytes: [UInt8]) -> Bool {
        let reader = BERReader(bytes)
        do {
            // Headers only: a hostile body must not decide whether it is reported as PKCS#7.
            let top = try reader.header(at: 0, limit: bytes.count)
            guard top.isUniversalSequence else { return false }
            return try reader.header(at: top.contentStart, limit: bytes.count).isObjectIdentifier
        } catch {
            return false
        }
    }

    /// The certificates of a SignedData bundle, in bundle order, as exact DER bytes not yet parsed.
    ///
    /// - Parameters:
    ///   - bytes: The DER or BER ContentInfo.
    ///   - origin: Where the bytes came from, for errors.
    ///   - context: How messages refer to the bundle ("block 1 (PKCS7)" inside a PEM file), or nil.
    static func rawCertificates(
        in bytes: [UInt8],
        origin: String,
        context: String?
    ) throws(CertificateLoadingError) -> [CertificateParser.RawCertificate] {
        // Inside a PEM file, messages start with the block: "block 1 (PKCS7): certificate 2 in …".
        let subject = context.map { "\($0): " } ?? ""
        func malformed(_ problem: String) -> CertificateLoadingError {
            CertificateLoadingError(
                code: .malformedPKCS7,
                origin: origin,
                problem: context.map { "\($0) is not a valid PKCS#7 bundle: \(problem)" } ?? problem
            )
        }

        let reader = BERReader(bytes)
        do {
            let top = try reader.element(at: 0, limit: bytes.count)
            guard top.isUniversalSequence else {
                throw BERReader.Failure(message: "the ContentInfo is a \(top.name), not a SEQUENCE")
            }
            guard top.end == bytes.count else {
                throw BERReader.Failure(message: "\(bytes.count - top.end) bytes of trailing data after the ContentInfo")
            }
            let info = try reader.children(of: top)
            guard let typeElement = info.first, let contentType = reader.objectIdentifier(typeElement) else {
                throw BERReader.Failure(message: "the ContentInfo does not start with a content type OID")
            }
            guard contentType == Self.signedDataOID else {
                let name = Self.contentTypeNames[contentType].map { " (\($0))" } ?? ""
                throw BERReader.Failure(
                    message: "content type is \(contentType)\(name), not signedData (\(Self.signedDataOID))"
                )
            }
            guard info.count == 2, info[1].isContextSpecific(0) else {
                throw BERReader.Failure(message: "the ContentInfo has no [0] content")
            }
            let explicit = try reader.children(of: info[1])
            guard explicit.count == 1, explicit[0].isUniversalSequence else {
                throw BERReader.Failure(message: "the [0] content is not a SignedData SEQUENCE")
            }
            let signedData = try reader.children(of: explicit[0])
            guard signedData.count >= 4,
                signedData[0].isInteger,
                signedData[1].isUniversalSet,
                signedData[2].isUniversalSequence
            else {
                throw BERReader.Failure(
                    message: "the SignedData does not start with version, digestAlgorithms and encapContentInfo"
                )
            }
            guard let signerInfos = signedData.last, signerInfos.isUniversalSet else {
                throw BERReader.Failure(message: "the SignedData does not end with a signerInfos SET")
            }
            let optional = signedData[3..<(signedData.count - 1)]
            guard optional.count <= 2,
                optional.allSatisfy({ $0.isContextSpecific(0) || $0.isContextSpecific(1) }),
                optional.count < 2 || optional.first?.tagNumber == 0 && optional.last?.tagNumber == 1
            else {
                throw BERReader.Failure(
                    message: "unexpected fields between encapContentInfo and signerInfos in the SignedData"
                )
            }
            guard let certificateSet = optional.first(where: { $0.tagNumber == 0 }) else {
                throw CertificateLoadingError(
                    code: .noCertificates,
                    origin: origin,
                    problem: "\(subject)the PKCS#7 SignedData holds no certificates"
                )
            }
            var certificates: [CertificateParser.RawCertificate] = []
            var position = 0
            for choice in try reader.children(of: certificateSet) {
                position += 1
                // CertificateChoices: a plain Certificate is a SEQUENCE; [0]…[3] are extended/attribute/other
                // certificates, which are not X.509 certificates and are skipped.
                guard choice.isUniversalSequence else { continue }
                certificates.append(
                    CertificateParser.RawCertificate(
                        der: Array(reader.encodedBytes(of: choice)),
                        what: "\(subject)certificate \(position) in the PKCS#7 bundle",
                        failureCode: .malformedPKCS7
                    )
                )
            }
            guard !certificates.isEmpty else {
                throw CertificateLoadingError(
                    code: .noCertificates,
                    origin: origin,
                    problem: "\(subject)the PKCS#7 SignedData holds no X.509 certificates"
                )
            }
            return certificates
        } catch let failure as BERReader.Failure {
            throw malformed(failure.message)
        } catch let error as CertificateLoadingError {
            throw error
        } catch {
            throw malformed(CertificateParser.describe(error))
        }
    }
}
