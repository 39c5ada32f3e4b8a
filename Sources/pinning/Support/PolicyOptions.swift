import ArgumentParser
import Foundation
import Pinning
import X509

/// The trust-policy flags shared by `pinning evaluate` and `pinning check`: a ``SecurityPolicy`` built from
/// flags, or (`--config`) a host pinning configuration that decides instead.
struct PolicyOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp("Pinning mode: \(PinningModeArgument.choices).", valueName: "mode"),
        transform: PinningModeArgument.parser(option: "--mode")
    )
    var mode: PinningModeArgument?

    @Option(name: .long, help: ArgumentHelp("A pinned certificate file (any supported format; a bundle pins each certificate). Repeatable.", valueName: "file"))
    var pin: [String] = []

    @Option(name: .customLong("pin-sha256"), help: ArgumentHelp("An SPKI pin, sha256/BASE64 (or curl's sha256//BASE64, or its \"sha256//A;sha256//B\" list). Repeatable.", valueName: "pin"))
    var pinSHA256: [String] = []

    @Option(name: .long, help: ArgumentHelp("A custom trust anchor file, added to the platform roots. Repeatable.", valueName: "file"))
    var anchor: [String] = []

    @Flag(name: .customLong("anchors-only"), help: "Trust only the --anchor certificates, not the platform roots.")
    var anchorsOnly = false

    @Option(name: .long, help: ArgumentHelp("A PEM bundle or directory that replaces the platform root store.", valueName: "file"))
    var roots: String?

    @Flag(name: .customLong("allow-invalid-certificates"), help: "Accept chains that do not validate (AFSecurityPolicy's allowInvalidCertificates). Unsafe.")
    var allowInvalidCertificates = false

    @Flag(name: .customLong("no-validate-domain-name"), help: "Do not check the host name (validatesDomainName = NO). Unsafe.")
    var noValidateDomainName = false

    @Option(name: .long, help: ArgumentHelp("The validation instant, RFC 3339 (default: now).", valueName: "RFC3339"))
    var at: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Certificate profile: \(ProfileArgument.choices) (default rfc5280).", valueName: "profile"),
        transform: ProfileArgument.parser(option: "--profile")
    )
    var profile: ProfileArgument?

    @Option(name: .long, help: ArgumentHelp("A host pinning configuration (JSON) that decides instead of the flags.", valueName: "file"))
    var config: String?

    /// The options as plain values (what `evaluate` runs and ``HotEvaluate`` fills without this type).
    var values: PolicyValues {
        PolicyValues(
            mode: self.mode,
            pin: self.pin,
            pinSHA256: self.pinSHA256,
            anchor: self.anchor,
            anchorsOnly: self.anchorsOnly,
            roots: self.roots,
            allowInvalidCertificates: self.allowInvalidCertificates,
            noValidateDomainName: self.noValidateDomainName,
            at: self.at,
            profile: self.profile,
            config: self.config
        )
    }

    /// What argument-parser runs after its parse; the hand-written reader runs ``PolicyValues/validate()`` too.
    func validate() throws {
        try self.values.validate()
    }

    /// The flags that `--config` replaces and so cannot be combined with it.
    var flagsConflictingWithConfiguration: [String] { self.values.flagsConflictingWithConfiguration }

    /// Refuses flags that `--config` replaces.
    func checkNoConflictWithConfiguration() throws(InputError) {
        try self.values.checkNoConflictWithConfiguration()
    }

    /// Loads `--config`.
    func loadConfiguration(_ path: String) throws(InputError) -> PinningConfiguration {
        try self.values.loadConfiguration(path)
    }

    func loadProfile() throws(InputError) -> ValidationProfile {
        try self.values.loadProfile()
    }

    /// The policy the flags describe and the trust template; see ``PolicyValues/makePolicy(presented:host:)``.
    func makePolicy(presented: [Certificate], host: String?) throws(InputError) -> (policy: SecurityPolicy, trust: ServerTrust) {
        try self.values.makePolicy(presented: presented, host: host)
    }
}

/// ``PolicyOptions`` as plain values, after each option's `transform`: the defaults are the declarations' own.
struct PolicyValues {
    var mode: PinningModeArgument?
    var pin: [String] = []
    var pinSHA256: [String] = []
    var anchor: [String] = []
    var anchorsOnly = false
    var roots: String?
    var allowInvalidCertificates = false
    var noValidateDomainName = false
    var at: String?
    var profile: ProfileArgument?
    var config: String?

    /// Checks of these options alone, run after every parse: none today (their combinations with other options are
    /// the commands' own `validate()`s). Kept so a check added here runs on both readings of `evaluate`.
    func validate() throws {}

    /// The flags that `--config` replaces and so cannot be combined with it.
    var flagsConflictingWithConfiguration: [String] {
        let conflicting: [(Bool, String)] = [
            (self.mode != nil, "--mode"),
            (!self.pin.isEmpty, "--pin"),
            (!self.pinSHA256.isEmpty, "--pin-sha256"),
            (!self.anchor.isEmpty, "--anchor"),
            (self.anchorsOnly, "--anchors-only"),
            (self.allowInvalidCertificates, "--allow-invalid-certificates"),
            (self.noValidateDomainName, "--no-validate-domain-name"),
        ]
        return conflicting.filter(\.0).map(\.1)
    }

    /// Refuses flags that `--config` replaces.
    func checkNoConflictWithConfiguration() throws(InputError) {
        let used = self.flagsConflictingWithConfiguration
        guard used.isEmpty else {
            throw InputError(
                "\(used.joined(separator: ", ")) cannot be combined with --config: the configuration decides pins, anchors and validation"
            )
        }
    }

    /// Loads `--config`.
    func loadConfiguration(_ path: String) throws(InputError) -> PinningConfiguration {
        do {
            return try PinningConfiguration(contentsOfFile: path)
        } catch {
            throw InputError(error.description)
        }
    }

    func loadProfile() throws(InputError) -> ValidationProfile {
        switch self.profile ?? .rfc5280 {
        case .rfc5280:
            return .rfc5280
        case .webpki:
            // The core reads no file it is not handed: the CLI loads the system's public suffix list for webpki.
            // Without one only single-label suffixes count (as browsers do without a list), and we say so once on
            // stderr rather than quietly judging wildcards by a weaker rule.
            do {
                return .webPKI(publicSuffixList: try PublicSuffixList(contentsOfFile: PublicSuffixList.systemPath))
            } catch {
                let warning =
                    "pinning: warning: --profile webpki: \(error.message); only single-label suffixes count as public "
                    + "(the publicsuffix package installs the list)\n"
                FileHandle.standardError.write(Data(warning.utf8))
                return .webPKI(publicSuffixList: .empty)
            }
        }
    }

    /// The policy the flags describe and the trust template (anchors, roots, time, profile) with `presented`
    /// as its certificates. `host` is checked to be a valid name when given.
    func makePolicy(presented: [Certificate], host: String?) throws(InputError) -> (policy: SecurityPolicy, trust: ServerTrust) {
        var pinnedCertificates: [Certificate] = []
        for path in self.pin {
            pinnedCertificates += try InputLoading.certificates(path, option: "--pin")
        }
        let pins = try InputLoading.pins(self.pinSHA256)
        var anchors: [Certificate] = []
        for path in self.anchor {
            anchors += try InputLoading.certificates(path, option: "--anchor")
        }
        let roots = try InputLoading.roots(self.roots)
        let time = try InputLoading.instant(self.at)
        let profile = try self.loadProfile()
        // Without --mode: public-key when pins are given, else none.
        let mode = self.mode?.mode ?? ((pinnedCertificates.isEmpty && pins.isEmpty) ? .none : .publicKey)
        if let host {
            do {
                _ = try PeerName(host)
            } catch {
                throw InputError("--host: \(error.description)")
            }
        }
        if mode == .none && !(pinnedCertificates.isEmpty && pins.isEmpty) {
            PinningCommand.Evaluate.warn("--mode none ignores the pins given with --pin/--pin-sha256; use --mode public-key or certificate to enforce them")
        }
        for skipped in roots?.skipped ?? [] {
            PinningCommand.Evaluate.warn("--roots: skipped \(skipped.description)")
        }
        var policy = SecurityPolicy(pinningMode: mode, pinnedCertificates: pinnedCertificates, pins: pins)
        policy.allowInvalidCertificates = self.allowInvalidCertificates
        policy.validatesDomainName = !self.noValidateDomainName
        let trust = ServerTrust(
            certificates: presented,
            anchors: anchors,
            anchorsOnly: self.anchorsOnly,
            platformRoots: roots,
            validationTime: time ?? Date(),
            profile: profile
        )
        return (policy, trust)
    }
}
