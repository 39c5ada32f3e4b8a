import X509

/// What the peer's certificate must be good for.
public struct TrustPurpose: Hashable, Sendable, CustomStringConvertible {
    enum Storage: Hashable, Sendable { case serverAuth, clientAuth }
    let storage: Storage

    /// Validating a TLS server (extendedKeyUsage serverAuth). The default.
    public static let serverAuthentication = TrustPurpose(storage: .serverAuth)
    /// Validating a TLS client certificate (extendedKeyUsage clientAuth), as an mTLS server does.
    public static let clientAuthentication = TrustPurpose(storage: .clientAuth)

    var usage: ExtendedKeyUsage.Usage {
        switch self.storage {
        case .serverAuth: return .serverAuth
        case .clientAuth: return .clientAuth
        }
    }

    /// The purpose and its extended key usage, e.g. `server authentication (serverAuth)`.
    public var description: String {
        switch self.storage {
        case .serverAuth: return "server authentication (serverAuth)"
        case .clientAuth: return "client authentication (clientAuth)"
        }
    }
}
