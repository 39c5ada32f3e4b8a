import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

/// A repository in memory: files by name under the metadata and targets URLs, every request recorded.
final class InMemoryTUFFetcher: TUFFetching {
    let files = NIOLockedValueBox<[String: [UInt8]]>([:])
    let requests = NIOLockedValueBox<[String]>([])

    func fetch(_ url: URL, maximumLength: Int) async throws(TUFFetchError) -> [UInt8] {
        let name = url.absoluteString.replacingOccurrences(of: "https://repo.test/", with: "")
        self.requests.withLockedValue { $0.append(name) }
        guard let bytes = self.files.withLockedValue({ $0[name] }) else { throw TUFFetchError(kind: .notFound, message: "\(name): HTTP 404") }
        guard bytes.count <= maximumLength else { throw TUFFetchError(kind: .failed, message: "\(name): over \(maximumLength) bytes") }
        return bytes
    }

    func serve(_ name: String, _ bytes: [UInt8]) { self.files.withLockedValue { $0[name] = bytes } }
}

/// One ed25519 key per top-level role, and signed metadata as a repository tool writes it.
struct SmallTUFRepository {
    let keys = (0..<4).map { _ in Curve25519.Signing.PrivateKey() }

    func keyID(_ key: Curve25519.Signing.PrivateKey) -> String {
        SHA256.hash(data: try! Self.keyJSON(key).canonicalBytes()).map { String(format: "%02x", $0) }.joined()
    }

    static func keyJSON(_ key: Curve25519.Signing.PrivateKey) -> TUFJSON {
        object([
            "keytype": .string("ed25519"), "scheme": .string("ed25519"),
            "keyval": object(["public": .string(key.publicKey.rawRepresentation.map { String(format: "%02x", $0) }.joined())]),
        ])
    }

    static func object(_ members: [String: TUFJSON]) -> TUFJSON { .object(TUFJSONObject(members.map { ($0.key, $0.value) })!) }

    func signed(_ fields: [String: TUFJSON], type: String, version: Int, by key: Curve25519.Signing.PrivateKey) -> [UInt8] {
        var all = fields
        all["_type"] = .string(type)
        all["spec_version"] = .string("1.0.31")
        all["version"] = .integer(String(version))
        all["expires"] = .string("2099-01-01T00:00:00Z")
        let signed = Self.object(all)
        let signature = try! key.signature(for: signed.canonicalBytes()).map { String(format: "%02x", $0) }.joined()
        let envelope = Self.object(["signed": signed, "signatures": .array([Self.object(["keyid": .string(self.keyID(key)), "sig": .string(signature)])])])
        return try! envelope.canonicalBytes()
    }

    func root() -> [UInt8] {
        var keyMap: [String: TUFJSON] = [:]
        for key in self.keys { keyMap[self.keyID(key)] = Self.keyJSON(key) }
        var roles: [String: TUFJSON] = [:]
        for (index, name) in ["root", "timestamp", "snapshot", "targets"].enumerated() {
            roles[name] = Self.object(["keyids": .array([.string(self.keyID(self.keys[index]))]), "threshold": .integer("1")])
        }
        return self.signed(
            ["consistent_snapshot": .bool(true), "keys": Self.object(keyMap), "roles": Self.object(roles)], type: "root", version: 1, by: self.keys[0])
    }

    func timestamp(version: Int, snapshot: Int) -> [UInt8] {
        self.signed(["meta": Self.object(["snapshot.json": Self.object(["version": .integer(String(snapshot))])])], type: "timestamp", version: version, by: self.keys[1])
    }

    func snapshot(version: Int, targets: Int) -> [UInt8] {
        self.signed(["meta": Self.object(["targets.json": Self.object(["version": .integer(String(targets))])])], type: "snapshot", version: version, by: self.keys[2])
    }

    func targets(version: Int, files: [String: [UInt8]]) -> [UInt8] {
        var entries: [String: TUFJSON] = [:]
        for (path, content) in files {
            entries[path] = Self.object([
                "length": .integer(String(content.count)),
                "hashes": Self.object(["sha256": .string(SHA256.hash(data: content).map { String(format: "%02x", $0) }.joined())]),
            ])
        }
        return self.signed(["targets": Self.object(entries)], type: "targets", version: version, by: self.keys[3])
    }
}

@Suite("TUF updater")
struct TUFUpdaterTests {
    static func directory() throws -> String {
        let path = NSTemporaryDirectory() + "tuf-updater-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func read(_ directory: String, _ name: String) -> [UInt8]? {
        FileManager.default.contents(atPath: directory + "/" + name).map { Array($0) }
    }

    @Test("a refresh fetches each file once, stores the exact bytes served, and the next refresh asks only for root and timestamp")
    func refreshAndStore() async throws {
        let repository = SmallTUFRepository()
        let fetcher = InMemoryTUFFetcher()
        let content = Array("{\"pins\": []}".utf8)
        let files: [String: [UInt8]] = [
            "metadata/timestamp.json": repository.timestamp(version: 1, snapshot: 1), "metadata/1.snapshot.json": repository.snapshot(version: 1, targets: 1),
            "metadata/1.targets.json": repository.targets(version: 1, files: ["pinning.json": content]),
        ]
        for (name, bytes) in files { fetcher.serve(name, bytes) }
        let hash = SHA256.hash(data: content).map { String(format: "%02x", $0) }.joined()
        fetcher.serve("targets/\(hash).pinning.json", content)

        let metadata = try Self.directory()
        let targetDirectory = try Self.directory()
        defer {
            try? FileManager.default.removeItem(atPath: metadata)
            try? FileManager.default.removeItem(atPath: targetDirectory)
        }
        try TUFUpdater.initialize(metadataDirectory: metadata, trustedRoot: repository.root())
        var updater = TUFUpdater(metadataDirectory: metadata, metadataURL: URL(string: "https://repo.test/metadata")!, fetcher: fetcher)
        let trusted = try await updater.refresh()
        #expect(trusted.targets?.version == 1)
        #expect(fetcher.requests.withLockedValue { $0 } == ["metadata/2.root.json", "metadata/timestamp.json", "metadata/1.snapshot.json", "metadata/1.targets.json"])
        #expect(Self.read(metadata, "timestamp.json") == files["metadata/timestamp.json"])
        #expect(Self.read(metadata, "snapshot.json") == files["metadata/1.snapshot.json"])
        #expect(Self.read(metadata, "targets.json") == files["metadata/1.targets.json"])
        // Only the roles' files: no temporary file is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: metadata).sorted() == ["root.json", "snapshot.json", "targets.json", "timestamp.json"])

        let target = try await updater.targetInfo("pinning.json")
        let stored = try await updater.download(target, from: URL(string: "https://repo.test/targets/")!, into: targetDirectory)
        #expect(Self.read(targetDirectory, "pinning.json") == content)
        #expect(updater.cachedTarget(target, in: targetDirectory) == stored)

        fetcher.requests.withLockedValue { $0 = [] }
        var again = TUFUpdater(metadataDirectory: metadata, metadataURL: URL(string: "https://repo.test/metadata/")!, fetcher: fetcher)
        try await again.refresh()
        #expect(fetcher.requests.withLockedValue { $0 } == ["metadata/2.root.json", "metadata/timestamp.json"])
    }

    @Test("initialize refuses what is not a root signed by its own keys, and keeps the root.json already there")
    func initializeChecksTheRoot() throws {
        let repository = TUFTestRepository()
        let metadata = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: metadata) }
        try TUFUpdater.initialize(metadataDirectory: metadata, trustedRoot: repository.root(version: 1))
        let stored = Self.read(metadata, "root.json")
        for bad in [Array("{}".utf8), [], Array("-----BEGIN CERTIFICATE-----\n".utf8), repository.root(version: 1, signers: [TUFTestSigner(.ed25519)])] {
            #expect(throws: TUFError.self, "\(bad.count) bytes") {
                try TUFUpdater.initialize(metadataDirectory: metadata, trustedRoot: bad)
            }
            #expect(Self.read(metadata, "root.json") == stored)
        }
        let fresh = metadata + "/fresh"
        #expect(throws: TUFError.self) { try TUFUpdater.initialize(metadataDirectory: fresh, trustedRoot: Array("{}".utf8)) }
        #expect(!FileManager.default.fileExists(atPath: fresh), "nothing is created for a refused root")
    }

    @Test("a rolled-back timestamp is refused and the stored one stays; a tampered target is refused and not stored")
    func rollbackAndTampering() async throws {
        let repository = SmallTUFRepository()
        let fetcher = InMemoryTUFFetcher()
        let content = Array("pins v1".utf8)
        fetcher.serve("metadata/timestamp.json", repository.timestamp(version: 2, snapshot: 1))
        fetcher.serve("metadata/1.snapshot.json", repository.snapshot(version: 1, targets: 1))
        fetcher.serve("metadata/1.targets.json", repository.targets(version: 1, files: ["pinning.json": content]))
        let metadata = try Self.directory()
        let targetDirectory = try Self.directory()
        defer {
            try? FileManager.default.removeItem(atPath: metadata)
            try? FileManager.default.removeItem(atPath: targetDirectory)
        }
        try TUFUpdater.initialize(metadataDirectory: metadata, trustedRoot: repository.root())
        var updater = TUFUpdater(metadataDirectory: metadata, metadataURL: URL(string: "https://repo.test/metadata/")!, fetcher: fetcher)
        try await updater.refresh()
        let stored = Self.read(metadata, "timestamp.json")

        fetcher.serve("metadata/timestamp.json", repository.timestamp(version: 1, snapshot: 1))
        var replayed = TUFUpdater(metadataDirectory: metadata, metadataURL: URL(string: "https://repo.test/metadata/")!, fetcher: fetcher)
        let error = await #expect(throws: TUFError.self) { try await replayed.refresh() }
        #expect(error?.rule == .rollback)
        #expect(error?.description == "timestamp: version 1 is older than the trusted version 2")
        #expect(Self.read(metadata, "timestamp.json") == stored)

        let target = try await updater.targetInfo("pinning.json")
        let hash = SHA256.hash(data: content).map { String(format: "%02x", $0) }.joined()
        fetcher.serve("targets/\(hash).pinning.json", Array("pins v2".utf8))
        let tampered = await #expect(throws: TUFError.self) {
            _ = try await updater.download(target, from: URL(string: "https://repo.test/targets/")!, into: targetDirectory)
        }
        #expect(tampered?.rule == .hashMismatch)
        #expect(try FileManager.default.contentsOfDirectory(atPath: targetDirectory).isEmpty)
    }

    @Test("getPlainHTTP fetches http:// from a loopback server within a per-request cap; each method keeps to its scheme")
    func plainHTTP() async throws {
        let server = try LoopbackHTTPServer(statuses: [200])
        defer { server.stop() }
        server.responseBody = Array(repeating: UInt8(ascii: "x"), count: 1000)
        let client = try PinnedHTTPClient(evaluator: SecurityPolicy.defaultEvaluation, settings: .default)
        let response = try await client.getPlainHTTP(server.url("/metadata/timestamp.json"))
        #expect(response.status.code == 200)
        #expect(response.body.count == 1000)
        let capped = await #expect(throws: PinningConnectionError.self) {
            _ = try await client.getPlainHTTP(server.url("/metadata/timestamp.json"), maximumBodySize: 999)
        }
        #expect(capped?.message == "the response body exceeds 999 bytes")
        let https = await #expect(throws: PinningConnectionError.self) { _ = try await client.getPlainHTTP(URL(string: "https://127.0.0.1/")!) }
        #expect(https?.code == .invalidRequest)
        let http = await #expect(throws: PinningConnectionError.self) { _ = try await client.get(server.url("/x")) }
        #expect(http?.code == .invalidRequest)
        await client.shutdown()
    }
}
