import ArgumentParser

/// `pinning evaluate …` read by hand, without argument-parser (issue 31, the cold path: a script evaluates one chain
/// per process).
///
/// argument-parser reads a command line through reflection: it instantiates its generic option types, walks each
/// command's properties with `Mirror` and casts their values to its protocols, and in a binary this size each first
/// use of a generic type or cast scans the binary's protocol conformance records. perf put that at ~30% of a
/// one-chain `pinning evaluate`, even parsing `Evaluate`'s options alone (the previous `HotEvaluate`, a root of
/// those options).
///
/// This reader takes exactly the command lines argument-parser takes as an evaluation, and only says yes: every
/// command line it is not sure of (anything it does not know, a value that does not convert, a combination
/// `validate()` refuses, help, `--version`, completion requests) is declined, and the whole command tree reads it
/// again, so every refusal's words and exit status, and every built-in flag, stay argument-parser's own. What it
/// takes, as argument-parser does:
/// - `--name value` and `--name=value` (split at the first `=`; the value may begin with a dash); in `--name value`
///   the value is the next word unless that begins with `-` (declined: argument-parser reads such a word as an
///   option and refuses the missing value, or, for `-` alone or after the numeric `--port`, which is declared
///   `parsing: .unconditional`, takes it; either way, the tree decides);
/// - `--name=` with nothing after the `=` as `--name` alone (argument-parser's `ParsedArgument` reads it so: the
///   option then takes the next word, and a flag is set);
/// - flags as `--name` only (`--json=yes` is declined: argument-parser refuses it);
/// - a repeated single-value option: the last value counts, each one converted as given; a repeated list option
///   (`--pin`, `--pin-sha256`, `--anchor`, `--crl`) collects its values in order; a repeated flag stays set;
/// - `--` ends the options; `evaluate` has no positional arguments, so it is taken only as the last word.
///
/// The values are converted by the same `transform` functions the `@Option` declarations name, into the plain
/// ``EvaluationRequest`` that argument-parser's `Evaluate` also makes (`Evaluate.request`), and checked by the same
/// `validate()` methods argument-parser runs after its parse (the declarations' own forward to the plain values').
/// `HotEvaluateCLITests` holds the reader against argument-parser for hand-written and generated command lines:
/// each is either declined, or read field by field exactly as argument-parser reads it.
enum HotEvaluate {
    /// The evaluation `arguments` (after the executable's name) ask for, or nil when this reader does not take
    /// them (then the whole tree decides, and refuses in its own words where it refuses).
    static func parse(_ arguments: [String]) -> EvaluationRequest? {
        guard arguments.first == Self.commandName else {
            return nil
        }
        var reading = Reading()
        var index = arguments.index(after: arguments.startIndex)
        while index < arguments.endIndex {
            let word = arguments[index]
            index += 1
            if word == "--" {
                // Everything after `--` is a positional argument, and `evaluate` takes none.
                guard index == arguments.endIndex else { return nil }
                break
            }
            guard word.hasPrefix("--") else { return nil }
            let name: Substring
            let attached: String?
            if let equals = word.firstIndex(of: "=") {
                name = word[word.index(word.startIndex, offsetBy: 2)..<equals]
                let after = word[word.index(after: equals)...]
                // `--name=` is `--name`, as argument-parser reads it.
                attached = after.isEmpty ? nil : String(after)
            } else {
                name = word.dropFirst(2)
                attached = nil
            }
            guard let option = Name(rawValue: String(name)) else { return nil }
            if option.isFlag {
                guard attached == nil else { return nil }
                reading.set(option)
                continue
            }
            let value: String
            if let attached {
                value = attached
            } else {
                guard index < arguments.endIndex, !arguments[index].hasPrefix("-") else { return nil }
                value = arguments[index]
                index += 1
            }
            do {
                try reading.take(option, value)
            } catch {
                return nil
            }
        }
        return reading.request()
    }

    /// `evaluate`, as `Evaluate.configuration` names it (a test holds the two equal; reading the configuration
    /// here would build it, help text included, on every run).
    static let commandName = "evaluate"

    /// Every long option `evaluate` declares, as typed after `--` (`HotEvaluateCLITests` compares this list with
    /// the options argument-parser's help for `evaluate` lists).
    enum Name: String, CaseIterable {
        // Evaluate's own.
        case chain, host, json, port
        case sendReports = "send-reports"
        // PolicyOptions.
        case mode, pin, anchor, roots, at, profile, config
        case pinSHA256 = "pin-sha256"
        case anchorsOnly = "anchors-only"
        case allowInvalidCertificates = "allow-invalid-certificates"
        case noValidateDomainName = "no-validate-domain-name"
        // RevocationOptions.
        case crl, revocation
        case revocationScope = "revocation-scope"

        /// A flag takes no value.
        var isFlag: Bool {
            switch self {
            case .json, .sendReports, .anchorsOnly, .allowInvalidCertificates, .noValidateDomainName:
                return true
            case .chain, .host, .port, .mode, .pin, .anchor, .roots, .at, .profile, .config, .pinSHA256, .crl,
                .revocation, .revocationScope:
                return false
            }
        }
    }

    /// The values read so far; unset options keep the defaults `Evaluate`'s declarations give.
    struct Reading {
        var chain: String?
        var host: String?
        var json = false
        var port = 443
        var sendReports = false
        /// PolicyOptions' and RevocationOptions' values, read straight into the plain types `evaluate` runs.
        var policy = PolicyValues()
        var revocation = RevocationValues()

        mutating func set(_ flag: Name) {
            switch flag {
            case .json: self.json = true
            case .sendReports: self.sendReports = true
            case .anchorsOnly: self.policy.anchorsOnly = true
            case .allowInvalidCertificates: self.policy.allowInvalidCertificates = true
            case .noValidateDomainName: self.policy.noValidateDomainName = true
            case .chain, .host, .port, .mode, .pin, .anchor, .roots, .at, .profile, .config, .pinSHA256, .crl,
                .revocation, .revocationScope:
                preconditionFailure("--\(flag.rawValue) takes a value")
            }
        }

        /// Records `value` for `option`, converted by the `transform` its declaration names; throws what that throws.
        mutating func take(_ option: Name, _ value: String) throws {
            switch option {
            case .chain: self.chain = value
            case .host: self.host = value
            case .port: self.port = try NumericOption.port(allowingZero: false)(value)
            case .mode: self.policy.mode = try PinningModeArgument.parser(option: "--mode")(value)
            case .pin: self.policy.pin.append(value)
            case .pinSHA256: self.policy.pinSHA256.append(value)
            case .anchor: self.policy.anchor.append(value)
            case .roots: self.policy.roots = value
            case .at: self.policy.at = value
            case .profile: self.policy.profile = try ProfileArgument.parser(option: "--profile")(value)
            case .config: self.policy.config = value
            case .crl: self.revocation.crl.append(value)
            case .revocation: self.revocation.mode = try RevocationModeArgument.parser(option: "--revocation")(value)
            case .revocationScope:
                self.revocation.scope = try RevocationScopeArgument.parser(option: "--revocation-scope")(value)
            case .json, .sendReports, .anchorsOnly, .allowInvalidCertificates, .noValidateDomainName:
                preconditionFailure("--\(option.rawValue) is a flag")
            }
        }

        /// The evaluation these values ask for, every value set (as argument-parser sets every one, defaults
        /// included), or nil when `--chain` is missing or a `validate()` refuses the combination. Plain values: no
        /// `Evaluate`, `PolicyOptions` or `RevocationOptions` is constructed (their `@Option` initialisers build
        /// argument-parser's definitions, help texts included).
        func request() -> EvaluationRequest? {
            guard let chain = self.chain else { return nil }
            let request = EvaluationRequest(
                chain: chain,
                host: self.host,
                policy: self.policy,
                revocation: self.revocation,
                json: self.json,
                port: self.port,
                sendReports: self.sendReports
            )
            // argument-parser validates the option groups, then the command.
            do {
                try self.policy.validate()
                try self.revocation.validate()
                try request.validate()
            } catch {
                return nil
            }
            return request
        }
    }
}
