/// How `pinning config import` hands its parsed options to `pinning-config-import` (issue 31: the import's XML
/// parser lives in that companion executable). `pinning` parses the command line with argument-parser, so usage,
/// refusals, help and completion stay its own; the companion gets the values in one fixed form, which both sides
/// build and read here:
///
///     --format=FORMAT [--res=DIR] [--lossy] [--out=PATH] -- FILE
///
/// Each value is attached with `=`, so a value beginning with `-` is never read as an option, and the file comes
/// after `--` for the same reason.
package enum ConfigImportHandOver {
    /// The options as parsed.
    package struct Options: Equatable {
        package var file: String
        package var format: PlatformFormat
        package var res: String?
        package var lossy: Bool
        package var out: String?

        package init(file: String, format: PlatformFormat, res: String?, lossy: Bool, out: String?) {
            self.file = file
            self.format = format
            self.res = res
            self.lossy = lossy
            self.out = out
        }
    }

    /// The companion's arguments (after its own path) for these options.
    package static func arguments(file: String, format: String, res: String?, lossy: Bool, out: String?) -> [String] {
        var arguments = ["--format=\(format)"]
        if let res { arguments.append("--res=\(res)") }
        if lossy { arguments.append("--lossy") }
        if let out { arguments.append("--out=\(out)") }
        arguments += ["--", file]
        return arguments
    }

    /// The options `arguments` (after the companion's path) carry, or nil when they are not in the form
    /// ``arguments(file:format:res:lossy:out:)`` writes (each option at most once, a format that can be imported).
    package static func options(_ arguments: [String]) -> Options? {
        var format: PlatformFormat?
        var res: String?
        var lossy = false
        var out: String?
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let word = arguments[index]
            index += 1
            if word == "--" {
                guard index == arguments.endIndex - 1, let format else { return nil }
                return Options(file: arguments[index], format: format, res: res, lossy: lossy, out: out)
            }
            if word == "--lossy" {
                guard !lossy else { return nil }
                lossy = true
            } else if let value = Self.value(of: "--format=", in: word) {
                guard format == nil, let known = PlatformFormat(rawValue: value), known == .androidNSC || known == .trustKit else {
                    return nil
                }
                format = known
            } else if let value = Self.value(of: "--res=", in: word) {
                guard res == nil else { return nil }
                res = value
            } else if let value = Self.value(of: "--out=", in: word) {
                guard out == nil else { return nil }
                out = value
            } else {
                return nil
            }
        }
        return nil
    }

    private static func value(of prefix: String, in word: String) -> String? {
        word.hasPrefix(prefix) ? String(word.dropFirst(prefix.count)) : nil
    }
}
