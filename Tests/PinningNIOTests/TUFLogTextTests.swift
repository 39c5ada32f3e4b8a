import Foundation
import NIOConcurrencyHelpers
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

/// The lines TUFUpdater and PinSetUpdater hand to `log`, and a pin set's last error, are display text: a
/// repository's role names and target paths, and a local path, are escaped in them by VisibleText where the line is
/// made, so no character that acts on a terminal is left in any line, and each escape appears once.
@Suite("TUF and pin set log lines: display text")
struct TUFLogTextTests {
    /// A delegated role's name: ESC, a zero-width space and a literal backslash-u escape.
    static let roleName = "d\u{1B}[2J\u{200B}\\u{1b}"
    static let roleShown = #"d\u{1b}[2J\u{200b}\u{5c}u{1b}"#
    /// A local directory's name: ESC and a right-to-left override.
    static let hiddenDirectory = "state\u{1B}[31m\u{202E}"

    final class Lines: Sendable {
        let lines = NIOLockedValueBox<[String]>([])
        var log: @Sendable (String) -> Void { { line in self.lines.withLockedValue { $0.append(line) } } }
        var all: [String] { self.lines.withLockedValue { $0 } }
    }

    static func expectNothingHidden(_ lines: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!lines.isEmpty, sourceLocation: sourceLocation)
        for line in lines {
            #expect(!line.unicodeScalars.contains(where: VisibleText.isHidden), "raw in \(line.debugDescription)", sourceLocation: sourceLocation)
        }
    }

    /// A repository (served by `fetcher` under https://repo.test/) whose top-level targets delegate every path to
    /// ``roleName``; that role lists `pinning.json` when `delegatedTargets` is given, and is not served otherwise.
    static func serve(_ repository: TUFTestRepository, on fetcher: InMemoryTUFFetcher, delegatedTargets: [String: [UInt8]]?) {
        let delegate = TUFTestSigner(.ed25519)
        for (name, bytes) in repository.delegatingEverything(to: Self.roleName, signedBy: delegate) {
            fetcher.serve("metadata/" + name, bytes)
        }
        if let delegatedTargets {
            let bytes = TUFTestRepository.signed(TUFTestRepository.targetsSigned(version: 1, targets: delegatedTargets), by: [delegate])
            fetcher.serve("metadata/1.\(TUFNames.quote(Self.roleName)).json", bytes)
        }
    }

    @Test("TUFUpdater: a local copy not read (its path hidden characters), a delegated role's copy not used, the role that lists a target")
    func updaterLines() async throws {
        let directory = try TemporaryDirectory(prefix: "tuf-log-text")
        defer { directory.remove() }
        let metadata = directory.path(Self.hiddenDirectory)
        try FileManager.default.createDirectory(atPath: metadata, withIntermediateDirectories: true)
        let repository = TUFTestRepository()
        let fetcher = InMemoryTUFFetcher()
        Self.serve(repository, on: fetcher, delegatedTargets: ["pinning.json": Array("{}".utf8)])
        try TUFUpdater.initialize(metadataDirectory: metadata, trustedRoot: repository.root(version: 1))
        // A stored timestamp over its cap (not read: its path is in the line) and a stored copy of the delegated
        // role that is not metadata (not used: the role's name is in the line).
        try Data(repeating: 0x20, count: TUFLimits().timestampMaxLength + 1).write(to: URL(fileURLWithPath: metadata + "/timestamp.json"))
        try Data("not json".utf8).write(to: URL(fileURLWithPath: metadata + "/" + TUFNames.quote(Self.roleName) + ".json"))

        let lines = Lines()
        var updater = TUFUpdater(metadataDirectory: metadata, metadataURL: URL(string: "https://repo.test/metadata/")!, fetcher: fetcher, log: lines.log)
        try await updater.refresh(startTime: TUFTestRepository.now)
        let target = try await updater.targetInfo("pinning.json")
        #expect(target.path == "pinning.json")

        let all = lines.all
        Self.expectNothingHidden(all)
        #expect(all.contains { $0.hasPrefix("local timestamp not read: timestamp: \(VisibleText.escaped(metadata))/timestamp.json is over its cap") }, "\(all)")
        #expect(all.contains { $0.hasPrefix("local \(Self.roleShown) not used: ") }, "\(all)")
        #expect(all.contains("target pinning.json: listed by \(Self.roleShown)"), "\(all)")
    }

    @Test("PinSetUpdater: a refusal naming a delegated role, in the log and the last error, and a directory with hidden characters")
    func pinSetUpdaterLines() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-log-text")
        defer { directory.remove() }
        let state = directory.path(Self.hiddenDirectory)
        let repository = TUFTestRepository()
        let fetcher = InMemoryTUFFetcher()
        Self.serve(repository, on: fetcher, delegatedTargets: nil)
        let lines = Lines()
        let updater = try PinSetUpdater(
            bootstrapRoot: repository.root(version: 1), directory: state, metadataURL: URL(string: "https://repo.test/metadata/")!, fetcher: fetcher,
            clock: { TUFTestRepository.now }, log: lines.log)
        let outcome = await updater.refresh()
        guard case .failed(let line) = outcome else {
            Issue.record("the role is not served: \(outcome)")
            return
        }
        #expect(line.hasPrefix("\(Self.roleShown): cannot fetch "), "\(line)")
        #expect(updater.status.lastError == line)
        let all = lines.all
        Self.expectNothingHidden(all + [line])
        #expect(all.contains("pin set refresh refused, no pin set is enforced: \(line)"), "\(all)")

        // A stored record that cannot be read: the line names the state directory, escaped.
        try Data("{".utf8).write(to: URL(fileURLWithPath: state + "/current.json"))
        let restarted = Lines()
        let again = try PinSetUpdater(
            bootstrapRoot: repository.root(version: 1), directory: state, metadataURL: URL(string: "https://repo.test/metadata/")!, fetcher: fetcher,
            clock: { TUFTestRepository.now }, log: restarted.log)
        let stored = restarted.all
        Self.expectNothingHidden(stored)
        #expect(stored.contains { $0.contains("not used, no pin set is enforced until a refresh succeeds: \(VisibleText.escaped(state))/current.json: ") }, "\(stored)")
        Self.expectNothingHidden([again.status.lastError ?? ""])
    }

    @Test("TUFRepositoryWriter.status: a client's refusal is display text, its directory's hidden characters escaped once")
    func clientRefusal() throws {
        let directory = try TemporaryDirectory(prefix: "pinset-refusal-text")
        defer { directory.remove() }
        let keys = try (0..<4).map { index in
            let path = directory.path("k\(index).pem")
            try TUFSigningKey.generate(.ed25519).write(toNewFile: path)
            return try TUFSigningKey.load(file: path)
        }
        let repository = directory.path(Self.hiddenDirectory)
        let writer = try TUFRepositoryWriter.initialize(
            directory: repository, rootKeys: [keys[0]], targetsKey: keys[1], snapshotKey: keys[2], timestampKey: keys[3],
            expiry: TUFExpiryPeriods(root: 365, targets: 30, snapshot: 2, timestamp: 1))
        let status = try writer.status(at: Date().addingTimeInterval(3 * 86_400))
        let refusal = try #require(status.clientRefusal, "the timestamp has expired")
        Self.expectNothingHidden([refusal])
        #expect(refusal.hasPrefix("\(VisibleText.escaped(repository)): a client would refuse the result: timestamp: version 1 expired"), "\(refusal)")
    }
}
