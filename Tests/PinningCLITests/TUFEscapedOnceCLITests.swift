import Foundation
import Pinning
import PinningTestSupport
import Testing

/// A TUF repository's text (a delegated role's name, a `_type`) reaches `pinning tuf`, `check --pinset` and
/// `proxy --pinset` escaped exactly once (VisibleText): its ESC as `\u{1b}`, its own literal `\u{1b}` as
/// `\u{5c}u{1b}`. Escaped twice, the ESC would show as `\u{5c}u{1b}`, which reads as the sender's literal text.
@Suite("TUF and pin set text on the CLI: escaped once")
struct TUFEscapedOnceCLITests {
    /// A delegated role's name: ESC and a literal backslash-u escape.
    static let roleName = "d\u{1B}[2J\\u{1b}"
    /// The role name as it must be shown (once).
    static let roleShown = #"d\u{1b}[2J\u{5c}u{1b}"#
    /// The ESC of the role name escaped twice.
    static let roleTwice = #"d\u{5c}u{1b}[2J"#
    /// A `_type` with ESC and a literal backslash-u escape, and how a message quotes it (once).
    static let typeName = "x\u{1B}[31m\\u{1b}"
    static let typeShown = #""x\u{1b}[31m\u{5c}u{1b}""#
    static let typeTwice = #"x\u{5c}u{1b}[31m"#

    /// A repository served on 127.0.0.1 whose top-level targets delegate every path to `roleName`, whose metadata
    /// is not served (404): finding any target fails naming the role.
    static func serve(_ repository: TUFTestRepository) throws -> LoopbackHTTPServer {
        let server = try LoopbackHTTPServer(statuses: [200])
        let files = repository.delegatingEverything(to: Self.roleName, signedBy: TUFTestSigner(.ed25519))
        server.files = Dictionary(uniqueKeysWithValues: files.map { ("metadata/" + $0.key, $0.value) })
        return server
    }

    /// No character that acts on a terminal in what the command printed, but the line feeds that end its lines.
    static func expectNothingHidden(_ run: CLIRun, sourceLocation: SourceLocation = #_sourceLocation) {
        for text in [run.stdout, run.stderr] {
            let hidden = text.unicodeScalars.filter { $0 != "\n" && VisibleText.isHidden($0) }
            #expect(hidden.isEmpty, "raw \(hidden.map { String($0.value, radix: 16) }): \(run)", sourceLocation: sourceLocation)
        }
    }

    @Test("tuf download --verbose: the log line quoting a local timestamp's _type and the failure naming a delegated role, each escaped once")
    func tufClient() async throws {
        let directory = try TemporaryDirectory(prefix: "tuf-escaped-once")
        defer { directory.remove() }
        let repository = TUFTestRepository()
        let server = try Self.serve(repository)
        defer { server.stop() }
        let metadata = directory.path("metadata")
        let targets = directory.path("targets")
        try FileManager.default.createDirectory(atPath: metadata, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: targets, withIntermediateDirectories: true)
        let root = try directory.write("root.json", bytes: repository.root(version: 1))
        let initialized = try await Executable.pinning(["tuf", "--metadata-dir", metadata, "init", root], in: directory)
        #expect(initialized.status == 0, "\(initialized)")
        // A stored timestamp, signed by the timestamp key, whose _type is not "timestamp": refused, and said so.
        var fields = TUFTestRepository.common(Self.typeName, version: 1, expires: TUFTestRepository.future)
        fields["meta"] = tufObject(["snapshot.json": TUFTestRepository.metaEntry(version: 1)])
        _ = try directory.write("metadata/timestamp.json", bytes: TUFTestRepository.signed(tufObject(fields), by: repository.timestampSigners))

        let run = try await Executable.pinning(
            [
                "tuf", "--metadata-dir", metadata, "--metadata-url", server.url("/metadata/").absoluteString, "--target-name", "pinning.json",
                "--target-base-url", server.url("/targets/").absoluteString, "--target-dir", targets, "--verbose", "download",
            ], in: directory)
        #expect(run.status == 1, "\(run)")
        #expect(run.stderr.contains("pinning tuf: local timestamp not used: timestamp: the metadata's _type is \(Self.typeShown), not \"timestamp\"\n"), "\(run)")
        #expect(run.stderr.contains("pinning tuf: download failed: \(Self.roleShown): cannot fetch "), "\(run)")
        #expect(!run.stderr.contains(Self.roleTwice) && !run.stderr.contains(Self.typeTwice), "escaped twice: \(run)")
        Self.expectNothingHidden(run)
    }

    @Test("check --pinset and proxy --pinset: the refusal naming a delegated role, in the log line and the last error, escaped once")
    func pinSetFollowers() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-escaped-once")
        defer { directory.remove() }
        let repository = TUFTestRepository()
        let server = try Self.serve(repository)
        defer { server.stop() }
        let root = try directory.write("root.json", bytes: repository.root(version: 1))
        let pinset = ["--pinset", server.url("/metadata/").absoluteString, "--pinset-root", root]

        let check = try await Executable.pinning(["check", "https://api.test/"] + pinset + ["--pinset-dir", directory.path("check"), "--verbose"], in: directory)
        #expect(check.status == 3, "\(check)")
        #expect(check.stderr.contains("pinning: check: pin set refresh refused, no pin set is enforced: \(Self.roleShown): cannot fetch "), "\(check)")
        #expect(check.stderr.contains("and the refresh failed: \(Self.roleShown): cannot fetch "), "\(check)")
        #expect(!check.stderr.contains(Self.roleTwice), "escaped twice: \(check)")
        Self.expectNothingHidden(check)

        let proxy = try await Executable.pinning(
            ["proxy", "--listen", "127.0.0.1:0", "--ca-dir", directory.path("ca")] + pinset + ["--pinset-dir", directory.path("proxy")], in: directory)
        #expect(proxy.status == 3, "\(proxy)")
        #expect(proxy.stderr.contains("pinning: proxy: pin set refresh refused, no pin set is enforced: \(Self.roleShown): cannot fetch "), "\(proxy)")
        #expect(proxy.stderr.contains("and the refresh failed: \(Self.roleShown): cannot fetch "), "\(proxy)")
        #expect(!proxy.stderr.contains(Self.roleTwice), "escaped twice: \(proxy)")
        Self.expectNothingHidden(proxy)
    }
}
