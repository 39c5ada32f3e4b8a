import ArgumentParser
import Foundation
import Pinning
import X509

/// The chain and policy flags shared by `pinning evaluate` and `pinning bench`, and how they become a
/// ``ServerTrust`` and a ``SecurityPolicy``.
struct PolicyOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The chain as the server sends it, leaf first (PEM bundle, DER or PKCS#7).", valueName: "file"))
    var chain: String

    @Option(name: .long, help: ArgumentHelp("DNS name or IP address the leaf must be valid for; without it no name is checked.", valueName: "name"))
    var host: String?

    @Option(name: .long, help: ArgumentHelp("Pinning mode: none, public-key or certificate.", valueName: "mode"))
    var mode: String?

    @Option(name: .long, help: ArgumentHelp("A pinned certificate file (any supported format; a bundle pins each certificate). Repeatable.", valueName: "file"))
    var pin: [String] = []

    @Option(name: .customLong("pin-sha256"), help: ArgumentHelp("An SPKI pin, sha256/BASE64. Repeatable.", valueName: "pin"))
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

    @Option(name: .long, help: ArgumentHelp("Certificate profile: rfc5280 (default) or webpki.", valueName: "profile"))
    var profile: String?

    static func warn(_ message: String) {
        FileHandle.standardError.write(Data("pinning: warning: \(message)\n".utf8))
    }

    struct Inputs {
        var trust: ServerTrust
        var policy: SecurityPolicy
    }

    func loadInputs() throws(InputError) -> Inputs {
        let presented = try InputLoading.certificates(self.chain, option: "--chain")
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
        var profile = ValidationProfile.rfc5280
        if let name = self.profile {
            guard let parsed = ValidationProfile(name) else {
                throw InputError("--profile: unknown profile \"\(name)\"; use rfc5280 or webpki")
            }
            profile = parsed
        }
        let mode: SecurityPolicy.PinningMode
        switch self.mode {
        case nil:
            mode = (pinnedCertificates.isEmpty && pins.isEmpty) ? .none : .publicKey
        case "none":
            mode = .none
        case "public-key", "publicKey":
            mode = .publicKey
        case "certificate":
            mode = .certificate
        case let other?:
            throw InputError("--mode: unknown mode \"\(other)\"; use none, public-key or certificate")
        }
        if let host = self.host {
            do {
                _ = try PeerName(host)
            } catch {
                throw InputError("--host: \(error.description)")
            }
        }
        if mode == .none && !(pinnedCertificates.isEmpty && pins.isEmpty) {
            Self.warn("--mode none ignores the pins given with --pin/--pin-sha256; use --mode public-key or certificate to enforce them")
        }
        for skipped in roots?.skipped ?? [] {
            Self.warn("--roots: skipped \(skipped.description)")
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
        return Inputs(trust: trust, policy: policy)
    }
}
