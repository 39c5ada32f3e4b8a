import ArgumentParser
import Foundation

/// Parsing of every numeric option of every subcommand, in one place.
///
/// Each numeric `@Option` names one of these as its `transform`, so a value the command cannot represent or use
/// (out of range, not finite, negative or zero where that means nothing) is refused while the command line is
/// parsed, before anything runs, with one message naming the option and the accepted range, and exit status 2:
///
/// ```
/// Error: The value 'inf' is invalid for '--connect-timeout <seconds>': not a finite number; use 0.001 to 604800 seconds
/// ```
///
/// The ranges are what the code downstream can hold without overflow (a timeout becomes NIO nanoseconds in an
/// `Int64`, a count sizes arrays) and what makes sense for the option.
///
/// Every numeric option is also declared `parsing: .unconditional`: the word after it is its value whatever it
/// looks like. With argument-parser's default a negative number (`--port -1`) read as an option name, and the
/// refusal was "Missing value for '--port <n>'" instead of the range. The price: `--port --json` takes `--json`
/// as the port and refuses it as not a number (a flag never belongs there); `--port` last on the line is still
/// "Missing value". `pinning-collector`'s numeric options are declared the same way.
enum NumericOption {
    /// The refusal: its `description` is what argument-parser prints after the option's name.
    struct Refusal: Error, CustomStringConvertible {
        var description: String
    }

    /// TCP ports: 1–65535, or 0–65535 when 0 means "pick a free port".
    static func port(allowingZero: Bool) -> @Sendable (String) throws -> Int {
        self.integer(allowingZero ? 0...65535 : 1...65535, what: "TCP port")
    }

    /// A whole number in `range`.
    static func integer(_ range: ClosedRange<Int>, what: String = "whole number") -> @Sendable (String) throws -> Int {
        { text in
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            guard let value = Int(trimmed) else {
                if trimmed.contains(".") || trimmed.lowercased().contains("e"), Double(trimmed) != nil {
                    throw Refusal(description: "not a \(what); use a whole number from \(Self.format(range.lowerBound)) to \(Self.format(range.upperBound))")
                }
                throw Refusal(description: "not a \(what) from \(Self.format(range.lowerBound)) to \(Self.format(range.upperBound))")
            }
            guard range.contains(value) else {
                throw Refusal(description: "out of range; use a \(what) from \(Self.format(range.lowerBound)) to \(Self.format(range.upperBound))")
            }
            return value
        }
    }

    /// A duration in seconds: finite, within `range` (whose lower bound is positive).
    static func seconds(_ range: ClosedRange<Double>) -> @Sendable (String) throws -> Double {
        { text in
            let accepted = "use \(Self.format(range.lowerBound)) to \(Self.format(range.upperBound)) seconds"
            guard let value = Double(text.trimmingCharacters(in: .whitespaces)) else {
                throw Refusal(description: "not a number; \(accepted)")
            }
            guard value.isFinite else {
                throw Refusal(description: "not a finite number; \(accepted)")
            }
            guard range.contains(value) else {
                throw Refusal(description: "out of range; \(accepted)")
            }
            return value
        }
    }

    /// The range of timeouts (`check --connect-timeout`, `--max-time`): from a millisecond to a week. NIO holds a
    /// timeout as nanoseconds in an `Int64` (about 292 years); a week is far inside that and beyond any use.
    static let timeoutRange: ClosedRange<Double> = 0.001...604_800

    /// `10000000` as `10,000,000` (from 100,000 up; ports and days stay plain); decimals as written.
    static func format(_ value: Int) -> String {
        let digits = String(value.magnitude)
        guard value.magnitude >= 100_000 else { return value < 0 ? "-" + digits : digits }
        var grouped = ""
        for (offset, digit) in digits.enumerated() {
            if offset > 0, (digits.count - offset) % 3 == 0 { grouped.append(",") }
            grouped.append(digit)
        }
        return value < 0 ? "-" + grouped : grouped
    }

    /// Seconds as written in help texts: `604800`, `0.001`.
    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}
