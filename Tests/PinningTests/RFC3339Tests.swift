import Foundation
import Testing

@testable import Pinning

/// The one RFC 3339 reader (`RFC3339.read`), behind `--at`, the collector's report `date-time`, configuration
/// `expires` and every other date the package reads. Foundation's ISO 8601 parser, used before, rolled impossible
/// fields over (2030-02-30 read as 2030-03-02, 24:00 as the next day's 00:00).
@Suite("RFC 3339: every field within its range, or refused")
struct RFC3339Tests {
    private static func instant(_ seconds: Double) -> Date { Date(timeIntervalSince1970: seconds) }

    @Test("well-formed date-times read as the instant they name")
    func accepted() throws {
        let june = Self.instant(1_906_502_400)  // 2030-06-01T00:00:00Z
        for text in [
            "2030-06-01T00:00:00Z", "2030-06-01t00:00:00z", "2030-06-01T02:00:00+02:00", "2030-05-31T19:30:00-04:30",
            "2030-06-01T00:00:00-00:00", "2030-06-01T00:00:00.000Z",
        ] {
            #expect(RFC3339.parse(text) == june, "\(text)")
        }
        #expect(RFC3339.parse("2030-06-01T00:00:00.25Z") == june.addingTimeInterval(0.25))
        #expect(RFC3339.parse("1970-01-01T00:00:00Z") == Self.instant(0))
        #expect(RFC3339.parse("2028-02-29T23:59:59Z") == Self.instant(1_835_481_599), "2028 is a leap year")
        #expect(RFC3339.parse("2000-02-29T00:00:00Z") == Self.instant(951_782_400), "2000 is a leap year (divisible by 400)")
        #expect(RFC3339.parse("2030-12-31T23:59:59Z") == Self.instant(1_924_991_999))
        // The format and the reader agree.
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        #expect(RFC3339.parse(RFC3339.format(now)) == now)
    }

    @Test("impossible fields are refused, naming the field, never moved to another day")
    func impossibleFields() {
        let cases: [(String, String)] = [
            ("2030-02-30T00:00:00Z", "day 30 does not exist: February 2030 has 28 days"),
            ("2029-02-29T00:00:00Z", "day 29 does not exist: February 2029 has 28 days"),
            ("2100-02-29T00:00:00Z", "day 29 does not exist: February 2100 has 28 days"),
            ("2030-04-31T00:00:00Z", "day 31 does not exist: April 2030 has 30 days"),
            ("2030-06-00T00:00:00Z", "day 00 does not exist"),
            ("2030-13-01T00:00:00Z", "month 13 does not exist"),
            ("2030-00-01T00:00:00Z", "month 00 does not exist"),
            ("2030-06-01T24:00:00Z", "hour 24 does not exist"),
            ("2030-06-01T23:60:00Z", "minute 60 does not exist"),
            ("2030-06-01T23:59:60Z", "second 60 (a leap second) cannot be represented"),
            ("2030-06-01T23:59:61Z", "second 61 does not exist"),
            ("2030-06-01T00:00:00+24:00", "offset hour 24 does not exist"),
            ("2030-06-01T00:00:00+01:60", "offset minute 60 does not exist"),
        ]
        for (text, expected) in cases {
            #expect(RFC3339.parse(text) == nil, "\(text)")
            #expect(throws: RFC3339.Refusal.self, "\(text)") { try RFC3339.read(text) }
            do {
                _ = try RFC3339.read(text)
            } catch {
                #expect(error.description.contains(expected), "\(text): \(error.description)")
            }
        }
    }

    @Test("other shapes are not RFC 3339 date-times")
    func shapes() {
        for text in [
            "", "yesterday", "2030-06-01", "2030-06-01T00:00Z", "2030-06-01 00:00:00Z", "2030-06-01T00:00:00",
            "2030-06-01T00:00:00+0200", "2030-06-01T00:00:00.Z", "2030-06-01T00:00:00ZZ", "30-06-01T00:00:00Z",
            "2030-6-01T00:00:00Z", "２０３０-06-01T00:00:00Z", "2030-06-01T00:00:00Z\n", " 2030-06-01T00:00:00Z",
        ] {
            #expect(RFC3339.parse(text) == nil, "\(text.debugDescription)")
        }
    }

    @Test("format writes the proleptic Gregorian calendar that read reads: every date round-trips, before 1583 too")
    func formatRoundTrips() throws {
        // Proleptic Gregorian day counts: 0001-01-01 is day -719,162 of the Unix epoch, 1582-10-15 day -141,427
        // (the first Gregorian day; Foundation wrote the days before it in the Julian calendar, ten days and more
        // apart: 0001-01-01T00:00:00Z came out as 0001-01-03T00:00:00Z).
        #expect(RFC3339.format(Self.instant(-719_162 * 86_400)) == "0001-01-01T00:00:00Z")
        #expect(RFC3339.format(Self.instant(-141_427 * 86_400)) == "1582-10-15T00:00:00Z")
        #expect(RFC3339.format(Self.instant(-141_438 * 86_400)) == "1582-10-04T00:00:00Z")
        #expect(RFC3339.format(Self.instant(0)) == "1970-01-01T00:00:00Z")
        #expect(RFC3339.format(Self.instant(1_906_502_400.75)) == "2030-06-01T00:00:00Z", "a fraction is dropped")
        #expect(RFC3339.format(Self.instant(-0.5)) == "1969-12-31T23:59:59Z", "toward the past")
        #expect(RFC3339.format(Self.instant(253_402_300_799)) == "9999-12-31T23:59:59Z")
        for text in [
            "0001-01-01T00:00:00Z", "0001-12-31T23:59:59Z", "0004-02-29T12:00:00Z", "1000-03-01T00:00:00Z",
            "1582-10-04T23:59:59Z", "1582-10-05T00:00:00Z", "1582-10-14T00:00:00Z", "1582-10-15T00:00:00Z",
            "1600-02-29T00:00:00Z", "1600-12-31T23:59:59Z", "1900-02-28T23:59:59Z", "1900-03-01T00:00:00Z",
            "1969-12-31T23:59:59Z", "2000-02-29T00:00:00Z", "2024-02-29T06:07:08Z", "9996-02-29T00:00:00Z",
            "9999-12-31T23:59:59Z",
        ] {
            let date = try RFC3339.read(text)
            #expect(RFC3339.format(date) == text, "\(text) read back as \(RFC3339.format(date))")
        }
        // Every day of years 1 to 2, 1582 to 1583 and 1600 to 1602 (leap days and the Julian/Gregorian switch):
        // formatted, read back, the same instant.
        for range in [(-719_162, -718_432), (-141_714, -140_984), (-135_140, -134_044)] {
            for day in stride(from: range.0, through: range.1, by: 1) {
                let date = Self.instant(Double(day) * 86_400 + 45_296)
                let text = RFC3339.format(date)
                #expect(RFC3339.parse(text) == date, "day \(day): \(text)")
            }
        }
        // Outside RFC 3339's four digits: written as they are, refused by the reader, never another instant.
        #expect(RFC3339.format(Self.instant(253_402_300_800)) == "10000-01-01T00:00:00Z")
        #expect(RFC3339.format(Self.instant(-719_163 * 86_400)) == "0000-12-31T00:00:00Z")
        #expect(RFC3339.format(Self.instant(-719_528 * 86_400 - 1)) == "-0001-12-31T23:59:59Z")
    }
}
