package import Foundation

/// RFC 3339 instants, as the CLI and reports print and read them: the one helper for every module (`package`,
/// not API).
package enum RFC3339 {
    /// `2030-06-01T00:00:00Z`.
    package static func format(_ date: Date) -> String {
        date.formatted(.iso8601)
    }

    /// Parses `2030-06-01T00:00:00Z`, with optional fractional seconds and a numeric offset.
    package static func parse(_ text: String) -> Date? {
        for style in [Date.ISO8601FormatStyle(), Date.ISO8601FormatStyle(includingFractionalSeconds: true)] {
            do {
                return try style.parse(text)
            } catch {
                continue
            }
        }
        return nil
    }
}
