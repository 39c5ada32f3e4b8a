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
            // Only init creates --metadata-dir; the others say it is missing, and what is not a directory is said so.
            (
                ["tuf", "--metadata-dir", directory.path + "/missing", "--metadata-url", "http://127.0.0.1:1/", "refresh"],
                "--metadata-dir \(directory.path)/missing: does not exist; run `pinning tuf --metadata-dir DIR init TRUSTED_ROOT` first"
            ),
            (["tuf", "--metadata-dir", directory.path + "/file", "init", "root.json"], "--metadata-dir \(directory.path)/file: not a directory"),
            (["tuf", "--metadata-dir", directory.path + "/file", "--metadata-url", "http://127.0.0.1:1/", "refresh"], "--metadata-dir \(directory.path)/file: not a directory"),
            (
                [
                    "tuf", "--metadata-dir", directory.path, "--metadata-url", "http://127.0.0.1:1/", "--target-base-url", "http://127.0.0.1:1/", "--target-name", "a",
                    "--target-dir", directory.path + "/none", "download",
                ],
                "--target-dir \(directory.path)/none: does not exist; create it first"
            ),
            (["tuf", "--metadata-dir", directory.path, "--metadata-url", "http://127.0.0.1:1/", "download"], "at least one --target-name"),
        ]
        _ = try directory.write("file", "not a directory")
        for (arguments, words) in cases {
            let run = try await Executable.pinning(arguments, in: directory)
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr.contains(words), "\(run)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(run)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/missing"))
    }

    @Test("init refuses what is not a root signed by its own keys (exit 2, one line) and never replaces root.json")
    func initRefusesWhatIsNotARoot() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-tuf")
        defer { directory.remove() }
        let metadata = directory.path + "/metadata"
        let repository = TUFTestRepository()
        let root = try directory.write("root.json", bytes: repository.root(version: 1))
        // A missing --metadata-dir is created by init (as --pinset-dir is), parents included.
        let initialized = try await Executable.pinning(["tuf", "--metadata-dir", metadata + "/client", "init", root], in: directory)
        #expect(initialized.status == 0, "\(initialized)")
        #expect(FileManager.default.contents(atPath: metadata + "/client/root.json") == FileManager.default.contents(atPath: root))

        let unsigned = repository.root(version: 1, signers: [TUFTestSigner(.ed25519)])
        let refused: [(String, String)] = [
            (try directory.write("root.pem", "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUVmo=\n-----END CERTIFICATE-----\n"), "root: not valid JSON"),
            (try directory.write("empty-object.json", "{}"), "root: no \"signed\" object"),
            ("/dev/null", "root: not valid JSON"),
            (try directory.write("no-roles.json", "{\"signed\": {}, \"signatures\": []}"), "no \"_type\" string"),
            (try directory.write("other-signer.json", bytes: unsigned), "threshold"),
        ]
        for (file, words) in refused {
            let run = try await Executable.pinning(["tuf", "--metadata-dir", metadata + "/client", "init", file], in: directory)
            #expect(run.status == 2, "\(file): \(run)")
            #expect(run.stderr.hasPrefix("pinning: tuf: init \(file): not a usable TUF root metadata file ("), "\(file): \(run)")
            #expect(run.stderr.contains(words), "\(file): \(run)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(file): \(run)")
            #expect(run.stdout.isEmpty, "\(file): \(run)")
            #expect(FileManager.default.contents(atPath: metadata + "/client/root.json") == FileManager.default.contents(atPath: root), "\(file) replaced root.json")
            // Nor is a missing directory created for a refused root.
            let fresh = try await Executable.pinning(["tuf", "--metadata-dir", metadata + "/fresh", "init", file], in: directory)
            #expect(fresh.status == 2, "\(file): \(fresh)")
            #expect(!FileManager.default.fileExists(atPath: metadata + "/fresh"), "\(file)")
        }
        // An unreadable file stays a failure of the command (exit 1), as tuf-conformance's command line has it.
        let missing = try await Executable.pinning(["tuf", "--metadata-dir", metadata + "/client", "init", directory.path + "/absent.json"], in: directory)
        #expect(missing.status == 1, "\(missing)")
        // And the help says so (it said 2 for any bad TRUSTED_ROOT).
        let help = try await Executable.pinning(["tuf", "--help"], in: directory)
        #expect(help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ").contains("a TRUSTED_ROOT that cannot be read"), "\(help)")

        // A valid root over an initialized directory replaces it: a deliberate re-bootstrap (the help says so).
        let other = try directory.write("other-root.json", bytes: TUFTestRepository().root(version: 3))
        let replaced = try await Executable.pinning(["tuf", "--metadata-dir", metadata + "/client", "init", other], in: directory)
        #expect(replaced.status == 0, "\(replaced)")
        #expect(FileManager.default.contents(atPath: metadata + "/client/root.json") == FileManager.default.contents(atPath: other))

        // A directory to be created below a file is the user's input, refused as such (exit 2), not a failure (1).
        let file = try directory.write("plain-file", "x")
        let below = try await Executable.pinning(["tuf", "--metadata-dir", file + "/sub", "init", root], in: directory)
        #expect(below.status == 2, "\(below)")
        #expect(below.stderr == "pinning: tuf: --metadata-dir \(file)/sub: \(file) is not a directory\n", "\(below)")
    }

    @Test("a refresh on a stored root.json that is not TUF metadata exits 1 before any request")
    func refreshOnDamagedRoot() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-tuf")
        defer { directory.remove() }
        let metadata = directory.path + "/metadata"
        try FileManager.default.createDirectory(atPath: metadata, withIntermediateDirectories: true)
        // Damaged after init (init itself refuses such a file).
        _ = try directory.write("metadata/root.json", "{\"signed\": {}, \"signatures\": []}")
        // Port 1 on loopback: nothing listens, but the refresh must fail on the root before trying.
        let refresh = try await Executable.pinning(["tuf", "--metadata-dir", metadata, "--metadata-url", "http://127.0.0.1:1/metadata/", "refresh"], in: directory)
        #expect(refresh.status == 1, "\(refresh)")
        #expect(refresh.stderr == "pinning tuf: refresh failed: root: no \"_type\" string\n", "\(refresh)")
    }
}
