/// Which certificate profile the path must conform to, beyond path building and the usage and name rules.
///
/// - ``rfc5280`` (the default): the rules of RFC 5280 that a verifier can check, plus what browsers enforce
///   (EKU chaining, SAN-only names). Fits private PKIs.
/// - ``webPKI``: adds the CA/Browser Forum Baseline Requirements for publicly trusted TLS certificates (the
///   profile of x509-limbo's `webpki::` cases, and of pyca/cryptography's verifier): key identifiers present and
///   well formed, the common name copied from a SAN, leaf EKU present, not critical and without
///   anyExtendedKeyUsage, no EKU on roots, non-CA leaves, RSA moduli in whole bytes.
public struct ValidationProfile: Hashable, Sendable, CustomStringConvertible {
    enum Storage: String, Hashable, Sendable { case rfc5280, webPKI }
    let storage: Storage

    /// RFC 5280 plus browser practice. The default.
    public static let rfc5280 = ValidationProfile(storage: .rfc5280)
    /// RFC 5280 plus the CA/Browser Forum Baseline Requirements, for servers on the public internet.
    public static let webPKI = ValidationProfile(storage: .webPKI)

    /// The profile's name, e.g. `rfc5280`.
    public var description: String { self.storage.rawValue }

    /// Parses `rfc5280` or `webpki` (case-insensitive).
    public init?(_ name: String) {
        switch name.lowercased() {
        case "rfc5280": self = .rfc5280
        case "webpki": self = .webPKI
        default: return nil
        }
    }

    init(storage: Storage) { self.storage = storage }
}
