import ArgumentParser
import Foundation
import Pinning
import PinningNIO
import X509

extension EvaluationRequest {
    /// `pinning evaluate --config FILE`: the host pinning configuration decides.
    func runWithConfiguration(_ path: String) async throws {
        let host = try self.configurationHost()
        var configuration = try self.policy.loadConfiguration(path)
        let presented = try InputLoading.certificates(self.chain, option: "--chain")
        let roots = try InputLoading.roots(self.policy.roots)
        let time = try InputLoading.instant(self.policy.at) ?? Date()
        let profile = try self.policy.loadProfile()
        let queue: PinFailureReportQueue?
        if self.sendReports {
            // https:// collectors are judged by the reporter's own policy (the platform roots, no pins),
            // never by the configuration whose pin failed.
            let reporter = HTTPPinFailureReporter(
                timeout: .seconds(2),
                maximumAttempts: 2,
                retryDelay: .milliseconds(250),
                onOutcome: { outcome in
                    FileHandle.standardError.write(Data("pinning: report \(outcome)\n".utf8))
                }
            )
            queue = PinFailureReportQueue(reporter: reporter)
        } else {
            queue = nil
        }
        configuration.reportQueue = queue
        var trust = ServerTrust(certificates: presented, platformRoots: roots, validationTime: time, profile: profile)
        trust.revocation = try self.revocation.policy()
        let evaluation = await configuration.evaluate(trust, forHost: host, port: self.port)
        if let queue {
            // Bounded: 2 attempts of at most 2 seconds each, plus the retry pause.
            if !(await queue.waitForDelivery(timeout: .seconds(6))) {
                FileHandle.standardError.write(Data("pinning: gave up waiting for report delivery\n".utf8))
            }
        }
        let report = ConfigurationEvaluationReport(evaluation: evaluation, trust: trust, configuration: configuration, path: path)
        try JSONOutput.print(report, json: self.json)
        if !evaluation.isTrusted {
            throw ExitCode(1)
        }
    }
}

/// `pinning evaluate --config` output: the usual report plus how the configuration decided.
struct ConfigurationEvaluationReport: TextReport {
    var base: EvaluationReport
    var configuration: String
    var matchedEntry: String?
    /// The `excludeSubdomainFromParentPolicy` entry that exempted the host (then matchedEntry is null).
    var excludedBy: String?
    var pinsEnforced: Bool
    var pinMismatch: Bool
    var warnings: [String]
    var failureReport: PinFailureReport?
    var reportSubmitted: Bool

    init(evaluation: HostEvaluation, trust: ServerTrust, configuration: PinningConfiguration, path: String) {
        let entry = evaluation.matchedEntry.flatMap { key in configuration.entries.first { $0.key == key } }
        // The entry's own revocation replaces the trust's (as the evaluation did), so the report says what was checked.
        var judged = trust
        if let revocation = entry?.revocation { judged.revocation = revocation }
        self.base = EvaluationReport(
            verdict: evaluation.verdict,
            trust: judged,
            mode: "configuration",
            expectedPins: entry?.pins ?? [],
            host: evaluation.host
        )
        self.configuration = path
        self.matchedEntry = evaluation.matchedEntry
        self.excludedBy = evaluation.excludedBy
        self.pinsEnforced = evaluation.pinsEnforced
        self.pinMismatch = evaluation.pinMismatch
        self.warnings = evaluation.warnings
        self.base.warnings = evaluation.warnings
        self.failureReport = evaluation.failureReport
        self.reportSubmitted = evaluation.reportSubmitted
    }

    enum CodingKeys: String, CodingKey {
        case configuration, matchedEntry, excludedBy, pinsEnforced, pinMismatch, warnings, failureReport, reportSubmitted
    }

    func encode(to encoder: any Encoder) throws {
        try self.base.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.configuration, forKey: .configuration)
        // null, not absent, for an unlisted host.
        if let matchedEntry = self.matchedEntry {
            try container.encode(matchedEntry, forKey: .matchedEntry)
        } else {
            try container.encodeNil(forKey: .matchedEntry)
        }
        // null, not absent, unless an exclusion applied.
        if let excludedBy = self.excludedBy {
            try container.encode(excludedBy, forKey: .excludedBy)
        } else {
            try container.encodeNil(forKey: .excludedBy)
        }
        try container.encode(self.pinsEnforced, forKey: .pinsEnforced)
        try container.encode(self.pinMismatch, forKey: .pinMismatch)
        try container.encode(self.warnings, forKey: .warnings)
        if let failureReport = self.failureReport {
            try container.encode(failureReport, forKey: .failureReport)
        } else {
            try container.encodeNil(forKey: .failureReport)
        }
        try container.encode(self.reportSubmitted, forKey: .reportSubmitted)
    }

    var humanReadable: String {
        var lines = [self.base.humanReadable.split(separator: "\n", maxSplits: 1).first.map(String.init) ?? ""]
        if let entry = self.matchedEntry {
            let state = self.pinsEnforced ? "pins enforced" : "pins not enforced"
            lines.append("  entry: \"\(entry)\" (\(state))")
        } else if let excludedBy = self.excludedBy {
            lines.append("  entry: none (excluded from its parent's policy by \"\(excludedBy)\": not pinned; chain and name validated)")
        } else {
            lines.append("  entry: none (unlisted host)")
        }
        if self.pinMismatch {
            lines.append("  pin mismatch let through")
        }
        for warning in self.warnings {
            lines.append("  warning: \(VisibleText.escaped(warning))")  // As the base report's lines (below) are.
        }
        if self.failureReport != nil {
            lines.append("  failure report: \(self.reportSubmitted ? "submitted" : "built, not sent (no --send-reports or no reportURIs)")")
        }
        // The base report's own warning lines are the same warnings, already listed above.
        for line in self.base.humanReadable.split(separator: "\n").dropFirst() where !line.hasPrefix("  warning: ") {
            lines.append(String(line))
        }
        return lines.joined(separator: "\n")
    }
}
