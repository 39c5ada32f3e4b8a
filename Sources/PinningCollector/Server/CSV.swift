import Foundation

/// `GET /api/reports.csv`: the API's rows as RFC 4180 CSV.
///
/// Every field is quoted (RFC 4180 §2.5-2.7: a `"` inside is doubled), and a field that a spreadsheet would run
/// as a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return; report values are attacker-chosen)
/// is prefixed with `'` (OWASP's "CSV injection" advice), so it opens as text.
enum CSV {
    static let columns = [
        "id", "receivedAt", "lastSeen", "dateTime", "host", "port", "notedHost", "result", "enforced", "appId", "appVersion", "platform",
        "platformVersion", "libraryVersion", "pinsetVersion", "format", "servedPins", "validatedPins", "knownPins", "occurrences",
    ]

    static func render(_ reports: [StoredReport]) -> String {
        var text = Self.row(Self.columns)
        for report in reports {
            text += Self.row([
                String(report.id), report.receivedAt, report.lastSeen, report.dateTime ?? "", report.host, report.port.map(String.init) ?? "",
                report.notedHost ?? "", report.result, report.enforced.map { $0 ? "true" : "false" } ?? "", report.appId ?? "", report.appVersion ?? "",
                report.platform ?? "", report.platformVersion ?? "", report.libraryVersion ?? "", report.pinsetVersion ?? "", report.format,
                report.servedPins.joined(separator: " "), report.validatedPins.joined(separator: " "), report.knownPins.joined(separator: " "),
                String(report.occurrences),
            ])
        }
        return text
    }

    static func row(_ fields: [String]) -> String {
        fields.map(Self.field).joined(separator: ",") + "\r\n"
    }

    static func field(_ value: String) -> String {
        var value = value
        if let first = value.unicodeScalars.first, ["=", "+", "-", "@", "\t", "\r"].contains(first) {
            value = "'" + value
        }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
