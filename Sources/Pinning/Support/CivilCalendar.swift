/// The proleptic Gregorian calendar as days since 1970-01-01 (Howard Hinnant's `days_from_civil` and
/// `civil_from_days`): one copy of the date arithmetic for the two time formats read here, certificate
/// UTCTime/GeneralizedTime and TUF's `expires`.
enum CivilCalendar {
    /// Whether `year` has a 29 February.
    static func isLeapYear<Number: SignedInteger>(_ year: Number) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    /// How many days `month` (1 to 12) of `year` has.
    static func daysIn<Number: SignedInteger>(month: Number, year: Number) -> Number {
        switch month {
        case 2: isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a date (month 1 to 12, day 1 to its month's last).
    static func daysFromCivil<Number: SignedInteger>(year: Number, month: Number, day: Number) -> Number {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date `days` after 1970-01-01 (the inverse of ``daysFromCivil(year:month:day:)``).
    static func civilFromDays<Number: SignedInteger>(_ days: Number) -> (year: Number, month: Number, day: Number) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
