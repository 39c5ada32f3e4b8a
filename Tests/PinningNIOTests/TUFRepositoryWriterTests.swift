import Foundation
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

/// Serves a repository directory as `https://repo.test/…` to a ``TUFUpdater``, without a network: the URL's path
/// is the file's path under the directory. Every request is recorded.
final class DirectoryTUFFetcher: TUFFetching, @unchecked Sendable {
    let directory: String
    private let lock = NSLock()
    private var recorded: [String] = []

    init(directory: String) {
        self.directory = directory
    }

    var requests: [String] { self.lock.withLock { self.recorded } }

    func fetch(_ url: URL, maximumLength: Int) async throws(TUFFetchError) -> [UInt8] {
        let name = url.absoluteString.replacingOccurrences(of: "https://repo.test/", with: "")
        self.lock.withLock { self.recorded.append(name) }
        guard !name.contains(".."), let data = FileManager.default.contents(atPath: self.directory + "/" + name) else {
            throw TUFFetchError(kind: .notFound, message: "\(name): HTTP 404")
        }
        guard data.count <= maximumLength else { throw TUFFetchError(kind: .failed, message: "\(name): over \(maximumLength) bytes") }
        return Array(data)
    }
}

/// A client of a repository in a directory: its own metadata and target directories.
struct DirectoryClient {
    let repository: String
    let metadata: TemporaryDirectory
    let targets: TemporaryDirectory
    let fetcher: DirectoryTUFFetcher

    init(repository: String, trustedRoot: [UInt8]) throws {
        self.repository = repository
        let metadata = try TemporaryDirectory(prefix: "pinset-client-metadata")
        // Until the client is whole no test holds it: a step that throws removes its directories here.
        var ready = false
        defer { if !ready { metadata.remove() } }
        let targets = try TemporaryDirectory(prefix: "pinset-client-targets")
        defer { if !ready { targets.remove() } }
        (self.metadata, self.targets) = (metadata, targets)
        self.fetcher = DirectoryTUFFetcher(directory: repository)
        try TUFUpdater.initialize(metadataDirectory: self.metadata.path, trustedRoot: trustedRoot)
        ready = true
    }

    /// Refreshes and downloads `name`: the trusted versions and the target's bytes as stored by the client.
    func update(_ name: String) async throws -> (TUFTrustedSet, [UInt8]) {
        var updater = TUFUpdater(metadataDirectory: self.metadata.path, metadataURL: URL(string: "https://repo.test/metadata/")!, fetcher: self.fetcher)
        let trusted = try await updater.refresh()
        let target = try await updater.targetInfo(name)
        let path = try await updater.download(target, from: URL(string: "https://repo.test/targets/")!, into: self.targets.path)
        return (trusted, Array(FileManager.default.contents(atPath: path) ?? Data()))
    }

    func remove() {
        self.metadata.remove()
        self.targets.remove()
    }
}

@Suite("TUF repository writer")
struct TUFRepositoryWriterTests {
    /// Keys as a publisher keeps them: generated, written as PEM, read back.
    /// A repository in `directory`/repo made with four Ed25519 keys: root, targets, snapshot and timestamp, in that
    /// order in the keys returned.
    static func repository(in directory: TemporaryDirectory, now: Date = Date()) throws -> (TUFRepositoryWriter, [TUFSigningKey]) {
        let keys = try (0..<4).map { try Self.key(.ed25519, in: directory, "k\($0).pem") }
        let writer = try TUFRepositoryWriter.initialize(
            directory: directory.path("repo"), rootKeys: [keys[0]], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3], now: now)
        return (writer, keys)
    }

    static func key(_ type: TUFSigningKey.KeyType, in directory: TemporaryDirectory, _ name: String) throws -> TUFSigningKey {
        let path = directory.path(name)
        try TUFSigningKey.generate(type).write(toNewFile: path)
        return try TUFSigningKey.load(file: path)
    }

    @Test("init, publish, publish again, rotate root, renew the timestamp: our client follows each step", arguments: TUFSigningKey.KeyType.allCases)
    func roundTrip(type: TUFSigningKey.KeyType) async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-writer")
        defer { directory.remove() }
        let root = try Self.key(type, in: directory, "root.pem")
        let targetsKey = try Self.key(type, in: directory, "targets.pem")
        let snapshotKey = try Self.key(type, in: directory, "snapshot.pem")
        let timestampKey = try Self.key(type, in: directory, "timestamp.pem")
        let repo = directory.path("repo")
        let writer = try TUFRepositoryWriter.initialize(
            directory: repo, rootKeys: [root], targetsKey: targetsKey, snapshotKey: snapshotKey, timestampKey: timestampKey)
        let rootBytes = try #require(FileManager.default.contents(atPath: repo + "/metadata/1.root.json"))
        #expect(FileManager.default.contents(atPath: repo + "/metadata/root.json") == rootBytes)
        #expect(try TUFRoot(bytes: Array(rootBytes)).keys[root.keyID]?.keyType == (type == .ecdsaP256 ? "ecdsa" : type.rawValue))

        let first = Array(#"{"version": 1, "domains": {}}"#.utf8)
        let anchor = Array("-----BEGIN CERTIFICATE-----\nnot parsed by the writer\n-----END CERTIFICATE-----\n".utf8)
        var versions = try writer.publishPinSet(
            first, name: "pins/pinning.json", files: ["fleet-root.pem": anchor], targetsKey: targetsKey, snapshotKey: snapshotKey, timestampKey: timestampKey)
        #expect(versions == TUFRepositoryWriter.Versions(root: 1, targets: 2, snapshot: 2, timestamp: 2))

        let client = try DirectoryClient(repository: repo, trustedRoot: Array(rootBytes))
        defer { client.remove() }
        var (trusted, bytes) = try await client.update("pins/pinning.json")
        #expect(bytes == first)
        #expect(trusted.targets?.version == 2)
        let listed = try #require(trusted.targets?.target("pins/pinning.json"))
        #expect(listed.custom?.objectValue?["pinset"]?.objectValue?["files"]?.objectValue?["fleet-root.pem"]?.stringValue == "pins/fleet-root.pem")
        // The companion file is a target of the same version, and a CDN can cache every file but timestamp.json.
        (_, bytes) = try await client.update("pins/fleet-root.pem")
        #expect(bytes == anchor)
        #expect(client.fetcher.requests.contains { $0.hasPrefix("targets/pins/") && $0.hasSuffix(".pinning.json") && $0.count > 80 })

        // A new pin set: the client sees the new version; the companion file the new set no longer references is gone.
        let second = Array(#"{"version": 1, "unlistedHosts": "reject", "domains": {}}"#.utf8)
        versions = try writer.publishPinSet(second, name: "pins/pinning.json", files: [:], targetsKey: targetsKey, snapshotKey: snapshotKey, timestampKey: timestampKey)
        #expect(versions.targets == 3 && versions.timestamp == 3)
        (trusted, bytes) = try await client.update("pins/pinning.json")
        #expect(bytes == second)
        #expect(trusted.targets?.version == 3)
        #expect(trusted.targets?.target("pins/fleet-root.pem") == nil)

        // Root rotation to two new keys (threshold 2): the client walks from version 1 to 2.
        let newRoots = [try Self.key(type, in: directory, "root2.pem"), try Self.key(.ed25519, in: directory, "root3.pem")]
        versions = try writer.rotateRoot(oldKeys: [root], newKeys: newRoots, threshold: 2)
        #expect(versions.root == 2)
        (trusted, _) = try await client.update("pins/pinning.json")
        #expect(trusted.root.version == 2)
        #expect(trusted.root.roleKeys("root")?.threshold == 2)

        // A renewed timestamp: a later expiry and a new version, same snapshot.
        let before = try #require(trusted.timestamp)
        versions = try writer.renewTimestamp(timestampKey: timestampKey, now: Date().addingTimeInterval(3_600))
        (trusted, _) = try await client.update("pins/pinning.json")
        #expect(trusted.timestamp?.version == before.version + 1)
        #expect(trusted.timestamp?.snapshotMeta.version == before.snapshotMeta.version)
        #expect((trusted.timestamp?.envelope.expires ?? 0) > before.envelope.expires)

        let status = try writer.status()
        #expect(status.clientRefusal == nil)
        #expect(status.roles.map(\.name) == ["root", "targets", "snapshot", "timestamp"])
        #expect(status.roles.allSatisfy { $0.meetsThreshold })
        #expect(status.roles[0].otherSignatures == [root.keyID])
    }

    @Test("keys the root does not list for a role, too few old root keys, and a bad target path are refused before anything is written")
    func refusals() throws {
        let directory = try TemporaryDirectory(prefix: "pinset-writer")
        defer { directory.remove() }
        let keys = try (0..<4).map { try Self.key(.ed25519, in: directory, "k\($0).pem") }
        let repo = directory.path("repo")
        let writer = try TUFRepositoryWriter.initialize(
            directory: repo, rootKeys: [keys[0]], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3])
        let listing = { try FileManager.default.contentsOfDirectory(atPath: repo + "/metadata").sorted() }
        let before = try listing()
        #expect(throws: TUFRepositoryError.self) {
            try writer.publish([.init(path: "a.json", contents: [1])], targetsKey: keys[2], snapshotKey: keys[2], timestampKey: keys[3])
        }
        do {
            try writer.renewTimestamp(timestampKey: keys[0])
            Issue.record("a root key renewed the timestamp")
        } catch {
            #expect(error.code == .wrongKey && error.keyID == keys[0].keyID, "\(error)")
        }
        do {
            try writer.rotateRoot(oldKeys: [keys[1]], newKeys: [keys[1]], threshold: 1)
            Issue.record("a targets key rotated the root")
        } catch {
            #expect(error.code == .wrongKey, "\(error)")
        }
        // Characters that do not show (C1, bidi, zero-width, a variation selector) too: the client refuses them.
        let hidden = ["pins\u{202E}nosj.json", "a\u{85}b", "exam\u{200B}ple.json", "a\u{FE0F}.json", "a\u{7F}b"]
        for path in ["", "/etc/passwd", "a/../b", "a//b", "./a", "a\\b", "a\nb"] + hidden {
            #expect(throws: TUFRepositoryError.self, "\(path.debugDescription)") {
                try writer.publish([.init(path: path, contents: [1])], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3])
            }
            #expect(throws: PinSetError.self, "the client refuses it as well: \(path.debugDescription)") {
                try PinSetUpdater.validateTargetName(path)
            }
        }
        // A name outside ASCII that shows is a name like any other.
        try PinSetUpdater.validateTargetName("pins/épinglé-例.json")
        #expect(try listing() == before)
        #expect(throws: TUFRepositoryError.self) {
            try TUFRepositoryWriter.initialize(directory: repo, rootKeys: [keys[0]], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3])
        }
        #expect(throws: TUFRepositoryError.self) { try TUFRepositoryWriter(directory: directory.path) }
    }

    @Test("a directory named with control characters (ESC, bidi) is shown escaped in the message, é and 例 as they are")
    func messageShowsPathEscaped() throws {
        let directory = try TemporaryDirectory(prefix: "pinset-writer")
        defer { directory.remove() }
        let named = directory.path("é例-\u{1B}[31m-\u{202E}x")
        try FileManager.default.createDirectory(atPath: named, withIntermediateDirectories: false)
        do {
            _ = try TUFRepositoryWriter(directory: named)
            Issue.record("an empty directory was taken for a repository")
        } catch {
            #expect(error.code == .notARepository)
            #expect(error.message.hasPrefix(directory.path("é例-\\u{1b}[31m-\\u{202e}x") + ": not a pin-set repository"), "\(error.message)")
            #expect(!error.message.unicodeScalars.contains { VisibleText.isHidden($0) }, "\(error.message)")
        }
    }

    @Test("an older timestamp.json copied back over the newest: the next renewal and publish number above every version signed")
    func timestampCopiedBack() throws {
        let directory = try TemporaryDirectory(prefix: "pinset-writer")
        defer { directory.remove() }
        let (writer, keys) = try Self.repository(in: directory)
        let timestampPath = writer.metadataDirectory + "/timestamp.json"
        #expect(try writer.renewTimestamp(timestampKey: keys[3]).timestamp == 2)
        let old = try Data(contentsOf: URL(fileURLWithPath: timestampPath))
        #expect(try writer.renewTimestamp(timestampKey: keys[3]).timestamp == 3)
        // Version 2 put back, as an attacker holding the file server (or a restored backup) would.
        try old.write(to: URL(fileURLWithPath: timestampPath))
        // Numbered from the file on disk, this would sign version 3 again, which clients holding 3 refuse.
        #expect(try writer.renewTimestamp(timestampKey: keys[3]).timestamp == 4)
        try old.write(to: URL(fileURLWithPath: timestampPath))
        let published = try writer.publish(
            [TUFRepositoryWriter.Target(path: "pinning.json", contents: Array("{}".utf8))], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3])
        #expect(published.timestamp == 5)
    }

    @Test("an expired snapshot: renewing the timestamp is refused (clients would refuse the result), and status says why")
    func expiredSnapshot() throws {
        let directory = try TemporaryDirectory(prefix: "pinset-writer")
        defer { directory.remove() }
        let keys = try (0..<4).map { try Self.key(.ecdsaP256, in: directory, "k\($0).pem") }
        let writer = try TUFRepositoryWriter.initialize(
            directory: directory.path("repo"), rootKeys: [keys[0]], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3],
            expiry: TUFExpiryPeriods(root: 365, targets: 30, snapshot: 2, timestamp: 1))
        let later = Date().addingTimeInterval(3 * 86_400)
        do {
            try writer.renewTimestamp(timestampKey: keys[3], now: later)
            Issue.record("a timestamp over an expired snapshot was written")
        } catch {
            #expect(error.code == .inconsistent && error.message.contains("snapshot: version 1 expired"), "\(error)")
        }
        let status = try writer.status(at: later)
        #expect(status.clientRefusal?.contains("timestamp: version 1 expired") == true, "\(status.clientRefusal ?? "accepted")")
        #expect(status.roles.first { $0.name == "snapshot" }?.expired == true)
    }

    @Test("an expired repository is renewed: rotate-root passes over an expired root, timestamp, snapshot and targets (signatures still checked); a client holding the expired root follows")
    func expiredRepositoryRenewed() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-writer")
        defer { directory.remove() }
        let start = Date()
        let (writer, keys) = try Self.repository(in: directory, now: start)
        let pins = Array(#"{"version": 1, "domains": {}}"#.utf8)
        try writer.publishPinSet(pins, files: [:], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3], now: start)
        let shipped = try #require(FileManager.default.contents(atPath: writer.metadataDirectory + "/1.root.json"))
        let client = try DirectoryClient(repository: writer.directory, trustedRoot: Array(shipped))
        defer { client.remove() }
        var updater = TUFUpdater(metadataDirectory: client.metadata.path, metadataURL: URL(string: "https://repo.test/metadata/")!, fetcher: client.fetcher)
        #expect(try await updater.refresh(startTime: start).targets?.version == 2)

        // Five days on only the timestamp has expired: it does not block a rotation.
        let soon = start.addingTimeInterval(5 * 86_400)
        #expect(try writer.rotateRoot(oldKeys: [keys[0]], newKeys: [keys[0]], threshold: 1, now: soon).root == 2)
        #expect(try writer.status(at: soon).roles.filter(\.expired).map(\.name) == ["timestamp"])
        try writer.renewTimestamp(timestampKey: keys[3], now: soon)
        #expect(try writer.status(at: soon).clientRefusal == nil)

        // 400 days on the root has expired too: the online roles cannot sign for it, and say what renews it.
        let later = start.addingTimeInterval(400 * 86_400)
        func expectRootExpired(_ error: TUFRepositoryError) {
            #expect(error.code == .inconsistent && error.message.contains("root version 2 expired at") && error.message.contains("pinning pinset rotate-root"), "\(error)")
        }
        do {
            try writer.renewTimestamp(timestampKey: keys[3], now: later)
            Issue.record("a timestamp was signed for an expired root")
        } catch {
            expectRootExpired(error)
        }
        do {
            try writer.publishPinSet(pins, files: [:], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3], now: later)
            Issue.record("a pin set was published under an expired root")
        } catch {
            expectRootExpired(error)
        }
        // Only expiry is waived: a key that is not a root key still cannot rotate it.
        do {
            try writer.rotateRoot(oldKeys: [keys[1]], newKeys: [keys[1]], threshold: 1, now: later)
            Issue.record("a targets key rotated an expired root")
        } catch {
            #expect(error.code == .wrongKey, "\(error)")
        }
        #expect(try writer.rotateRoot(oldKeys: [keys[0]], newKeys: [keys[0]], threshold: 1, now: later).root == 3)
        let status = try writer.status(at: later)
        #expect(status.roles.filter(\.expired).map(\.name) == ["targets", "snapshot", "timestamp"], "\(status.roles.map { ($0.name, $0.expired) })")
        try writer.publishPinSet(pins, files: [:], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3], now: later)
        #expect(try writer.status(at: later).clientRefusal == nil)

        // The client that trusts root version 1 (expired long ago) walks to version 3 and takes the new targets.
        let trusted = try await updater.refresh(startTime: later)
        #expect(trusted.root.version == 3 && trusted.targets?.version == 3)
    }

    @Test(
        "rotate-root over an expired repository waives only expiry: a snapshot signed outside its role, a broken timestamp→snapshot link or a changed target file is refused",
        arguments: ["snapshot signed by the targets key", "timestamp names other snapshot bytes", "target file changed"])
    func expiredRotationChecksAllButExpiry(tampering: String) throws {
        let directory = try TemporaryDirectory(prefix: "pinset-writer")
        defer { directory.remove() }
        let start = Date()
        let (writer, keys) = try Self.repository(in: directory, now: start)
        try writer.publishPinSet(Array(#"{"version": 1, "domains": {}}"#.utf8), files: [:], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3], now: start)
        let metadata = writer.metadataDirectory
        func bytes(_ name: String) throws -> [UInt8] { Array(try #require(FileManager.default.contents(atPath: metadata + "/" + name))) }
        func write(_ bytes: [UInt8], _ path: String) throws { try Data(bytes).write(to: URL(fileURLWithPath: path)) }
        let timestamp = try TUFTimestamp(bytes: try bytes("timestamp.json"))
        let snapshotVersion = timestamp.snapshotMeta.version
        let snapshot = try TUFSnapshot(bytes: try bytes("\(snapshotVersion).snapshot.json"))
        let targetsVersion = try #require(snapshot.entry(forRole: TUFRoleName.targets)).version
        let targetsFile = try bytes("\(targetsVersion).targets.json")
        // Each file is signed again as the repository's own keys would sign it (one more second of validity where
        // the bytes must differ), so only the one broken rule stands between it and a client.
        let snapshotExpires = snapshot.envelope.expires
        switch tampering {
        case "snapshot signed by the targets key":
            let resigned = try TUFMetadataBuilder.sign(
                TUFMetadataBuilder.snapshot(version: snapshotVersion, expires: snapshotExpires, targetsVersion: targetsVersion, targetsFile: targetsFile), with: [keys[1]])
            try write(resigned, metadata + "/\(snapshotVersion).snapshot.json")
            let linked = try TUFMetadataBuilder.sign(
                TUFMetadataBuilder.timestamp(version: timestamp.version, expires: timestamp.envelope.expires, snapshotVersion: snapshotVersion, snapshotFile: resigned),
                with: [keys[3]])
            try write(linked, metadata + "/timestamp.json")
        case "timestamp names other snapshot bytes":
            let resigned = try TUFMetadataBuilder.sign(
                TUFMetadataBuilder.snapshot(version: snapshotVersion, expires: snapshotExpires + 1, targetsVersion: targetsVersion, targetsFile: targetsFile), with: [keys[2]])
            try write(resigned, metadata + "/\(snapshotVersion).snapshot.json")
        default:
            let stored = try #require(FileManager.default.subpathsOfDirectory(atPath: writer.directory + "/targets").first { $0.hasSuffix(".json") })
            let path = writer.directory + "/targets/" + stored
            let original = Array(try #require(FileManager.default.contents(atPath: path)))
            try write(original.map { $0 == UInt8(ascii: "1") ? UInt8(ascii: "2") : $0 }, path)
        }
        // 400 days on every role has expired, so the rotation takes the path that waives expiry.
        let later = start.addingTimeInterval(400 * 86_400)
        do {
            try writer.rotateRoot(oldKeys: [keys[0]], newKeys: [keys[0]], threshold: 1, now: later)
            Issue.record("rotate-root accepted a repository with a \(tampering)")
        } catch {
            #expect(error.code == .inconsistent && error.message.contains("a client would refuse the result"), "\(error)")
        }
        #expect(FileManager.default.fileExists(atPath: metadata + "/2.root.json") == false)
    }

    @Test("a target path that is another Unicode spelling (NFC, NFD) of a listed one or of another given one is bad input (exit 2), and the listed configuration stays")
    func unicodeSpellingsKeptApart() throws {
        let directory = try TemporaryDirectory(prefix: "pinset-writer")
        defer { directory.remove() }
        let (writer, keys) = try Self.repository(in: directory)
        let composed = "caf\u{E9}.json"
        let decomposed = "cafe\u{301}.json"
        try #require(composed == decomposed && !composed.utf8.elementsEqual(decomposed.utf8))
        let pins = Array(#"{"version": 1, "domains": {}}"#.utf8)
        try writer.publishPinSet(pins, name: composed, files: ["anchor.pem": Array("B's anchor".utf8)], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3])
        func listed() throws -> [[UInt8]] { try writer.status().targets.map { Array($0.path.utf8) }.sorted { $0.lexicographicallyPrecedes($1) } }
        let before = try listed()
        #expect(before.contains(Array(composed.utf8)))
        do {
            try writer.publishPinSet(pins, name: decomposed, files: [:], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3])
            Issue.record("a configuration was published under another spelling of a listed one")
        } catch {
            #expect(error.code == .invalidInput && error.message.contains("another spelling"), "\(error)")
        }
        do {
            try writer.publish(
                [TUFRepositoryWriter.Target(path: "x\u{E9}", contents: [1]), TUFRepositoryWriter.Target(path: "xe\u{301}", contents: [2])], targetsKey: keys[1],
                snapshotKey: keys[2], timestampKey: keys[3])
            Issue.record("two spellings of one target path were published together")
        } catch {
            #expect(error.code == .invalidInput && error.message.contains("given twice"), "\(error)")
        }
        #expect(try listed() == before)
    }

    @Test("two configurations in one repository never change each other's files: another's anchor with other bytes, its target, or a file it still references")
    func configurationsKeptApart() throws {
        let directory = try TemporaryDirectory(prefix: "pinset-writer")
        defer { directory.remove() }
        let (writer, keys) = try Self.repository(in: directory)
        func publish(_ name: String, _ files: [String: [UInt8]], _ text: String = #"{"version": 1, "domains": {}}"#) throws(TUFRepositoryError) {
            try writer.publishPinSet(Array(text.utf8), name: name, files: files, targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3])
        }
        func listed() throws -> [String: String] {
            var paths: [String: String] = [:]
            for target in try writer.status().targets { paths[target.path] = target.hashes["sha256"] }
            return paths
        }
        let fleet = Array("fleet root".utf8)
        let evil = Array("evil root".utf8)
        try publish("pinning.json", ["fleet-root.pem": fleet])
        let before = try listed()
        let refusals: [(String, [String: [UInt8]], [String])] = [
            // Another configuration's anchor of the same name, other bytes (the new user's report): its anchor would change.
            ("other.json", ["fleet-root.pem": evil], ["\"fleet-root.pem\"", "\"other.json\"", "\"pinning.json\"", "directory of its own"]),
            // A configuration published where another references a file, and a file where another configuration is.
            ("fleet-root.pem", [:], ["\"fleet-root.pem\" is a file the pin set \"pinning.json\" references"]),
            ("other.json", ["pinning.json": fleet], ["\"pinning.json\" is the configuration of another pin set"]),
            // The configuration's own name is one of its files' targets (once a crash of the metadata builder).
            ("a.pem", ["a.pem": fleet], ["target name \"a.pem\" is also the target of a file it references"]),
        ]
        for (name, files, words) in refusals {
            do {
                try publish(name, files)
                Issue.record("\(name) \(files.keys.sorted()) was published")
            } catch {
                #expect(error.code == .invalidInput, "\(error)")
                for word in words { #expect(error.message.contains(word), "\(word): \(error)") }
            }
            #expect(try listed() == before)
        }
        // A repeated path given to publish is refused in words, not a crash.
        do {
            try writer.publish([.init(path: "a.json", contents: [1]), .init(path: "a.json", contents: [2])], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3])
            Issue.record("a repeated target path was published")
        } catch {
            #expect(error.code == .invalidInput && error.message.contains("\"a.json\" is given twice"), "\(error)")
        }

        // The same file, byte for byte, is shared; files in a directory of their own never meet the other's.
        try publish("other.json", ["fleet-root.pem": fleet])
        try publish("other/other.json", ["fleet-root.pem": evil])
        var paths = try listed()
        #expect(paths["fleet-root.pem"] == before["fleet-root.pem"] && paths["other/fleet-root.pem"] != nil, "\(paths)")
        // pinning.json moves to another anchor: fleet-root.pem stays listed while other.json references it, then goes.
        try publish("pinning.json", ["new-root.pem": fleet])
        paths = try listed()
        #expect(paths["fleet-root.pem"] == before["fleet-root.pem"] && paths["new-root.pem"] != nil, "\(paths)")
        try publish("other.json", [:])
        #expect(try listed()["fleet-root.pem"] == nil)
        #expect(try writer.status().clientRefusal == nil)
    }

    @Test("keys as openssl genpkey writes them: Ed25519, P-256, RSA 2048; refused: RSA 1024, P-384, encrypted without a passphrase", .enabled(if: TestTools.opensslAvailable))
    func opensslKeys() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-openssl")
        defer { directory.remove() }
        let made: [(String, [String])] = [
            ("ed.pem", ["-algorithm", "ed25519"]), ("p256.pem", ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]),
            ("rsa.pem", ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]), ("rsa1024.pem", ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"]),
            ("p384.pem", ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"]), ("enc.pem", ["-algorithm", "ed25519", "-aes256", "-pass", "pass:s3cret"]),
        ]
        for (name, arguments) in made {
            let run = try await TestTools.openssl(["genpkey"] + arguments + ["-out", directory.path(name)])
            try #require(run.status == 0, "\(run)")
        }
        #expect(try TUFSigningKey.load(file: directory.path("ed.pem")).type == .ed25519)
        #expect(try TUFSigningKey.load(file: directory.path("p256.pem")).type == .ecdsaP256)
        #expect(try TUFSigningKey.load(file: directory.path("rsa.pem")).type == .rsa)
        #expect(try TUFSigningKey.load(file: directory.path("enc.pem"), passphrase: "s3cret").type == .ed25519)
        let refusals: [(String, TUFKeyError.Code, String)] = [
            ("rsa1024.pem", .rsaTooSmall, "1024 bits"), ("p384.pem", .unsupportedCurve, "P-384"), ("enc.pem", .encrypted, "encrypted"),
        ]
        for (name, code, words) in refusals {
            do {
                _ = try TUFSigningKey.load(file: directory.path(name))
                Issue.record("\(name) was accepted")
            } catch {
                #expect(error.code == code && error.description.hasPrefix(directory.path(name)) && error.description.contains(words), "\(error)")
            }
        }
        // The key id is the SHA-256 of the canonical public key object, as securesystemslib computes it; openssl
        // gives the same Ed25519 public key bytes.
        let key = try TUFSigningKey.load(file: directory.path("ed.pem"))
        let der = try await TestTools.openssl(["pkey", "-in", directory.path("ed.pem"), "-pubout", "-outform", "DER"])
        let publicHex = der.stdoutData.suffix(32).map { String(format: "%02x", $0) }.joined()
        #expect(key.publicKeyJSON.objectValue?["keyval"]?.objectValue?["public"]?.stringValue == publicHex)
        let canonical = #"{"keytype":"ed25519","keyval":{"public":"\#(publicHex)"},"scheme":"ed25519"}"#
        let digest = try await TestTools.run("/usr/bin/sha256sum", [], input: Data(canonical.utf8))
        #expect(digest.stdout.hasPrefix(key.keyID), "\(digest)")
    }
}

@Suite("TUF signing keys: an unsupported key type in words")
struct TUFSigningKeyWordsTests {
    @Test("an Ed448 key is refused naming its algorithm, in a sentence that reads (it was \"a Ed448 key\")")
    func unsupportedAlgorithm() {
        // PKCS#8 (RFC 8410): version 0, algorithm id-Ed448 (1.3.101.113), the 57-byte private key.
        let ed448: [UInt8] = [0x30, 0x47, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x71, 0x04, 0x3B, 0x04, 0x39] + [UInt8](repeating: 7, count: 57)
        do {
            _ = try TUFSigningKey(derRepresentation: ed448)
            Issue.record("an Ed448 key was accepted")
        } catch {
            #expect(error.code == .unsupportedAlgorithm)
            #expect(error.message == "the key's algorithm, Ed448, is not supported (Ed25519, EC P-256 or RSA of 2048 bits or more)")
        }
    }
}
