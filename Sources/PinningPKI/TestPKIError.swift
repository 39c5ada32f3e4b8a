/// An error thrown while minting a test PKI or writing test files.
///
/// Equality compares only ``code``, as `CertificateError` does in swift-certificates.
public struct TestPKIError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, independent of the message.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Backing: String, Hashable, Sendable {
            case invalidIPAddress
            case invalidValidity
            case invalidPathLength
            case keyDoesNotMatchCertificate
            case unsupportedKey
            case fileSystem
            case pkcs12Export
        }

        private let backing: Backing

        private init(_ backing: Backing) {
            self.backing = backing
        }

        /// An IP address string that `inet_pton` accepts neither as IPv4 nor as IPv6.
        public static let invalidIPAddress = Code(.invalidIPAddress)
        /// `notValidAfter` is not later than `notValidBefore`.
        public static let invalidValidity = Code(.invalidValidity)
        /// A negative `maxPathLength`.
        public static let invalidPathLength = Code(.invalidPathLength)
        /// A private key whose public key is not the certificate's.
        public static let keyDoesNotMatchCertificate = Code(.keyDoesNotMatchCertificate)
        /// A key type this support module cannot sign with or serialize.
        public static let unsupportedKey = Code(.unsupportedKey)
        /// Creating, writing or removing a temporary file failed.
        public static let fileSystem = Code(.fileSystem)
        /// A PKCS#12 file could not be written (a NUL in the passphrase or name, a chain that does not start
        /// with the identity's certificate).
        public static let pkcs12Export = Code(.pkcs12Export)

        /// The code's name, e.g. `invalidIPAddress`.
        public var description: String { self.backing.rawValue }
    }

    /// What went wrong.
    public var code: Code
    /// A human-readable explanation.
    public var reason: String
    /// Where the error was thrown.
    public var file: String
    /// Where the error was thrown.
    public var line: UInt

    init(_ code: Code, _ reason: String, file: String = #fileID, line: UInt = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    /// `TestPKIError.CODE: REASON (FILE:LINE)`: the place helps a failing test; the `pinning pki` commands show
    /// only the reason.
    public var description: String {
        "TestPKIError.\(self.code): \(self.reason) (\(self.file):\(self.line))"
    }

    /// Compares only ``code``.
    public static func == (lhs: TestPKIError, rhs: TestPKIError) -> Bool {
        lhs.code == rhs.code
    }

    /// Hashes the code only, consistent with `==`.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
    }
}
