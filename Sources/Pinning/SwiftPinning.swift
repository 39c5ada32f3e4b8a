/// swift-pinning itself: its version, the one place it is written.
///
/// `pinning --version` prints ``version``, and every ``PinFailureReport`` a ``PinningConfiguration`` builds
/// carries `swift-pinning VERSION` as its `library-version`, so a collector can tell which release saw a failure
/// (TrustKit's reports carry `trustkit-version` for the same purpose).
public enum SwiftPinning {
    /// The release, `MAJOR.MINOR.PATCH`. swift-pinning has no release yet; raise this with each release.
    public static let version = "0.1.0"

    /// The `library-version` of the failure reports: `swift-pinning 0.1.0`.
    package static var reportLibraryVersion: String { "swift-pinning \(Self.version)" }
}
