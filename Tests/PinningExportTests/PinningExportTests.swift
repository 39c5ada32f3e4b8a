import Foundation
import Pinning
import PinningExport
import PinningExportCore
import PinningTestSupport
import Testing

// PinningExport's own suite (issue 28 item 6): the library, without the CLI. The end-to-end checks with software
// we did not write (OkHttp compiling and running the exported pins, Android's and TrustKit's formats read back)
// are in PinningCLITests; these pin down the library's contract: what each format says, what is refused, what a
// round trip keeps.

@Suite("PinningExport: the library")
struct PinningExportTests {
    static let pins = [
        "sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString(),
        "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString(),
    ]

    static func configuration(_ entry: String, directory: TemporaryDirectory) throws -> PinningConfiguration {
        try PinningConfiguration(data: Data(#"{"version": 1, "domains": {\#(entry)}}"#.utf8), baseDirectory: directory.path)
    }

    // ATS places a pin as a CA or a leaf identity, so it needs the pinned certificates: without them it refuses
    // (the CLI tests export with them).
    @Test("every format but ATS writes both pins of a plain entry", arguments: PlatformFormat.allCases.filter { $0 != .ats })
    func plainEntry(format: PlatformFormat) throws {
        let directory = try TemporaryDirectory(prefix: "pinning-export")
        defer { directory.remove() }
        let configuration = try Self.configuration(#""api.example.com": {"pins": ["\#(Self.pins[0])", "\#(Self.pins[1])"]}"#, directory: directory)
        let translation = try ConfigurationExporter(format: format).export(configuration)
        #expect(translation.warnings.isEmpty, "\(translation.warnings)")
        #expect(translation.text.contains("api.example.com"), "\(translation.text)")
        for pin in Self.pins {
            // The base64 digest appears in every format (OkHttp and ours prefix `sha256/`, the plists and the
            // XML hold the digest alone).
            #expect(translation.text.contains(String(pin.dropFirst("sha256/".count))), "\(format): \(translation.text)")
        }
    }

    @Test("report-only pins cannot be said on Android: an error naming the entry and the platform, a warning with lossy")
    func reportOnlyOnAndroid() throws {
        let directory = try TemporaryDirectory(prefix: "pinning-export")
        defer { directory.remove() }
        let configuration = try Self.configuration(
            #""api.example.com": {"pins": ["\#(Self.pins[0])", "\#(Self.pins[1])"], "enforce": false}"#, directory: directory)
        let refused = #expect(throws: TranslationError.self) { try ConfigurationExporter(format: .androidNSC).export(configuration) }
        #expect(refused?.code == "untranslatable")
        #expect(refused?.problems.first?.entry == "api.example.com")
        #expect(refused?.problems.first?.format == .androidNSC)
        let lossy = try ConfigurationExporter(format: .androidNSC, lossy: true).export(configuration)
        #expect(lossy.warnings.count == 1 && lossy.warnings.first?.entry == "api.example.com", "\(lossy.warnings)")
    }

    /// NU3: one feature read "add --lossy to write the rest, it handled as its line says", which is not English.
    @Test("the refusal's header reads as a sentence for one feature and for several")
    func refusalHeaderWording() {
        let one = TranslationError(problems: [TranslationProblem(entry: "a.example", format: .androidNSC, message: "report-only pins cannot be said")])
        #expect(
            one.description.hasPrefix(
                "1 feature cannot be expressed; nothing was written (add --lossy to write the rest, the feature handled as its line says, with a warning):\n"),
            "\(one.description)")
        let two = TranslationError(problems: one.problems + one.problems)
        #expect(
            two.description.hasPrefix(
                "2 features cannot be expressed; nothing was written (add --lossy to write the rest, each handled as its line says, with a warning):\n"),
            "\(two.description)")
    }

    @Test("Android: distinct anchor files get distinct @raw names (a suffix on a clash), never one resource for two files")
    func androidRawNames() throws {
        let directory = try TemporaryDirectory(prefix: "pinning-export")
        defer { directory.remove() }
        // `a-b.pem`, `a_b.pem` and `sub/a_b.pem` are all `a_b` by the resource rules; `a_b_2.pem` is `a_b_2` itself.
        let files = ["a-b.pem", "a_b.pem", "sub/a_b.pem", "a_b_2.pem"]
        for file in files {
            try directory.write(file, TestPKI.pemBundle([try TestPKI.root("Root of \(file)").certificate]))
        }
        let configuration = try Self.configuration(
            #""a.example.com": {"pins": ["\#(Self.pins[0])", "\#(Self.pins[1])"], "anchors": ["a-b.pem", "a_b.pem", "sub/a_b.pem"], "anchorsOnly": true}, "#
                + #""b.example.com": {"pins": ["\#(Self.pins[0])", "\#(Self.pins[1])"], "anchors": ["a_b.pem", "a_b_2.pem"], "anchorsOnly": true}"#,
            directory: directory)
        let translation = try ConfigurationExporter(format: .androidNSC).export(configuration)
        let sources = translation.text.components(separatedBy: "\n").filter { $0.contains("<certificates src=\"@raw/") }.map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        #expect(
            sources == [
                "<certificates src=\"@raw/a_b\"/>", "<certificates src=\"@raw/a_b_3\"/>", "<certificates src=\"@raw/a_b_4\"/>",
                "<certificates src=\"@raw/a_b_3\"/>", "<certificates src=\"@raw/a_b_2\"/>",
            ], "\(translation.text)")
        // One copy instruction per file and resource: no two files are told to go to the same place.
        var targets: [String: Set<String>] = [:]
        for note in translation.notes {
            let words = note.split(separator: " ")
            targets[String(words[5]), default: []].insert(String(words[1]))
        }
        #expect(targets == ["a_b.pem": ["a-b.pem"], "a_b_3.pem": ["a_b.pem"], "a_b_4.pem": ["sub/a_b.pem"], "a_b_2.pem": ["a_b_2.pem"]], "\(translation.notes)")
    }

    @Test("Android and TrustKit read back what they wrote: the same hosts, pins and subdomain coverage", arguments: ConfigurationImporter.importable)
    func roundTrip(format: PlatformFormat) throws {
        let directory = try TemporaryDirectory(prefix: "pinning-export")
        defer { directory.remove() }
        let configuration = try Self.configuration(
            #""api.example.com": {"pins": ["\#(Self.pins[0])", "\#(Self.pins[1])"]}, "**.cdn.example.com": {"pins": ["\#(Self.pins[1])", "\#(Self.pins[0])"]}"#,
            directory: directory)
        let written = try ConfigurationExporter(format: format).export(configuration)
        let read = try ConfigurationImporter(format: format).importConfiguration(Array(written.text.utf8), baseDirectory: directory.path)
        let back = try PinningConfiguration(data: Data(read.text.utf8), baseDirectory: directory.path)
        // `**.cdn.example.com` comes back as `cdn.example.com` with includeSubdomains: the same coverage, spelt
        // the platform's way.
        #expect(Set(back.entries.map(\.coverage)) == Set(configuration.entries.map(\.coverage)), "\(read.text)")
        for entry in configuration.entries {
            let other = try #require(back.entries.first { $0.coverage == entry.coverage })
            #expect(Set(other.pins) == Set(entry.pins), "\(entry.key)")
        }
    }

    @Test("input that is not the format: one unreadableInput error, never a crash (non-ASCII bytes included)", arguments: ConfigurationImporter.importable)
    func unreadableInput(format: PlatformFormat) throws {
        for bytes in [Array("not a document".utf8), Array("<?xml version=\"1.0\"?><gerät/>".utf8), [0xFF, 0xFE, 0x00]] {
            let refused = #expect(throws: TranslationError.self) {
                try ConfigurationImporter(format: format).importConfiguration(bytes, baseDirectory: "/nonexistent")
            }
            #expect(refused?.code == "unreadableInput", "\(String(describing: refused))")
        }
    }

    /// `pinning config import` hands its options to `pinning-config-import` in one fixed form: every value comes
    /// back as given (a leading dash, `=`, spaces, nothing at all), and any other form is refused.
    @Test func theImportHandOverCarriesEveryValueAsGiven() {
        let values = ["pins.xml", "-odd.xml", "--format=ats", "a=b=c", "with space", "", "--", "ü/ø.plist"]
        for file in values {
            for format in [PlatformFormat.androidNSC, .trustKit] {
                for res in [nil] + values.map(Optional.some) {
                    for out in [nil, "-", "--out=x", "out.json"] {
                        for lossy in [false, true] {
                            let arguments = ConfigImportHandOver.arguments(file: file, format: format.rawValue, res: res, lossy: lossy, out: out)
                            let read = ConfigImportHandOver.options(arguments)
                            #expect(read == ConfigImportHandOver.Options(file: file, format: format, res: res, lossy: lossy, out: out), "\(arguments)")
                        }
                    }
                }
            }
        }
        let refused: [[String]] = [
            [], ["pins.xml"], ["--", "pins.xml"], ["--format=trustkit", "pins.xml"], ["--format=trustkit", "--"],
            ["--format=trustkit", "--", "a", "b"], ["--format=ats", "--", "a"], ["--format=okhttp", "--", "a"], ["--format=", "--", "a"],
            ["--format=trustkit", "--format=trustkit", "--", "a"], ["--format=trustkit", "--lossy", "--lossy", "--", "a"],
            ["--format=trustkit", "--res=a", "--res=b", "--", "a"], ["--format=trustkit", "--out=a", "--out=b", "--", "a"],
            ["--format", "trustkit", "--", "a"], ["--format=trustkit", "--json", "--", "a"], ["--format=trustkit", "--lossy=yes", "--", "a"],
        ]
        for arguments in refused {
            #expect(ConfigImportHandOver.options(arguments) == nil, "\(arguments)")
        }
    }
}
