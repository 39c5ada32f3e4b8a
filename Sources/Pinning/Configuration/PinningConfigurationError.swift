/// A pinning configuration that was refused, with every problem found in it.
///
/// A configuration is applied whole or not at all: when any problem is found, loading throws this error and
/// nothing of the configuration takes effect. Each ``Problem`` names the entry (the `domains` key, or nil for
/// the top level) and the field at fault.
///
/// ```
/// invalid pinning configuration config.json: 2 problems
///   domains["api.example.com"].enforcePinning: unknown field (known fields: anchors, anchorsOnly, …)
///   domains["*.com"]: too broad: a wildcard or includeSubdomains needs a suffix of at least two labels …
/// ```
public struct PinningConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The first problem's kind, e.g. `unknownField`: the error's stable code (for logs, metrics and JSON; each
    /// problem has its own ``Problem/kind``).
    public var code: String { self.problems.first.map { $0.kind.description } ?? "invalidConfiguration" }

    /// One thing wrong with a configuration.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// What kind of problem. New kinds may be added.
        public struct Kind: Hashable, Sendable, CustomStringConvertible {
            enum Storage: String, Hashable, Sendable {
                case unreadableFile
                case fileTooLarge
                case invalidJSON
                case unknownField
                case missingField
                case wrongType
                case invalidValue
                case invalidPattern
                case anchorFile
                case crlFile
            }
            let storage: Storage

            /// The file cannot be read.
            public static let unreadableFile = Kind(storage: .unreadableFile)
            /// The file is larger than its cap (``PinningConfiguration/maximumFileSize``, or ``PinningConfiguration/maximumPinSetSize`` for a pin set).
            public static let fileTooLarge = Kind(storage: .fileTooLarge)
            /// The text is not JSON.
            public static let invalidJSON = Kind(storage: .invalidJSON)
            /// A field the format does not define (a typo such as `enforcePinning` must never be ignored).
            public static let unknownField = Kind(storage: .unknownField)
            /// A required field is absent.
            public static let missingField = Kind(storage: .missingField)
            /// A field has the wrong JSON type.
            public static let wrongType = Kind(storage: .wrongType)
            /// A field's value is not acceptable (bad pin, bad date, too few pins, unknown `unlistedHosts`…).
            public static let invalidValue = Kind(storage: .invalidValue)
            /// A `domains` key is malformed or too broad.
            public static let invalidPattern = Kind(storage: .invalidPattern)
            /// An anchor file is missing or holds no usable certificate.
            public static let anchorFile = Kind(storage: .anchorFile)
            /// A file in `revocation.crls` is missing or is not a CRL.
            public static let crlFile = Kind(storage: .crlFile)

            /// The kind's name, e.g. `invalidPattern`.
            public var description: String { self.storage.rawValue }
        }

        /// The kind of problem.
        public var kind: Kind
        /// The `domains` key of the entry at fault, or nil for the top level.
        package var entry: String?
        /// The field at fault (`pins`, `pins[1]`, `expires`…), or nil when the problem is the entry's key or
        /// the whole file.
        package var field: String?
        /// What is wrong, in one sentence.
        public var message: String

        /// A problem at `entry`/`field`. Only the configuration loader makes them.
        init(_ kind: Kind, entry: String?, field: String?, _ message: String) {
            self.kind = kind
            self.entry = entry
            self.field = field
            self.message = message
        }

        /// Where the problem is, as a JSON-path-like location: `domains["api.example.com"].pins[1]`, `version`,
        /// or `(file)`.
        package var location: String {
            var location = ""
            if let entry { location = "domains[\"\(entry)\"]" }
            if let field { location += location.isEmpty ? field : ".\(field)" }
            return location.isEmpty ? "(file)" : location
        }

        /// `LOCATION: MESSAGE`.
        public var description: String { "\(self.location): \(self.message)" }
    }

    /// The file (or `<data>`) the configuration came from.
    public var origin: String
    /// Every problem found, in the order found (top-level fields, then entries sorted by key).
    public var problems: [Problem]

    /// An error listing `problems` in `origin`. Only the configuration loader makes one.
    init(origin: String, problems: [Problem]) {
        self.origin = origin
        self.problems = problems
    }

    /// The first line names the origin and the number of problems; each problem follows on its own line.
    public var description: String {
        let count = self.problems.count == 1 ? "1 problem" : "\(self.problems.count) problems"
        return (["invalid pinning configuration \(self.origin): \(count)"] + self.problems.map { "  \($0)" })
            .joined(separator: "\n")
    }
}
