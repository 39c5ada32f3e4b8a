import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// A pin set published in a generated TUF repository (served over plain http on 127.0.0.1) and followed by a
/// ``PinSetUpdater``: what it publishes, what it keeps, and what it refuses.
@Suite("PinSetUpdater: a pin set followed, kept and refused")
struct PinSetUpdaterTests {
    static let pinA = "sha256/" + Data(repeating: 0x0A, count: 32).base64EncodedString()
    static let pinB = "sha256/" + Data(repeating: 0x0B, count: 32).base64EncodedString()
    static let pinC = "sha256/" + Data(repeating: 0x0C, count: 32).base64EncodedString()

    /// A configuration pinning api.test to `pins`, anchored at `roots/root.pem`.
    static func configuration(_ pins: [String], anchor: String = "roots/root.pem", extra: String = "") -> [UInt8] {
        let list = pins.map { "\"\($0)\"" }.joined(separator: ", ")
        return Array(
            """
            {"version": 1, "domains": {"api.test": {"pins": [\(list)], "anchors": ["\(anchor)"]}\(extra)}}
            """.utf8)
    }

    /// One generated root certificate, as the pin set's anchor file.
    static let anchorPEM: [UInt8] = {
        let root = try! TestPKI.root("Pin Set Test Root")
        return Array(root.certificatePEM.utf8)
    }()

    /// A clock tests move (the TUF start time and staleness).
    final class TestClock: Sendable {
        let now = NIOLockedValueBox(Date())
        func advance(_ seconds: TimeInterval) { self.now.withLockedValue { $0 += seconds } }
        var closure: @Sendable () -> Date { { self.now.withLockedValue { $0 } } }
    }

    static func updater(
        _ publisher: TUFTestPublisher, directory: TemporaryDirectory, clock: TestClock = TestClock(), options: PinSetUpdater.Options = .init()
    ) throws -> PinSetUpdater {
        let client = try PinnedHTTPClient(evaluator: SecurityPolicy.defaultEvaluation, configuration: PinnedHTTPClientConfiguration(connectTimeout: .seconds(5)))
        return try PinSetUpdater(
            bootstrapRoot: publisher.bootstrapRoot, directory: directory.path("state"), metadataURL: publisher.metadataURL, options: options,
            fetcher: TUFHTTPFetcher(client: client, allowsPlainHTTP: true), clock: clock.closure)
    }

    static func pins(_ updater: PinSetUpdater) -> [String] {
        updater.currentConfiguration()?.configuration.entry(forHost: "api.test")?.pins.map(\.description) ?? []
    }

    @Test("the pin set and its anchor are fetched, verified and published; a restart enforces it before any request; a new version replaces it")
    func followAndPersist() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-follow")
        defer { directory.remove() }
        let publisher = try TUFTestPublisher()
        defer { publisher.server.stop() }
        publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinB]), "roots/root.pem": Self.anchorPEM])

        let updater = try Self.updater(publisher, directory: directory)
        #expect(updater.currentConfiguration() == nil)
        #expect(await updater.refresh() == .updated(version: 1))
        let current = try #require(updater.currentConfiguration())
        #expect(current.generation == 1 && current.configuration.pinsetVersion == 1)
        #expect(Self.pins(updater) == [Self.pinA, Self.pinB])
        #expect(current.configuration.entry(forHost: "api.test")?.anchors.count == 1, "the anchor came from the repository")
        let status = updater.status
        #expect(status.version == 1 && status.targetName == "pinning.json" && status.stale == false && status.lastError == nil)
        #expect(status.sha256 == TUFTestPublisherDigest.sha256(Self.configuration([Self.pinA, Self.pinB])))
        #expect(await updater.refresh() == .unchanged(version: 1))

        // A restart with the repository gone: the stored set is enforced at once.
        publisher.server.stop()
        let restarted = try Self.updater(publisher, directory: directory)
        #expect(restarted.currentConfiguration()?.generation == 1)
        #expect(Self.pins(restarted) == [Self.pinA, Self.pinB])
        guard case .failed(let line) = await restarted.refresh() else {
            Issue.record("a refresh without a repository succeeded")
            return
        }
        #expect(line.contains("cannot fetch"), "\(line)")
        #expect(Self.pins(restarted) == [Self.pinA, Self.pinB])
    }

    @Test("a new pin set replaces the old one whole (a pin withdrawn is gone) and the old set's files are removed")
    func replaceNotMerge() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-replace")
        defer { directory.remove() }
        let publisher = try TUFTestPublisher()
        defer { publisher.server.stop() }
        publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinB]), "roots/root.pem": Self.anchorPEM])
        let updater = try Self.updater(publisher, directory: directory)
        #expect(await updater.refresh() == .updated(version: 1))
        publisher.publish(["pinning.json": Self.configuration([Self.pinB, Self.pinC]), "roots/root.pem": Self.anchorPEM])
        #expect(await updater.refresh() == .updated(version: 2))
        #expect(Self.pins(updater) == [Self.pinB, Self.pinC])
        #expect(updater.currentConfiguration()?.configuration.pinsetVersion == 2)
        let stored = try FileManager.default.contentsOfDirectory(atPath: directory.path("state/pinsets"))
        #expect(stored.count == 1 && stored[0].hasPrefix("v2-"), "\(stored)")
    }

    /// An attack on a follower of version 2: `attack` changes what the repository serves; the refresh must fail with
    /// a line containing `words`, and version 2's pins stay enforced.
    static func refused(
        _ words: String, repository: TUFTestRepository = TUFTestRepository(), clock: TestClock = TestClock(),
        _ attack: (TUFTestPublisher, TestClock) throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-attack")
        defer { directory.remove() }
        let publisher = try TUFTestPublisher(repository: repository)
        defer { publisher.server.stop() }
        publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinB]), "roots/root.pem": Self.anchorPEM])
        publisher.publish(["pinning.json": Self.configuration([Self.pinB, Self.pinC]), "roots/root.pem": Self.anchorPEM])
        let updater = try Self.updater(publisher, directory: directory, clock: clock)
        #expect(await updater.refresh() == .updated(version: 2))
        try attack(publisher, clock)
        let outcome = await updater.refresh()
        guard case .failed(let line) = outcome else {
            Issue.record("not refused (\(words)): \(outcome)")
            return
        }
        #expect(line.contains(words), "\(line)")
        #expect(!line.contains("\n"), "one line: \(line)")
        #expect(Self.pins(updater) == [Self.pinB, Self.pinC], "the last good pins stay enforced")
        #expect(updater.currentConfiguration()?.generation == 2)
        #expect(updater.status.lastError == line && updater.status.version == 2)
    }

    @Test("an older timestamp served back is refused (rollback)")
    func olderTimestamp() async throws {
        try await Self.refused("timestamp: version 1 is older than the trusted version 2") { publisher, _ in
            publisher.serve("metadata/timestamp.json", publisher.history[0]["metadata/timestamp.json"]!)
        }
    }

    @Test("a replay of the whole older repository (an old signed pin set with its metadata) is refused")
    func replayWholeRepository() async throws {
        try await Self.refused("older than the trusted version") { publisher, _ in
            publisher.server.files = publisher.history[0]
        }
    }

    @Test("an older snapshot served under the new timestamp is refused")
    func olderSnapshot() async throws {
        try await Self.refused("snapshot") { publisher, _ in
            publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinC]), "roots/root.pem": Self.anchorPEM])
            publisher.serve("metadata/3.snapshot.json", publisher.history[1]["metadata/2.snapshot.json"]!)
        }
    }

    @Test("an older targets metadata served under the new snapshot is refused")
    func olderTargets() async throws {
        try await Self.refused("targets: version 2") { publisher, _ in
            publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinC]), "roots/root.pem": Self.anchorPEM])
            publisher.serve("metadata/3.targets.json", publisher.history[1]["metadata/2.targets.json"]!)
        }
    }

    @Test("an old signed pin set served where the new one's hash names it is refused (hash mismatch)")
    func replayOldPinSet() async throws {
        try await Self.refused("pinning.json") { publisher, _ in
            let files = publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinC]), "roots/root.pem": Self.anchorPEM])
            let name = try #require(files.keys.first { $0.hasPrefix("targets/") && $0.hasSuffix(".pinning.json") && files[$0] == Self.configuration([Self.pinA, Self.pinC]) })
            // The previous, validly signed pin set (same length): the length check passes, the hash does not.
            let old = Self.configuration([Self.pinA, Self.pinB])
            #expect(old.count == files[name]!.count)
            publisher.serve(name, old)
        }
    }

    @Test("a target whose bytes do not match its hash is refused")
    func tamperedTarget() async throws {
        try await Self.refused("the target has sha256") { publisher, _ in
            let content = Self.configuration([Self.pinA, Self.pinC])
            let files = publisher.publish(["pinning.json": content, "roots/root.pem": Self.anchorPEM])
            let name = try #require(files.keys.first { $0.hasSuffix(".pinning.json") && files[$0] == content })
            var tampered = content
            tampered[tampered.count / 2] ^= 0x01
            publisher.serve(name, tampered)
        }
    }

    @Test("targets signed by 1 of the 3 keys of a 2-of-3 threshold are refused")
    func threshold() async throws {
        var repository = TUFTestRepository()
        repository.targetsSigners = [TUFTestSigner(.ed25519), TUFTestSigner(.ed25519), TUFTestSigner(.ed25519)]
        repository.targetsThreshold = 2
        try await Self.refused("targets", repository: repository) { publisher, _ in
            publisher.targetsSigners = [publisher.repository.targetsSigners[0]]
            publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinC]), "roots/root.pem": Self.anchorPEM])
        }
    }

    @Test("expired metadata is refused (freeze), and the pins stay")
    func expired() async throws {
        try await Self.refused("expired") { publisher, _ in
            publisher.publish(
                ["pinning.json": Self.configuration([Self.pinA, Self.pinC]), "roots/root.pem": Self.anchorPEM],
                timestampExpires: TUFTestPublisher.rfc3339(Date().addingTimeInterval(-3600)))
        }
    }

    @Test("metadata over its cap, and a snapshot longer than the timestamp says, are refused")
    func oversizedMetadata() async throws {
        try await Self.refused("timestamp") { publisher, _ in
            publisher.serve("metadata/timestamp.json", Array(repeating: UInt8(ascii: " "), count: 20_000))
        }
        try await Self.refused("snapshot") { publisher, _ in
            publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinC]), "roots/root.pem": Self.anchorPEM])
            publisher.serve("metadata/3.snapshot.json", publisher.history[2]["metadata/3.snapshot.json"]! + Array(repeating: UInt8(ascii: " "), count: 64))
        }
    }

    @Test("a configuration larger than a configuration may be is refused before it is downloaded")
    func oversizedConfiguration() async throws {
        try await Self.refused("over the 1048576-byte cap") { publisher, _ in
            publisher.publish(["pinning.json": Array(repeating: UInt8(ascii: " "), count: 1024 * 1024 + 1)])
        }
    }

    @Test("an invalid configuration, a file outside the pin set and a client identity are refused")
    func invalidConfiguration() async throws {
        try await Self.refused("invalid pinning configuration pinning.json of pin set version 3: 1 problem: domains[\"api.test\"].pins") { publisher, _ in
            publisher.publish(["pinning.json": Self.configuration([]), "roots/root.pem": Self.anchorPEM])
        }
        try await Self.refused("is not a relative path inside the repository's targets") { publisher, _ in
            publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinC], anchor: "../../etc/ssl/cert.pem")])
        }
        try await Self.refused("not found") { publisher, _ in
            publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinC], anchor: "roots/missing.pem"), "roots/root.pem": Self.anchorPEM])
        }
        try await Self.refused("names a clientIdentity") { publisher, _ in
            let extra = #", "mtls.test": {"pins": ["\#(Self.pinA)", "\#(Self.pinB)"], "clientIdentity": {"pkcs12": "roots/root.pem"}}"#
            publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinC], extra: extra), "roots/root.pem": Self.anchorPEM])
        }
    }

    @Test("the repository gone for days: every refresh fails, the last good pins stay enforced, and staleness is reported")
    func goneForDays() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-gone")
        defer { directory.remove() }
        let clock = TestClock()
        let publisher = try TUFTestPublisher()
        let expiry = clock.now.withLockedValue { $0 }.addingTimeInterval(86400)
        publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinB]), "roots/root.pem": Self.anchorPEM], expires: TUFTestPublisher.rfc3339(expiry))
        let updater = try Self.updater(publisher, directory: directory, clock: clock)
        #expect(await updater.refresh() == .updated(version: 1))
        #expect(updater.status.stale == false)
        publisher.server.stop()

        clock.advance(3 * 86400)
        guard case .failed(let line) = await updater.refresh() else {
            Issue.record("a refresh without a repository succeeded")
            return
        }
        #expect(line.contains("cannot fetch") && line.contains("127.0.0.1"), "\(line)")
        let status = updater.status
        #expect(status.stale, "\(status)")
        // Stale since the metadata's expiry, one day after the last refresh: two days ago (to the second the clock
        // moved; the expiry was written with whole seconds).
        #expect(abs(status.secondsStale - 2 * 86400) <= 1, "\(status)")
        #expect(status.lastError == line && status.consecutiveFailures == 1)
        #expect(Self.pins(updater) == [Self.pinA, Self.pinB], "never fails open")
        // A restart keeps enforcing and keeps saying it is stale.
        let restarted = try Self.updater(publisher, directory: directory, clock: clock)
        #expect(Self.pins(restarted) == [Self.pinA, Self.pinB])
        #expect(restarted.status.stale && restarted.status.version == 1)
    }

    @Test("the schedule: the interval ± the jitter after a success, doubling retries capped at the interval after failures")
    func schedule() {
        let options = PinSetUpdater.Options(refreshInterval: .seconds(3600), jitter: 0.1, firstRetryDelay: .seconds(60))
        #expect(PinSetUpdater.nextDelay(afterFailures: 0, options: options, random: 0) == .seconds(3600))
        #expect(PinSetUpdater.nextDelay(afterFailures: 0, options: options, random: 1) == .seconds(3960))
        #expect(PinSetUpdater.nextDelay(afterFailures: 0, options: options, random: -1) == .seconds(3240))
        #expect(PinSetUpdater.nextDelay(afterFailures: 1, options: options, random: 0) == .seconds(60))
        #expect(PinSetUpdater.nextDelay(afterFailures: 2, options: options, random: 0) == .seconds(120))
        #expect(PinSetUpdater.nextDelay(afterFailures: 6, options: options, random: 0) == .seconds(1920))
        #expect(PinSetUpdater.nextDelay(afterFailures: 7, options: options, random: 0) == .seconds(3600))
        #expect(PinSetUpdater.nextDelay(afterFailures: 1000, options: options, random: 0) == .seconds(3600))
        #expect(PinSetUpdater.defaultTargetsURL(metadataURL: URL(string: "https://pins.example/repo/metadata/")!).absoluteString == "https://pins.example/repo/targets/")
        #expect(PinSetUpdater.defaultTargetsURL(metadataURL: URL(string: "http://127.0.0.1:8000/metadata")!).absoluteString == "http://127.0.0.1:8000/targets/")
    }

    @Test("without a pin set a source-following client refuses every peer; a failure report names the pin-set version it was judged under")
    func evaluatorAndReports() async throws {
        struct Empty: PinningConfigurationSource {
            func currentConfiguration() -> CurrentConfiguration? { nil }
        }
        let chain = try TestChain(host: "api.test")
        let trust = ServerTrust(certificates: [chain.leaf.certificate, chain.intermediate.certificate], platformRoots: TrustRoots([chain.root.certificate]))
        let refused = await SourcedConfigurationEvaluator(source: Empty()).evaluate(trust, forDomain: "api.test")
        #expect(refused.failure?.code == .hostNotAllowed)
        #expect(refused.failure?.reason.contains("no pin set has been verified yet") == true)

        let text = #"{"version": 1, "domains": {"api.test": {"pins": ["\#(Self.pinA)", "\#(Self.pinB)"]}}}"#
        var configuration = try PinningConfiguration(data: Data(text.utf8), baseDirectory: "/")
        configuration.pinsetVersion = 7
        let evaluation = await configuration.evaluate(trust, forHost: "api.test", port: 443)
        let report = try #require(evaluation.failureReport)
        #expect(report.pinsetVersion == 7)
        let json = String(decoding: try report.jsonData(), as: UTF8.self)
        #expect(json.contains("\"pinset-version\":7"), "\(json)")
        let decoded = try JSONDecoder().decode(PinFailureReport.self, from: try report.jsonData())
        #expect(decoded.pinsetVersion == 7)
        configuration.pinsetVersion = nil
        let local = await configuration.evaluate(trust, forHost: "api.test", port: 443)
        #expect(String(decoding: try #require(local.failureReport).jsonData(), as: UTF8.self).contains("pinset-version") == false)
    }
}

enum TUFTestPublisherDigest {
    static func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }
}
