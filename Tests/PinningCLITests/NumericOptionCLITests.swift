import Foundation
import PinningTestSupport
import Testing

// Every numeric option of every subcommand, given values it cannot represent or use: each must be refused while
// parsing with status 2 and one message naming the option. The ~180 extremes are parsed in process exactly as the
// binary parses them (InProcessCLI); `messages()` runs the BUILT binary once per subcommand, which must end by
// exit (never a signal) with the same words.

struct NumericCase: Sendable, CustomTestStringConvertible {
    /// The command line before the option (required arguments with placeholder values: parsing fails first).
    var prefix: [String]
    var option: String
    var rejected: [String]

    var testDescription: String { "\(self.prefix.prefix(2).joined(separator: " ")) \(self.option)" }
}

/// Values no numeric option accepts.
private let notNumbers = ["abc", "", "1,5", "0x", "--"]
/// Values no integer option accepts.
private let notIntegers = ["inf", "-inf", "nan", "1e19", "1e300", "1.5", "99999999999999999999", "-99999999999999999999"]
/// Values no duration accepts.
private let badSeconds = ["inf", "-inf", "infinity", "nan", "-nan", "1e300", "1e19", "-1", "0", "-0", "1e-9", "0.0001", "604800.5", "1e6", "-1e300"]

let numericCases: [NumericCase] = [
    NumericCase(prefix: ["check", "https://localhost:1/"], option: "--connect-timeout", rejected: badSeconds + notNumbers),
    NumericCase(prefix: ["check", "https://localhost:1/"], option: "--max-time", rejected: badSeconds + notNumbers),
    NumericCase(prefix: ["serve", "--cert", "c.pem", "--key", "k.pem"], option: "--port", rejected: notIntegers + notNumbers + ["-1", "65536", "100000"]),
    NumericCase(prefix: ["evaluate", "--chain", "c.pem"], option: "--port", rejected: notIntegers + notNumbers + ["0", "-1", "65536"]),
    NumericCase(prefix: ["bench", "--chain", "c.pem"], option: "--iterations", rejected: notIntegers + notNumbers + ["0", "-1", "10000001"]),
    NumericCase(prefix: ["bench", "evaluations", "--chain", "c.pem"], option: "--cached-iterations", rejected: notIntegers + notNumbers + ["0", "-1", "1000000001"]),
    NumericCase(prefix: ["bench", "handshake"], option: "--connections", rejected: notIntegers + notNumbers + ["0", "-1", "1000001"]),
    NumericCase(prefix: ["bench", "handshake"], option: "--concurrency", rejected: notIntegers + notNumbers + ["0", "-1", "257"]),
    NumericCase(prefix: ["bench", "handshake"], option: "--rounds", rejected: notIntegers + notNumbers + ["0", "-1", "1001"]),
    NumericCase(prefix: ["pki", "init", "pki-dir"], option: "--days", rejected: notIntegers + notNumbers + ["0", "-1", "36501"]),
    NumericCase(prefix: ["pki", "issue", "pki-dir", "--client", "c"], option: "--days", rejected: notIntegers + notNumbers + ["0", "-1", "36501"]),
    // The numeric options the 2026-11-28 audit found correct but no sweep held: kept so here.
    NumericCase(prefix: ["pki", "crl", "pki-dir"], option: "--days", rejected: notIntegers + notNumbers + ["0", "-1", "3651"]),
    NumericCase(prefix: ["serve", "--cert", "c.pem", "--key", "k.pem", "--crl", "r.crl"], option: "--crl-reload", rejected: badSeconds + notNumbers + ["0.09", "86401"]),
    NumericCase(prefix: ["serve", "--cert", "c.pem", "--key", "k.pem"], option: "--handshake-timeout", rejected: badSeconds + notNumbers),
    NumericCase(prefix: ["serve", "--cert", "c.pem", "--key", "k.pem"], option: "--request-head-timeout", rejected: badSeconds + notNumbers),
    NumericCase(prefix: ["proxy", "--config", "p.json"], option: "--max-connections", rejected: notIntegers + notNumbers + ["0", "-1", "1000001"]),
    NumericCase(prefix: ["proxy", "--config", "p.json"], option: "--idle-timeout", rejected: badSeconds + notNumbers),
    NumericCase(prefix: ["proxy", "--config", "p.json"], option: "--handshake-timeout", rejected: badSeconds + notNumbers),
    NumericCase(prefix: ["proxy", "--config", "p.json"], option: "--request-head-timeout", rejected: badSeconds + notNumbers),
    NumericCase(prefix: ["proxy", "--pinset", "http://127.0.0.1:1/", "--pinset-root", "r.json", "--pinset-dir", "d"], option: "--pinset-refresh", rejected: badSeconds + notNumbers),
    NumericCase(prefix: ["bench", "handshake", "--server"], option: "--clients", rejected: notIntegers + notNumbers + ["0", "-1", "100001"]),
    NumericCase(prefix: ["bench", "handshake"], option: "--leaves", rejected: notIntegers + notNumbers + ["0", "-1", "100001"]),
    NumericCase(prefix: ["bench", "handshake", "--resume"], option: "--seconds", rejected: notIntegers + notNumbers + ["0", "-1", "61"]),
    NumericCase(prefix: ["bench", "proxy"], option: "--requests", rejected: notIntegers + notNumbers + ["0", "-1", "99", "10000001"]),
    NumericCase(prefix: ["bench", "proxy"], option: "--concurrency", rejected: notIntegers + notNumbers + ["0", "-1", "257"]),
    NumericCase(prefix: ["bench", "proxy"], option: "--rounds", rejected: notIntegers + notNumbers + ["0", "-1", "101"]),
    NumericCase(prefix: ["bench", "revocation"], option: "--entries", rejected: notIntegers + notNumbers + ["0", "-1", "2000001"]),
    NumericCase(prefix: ["bench", "revocation"], option: "--rounds", rejected: notIntegers + notNumbers + ["0", "-1", "101"]),
    NumericCase(prefix: ["bench", "revocation"], option: "--iterations", rejected: notIntegers + notNumbers + ["0", "-1", "1000001"]),
    NumericCase(prefix: ["bench", "hostile"], option: "--iterations", rejected: notIntegers + notNumbers + ["0", "-1", "1001"]),
    NumericCase(prefix: ["bench", "pinset"], option: "--hosts", rejected: notIntegers + notNumbers + ["0", "-1", "100001"]),
    NumericCase(prefix: ["bench", "pinset"], option: "--applies", rejected: notIntegers + notNumbers + ["0", "-1", "101"]),
    NumericCase(prefix: ["bench", "pinset"], option: "--refreshes", rejected: notIntegers + notNumbers + ["-1", "1000001"]),
]

@Suite("Numeric options: extremes are refused with exit 2 and a message naming the option")
struct NumericOptionCLITests {
    @Test("every numeric option, every extreme value", arguments: numericCases)
    func extremes(_ numeric: NumericCase) {
        for value in numeric.rejected {
            // "--option=value" so that values starting with "-" are values, not options.
            let run = InProcessCLI.parse(numeric.prefix + ["\(numeric.option)=\(value)"])
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr.contains(numeric.option), "\(run)")
            #expect(!run.stderr.contains("Fatal error") && !run.stderr.contains("Swift runtime failure"), "\(run)")
            #expect(run.stdout.isEmpty, "\(run)")
        }
    }

    @Test("the message says what is accepted")
    func messages() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-numeric")
        defer { directory.remove() }
        let timeout = try await Executable.pinning(["check", "https://localhost:1/", "--connect-timeout", "inf"], in: directory)
        #expect(timeout.stderr.contains("Error: The value 'inf' is invalid for '--connect-timeout <seconds>': not a finite number; use 0.001 to 604800 seconds"), "\(timeout)")
        let maxTime = try await Executable.pinning(["check", "https://localhost:1/", "--max-time", "1e19"], in: directory)
        #expect(maxTime.stderr.contains("'--max-time <seconds>': out of range; use 0.001 to 604800 seconds"), "\(maxTime)")
        let port = try await Executable.pinning(["serve", "--cert", "c", "--key", "k", "--port", "65536"], in: directory)
        #expect(port.stderr.contains("'--port <n>': out of range; use a TCP port from 0 to 65535"), "\(port)")
        let days = try await Executable.pinning(["pki", "init", "d", "--days", "1.5"], in: directory)
        #expect(days.stderr.contains("'--days <N>': not a number of days; use a whole number from 1 to 36500"), "\(days)")
        let iterations = try await Executable.pinning(["bench", "--chain", "c", "--iterations", "10000001"], in: directory)
        #expect(iterations.stderr.contains("out of range; use a whole number from 1 to 10,000,000"), "\(iterations)")
    }

    @Test("values in range still work: a fractional timeout reaches the connection (exit 3), not the parser")
    func inRange() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-numeric")
        defer { directory.remove() }
        let run = try await Executable.pinning(
            ["check", "https://localhost:1/", "--resolve", "localhost:1:127.0.0.1", "--connect-timeout", "0.5", "--max-time", "604800"],
            in: directory
        )
        #expect(run.status == 3, "\(run)")
    }
}
