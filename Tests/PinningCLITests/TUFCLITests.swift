import Foundation
import PinningTestSupport
import Testing

/// `pinning tuf`'s command line outside the conformance suite (scripts/tuf-conformance.sh runs that): usage errors
/// exit 2 naming what is wrong, failures of the command exit 1, as tuf-conformance's CLIENT-CLI.md asks.
@Suite("pinning tuf")
struct TUFCLITests {
    @Test("usage errors exit 2 with one line naming the command or option")
    func usage() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-tuf")
        defer { directory.remove() }
        let cases: [([String], String)] = [
            (["tuf", "--metadata-dir", directory.path], "name a command"),
            (["tuf", "--metadata-dir", directory.path, "frob"], "unknown command \"frob\""),
            (["tuf", "--metadata-dir", directory.path, "refresh"], "needs --metadata-url"),
            (["tuf", "--metadata-dir", directory.path, "--metadata-url", "ftp://x/", "refresh"], "--metadata-url ftp://x/: not an http or https URL"),
            (["tuf", "--metadata-dir", directory.path, "init"], "init takes one argument"),
            (["tuf", "--metadata-dir", directory.path + "/missing", "init", "root.json"], "--metadata-dir"),
            (["tuf", "--metadata-dir", directory.path, "--metadata-url", "http://127.0.0.1:1/", "download"], "at least one --target-name"),
        ]
        for (arguments, words) in cases {
            let run = try await Executable.pinning(arguments, in: directory)
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr.contains(words), "\(run)")
        }
    }

    @Test("init stores the root as root.json; a refresh on a root that is not TUF metadata exits 1 before any request")
    func initAndFailedRefresh() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-tuf")
        defer { directory.remove() }
        let metadata = directory.path + "/metadata"
        try FileManager.default.createDirectory(atPath: metadata, withIntermediateDirectories: true)
        let missing = try await Executable.pinning(["tuf", "--metadata-dir", metadata, "init", directory.path + "/absent.json"], in: directory)
        #expect(missing.status == 1, "\(missing)")
        let root = try directory.write("root.json", "{\"signed\": {}, \"signatures\": []}")
        let initialized = try await Executable.pinning(["tuf", "--metadata-dir", metadata, "init", root], in: directory)
        #expect(initialized.status == 0, "\(initialized)")
        #expect(FileManager.default.contents(atPath: metadata + "/root.json") == FileManager.default.contents(atPath: root))
        // Port 1 on loopback: nothing listens, but the refresh must fail on the root before trying.
        let refresh = try await Executable.pinning(["tuf", "--metadata-dir", metadata, "--metadata-url", "http://127.0.0.1:1/metadata/", "refresh"], in: directory)
        #expect(refresh.status == 1, "\(refresh)")
        #expect(refresh.stderr == "pinning tuf: refresh failed: root: no \"_type\" string\n", "\(refresh)")
    }
}
