public import Foundation
public import X509

/// root → intermediate → leaf, the everyday three-certificate PKI.
///
/// The root has no path length limit, the intermediate has path length 0, and the leaf carries the host and
/// IP addresses as subject alternative names. All three use the same ``TestKeyType``.
public struct TestChain: Sendable, Hashable {
    /// The self-signed root CA (the trust anchor).
    public let root: TestIdentity
    /// The intermediate CA, issued by ``root``.
    public let intermediate: TestIdentity
    /// The end-entity certificate, issued by ``intermediate``.
    public let leaf: TestIdentity

    /// As a server sends it: `[leaf, intermediate]`.
    public var presented: [Certificate] {
        [self.leaf.certificate, self.intermediate.certificate]
    }

    /// Every certificate, leaf first: `[leaf, intermediate, root]`.
    public var all: [Certificate] {
        [self.leaf.certificate, self.intermediate.certificate, self.root.certificate]
    }

    /// Mints a fresh chain.
    ///
    /// - Parameters:
    ///   - host: The leaf's common name and DNS subject alternative name.
    ///   - ipAddresses: The leaf's IP subject alternative names.
    ///   - key: The key type of all three certificates.
    ///   - leafUsage: The leaf's extended key usage.
    ///   - notValidBefore: Applies to all three certificates; defaults per ``TestPKI``.
    ///   - notValidAfter: Applies to all three certificates; defaults per ``TestPKI``.
    ///   - rootName: The root's common name.
    ///   - intermediateName: The intermediate's common name.
    public init(
        host: String = "localhost",
        ipAddresses: [String] = ["127.0.0.1", "::1"],
        key: TestKeyType = .p256,
        leafUsage: TestPKI.LeafUsage = .serverAuth,
        notValidBefore: Date? = nil,
        notValidAfter: Date? = nil,
        rootName: String = "Test Root CA",
        intermediateName: String = "Test Intermediate CA"
    ) throws {
        let root = try TestPKI.root(rootName, key: key, notValidBefore: notValidBefore, notValidAfter: notValidAfter)
        let intermediate = try TestPKI.intermediate(
            intermediateName,
            issuer: root,
            key: key,
            notValidBefore: notValidBefore,
            notValidAfter: notValidAfter
        )
        let leaf = try TestPKI.leaf(
            host,
            issuer: intermediate,
            dnsNames: [host],
            ipAddresses: ipAddresses,
            usage: leafUsage,
            key: key,
            notValidBefore: notValidBefore,
            notValidAfter: notValidAfter
        )
        self.init(root: root, intermediate: intermediate, leaf: leaf)
    }

    /// Assembles a chain from identities minted separately (no checks are made).
    public init(root: TestIdentity, intermediate: TestIdentity, leaf: TestIdentity) {
        self.root = root
        self.intermediate = intermediate
        self.leaf = leaf
    }
}
