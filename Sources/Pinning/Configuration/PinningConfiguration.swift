public import Foundation
public import X509

/// Per-host pinning read from one JSON file: SPKI pins with backups, wildcards, expiry, report-only mode,
/// extra anchors and failure reports (TrustKit's and Android's Network Security Configuration's model, with
/// OkHttp's `*.`/`**.` patterns).
///
/// ```json
/// {
///   "version": 1,
///   "unlistedHosts": "default",
///   "domains": {
///     "api.example.com":   { "pins": ["sha256/…", "sha256/…"] },
///     "*.cdn.example.com": { "pins": ["sha256/…", "sha256/…"], "reportURIs": ["https://reports.example.com/pins"] },
///     "**.fleet.internal": { "pins": ["sha256/…", "sha256/…"], "anchors": ["fleet-root.pem"], "anchorsOnly": true },
///     "example.org":       { "pins": ["sha256/…"], "includeSubdomains": true, "enforce": false, "expires": "2031-01-01T00:00:00Z" }
///   }
/// }
/// ```
///
/// <!-- snippet: given(chain: [Certificate])
/// import PinningNIO
/// import X509
/// -->
/// ```swift
/// var configuration = try PinningConfiguration(contentsOfFile: "/etc/myapp/pinning.json")
/// configuration.reportQueue = PinFailureReportQueue(reporter: HTTPPinFailureReporter())   // PinningNIO
/// let result = await configuration.evaluate(ServerTrust(certificates: chain), forHost: "api.example.com", port: 443)
/// ```
///
/// Loading validates everything (every field, every pin, every pattern, every anchor file) and throws a
/// ``PinningConfigurationError`` listing every problem; a configuration with any problem is never partially
/// applied. The values of a loaded configuration cannot be changed afterwards, so they stay validated.
///
/// Evaluation (``evaluate(_:forHost:port:)``) always validates the chain and the host name, for every matched
/// host; pins are matched by the core, on the validated path only.
public struct PinningConfiguration: Sendable {
    /// What happens to a host that no entry matches.
    public enum UnlistedHosts: String, Sendable, Hashable, CaseIterable {
        /// Normal validation: the platform roots (plus the trust's own anchors) and the host name; no pins.
        case `default`
        /// Untrusted (``TrustFailure/Code/hostNotAllowed``).
        case reject
    }

    /// One `domains` entry, validated.
    public struct Entry: Sendable, Hashable {
        /// The key as written in the file (`api.example.com`, `*.cdn.example.com`, `**.fleet.internal`).
        public let key: String
        /// The SPKI SHA-256 pins, in file order, without duplicates.
        public let pins: [Pin]
        /// Whether the key also covers every name below it (`includeSubdomains`, or a `**.` key).
        public let includeSubdomains: Bool
        /// Whether a pin mismatch makes the host untrusted (true) or is only flagged and reported (false).
        public let enforce: Bool
        /// After this instant the pins are not enforced (the chain and host name still are).
        public let expires: Date?
        /// The anchor files as written in the configuration (relative to the configuration file).
        public let anchorFiles: [String]
        /// The certificates loaded from ``anchorFiles``.
        public let anchors: [Certificate]
        /// Whether only ``anchors`` are trusted for this entry (no platform roots).
        public let anchorsOnly: Bool
        /// Where failure reports for this entry are sent.
        public let reportURIs: [URL]
        /// Whether this entry exempts its host from the policy of an entry covering it from above (TrustKit's
        /// `kTSKExcludeSubdomainFromParentPolicy`): the host is not pinned; its chain and name are validated
        /// as an unlisted host's under `"unlistedHosts": "default"`. Such an entry has no pins.
        public let excludesSubdomainFromParentPolicy: Bool
        /// The client identity presented to this entry's hosts when they ask for one (mutual TLS), if any.
        public let clientIdentity: ClientIdentitySource?
        /// The CRL files of `revocation.crls` as written (relative to the configuration file).
        public let revocationFiles: [String]
        /// How this entry's chains are checked for revocation (the CRLs read from ``revocationFiles``); nil
        /// checks none, unless the trust handed to ``PinningConfiguration/evaluate(_:forHost:port:)`` has its own.
        public let revocation: RevocationPolicy?

        let pattern: HostPattern

        /// Whether the pins have expired at `date` (an entry without ``expires`` never expires).
        public func pinsExpired(at date: Date) -> Bool {
            guard let expires = self.expires else { return false }
            return date >= expires
        }
    }

    /// The largest configuration file that is read: 1 MiB.
    public static let maximumFileSize = 1024 * 1024
    /// The only version this library reads.
    public static let supportedVersion = 1

    /// The format version (always ``supportedVersion``).
    public let version: Int
    /// What happens to hosts no entry matches.
    public let unlistedHosts: UnlistedHosts
    /// The entries, sorted by key.
    public let entries: [Entry]

    /// Where failure reports are submitted; nil (the default) builds reports
    /// (``HostEvaluation/failureReport``) without sending them.
    ///
    /// Submitting never changes a verdict. `PinningNIO`'s `PinFailureReportQueue` delivers over HTTPS in the
    /// background and sends the same report at most once per day.
    public var reportQueue: (any PinFailureReporting)?

    /// The version of the signed pin set this configuration was published as (`PinningNIO`'s `PinSetUpdater`
    /// sets it), or nil for a configuration read from a local file. Failure reports carry it
    /// (``PinFailureReport/pinsetVersion``), so a report says which pins it was judged under. It is not part of
    /// the file format.
    public var pinsetVersion: Int?

    /// Entry policies already combined with a trust's CRLs (see ``revocationPolicy(for:forDomain:)``).
    private(set) var combinedRevocation = RevocationPolicyMemo()

    init(version: Int, unlistedHosts: UnlistedHosts, entries: [Entry]) {
        self.version = version
        self.unlistedHosts = unlistedHosts
        self.entries = entries.sorted { $0.key < $1.key }
        self.reportQueue = nil
        self.pinsetVersion = nil
    }

    /// Reads and validates a configuration file. Anchor paths are relative to the file's directory.
    ///
    /// - Parameter path: The JSON file, at most ``maximumFileSize`` bytes.
    /// - Throws: ``PinningConfigurationError`` listing every problem: the file is unreadable or too large, not
    ///   JSON, or any field of it is unknown, missing, mistyped or invalid, or an anchor file does not load.
    public init(contentsOfFile path: String) throws(PinningConfigurationError) {
        let bytes = try Self.readFile(path)
        let base = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try self.init(data: Data(bytes), baseDirectory: base, origin: path)
    }

    /// Validates a configuration held in memory.
    ///
    /// - Parameters:
    ///   - data: The JSON text, at most ``maximumFileSize`` bytes.
    ///   - baseDirectory: The directory relative anchor paths are resolved against.
    ///   - origin: What to call the configuration in errors (a path, a URL, `<data>`).
    /// - Throws: ``PinningConfigurationError`` listing every problem.
    public init(data: Data, baseDirectory: String, origin: String = "<data>") throws(PinningConfigurationError) {
        guard data.count <= Self.maximumFileSize else {
            throw PinningConfigurationError(
                origin: origin,
                problems: [Self.tooLarge(data.count)]
            )
        }
        let root: JSONValue
        do {
            root = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw PinningConfigurationError(
                origin: origin,
                problems: [.init(.invalidJSON, entry: nil, field: nil, "not valid JSON: \(Self.describe(error))")]
            )
        }
        var validator = ConfigurationValidator(baseDirectory: baseDirectory)
        let parsed = validator.validate(root)
        guard validator.problems.isEmpty, let parsed else {
            throw PinningConfigurationError(origin: origin, problems: validator.problems)
        }
        self = parsed
    }

    /// The entry that governs `host`, or nil when none matches.
    ///
    /// Matching ignores case and a trailing dot. The most specific entry wins: an exact key naming the host
    /// (with or without `includeSubdomains`), then a `*.` key, then `**.` keys and exact keys with
    /// `includeSubdomains` covering the host from above, the longer suffix first.
    public func entry(forHost host: String) -> Entry? {
        let name = HostPattern.normalize(host)
        var best: Entry?
        for entry in self.entries where entry.pattern.matches(name) {
            guard let current = best else {
                best = entry
                continue
            }
            let (tier, length) = entry.pattern.rank(for: name)
            let (bestTier, bestLength) = current.pattern.rank(for: name)
            if tier < bestTier || (tier == bestTier && length > bestLength) {
                best = entry
            }
        }
        return best
    }

    /// What a reader should know at `date`: entries whose pins have expired, or expire within `window`.
    ///
    /// - Parameters:
    ///   - date: The instant to judge at.
    ///   - window: How far ahead an expiry is worth a warning; 30 days by default.
    public func warnings(at date: Date, expiringWithin window: TimeInterval = 30 * 86400) -> [String] {
        var warnings: [String] = []
        for entry in self.entries {
            guard let expires = entry.expires else { continue }
            if entry.pinsExpired(at: date) {
                warnings.append(
                    "\(entry.key): pins expired at \(RFC3339.format(expires)); they are no longer enforced (chain and host name still are)"
                )
            } else if expires.timeIntervalSince(date) <= window {
                let days = Int((expires.timeIntervalSince(date) / 86400).rounded(.down))
                warnings.append(
                    "\(entry.key): pins expire at \(RFC3339.format(expires)), in \(days) day\(days == 1 ? "" : "s"); renew them before then"
                )
            }
        }
        return warnings
    }

    // MARK: - Reading

    private static func readFile(_ path: String) throws(PinningConfigurationError) -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw PinningConfigurationError(
                origin: path,
                problems: [.init(.unreadableFile, entry: nil, field: nil, "cannot open the file (missing or not readable)")]
            )
        }
        defer { Self.close(handle) }
        let data: Data
        do {
            // One byte more than allowed tells "exactly the limit" from "too large" without reading the rest.
            data = try handle.read(upToCount: Self.maximumFileSize + 1) ?? Data()
        } catch {
            throw PinningConfigurationError(
                origin: path,
                problems: [.init(.unreadableFile, entry: nil, field: nil, "cannot read the file: \(Self.describe(error))")]
            )
        }
        guard data.count <= Self.maximumFileSize else {
            throw PinningConfigurationError(origin: path, problems: [Self.tooLarge(data.count)])
        }
        return Array(data)
    }

    private static func close(_ handle: FileHandle) {
        do {
            try handle.close()
        } catch {
            // Closing a file that was only read cannot lose data; nothing to report.
        }
    }

    private static func tooLarge(_ count: Int) -> PinningConfigurationError.Problem {
        .init(
            .fileTooLarge,
            entry: nil,
            field: nil,
            "the configuration is larger than \(Self.maximumFileSize) bytes (1 MiB); a pinning configuration is a few kilobytes"
        )
    }

    static func describe(_ error: any Error) -> String {
        if let decoding = error as? DecodingError {
            switch decoding {
            case .dataCorrupted(let context):
                let underlying = context.underlyingError.map { " (\(Self.describe($0)))" } ?? ""
                return context.debugDescription + underlying
            default:
                return "\(decoding)"
            }
        }
        let ns = error as NSError
        if let detail = ns.userInfo[NSDebugDescriptionErrorKey] as? String { return detail }
        return "\(error)"
    }
}

// MARK: - Codable

extension PinningConfiguration: Codable {
    /// Decodes strictly, exactly as ``init(data:baseDirectory:origin:)``, with relative anchor paths resolved
    /// against the current directory. Prefer ``init(contentsOfFile:)``, which resolves them against the file.
    ///
    /// - Throws: ``PinningConfigurationError`` listing every problem.
    public init(from decoder: any Decoder) throws {
        let root = try JSONValue(from: decoder)
        var validator = ConfigurationValidator(baseDirectory: FileManager.default.currentDirectoryPath)
        let parsed = validator.validate(root)
        guard validator.problems.isEmpty, let parsed else {
            throw PinningConfigurationError(origin: "<decoder>", problems: validator.problems)
        }
        self = parsed
    }

    private struct EncodedEntry: Encodable {
        var pins: [String]?
        var excludeSubdomainFromParentPolicy: Bool?
        var includeSubdomains: Bool?
        var enforce: Bool?
        var expires: String?
        var anchors: [String]?
        var anchorsOnly: Bool?
        var reportURIs: [String]?
        var clientIdentity: [String: String]?
        var revocation: [String: EncodedValue]?

        /// A string, a list of strings or a flag (the `revocation` object's values).
        enum EncodedValue: Encodable {
            case string(String)
            case strings([String])
            case bool(Bool)

            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                switch self {
                case .string(let text): try container.encode(text)
                case .strings(let texts): try container.encode(texts)
                case .bool(let flag): try container.encode(flag)
                }
            }
        }

        init(
            pins: [String]? = nil, excludeSubdomainFromParentPolicy: Bool? = nil, includeSubdomains: Bool? = nil,
            enforce: Bool? = nil, expires: String? = nil, anchors: [String]? = nil, anchorsOnly: Bool? = nil,
            reportURIs: [String]? = nil, clientIdentity: [String: String]? = nil, revocation: [String: EncodedValue]? = nil
        ) {
            self.revocation = revocation
            self.pins = pins
            self.excludeSubdomainFromParentPolicy = excludeSubdomainFromParentPolicy
            self.includeSubdomains = includeSubdomains
            self.enforce = enforce
            self.expires = expires
            self.anchors = anchors
            self.anchorsOnly = anchorsOnly
            self.reportURIs = reportURIs
            self.clientIdentity = clientIdentity
        }
    }

    private enum CodingKeys: String, CodingKey {
        case version, unlistedHosts, domains
    }

    /// Encodes the configuration in the file format (anchors as the paths that were read; defaults left out).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.version, forKey: .version)
        try container.encode(self.unlistedHosts.rawValue, forKey: .unlistedHosts)
        var domains: [String: EncodedEntry] = [:]
        for entry in self.entries {
            let isWildcard = entry.key.hasPrefix("*")
            if entry.excludesSubdomainFromParentPolicy {
                domains[entry.key] = EncodedEntry(excludeSubdomainFromParentPolicy: true)
                continue
            }
            domains[entry.key] = EncodedEntry(
                pins: entry.pins.map(\.description),
                includeSubdomains: entry.includeSubdomains && !isWildcard ? true : nil,
                enforce: entry.enforce ? nil : false,
                expires: entry.expires.map { RFC3339.format($0) },
                anchors: entry.anchorFiles.isEmpty ? nil : entry.anchorFiles,
                anchorsOnly: entry.anchorsOnly ? true : nil,
                reportURIs: entry.reportURIs.isEmpty ? nil : entry.reportURIs.map(\.absoluteString),
                clientIdentity: entry.clientIdentity.map(Self.encoded),
                revocation: entry.revocation.map { policy in
                    var fields: [String: EncodedEntry.EncodedValue] = [
                        "mode": .string(policy.mode.rawValue), "scope": .string(policy.scope.rawValue),
                    ]
                    if !entry.revocationFiles.isEmpty || !policy.fetch { fields["crls"] = .strings(entry.revocationFiles) }
                    if policy.fetch { fields["fetch"] = .bool(true) }
                    return fields
                }
            )
        }
        try container.encode(domains, forKey: .domains)
    }

    private static func encoded(_ identity: ClientIdentitySource) -> [String: String] {
        var fields: [String: String] = [:]
        switch identity.files {
        case .pkcs12:
            fields["pkcs12"] = identity.writtenPaths.first
        case .pem:
            fields["certificate"] = identity.writtenPaths.first
            fields["key"] = identity.writtenPaths.last
        }
        fields["passphraseEnv"] = identity.passphraseEnvironmentVariable
        return fields
    }
}
