import Foundation

/// The Public Suffix List as the operating system ships it (Debian's `publicsuffix` package:
/// `/usr/share/publicsuffix/public_suffix_list.dat`), used by the webPKI profile to refuse wildcards such as
/// `*.co.uk`. When the file is absent only single-label suffixes count (`*.com` is never honoured anyway).
/// Only the ICANN section is read: the PRIVATE section lists hosting namespaces such as `s3.amazonaws.com`
/// for which CAs do issue wildcards, to the owner of the whole namespace.
final class PublicSuffixList: Sendable {
    static let shared = PublicSuffixList(path: "/usr/share/publicsuffix/public_suffix_list.dat")

    private let rules: Set<String>
    private let wildcards: Set<String>
    private let exceptions: Set<String>

    init(path: String) {
        var rules = Set<String>()
        var wildcards = Set<String>()
        var exceptions = Set<String>()
        if let data = FileManager.default.contents(atPath: path), data.count < 8 * 1024 * 1024 {
            for line in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
                let rule = line.split(whereSeparator: \.isWhitespace).first.map { String($0).lowercased() } ?? ""
                if line.contains("===BEGIN PRIVATE DOMAINS===") { break }
                if rule.isEmpty || rule.hasPrefix("//") { continue }
                if rule.hasPrefix("!") {
                    exceptions.insert(String(rule.dropFirst()))
                } else if rule.hasPrefix("*.") {
                    wildcards.insert(String(rule.dropFirst(2)))
                } else {
                    rules.insert(rule)
                }
            }
        }
        self.rules = rules
        self.wildcards = wildcards
        self.exceptions = exceptions
    }

    /// Whether `name` (ASCII, any case) is itself a public suffix.
    func isPublicSuffix(_ name: String) -> Bool {
        var name = name.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        if !name.contains(".") { return true }
        if self.exceptions.contains(name) { return false }
        if self.rules.contains(name) { return true }
        if let dot = name.firstIndex(of: ".") {
            return self.wildcards.contains(String(name[name.index(after: dot)...]))
        }
        return false
    }
}
