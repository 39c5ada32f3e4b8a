public import Foundation
import X509

/// A pin validation failure report in the shape of RFC 7469 §3 (HPKP's `report-uri`), as TrustKit sends it,
/// plus `validation-result` and what a collector needs to tell reports apart (TrustKit's `enforce-pinning`, and
/// `library-version`, `app-id`, `app-version`).
///
/// ```json
/// {
///   "date-time": "2030-06-01T00:00:00Z",
///   "hostname": "api.example.com",
///   "port": 443,
///   "effective-expiration-date": "2031-01-01T00:00:00Z",
///   "include-subdomains": false,
///   "noted-hostname": "api.example.com",
///   "served-certificate-chain": ["-----BEGIN CERTIFICATE-----\n…"],
///   "validated-certificate-chain": ["-----BEGIN CERTIFICATE-----\n…"],
///   "known-pins": ["pin-sha256=\"d6qzRu9zOECb90Uez27xWltNsj0e1Md7GkYYkVoZWmM=\""],
///   "validation-result": "pinMismatch",
///   "enforce-pinning": true,
///   "library-version": "swift-pinning 0.1.0",
///   "app-id": "pinning-cli check",
///   "app-version": "0.1.0"
/// }
/// ```
///
/// Deliberate deviations, each because the fields of RFC 7469 assume a browser's pin store:
/// `noted-hostname` is the configuration key that matched (`*.cdn.example.com`), and
/// `effective-expiration-date` is the entry's `expires`, or null when its pins never expire.
/// `validation-result` is the ``TrustFailure/Code`` name: `pinMismatch`. `pinset-version`, present only for a
/// configuration that came from a signed pin set, is the version of the pin set the connection was judged under.
/// `enforce-pinning` (TrustKit's key) is false for a report-only entry, whose mismatch was let through.
/// `library-version` is `swift-pinning` and ``SwiftPinning/version``, space-separated. `app-id` and `app-version` name the program that
/// saw the failure, when the reporter was told (`HTTPPinFailureReporter`'s `appId`/`appVersion` in `PinningNIO`).
/// These four keys are absent when unknown (a report built by hand, or decoded from an older sender).
public struct PinFailureReport: Sendable, Hashable, Codable {
    /// When the failure happened (the validation instant).
    public var dateTime: Date
    /// The host that was connected to.
    public var hostname: String
    /// The port that was connected to.
    public var port: Int
    /// When the entry's pins stop being enforced, or nil when they never expire.
    public var effectiveExpirationDate: Date?
    /// Whether the entry also covers subdomains.
    public var includeSubdomains: Bool
    /// The configuration key that matched the host.
    public var notedHostname: String
    /// The chain the server sent, PEM, leaf first.
    public var servedCertificateChain: [String]
    /// The path that validated (without matching a pin), PEM, leaf to anchor.
    public var validatedCertificateChain: [String]
    /// The entry's pins, as `pin-sha256="BASE64"`.
    public var knownPins: [String]
    /// The failing stage: `pinMismatch`.
    public var validationResult: String
    /// The version of the pin set the failure was judged under (`pinset-version`), or nil (and absent from the
    /// JSON) for a configuration read from a local file.
    public var pinsetVersion: Int?
    /// Whether the entry blocked the connection (`enforce-pinning`): false for report-only; nil (absent) when not
    /// said.
    public var enforcePinning: Bool?
    /// The library that judged the connection (`library-version`), e.g. `swift-pinning 0.1.0`; nil (absent) when
    /// not said.
    public var libraryVersion: String?
    /// The program that saw the failure (`app-id`), e.g. `pinning-cli proxy`; nil (absent) when not said.
    public var appId: String?
    /// That program's version (`app-version`); nil (absent) when not said.
    public var appVersion: String?

    /// A report with every field given.
    package init(
        dateTime: Date,
        hostname: String,
        port: Int,
        effectiveExpirationDate: Date?,
        includeSubdomains: Bool,
        notedHostname: String,
        servedCertificateChain: [String],
        validatedCertificateChain: [String],
        knownPins: [String],
        validationResult: String,
        pinsetVersion: Int? = nil,
        enforcePinning: Bool? = nil,
        libraryVersion: String? = nil,
        appId: String? = nil,
        appVersion: String? = nil
    ) {
        self.dateTime = dateTime
        self.hostname = hostname
        self.port = port
        self.effectiveExpirationDate = effectiveExpirationDate
        self.includeSubdomains = includeSubdomains
        self.notedHostname = notedHostname
        self.servedCertificateChain = servedCertificateChain
        self.validatedCertificateChain = validatedCertificateChain
        self.knownPins = knownPins
        self.validationResult = validationResult
        self.pinsetVersion = pinsetVersion
        self.enforcePinning = enforcePinning
        self.libraryVersion = libraryVersion
        self.appId = appId
        self.appVersion = appVersion
    }

    enum CodingKeys: String, CodingKey {
        case dateTime = "date-time"
        case hostname
        case port
        case effectiveExpirationDate = "effective-expiration-date"
        case includeSubdomains = "include-subdomains"
        case notedHostname = "noted-hostname"
        case servedCertificateChain = "served-certificate-chain"
        case validatedCertificateChain = "validated-certificate-chain"
        case knownPins = "known-pins"
        case validationResult = "validation-result"
        case pinsetVersion = "pinset-version"
        case enforcePinning = "enforce-pinning"
        case libraryVersion = "library-version"
        case appId = "app-id"
        case appVersion = "app-version"
    }

    /// Decodes a report in the HPKP/TrustKit JSON shape (`date-time`, `hostname`, `served-certificate-chain`, …).
    ///
    /// - Parameter decoder: The decoder.
    /// - Throws: `DecodingError` for a missing key, a wrong type or a malformed date.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.dateTime = try Self.date(container, .dateTime)
        self.hostname = try container.decode(String.self, forKey: .hostname)
        self.port = try container.decode(Int.self, forKey: .port)
        if try container.decodeNil(forKey: .effectiveExpirationDate) {
            self.effectiveExpirationDate = nil
        } else {
            self.effectiveExpirationDate = try Self.date(container, .effectiveExpirationDate)
        }
        self.includeSubdomains = try container.decode(Bool.self, forKey: .includeSubdomains)
        self.notedHostname = try container.decode(String.self, forKey: .notedHostname)
        self.servedCertificateChain = try container.decode([String].self, forKey: .servedCertificateChain)
        self.validatedCertificateChain = try container.decode([String].self, forKey: .validatedCertificateChain)
        self.knownPins = try container.decode([String].self, forKey: .knownPins)
        self.validationResult = try container.decode(String.self, forKey: .validationResult)
        self.pinsetVersion = try container.decodeIfPresent(Int.self, forKey: .pinsetVersion)
        self.enforcePinning = try container.decodeIfPresent(Bool.self, forKey: .enforcePinning)
        self.libraryVersion = try container.decodeIfPresent(String.self, forKey: .libraryVersion)
        self.appId = try container.decodeIfPresent(String.self, forKey: .appId)
        self.appVersion = try container.decodeIfPresent(String.self, forKey: .appVersion)
    }

    private static func date(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> Date {
        let text = try container.decode(String.self, forKey: key)
        do {
            return try RFC3339.read(text)
        } catch {
            // The reader's words say what is wrong ("day 30 does not exist: …"), as `--at`'s refusal does.
            throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not an RFC 3339 date-time: \(error.description)")
        }
    }

    /// Every key of RFC 7469 is always present; `effective-expiration-date` is null when the pins never expire.
    /// `pinset-version`, `enforce-pinning`, `library-version`, `app-id` and `app-version` are present only when known.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(RFC3339.format(self.dateTime), forKey: .dateTime)
        try container.encode(self.hostname, forKey: .hostname)
        try container.encode(self.port, forKey: .port)
        if let expiry = self.effectiveExpirationDate {
            try container.encode(RFC3339.format(expiry), forKey: .effectiveExpirationDate)
        } else {
            try container.encodeNil(forKey: .effectiveExpirationDate)
        }
        try container.encode(self.includeSubdomains, forKey: .includeSubdomains)
        try container.encode(self.notedHostname, forKey: .notedHostname)
        try container.encode(self.servedCertificateChain, forKey: .servedCertificateChain)
        try container.encode(self.validatedCertificateChain, forKey: .validatedCertificateChain)
        try container.encode(self.knownPins, forKey: .knownPins)
        try container.encode(self.validationResult, forKey: .validationResult)
        try container.encodeIfPresent(self.pinsetVersion, forKey: .pinsetVersion)
        try container.encodeIfPresent(self.enforcePinning, forKey: .enforcePinning)
        try container.encodeIfPresent(self.libraryVersion, forKey: .libraryVersion)
        try container.encodeIfPresent(self.appId, forKey: .appId)
        try container.encodeIfPresent(self.appVersion, forKey: .appVersion)
    }

    /// The report as the JSON body that is POSTed (keys sorted, slashes unescaped).
    package func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }

    /// `pin-sha256="BASE64"`, the RFC 7469 form of a pin.
    static func knownPin(_ pin: Pin) -> String {
        "pin-sha256=\"\(pin.base64)\""
    }

    /// A certificate as a PEM `CERTIFICATE` block (64-character lines, as swift-asn1's `PEMDocument` writes them,
    /// in linear time: ``PEMText/encode(label:der:)``), ending in a newline so that the blocks of a chain can be
    /// concatenated into a PEM bundle.
    static func pem(_ certificate: Certificate) -> String {
        PEMText.encode(label: "CERTIFICATE", der: certificate.derBytes)
    }

    /// The rate-limiting identity of a report: the host, the validated chain and the known pins.
    package var deduplicationKey: DeduplicationKey {
        DeduplicationKey(
            hostname: self.hostname.lowercased(),
            validatedChain: self.validatedCertificateChain,
            knownPins: self.knownPins.sorted()
        )
    }

    /// What makes two reports the same for rate limiting (used by `PinningNIO`'s report queue).
    package struct DeduplicationKey: Hashable, Sendable {
        var hostname: String
        var validatedChain: [String]
        var knownPins: [String]
    }
}
