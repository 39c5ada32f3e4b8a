public import X509

/// A hostile chain for tests and benchmarks: many CA certificates with one subject name, cross-signed by each
/// other's keys, which makes an unbounded path builder try every ordering of the keys (issue 27).
public struct SameSubjectMesh: Sendable {
    /// The mesh's keys, each as a self-signed CA named like every other (`anchor` is one of them when anchored).
    public let keys: [TestIdentity]
    /// The leaf, issued under the mesh's name by the first key.
    public let leaf: TestIdentity
    /// The cross-signed CA certificates presented after the leaf: each names the mesh as subject and issuer, and
    /// carries one key signed by another.
    public let crossSigned: [Certificate]
    /// What a peer presents: the leaf, then ``crossSigned``.
    public var presented: [Certificate] { [self.leaf.certificate] + self.crossSigned }

    /// Builds a mesh.
    ///
    /// - Parameters:
    ///   - count: How many keys share the name (8, 16, 64 …).
    ///   - presenting: How many cross-signed certificates to present; nil presents all `keys × (keys − 1)` of
    ///     them. A smaller number takes a fixed pseudo-random sample (the same for the same arguments).
    ///   - commonName: The name every CA certificate carries.
    ///   - leafName: The leaf's DNS name.
    ///   - key: The key type of every key.
    public init(keys count: Int, presenting: Int? = nil, commonName: String = "Mesh CA", leafName: String = "mesh.example", key: TestKeyType = .p256) throws {
        precondition(count >= 2, "a mesh needs at least two keys")
        // Unlimited path length: every ordering of the keys is a candidate path as far as constraints go.
        let keys = try (0..<count).map { _ in try TestPKI.root(commonName, key: key, maxPathLength: nil) }
        var pairs: [(subject: Int, issuer: Int)] = []
        for subject in 0..<count {
            for issuer in 0..<count where issuer != subject { pairs.append((subject, issuer)) }
        }
        if let presenting, presenting < pairs.count {
            // A fixed sample: a Fisher-Yates shuffle driven by a small linear congruential generator.
            var state: UInt64 = 0x9E37_79B9_7F4A_7C15 &+ UInt64(count) &* 31 &+ UInt64(presenting)
            for index in stride(from: pairs.count - 1, to: 0, by: -1) {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                pairs.swapAt(index, Int((state >> 33) % UInt64(index + 1)))
            }
            pairs = Array(pairs.prefix(max(0, presenting)))
        }
        self.keys = keys
        self.crossSigned = try pairs.map { pair in
            try TestPKI.crossSign(keys[pair.subject], by: keys[pair.issuer]).certificate
        }
        self.leaf = try TestPKI.leaf(leafName, issuer: keys[0], dnsNames: [leafName])
    }
}
