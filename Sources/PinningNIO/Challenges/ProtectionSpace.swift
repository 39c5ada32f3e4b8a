/// Where a challenge comes from (`NSURLProtectionSpace` for TLS): a host, a port and what is asked.
public struct ProtectionSpace: Sendable, Hashable, CustomStringConvertible {
    /// What the challenge asks for (`NSURLAuthenticationMethodServerTrust` /
    /// `NSURLAuthenticationMethodClientCertificate`).
    public struct AuthenticationMethod: Sendable, Hashable, CustomStringConvertible {
        private enum Kind: String, Sendable, Hashable {
            case serverTrust
            case clientCertificate
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// Should the server's chain be trusted? Asked in the handshake's verification callback.
        public static let serverTrust = AuthenticationMethod(.serverTrust)
        /// Which client identity to present? Asked when the connection's TLS configuration is built, before the
        /// handshake: NIOSSL fixes the client certificate with the configuration, so this is asked for every
        /// connection, whether or not the server will end up requesting a certificate.
        public static let clientCertificate = AuthenticationMethod(.clientCertificate)

        /// The method's name.
        public var description: String { self.kind.rawValue }
    }

    /// The server's host name (lower-cased) or IP address.
    public var host: String
    /// The server's port.
    public var port: Int
    /// What is asked.
    public var authenticationMethod: AuthenticationMethod

    /// A protection space; `host` is lower-cased.
    public init(host: String, port: Int, authenticationMethod: AuthenticationMethod) {
        self.host = host.lowercased()
        self.port = port
        self.authenticationMethod = authenticationMethod
    }

    /// `serverTrust api.example.com:443`.
    public var description: String { "\(self.authenticationMethod) \(self.host):\(self.port)" }
}
