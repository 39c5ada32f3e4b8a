import Foundation

/// The pin configuration formats of the mobile platforms that ``ConfigurationExporter`` writes and
/// `ConfigurationImporter` (`import PinningExport`) reads.
public enum PlatformFormat: String, Sendable, Hashable, CaseIterable {
    /// Android's Network Security Config (`res/xml/network_security_config.xml`).
    case androidNSC = "android-nsc"
    /// TrustKit's `TSKConfiguration` (iOS, macOS), as a property list.
    case trustKit = "trustkit"
    /// App Transport Security's `NSPinnedDomains` (iOS 14+, macOS 11+), as an Info.plist fragment.
    case ats
    /// OkHttp's `CertificatePinner`, as Kotlin source.
    case okHttp = "okhttp"

    /// The platform's name in messages.
    public var platformName: String {
        switch self {
        case .androidNSC: return "Android's Network Security Config"
        case .trustKit: return "TrustKit"
        case .ats: return "App Transport Security"
        case .okHttp: return "OkHttp's CertificatePinner"
        }
    }
}

/// One feature of a configuration that a platform cannot express, or expresses differently.
///
/// Without `--lossy` each is an error; with it, a warning saying what was dropped or changed.
public struct TranslationProblem: Sendable, Hashable, CustomStringConvertible {
    /// The entry (`domains` key) concerned; nil for the file as a whole.
    public let entry: String?
    /// The target (export) or source (import) format.
    public let format: PlatformFormat
    /// What cannot be expressed, and (for a warning) what was done about it.
    public let message: String

    public init(entry: String?, format: PlatformFormat, message: String) {
        self.entry = entry
        self.format = format
        self.message = message
    }

    public var description: String {
        let place = self.entry.map { "domains[\"\($0)\"]" } ?? "the configuration"
        return "\(place): \(self.format.rawValue): \(self.message)"
    }
}

/// The configuration could not be translated without changing its meaning, or the input was unusable.
public struct TranslationError: Error, Sendable, CustomStringConvertible {
    /// The error's stable code (for logs, metrics and JSON; the words may change): `unreadableInput` when the
    /// input itself cannot be read, `untranslatable` when features cannot be expressed (see ``problems``).
    public var code: String { self.inputProblem == nil ? "untranslatable" : "unreadableInput" }

    /// Every problem found, not only the first.
    public let problems: [TranslationProblem]
    /// Set when the input itself is unreadable (not a property list, not XML, a wrong shape).
    public let inputProblem: String?

    public init(problems: [TranslationProblem]) {
        self.problems = problems
        self.inputProblem = nil
    }

    public init(input: String) {
        self.problems = []
        self.inputProblem = input
    }

    public var description: String {
        if let inputProblem = self.inputProblem { return inputProblem }
        let count = self.problems.count
        // Each problem's words say what --lossy does about it ("dropped", "written as …"); nothing was written
        // here, so the header says so, rather than let "dropped" read as done.
        let them = count == 1 ? "the feature" : "each"
        return "\(count) feature\(count == 1 ? "" : "s") cannot be expressed; nothing was written (add --lossy to write the rest, \(them) handled as its line says, with a warning):\n"
            + self.problems.map { "  " + $0.description }.joined(separator: "\n")
    }
}

/// A translation: the text and what was dropped or changed on the way (empty unless lossy).
public struct Translation: Sendable {
    /// The output document.
    public var text: String
    /// One per feature dropped or changed (lossy mode only; in strict mode these are errors).
    public var warnings: [TranslationProblem]
    /// Things the user must do that are not losses (for example: copy an anchor file into `res/raw`).
    public var notes: [String]

    package init(text: String, warnings: [TranslationProblem], notes: [String]) {
        self.text = text
        self.warnings = warnings
        self.notes = notes
    }
}

/// Collects problems, then throws them in strict mode or returns them as warnings in lossy mode.
package struct ProblemLog {
    let format: PlatformFormat
    let lossy: Bool
    private(set) var problems: [TranslationProblem] = []

    package init(format: PlatformFormat, lossy: Bool) {
        self.format = format
        self.lossy = lossy
    }

    package mutating func add(_ entry: String?, _ message: String) {
        self.problems.append(TranslationProblem(entry: entry, format: self.format, message: message))
    }

    /// The warnings, or throws when any problem exists and lossy mode is off.
    package func finish() throws(TranslationError) -> [TranslationProblem] {
        if !self.problems.isEmpty && !self.lossy { throw TranslationError(problems: self.problems) }
        return self.problems
    }
}

/// Property-list and XML text, written by hand so that the output is deterministic (sorted keys, fixed
/// indentation) and readable in a diff.
enum Markup {
    static func escaped(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(character)
            }
        }
        return out
    }

    /// A property-list value.
    indirect enum PlistValue {
        case string(String)
        case bool(Bool)
        case array([PlistValue])
        /// Keys in the order given.
        case dictionary([(String, PlistValue)])
    }

    static func plistDocument(_ root: PlistValue, comment: String? = nil) -> String {
        var out = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">

            """
        if let comment { out += "<!-- \(Self.escapedComment(comment)) -->\n" }
        out += "<plist version=\"1.0\">\n"
        Self.write(root, indent: "", into: &out)
        out += "</plist>\n"
        return out
    }

    private static func write(_ value: PlistValue, indent: String, into out: inout String) {
        switch value {
        case .string(let text):
            out += "\(indent)<string>\(Self.escaped(text))</string>\n"
        case .bool(let flag):
            out += "\(indent)<\(flag ? "true" : "false")/>\n"
        case .array(let items):
            out += "\(indent)<array>\n"
            for item in items { Self.write(item, indent: indent + "\t", into: &out) }
            out += "\(indent)</array>\n"
        case .dictionary(let pairs):
            out += "\(indent)<dict>\n"
            for (key, item) in pairs {
                out += "\(indent)\t<key>\(Self.escaped(key))</key>\n"
                Self.write(item, indent: indent + "\t", into: &out)
            }
            out += "\(indent)</dict>\n"
        }
    }

    /// `--` may not appear inside an XML comment.
    static func escapedComment(_ text: String) -> String {
        text.replacingOccurrences(of: "--", with: "- -")
    }
}

/// `yyyy-MM-dd` in UTC, the date format of Android's `expiration` and TrustKit's `TSKExpirationDate`.
package enum DayFormat {
    static func day(of date: Date) -> (text: String, isMidnight: Bool) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .nanosecond], from: date)
        let text = String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
        let midnight = parts.hour == 0 && parts.minute == 0 && parts.second == 0 && (parts.nanosecond ?? 0) < 1_000_000
        return (text, midnight)
    }

    /// The RFC 3339 instant of midnight UTC at the start of `text` (`yyyy-MM-dd`), or nil when it is not such a
    /// date.
    package static func instant(_ text: String) -> String? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
            parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) })
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let components = DateComponents(year: year, month: month, day: day)
        guard components.isValidDate(in: calendar) else { return nil }
        return "\(text)T00:00:00Z"
    }
}
