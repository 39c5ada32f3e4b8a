import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// A pin set published by ``TUFRepositoryWriter`` (what `pinning pinset` uses), served as static files over plain
/// http on 127.0.0.1 and followed by a ``PinSetUpdater``: what it publishes, what it keeps, and what it refuses.
/// Attacks change the files served, as an attacker holding the file server would; the one attack no valid
/// repository can hold (too few signatures of a threshold) uses hand-made metadata (``TUFTestPublisher``).
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
        bootstrapRoot: [UInt8], metadataURL: URL, directory: TemporaryDirectory, clock: TestClock = TestClock(), options: PinSetUpdater.Options = .init()
    ) throws -> PinSetUpdater {
        let client = try PinnedHTTPClient(evaluator: SecurityPolicy.defaultEvaluation, configuration: PinnedHTTPClientConfiguration(connectTimeout: .seconds(5)))
        return try PinSetUpdater(
            bootstrapRoot: bootstrapRoot, directory: directory.path("state"), metadataURL: metadataURL, options: options,
            fetcher: TUFHTTPFetcher(client: client, allowsPlainHTTP: true), clock: clock.closure)
    }

    static func updater(_ repository: PinSetTestRepository, directory: TemporaryDirectory, clock: TestClock = TestClock()) throws -> PinSetUpdater {
        try Self.updater(bootstrapRoot: repository.bootstrapRoot, metadataURL: repository.metadataURL, directory: directory, clock: clock)
    }

    static func pins(_ updater: PinSetUpdater) -> [String] {
        updater.currentConfiguration()?.configuration.entry(forHost: "api.test")?.pins.map(\.description) ?? []
    }

    static let anchorFiles = ["roots/root.pem": Self.anchorPEM]

    @Test("the pin set and its anchor are fetched, verified and published; a restart enforces it before any request; a new version replaces it")
    func followAndPersist() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-follow")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        try repository.publish(Self.configuration([Self.pinA, Self.pinB]), files: Self.anchorFiles)

        let updater = try Self.updater(repository, directory: directory)
        #expect(updater.currentConfiguration() == nil)
        #expect(await updater.refresh() == .updated(version: 2))
        let current = try #require(updater.currentConfiguration())
        #expect(current.generation == 2 && current.configuration.pinsetVersion == 2)
        #expect(Self.pins(updater) == [Self.pinA, Self.pinB])
        #expect(current.configuration.entry(forHost: "api.test")?.anchors.count == 1, "the anchor came from the repository")
        let status = updater.status
        #expect(status.version == 2 && status.targetName == "pinning.json" && status.stale == false && status.lastError == nil)
        #expect(status.sha256 == TUFTestPublisherDigest.sha256(Self.configuration([Self.pinA, Self.pinB])))
        #expect(await updater.refresh() == .unchanged(version: 2))

        // A restart with the repository gone: the stored set is enforced at once.
        repository.server.stop()
        let restarted = try Self.updater(repository, directory: directory)
        #expect(restarted.currentConfiguration()?.generation == 2)
        #expect(Self.pins(restarted) == [Self.pinA, Self.pinB])
        guard case .failed(let line) = await restarted.refresh() else {
            Issue.record("a refresh without a repository succeeded")
            return
        }
        #expect(line.contains("cannot fetch"), "\(line)")
        #expect(Self.pins(restarted) == [Self.pinA, Self.pinB])
    }

    @Test("a refresh with nothing new asks for two files only: the next root version (TUF's root update, §5.3.3) and timestamp.json")
    func unchangedRefreshRequests() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-requests")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        try repository.publish(Self.configuration([Self.pinA, Self.pinB]), files: Self.anchorFiles)
        let updater = try Self.updater(repository, directory: directory)
        #expect(await updater.refresh() == .updated(version: 2))
        let before = repository.server.requests.count
        for _ in 0..<3 {
            #expect(await updater.refresh() == .unchanged(version: 2))
        }
        let paths = repository.server.requests.dropFirst(before).map(\.requestLine)
        #expect(paths == Array(repeating: ["GET /metadata/2.root.json HTTP/1.1", "GET /metadata/timestamp.json HTTP/1.1"], count: 3).flatMap { $0 }, "\(paths)")
    }

    /// The names in `path` that begin with a dot (temporary files, staging directories), with those below them;
    /// not the state directory's `.pinset.lock`, which stays (it keeps refreshes sharing the directory apart).
    static func leftovers(_ path: String) -> [String] {
        (FileManager.default.enumerator(atPath: path)?.allObjects.compactMap { $0 as? String } ?? []).filter { name in
            name != ".pinset.lock" && name.split(separator: "/").contains { $0.hasPrefix(".") }
        }
    }

    @Test("a start while a refresh holds the state lock does not wait for it: it says so in the log, and the bootstrap root is stored only where none is")
    func startWithoutTheLock() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-unlocked")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        try repository.publish(Self.configuration([Self.pinA, Self.pinB]), files: Self.anchorFiles)
        try FileManager.default.createDirectory(atPath: directory.path("state"), withIntermediateDirectories: true)
        // The lock a refresh of another updater sharing the directory holds (flock locks of two descriptors conflict).
        let held = open(directory.path("state/.pinset.lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        try #require(held >= 0)
        defer { close(held) }
        try #require(flock(held, LOCK_EX | LOCK_NB) == 0)
        let lines = NIOLockedValueBox<[String]>([])
        let client = try PinnedHTTPClient(evaluator: SecurityPolicy.defaultEvaluation, configuration: PinnedHTTPClientConfiguration(connectTimeout: .seconds(5)))
        let updater = try PinSetUpdater(
            bootstrapRoot: repository.bootstrapRoot, directory: directory.path("state"), metadataURL: repository.metadataURL,
            fetcher: TUFHTTPFetcher(client: client, allowsPlainHTTP: true), log: { line in lines.withLockedValue { $0.append(line) } })
        let logged = lines.withLockedValue { $0 }
        #expect(logged.contains { $0.contains(".pinset.lock: held by a refresh sharing the directory; reading the stored pin set without the lock") }, "\(logged)")
        let stored = try #require(FileManager.default.contents(atPath: directory.path("state/metadata/root.json")))
        #expect(Array(stored) == repository.bootstrapRoot)
        // A root.json already there (a newer root a refresh stored) is never replaced by the bootstrap one.
        let other = Array("not the bootstrap root".utf8)
        try FileManager.default.createDirectory(atPath: directory.path("other"), withIntermediateDirectories: true)
        try Data(other).write(to: URL(fileURLWithPath: directory.path("other/root.json")))
        #expect(try TUFUpdater.initializeIfAbsent(metadataDirectory: directory.path("other"), trustedRoot: repository.bootstrapRoot) == false)
        #expect(Array(try #require(FileManager.default.contents(atPath: directory.path("other/root.json")))) == other)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("other")) == ["root.json"])
        // Once the lock is free, a refresh takes it and applies the set.
        flock(held, LOCK_UN)
        let outcome = await updater.refresh()
        #expect(outcome == .updated(version: 2), "\(outcome) \(lines.withLockedValue { $0 })")
    }

    @Test("a pin set is stored whole where current.json names it (a file in a subdirectory included); no other set's directory nor a temporary file is left, after an apply nor after a refusal")
    func storedWhole() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-stored")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        let configuration = Self.configuration([Self.pinA, Self.pinB])
        try repository.publish(configuration, files: Self.anchorFiles)
        let updater = try Self.updater(repository, directory: directory)
        #expect(await updater.refresh() == .updated(version: 2))
        let record = try #require(try JSONSerialization.jsonObject(with: Data(Self.contents(directory.path("state/current.json")))) as? [String: Any])
        let stored = try #require(record["directory"] as? String)
        #expect(try Self.contents(directory.path("state/\(stored)/pinning.json")) == configuration)
        #expect(try Self.contents(directory.path("state/\(stored)/roots/root.pem")) == Self.anchorPEM)
        #expect(Self.leftovers(directory.path("state")).isEmpty, "\(Self.leftovers(directory.path("state")))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("state/pinsets")) == [String(stored.dropFirst("pinsets/".count))])

        // Refused after its files were written (the configuration is invalid): that set's directory goes too.
        try repository.publish(Self.configuration([]), files: Self.anchorFiles)
        guard case .failed = await updater.refresh() else {
            Issue.record("an invalid configuration was applied")
            return
        }
        #expect(Self.pins(updater) == [Self.pinA, Self.pinB])
        #expect(Self.leftovers(directory.path("state")).isEmpty, "\(Self.leftovers(directory.path("state")))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("state/pinsets")) == [String(stored.dropFirst("pinsets/".count))])
    }

    @Test("a leftover set that cannot be removed is logged, never trusted: the commit names the new set, and a restart loads only that one")
    func leftoverNotRemoved() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-leftover")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        try repository.publish(Self.configuration([Self.pinA, Self.pinB]), files: Self.anchorFiles)
        let lines = NIOLockedValueBox<[String]>([])
        let client = try PinnedHTTPClient(evaluator: SecurityPolicy.defaultEvaluation, configuration: PinnedHTTPClientConfiguration(connectTimeout: .seconds(5)))
        let updater = try PinSetUpdater(
            bootstrapRoot: repository.bootstrapRoot, directory: directory.path("state"), metadataURL: repository.metadataURL,
            fetcher: TUFHTTPFetcher(client: client, allowsPlainHTTP: true), log: { line in lines.withLockedValue { $0.append(line) } })
        #expect(await updater.refresh() == .updated(version: 2))
        // Two half-written sets, as a crash or a failed removal leaves them, each with a configuration pinning A and C.
        // One is named `v9\xFF`, which FileManager lists as `v9\u{FFFD}`, a name that does not exist, so removing
        // it fails (a failure this test can cause as root, where permissions would not stop a removal).
        let pinsets = directory.path("state/pinsets")
        let planted: [[UInt8]] = [Array("v9-leftover".utf8), [0x76, 0x39, 0xFF]]
        for name in planted {
            let path = Array(pinsets.utf8) + [0x2F] + name
            try #require(mkdir(path.map { CChar(bitPattern: $0) } + [0], 0o755) == 0)
            let file = (path + Array("/pinning.json".utf8)).map { CChar(bitPattern: $0) } + [0]
            let descriptor = open(file, O_WRONLY | O_CREAT | O_EXCL, 0o644)
            try #require(descriptor >= 0)
            let bytes = Self.configuration([Self.pinA, Self.pinC])
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            close(descriptor)
            try #require(written == bytes.count)
        }

        try repository.publish(Self.configuration([Self.pinB, Self.pinC]), files: Self.anchorFiles)
        #expect(await updater.refresh() == .updated(version: 3))
        #expect(Self.pins(updater) == [Self.pinB, Self.pinC])
        let unremovable = pinsets + "/v9\u{FFFD}: cannot remove this unused pin set directory (it is not used): "
        #expect(lines.withLockedValue { $0 }.contains { $0.hasPrefix(unremovable) }, "\(lines.withLockedValue { $0 })")
        let left = try FileManager.default.contentsOfDirectory(atPath: pinsets).sorted()
        #expect(left.count == 2 && left[0].hasPrefix("v3-") && left[1] == "v9\u{FFFD}", "the removable leftover went: \(left)")

        // A restart enforces the set current.json names, not a leftover.
        repository.server.stop()
        let restarted = try Self.updater(repository, directory: directory)
        #expect(Self.pins(restarted) == [Self.pinB, Self.pinC])
        #expect(restarted.currentConfiguration()?.generation == 3)
    }

    @Test("a refresh with nothing new leaves current.json as it is; one whose metadata expires later (a renewed timestamp) records the new expiry, which a restart reads")
    func unchangedRefreshWrites() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-unchanged-writes")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        try repository.publish(Self.configuration([Self.pinA, Self.pinB]), files: Self.anchorFiles)
        let clock = TestClock()
        let updater = try Self.updater(repository, directory: directory, clock: clock)
        #expect(await updater.refresh() == .updated(version: 2))
        let written = try Self.contents(directory.path("state/current.json"))
        let freshUntil = try #require(updater.status.freshUntil)

        clock.advance(60)
        #expect(await updater.refresh() == .unchanged(version: 2))
        #expect(try Self.contents(directory.path("state/current.json")) == written, "nothing a restart relies on changed")
        #expect(updater.status.refreshed == clock.closure(), "the refresh is still reported")

        // The timestamp renewed a day later: the set is the same, its metadata fresh for longer.
        try repository.writer.renewTimestamp(timestampKey: repository.timestampKey, now: Date().addingTimeInterval(86_400))
        #expect(await updater.refresh() == .unchanged(version: 2))
        let renewed = try #require(updater.status.freshUntil)
        #expect(renewed > freshUntil)
        #expect(try Self.contents(directory.path("state/current.json")) != written)
        repository.server.stop()
        let restarted = try Self.updater(repository, directory: directory, clock: clock)
        #expect(restarted.status.freshUntil == renewed && restarted.status.version == 2, "\(restarted.status)")
    }

    @Test("a new pin set replaces the old one whole (a pin withdrawn is gone) and the old set's files are removed")
    func replaceNotMerge() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-replace")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        try repository.publish(Self.configuration([Self.pinA, Self.pinB]), files: Self.anchorFiles)
        let updater = try Self.updater(repository, directory: directory)
        #expect(await updater.refresh() == .updated(version: 2))
        try repository.publish(Self.configuration([Self.pinB, Self.pinC]), files: Self.anchorFiles)
        #expect(await updater.refresh() == .updated(version: 3))
        #expect(Self.pins(updater) == [Self.pinB, Self.pinC])
        #expect(updater.currentConfiguration()?.configuration.pinsetVersion == 3)
        let stored = try FileManager.default.contentsOfDirectory(atPath: directory.path("state/pinsets"))
        #expect(stored.count == 1 && stored[0].hasPrefix("v3-"), "\(stored)")
    }

    @Test("updaters sharing one state directory, refreshing at once, all succeed, round after round; the directory holds one whole set")
    func sharedDirectory() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-shared")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        // Each its own updater (its own actor and lock descriptor), as separate client processes on one --pinset-dir.
        let updaters = try (0..<8).map { _ in try Self.updater(repository, directory: directory) }
        for round in 0..<4 {
            let pins = round.isMultiple(of: 2) ? [Self.pinA, Self.pinB] : [Self.pinB, Self.pinC]
            try repository.publish(Self.configuration(pins, extra: String(repeating: " ", count: round)), files: Self.anchorFiles)
            let outcomes = await withTaskGroup(of: PinSetUpdater.Outcome.self) { group in
                for updater in updaters { group.addTask { await updater.refresh() } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.allSatisfy { $0 == .updated(version: round + 2) }, "round \(round): \(outcomes)")
            for updater in updaters { #expect(Self.pins(updater) == pins, "round \(round)") }
            let stored = try FileManager.default.contentsOfDirectory(atPath: directory.path("state/pinsets"))
            #expect(stored.count == 1 && stored.first?.hasPrefix("v\(round + 2)-") == true, "round \(round): \(stored)")
        }
        // A start reads the set the last commit named, whole.
        let restarted = try Self.updater(repository, directory: directory)
        #expect(restarted.currentConfiguration()?.generation == 5 && restarted.status.lastError == nil, "\(restarted.status)")
    }

    @Test("custom.pinset.files is the publisher's word: a file the configuration names is fetched from the target it maps to, kept across a restart; one it does not list is refused")
    func fileMapping() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-mapping")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        // The anchor the configuration calls roots/root.pem lives at another target path; a decoy sits at roots/root.pem.
        let configuration = Self.configuration([Self.pinA, Self.pinB])
        let mapping = TUFJSON.object(
            TUFJSONObject([("pinset", .object(TUFJSONObject([("files", .object(TUFJSONObject([("roots/root.pem", .string("anchors/v7/fleet.pem"))])!))])!))])!)
        try repository.writer.publish(
            [
                .init(path: "pinning.json", contents: configuration, custom: mapping), .init(path: "anchors/v7/fleet.pem", contents: Self.anchorPEM),
                .init(path: "roots/root.pem", contents: Array("not a certificate".utf8)),
            ],
            targetsKey: repository.targetsKey, snapshotKey: repository.snapshotKey, timestampKey: repository.timestampKey)
        let updater = try Self.updater(repository, directory: directory)
        #expect(await updater.refresh() == .updated(version: 2), "\(updater.status)")
        #expect(updater.currentConfiguration()?.configuration.entry(forHost: "api.test")?.anchors.count == 1, "the mapped target was used, not the decoy")
        #expect(await updater.refresh() == .unchanged(version: 2))
        let restarted = try Self.updater(repository, directory: directory)
        #expect(restarted.currentConfiguration()?.generation == 2, "\(restarted.status)")

        // The same configuration, its mapping now silent about the anchor: refused, version 2 stays.
        let silent = TUFJSON.object(TUFJSONObject([("pinset", .object(TUFJSONObject([("files", .object(TUFJSONObject([])!))])!))])!)
        try repository.writer.publish(
            [.init(path: "pinning.json", contents: Self.configuration([Self.pinA, Self.pinC]), custom: silent)],
            targetsKey: repository.targetsKey, snapshotKey: repository.snapshotKey, timestampKey: repository.timestampKey)
        guard case .failed(let line) = await restarted.refresh() else {
            Issue.record("a configuration naming a file its mapping does not list was accepted")
            return
        }
        #expect(line.contains("the configuration names roots/root.pem, which its target's custom.pinset.files does not list"), "\(line)")
        #expect(Self.pins(restarted) == [Self.pinA, Self.pinB])
    }

    /// An attack on a follower of version 3 (the repository's second publication): `attack` changes what the file
    /// server serves, given a copy of the repository as it was at version 2; the refresh must fail with a line
    /// containing `words`, and version 3's pins stay enforced.
    static func refused(_ words: String, clock: TestClock = TestClock(), _ attack: (PinSetTestRepository, String) throws -> Void) async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-attack")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        try repository.publish(Self.configuration([Self.pinA, Self.pinB]), files: Self.anchorFiles)
        let old = try repository.copy()
        try repository.publish(Self.configuration([Self.pinB, Self.pinC]), files: Self.anchorFiles)
        let updater = try Self.updater(repository, directory: directory, clock: clock)
        #expect(await updater.refresh() == .updated(version: 3))
        try attack(repository, old)
        try await Self.expectRefused(updater, words, enforcing: [Self.pinB, Self.pinC], version: 3)
    }

    static func expectRefused(_ updater: PinSetUpdater, _ words: String, enforcing pins: [String], version: Int) async throws {
        let outcome = await updater.refresh()
        guard case .failed(let line) = outcome else {
            Issue.record("not refused (\(words)): \(outcome)")
            return
        }
        #expect(line.contains(words), "\(line)")
        #expect(!line.contains("\n"), "one line: \(line)")
        #expect(Self.pins(updater) == pins, "the last good pins stay enforced")
        #expect(updater.currentConfiguration()?.generation == version)
        #expect(updater.status.lastError == line && updater.status.version == version)
    }

    static func contents(_ path: String) throws -> [UInt8] {
        try #require(FileManager.default.contents(atPath: path).map { Array($0) }, "\(path)")
    }

    @Test("an older timestamp served back is refused (rollback)")
    func olderTimestamp() async throws {
        try await Self.refused("timestamp: version 2 is older than the trusted version 3") { repository, old in
            try repository.overwrite("metadata/timestamp.json", try Self.contents(old + "/metadata/timestamp.json"))
        }
    }

    @Test("a replay of the whole older repository (an old signed pin set with its metadata) is refused")
    func replayWholeRepository() async throws {
        try await Self.refused("older than the trusted version") { repository, old in
            repository.serve(copy: old)
        }
    }

    @Test("an older snapshot served under the new timestamp is refused")
    func olderSnapshot() async throws {
        try await Self.refused("snapshot") { repository, _ in
            try repository.publish(Self.configuration([Self.pinA, Self.pinC]), files: Self.anchorFiles)
            try repository.overwrite("metadata/4.snapshot.json", try #require(repository.read("metadata/3.snapshot.json")))
        }
    }

    @Test("an older targets metadata served under the new snapshot is refused")
    func olderTargets() async throws {
        try await Self.refused("targets") { repository, _ in
            try repository.publish(Self.configuration([Self.pinA, Self.pinC]), files: Self.anchorFiles)
            try repository.overwrite("metadata/4.targets.json", try #require(repository.read("metadata/3.targets.json")))
        }
    }

    @Test("an old signed pin set served where the new one's hash names it is refused (hash mismatch)")
    func replayOldPinSet() async throws {
        try await Self.refused("pinning.json") { repository, _ in
            let content = Self.configuration([Self.pinA, Self.pinC])
            try repository.publish(content, files: Self.anchorFiles)
            let name = try #require(repository.files("targets/").first { $0.hasSuffix(".pinning.json") && repository.read($0) == content })
            // The previous, validly signed pin set (same length): the length check passes, the hash does not.
            let old = Self.configuration([Self.pinA, Self.pinB])
            #expect(old.count == content.count)
            try repository.overwrite(name, old)
        }
    }

    @Test("a target whose bytes do not match its hash is refused")
    func tamperedTarget() async throws {
        try await Self.refused("the target has sha256") { repository, _ in
            let content = Self.configuration([Self.pinA, Self.pinC])
            try repository.publish(content, files: Self.anchorFiles)
            let name = try #require(repository.files("targets/").first { $0.hasSuffix(".pinning.json") && repository.read($0) == content })
            var tampered = content
            tampered[tampered.count / 2] ^= 0x01
            try repository.overwrite(name, tampered)
        }
    }

    @Test("targets signed by 1 of the 3 keys of a 2-of-3 threshold are refused (metadata no valid repository holds: hand-made)")
    func threshold() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-threshold")
        defer { directory.remove() }
        var repository = TUFTestRepository()
        repository.targetsSigners = [TUFTestSigner(.ed25519), TUFTestSigner(.ed25519), TUFTestSigner(.ed25519)]
        repository.targetsThreshold = 2
        let publisher = try TUFTestPublisher(repository: repository)
        defer { publisher.server.stop() }
        publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinB]), "roots/root.pem": Self.anchorPEM])
        let updater = try Self.updater(bootstrapRoot: publisher.bootstrapRoot, metadataURL: publisher.metadataURL, directory: directory)
        #expect(await updater.refresh() == .updated(version: 1))
        publisher.targetsSigners = [publisher.repository.targetsSigners[0]]
        publisher.publish(["pinning.json": Self.configuration([Self.pinA, Self.pinC]), "roots/root.pem": Self.anchorPEM])
        try await Self.expectRefused(updater, "targets", enforcing: [Self.pinA, Self.pinB], version: 1)
    }

    @Test("expired metadata is refused (freeze), and the pins stay")
    func expired() async throws {
        try await Self.refused("expired") { repository, _ in
            // Signed two days ago with the default one-day timestamp: what a file server frozen in time serves.
            try repository.publish(Self.configuration([Self.pinA, Self.pinC]), files: Self.anchorFiles, now: Date().addingTimeInterval(-2 * 86400))
        }
    }

    @Test("metadata over its cap, and a snapshot longer than the timestamp says, are refused")
    func oversizedMetadata() async throws {
        try await Self.refused("timestamp") { repository, _ in
            try repository.overwrite("metadata/timestamp.json", Array(repeating: UInt8(ascii: " "), count: 20_000))
        }
        try await Self.refused("snapshot") { repository, _ in
            try repository.publish(Self.configuration([Self.pinA, Self.pinC]), files: Self.anchorFiles)
            let snapshot = try #require(repository.read("metadata/4.snapshot.json"))
            try repository.overwrite("metadata/4.snapshot.json", snapshot + Array(repeating: UInt8(ascii: " "), count: 64))
        }
    }

    @Test("a configuration larger than a pin set may be (16 MiB) is refused before it is downloaded")
    func oversizedConfiguration() async throws {
        try await Self.refused("over the 16777216-byte cap") { repository, _ in
            try repository.publish(Array(repeating: UInt8(ascii: " "), count: PinningConfiguration.maximumPinSetSize + 1))
        }
    }

    @Test("a pin set of 10,000 hosts (1.4 MB, over a configuration file's 1 MiB) is applied, and enforced again from the state directory after a restart")
    func fleetSizedPinSet() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-fleet")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        var entries = ["\"api.test\": {\"pins\": [\"\(Self.pinA)\", \"\(Self.pinB)\"], \"anchors\": [\"roots/root.pem\"]}"]
        for index in 1..<10_000 {
            entries.append("\"host-\(index).test\": {\"pins\": [\"\(Self.pinB)\", \"\(Self.pinC)\"]}")
        }
        let configuration = Array(("{\"version\": 1, \"domains\": {\n" + entries.joined(separator: ",\n") + "\n}}\n").utf8)
        #expect(configuration.count > PinningConfiguration.maximumFileSize)
        try repository.publish(configuration, files: Self.anchorFiles)
        let updater = try Self.updater(repository, directory: directory)
        #expect(await updater.refresh() == .updated(version: 2))
        #expect(updater.currentConfiguration()?.configuration.entries.count == 10_000)
        #expect(Self.pins(updater) == [Self.pinA, Self.pinB])

        // The stored set is read back with the pin-set cap too: a restarted client enforces it before any request.
        repository.server.stop()
        let restarted = try Self.updater(repository, directory: directory)
        #expect(restarted.currentConfiguration()?.configuration.entries.count == 10_000, "\(restarted.status)")
        #expect(restarted.currentConfiguration()?.configuration.entry(forHost: "host-9999.test")?.pins.map(\.description) == [Self.pinB, Self.pinC])
    }

    @Test("a smaller cap of the updater's own refuses a pin set over it before it is downloaded")
    func configurationCapOption() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-cap")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        let configuration = Self.configuration([Self.pinA, Self.pinB])
        try repository.publish(configuration, files: Self.anchorFiles)
        let updater = try Self.updater(
            bootstrapRoot: repository.bootstrapRoot, metadataURL: repository.metadataURL, directory: directory,
            options: PinSetUpdater.Options(maximumConfigurationSize: configuration.count - 1))
        guard case .failed(let line) = await updater.refresh() else {
            Issue.record("a configuration over the updater's cap was applied")
            return
        }
        #expect(line.contains("over the \(configuration.count - 1)-byte cap") && updater.currentConfiguration() == nil, "\(line)")
        #expect(!repository.server.requests.contains { $0.requestLine.contains("pinning.json") }, "not downloaded: \(repository.server.requests.map(\.requestLine))")
    }

    @Test("an invalid configuration, a file outside the pin set, a file the set does not carry and a client identity are refused")
    func invalidConfiguration() async throws {
        try await Self.refused("invalid pinning configuration pinning.json of pin set version 4: 1 problem: domains[\"api.test\"].pins") { repository, _ in
            try repository.publish(Self.configuration([]), files: Self.anchorFiles)
        }
        try await Self.refused("is not a relative path inside the repository's targets") { repository, _ in
            try repository.publish(Self.configuration([Self.pinA, Self.pinC], anchor: "../../etc/ssl/cert.pem"))
        }
        try await Self.refused("the configuration names roots/missing.pem, which its target's custom.pinset.files does not list") { repository, _ in
            try repository.publish(Self.configuration([Self.pinA, Self.pinC], anchor: "roots/missing.pem"), files: Self.anchorFiles)
        }
        try await Self.refused("names a clientIdentity") { repository, _ in
            let extra = #", "mtls.test": {"pins": ["\#(Self.pinA)", "\#(Self.pinB)"], "clientIdentity": {"pkcs12": "roots/root.pem"}}"#
            try repository.publish(Self.configuration([Self.pinA, Self.pinC], extra: extra), files: Self.anchorFiles)
        }
    }

    @Test("the repository gone for days: every refresh fails, the last good pins stay enforced, and staleness is reported")
    func goneForDays() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-gone")
        defer { directory.remove() }
        let clock = TestClock()
        let start = clock.now.withLockedValue { $0 }
        let repository = try PinSetTestRepository(expiry: TUFExpiryPeriods(root: 365, targets: 1, snapshot: 1, timestamp: 1), now: start)
        defer { repository.remove() }
        try repository.publish(Self.configuration([Self.pinA, Self.pinB]), files: Self.anchorFiles, now: start)
        let updater = try Self.updater(repository, directory: directory, clock: clock)
        #expect(await updater.refresh() == .updated(version: 2))
        #expect(updater.status.stale == false)
        repository.server.stop()

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
        let restarted = try Self.updater(repository, directory: directory, clock: clock)
        #expect(Self.pins(restarted) == [Self.pinA, Self.pinB])
        #expect(restarted.status.stale && restarted.status.version == 2)
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
