import Foundation
import Pinning
import PinningTestSupport
import Testing

// Issue 30, end to end: `pinning check --config` and `pinning proxy` send the failure reports their entries ask for
// (reportURIs) to the real collector (the built `pinning-collector`, on a SQLite file), by default; `--no-reports`
// sends none. The reports are read back through the collector's API with curl, a client we did not write. The
// upstream is `pinning serve` on loopback; names are mapped with --resolve, so nothing leaves 127.0.0.1.

/// The built `pinning-collector` next to the `pinning` the other tests run.
enum CollectorExecutable {
    static let path: String? = {
        guard case .success(let pinning) = PinningBinary.located else { return nil }
        let candidate = pinning.deletingLastPathComponent().appendingPathComponent("pinning-collector").path
        return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
    }()
}

/// A collector, an upstream serving one chain for every test host, and a configuration with four entries whose
/// pins that chain fails: `api.test` enforced, `watch.test` report-only, `quiet.test` enforced (for the
/// --no-reports runs), each reporting to the collector, and `lost.test` reporting to a closed port.
final class ReportsFixture: @unchecked Sendable {
    static let token = "reports-e2e-token-0123456789abcdef"
    static let unrelatedPins = [
        "sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString(), "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString(),
    ]

    let directory: TemporaryDirectory
    let collector: ServerProcess
    let upstream: ServeProcess
    let configPath: String
    /// The upstream's anchor, PEM.
    let rootPEM: String
    var upstreamPort: Int { self.upstream.port }
    var collectorURL: String { "http://127.0.0.1:\(self.collector.port)" }

    init() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-reports-e2e")
        self.directory = directory
        // Until the fixture is whole no test holds it: a step that throws removes the directory here.
        var ready = false
        defer { if !ready { directory.remove() } }
        let binary = try #require(CollectorExecutable.path)
        let tokenFile = try directory.write("token", Self.token + "\n")
        self.collector = try await ServerProcess(
            binary, ["--listen", "127.0.0.1:0", "--database", "sqlite:" + directory.path("reports.db"), "--token-file", tokenFile], in: directory
        ) { line in
            let prefix = "collector listening on http://127.0.0.1:"
            guard line.hasPrefix(prefix) else { return nil }
            return Int(line.dropFirst(prefix.count).prefix { $0.isNumber })
        }
        do {
            let root = try TestPKI.root("Reports Test Root")
            let intermediate = try TestPKI.intermediate("Reports Test Intermediate", issuer: root)
            let hosts = ["api.test", "watch.test", "quiet.test", "lost.test"]
            let leaf = try TestPKI.leaf("api.test", issuer: intermediate, dnsNames: hosts)
            let chain = try directory.write("upstream-chain.pem", TestPKI.pemBundle([leaf.certificate, intermediate.certificate]))
            let key = try directory.write("upstream.key", leaf.privateKeyPEM)
            _ = try directory.write("root.pem", root.certificatePEM)
            self.rootPEM = root.certificatePEM
            self.upstream = try await ServeProcess(["--cert", chain, "--key", key], in: directory)
        } catch {
            self.collector.stop()
            throw error
        }
        let pins = "[\"\(Self.unrelatedPins[0])\", \"\(Self.unrelatedPins[1])\"]"
        let reports = "[\"http://127.0.0.1:\(self.collector.port)/reports\"]"
        // Port 1 on the loopback: nothing listens there, so delivery fails at once (connection refused).
        let closed = "[\"http://127.0.0.1:1/reports\"]"
        self.configPath = try directory.write(
            "pinning.json",
            """
            {"version": 1, "domains": {
              "api.test": {"pins": \(pins), "anchors": ["root.pem"], "anchorsOnly": true, "reportURIs": \(reports)},
              "watch.test": {"pins": \(pins), "enforce": false, "anchors": ["root.pem"], "anchorsOnly": true, "reportURIs": \(reports)},
              "quiet.test": {"pins": \(pins), "anchors": ["root.pem"], "anchorsOnly": true, "reportURIs": \(reports)},
              "lost.test": {"pins": \(pins), "anchors": ["root.pem"], "anchorsOnly": true, "reportURIs": \(closed)}
            }}
            """
        )
        ready = true
    }

    func stop() {
        self.upstream.stop()
        self.collector.stop()
    }

    func resolve(_ host: String) -> [String] { ["--resolve", "\(host):\(self.upstreamPort):127.0.0.1"] }

    func check(_ host: String, _ extra: [String] = []) async throws -> TestTools.ProcessResult {
        try await TestTools.run(
            try PinningBinary.located.get().path,
            ["check", "https://\(host):\(self.upstreamPort)/", "--config", self.configPath] + self.resolve(host) + extra,
            in: self.directory, timeout: 120
        )
    }

    /// `GET /api/reports?host=HOST` with the Bearer token, through curl: the stored rows.
    func reports(host: String) async throws -> [[String: Any]] {
        let result = try await TestTools.run(
            curlPath, ["-sS", "--fail", "--max-time", "30", "-H", "Authorization: Bearer \(Self.token)", "\(self.collectorURL)/api/reports?host=\(host)"],
            in: self.directory, timeout: 60
        )
        try #require(result.status == 0, "\(result)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
        return try #require(object["reports"] as? [[String: Any]], "\(result.stdout)")
    }

    /// The dashboard's page (`/`) with the Bearer token, through curl.
    func dashboard() async throws -> String {
        let result = try await TestTools.run(
            curlPath, ["-sS", "--fail", "--max-time", "30", "-H", "Authorization: Bearer \(Self.token)", "\(self.collectorURL)/"],
            in: self.directory, timeout: 60
        )
        try #require(result.status == 0, "\(result)")
        return result.stdout
    }

    /// The rows for `host` sent by `app`, waiting up to `seconds` for one to appear.
    func reports(host: String, app: String, within seconds: Double) async throws -> [[String: Any]] {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let rows = try await self.reports(host: host).filter { $0["appId"] as? String == app }
            if !rows.isEmpty || Date() >= deadline { return rows }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

@Suite(
    "failure reports from pinning check and pinning proxy reach the real collector",
    .serialized,
    .enabled(if: curlAvailable && CollectorExecutable.path != nil, "needs curl and the built pinning-collector")
)
struct ReportsEndToEndCLITests {
    static let libraryVersion = "swift-pinning \(SwiftPinning.version)"

    /// The fields the collector normalised from our report.
    /// `port` is the upstream's, never 443 here (a loopback port the system chose): the report says the port the
    /// connection was made to.
    static func expectReport(_ row: [String: Any], host: String, port: Int, enforced: Bool, app: String) {
        #expect(port != 443)
        #expect(row["host"] as? String == host, "\(row)")
        #expect(row["port"] as? Int == port, "the port connected to: \(row)")
        #expect(row["notedHost"] as? String == host, "\(row)")
        #expect(row["result"] as? String == "pinMismatch", "\(row)")
        #expect(row["enforced"] as? Bool == enforced, "\(row)")
        #expect(row["libraryVersion"] as? String == Self.libraryVersion, "\(row)")
        #expect(row["appId"] as? String == app, "\(row)")
        #expect(row["appVersion"] as? String == SwiftPinning.version, "\(row)")
        #expect(row["knownPins"] as? [String] == ReportsFixture.unrelatedPins.map { String($0.dropFirst("sha256/".count)) }, "\(row)")
        #expect((row["servedPins"] as? [String])?.count == 2, "the served chain's pins, computed by the collector: \(row)")
    }

    @Test("check --config: an enforced and a report-only mismatch are in the collector when check has exited; --no-reports sends none, with the same stdout and status", .timeLimit(.minutes(5)))
    func check() async throws {
        let fixture = try await ReportsFixture()
        defer {
            fixture.stop()
            fixture.directory.remove()
        }
        // Enforced: refused, exit 1. The report was delivered before the process exited (check waits for it):
        // it is in the database now, no polling.
        let enforced = try await fixture.check("api.test")
        #expect(enforced.status == 1, "\(enforced)")
        #expect(!enforced.stderr.contains("report"), "reports are silent without --verbose: \(enforced.stderr)")
        let rows = try await fixture.reports(host: "api.test")
        try #require(rows.count == 1, "\(rows) \(enforced)")
        Self.expectReport(rows[0], host: "api.test", port: fixture.upstreamPort, enforced: true, app: "pinning-cli check")

        // Report-only: trusted (the mismatch let through), exit 0, and still reported, saying so.
        let reportOnly = try await fixture.check("watch.test", ["--verbose"])
        #expect(reportOnly.status == 0, "\(reportOnly)")
        #expect(reportOnly.stderr.contains("pinning: check: report delivered to \(fixture.collectorURL)/reports after 1 attempt: HTTP 204"), "\(reportOnly.stderr)")
        let watched = try await fixture.reports(host: "watch.test")
        try #require(watched.count == 1, "\(watched)")
        Self.expectReport(watched[0], host: "watch.test", port: fixture.upstreamPort, enforced: false, app: "pinning-cli check")
        // And on the dashboard: both hosts, the app and the library that saw them.
        let page = try await fixture.dashboard()
        for text in ["api.test", "watch.test", "pinning-cli check", Self.libraryVersion] {
            #expect(page.contains(text), "\(text) on the dashboard")
        }

        // --no-reports: the same verdict, status and stdout, and nothing sent: the run without it stored one
        // report, and the run with it added no occurrence (the collector counts an identical report again).
        let quietSent = try await fixture.check("quiet.test", ["--json"])
        let quiet = try await fixture.check("quiet.test", ["--json", "--no-reports"])
        #expect(quiet.status == 1 && quietSent.status == 1, "\(quiet)")
        #expect(Self.withoutTimes(quiet.stdout) == Self.withoutTimes(quietSent.stdout), "stdout does not depend on reports")
        let quietRows = try await fixture.reports(host: "quiet.test")
        try #require(quietRows.count == 1, "\(quietRows)")
        #expect(quietRows[0]["occurrences"] as? Int == 1, "only the run without --no-reports sent one: \(quietRows)")

        // A collector that cannot be reached changes nothing but --verbose's stderr: exit 1 either way.
        let lost = try await fixture.check("lost.test")
        #expect(lost.status == 1, "\(lost)")
        #expect(!lost.stderr.contains("report"), "\(lost.stderr)")
        let lostVerbose = try await fixture.check("lost.test", ["--verbose"])
        #expect(lostVerbose.status == 1, "\(lostVerbose)")
        let notDelivered = lostVerbose.stderr.split(separator: "\n").filter { $0.contains("report not delivered to http://127.0.0.1:1/reports after 2 attempts") }
        #expect(notDelivered.count == 1, "one line: \(lostVerbose.stderr)")
        #expect(Self.withoutTimes(lost.stdout) == Self.withoutTimes(lostVerbose.stdout), "\(lost) \(lostVerbose)")
    }

    @Test("--no-reports needs a configuration: exit 2 with one line")
    func noReportsNeedsConfiguration() async throws {
        let run = try await TestTools.run(try PinningBinary.located.get().path, ["check", "https://127.0.0.1:1/", "--no-reports"], timeout: 60)
        #expect(run.status == 2, "\(run)")
        #expect(run.stderr == "pinning: --no-reports needs --config or --pinset: only a configuration's entries send failure reports\n", "\(run.stderr)")
        #expect(run.stdout.isEmpty)
    }

    @Test("proxy: a refused and a report-only upstream are reported in the background; --no-reports sends none", .timeLimit(.minutes(5)))
    func proxy() async throws {
        let fixture = try await ReportsFixture()
        defer {
            fixture.stop()
            fixture.directory.remove()
        }
        func startProxy(_ name: String, _ extra: [String]) async throws -> (Subprocess, port: Int, ca: String) {
            var arguments = ["proxy", "--config", fixture.configPath, "--listen", "127.0.0.1:0", "--ca-dir", fixture.directory.path("ca-\(name)")]
            for host in ["api.test", "watch.test", "quiet.test"] { arguments += fixture.resolve(host) }
            let process = try Subprocess(arguments + extra, in: fixture.directory)
            let lines = try await ProxyFixture.startupLines(process, count: 2)
            guard lines.count == 2, lines[0].hasPrefix("proxy listening on http://127.0.0.1:"), lines[1].hasPrefix("local CA: ") else {
                process.kill()
                throw ServeProcess.ServeError(message: "unexpected start-up lines: \(lines); stderr \(process.stderr)")
            }
            let port = Int(lines[0].split(separator: ":").last ?? "") ?? 0
            let caLine = lines[1].dropFirst("local CA: ".count)
            let ca = caLine[..<(caLine.lastIndex(of: "(") ?? caLine.endIndex)].trimmingCharacters(in: .whitespaces)
            return (process, port, ca)
        }
        func curl(_ proxy: (Subprocess, port: Int, ca: String), _ host: String) async throws -> TestTools.ProcessResult {
            try await TestTools.run(
                curlPath, ["-sS", "--max-time", "30", "-D", "-", "-x", "http://127.0.0.1:\(proxy.port)", "--cacert", proxy.ca, "https://\(host):\(fixture.upstreamPort)/"],
                in: fixture.directory, timeout: 60)
        }

        let reporting = try await startProxy("reporting", [])
        defer { reporting.0.kill() }
        let refused = try await curl(reporting, "api.test")
        #expect(refused.stdout.contains("HTTP/1.1 502 Bad Gateway"), "\(refused)")
        let rows = try await fixture.reports(host: "api.test", app: "pinning-cli proxy", within: 30)
        try #require(rows.count == 1, "\(rows); proxy stderr: \(reporting.0.stderr)")
        Self.expectReport(rows[0], host: "api.test", port: fixture.upstreamPort, enforced: true, app: "pinning-cli proxy")

        let letThrough = try await curl(reporting, "watch.test")
        #expect(letThrough.stdout.contains("HTTP/1.1 200 OK"), "report-only: the request goes through: \(letThrough)")
        let watched = try await fixture.reports(host: "watch.test", app: "pinning-cli proxy", within: 30)
        try #require(watched.count == 1, "\(watched); proxy stderr: \(reporting.0.stderr)")
        Self.expectReport(watched[0], host: "watch.test", port: fixture.upstreamPort, enforced: false, app: "pinning-cli proxy")
        #expect(reporting.0.stderr.contains("pinning: proxy: report delivered to \(fixture.collectorURL)/reports"), "\(reporting.0.stderr)")

        // --no-reports: the same refusals, nothing sent. The reporting proxy's reports arrived within moments
        // above; two seconds is ample for one the silent proxy might send. Its api.test report would be counted
        // as a second occurrence of the stored one (same source, same fields), and quiet.test would have a row.
        let silent = try await startProxy("silent", ["--no-reports"])
        defer { silent.0.kill() }
        let quiet = try await curl(silent, "quiet.test")
        #expect(quiet.stdout.contains("HTTP/1.1 502 Bad Gateway"), "\(quiet)")
        let marker = try await curl(silent, "api.test")
        #expect(marker.stdout.contains("HTTP/1.1 502 Bad Gateway"), "\(marker)")
        try await Task.sleep(for: .seconds(2))
        #expect(try await fixture.reports(host: "quiet.test").isEmpty)
        #expect(try await fixture.reports(host: "api.test").allSatisfy { $0["occurrences"] as? Int == 1 }, "the silent proxy's api.test refusal was not reported")
        #expect(!silent.0.stderr.contains("report"), "\(silent.0.stderr)")
    }

    @Test("check --pinset: the report carries the version of the pin set it was judged under", .timeLimit(.minutes(5)))
    func pinSet() async throws {
        let fixture = try await ReportsFixture()
        defer {
            fixture.stop()
            fixture.directory.remove()
        }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        let pins = ReportsFixture.unrelatedPins.map { "\"\($0)\"" }.joined(separator: ", ")
        let configuration = """
            {"version": 1, "domains": {"api.test": {"pins": [\(pins)], "anchors": ["root.pem"], "anchorsOnly": true,
              "reportURIs": ["\(fixture.collectorURL)/reports"]}}}
            """
        try repository.publish(Array(configuration.utf8), files: ["root.pem": Array(fixture.rootPEM.utf8)])
        let root = try fixture.directory.write("tuf-root.json", String(decoding: repository.bootstrapRoot, as: UTF8.self))
        let run = try await TestTools.run(
            try PinningBinary.located.get().path,
            [
                "check", "https://api.test:\(fixture.upstreamPort)/", "--pinset", repository.metadataURL.absoluteString, "--pinset-root", root,
                "--pinset-dir", fixture.directory.path("pinset-state"), "--json",
            ] + fixture.resolve("api.test"),
            in: fixture.directory, timeout: 120
        )
        #expect(run.status == 1, "\(run)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run)")
        let version = try #require((object["pinset"] as? [String: Any])?["version"] as? Int, "\(run.stdout)")
        let rows = try await fixture.reports(host: "api.test")
        try #require(rows.count == 1, "\(rows) \(run)")
        Self.expectReport(rows[0], host: "api.test", port: fixture.upstreamPort, enforced: true, app: "pinning-cli check")
        // The collector keeps the version as text (apps may send either).
        #expect(rows[0]["pinsetVersion"].map { "\($0)" } == String(version), "\(rows[0])")
    }

    /// `--json` output with its instants removed (each run judges at its own time).
    static func withoutTimes(_ text: String) -> String {
        text.replacing(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/, with: "TIME")
    }
}
