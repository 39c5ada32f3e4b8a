public import Foundation
package import X509

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
    package enum UnlistedHosts: String, Sendable, Hashable, CaseIterable {
        /// Normal validation: the platform roots (plus the trust's own anchors) and the host name; no pins.
        case `default`
        /// Untrusted (``TrustFailure/Code/hostNotAllowed``).
        case reject
    }

    /// One `domains` entry, validated.
    ///
    /// No public API hands an entry out (``PinningConfiguration``'s entries are package), so its fields are package
    /// too; the type stays public as the namespace of ``Coverage``, which `PinningProxy`'s local CA takes.
    public struct Entry: Sendable, Hashable {
        /// The key as written in the file (`api.example.com`, `*.cdn.example.com`, `**.fleet.internal`).
        package let key: String
        /// The SPKI SHA-256 pins, in file order, without duplicates.
        package let pins: [Pin]
        /// Whether the key also covers every name below it (`includeSubdomains`, or a `**.` key).
        package let includeSubdomains: Bool
        /// Whether a pin mismatch makes the host untrusted (true) or is only flagged and reported (false).
        package let enforce: Bool
        /// After this instant the pins are not enforced (the chain and host name still are).
        package let expires: Date?
        /// The anchor files as written in the configuration (relative to the configuration file).
        package let anchorFiles: [String]
        /// The certificates loaded from `anchorFiles`.
        package let anchors: [Certificate]
        /// Whether only ``anchors`` are trusted for this entry (no platform roots).
        package let anchorsOnly: Bool
        /// Where failure reports for this entry are sent.
        package let reportURIs: [URL]
        /// Whether this entry exempts its host from the policy of an entry covering it from above (TrustKit's
        /// `kTSKExcludeSubdomainFromParentPolicy`): the host is not pinned; its chain and name are validated
        /// as an unlisted host's under `"unlistedHosts": "default"`. Such an entry has no pins.
        package let excludesSubdomainFromParentPolicy: Bool
        /// The client identity presented to this entry's hosts when they ask for one (mutual TLS), if any.
        package let clientIdentity: ClientIdentitySource?
        /// The CRL files of `revocation.crls` as written (relative to the configuration file).
        package let revocationFiles: [String]
        /// How this entry's chains are checked for revocation (the CRLs read from `revocationFiles`); nil
        /// checks none, unless the trust handed to ``PinningConfiguration/evaluate(_:forHost:port:)`` has its own.
        package let revocation: RevocationPolicy?

        let pattern: HostPattern

        /// Whether the pins have expired at `date` (an entry without ``expires`` never expires).
        package func pinsExpired(at date: Date) -> Bool {
            guard let expires = self.expires else { return false }
            return date >= expires
        }
    }

    /// The largest configuration file that is read: 1 MiB. A configuration written by hand and read from disk
    /// (`--config`, ``init(contentsOfFile:maximumSize:)``) is a few kilobytes; the cap stops a wrong path (a log, a
    /// disk image) from being read whole.
    public static let maximumFileSize = 1024 * 1024

    /// The largest configuration a pin set may carry (`PinningNIO`'s `PinSetUpdater`, `pinning pinset publish`):
    /// 16 MiB.
    ///
    /// Why larger than ``maximumFileSize``: a pin set is generated for a fleet, not written by hand, and 10,000
    /// hosts with two pins each are already 1.43 MB (issue 29 asks for pin sets of that size). Why 16 MiB: it holds
    /// about 110,000 such hosts, ten times that with room for longer names and more pins per host, and reading it
    /// stays bounded (100,000 hosts, 14.4 MB: applied in 432 ms median, 256 MiB peak resident, on 2 shared cores at
    /// load 4.0–4.5, `pinning bench pinset --hosts 100000`); it is the cap of
    /// every other file a pin set names (anchors and CRLs, `PinSetUpdater.Options.maximumReferencedFileSize`) and
    /// of certificate files (``CertificateLoader/maximumFileSize``). The bytes are also bounded before they arrive:
    /// a pin-set target is downloaded only when the length the signed targets metadata lists is within the cap, and
    /// never past that length (TUF's endless-data protection).
    public static let maximumPinSetSize = 16 * 1024 * 1024
    /// The only version this library reads.
    package static let supportedVersion = 1

    /// The format version (always `supportedVersion`).
    package let version: Int
    /// What happens to hosts no entry matches.
    package let unlistedHosts: UnlistedHosts
    /// The entries, sorted by key.
    package let entries: [Entry]

    /// Where failure reports are submitted; nil (the default) builds reports
    /// (``HostEvaluation/failureReport``) without sending them.
    ///
    /// Submitting never changes a verdict. `PinningNIO`'s `PinFailureReportQueue` delivers over HTTPS in the
    /// background and sends the same report at most once per day.
    public var reportQueue: (any PinFailureReporting)?

    /// The version of the signed pin set this configuration was published as (`PinningNIO`'s `PinSetUpdater`
    /// sets it), or nil for a configuration read from a local file. Failure reports carry it
    /// (their `pinset-version`), so a report says which pins it was judged under. It is not part of
    /// the file format.
    package var pinsetVersion: Int?

    /// Entry policies already combined with a trust's CRLs (see ``revocationPolicy(for:forDomain:)``).
    private(set) var combinedRevocation = RevocationPolicyMemo()

    /// The entries by the names their patterns cover (``entry(forHost:)``).
    let index: HostIndex

    /// - Parameter index: The index of `entries` when the caller built it already (the validator does, to find
    ///   entries that cover the same hosts); it is used only if `entries` are in key order, as the validator hands
    ///   them over.
    init(version: Int, unlistedHosts: UnlistedHosts, entries: [Entry], index: HostIndex? = nil) {
        self.version = version
        self.unlistedHosts = unlistedHosts
        // The validator hands them over in key order already (a pin set's 10,000 entries are not moved again).
        let inOrder = entries.indices.dropFirst().allSatisfy { !(entries[$0].key < entries[$0 - 1].key) }
        if inOrder {
            self.entries = entries
            self.index = index ?? HostIndex(entries)
        } else {
            self.entries = entries.sorted { $0.key < $1.key }
            self.index = HostIndex(self.entries)
        }
        self.reportQueue = nil
        self.pinsetVersion = nil
    }

    /// Reads and validates a configuration file. Anchor paths are relative to the file's directory.
    ///
    /// - Parameters:
    ///   - path: The JSON file.
    ///   - maximumSize: The largest file read: ``maximumFileSize`` (1 MiB) unless the file is a pin set
    ///     (``maximumPinSetSize``).
    /// - Throws: ``PinningConfigurationError`` listing every problem: the file is unreadable or too large, not
    ///   JSON, or any field of it is unknown, missing, mistyped or invalid, or an anchor file does not load.
    public init(contentsOfFile path: String, maximumSize: Int = maximumFileSize) throws(PinningConfigurationError) {
        let bytes = try Self.readFile(path, maximumSize: maximumSize)
        let base = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try self.init(data: Data(bytes), baseDirectory: base, origin: path, maximumSize: maximumSize)
    }

    /// Validates a configuration held in memory.
    ///
    /// - Parameters:
    ///   - data: The JSON text.
    ///   - baseDirectory: The directory relative anchor paths are resolved against.
    ///   - origin: What to call the configuration in errors (a path, a URL, `<data>`).
    ///   - maximumSize: The largest text read: ``maximumFileSize`` (1 MiB) unless it is a pin set
    ///     (``maximumPinSetSize``).
    /// - Throws: ``PinningConfigurationError`` listing every problem.
    public init(data: Data, baseDirectory: String, origin: String = "<data>", maximumSize: Int = maximumFileSize) throws(PinningConfigurationError) {
        try self.init(text: Text(data, maximumSize: maximumSize), baseDirectory: baseDirectory, origin: origin)
    }

    /// A configuration's JSON text, read once (with the core's strict reader) and kept as read, so that what it
    /// names can be looked at (``filesNamed(in:)``) and the same reading then loaded
    /// (``init(text:baseDirectory:origin:)``), as `PinningNIO`'s `PinSetUpdater` does with a pin set. Why the text
    /// is not what it should be (too large, not JSON) is kept too, and said when it is loaded, in the words of
    /// ``init(data:baseDirectory:origin:maximumSize:)``.
    package struct Text: Sendable {
        fileprivate enum Reading: Sendable {
            /// Read in one pass (``ConfigurationDocument``), as nearly every configuration is.
            case document(ConfigurationDocument)
            case read(TUFJSON)
            case tooLarge(maximumSize: Int)
            case invalid(TUFJSONError)
        }

        fileprivate let reading: Reading

        /// Reads `data`, unless it is larger than `maximumSize` (then it is not read at all).
        ///
        /// - Parameter readingInOnePass: Whether the one-pass reading (``ConfigurationDocument``) may read it; false
        ///   only for tests that hold that reading to the strict reader's tree.
        package init(_ data: Data, maximumSize: Int, readingInOnePass: Bool = true) {
            guard data.count <= maximumSize else {
                self.reading = .tooLarge(maximumSize: maximumSize)
                return
            }
            // The one-pass reading takes only texts that the strict reader reads to the same values; it leaves every
            // other text (and so every refusal) to the strict reader.
            if readingInOnePass, let document = ConfigurationDocument.read(data) {
                self.reading = .document(document)
                return
            }
            do {
                self.reading = .read(try ConfigurationJSON.parse(data))
            } catch {
                self.reading = .invalid(error)
            }
        }

        /// Whether the text was read in one pass (for tests that hold that reading to the strict reader's).
        var wasReadInOnePass: Bool {
            if case .document = self.reading { return true }
            return false
        }
    }

    /// Validates a configuration text already read (``Text``), exactly as ``init(data:baseDirectory:origin:maximumSize:)``
    /// validates the same bytes.
    package init(text: Text, baseDirectory: String, origin: String = "<data>") throws(PinningConfigurationError) {
        var validator = ConfigurationValidator(baseDirectory: baseDirectory)
        let parsed: PinningConfiguration?
        switch text.reading {
        case .document(let document):
            parsed = validator.validate(document)
        case .read(let root):
            parsed = validator.validate(root)
        case .tooLarge(let maximumSize):
            throw PinningConfigurationError(origin: origin, problems: [Self.tooLarge(maximumSize)])
        case .invalid(let error):
            throw PinningConfigurationError(
                origin: origin,
                problems: [.init(.invalidJSON, entry: nil, field: nil, "not valid JSON: \(error.description)")]
            )
        }
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
    package func entry(forHost host: String) -> Entry? {
        let name = HostPattern.normalize(host)
        // The entries that can match, in ``entries`` order, then the same test and ranking for each as for all:
        // the index only spares testing the rest (a pin set of 10,000 hosts is searched on every connection).
        guard let candidates = self.index.candidates(for: name) else { return Self.best(among: self.entries, for: name) }
        return Self.best(among: candidates.lazy.map { self.entries[$0] }, for: name)
    }

    /// ``entry(forHost:)`` without the index: every entry tested (for tests that hold the two to the same answers).
    package func entryTestingEveryEntry(forHost host: String) -> Entry? {
        Self.best(among: self.entries, for: HostPattern.normalize(host))
    }

    /// The most specific of `entries` (in ``entries`` order: the first wins a tie) that matches `name`.
    private static func best(among entries: some Sequence<Entry>, for name: String) -> Entry? {
        var best: Entry?
        for entry in entries where entry.pattern.matches(name) {
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

    /// The entries (by their position in ``PinningConfiguration/entries``) by the name their pattern is made of:
    /// an exact key's host, a `*.` key's suffix, a `**.` key's (or an `includeSubdomains` key's) suffix.
    struct HostIndex: Sendable {
        /// The positions of the entries under one name: nearly always one (`rest` empty, which allocates nothing),
        /// so 10,000 names are not 10,000 arrays.
        private struct Positions: Sendable {
            /// -1 only while being added (``add(_:under:to:)``).
            var first: Int
            var rest: [Int] = []

            /// Adds `position` under `name` (one look-up of `name`); returns the first position already there, if any.
            static func add(_ position: Int, under name: String, to table: inout [String: Positions]) -> Int? {
                func add(to positions: inout Positions) -> Int? {
                    guard positions.first >= 0 else {
                        positions.first = position
                        return nil
                    }
                    positions.rest.append(position)
                    return positions.first
                }
                return add(to: &table[name, default: Positions(first: -1)])
            }

            static func append(_ positions: Positions?, to found: inout [Int]) {
                guard let positions else { return }
                found.append(positions.first)
                found += positions.rest
            }
        }

        private var exact: [String: Positions] = [:]
        private var oneLabel: [String: Positions] = [:]
        private var anyDepth: [String: Positions] = [:]

        /// The entries whose pattern is the same as an earlier entry's (the same kind over the same name, so they
        /// cover exactly the same hosts), ascending, each with the position of the first entry of that pattern.
        private(set) var repeated: [(position: Int, first: Int)] = []

        init(_ entries: [Entry]) {
            // By position, not `for entry in entries`: an entry is not copied (with a retain and a release of each of
            // its fields) to read its pattern. The tables are sized once (a pin set's 10,000 names are not rehashed
            // as they grow).
            var exactCount = 0
            for position in entries.indices {
                if case .exact = entries[position].pattern.kind { exactCount += 1 }
            }
            self.exact.reserveCapacity(exactCount)
            for position in entries.indices {
                let first: Int?
                switch entries[position].pattern.kind {
                case .exact(let name): first = Positions.add(position, under: name, to: &self.exact)
                case .oneLabel(let suffix): first = Positions.add(position, under: suffix, to: &self.oneLabel)
                case .anyDepth(let suffix): first = Positions.add(position, under: suffix, to: &self.anyDepth)
                }
                if let first { self.repeated.append((position, first)) }
            }
        }

        /// Every entry whose pattern can match `name` (normalised), ascending; nil when `name` is not ASCII.
        ///
        /// A pattern matches a name only as the name itself (exact, `**.`), as what follows its first dot (`*.`),
        /// or as what follows any of its dots (`**.`): those are the names looked up. That holds byte for byte, so
        /// only for ASCII names, where `String` comparison is byte comparison; a name with no ASCII form (which
        /// every peer-name check refuses anyway) is searched entry by entry, as before the index.
        func candidates(for name: String) -> [Int]? {
            guard name.utf8.allSatisfy({ $0 < 0x80 }) else { return nil }
            var found: [Int] = []
            Positions.append(self.exact[name], to: &found)
            Positions.append(self.anyDepth[name], to: &found)
            var isFirstDot = true
            let bytes = Array(name.utf8)
            for position in bytes.indices where bytes[position] == UInt8(ascii: ".") {
                let suffix = String(decoding: bytes[(position + 1)...], as: UTF8.self)
                if isFirstDot {
                    Positions.append(self.oneLabel[suffix], to: &found)
                    isFirstDot = false
                }
                Positions.append(self.anyDepth[suffix], to: &found)
            }
            return found.sorted()
        }
    }

    /// What a reader should know at `date`: entries whose pins have expired, or expire within `window`.
    ///
    /// - Parameters:
    ///   - date: The instant to judge at.
    ///   - window: How far ahead an expiry is worth a warning; 30 days by default.
    package func warnings(at date: Date, expiringWithin window: TimeInterval = 30 * 86400) -> [String] {
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

    /// The anchor and CRL paths a configuration's text names, as written, in the order of its (sorted) keys; read
    /// as ``init(data:baseDirectory:origin:maximumSize:)`` reads the text, but without checking anything else. For
    /// fetching those files before the configuration is loaded (`PinningNIO`'s `PinSetUpdater`). Text that is not
    /// JSON, and values of the wrong shape, name nothing: loading refuses them, with its own words.
    package static func filesNamed(inJSON data: Data) -> [String] {
        Self.filesNamed(in: Text(data, maximumSize: .max))
    }

    /// ``filesNamed(inJSON:)`` of a text already read.
    package static func filesNamed(in text: Text) -> [String] {
        func strings(_ value: TUFJSON?) -> [String] {
            guard case .array(let items)? = value else { return [] }
            return items.compactMap { item in
                guard case .string(let text) = item else { return nil }
                return text
            }
        }
        var files: [String] = []
        func add(anchors: TUFJSON?, revocation: TUFJSON?) {
            files += strings(anchors)
            if case .object(let revocation)? = revocation { files += strings(revocation["crls"]) }
        }
        switch text.reading {
        case .document(let document):
            for domain in document.domains ?? [] {
                add(anchors: domain.fields.anchors, revocation: domain.fields.revocation)
            }
        case .read(let root):
            guard case .object(let fields) = root, case .object(let domains)? = fields["domains"] else { return [] }
            for member in ConfigurationJSON.sortedMembers(domains) {
                guard case .object(let entry) = member.value else { continue }
                add(anchors: entry["anchors"], revocation: entry["revocation"])
            }
        case .tooLarge, .invalid:
            break
        }
        return files
    }

    // MARK: - Reading

    /// The file's bytes through the reader every file option uses (``BoundedFileReader``: the same words for a
    /// missing file, a directory or a FIFO without a writer as `--chain` gets, never Foundation's error text).
    private static func readFile(_ path: String, maximumSize: Int) throws(PinningConfigurationError) -> [UInt8] {
        do {
            return try CertificateLoader.readFile(atPath: path, maximumSize: maximumSize)
        } catch {
            let problem: PinningConfigurationError.Problem =
                error.code == .fileTooLarge
                ? Self.tooLarge(maximumSize) : .init(.unreadableFile, entry: nil, field: nil, error.problem)
            throw PinningConfigurationError(origin: path, problems: [problem])
        }
    }

    private static func tooLarge(_ maximumSize: Int) -> PinningConfigurationError.Problem {
        let why =
            switch maximumSize {
            case Self.maximumFileSize: " (1 MiB); a pinning configuration is a few kilobytes"
            case Self.maximumPinSetSize: " (16 MiB), the cap of a pin set"
            default: ""
            }
        return .init(.fileTooLarge, entry: nil, field: nil, "the configuration is larger than \(maximumSize) bytes\(why)")
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
    /// Decodes strictly, exactly as ``init(data:baseDirectory:origin:maximumSize:)``, with relative anchor paths resolved
    /// against the current directory. Prefer ``init(contentsOfFile:maximumSize:)``, which resolves them against the file.
    ///
    /// - Throws: ``PinningConfigurationError`` listing every problem.
    public init(from decoder: any Decoder) throws {
        let root = try JSONValue(from: decoder)
        var validator = ConfigurationValidator(baseDirectory: FileManager.default.currentDirectoryPath)
        let parsed = validator.validate(root.tufJSON)
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
