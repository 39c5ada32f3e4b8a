import Foundation

// JSON for `pinning inspect --json`: dates as RFC 3339 strings, fields added later optional when read.
extension CertificateInfo {

    private enum CodingKeys: String, CodingKey {
        case subject, issuer, serialNumber, notValidBefore, notValidAfter, subjectAlternativeNames, keyType
        case keySize, signatureAlgorithm, basicConstraints, keyUsage, extendedKeyUsage, sha1Fingerprint
        case sha256Fingerprint, spkiPin, isSelfSigned, isCA, problems, version, unsupportedForVerification, notes
    }

    /// Encodes the facts; dates as RFC 3339 strings, whatever the encoder's date strategy.
    ///
    /// - Parameter encoder: The encoder to write to.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.subject, forKey: .subject)
        try container.encode(self.issuer, forKey: .issuer)
        try container.encode(self.serialNumber, forKey: .serialNumber)
        try container.encode(RFC3339.format(self.notValidBefore), forKey: .notValidBefore)
        try container.encode(RFC3339.format(self.notValidAfter), forKey: .notValidAfter)
        try container.encode(self.subjectAlternativeNames, forKey: .subjectAlternativeNames)
        try container.encode(self.keyType, forKey: .keyType)
        try container.encode(self.keySize, forKey: .keySize)
        try container.encode(self.signatureAlgorithm, forKey: .signatureAlgorithm)
        try container.encodeIfPresent(self.basicConstraints, forKey: .basicConstraints)
        try container.encodeIfPresent(self.keyUsage, forKey: .keyUsage)
        try container.encodeIfPresent(self.extendedKeyUsage, forKey: .extendedKeyUsage)
        try container.encode(self.sha1Fingerprint, forKey: .sha1Fingerprint)
        try container.encode(self.sha256Fingerprint, forKey: .sha256Fingerprint)
        try container.encode(self.spkiPin, forKey: .spkiPin)
        try container.encode(self.isSelfSigned, forKey: .isSelfSigned)
        try container.encode(self.isCA, forKey: .isCA)
        try container.encode(self.problems, forKey: .problems)
        try container.encode(self.version, forKey: .version)
        try container.encode(self.unsupportedForVerification, forKey: .unsupportedForVerification)
        try container.encode(self.notes, forKey: .notes)
    }

    /// Decodes facts written by ``encode(to:)``; dates must be RFC 3339 strings.
    ///
    /// - Parameter decoder: The decoder to read from.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.subject = try container.decode(String.self, forKey: .subject)
        self.issuer = try container.decode(String.self, forKey: .issuer)
        self.serialNumber = try container.decode(String.self, forKey: .serialNumber)
        self.notValidBefore = try Self.date(container, .notValidBefore)
        self.notValidAfter = try Self.date(container, .notValidAfter)
        self.subjectAlternativeNames = try container.decode(
            [SubjectAlternativeName].self,
            forKey: .subjectAlternativeNames
        )
        self.keyType = try container.decode(String.self, forKey: .keyType)
        self.keySize = try container.decode(Int.self, forKey: .keySize)
        self.signatureAlgorithm = try container.decode(String.self, forKey: .signatureAlgorithm)
        self.basicConstraints = try container.decodeIfPresent(BasicConstraints.self, forKey: .basicConstraints)
        self.keyUsage = try container.decodeIfPresent([String].self, forKey: .keyUsage)
        self.extendedKeyUsage = try container.decodeIfPresent([String].self, forKey: .extendedKeyUsage)
        self.sha1Fingerprint = try container.decode(String.self, forKey: .sha1Fingerprint)
        self.sha256Fingerprint = try container.decode(String.self, forKey: .sha256Fingerprint)
        self.spkiPin = try container.decode(String.self, forKey: .spkiPin)
        self.isSelfSigned = try container.decode(Bool.self, forKey: .isSelfSigned)
        self.isCA = try container.decode(Bool.self, forKey: .isCA)
        self.problems = try container.decodeIfPresent([String].self, forKey: .problems) ?? []
        self.problemsInWords = self.problems
        // Added later: absent in JSON written by earlier versions.
        self.version = try container.decodeIfPresent(Int.self, forKey: .version) ?? 3
        self.unsupportedForVerification =
            try container.decodeIfPresent([String].self, forKey: .unsupportedForVerification) ?? []
        self.notes = try container.decodeIfPresent([String].self, forKey: .notes) ?? []
    }

    private static func date(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> Date {
        let text = try container.decode(String.self, forKey: key)
        do {
            return try RFC3339.read(text)
        } catch {
            // The reader's words say what is wrong ("day 30 does not exist: …"), as `--at`'s refusal does.
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: container,
                debugDescription: "\"\(text)\" is not an RFC 3339 date such as 2026-01-31T12:00:00Z: \(error.description)"
            )
        }
    }
}
