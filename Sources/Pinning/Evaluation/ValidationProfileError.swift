/// A ``ValidationProfile`` or ``PublicSuffixList`` could not be made.
public struct ValidationProfileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. A struct over a private enum so kinds can be added; keep a default case.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: String, Hashable, Sendable {
            case unknownProfile
            case publicSuffixListRequired
            case unreadablePublicSuffixList
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// The name is neither `rfc5280` nor `webpki`.
        package static let unknownProfile = Code(.unknownProfile)
        /// The webPKI profile was asked for without a ``PublicSuffixList``.
        package static let publicSuffixListRequired = Code(.publicSuffixListRequired)
        /// The public suffix list cannot be read, or is too large.
        public static let unreadablePublicSuffixList = Code(.unreadablePublicSuffixList)

        /// The code's name, e.g. `publicSuffixListRequired`.
        public var description: String { self.kind.rawValue }
    }

    /// What went wrong.
    public let code: Code
    /// One sentence saying what and where.
    public let message: String

    init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// The ``message``.
    public var description: String { self.message }
}
