import SwiftASN1
import X509

/// The bytes-level parser behind ``CertificateLoader`` and ``TrustRoots``: no file system access, so it can
/// be fed arbitrary bytes (tests mutate inputs at thousands of positions).
///
/// The input is split into entries: one per certificate-bearing PEM block, or one for a whole DER input.
/// ``CertificateLoader`` fails on the first bad entry; ``TrustRoots`` skips and reports bad entries.
enum CertificateParser {
    /// The certificates of one entry, or why that entry is unusable.
    typealias Entry = Result<[Certificate], CertificateLoadingError>

    private static let certificateLabels: Set<String> = ["CERTIFICATE", "X509 CERTIFICATE"]
    private static let trustedCertificateLabel = "TRUSTED CERTIFICATE"
    private static let pkcs7Labels: Set<String> = ["PKCS7", "CMS", "PKCS #7 SIGNED DATA"]

    /// All certificates of the input, in order; throws at the first unusable entry.
    static func certificates(from bytes: [UInt8], origin: String) throws(CertificateLoadingError) -> [Certificate] {
        var certificates: [Certificate] = []
        for entry in Self.entries(from: bytes, origin: origin) {
            switch entry {
            case .success(let found): certificates.append(contentsOf: found)
            case .failure(let error): throw error
            }
        }
        guard !certificates.isEmpty else {
            // entries() reports a missing certificate as a failure, so this is only a safety net.
            throw CertificateLoadingError(code: .noCertificates, origin: origin, problem: "no certificate found")
        }
        return certificates
    }

    /// The entries of the input, in order. Never empty: an input without any certificate yields one failure.
    static func entries(from bytes: [UInt8], origin: String) -> [Entry] {
        guard bytes.count <= CertificateLoader.maximumFileSize else {
            return [
                .failure(
                    CertificateLoadingError(
                        code: .fileTooLarge,
                        origin: origin,
                        problem: "\(bytes.count) bytes is more than the limit of "
                            + "\(CertificateLoader.maximumFileSize) bytes"
                    )
                )
            ]
        }
        guard bytes.contains(where: { !Self.isWhitespace($0) }) else {
            let problem = bytes.isEmpty ? "the input is empty" : "the input contains only whitespace"
            return [.failure(CertificateLoadingError(code: .emptyInput, origin: origin, problem: problem))]
        }
        if PEMBlocks.containsBeginMarker(bytes) {
            return Self.pemEntries(bytes, origin: origin)
        }
        return [Self.derEntry(bytes, origin: origin)]
    }

    // MARK: PEM

    private static func pemEntries(_ bytes: [UInt8], origin: String) -> [Entry] {
        let blocks = PEMBlocks.scan(bytes, origin: origin)
        var entries: [Entry] = []
        var otherLabels: [String] = []
        for block in blocks {
            let isCertificate = Self.certificateLabels.contains(block.label)
            let isTrusted = block.label == Self.trustedCertificateLabel
            let isPKCS7 = Self.pkcs7Labels.contains(block.label)
            guard isCertificate || isTrusted || isPKCS7 else {
                // Keys, CRLs, parameters… are not ours to read. A broken one still makes the file suspect, but
                // the certificates around it are judged on their own.
                if !otherLabels.contains(block.label) {
                    otherLabels.append(block.label)
                }
                continue
            }
            let der: [UInt8]
            switch block.body {
            case .failure(let error):
                entries.append(.failure(error))
                continue
            case .success(let decoded):
                der = decoded
            }
            guard !der.isEmpty else {
                entries.append(
                    .failure(
                        CertificateLoadingError(code: .malformedPEM, origin: origin, problem: "\(block.name) is empty")
                    )
                )
                continue
            }
            do throws(CertificateLoadingError) {
                if isPKCS7 {
                    entries.append(.success(try PKCS7Certificates.certificates(in: der, origin: origin, context: block.name)))
                } else if isTrusted {
                    // OpenSSL's "trusted certificate": a Certificate followed by its trust settings (an
                    // X509_CERT_AUX SEQUENCE). Only the certificate is read; the aux data is OpenSSL-specific.
                    let reader = BERReader(der)
                    let first: BERReader.Element
                    do {
                        first = try reader.element(at: 0, limit: der.count)
                    } catch {
                        throw CertificateLoadingError(
                            code: .malformedDER,
                            origin: origin,
                            problem: "\(block.name) is not a valid certificate: \(error.message)"
                        )
                    }
                    entries.append(
                        .success([
                            try Self.certificate(
                                der: reader.encodedBytes(of: first),
                                origin: origin,
                                what: block.name,
                                failureCode: .malformedDER
                            )
                        ])
                    )
                } else {
                    entries.append(
                        .success([
                            try Self.certificate(der: der[...], origin: origin, what: block.name, failureCode: .malformedDER)
                        ])
                    )
                }
            } catch {
                entries.append(.failure(error))
            }
        }
        if entries.isEmpty {
            let problem: String
            let code: CertificateLoadingError.Code
            if otherLabels.isEmpty {
                code = .malformedPEM
                problem = "the input contains \"-----BEGIN\" but no well-formed -----BEGIN LABEL----- line"
            } else {
                code = .noCertificates
                problem = "found \(otherLabels.joined(separator: ", ")), no CERTIFICATE"
            }
            entries.append(.failure(CertificateLoadingError(code: code, origin: origin, problem: problem)))
        }
        return entries
    }

    // MARK: DER

    private static func derEntry(_ bytes: [UInt8], origin: String) -> Entry {
        let certificateError: any Error
        do {
            return .success([try Certificate(derEncoded: bytes)])
        } catch {
            certificateError = error
        }
        if PKCS7Certificates.looksLikeContentInfo(bytes) {
            do {
                return .success(try PKCS7Certificates.certificates(in: bytes, origin: origin, context: nil))
            } catch {
                return .failure(error)
            }
        }
        if let unsupported = Self.unsupportedKeyError(certificateError, der: bytes[...], origin: origin, what: "the certificate") {
            return .failure(unsupported)
        }
        return .failure(
            CertificateLoadingError(
                code: .malformedDER,
                origin: origin,
                problem: "not a DER certificate or PKCS#7 bundle: "
                    + Self.describeNonCertificate(bytes, certificateError: certificateError)
            )
        )
    }

    /// What the bytes are, for a message about input that is not a certificate.
    private static func describeNonCertificate(_ bytes: [UInt8], certificateError: any Error) -> String {
        let reader = BERReader(bytes)
        let top: BERReader.Element
        do {
            top = try reader.element(at: 0, limit: bytes.count)
        } catch {
            if let text = Self.textPrefix(bytes) {
                return "the data looks like text (\"\(text)\") but has no -----BEGIN line"
            }
            if bytes.first != 0x30 {
                return "the data starts with byte 0x\(Self.hex(bytes[0])), not a SEQUENCE (0x30)"
            }
            return error.message
        }
        if !top.isUniversalSequence {
            if let text = Self.textPrefix(bytes) {
                return "the data looks like text (\"\(text)\") but has no -----BEGIN line"
            }
            return "the data starts with a \(top.name) (byte 0x\(Self.hex(bytes[0]))), not a SEQUENCE (0x30)"
        }
        if top.end < bytes.count {
            return "\(bytes.count - top.end) bytes of trailing data after a \(top.end)-byte SEQUENCE"
        }
        return "a \(bytes.count)-byte SEQUENCE that is not an X.509 certificate (\(Self.describe(certificateError)))"
    }

    // MARK: Certificates

    /// Parses one certificate from its exact DER bytes.
    ///
    /// - Parameters:
    ///   - what: How messages refer to it ("block 2 (CERTIFICATE)", "certificate 3 in the PKCS#7 bundle").
    ///   - failureCode: The code for a structurally bad certificate.
    static func certificate(
        der: ArraySlice<UInt8>,
        origin: String,
        what: String,
        failureCode: CertificateLoadingError.Code
    ) throws(CertificateLoadingError) -> Certificate {
        do {
            return try Certificate(derEncoded: Array(der))
        } catch {
            if let unsupported = Self.unsupportedKeyError(error, der: der, origin: origin, what: what) {
                throw unsupported
            }
            throw CertificateLoadingError(
                code: failureCode,
                origin: origin,
                problem: "\(what) is not a valid certificate: \(Self.describe(error))"
            )
        }
    }

    /// A ``CertificateLoadingError/Code/unsupportedKey`` error if swift-certificates refused the key type.
    private static func unsupportedKeyError(
        _ error: any Error,
        der: ArraySlice<UInt8>,
        origin: String,
        what: String
    ) -> CertificateLoadingError? {
        guard let certificateError = error as? CertificateError,
            certificateError.code == .unsupportedPublicKeyAlgorithm
        else {
            return nil
        }
        let algorithm = Self.publicKeyAlgorithm(der: Array(der)).map { " (\($0))" } ?? ""
        return CertificateLoadingError(
            code: .unsupportedKey,
            origin: origin,
            problem: "\(what) has a public key type\(algorithm) that is not supported: swift-certificates accepts "
                + "only ECDSA P-256, P-384 and P-521, RSA and Ed25519 keys"
        )
    }

    private static let keyAlgorithmNames: [String: String] = [
        "1.2.840.10040.4.1": "DSA",
        "1.2.840.10046.2.1": "DH",
        "1.3.101.110": "X25519",
        "1.3.101.111": "X448",
        "1.3.101.113": "Ed448",
        "1.2.840.113549.1.1.10": "RSASSA-PSS",
        "1.2.643.7.1.1.1.1": "GOST R 34.10-2012 256",
        "1.2.156.10197.1.301": "SM2",
    ]

    private static let curveNames: [String: String] = [
        "1.3.132.0.10": "secp256k1",
        "1.2.840.10045.3.1.1": "P-192",
        "1.3.132.0.33": "P-224",
        "1.3.36.3.3.2.8.1.1.7": "brainpoolP256r1",
        "1.3.36.3.3.2.8.1.1.11": "brainpoolP384r1",
        "1.3.36.3.3.2.8.1.1.13": "brainpoolP512r1",
    ]

    /// "Ed448 1.3.101.113", "EC curve secp256k1 1.3.132.0.10": the SPKI algorithm of a certificate, read
    /// structurally so it works even though swift-certificates refused the certificate.
    private static func publicKeyAlgorithm(der: [UInt8]) -> String? {
        let reader = BERReader(der)
        do {
            let certificate = try reader.element(at: 0, limit: der.count)
            guard let tbs = try reader.children(of: certificate).first else { return nil }
            var fields = try reader.children(of: tbs)[...]
            if fields.first?.isContextSpecific(0) == true {
                fields = fields.dropFirst()
            }
            // serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo
            guard fields.count >= 6 else { return nil }
            let spki = fields[fields.startIndex + 5]
            guard let algorithm = try reader.children(of: spki).first else { return nil }
            let parts = try reader.children(of: algorithm)
            guard let oidElement = parts.first, let oid = reader.objectIdentifier(oidElement) else { return nil }
            if oid == "1.2.840.10045.2.1" {
                guard parts.count > 1, let curve = reader.objectIdentifier(parts[1]) else {
                    return "EC key with explicit or missing curve parameters"
                }
                return "EC curve \(Self.curveNames[curve].map { "\($0) " } ?? "")\(curve)"
            }
            return "\(Self.keyAlgorithmNames[oid].map { "\($0) " } ?? "")\(oid)"
        } catch {
            return nil
        }
    }

    // MARK: Helpers

    /// An error from swift-certificates or SwiftASN1 without the `File.swift:123` location they append.
    static func describe(_ error: any Error) -> String {
        var text = String(describing: error)
        if let space = text.lastIndex(of: " ") {
            let tail = text[text.index(after: space)...]
            if tail.contains(".swift:") {
                text = String(text[..<space])
            }
        }
        return text
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D || byte == 0x0B || byte == 0x0C
    }

    /// The first characters of the input if it looks like printable ASCII text.
    private static func textPrefix(_ bytes: [UInt8]) -> String? {
        let head = bytes.prefix(32)
        guard head.allSatisfy({ (0x20...0x7E).contains($0) || Self.isWhitespace($0) }) else { return nil }
        let text = String(decoding: head, as: UTF8.self)
            .split(whereSeparator: { $0.isNewline })
            .joined(separator: " ")
        return bytes.count > head.count ? text + "…" : text
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}
