// TEMPORARY minimal stand-in; replaced by the loading branch's TrustRoots on merge.
public import X509
public struct TrustRoots: Sendable, Hashable {
    public var certificates: [Certificate]
    public var sources: [String] = []
    public init(_ certificates: [Certificate]) { self.certificates = certificates }
    public static var platform: TrustRoots { TrustRoots([]) }
}
