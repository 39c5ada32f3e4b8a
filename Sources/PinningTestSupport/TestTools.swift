import Foundation

/// The programs we did not write that the tests drive (cross-checks against OpenSSL and Python), found once.
public enum TestTools {
    /// Where Debian's `openssl` lives; `.ci/run` installs it.
    public static let opensslPath = "/usr/bin/openssl"
    /// Whether `openssl` is installed; suites that need it are skipped (never passed) without it.
    public static let opensslAvailable = FileManager.default.isExecutableFile(atPath: opensslPath)
    /// Whether `python3` is installed (the unclean-shutdown servers are Python `ssl` servers).
    public static let python3Available = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
}
