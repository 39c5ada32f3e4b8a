import Foundation
import Pinning

/// Dates as the reports print them, `2030-06-01T00:00:00Z`: exactly what ``RFC3339/format(_:)`` (Foundation's
/// `Date.ISO8601FormatStyle`) writes, for less.
///
/// Foundation's formatter goes through a Gregorian calendar and a format style's generic machinery; in a one-chain
/// `pinning evaluate` the report's dates were ~5% of the process (issue 31's cold path), most of it first-use work
/// in the runtime. This writes the same twenty characters from the date's whole seconds with integer arithmetic.
/// It covers 1583-01-01 to 9999-12-31, where Foundation's calendar is the proleptic Gregorian one and every year has
/// four digits; any other instant (Foundation switches to the Julian calendar before 15 October 1582 and writes
/// years beyond four digits or below zero its own way) is formatted by Foundation as before.
/// `EvaluationReportTests` compares the two over the range's edges, leap days and random instants with fractions.
enum ReportDate {
    /// 1583-01-01T00:00:00Z and 10000-01-01T00:00:00Z, in seconds since Foundation's reference date (2001).
    static let range: Range<Double> = -13_190_860_800..<252_423_993_600

    /// Seconds between 1970-01-01 and Foundation's reference date, 2001-01-01.
    private static let referenceDateSince1970 = 978_307_200

    static func format(_ date: Date) -> String {
        let sinceReference = date.timeIntervalSinceReferenceDate
        guard Self.range.contains(sinceReference) else {
            return RFC3339.format(date)
        }
        // Foundation drops the fraction towards the past: 23:59:59.9 is 23:59:59, and 0.5 s before 1970 is
        // 1969-12-31T23:59:59Z.
        let seconds = Int(sinceReference.rounded(.down)) + Self.referenceDateSince1970
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        let (year, month, day) = Self.civil(daysSince1970: days)
        var bytes = [UInt8](repeating: 0, count: 20)
        Self.put(year, digits: 4, into: &bytes, at: 0)
        bytes[4] = UInt8(ascii: "-")
        Self.put(month, digits: 2, into: &bytes, at: 5)
        bytes[7] = UInt8(ascii: "-")
        Self.put(day, digits: 2, into: &bytes, at: 8)
        bytes[10] = UInt8(ascii: "T")
        Self.put(secondOfDay / 3600, digits: 2, into: &bytes, at: 11)
        bytes[13] = UInt8(ascii: ":")
        Self.put(secondOfDay / 60 % 60, digits: 2, into: &bytes, at: 14)
        bytes[16] = UInt8(ascii: ":")
        Self.put(secondOfDay % 60, digits: 2, into: &bytes, at: 17)
        bytes[19] = UInt8(ascii: "Z")
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The proleptic Gregorian date `days` after 1970-01-01: the days are counted in 400-year eras of 146,097 days
    /// from 0000-03-01, each year from March, so that February's leap day falls at a year's end.
    static func civil(daysSince1970 days: Int) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468  // days from 0000-03-01 to 1970-01-01
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097  // 0...146096
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365  // 0...399
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)  // 0...365, from March 1
        let monthFromMarch = (5 * dayOfYear + 2) / 153  // 0...11
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    /// `value` (not negative, fewer than `digits` digits) as `digits` ASCII digits, zero-padded, at `offset`.
    private static func put(_ value: Int, digits: Int, into bytes: inout [UInt8], at offset: Int) {
        var rest = value
        for position in stride(from: offset + digits - 1, through: offset, by: -1) {
            bytes[position] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
    }
}
