/// A UTC time as a calendar writes it, from seconds since 1970-01-01T00:00:00Z, with no C time
/// function: the proleptic Gregorian calendar by H. Hinnant's `civil_from_days` (days counted from
/// 0000-03-01 in 400-year eras of 146 097 days, so that February, with its leap day, ends a year).
public struct CivilTime: Sendable, Equatable {
    /// Whole days since 1970-01-01 (negative before it): what a weekday is counted from.
    public let days: Int
    public let year: Int
    /// 1 to 12.
    public let month: Int
    /// 1 to 31.
    public let day: Int
    /// 0 to 86 399.
    public let secondOfDay: Int

    @inlinable
    public init(epochSeconds: Int) {
        let days = epochSeconds >= 0 ? epochSeconds / 86_400 : (epochSeconds - 86_399) / 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        self.days = days
        day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        secondOfDay = epochSeconds - days * 86_400
    }
}
