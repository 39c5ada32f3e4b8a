import Foundation
public import Pinning
public import X509

/// Writes a ``/Pinning/PinningConfiguration`` in the pin formats of the mobile platforms, so that one JSON file
/// is the source of every app's pins.
///
/// Every difference of meaning is explicit. A feature the platform cannot express (report-only pins on
/// Android, pin expiry on OkHttp, per-entry anchors on TrustKit, a one-label wildcard anywhere but OkHttp, …) is
/// a ``TranslationProblem`` naming the entry and the platform: an error, or with `lossy` a warning saying what
/// was dropped. Nothing is dropped silently. What each platform reads (verified against their sources):
///
/// - Host coverage: an exact key is that host; `**.name` and `name` with `includeSubdomains` are the name and
///   everything below it, which is what Android's `includeSubdomains`, TrustKit's `TSKIncludeSubdomains`, ATS's
///   `NSIncludesSubdomains` and OkHttp's `**.` mean. `*.name` (one label) exists only in OkHttp. Android,
///   TrustKit and ATS pick the most specific matching entry, as we do; OkHttp applies the pins of *every*
///   matching pattern together, so an entry inside another's coverage is a difference there.
/// - Expiry: Android's `expiration` and TrustKit's `TSKExpirationDate` are dates (`yyyy-MM-dd`; TrustKit reads
///   midnight UTC, Android midnight in the device's time zone). An `expires` at midnight UTC is written as its
///   date; any other instant is a difference (lossy: the date before it, so pins stop being enforced no later
///   than here). ATS and OkHttp have no expiry.
/// - Anchors: only Android can add trust anchors per domain (`trust-anchors` with `@raw/` resources).
/// - ATS pins identities by role: a pin is a CA identity when the certificate it hashes is a CA
///   (basicConstraints cA), a leaf identity otherwise. The certificate is looked for among the entry's anchors
///   and the `certificates` handed in; a pin whose certificate is not found cannot be placed. An entry with both
///   kinds is a difference: ATS then requires a match of each kind, we require one match of any.
public struct ConfigurationExporter: Sendable {
    /// The target format.
    public let format: PlatformFormat
    /// Drop what cannot be expressed, with a warning each, instead of failing.
    public let lossy: Bool
    /// Certificates the pins may belong to (ATS: decides leaf or CA identity), besides each entry's anchors.
    public let certificates: [Certificate]

    public init(format: PlatformFormat, lossy: Bool = false, certificates: [Certificate] = []) {
        self.format = format
        self.lossy = lossy
        self.certificates = certificates
    }

    /// The configuration in ``format``.
    ///
    /// - Throws: ``TranslationError`` listing every feature that cannot be expressed, unless ``lossy``.
    public func export(_ configuration: PinningConfiguration) throws(TranslationError) -> Translation {
        var log = ProblemLog(format: self.format, lossy: self.lossy)
        var notes: [String] = []
        if configuration.unlistedHosts == .reject {
            log.add(nil, "\"unlistedHosts\": \"reject\" cannot be expressed (the platform connects to any other host with its normal validation); dropped")
        }
        var kept: [PinningConfiguration.Entry] = []
        for entry in configuration.entries {
            if self.keep(entry, in: configuration, log: &log) { kept.append(entry) }
        }
        let text: String
        switch self.format {
        case .androidNSC: text = self.androidNSC(kept, log: &log, notes: &notes)
        case .trustKit: text = self.trustKit(kept, log: &log)
        case .ats: text = self.ats(kept, log: &log)
        case .okHttp: text = self.okHttp(kept, configuration: configuration, log: &log)
        }
        return Translation(text: text, warnings: try log.finish(), notes: notes)
    }

    // MARK: - What every format shares

    /// Records the entry's features the format cannot express; false when the entry as a whole is dropped.
    private func keep(_ entry: PinningConfiguration.Entry, in configuration: PinningConfiguration, log: inout ProblemLog) -> Bool {
        let key = entry.key
        if case .oneLabel = entry.coverage, self.format != .okHttp {
            log.add(key, "a one-label wildcard (\"*.\") cannot be expressed; the entry is dropped (its hosts are not pinned there)")
            return false
        }
        if !entry.enforce && self.format != .trustKit && !entry.excludesSubdomainFromParentPolicy {
            log.add(key, "report-only pins (\"enforce\": false) cannot be expressed; the entry is dropped (enforcing them could lock the app out)")
            return false
        }
        if entry.excludesSubdomainFromParentPolicy && (self.format == .ats || self.format == .okHttp) {
            log.add(key, "an exclusion from the parent entry's pins cannot be expressed; dropped, so the parent entry's pins apply to this host there")
            return false
        }
        if !entry.reportURIs.isEmpty && self.format != .trustKit {
            log.add(key, "report URIs cannot be expressed; dropped (no pin failure reports from this platform)")
        }
        if entry.clientIdentity != nil {
            log.add(key, "a client identity is app code, not pin configuration; dropped")
        }
        if entry.revocation != nil {
            log.add(key, "revocation checking cannot be expressed; dropped")
        }
        if !entry.anchorFiles.isEmpty && self.format != .androidNSC {
            log.add(
                key,
                "trust anchors cannot be expressed per entry; dropped (the app trusts the platform's roots only, so a chain under a private CA fails there)"
            )
        }
        if let expires = entry.expires {
            switch self.format {
            case .androidNSC, .trustKit:
                let day = DayFormat.day(of: expires)
                if !day.isMidnight {
                    log.add(key, "expiry \(RFC3339.format(expires)) is not midnight UTC and the platform takes a date; written as \(day.text)")
                }
            case .ats, .okHttp:
                log.add(key, "pin expiry (\(RFC3339.format(expires))) cannot be expressed; dropped, so the pins never expire there")
            }
        }
        return true
    }

    private static func base64(_ pin: Pin) -> String {
        Data(pin.sha256).base64EncodedString()
    }

    // MARK: - Android Network Security Config

    /// A resource name for an anchor file: `res/raw/<name>` takes lower-case letters, digits and underscores.
    static func rawResourceName(_ file: String) -> String {
        var base = (file as NSString).lastPathComponent
        let ext = (base as NSString).pathExtension
        if !ext.isEmpty { base = String(base.dropLast(ext.count + 1)) }
        var name = String(base.lowercased().map { ($0.isASCII && ($0.isLetter || $0.isNumber)) ? $0 : "_" })
        if name.isEmpty || name.first!.isNumber { name = "a_" + name }
        return name
    }

    /// The `@raw` name of every anchor file the entries name, distinct files always under distinct names.
    ///
    /// ``rawResourceName(_:)`` maps several file names to one resource (`a-b.pem`, `a_b.pem`, `sub/a_b.pem` are all
    /// `a_b`), and one `res/raw/a_b.pem` can hold only one of them: the last copied would silently be every entry's
    /// anchor. So the files are named in the order they first appear (entries in order, each entry's anchors in
    /// order): the first keeps its name, a later file whose name is taken gets the first free `_2`, `_3`, … after
    /// it. A file is known by its path as written, so the same path named by two entries is one resource; two
    /// spellings of one path (`a.pem`, `./a.pem`) are two resources holding the same certificate, which costs a
    /// copy and merges nothing.
    static func rawResourceNames(_ entries: [PinningConfiguration.Entry]) -> [String: String] {
        var names: [String: String] = [:]
        var taken: Set<String> = []
        // Every natural name first, so that a suffixed name never takes one that a file later in the list has as
        // its own (`a_b_2.pem` keeps `a_b_2` even when a second `a_b` comes before it).
        let files = entries.flatMap(\.anchorFiles)
        let natural = Set(files.map(Self.rawResourceName))
        for file in files where names[file] == nil {
            let base = Self.rawResourceName(file)
            var name = base
            if taken.contains(name) {
                var suffix = 2
                while taken.contains("\(base)_\(suffix)") || natural.contains("\(base)_\(suffix)") { suffix += 1 }
                name = "\(base)_\(suffix)"
            }
            taken.insert(name)
            names[file] = name
        }
        return names
    }

    private func androidNSC(_ entries: [PinningConfiguration.Entry], log: inout ProblemLog, notes: inout [String]) -> String {
        let resources = Self.rawResourceNames(entries)
        var out = """
            <?xml version="1.0" encoding="utf-8"?>
            <!-- Generated by pinning config export (format android-nsc); save as res/xml/network_security_config.xml and
                 reference it from AndroidManifest.xml: <application android:networkSecurityConfig="@xml/network_security_config">.
                 Expiration dates are read by Android at midnight in the device's time zone. -->
            <network-security-config>

            """
        for entry in entries {
            let (name, subdomains) = Self.domain(entry)
            // Not in our configuration, which judges TLS only: a pinned host reachable over plain HTTP has pins
            // an attacker need not defeat. Android 9+ defaults to false; older versions and a permissive
            // base-config do not (README, "Cleartext").
            out += "    <domain-config cleartextTrafficPermitted=\"false\">\n"
            out += "        <domain includeSubdomains=\"\(subdomains)\">\(Markup.escaped(name))</domain>\n"
            if !entry.anchorFiles.isEmpty {
                out += "        <trust-anchors>\n"
                for file in entry.anchorFiles {
                    let resource = resources[file] ?? Self.rawResourceName(file)
                    out += "            <certificates src=\"@raw/\(resource)\"/>\n"
                    notes.append("copy \(file) into res/raw/ as \(resource).pem (domains[\"\(entry.key)\"] trusts it as @raw/\(resource))")
                }
                if !entry.anchorsOnly { out += "            <certificates src=\"system\"/>\n" }
                out += "        </trust-anchors>\n"
            }
            if !entry.excludesSubdomainFromParentPolicy {
                // A domain-config without pin-set is how Android leaves a host unpinned inside a pinned parent.
                let expiration = entry.expires.map { " expiration=\"\(DayFormat.day(of: $0).text)\"" } ?? ""
                out += "        <pin-set\(expiration)>\n"
                for pin in entry.pins {
                    out += "            <pin digest=\"SHA-256\">\(Self.base64(pin))</pin>\n"
                }
                out += "        </pin-set>\n"
            }
            out += "    </domain-config>\n"
        }
        out += "</network-security-config>\n"
        return out
    }

    /// The name and the include-subdomains flag of an entry that is not a one-label wildcard.
    private static func domain(_ entry: PinningConfiguration.Entry) -> (String, Bool) {
        switch entry.coverage {
        case .exact(let name): return (name, false)
        case .anyDepth(suffix: let name): return (name, true)
        case .oneLabel(let suffix): return ("*." + suffix, false)
        }
    }

    // MARK: - TrustKit

    private func trustKit(_ entries: [PinningConfiguration.Entry], log: inout ProblemLog) -> String {
        var domains: [(String, Markup.PlistValue)] = []
        for entry in entries {
            let (name, subdomains) = Self.domain(entry)
            var policy: [(String, Markup.PlistValue)] = []
            if entry.excludesSubdomainFromParentPolicy {
                policy.append(("TSKExcludeSubdomainFromParentPolicy", .bool(true)))
            } else {
                policy.append(("TSKPublicKeyHashes", .array(entry.pins.map { .string(Self.base64($0)) })))
                policy.append(("TSKIncludeSubdomains", .bool(subdomains)))
                policy.append(("TSKEnforcePinning", .bool(entry.enforce)))
                // TrustKit would otherwise also send every failure report to its maintainers' server.
                policy.append(("TSKDisableDefaultReportUri", .bool(true)))
                if !entry.reportURIs.isEmpty {
                    policy.append(("TSKReportUris", .array(entry.reportURIs.map { .string($0.absoluteString) })))
                }
                if let expires = entry.expires {
                    policy.append(("TSKExpirationDate", .string(DayFormat.day(of: expires).text)))
                }
            }
            domains.append((name, .dictionary(policy)))
        }
        let configuration: Markup.PlistValue = .dictionary([
            ("TSKSwizzleNetworkDelegates", .bool(false)),
            ("TSKPinnedDomains", .dictionary(domains)),
        ])
        return Markup.plistDocument(
            .dictionary([("TSKConfiguration", configuration)]),
            comment: "Generated by pinning config export (format trustkit): merge TSKConfiguration into Info.plist, or pass its value to TrustKit.initSharedInstance(withConfiguration:)."
        )
    }

    // MARK: - App Transport Security

    private func ats(_ entries: [PinningConfiguration.Entry], log: inout ProblemLog) -> String {
        var domains: [(String, Markup.PlistValue)] = []
        for entry in entries {
            let (name, subdomains) = Self.domain(entry)
            var leaves: [Pin] = []
            var authorities: [Pin] = []
            for pin in entry.pins {
                let owners = (entry.anchors + self.certificates).filter { Pin(spkiOf: $0) == pin }
                guard !owners.isEmpty else {
                    log.add(
                        entry.key,
                        "pin \(pin) belongs to no certificate given (the entry's anchors or --certificates), so it cannot be placed as a leaf or CA identity; dropped"
                    )
                    continue
                }
                let isAuthority = owners.contains { Self.isAuthority($0) }
                if isAuthority { authorities.append(pin) } else { leaves.append(pin) }
            }
            if !leaves.isEmpty && !authorities.isEmpty {
                log.add(
                    entry.key,
                    "has leaf and CA pins; ATS would require a match of each kind where we require one match of any; the leaf pins are dropped"
                )
                leaves = []
            }
            if leaves.isEmpty && authorities.isEmpty {
                log.add(entry.key, "no pin could be placed; the entry is dropped")
                continue
            }
            var policy: [(String, Markup.PlistValue)] = [("NSIncludesSubdomains", .bool(subdomains))]
            let identities: [Markup.PlistValue] = (leaves.isEmpty ? authorities : leaves).map {
                .dictionary([("SPKI-SHA256-BASE64", .string(Self.base64($0)))])
            }
            policy.append((leaves.isEmpty ? "NSPinnedCAIdentities" : "NSPinnedLeafIdentities", .array(identities)))
            domains.append((name, .dictionary(policy)))
        }
        return Markup.plistDocument(
            .dictionary([("NSAppTransportSecurity", .dictionary([("NSPinnedDomains", .dictionary(domains))]))]),
            comment: "Generated by pinning config export (format ats): merge NSAppTransportSecurity into the app's Info.plist."
        )
    }

    private static func isAuthority(_ certificate: Certificate) -> Bool {
        do {
            if case .isCertificateAuthority? = try certificate.extensions.basicConstraints { return true }
            return false
        } catch {
            // A basicConstraints extension that does not parse makes no CA (path validation refuses it as one).
            return false
        }
    }

    // MARK: - OkHttp

    private func okHttp(_ entries: [PinningConfiguration.Entry], configuration: PinningConfiguration, log: inout ProblemLog) -> String {
        // OkHttp applies the pins of every pattern matching a host; we apply the most specific entry's only.
        for entry in entries {
            for other in entries where other.key != entry.key && Self.covers(other.coverage, entry.coverage) {
                log.add(
                    entry.key,
                    "lies inside \"\(other.key)\"; OkHttp accepts the pins of both for its hosts, where we accept only this entry's"
                )
            }
        }
        var out = """
            // Generated by `pinning config export --format okhttp`. `**.` patterns need OkHttp 4 or later.
            import okhttp3.CertificatePinner

            val certificatePinner: CertificatePinner = CertificatePinner.Builder()

            """
        for entry in entries {
            let pattern: String
            switch entry.coverage {
            case .exact(let name): pattern = name
            case .anyDepth(suffix: let name): pattern = "**." + name
            case .oneLabel(let suffix): pattern = "*." + suffix
            }
            for pin in entry.pins {
                out += "    .add(\"\(pattern)\", \"\(pin.description)\")\n"
            }
        }
        out += "    .build()\n"
        return out
    }

    /// Whether every host of `inner` is also covered by `outer`.
    static func covers(_ outer: PinningConfiguration.Entry.Coverage, _ inner: PinningConfiguration.Entry.Coverage) -> Bool {
        func below(_ name: String, _ suffix: String) -> Bool { name == suffix || name.hasSuffix("." + suffix) }
        switch (outer, inner) {
        case (.anyDepth(let suffix), .exact(let name)): return below(name, suffix)
        case (.anyDepth(let suffix), .anyDepth(let name)): return below(name, suffix)
        case (.anyDepth(let suffix), .oneLabel(let name)): return below(name, suffix)
        case (.oneLabel(let suffix), .exact(let name)):
            guard name.hasSuffix("." + suffix) else { return false }
            return !name.dropLast(suffix.count + 1).contains(".")
        default: return false
        }
    }
}
