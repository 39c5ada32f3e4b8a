/// A pinning setup that the AsyncHTTPClient integration refuses to build because AsyncHTTPClient cannot
/// enforce it (see ``AsyncHTTPClientPinning``), or a TLS configuration NIOSSL cannot build.
///
/// Refusing at configuration time is deliberate: a policy that would be silently weakened (an intermediate
/// pin that is never checked, `allowInvalidCertificates` that would need `certificateVerification = .none`)
/// must not start.
public struct AsyncHTTPClientPinningError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong. A struct over a private enum so kinds can be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: String, Hashable, Sendable {
            case unenforceablePin
            case unenforceablePolicy
            case noAnchors
            case invalidTLSConfiguration
            case fixedValidationTime
            case unsupportedIdentity
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// A pinned certificate is a CA (intermediate or root): only the leaf is reachable after an
        /// AsyncHTTPClient handshake, so the pin could never be checked.
        public static let unenforceablePin = Code(.unenforceablePin)
        /// The policy needs something AsyncHTTPClient cannot do (``/Pinning/SecurityPolicy/allowInvalidCertificates``).
        public static let unenforceablePolicy = Code(.unenforceablePolicy)
        /// Anchors-only trust with no anchor: nothing could ever be trusted.
        public static let noAnchors = Code(.noAnchors)
        /// NIOSSL cannot use a certificate or key of the configuration.
        public static let invalidTLSConfiguration = Code(.invalidTLSConfiguration)
        /// A deprecated `trust:` template fixed the validation time, which would freeze the client's clock.
        public static let fixedValidationTime = Code(.fixedValidationTime)
        /// A client identity AsyncHTTPClient cannot carry: an Ed25519 key (AsyncHTTPClient keys its TLS contexts by
        /// NIOSSL's hash of the configuration, which cannot encode an Ed25519 key and stops the process).
        public static let unsupportedIdentity = Code(.unsupportedIdentity)

        /// The code's name.
        public var description: String { self.kind.rawValue }
    }

    /// The kind of problem.
    public var code: Code
    /// What is wrong, in one sentence.
    public var message: String

    /// Creates an error.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// `"CODE: message"`.
    public var description: String { "\(self.code): \(self.message)" }
}
