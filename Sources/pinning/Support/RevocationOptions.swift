import ArgumentParser
import Foundation
import Pinning
import PinningNIO

/// `--revocation`: what an unknown revocation status does.
enum RevocationModeArgument: String, EnumeratedArgument {
    case hard
    case soft

    static let valueKind = "revocation mode"

    var mode: RevocationPolicy.Mode {
        switch self {
        case .hard: return .hard
        case .soft: return .soft
        }
    }
}

/// `--revocation-scope`: which certificates of the path are checked.
enum RevocationScopeArgument: String, EnumeratedArgument {
    case leaf
    case chain

    static let valueKind = "revocation scope"

    var scope: RevocationPolicy.Scope {
        switch self {
        case .leaf: return .leaf
        case .chain: return .chain
        }
    }
}

/// The revocation flags of `evaluate`, `check` and `serve` (issue 14): CRL files or directories, the mode and
/// the scope. Without `--crl` nothing is checked (as curl and openssl without `-crl_check`).
struct RevocationOptions: ParsableArguments {
    @Option(
        name: .customLong("crl"),
        help: ArgumentHelp(
            "A CRL file (PEM or DER) or a directory of them (files named *.crl or *.crl.pem). Repeatable. Turns on revocation checking.",
            valueName: "file|dir"
        )
    )
    var crl: [String] = []

    @Option(
        name: .customLong("revocation"),
        help: ArgumentHelp(
            "With --crl: \(RevocationModeArgument.choices). hard (default) refuses a certificate whose status no usable CRL gives; soft accepts it with a warning.",
            valueName: "mode"
        ),
        transform: RevocationModeArgument.parser(option: "--revocation")
    )
    var mode: RevocationModeArgument?

    @Option(
        name: .customLong("revocation-scope"),
        help: ArgumentHelp(
            "With --crl: \(RevocationScopeArgument.choices). leaf (default) checks the leaf, chain every certificate but the trust anchor.",
            valueName: "scope"
        ),
        transform: RevocationScopeArgument.parser(option: "--revocation-scope")
    )
    var scope: RevocationScopeArgument?

    /// The options as plain values (what `evaluate` runs and ``HotEvaluate`` fills without this type).
    var values: RevocationValues {
        RevocationValues(crl: self.crl, mode: self.mode, scope: self.scope)
    }

    /// What argument-parser runs after its parse; the hand-written reader runs ``RevocationValues/validate()`` too.
    func validate() throws {
        try self.values.validate()
    }

    /// The policy the flags describe, or nil without `--crl`; see ``RevocationValues/policy(fetching:)``.
    func policy(fetching: Bool = false) throws(InputError) -> RevocationPolicy? {
        try self.values.policy(fetching: fetching)
    }
}

/// ``RevocationOptions`` as plain values, after each option's `transform`: the defaults are the declarations' own.
struct RevocationValues {
    var crl: [String] = []
    var mode: RevocationModeArgument?
    var scope: RevocationScopeArgument?

    /// Checks of these options alone, run after every parse: none today (`--revocation` without `--crl` is refused
    /// by ``policy(fetching:)``, as `check --fetch-crls` needs no `--crl`). Kept so a check added here runs on both
    /// readings of `evaluate`.
    func validate() throws {}

    /// The policy the flags describe, or nil without `--crl`.
    ///
    /// A file that is not a CRL at all is bad input naming the file (exit 2). A CRL that reads but cannot be
    /// used (no CRL number, delta, stale, wrongly signed) is not bad input: it is loaded, and the certificates it
    /// was meant for get the status "unknown" with the reason.
    ///
    /// - Parameter fetching: `check --fetch-crls`: CRLs will come from the distribution points, so a policy is
    ///   made (mode and scope from the flags) even without `--crl`.
    func policy(fetching: Bool = false) throws(InputError) -> RevocationPolicy? {
        guard !self.crl.isEmpty else {
            if fetching {
                return RevocationPolicy(crls: [], mode: self.mode?.mode ?? .hard, scope: self.scope?.scope ?? .leaf, fetch: true)
            }
            if self.mode != nil || self.scope != nil {
                let flag = self.mode != nil ? "--revocation" : "--revocation-scope"
                throw InputError("\(flag) needs --crl (or, for check, --fetch-crls): without a CRL there is no revocation check to configure")
            }
            return nil
        }
        let lists: [CertificateRevocationList]
        do {
            lists = try CRLFiles.load(self.crl)
        } catch {
            throw InputError("--crl \(error.description)")
        }
        return RevocationPolicy(crls: lists, mode: self.mode?.mode ?? .hard, scope: self.scope?.scope ?? .leaf, fetch: fetching)
    }
}
