/// Which certificate profile the path must conform to, beyond path building and the usage and name rules.
///
/// - ``rfc5280`` (the default): the rules of RFC 5280 that a verifier can check, plus what browsers enforce
///   (EKU chaining, SAN-only names). Fits private PKIs.
/// - ``webPKI(publicSuffixList:)``: adds the CA/Browser Forum Baseline Requirements for publicly trusted TLS
///   certificates (the profile of x509-limbo's `webpki::` cases, and of pyca/cryptography's verifier): key
///   identifiers present and well formed, leaf EKU present, not critical and without anyExtendedKeyUsage, no
///   EKU on roots, non-CA leaves, RSA moduli in whole bytes, and no wildcard spanning a public suffix, for
///   which it needs the ``PublicSuffixList`` you pass.
public struct ValidationProfile: Hashable, Sendable, CustomStringConvertible {
    enum Storage: Hashable, Sendable {
        case rfc5280
        case webPKI(PublicSuffixList)
    }

    let storage: Storage

    /// RFC 5280 plus browser practice. The default.
    public static let rfc5280 = ValidationProfile(storage: .rfc5280)

    /// RFC 5280 plus the CA/Browser Forum Baseline Requirements, for servers on the public internet.
    ///
    /// - Parameter publicSuffixList: The list that decides which wildcards span a public suffix (CABF
    ///   3.2.2.6), loaded by the caller (``PublicSuffixList/init(contentsOfFile:)``).
    public static func webPKI(publicSuffixList: PublicSuffixList) -> ValidationProfile {
        ValidationProfile(storage: .webPKI(publicSuffixList))
    }

    /// The profile's name: `rfc5280` or `webPKI`.
    public var description: String {
        switch self.storage {
        case .rfc5280: return "rfc5280"
        case .webPKI: return "webPKI"
        }
    }

    /// The profile named `rfc5280` or `webpki` (case-insensitive).
    ///
    /// - Parameters:
    ///   - name: The profile's name.
    ///   - publicSuffixList: The list the webPKI profile needs; ignored for `rfc5280`.
    /// - Throws: ``ValidationProfileError`` with code ``ValidationProfileError/Code/unknownProfile`` for another
    ///   name, or ``ValidationProfileError/Code/publicSuffixListRequired`` for `webpki` without a list.
    package init(named name: String, publicSuffixList: PublicSuffixList?) throws(ValidationProfileError) {
        switch name.lowercased() {
        case "rfc5280":
            self = .rfc5280
        case "webpki":
            guard let publicSuffixList else {
                throw ValidationProfileError(
                    code: .publicSuffixListRequired,
                    message: "the webPKI profile needs a public suffix list (load one with PublicSuffixList(contentsOfFile:))"
                )
            }
            self = .webPKI(publicSuffixList: publicSuffixList)
        default:
            throw ValidationProfileError(code: .unknownProfile, message: "unknown profile \"\(name)\"; use rfc5280 or webpki")
        }
    }

    init(storage: Storage) { self.storage = storage }

    /// The public suffix list of the webPKI profile; nil for rfc5280.
    var publicSuffixList: PublicSuffixList? {
        if case .webPKI(let list) = self.storage { return list }
        return nil
    }
}
