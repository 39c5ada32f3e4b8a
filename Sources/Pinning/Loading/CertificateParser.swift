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
        Self.rawEntries(from: bytes, origin: origin).map { entry in
            entry.flatMap { raws in
                var certificates: [Certificate] = []
                for raw in raws {
                    switch Self.certificate(raw, origin: origin) {
                    case .success(let certificate): certificates.append(certificate)
                    case .failure(let error): return .failure(error)
                    }
                }
                return .success(certificates)
            }
        }
    }

    /// Every certificate of the input for listing (`inspect`, `pins`): each well-formed X.509 certificate, whether
    /// or not the verifier supports it, and, separately, the entries that are not certificates at all. One
    /// unsupported or broken certificate never hides the others.
    static func inspect(from bytes: [UInt8], origin: String) -> [Result<InspectedCertificate, CertificateLoadingError>] {
        var results: [Result<InspectedCertificate, CertificateLoadingError>] = []
        for entry in Self.rawEntries(from: bytes, origin: origin) {
            switch entry {
            case .failure(let error):
                results.append(.failure(error))
            case .success(let raws):
                for raw in raws {
                    results.append(Self.inspect(raw, origin: origin))
                }
            }
        }
        return results
    }

    /// One certificate's exact DER bytes before parsing, and how messages refer to it.
    struct RawCertificate {
        var der: [UInt8]
        /// "block 2 (CERTIFICATE)", "certificate 3 in the PKCS#7 bundle", "the certificate".
        var what: String
        /// The code for bytes that are not a certificate at all.
        var failureCode: CertificateLoadingError.Code
        /// Whether these bytes are the whole (DER) input, so a failure describes what the input is instead.
        var isWholeInput: Bool = false
    }

    typealias RawEntry = Result<[RawCertificate], CertificateLoadingError>

    /// The input split into certificate-bearing entries, certificates not yet parsed.
    static func rawEntries(from bytes: [UInt8], origin: String) -> [RawEntry] {
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

    private static func pemEntries(_ bytes: [UInt8], origin: String) -> [RawEntry] {
        let blocks = PEMBlocks.scan(bytes, origin: origin)
        var entries: [RawEntry] = []
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
                    entries.append(.success(try PKCS7Certificates.rawCertificates(in: der, origin: origin, context: block.name)))
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
                            RawCertificate(der: Array(reader.encodedBytes(of: first)), what: block.name, failureCode: .malformedDER)
                        ])
                    )
                } else {
                    entries.append(.success([RawCertificate(der: der, what: block.name, failureCode: .malformedDER)]))
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

    private static func derEntry(_ bytes: [UInt8], origin: String) -> RawEntry {
        // A ContentInfo is a SEQUENCE starting with an OID; a Certificate starts with a SEQUENCE (its TBS): the two
        // shapes never overlap.
        if PKCS7Certificates.looksLikeContentInfo(bytes) {
            do {
                return .success(try PKCS7Certificates.rawCertificates(in: bytes, origin: origin, context: nil))
            } catch {
                return .failure(error)
            }
        }
        return .success([RawCertificate(der: bytes, what: "the certificate", failureCode: .malformedDER, isWholeInput: true)])
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
                return "the data starts with byte 0x\(HexText.byte(bytes[0])), not a SEQUENCE (0x30)"
            }
            return error.message
        }
        if !top.isUniversalSequence {
            if let text = Self.textPrefix(bytes) {
                return "the data looks like text (\"\(text)\") but has no -----BEGIN line"
            }
            return "the data starts with a \(top.name) (byte 0x\(HexText.byte(bytes[0]))), not a SEQUENCE (0x30)"
        }
        if top.end < bytes.count {
            return "\(bytes.count - top.end) bytes of trailing data after a \(top.end)-byte SEQUENCE"
        }
        return "a \(bytes.count)-byte SEQUENCE that is not an X.509 certificate (\(Self.describe(certificateError)))"
    }

    // MARK: Certificates

    /// Parses one certificate from its exact DER bytes, for evaluation: a certificate swift-certificates cannot
    /// use is refused with a typed error that says why (``CertificateLoadingError/Code/unsupportedKey`` or
    /// ``CertificateLoadingError/Code/unsupportedCertificate``), and only bytes that are not an X.509
    /// certificate at all are "malformed".
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
        try Self.certificate(RawCertificate(der: Array(der), what: what, failureCode: failureCode), origin: origin).get()
    }

    static func certificate(_ raw: RawCertificate, origin: String) -> Result<Certificate, CertificateLoadingError> {
        let libraryError: any Error
        do {
            return .success(try Certificate(derEncoded: raw.der))
        } catch {
            libraryError = error
        }
        switch Self.structure(raw, origin: origin, libraryError: libraryError) {
        case .success(let (_, _, error)): return .failure(error)
        case .failure(let error): return .failure(error)
        }
    }

    /// One certificate for listing: its facts and pin whether or not the verifier supports it.
    static func inspect(_ raw: RawCertificate, origin: String) -> Result<InspectedCertificate, CertificateLoadingError> {
        let libraryError: any Error
        do {
            let certificate = try Certificate(derEncoded: raw.der)
            return .success(
                InspectedCertificate(
                    origin: origin,
                    position: raw.what,
                    derBytes: raw.der,
                    spki: certificate.subjectPublicKeyInfoDER,
                    info: CertificateInfo(certificate),
                    certificate: certificate,
                    unsupported: nil
                )
            )
        } catch {
            libraryError = error
        }
        switch Self.structure(raw, origin: origin, libraryError: libraryError) {
        case .success(let (structure, problems, error)):
            return .success(
                InspectedCertificate(
                    origin: origin,
                    position: raw.what,
                    derBytes: raw.der,
                    spki: Array(structure.subjectPublicKeyInfo),
                    info: CertificateInfo(structure: structure, unsupportedForVerification: problems.map(\.text)),
                    certificate: nil,
                    unsupported: error
                )
            )
        case .failure(let error):
            return .failure(error)
        }
    }

    /// After swift-certificates refused `raw`: the structure and why it cannot be verified (and the typed error
    /// evaluation loading throws), or the malformed-certificate error when it is not X.509 at all.
    private static func structure(
        _ raw: RawCertificate,
        origin: String,
        libraryError: any Error
    ) -> Result<(CertificateStructure, [VerificationSupport.Problem], CertificateLoadingError), CertificateLoadingError> {
        let structure: CertificateStructure
        do {
            structure = try CertificateStructure(der: raw.der)
        } catch {
            if raw.isWholeInput {
                return .failure(
                    CertificateLoadingError(
                        code: raw.failureCode,
                        origin: origin,
                        problem: "not a DER certificate or PKCS#7 bundle: "
                            + Self.describeNonCertificate(raw.der, certificateError: libraryError)
                    )
                )
            }
            return .failure(
                CertificateLoadingError(
                    code: raw.failureCode,
                    origin: origin,
                    problem: "\(raw.what) is not a valid certificate: \(Self.describe(libraryError))"
                )
            )
        }
        let problems = VerificationSupport.problems(of: structure, libraryError: libraryError)
        let error = CertificateLoadingError(
            code: problems.allSatisfy(\.isKey) ? .unsupportedKey : .unsupportedCertificate,
            origin: origin,
            problem: "\(raw.what) \"\(structure.subject.text)\" cannot be used for verification: "
                + problems.map(\.text).joined(separator: "; ")
        )
        return .success((structure, problems, error))
    }

    // MARK: Helpers

    /// An error from SwiftASN1 or swift-certificates in words, for a message a user reads.
    ///
    /// Their descriptions read `ASN1Error.truncatedASN1Field:  SwiftASN1/DER.swift:123`: a type name, a code,
    /// the library's own reason (often empty) and a source location. The message keeps only the words: each
    /// SwiftASN1 code says what is wrong with the encoding, followed by the library's reason when it has one;
    /// swift-certificates' reasons are already sentences. Any other error keeps its description without a
    /// trailing `File.swift:123`.
    static func describe(_ error: any Error) -> String {
        let (words, detail) = Self.describeApart(error)
        return detail.map { "\(words) (\($0))" } ?? words
    }

    /// ``describe(_:)`` in its two parts: our words, and the library's own text (swift-asn1's "Invalid bytes for
    /// ASN1IA5String") when there is one. `pinning inspect` shows the words alone, the library's text only with
    /// `--verbose` or `--json` (NU3).
    static func describeApart(_ error: any Error) -> (words: String, detail: String?) {
        if let asn1 = error as? ASN1Error {
            let words: String
            switch asn1.code {
            case .truncatedASN1Field: words = "the encoding ends inside a field (truncated)"
            case .unexpectedFieldType: words = "a field has a different type than the structure requires"
            case .invalidASN1Object: words = "a field is not valid DER"
            case .invalidASN1IntegerEncoding: words = "an INTEGER is not in its shortest DER form"
            case .unsupportedFieldLength: words = "a field's length is too large or not in DER's shortest form"
            case .invalidPEMDocument: words = "not a valid PEM document"
            case .invalidStringRepresentation: words = "a string field holds characters its type does not allow"
            case .tooFewOIDComponents: words = "an object identifier has fewer than two components"
            default: words = "the encoding is not valid DER"
            }
            // The tag an unexpected field had is printed as a Swift value (`ASN1Identifier(...)`): not words.
            let reason = asn1.code == .unexpectedFieldType ? "" : Self.reason(in: String(describing: error))
            return (words, reason.isEmpty ? nil : reason)
        }
        if error is CertificateError {
            let reason = Self.reason(in: String(describing: error))
            // describe(_:) has shown the library's reason alone here; in words, that the library refused it.
            return reason.isEmpty ? ("the certificate library refused it", nil) : (reason, nil)
        }
        return (Self.withoutSourceLocation(String(describing: error)), nil)
    }

    /// The reason in a `Type.code: reason File.swift:123` description: the text between the first `:` and the
    /// source location, trimmed.
    private static func reason(in description: String) -> String {
        var text = Substring(Self.withoutSourceLocation(description))
        if let colon = text.firstIndex(of: ":") {
            text = text[text.index(after: colon)...]
        }
        while let first = text.first, first.isWhitespace { text = text.dropFirst() }
        while let last = text.last, last.isWhitespace { text = text.dropLast() }
        return String(text)
    }

    /// The text without the ` File.swift:123` its last word may be.
    private static func withoutSourceLocation(_ text: String) -> String {
        guard let space = text.lastIndex(of: " ") else { return text.contains(".swift:") ? "" : text }
        let tail = text[text.index(after: space)...]
        return tail.contains(".swift:") ? String(text[..<space]) : text
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
}
