public import Pinning
public import X509

/// The peer a pinned handshake authenticated: its validated chain and the facts handlers need (an mTLS
/// server's request handlers read the client's identity here).
public struct AuthenticatedPeer: Sendable, Hashable {
    /// The chain that earned trust, leaf first: the validated path to the anchor (or, when trust was granted
    /// without validation, the chain as presented).
    public var certificateChain: [Certificate]
    /// The peer's certificate.
    public var leaf: Certificate { self.certificateChain[0] }
    /// The leaf's subject, e.g. `CN=device-42,O=Example`.
    public var subject: String { String(describing: self.leaf.subject) }
    /// The leaf's subject alternative names.
    public var subjectAlternativeNames: [CertificateInfo.SubjectAlternativeName] {
        CertificateInfo.subjectAlternativeNames(of: self.leaf)
    }
    /// SHA-256 over the leaf's DER, hex with colons (as `openssl x509 -fingerprint -sha256`).
    public var sha256Fingerprint: String { CertificateInfo.sha256Fingerprint(of: self.leaf) }
    /// The SPKI SHA-256 pin of the leaf's public key.
    public var pin: Pin { Pin(spkiOf: self.leaf) }

    // The facts are computed when a handler asks, not on every handshake: the full CertificateInfo of the leaf
    // (two digests, key facts, a self-signature check) was 3% of a pinned handshake's CPU time (perf).
    init?(chain: [Certificate]) {
        guard !chain.isEmpty else { return nil }
        self.certificateChain = chain
    }

    /// The peer of a chain that this package's verification already validated, leaf first (nil when empty): for
    /// adapters whose framework hands back the path our verification callback returned (Vapor's
    /// `Request.peerCertificateChain`). It validates nothing itself.
    public init?(validatedChain: [Certificate]) {
        self.init(chain: validatedChain)
    }
}
