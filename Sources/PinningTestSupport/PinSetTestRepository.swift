public import Foundation
public import Pinning
public import PinningNIO
public import PinningPKI

/// A pin-set repository made and published to by the real ``TUFRepositoryWriter`` (what `pinning pinset` uses), in
/// a temporary directory served as static files by a ``LoopbackHTTPServer`` on 127.0.0.1. Attacks on the file
/// server are made the way an attacker who controls it would: by changing the files it serves (``overwrite(_:_:)``,
/// ``files(_:)``, ``serve(copy:)``); only what no valid repository holds (signatures from too few keys of a
/// threshold) needs ``TUFTestPublisher``'s hand-made metadata.
public final class PinSetTestRepository: Sendable {
    public let directory: TemporaryDirectory
    public let server: LoopbackHTTPServer
    public let writer: TUFRepositoryWriter
    public let rootKey: TUFSigningKey
    public let targetsKey: TUFSigningKey
    public let snapshotKey: TUFSigningKey
    public let timestampKey: TUFSigningKey

    /// A new repository (root version 1, empty targets), with each role's period from `expiry`, signed at `now`.
    public init(expiry: TUFExpiryPeriods = TUFExpiryPeriods(), now: Date = Date()) throws {
        let directory = try TemporaryDirectory(prefix: "pinset-repository")
        self.directory = directory
        // Until the fixture is whole no test holds it: a step that throws removes the directory here.
        var ready = false
        defer { if !ready { directory.remove() } }
        (self.rootKey, self.targetsKey, self.snapshotKey, self.timestampKey) = (
            try .generate(.ed25519), try .generate(.ed25519), try .generate(.ed25519), try .generate(.ed25519)
        )
        self.writer = try TUFRepositoryWriter.initialize(
            directory: self.directory.path("repo"), rootKeys: [self.rootKey], targetsKey: self.targetsKey, snapshotKey: self.snapshotKey,
            timestampKey: self.timestampKey, expiry: expiry, now: now)
        self.server = try LoopbackHTTPServer(statuses: [404])
        self.server.directory = self.writer.directory
        ready = true
    }

    /// The root to ship with a client (version 1).
    public var bootstrapRoot: [UInt8] { self.read("metadata/1.root.json") ?? [] }
    /// `http://127.0.0.1:PORT/metadata/`.
    public var metadataURL: URL { self.server.url("/metadata/") }

    /// Publishes `configuration` as `name` with the files it references (path as the configuration writes it →
    /// bytes), as `pinning pinset publish` does.
    @discardableResult
    public func publish(_ configuration: [UInt8], name: String = "pinning.json", files: [String: [UInt8]] = [:], now: Date = Date()) throws
        -> TUFRepositoryWriter.Versions
    {
        try self.writer.publishPinSet(
            configuration, name: name, files: files, targetsKey: self.targetsKey, snapshotKey: self.snapshotKey, timestampKey: self.timestampKey, now: now)
    }

    /// A served file (a path under the repository), nil when there is none.
    public func read(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: self.writer.directory + "/" + path).map { Array($0) }
    }

    /// Serves `bytes` as `path` from now on (tampering, replays of a file kept from earlier).
    public func overwrite(_ path: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: self.writer.directory + "/" + path))
    }

    /// Every served file under `prefix` (`targets/`, `metadata/`), by path, sorted.
    public func files(_ prefix: String) -> [String] {
        let base = self.writer.directory + "/"
        let found = FileManager.default.enumerator(atPath: base + prefix)?.allObjects.compactMap { $0 as? String } ?? []
        return found.map { prefix + $0 }.filter { !$0.hasSuffix("/") && FileManager.default.contents(atPath: base + $0) != nil }.sorted()
    }

    /// A copy of the repository as it is now, to serve back later (``serve(copy:)``): a whole old repository replayed.
    public func copy() throws -> String {
        let destination = self.directory.path("copy-\(UUID().uuidString)")
        try FileManager.default.copyItem(atPath: self.writer.directory, toPath: destination)
        return destination
    }

    /// Serves `copy` (from ``copy()``) instead of the repository.
    public func serve(copy: String) { self.server.directory = copy }

    /// Stops serving and removes the files.
    public func remove() {
        self.server.stop()
        self.directory.remove()
    }
}

/// A server's keys through a rotation, for pin-set tests: A (in service), B (its backup, then in service), C (the
/// next backup), all for `api.test` under one anchor; and the configuration that pins `api.test` to some of them.
public struct PinSetRotationKeys: Sendable {
    public let root: TestIdentity
    public let a: TestIdentity
    public let b: TestIdentity
    public let c: TestIdentity

    public init(rootName: String) throws {
        self.root = try TestPKI.root(rootName)
        self.a = try TestPKI.leaf("api.test", issuer: self.root, dnsNames: ["api.test"])
        self.b = try TestPKI.leaf("api.test", issuer: self.root, dnsNames: ["api.test"])
        self.c = try TestPKI.leaf("api.test", issuer: self.root, dnsNames: ["api.test"])
    }

    /// The SPKI pin of `identity`, as a configuration writes it.
    public func pin(_ identity: TestIdentity) -> String { Pin(spkiOf: identity.certificate).description }

    /// api.test pinned to `pins`, the anchor `root.pem` only.
    public func configuration(_ pins: [TestIdentity]) -> [UInt8] {
        let list = pins.map { "\"\(self.pin($0))\"" }.joined(separator: ", ")
        return Array(#"{"version": 1, "domains": {"api.test": {"pins": [\#(list)], "anchors": ["root.pem"], "anchorsOnly": true}}}"#.utf8)
    }

    /// The anchor, PEM, as `root.pem` is published beside the configuration.
    public var anchor: [UInt8] { Array(self.root.certificatePEM.utf8) }
}
