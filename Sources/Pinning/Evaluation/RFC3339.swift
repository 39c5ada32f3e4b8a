package import Foundation

/// RFC 3339 instants, as the CLI and reports print and read them: the one helper for every module (`package`,
/// not API).
package enum RFC3339 {
    /// `2030-06-01T00:00:00Z`: UTC, whole seconds (a fraction is dropped, toward the past), in the proleptic
    /// Gregorian calendar that ``read(_:)`` reads (RFC 3339 §1, ISO 8601), so that what is written reads back as
    /// the same instant. Foundation's `ISO8601FormatStyle`, which wrote these before, switches to the Julian
    /// calendar before 1582-10-15: 0001-01-01T00:00:00Z read back was written 0001-01-03T00:00:00Z.
    ///
    /// A year outside 0000–9999 (which no RFC 3339 date-time holds; ``read(_:)`` refuses it) is written with as
    /// many digits as it has, after a `-` when negative: never another instant.
    package static func format(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970.rounded(.down)
        // Far beyond any year a certificate or clock gives (about ±3 · 10^7 years), and NaN: no integer to convert.
        guard interval.isFinite, abs(interval) < 1e15 else { return date.formatted(.iso8601) }
        return Self.dateTime(seconds: Int64(interval)) + "Z"
    }

    /// `2030-06-01T00:00:00.250Z`: an instant counted in whole milliseconds since 1970 (as the collector stores
    /// them), with its three fraction digits, in the proleptic Gregorian calendar as ``format(_:)``. The
    /// milliseconds are split off as integers: through a `Double` of seconds, 123 ms came out as `.122`
    /// (0.123 is 0.12299… in binary, and formatters truncate).
    package static func format(milliseconds: Int64) -> String {
        let (seconds, fraction) = Self.floorDivision(milliseconds, 1000)
        return Self.dateTime(seconds: seconds) + "." + Self.padded(fraction, to: 3) + "Z"
    }

    /// `2030-06-01T00:00:00`: date and time of `seconds` since 1970, UTC.
    private static func dateTime(seconds: Int64) -> String {
        let (days, secondOfDay) = Self.floorDivision(seconds, 86_400)
        let civil = CivilCalendar.civilFromDays(days)
        let year = civil.year < 0 ? "-" + Self.padded(-civil.year, to: 4) : Self.padded(civil.year, to: 4)
        return "\(year)-\(Self.padded(civil.month, to: 2))-\(Self.padded(civil.day, to: 2))T"
            + "\(Self.padded(secondOfDay / 3600, to: 2)):\(Self.padded(secondOfDay / 60 % 60, to: 2)):\(Self.padded(secondOfDay % 60, to: 2))"
    }

    /// `value` divided by `divisor` rounded toward minus infinity, and the remainder (0 to `divisor` - 1).
    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let remainder = value % divisor
        return remainder < 0 ? (value / divisor - 1, remainder + divisor) : (value / divisor, remainder)
    }

    /// A non-negative `value` in decimal, with leading zeros to `width` digits.
    private static func padded(_ value: Int64, to width: Int) -> String {
        let digits = String(value)
        return digits.count < width ? String(repeating: "0", count: width - digits.count) + digits : digits
    }

    /// Why a text is not an RFC 3339 date-time, in words (`day 30 does not exist: February 2030 has 28 days`).
    package struct Refusal: Error, CustomStringConvertible {
        package var description: String
    }

    /// ``read(_:)``, for callers that say in their own words what they expected: nil when `text` is not an
    /// RFC 3339 date-time.
    package static func parse(_ text: String) -> Date? {
        switch Result(catching: { () throws(Refusal) -> Date in try Self.read(text) }) {
        case .success(let date): return date
        case .failure: return nil
        }
    }

    /// Reads an RFC 3339 `date-time` (§5.6): `2030-06-01T00:00:00Z`, with optional fractional seconds
    /// (`.250`) and a `Z` or numeric offset (`+02:00`, `-00:00`); `T` and `Z` in either case (§5.6, note).
    ///
    /// Every field is checked against its range before any arithmetic (§5.7): month 01–12, day 01 to the
    /// month's last (28, 29 in a leap year of the Gregorian calendar, 30 or 31), hour 00–23, minute 00–59,
    /// second 00–59, offset hour 00–23 and minute 00–59. Foundation's `ISO8601FormatStyle`, which read these
    /// before, rolled impossible fields over into the next ones (2030-02-30 became 2030-03-02, 24:00 the next
    /// day), so a mistyped validation instant was silently replaced by another one.
    ///
    /// Deliberate deviation: second 60, which §5.6's grammar allows for a leap second, is refused. A `Date`
    /// (POSIX time, as certificates' validity and the system clock count) has no leap second to hold it, and
    /// rounding it to :59 or to the next minute would again silently be another instant than the one written;
    /// Go's `time.Parse` refuses it the same way. The words say to write 23:59:59.
    ///
    /// No other form is accepted: a space instead of `T`, a date without a time, an offset without its colon
    /// (`+0200`) or a missing offset are not RFC 3339 date-times.
    package static func read(_ text: String) throws(Refusal) -> Date {
        let shape = "expected YYYY-MM-DDTHH:MM:SS, optional fractional seconds, then Z or ±HH:MM"
        var reader = Reader(Array(text.utf8))
        guard let year = reader.number(digits: 4), reader.skip("-"), let month = reader.number(digits: 2), reader.skip("-"),
            let day = reader.number(digits: 2), reader.skip("T") || reader.skip("t"),
            let hour = reader.number(digits: 2), reader.skip(":"), let minute = reader.number(digits: 2), reader.skip(":"),
            let second = reader.number(digits: 2)
        else {
            throw Refusal(description: shape)
        }
        var fraction = 0.0
        if reader.skip(".") {
            let digits = reader.digits()
            guard !digits.isEmpty, let value = Double("0." + digits) else {
                throw Refusal(description: "no digit after the decimal point of the seconds; \(shape)")
            }
            fraction = value
        }
        let offsetSeconds: Int
        if reader.skip("Z") || reader.skip("z") {
            offsetSeconds = 0
        } else if let sign = reader.sign(), let offsetHour = reader.number(digits: 2), reader.skip(":"),
            let offsetMinute = reader.number(digits: 2)
        {
            guard offsetHour <= 23 else { throw Refusal(description: "offset hour \(Self.two(offsetHour)) does not exist: hours run from 00 to 23") }
            guard offsetMinute <= 59 else { throw Refusal(description: "offset minute \(Self.two(offsetMinute)) does not exist: minutes run from 00 to 59") }
            offsetSeconds = sign * (offsetHour * 3600 + offsetMinute * 60)
        } else {
            throw Refusal(description: "no time zone: \(shape)")
        }
        guard reader.atEnd else { throw Refusal(description: "unexpected text after the time zone; \(shape)") }

        guard (1...12).contains(month) else { throw Refusal(description: "month \(Self.two(month)) does not exist: months run from 01 to 12") }
        let lastDay = CivilCalendar.daysIn(month: month, year: year)
        guard (1...lastDay).contains(day) else {
            let monthName = Self.monthNames[month - 1]
            throw Refusal(description: "day \(Self.two(day)) does not exist: \(monthName) \(year) has \(lastDay) days")
        }
        guard hour <= 23 else { throw Refusal(description: "hour \(Self.two(hour)) does not exist: hours run from 00 to 23 (RFC 3339 has no 24:00)") }
        guard minute <= 59 else { throw Refusal(description: "minute \(Self.two(minute)) does not exist: minutes run from 00 to 59") }
        guard second <= 59 else {
            if second == 60 {
                throw Refusal(
                    description: "second 60 (a leap second) cannot be represented: the clock and certificates count POSIX time, which has no leap second; write 59")
            }
            throw Refusal(description: "second \(Self.two(second)) does not exist: seconds run from 00 to 59")
        }
        let days = CivilCalendar.daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    private static let monthNames = [
        "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December",
    ]

    /// `7` as `07`, as the field was written.
    private static func two(_ value: Int) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }

    /// A cursor over the text's UTF-8 bytes; only ASCII digits and the separators above ever match.
    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
        }

        var atEnd: Bool { self.index == self.bytes.count }

        /// Exactly `digits` ASCII digits as a number, or nil (and nothing consumed).
        mutating func number(digits: Int) -> Int? {
            guard self.bytes.count - self.index >= digits else { return nil }
            var value = 0
            for byte in self.bytes[self.index..<self.index + digits] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            self.index += digits
            return value
        }

        /// Every ASCII digit from here on, as text.
        mutating func digits() -> String {
            let start = self.index
            while self.index < self.bytes.count, self.bytes[self.index] >= UInt8(ascii: "0"), self.bytes[self.index] <= UInt8(ascii: "9") {
                self.index += 1
            }
            return String(decoding: self.bytes[start..<self.index], as: UTF8.self)
        }

        mutating func skip(_ character: Unicode.Scalar) -> Bool {
            guard self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: character) else { return false }
            self.index += 1
            return true
        }

        /// `+` as 1, `-` as -1.
        mutating func sign() -> Int? {
            if self.skip("+") { return 1 }
            if self.skip("-") { return -1 }
            return nil
        }
    }
}
