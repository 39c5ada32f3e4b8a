import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

/// Evaluating with a host pinning configuration: enforcement, report-only, expiry, anchors, unlisted hosts,
/// failure reports. Their delivery (queue, rate limit, retries, HTTPS) is tested in PinningNIOTests.
@Suite("PinningConfiguration evaluation and reports")
struct ConfigurationEvaluationTests {
    static let time = TestPKI.referenceTime
    static let year: TimeInterval = 365 * 86400

    struct PKI: Sendable {
        let api: TestChain  // api.example.com under rootA
        let other: TestChain  // a second, unrelated PKI (for "wrong" pins and anchors)
        let fleet: TestChain  // a.fleet.internal under a private root
    }

    static let fixture = Result {
        let before = ConfigurationEvaluationTests.time.addingTimeInterval(-ConfigurationEvaluationTests.year)
        let after = ConfigurationEvaluationTests.time.addingTimeInterval(ConfigurationEvaluationTests.year)
        return PKI(
            api: try TestChain(host: "api.example.com", notValidBefore: before, notValidAfter: after),
            other: try TestChain(host: "api.example.com", notValidBefore: before, notValidAfter: after, rootName: "Other Root"),
            fleet: try TestChain(host: "a.fleet.internal", notValidBefore: before, notValidAfter: after, rootName: "Fleet Root")
        )
    }

    static func pin(_ certificate: Certificate) -> String { Pin(spkiOf: certificate).description }

    static func configuration(_ domains: String, unlisted: String = "default", base: String = "/") throws -> PinningConfiguration {
        try PinningConfiguration(
            data: Data("{\"version\": 1, \"unlistedHosts\": \"\(unlisted)\", \"domains\": {\(domains)}}".utf8),
            baseDirectory: base
        )
    }

    /// The api chain presented, with platform roots = rootA (and the other PKI's root).
    static func trust(_ chain: TestChain, roots: [Certificate], at time: Date = ConfigurationEvaluationTests.time) -> ServerTrust {
        ServerTrust(certificates: chain.presented, platformRoots: TrustRoots(roots), validationTime: time)
    }

    // MARK: - Enforcement

    @Test("enforced: a pin on the validated path trusts; none refuses with pinMismatch and a report")
    func enforced() async throws {
        let pki = try Self.fixture.get()
        let roots = [pki.api.root.certificate, pki.other.root.certificate]
        let good = try Self.configuration(
            "\"api.example.com\": {\"pins\": [\"\(Self.pin(pki.api.intermediate.certificate))\", \"\(Self.pin(pki.other.root.certificate))\"]}"
        )
        let trusted = await good.evaluate(Self.trust(pki.api, roots: roots), forHost: "API.example.com.", port: 8443)
        #expect(trusted.isTrusted, "\(String(describing: trusted.verdict.failure))")
        #expect(trusted.matchedEntry == "api.example.com" && trusted.pinsEnforced && !trusted.pinMismatch)
        #expect(trusted.failureReport == nil && trusted.warnings.isEmpty)

        let wrong = try Self.configuration(
            "\"api.example.com\": {\"pins\": [\"\(Self.pin(pki.other.intermediate.certificate))\", \"\(Self.pin(pki.other.root.certificate))\"], \"reportURIs\": [\"http://127.0.0.1:9/r\"]}"
        )
        let refused = await wrong.evaluate(Self.trust(pki.api, roots: roots), forHost: "api.example.com", port: 8443)
        #expect(refused.verdict.failure?.code == .pinMismatch)
        #expect(refused.pinsEnforced && !refused.pinMismatch)
        let report = try #require(refused.failureReport)
        #expect(report.port == 8443 && report.hostname == "api.example.com" && report.validationResult == "pinMismatch")
        #expect(!refused.reportSubmitted, "no queue configured")
        // Through the protocol adapters use.
        #expect(await wrong.evaluate(Self.trust(pki.api, roots: roots), forDomain: "api.example.com").failure?.code == .pinMismatch)
        #expect(await good.evaluate(Self.trust(pki.api, roots: roots), forDomain: "api.example.com").isTrusted)
    }

    @Test("a pinned certificate appended by the server, off the validated path, does not satisfy the pins")
    func pinOffPathDoesNotCount() async throws {
        let pki = try Self.fixture.get()
        let configuration = try Self.configuration(
            "\"api.example.com\": {\"pins\": [\"\(Self.pin(pki.other.intermediate.certificate))\", \"\(Self.pin(pki.other.root.certificate))\"]}"
        )
        var trust = Self.trust(pki.api, roots: [pki.api.root.certificate, pki.other.root.certificate])
        trust.certificates += [pki.other.intermediate.certificate]
        let result = await configuration.evaluate(trust, forHost: "api.example.com")
        #expect(result.verdict.failure?.code == .pinMismatch)
    }

    @Test("a matched host's chain and name are always checked, whatever the pins say")
    func chainAndNameAlwaysChecked() async throws {
        let pki = try Self.fixture.get()
        let pins = "[\"\(Self.pin(pki.api.intermediate.certificate))\", \"\(Self.pin(pki.api.root.certificate))\"]"
        let configuration = try Self.configuration("\"**.example.com\": {\"pins\": \(pins)}")
        // Unknown root: the pinned intermediate is presented but no path validates.
        let unknownRoot = await configuration.evaluate(Self.trust(pki.api, roots: [pki.other.root.certificate]), forHost: "api.example.com")
        #expect(unknownRoot.verdict.failure?.code == .noPathToAnchor)
        // Right chain, wrong name.
        let wrongName = await configuration.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "www.example.com")
        #expect(wrongName.matchedEntry == "**.example.com")
        #expect(wrongName.verdict.failure?.code == .hostnameMismatch)
    }

    // MARK: - Report-only and expiry

    @Test("report-only: a mismatch is trusted, flagged, warned about and reported")
    func reportOnly() async throws {
        let pki = try Self.fixture.get()
        let configuration = try Self.configuration(
            "\"example.com\": {\"pins\": [\"\(Self.pin(pki.other.root.certificate))\"], \"includeSubdomains\": true, \"enforce\": false}"
        )
        let result = await configuration.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com")
        let chain = try result.verdict.get()
        #expect(chain.validatedChain != nil && chain.basis == .validatedPath)
        #expect(result.matchedEntry == "example.com" && !result.pinsEnforced && result.pinMismatch)
        #expect(result.warnings.count == 1 && result.warnings[0].contains("report-only"))
        #expect(chain.warnings == result.warnings)
        let report = try #require(result.failureReport)
        #expect(report.includeSubdomains && report.notedHostname == "example.com")
        #expect(report.validatedCertificateChain.count == 3)
    }

    @Test("report-only still refuses a chain that does not validate or a wrong name")
    func reportOnlyStillValidates() async throws {
        let pki = try Self.fixture.get()
        let configuration = try Self.configuration(
            "\"**.example.com\": {\"pins\": [\"\(Self.pin(pki.other.root.certificate))\"], \"enforce\": false}"
        )
        let unknownRoot = await configuration.evaluate(Self.trust(pki.api, roots: [pki.other.root.certificate]), forHost: "api.example.com")
        #expect(unknownRoot.verdict.failure?.code == .noPathToAnchor)
        #expect(!unknownRoot.pinMismatch && unknownRoot.failureReport == nil)
        let wrongName = await configuration.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "x.example.com")
        #expect(wrongName.verdict.failure?.code == .hostnameMismatch)
    }

    @Test("after expires: pins are not enforced (with a warning, no report), chain and name still are")
    func expiry() async throws {
        let pki = try Self.fixture.get()
        let wrongPins = "[\"\(Self.pin(pki.other.intermediate.certificate))\", \"\(Self.pin(pki.other.root.certificate))\"]"
        let expires = RFC3339.format(Self.time.addingTimeInterval(-1))
        let configuration = try Self.configuration(
            "\"api.example.com\": {\"pins\": \(wrongPins), \"expires\": \"\(expires)\", \"reportURIs\": [\"http://127.0.0.1:9/\"]}"
        )
        let after = await configuration.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com")
        #expect(after.isTrusted)
        #expect(!after.pinsEnforced && after.pinMismatch && after.failureReport == nil)
        #expect(after.warnings.contains { $0.contains("expired at \(expires)") })

        let before = await configuration.evaluate(
            Self.trust(pki.api, roots: [pki.api.root.certificate], at: Self.time.addingTimeInterval(-2)),
            forHost: "api.example.com"
        )
        #expect(before.verdict.failure?.code == .pinMismatch && before.pinsEnforced)

        let untrustedChain = await configuration.evaluate(Self.trust(pki.api, roots: [pki.other.root.certificate]), forHost: "api.example.com")
        #expect(untrustedChain.verdict.failure?.code == .noPathToAnchor)
        let expiredMatching = try Self.configuration(
            "\"*.example.com\": {\"pins\": \(wrongPins), \"expires\": \"\(expires)\"}"
        )
        let nameMismatch = await expiredMatching.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "www.example.com")
        #expect(nameMismatch.verdict.failure?.code == .hostnameMismatch)
    }

    // MARK: - Anchors and unlisted hosts

    @Test("entry anchors are added to the platform roots, or replace them with anchorsOnly")
    func anchors() async throws {
        let pki = try Self.fixture.get()
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try directory.write("certs/fleet-root.pem", TestPKI.pemBundle([pki.fleet.root.certificate]))
        let pins = "[\"\(Self.pin(pki.fleet.intermediate.certificate))\", \"\(Self.pin(pki.other.root.certificate))\"]"
        let added = try Self.configuration("\"**.fleet.internal\": {\"pins\": \(pins), \"anchors\": [\"certs/fleet-root.pem\"]}", base: directory.path)
        let result = await added.evaluate(Self.trust(pki.fleet, roots: [pki.api.root.certificate]), forHost: "a.fleet.internal")
        #expect(result.isTrusted, "\(String(describing: result.verdict.failure))")

        // anchorsOnly: the platform root that would validate the other PKI's chain is no longer trusted.
        let only = try Self.configuration(
            "\"**.example.com\": {\"pins\": [\"\(Self.pin(pki.api.intermediate.certificate))\", \"\(Self.pin(pki.api.root.certificate))\"], \"anchors\": [\"certs/fleet-root.pem\"], \"anchorsOnly\": true}",
            base: directory.path
        )
        let refused = await only.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com")
        #expect(refused.verdict.failure?.code == .noPathToAnchor)
        // Without the entry's anchors the fleet chain is unknown.
        let unlisted = await added.evaluate(Self.trust(pki.fleet, roots: [pki.api.root.certificate]), forHost: "fleet.example.net")
        #expect(unlisted.matchedEntry == nil)
    }

    @Test("unlisted hosts: default gets normal validation, reject is refused with hostNotAllowed")
    func unlistedHosts() async throws {
        let pki = try Self.fixture.get()
        let entry = "\"pinned.example.net\": {\"pins\": [\"\(Self.pin(pki.other.intermediate.certificate))\", \"\(Self.pin(pki.other.root.certificate))\"]}"
        let lenient = try Self.configuration(entry)
        let normal = await lenient.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com")
        #expect(normal.isTrusted && normal.matchedEntry == nil && !normal.pinsEnforced && !normal.pinMismatch)
        let unknownRoot = await lenient.evaluate(Self.trust(pki.api, roots: [pki.other.root.certificate]), forHost: "api.example.com")
        #expect(unknownRoot.verdict.failure?.code == .noPathToAnchor)
        let wrongName = await lenient.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "www.example.com")
        #expect(wrongName.verdict.failure?.code == .hostnameMismatch)

        let strict = try Self.configuration(entry, unlisted: "reject")
        let rejected = await strict.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com")
        let failure = try #require(rejected.verdict.failure)
        #expect(failure.code == .hostNotAllowed && failure.description.contains("api.example.com"))
        #expect(rejected.matchedEntry == nil)
        // No host at all: never waved through.
        #expect(await lenient.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forDomain: nil).failure?.code == .hostNotAllowed)
    }

    // MARK: - Reports

    @Test("the report has exactly the RFC 7469 keys plus validation-result, enforce-pinning and library-version, PEM chains and pin-sha256 pins")
    func reportShape() async throws {
        let pki = try Self.fixture.get()
        let pinC = Pin(spkiOf: pki.other.intermediate.certificate)
        let pinD = Pin(spkiOf: pki.other.root.certificate)
        let configuration = try Self.configuration("\"api.example.com\": {\"pins\": [\"\(pinC)\", \"\(pinD)\"]}")
        let result = await configuration.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com", port: 443)
        let report = try #require(result.failureReport)
        let object = try #require(try JSONSerialization.jsonObject(with: try report.jsonData()) as? [String: Any])
        #expect(
            Set(object.keys) == [
                "date-time", "hostname", "port", "effective-expiration-date", "include-subdomains", "noted-hostname",
                "served-certificate-chain", "validated-certificate-chain", "known-pins", "validation-result",
                "enforce-pinning", "library-version",
            ]
        )
        #expect(object["date-time"] as? String == RFC3339.format(Self.time))
        #expect(object["effective-expiration-date"] is NSNull)
        #expect(object["known-pins"] as? [String] == ["pin-sha256=\"\(pinC.base64)\"", "pin-sha256=\"\(pinD.base64)\""])
        let served = try #require(object["served-certificate-chain"] as? [String])
        #expect(served.count == 2 && served.allSatisfy { $0.hasPrefix("-----BEGIN CERTIFICATE-----\n") })
        #expect(try CertificateLoader.certificates(from: Array(served.joined().utf8), origin: "report") == pki.api.presented)
        let validated = try #require(object["validated-certificate-chain"] as? [String])
        #expect(try CertificateLoader.certificates(from: Array(validated.joined().utf8), origin: "report") == pki.api.all)
        #expect(object["validation-result"] as? String == "pinMismatch")
        #expect(object["enforce-pinning"] as? Bool == true)
        #expect(object["library-version"] as? String == "swift-pinning \(SwiftPinning.version)")
        // A report-only entry says so.
        let reportOnly = try Self.configuration("\"api.example.com\": {\"pins\": [\"\(pinC)\"], \"enforce\": false}")
        let letThrough = await reportOnly.evaluate(Self.trust(pki.api, roots: [pki.api.root.certificate]), forHost: "api.example.com", port: 443)
        #expect(letThrough.isTrusted && letThrough.failureReport?.enforcePinning == false)
        // Round trip.
        #expect(try JSONDecoder().decode(PinFailureReport.self, from: try report.jsonData()) == report)
        // An impossible date is refused with the reason, as --at refuses it.
        var impossible = object
        impossible["date-time"] = "2030-02-30T00:00:00Z"
        do {
            _ = try JSONDecoder().decode(PinFailureReport.self, from: try JSONSerialization.data(withJSONObject: impossible))
            Issue.record("2030-02-30 was accepted")
        } catch DecodingError.dataCorrupted(let context) {
            #expect(context.debugDescription == "not an RFC 3339 date-time: day 30 does not exist: February 2030 has 28 days", "\(context)")
        }
    }
}

/// A ``PinFailureReporting`` that records what it is handed and answers as told: the core's side of report
/// delivery, without any I/O.
final class RecordingReporter: PinFailureReporting, @unchecked Sendable {
    private let lock = NSLock()
    private var received: [(report: PinFailureReport, uris: [URL])] = []
    let accepts: Bool

    init(accepts: Bool) { self.accepts = accepts }

    var submissions: [(report: PinFailureReport, uris: [URL])] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.received
    }

    func submit(_ report: PinFailureReport, to uris: [URL]) async -> Bool {
        self.lock.withLock { self.received.append((report, uris)) }
        return self.accepts
    }
}

extension ConfigurationEvaluationTests {
    @Test("a mismatch report is handed to the configuration's reporter with the entry's URIs; its answer is reportSubmitted")
    func reporterProtocol() async throws {
        let pki = try Self.fixture.get()
        let uris = ["https://reports.example.com/pins", "http://127.0.0.1:9/r"]
        var configuration = try Self.configuration(
            "\"api.example.com\": {\"pins\": [\"\(Self.pin(pki.other.root.certificate))\"], \"enforce\": false, \"reportURIs\": [\"\(uris[0])\", \"\(uris[1])\"]}"
        )
        let accepting = RecordingReporter(accepts: true)
        configuration.reportQueue = accepting
        let trust = Self.trust(pki.api, roots: [pki.api.root.certificate])
        let first = await configuration.evaluate(trust, forHost: "api.example.com", port: 8443)
        #expect(first.isTrusted && first.pinMismatch && first.reportSubmitted)
        let submitted = accepting.submissions
        try #require(submitted.count == 1)
        #expect(submitted[0].report == first.failureReport)
        #expect(submitted[0].uris.map(\.absoluteString) == uris)

        // A reporter that drops the report (rate-limited, say): the verdict is the same, reportSubmitted false.
        let dropping = RecordingReporter(accepts: false)
        configuration.reportQueue = dropping
        let second = await configuration.evaluate(trust, forHost: "api.example.com", port: 8443)
        #expect(second.isTrusted && second.pinMismatch && !second.reportSubmitted)
        #expect(dropping.submissions.count == 1)

        // A matching pin: nothing is handed over.
        var matching = try Self.configuration(
            "\"api.example.com\": {\"pins\": [\"\(Self.pin(pki.api.intermediate.certificate))\", \"\(Self.pin(pki.other.root.certificate))\"], \"reportURIs\": [\"\(uris[0])\"]}"
        )
        let idle = RecordingReporter(accepts: true)
        matching.reportQueue = idle
        let good = await matching.evaluate(trust, forHost: "api.example.com")
        #expect(good.isTrusted && !good.reportSubmitted && idle.submissions.isEmpty)
    }
}
