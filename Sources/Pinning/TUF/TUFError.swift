/// Why a TUF client refused metadata or a target: which role, which rule, and the versions or key ids involved,
/// in one line of words (``description``).
public struct TUFError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The broken rule's name, e.g. `rollback`: the error's stable code (for logs, metrics and JSON).
    public var code: String { self.rule.rawValue }

    /// The rule that was broken.
    public enum Rule: String, Sendable, Equatable {
        /// Not JSON, or a field missing or of the wrong kind.
        case malformed
        /// The metadata's `_type` is not the role it was loaded as.
        case wrongType
        /// A `spec_version` whose major version is not 1.
        case unsupportedSpecVersion
        /// Fewer valid signatures from the role's keys than its threshold.
        case threshold
        /// Two signatures under one key id (the specification requires key ids to be unique there).
        case duplicateSignature
        /// A version other than the one the URL, the timestamp or the snapshot named.
        case versionMismatch
        /// A version older than the trusted one (a rollback attack).
        case rollback
        /// Expired at the update's start time (a freeze attack).
        case expired
        /// A length other than the one the trusted metadata names.
        case lengthMismatch
        /// A hash other than the one the trusted metadata names.
        case hashMismatch
        /// A hash algorithm this client cannot compute: what it names cannot be checked, so it is refused.
        case unsupportedHashAlgorithm
        /// Larger than the cap for the file (endless data).
        case tooLarge
        /// A role the snapshot does not list (mix-and-match).
        case notInSnapshot
        /// The new snapshot drops a file the trusted one listed.
        case removedFromSnapshot
        /// A delegation that cannot be followed (too many roles visited, a form this client does not implement).
        case delegation
        /// The target is not listed by any role the search reached.
        case targetNotFound
        /// Metadata or a target could not be fetched or stored, or a step needs metadata not yet trusted.
        case unavailable
        /// A step of the client workflow was asked for out of its order (root, timestamp, snapshot, targets).
        case outOfOrder
    }

    /// The role (`root`, `timestamp`, `snapshot`, `targets`, a delegated role's name) or, for a target, its path.
    package var role: String
    public var rule: Rule
    /// What happened, after the role: "version 1 is older than the trusted version 2".
    public var message: String
    /// The version expected (trusted, or named by the URL, timestamp or snapshot), when versions are involved.
    package var expectedVersion: Int?
    /// The version found.
    package var foundVersion: Int?
    /// The key ids involved (for a threshold refusal: the role's key ids without a valid signature).
    package var keyIDs: [String]

    package init(role: String, rule: Rule, _ message: String, expectedVersion: Int? = nil, foundVersion: Int? = nil, keyIDs: [String] = []) {
        self.role = role
        self.rule = rule
        self.message = message
        self.expectedVersion = expectedVersion
        self.foundVersion = foundVersion
        self.keyIDs = keyIDs
    }

    /// `ROLE: MESSAGE`, one line (control characters in a role name taken from a file are shown escaped).
    public var description: String {
        "\(Self.printable(self.role)): \(self.message)"
    }

    /// Text from a repository's metadata (a role name, a target path), safe to print on one line: ``VisibleText``'s
    /// rules, at most 200 characters of it; the TUF client's and the pin-set follower's messages and log lines show
    /// such text the same way.
    package static func printable(_ text: String) -> String {
        VisibleText.escaped(text, limit: 200)
    }

    /// Text from a repository's metadata inside a message's quotes: ``VisibleText/quoted(_:limit:)``, at most 200
    /// characters of it, so that the text's own `"` cannot close the quote.
    static func quoted(_ text: String) -> String {
        VisibleText.quoted(text, limit: 200)
    }

    /// A key id shortened for messages (the full ids are in ``keyIDs``).
    static func short(_ keyID: String) -> String {
        // A key id is the sender's text as much as a role name is (signatures[].keyid, the keys' members): cut,
        // then escaped, like any other.
        VisibleText.escaped(keyID, limit: 12)
    }
}
