import Foundation
import Pinning
import PinningTestSupport
import Testing

/// `pinning config import` hands its parsed options over to `pinning-config-import`, the executable beside it
/// (issue 31: the importer's XML reader stays out of `pinning`). The import's own behaviour is ConfigExportCLITests';
/// these check the hand-over: values that look like options or hold `=` arrive as typed, a note and a warning are
/// printed by the companion as `pinning` printed them, and the companion run on its own refuses in words (exit 2).
@Suite("config import hands over to pinning-config-import", .serialized)
struct ConfigImportCompanionCLITests {
    /// The built `pinning-config-import` next to the `pinning` the tests run.
    static let companion: URL? = {
        guard case .success(let pinning) = PinningBinary.located else { return nil }
        let candidate = pinning.deletingLastPathComponent().appendingPathComponent("pinning-config-import")
        return FileManager.default.isExecutableFile(atPath: candidate.path) ? candidate : nil
    }()

    static let trustKit = """
        <?xml version="1.0" encoding="UTF-8"?>
        <plist version="1.0"><dict>
        <key>TSKSwizzleNetworkDelegates</key><false/>
        <key>TSKPinnedDomains</key><dict>
        <key>a.example.com</key><dict>
        <key>TSKPublicKeyHashes</key><array><string>\(Data(repeating: 0x41, count: 32).base64EncodedString())</string>\
        <string>\(Data(repeating: 0x42, count: 32).base64EncodedString())</string></array>
        <key>TSKIncludeSubdomains</key><true/>
        <key>TSKUnknownSetting</key><true/>
        </dict></dict></dict></plist>
        """

    @Test("a file and --out beginning with a dash or holding '=', --lossy's warning and a note: written as asked")
    func valuesArriveAsTyped() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-import-companion")
        defer { directory.remove() }
        _ = try directory.write("-odd=name.plist", Self.trustKit)
        let run = try await Executable.pinning(
            ["config", "import", "--format", "trustkit", "--lossy", "--out=-out=put.json", "--", "-odd=name.plist"], in: directory)
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.isEmpty, "\(run)")
        #expect(
            run.stderr
                == "pinning: config import: warning: domains[\"a.example.com\"]: trustkit: TSKUnknownSetting is not a setting this importer knows; dropped\n"
                + "pinning: config import: note: TSKSwizzleNetworkDelegates is a TrustKit-wide setting; not imported\n",
            "\(run)")
        let written = try String(contentsOfFile: directory.path("-out=put.json"), encoding: .utf8)
        let configuration = try PinningConfiguration(data: Data(written.utf8), baseDirectory: directory.path, origin: "test")
        #expect(configuration.entries.map(\.key) == ["a.example.com"])

        // Without --lossy the unknown setting is an error, named by the companion as `pinning` named it.
        let strict = try await Executable.pinning(["config", "import", "--format", "trustkit", "--", "-odd=name.plist"], in: directory)
        #expect(strict.status == 2 && strict.stdout.isEmpty, "\(strict)")
        #expect(strict.stderr.hasPrefix("pinning: cannot import -odd=name.plist as trustkit: 1 feature cannot be expressed"), "\(strict)")
    }

    @Test("pinning-config-import run on its own: one line in words, exit 2", .enabled(if: Self.companion != nil, "needs the built pinning-config-import"))
    func companionAloneRefuses() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-import-companion")
        defer { directory.remove() }
        let companion = try #require(Self.companion)
        for arguments in [[], ["file.xml"], ["--format=android-nsc", "file.xml"], ["--format=ats", "--", "file.xml"], ["--format=trustkit", "--lossy", "--lossy", "--", "f"]] {
            let run = try await Executable.run(companion, arguments, in: directory)
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr == "pinning: pinning-config-import is run by `pinning config import`; see `pinning config import --help`\n", "\(run)")
        }
    }
}
