public import Foundation

/// The Public Suffix List (<https://publicsuffix.org>), which the ``ValidationProfile/webPKI(publicSuffixList:)``
/// profile uses to refuse wildcards such as `*.co.uk`.
///
/// The core reads no file it was not handed: load the list yourself and pass it in. Debian's and Ubuntu's
/// `publicsuffix` package installs it at ``systemPath``.
///
/// <!-- snippet: given(chain: [Certificate])
/// import X509
/// -->
/// ```swift
/// let suffixes = try PublicSuffixList(contentsOfFile: PublicSuffixList.systemPath)
/// let trust = ServerTrust(certificates: chain, profile: .webPKI(publicSuffixList: suffixes))
/// ```
///
/// Only the ICANN section is read: the PRIVATE section lists hosting namespaces such as `s3.amazonaws.com`
/// for which CAs do issue wildcards, to the owner of the whole namespace. Whatever the list holds, a
/// single-label name (`com`) always counts as a public suffix.
public struct PublicSuffixList: Sendable, Hashable {
    /// Where the `publicsuffix` package of Debian-based systems installs the list.
    public static let systemPath = "/usr/share/publicsuffix/public_suffix_list.dat"
    /// The largest list that is read: 8 MiB (the real list is about 250 KiB).
    static let maximumSize = 8 * 1024 * 1024
    /// A list without rules: only single-label names (`com`, `uk`) count as public suffixes.
    ///
    /// - Warning: With it the webPKI profile accepts wildcards such as `*.co.uk`. It exists for systems
    ///   without a list (the `pinning` CLI falls back to it, as it always did); prefer a real list.
    package static let empty = PublicSuffixList(Rules(text: ""))

    /// The parsed rules; a class so that copies of a profile share one list.
    final class Rules: Sendable {
        let rules: Set<String>
        let wildcards: Set<String>
        let exceptions: Set<String>

        init(text: String) {
            var rules = Set<String>()
            var wildcards = Set<String>()
            var exceptions = Set<String>()
            for line in text.split(whereSeparator: \.isNewline) {
                if line.contains("===BEGIN PRIVATE DOMAINS===") { break }
                let rule = line.split(whereSeparator: \.isWhitespace).first.map { String($0).lowercased() } ?? ""
                if rule.isEmpty || rule.hasPrefix("//") { continue }
                if rule.hasPrefix("!") {
                    exceptions.insert(String(rule.dropFirst()))
                } else if rule.hasPrefix("*.") {
                    wildcards.insert(String(rule.dropFirst(2)))
                } else {
                    rules.insert(rule)
                }
            }
            self.rules = rules
            self.wildcards = wildcards
            self.exceptions = exceptions
        }
    }

    private let storage: Rules

    private init(_ storage: Rules) {
        self.storage = storage
    }

    /// Parses the list's text (`public_suffix_list.dat`).
    ///
    /// - Parameters:
    ///   - data: The list, UTF-8, at most 8 MiB.
    ///   - origin: What to call the list in errors (a path, `<data>`).
    /// - Throws: ``ValidationProfileError`` with code ``ValidationProfileError/Code/unreadablePublicSuffixList``
    ///   when the list is larger than 8 MiB.
    public init(data: Data, origin: String = "<data>") throws(ValidationProfileError) {
        guard data.count <= Self.maximumSize else {
            throw ValidationProfileError(
                code: .unreadablePublicSuffixList,
                message: "\(origin): \(data.count) bytes is more than a public suffix list's \(Self.maximumSize)"
            )
        }
        self.init(Rules(text: String(decoding: data, as: UTF8.self)))
    }

    /// Reads and parses the list at `path`, for example ``systemPath``.
    ///
    /// - Parameter path: The `public_suffix_list.dat` file.
    /// - Throws: ``ValidationProfileError`` with code ``ValidationProfileError/Code/unreadablePublicSuffixList``
    ///   when the file cannot be read or is too large.
    public init(contentsOfFile path: String) throws(ValidationProfileError) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path), options: .mappedIfSafe)
        } catch {
            throw ValidationProfileError(
                code: .unreadablePublicSuffixList,
                message: "\(path): the public suffix list cannot be read: \(error.localizedDescription)"
            )
        }
        try self.init(data: data, origin: path)
    }

    /// Whether `name` (ASCII, any case) is itself a public suffix.
    func isPublicSuffix(_ name: String) -> Bool {
        var name = name.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        if !name.contains(".") { return true }
        if self.storage.exceptions.contains(name) { return false }
        if self.storage.rules.contains(name) { return true }
        if let dot = name.firstIndex(of: ".") {
            return self.storage.wildcards.contains(String(name[name.index(after: dot)...]))
        }
        return false
    }

    /// Lists are equal when they hold the same rules (copies of one list compare without looking at them).
    public static func == (lhs: PublicSuffixList, rhs: PublicSuffixList) -> Bool {
        lhs.storage === rhs.storage
            || (lhs.storage.rules == rhs.storage.rules && lhs.storage.wildcards == rhs.storage.wildcards
                && lhs.storage.exceptions == rhs.storage.exceptions)
    }

    /// Hashes the sizes of the rule sets only, so that hashing a profile (once per evaluation, in the
    /// evaluation cache's key) does not walk the whole list.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.storage.rules.count)
        hasher.combine(self.storage.wildcards.count)
        hasher.combine(self.storage.exceptions.count)
    }
}
