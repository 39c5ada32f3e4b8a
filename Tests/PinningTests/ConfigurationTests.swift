import Foundation
import Pinning
import PinningTestSupport
import Testing

/// Loading a host pinning configuration: host matching and precedence, and every configuration error.
@Suite("PinningConfiguration loading and matching")
struct ConfigurationTests {
    static let pinA = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    static let pinB = "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="

    static func load(_ json: String, base: String = "/") throws -> PinningConfiguration {
        try PinningConfiguration(data: Data(json.utf8), baseDirectory: base)
    }

    static func domains(_ entries: [String: String], unlisted: String = "default") -> String {
        let body = entries.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ",\n")
        return "{\"version\": 1, \"unlistedHosts\": \"\(unlisted)\", \"domains\": {\(body)}}"
    }

    static let pinned = "{\"pins\": [\"\(pinA)\", \"\(pinB)\"]}"
    static let pinnedSubdomains = "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"includeSubdomains\": true}"

    // MARK: - Matching

    @Test(
        "each pattern kind covers exactly its hosts",
        arguments: [
            ("api.example.com", "api.example.com", true),
            ("api.example.com", "API.Example.COM", true),
            ("api.example.com", "api.example.com.", true),
            ("API.example.com.", "api.example.com", true),
            ("api.example.com", "example.com", false),
            ("api.example.com", "x.api.example.com", false),
            ("*.cdn.example.com", "a.cdn.example.com", true),
            ("*.cdn.example.com", "A.CDN.example.com.", true),
            ("*.cdn.example.com", "cdn.example.com", false),
            ("*.cdn.example.com", "a.b.cdn.example.com", false),
            ("*.cdn.example.com", "acdn.example.com", false),
            ("**.fleet.internal", "fleet.internal", true),
            ("**.fleet.internal", "a.fleet.internal", true),
            ("**.fleet.internal", "a.b.c.fleet.internal", true),
            ("**.fleet.internal", "notfleet.internal", false),
            ("**.fleet.internal", "internal", false),
            ("127.0.0.1", "127.0.0.1", true),
            ("localhost", "localhost", true),
        ]
    )
    func patternMatching(pattern: String, host: String, matches: Bool) throws {
        let configuration = try Self.load(Self.domains([pattern: Self.pinned]))
        #expect((configuration.entry(forHost: host)?.key == pattern) == matches, "\(pattern) vs \(host)")
    }

    @Test("includeSubdomains on an exact key behaves like **.")
    func includeSubdomains() throws {
        let configuration = try Self.load(Self.domains(["example.org": Self.pinnedSubdomains]))
        for host in ["example.org", "www.example.org", "a.b.example.org", "EXAMPLE.ORG."] {
            #expect(configuration.entry(forHost: host)?.key == "example.org", "\(host)")
            #expect(configuration.entry(forHost: host)?.includeSubdomains == true)
        }
        #expect(configuration.entry(forHost: "badexample.org") == nil)
        #expect(configuration.entry(forHost: "org") == nil)
    }

    @Test(
        "the most specific entry wins: an exact key, then *., then **./includeSubdomains with the longer suffix first",
        arguments: [
            ("api.example.com", "api.example.com"),
            ("www.example.com", "*.example.com"),
            ("example.com", "**.example.com"),
            ("a.b.example.com", "**.example.com"),
            ("x.deep.example.com", "*.deep.example.com"),
            ("x.y.deep.example.com", "deep.example.com"),
            ("deep.example.com", "deep.example.com"),
            ("other.org", "(none)"),
        ]
    )
    func precedence(host: String, expected: String) throws {
        let configuration = try Self.load(
            Self.domains([
                "**.example.com": Self.pinned,
                "*.example.com": Self.pinned,
                "api.example.com": Self.pinned,
                "deep.example.com": Self.pinnedSubdomains,
                "*.deep.example.com": Self.pinned,
            ])
        )
        #expect((configuration.entry(forHost: host)?.key ?? "(none)") == expected, "\(host)")
    }

    @Test("a longer **. suffix beats a shorter one regardless of file order")
    func longerSuffixWins() throws {
        let configuration = try Self.load(
            Self.domains(["**.example.com": Self.pinned, "**.eu.example.com": Self.pinned, "**.a.eu.example.com": Self.pinned])
        )
        #expect(configuration.entry(forHost: "x.a.eu.example.com")?.key == "**.a.eu.example.com")
        #expect(configuration.entry(forHost: "x.eu.example.com")?.key == "**.eu.example.com")
        #expect(configuration.entry(forHost: "x.example.com")?.key == "**.example.com")
    }

    @Test("defaults: enforce true, unlistedHosts default, no expiry; report-only entries may have one pin")
    func defaults() throws {
        let configuration = try Self.load("{\"version\": 1, \"domains\": {\"a.example.com\": \(Self.pinned), \"b.example.com\": {\"pins\": [\"\(Self.pinA)\"], \"enforce\": false}}}")
        #expect(configuration.unlistedHosts == .default)
        let a = try #require(configuration.entry(forHost: "a.example.com"))
        #expect(a.enforce && a.expires == nil && !a.anchorsOnly && a.reportURIs.isEmpty && a.pins.count == 2)
        let b = try #require(configuration.entry(forHost: "b.example.com"))
        #expect(!b.enforce && b.pins.count == 1)
    }

    @Test("the full example of the issue loads, and encodes back to an equivalent configuration")
    func issueExample() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let chain = try TestChain(host: "a.fleet.internal")
        try directory.write("fleet-root.pem", TestPKI.pemBundle([chain.root.certificate]))
        let path = try directory.write(
            "pinning.json",
            """
            {
              "version": 1,
              "unlistedHosts": "default",
              "domains": {
                "api.example.com":   { "pins": ["\(Self.pinA)", "\(Self.pinB)"] },
                "*.cdn.example.com": { "pins": ["\(Self.pinA)", "\(Self.pinB)"], "reportURIs": ["https://reports.example.com/pins"] },
                "**.fleet.internal": { "pins": ["\(Self.pinA)", "\(Self.pinB)"], "anchors": ["fleet-root.pem"], "anchorsOnly": true },
                "example.org":       { "pins": ["\(Self.pinA)"], "includeSubdomains": true, "enforce": false, "expires": "2031-01-01T00:00:00Z" }
              }
            }
            """
        )
        let configuration = try PinningConfiguration(contentsOfFile: path)
        #expect(configuration.entries.map(\.key) == ["**.fleet.internal", "*.cdn.example.com", "api.example.com", "example.org"])
        let fleet = try #require(configuration.entry(forHost: "x.fleet.internal"))
        #expect(fleet.anchors == [chain.root.certificate] && fleet.anchorsOnly)
        #expect(configuration.entry(forHost: "a.cdn.example.com")?.reportURIs.first?.absoluteString == "https://reports.example.com/pins")
        #expect(configuration.entry(forHost: "www.example.org")?.expires == RFC3339.parse("2031-01-01T00:00:00Z"))

        let encoded = try JSONEncoder().encode(configuration)
        let again = try PinningConfiguration(data: encoded, baseDirectory: directory.path)
        #expect(again.entries == configuration.entries)
    }

    @Test("lint warnings: expired pins and pins expiring within 30 days")
    func expiryWarnings() throws {
        let configuration = try Self.load(
            Self.domains([
                "old.example.com": "{\"pins\": [\"\(Self.pinA)\", \"\(Self.pinB)\"], \"expires\": \"2030-01-01T00:00:00Z\"}",
                "soon.example.com": "{\"pins\": [\"\(Self.pinA)\", \"\(Self.pinB)\"], \"expires\": \"2030-06-20T00:00:00Z\"}",
                "later.example.com": "{\"pins\": [\"\(Self.pinA)\", \"\(Self.pinB)\"], \"expires\": \"2031-06-20T00:00:00Z\"}",
            ])
        )
        let warnings = configuration.warnings(at: try #require(RFC3339.parse("2030-06-01T00:00:00Z")))
        #expect(warnings.count == 2)
        #expect(warnings.contains { $0.hasPrefix("old.example.com: pins expired") })
        #expect(warnings.contains { $0.hasPrefix("soon.example.com: pins expire") && $0.contains("in 19 days") })
    }

    // MARK: - Errors

    struct ErrorCase: Sendable, CustomStringConvertible {
        var name: String
        var json: String
        var kind: PinningConfigurationError.Problem.Kind
        var entry: String?
        var field: String?
        var description: String { self.name }
    }

    static let errorCases: [ErrorCase] = [
        ErrorCase(name: "invalid JSON", json: "{\"version\": 1, \"domains\": {", kind: .invalidJSON, entry: nil, field: nil),
        ErrorCase(name: "not an object", json: "[1]", kind: .wrongType, entry: nil, field: nil),
        ErrorCase(
            name: "unknown entry field enforcePinning",
            json: domains(["api.example.com": "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"enforcePinning\": false}"]),
            kind: .unknownField, entry: "api.example.com", field: "enforcePinning"
        ),
        ErrorCase(
            name: "unknown top-level field",
            json: "{\"version\": 1, \"domains\": {}, \"unlistedHost\": \"reject\"}",
            kind: .unknownField, entry: nil, field: "unlistedHost"
        ),
        ErrorCase(
            name: "bad pin",
            json: domains(["api.example.com": "{\"pins\": [\"\(pinA)\", \"sha256/not-base64!\"]}"]),
            kind: .invalidValue, entry: "api.example.com", field: "pins[1]"
        ),
        ErrorCase(
            name: "sha1 pin",
            json: domains(["api.example.com": "{\"pins\": [\"\(pinA)\", \"sha1/AAAAAAAAAAAAAAAAAAAAAAAAAAA=\"]}"]),
            kind: .invalidValue, entry: "api.example.com", field: "pins[1]"
        ),
        ErrorCase(
            name: "enforced entry with one pin",
            json: domains(["api.example.com": "{\"pins\": [\"\(pinA)\"]}"]),
            kind: .invalidValue, entry: "api.example.com", field: "pins"
        ),
        ErrorCase(
            name: "enforced entry with the same pin twice",
            json: domains(["api.example.com": "{\"pins\": [\"\(pinA)\", \"\(pinA)\"]}"]),
            kind: .invalidValue, entry: "api.example.com", field: "pins[1]"
        ),
        ErrorCase(
            name: "report-only entry without pins",
            json: domains(["api.example.com": "{\"pins\": [], \"enforce\": false}"]),
            kind: .invalidValue, entry: "api.example.com", field: "pins"
        ),
        ErrorCase(
            name: "missing pins",
            json: domains(["api.example.com": "{\"enforce\": false}"]),
            kind: .missingField, entry: "api.example.com", field: "pins"
        ),
        ErrorCase(
            name: "bad date",
            json: domains(["api.example.com": "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"expires\": \"next year\"}"]),
            kind: .invalidValue, entry: "api.example.com", field: "expires"
        ),
        ErrorCase(
            name: "date without time",
            json: domains(["api.example.com": "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"expires\": \"2031-01-01\"}"]),
            kind: .invalidValue, entry: "api.example.com", field: "expires"
        ),
        ErrorCase(
            name: "missing anchor file",
            json: domains(["api.example.com": "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"anchors\": [\"no-such-root.pem\"]}"]),
            kind: .anchorFile, entry: "api.example.com", field: "anchors[0]"
        ),
        ErrorCase(
            name: "anchorsOnly without anchors",
            json: domains(["api.example.com": "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"anchorsOnly\": true}"]),
            kind: .invalidValue, entry: "api.example.com", field: "anchorsOnly"
        ),
        ErrorCase(
            name: "unknown unlistedHosts",
            json: domains(["api.example.com": pinned], unlisted: "block"),
            kind: .invalidValue, entry: nil, field: "unlistedHosts"
        ),
        ErrorCase(name: "version 2", json: "{\"version\": 2, \"domains\": {}}", kind: .invalidValue, entry: nil, field: "version"),
        ErrorCase(name: "no version", json: "{\"domains\": {}}", kind: .missingField, entry: nil, field: "version"),
        ErrorCase(name: "no domains", json: "{\"version\": 1}", kind: .missingField, entry: nil, field: "domains"),
        ErrorCase(name: "*.com too broad", json: domains(["*.com": pinned]), kind: .invalidPattern, entry: "*.com", field: nil),
        ErrorCase(name: "**.com too broad", json: domains(["**.com": pinned]), kind: .invalidPattern, entry: "**.com", field: nil),
        ErrorCase(name: "includeSubdomains on com", json: domains(["com": pinnedSubdomains]), kind: .invalidPattern, entry: "com", field: nil),
        ErrorCase(name: "inner wildcard", json: domains(["a.*.example.com": pinned]), kind: .invalidPattern, entry: "a.*.example.com", field: nil),
        ErrorCase(name: "partial wildcard", json: domains(["a*.example.com": pinned]), kind: .invalidPattern, entry: "a*.example.com", field: nil),
        ErrorCase(name: "empty label", json: domains(["a..example.com": pinned]), kind: .invalidPattern, entry: "a..example.com", field: nil),
        ErrorCase(name: "bare wildcard", json: domains(["*": pinned]), kind: .invalidPattern, entry: "*", field: nil),
        ErrorCase(name: "space in host", json: domains(["a b.example.com": pinned]), kind: .invalidPattern, entry: "a b.example.com", field: nil),
        ErrorCase(
            name: "includeSubdomains on a wildcard",
            json: domains(["*.example.com": pinnedSubdomains]),
            kind: .invalidPattern, entry: "*.example.com", field: nil
        ),
        ErrorCase(
            name: "two keys for the same hosts",
            json: domains(["api.example.com": pinned, "API.example.com.": pinned]),
            kind: .invalidPattern, entry: "api.example.com", field: nil
        ),
        ErrorCase(
            name: "**. key and includeSubdomains key for the same hosts",
            json: domains(["**.example.com": pinned, "example.com": pinnedSubdomains]),
            kind: .invalidPattern, entry: "example.com", field: nil
        ),
        ErrorCase(
            name: "mistyped enforce",
            json: domains(["api.example.com": "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"enforce\": \"false\"}"]),
            kind: .wrongType, entry: "api.example.com", field: "enforce"
        ),
        ErrorCase(
            name: "bad report URI",
            json: domains(["api.example.com": "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"reportURIs\": [\"ftp://x.example.com/\"]}"]),
            kind: .invalidValue, entry: "api.example.com", field: "reportURIs[0]"
        ),
    ]

    @Test("each configuration error is refused, naming the entry and field", arguments: errorCases)
    func configurationError(_ testCase: ErrorCase) throws {
        do {
            _ = try Self.load(testCase.json)
            Issue.record("\(testCase.name): loaded, expected \(testCase.kind)")
        } catch let error as PinningConfigurationError {
            let problem = error.problems.first { $0.kind == testCase.kind && $0.entry == testCase.entry && $0.field == testCase.field }
            #expect(problem != nil, "\(testCase.name): \(error)")
            if let entry = testCase.entry {
                #expect(error.description.contains("domains[\"\(entry)\"]"))
            }
            if let field = testCase.field {
                #expect(error.description.contains(field))
            }
        }
    }

    @Test("every problem is listed at once, and nothing is applied")
    func everyProblemListed() throws {
        let json = """
            {"version": 2, "unlistedHosts": "block", "extra": true,
             "domains": {"*.com": {"pins": ["\(Self.pinA)", "\(Self.pinB)"]},
                         "api.example.com": {"pins": ["\(Self.pinA)"], "enforcePinning": true, "expires": "soon"},
                         "ok.example.com": {"pins": ["\(Self.pinA)", "\(Self.pinB)"]}}}
            """
        let error = try #require(throws: PinningConfigurationError.self) { try Self.load(json) }
        #expect(error.problems.count == 7, "\(error)")
        #expect(error.description.hasPrefix("invalid pinning configuration <data>: 7 problems\n"))
        #expect(error.description.split(separator: "\n").count == 8)
    }

    @Test("a file larger than 1 MiB is refused before parsing, an unreadable file names itself")
    func fileLimits() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let big = try directory.write("big.json", String(repeating: " ", count: PinningConfiguration.maximumFileSize + 1))
        let error = try #require(throws: PinningConfigurationError.self) { try PinningConfiguration(contentsOfFile: big) }
        #expect(error.problems.map(\.kind) == [.fileTooLarge])
        #expect(error.description.contains("1 MiB"))

        let missing = directory.path("missing.json")
        let missingError = try #require(throws: PinningConfigurationError.self) { try PinningConfiguration(contentsOfFile: missing) }
        #expect(missingError.problems.map(\.kind) == [.unreadableFile])
        #expect(missingError.description.contains(missing))
    }

    @Test("Decodable decodes as strictly as the loader")
    func decodableIsStrict() throws {
        #expect(throws: PinningConfigurationError.self) {
            try JSONDecoder().decode(
                PinningConfiguration.self,
                from: Data(Self.domains(["api.example.com": "{\"pins\": [\"\(Self.pinA)\", \"\(Self.pinB)\"], \"enforcePinning\": false}"]).utf8)
            )
        }
        let configuration = try JSONDecoder().decode(PinningConfiguration.self, from: Data(Self.domains(["api.example.com": Self.pinned]).utf8))
        #expect(configuration.entries.count == 1)
    }
}
