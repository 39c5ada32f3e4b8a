import Foundation
import Pinning
import PinningTestSupport
import Testing

/// The built `pinning` binary with host pinning configurations: `evaluate --config`, `--send-reports`,
/// `config lint` and `pins --config-entry`.
@Suite("pinning CLI: host pinning configuration", .serialized)
struct ConfigCLITests {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
        func json() throws -> [String: Any] {
            try #require(try JSONSerialization.jsonObject(with: Data(self.stdout.utf8)) as? [String: Any])
        }
    }

    static func run(_ arguments: [String]) async throws -> Run {
        let result = try await TestTools.run(try PinningBinary.located.get().path, arguments)
        return Run(status: result.status, stdout: result.stdout, stderr: result.stderr)
    }

    struct Setup {
        let directory: TemporaryDirectory
        let chain: TestChain
        let other: TestChain
        var chainFile: String { self.directory.path("chain.pem") }
        var rootsFile: String { self.directory.path("roots.pem") }
        var at: String { RFC3339.format(TestPKI.referenceTime) }

        init() throws {
            let directory = try TemporaryDirectory(prefix: "pinning-config-cli")
            self.directory = directory
            // Until the fixture is whole no test holds it: a step that throws removes the directory here.
            var ready = false
            defer { if !ready { directory.remove() } }
            let before = TestPKI.referenceTime.addingTimeInterval(-86400 * 365)
            let after = TestPKI.referenceTime.addingTimeInterval(86400 * 365)
            self.chain = try TestChain(host: "api.example.com", notValidBefore: before, notValidAfter: after)
            self.other = try TestChain(host: "api.example.com", notValidBefore: before, notValidAfter: after, rootName: "Other")
            try self.directory.write("chain.pem", TestPKI.pemBundle(self.chain.presented))
            try self.directory.write("roots.pem", TestPKI.pemBundle([self.chain.root.certificate]))
            ready = true
        }

        func pin(_ identity: TestIdentity) -> String { Pin(spkiOf: identity.certificate).description }

        @discardableResult
        func config(_ domains: String, unlisted: String = "default") throws -> String {
            try self.directory.write("pinning.json", "{\"version\": 1, \"unlistedHosts\": \"\(unlisted)\", \"domains\": {\(domains)}}")
        }

        func evaluate(_ host: String, _ extra: [String] = []) async throws -> Run {
            try await ConfigCLITests.run(
                [
                    "evaluate", "--config", self.directory.path("pinning.json"), "--host", host, "--chain", self.chainFile,
                    "--roots", self.rootsFile, "--at", self.at, "--json",
                ] + extra
            )
        }
    }

    @Test("evaluate --config: enforced match 0, mismatch 1, report-only 0 flagged, unlisted null; JSON fields")
    func evaluateWithConfiguration() async throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        try setup.config(
            """
            "api.example.com": {"pins": ["\(setup.pin(setup.chain.intermediate))", "\(setup.pin(setup.other.root))"]},
            "*.example.com": {"pins": ["\(setup.pin(setup.other.intermediate))", "\(setup.pin(setup.other.root))"]},
            "example.net": {"pins": ["\(setup.pin(setup.other.root))"], "enforce": false, "includeSubdomains": true}
            """
        )
        let trusted = try await setup.evaluate("api.example.com")
        #expect(trusted.status == 0, "\(trusted.stderr)")
        let json = try trusted.json()
        #expect(json["trusted"] as? Bool == true && json["matchedEntry"] as? String == "api.example.com")
        #expect(json["pinsEnforced"] as? Bool == true && json["pinMismatch"] as? Bool == false)
        #expect((json["warnings"] as? [String])?.isEmpty == true)

        let human = try await Self.run(
            [
                "evaluate", "--config", setup.directory.path("pinning.json"), "--host", "api.example.com", "--chain", setup.chainFile,
                "--roots", setup.rootsFile, "--at", setup.at,
            ]
        )
        #expect(human.status == 0 && human.stdout.contains("entry: \"api.example.com\" (pins enforced)"), "\(human.stdout)")

        // www.example.com: the leaf is only api.example.com, so the chain refuses on the name first.
        let wrongName = try await setup.evaluate("www.example.com")
        let wrongNameCode = try wrongName.json()["code"] as? String
        #expect(wrongName.status == 1 && wrongNameCode == "hostnameMismatch")

        try setup.config(
            """
            "api.example.com": {"pins": ["\(setup.pin(setup.other.intermediate))", "\(setup.pin(setup.other.root))"]}
            """
        )
        let mismatch = try await setup.evaluate("api.example.com")
        #expect(mismatch.status == 1)
        #expect(try mismatch.json()["code"] as? String == "pinMismatch")

        try setup.config(
            """
            "**.example.com": {"pins": ["\(setup.pin(setup.other.root))"], "enforce": false}
            """
        )
        let reportOnly = try await setup.evaluate("api.example.com")
        #expect(reportOnly.status == 0)
        let reportOnlyJSON = try reportOnly.json()
        #expect(reportOnlyJSON["pinMismatch"] as? Bool == true && reportOnlyJSON["pinsEnforced"] as? Bool == false)
        #expect((reportOnlyJSON["warnings"] as? [String])?.count == 1)

        try setup.config("\"other.example.org\": {\"pins\": [\"\(setup.pin(setup.other.root))\", \"\(setup.pin(setup.other.intermediate))\"]}")
        let unlisted = try await setup.evaluate("api.example.com")
        #expect(unlisted.status == 0)
        #expect(try unlisted.json()["matchedEntry"] is NSNull)
        try setup.config("\"other.example.org\": {\"pins\": [\"\(setup.pin(setup.other.root))\", \"\(setup.pin(setup.other.intermediate))\"]}", unlisted: "reject")
        let rejected = try await setup.evaluate("api.example.com")
        let rejectedCode = try rejected.json()["code"] as? String
        #expect(rejected.status == 1 && rejectedCode == "hostNotAllowed")
    }

    @Test("evaluate --config: policy flags are a usage error (2), so is a bad configuration or no --host")
    func usageErrors() async throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        try setup.config("\"api.example.com\": {\"pins\": [\"\(setup.pin(setup.chain.intermediate))\", \"\(setup.pin(setup.other.root))\"]}")
        for extra in [
            ["--mode", "none"], ["--pin-sha256", setup.pin(setup.chain.intermediate)], ["--pin", setup.rootsFile],
            ["--anchor", setup.rootsFile], ["--allow-invalid-certificates"],
        ] {
            let run = try await setup.evaluate("api.example.com", extra)
            #expect(run.status == 2, "\(extra)")
            #expect(run.stderr.contains("cannot be combined with --config"), "\(run.stderr)")
        }
        let noHost = try await Self.run(["evaluate", "--config", setup.directory.path("pinning.json"), "--chain", setup.chainFile])
        #expect(noHost.status == 2)
        for port in ["0", "99999", "-1"] {
            let badPort = try await setup.evaluate("api.example.com", ["--port=\(port)"])
            #expect(badPort.status == 2, "--port \(port)")
            #expect(badPort.stderr.contains("The value '\(port)' is invalid for '--port <port>': out of range; use a TCP port from 1 to 65535"), "\(badPort.stderr)")
        }
        try setup.config("\"api.example.com\": {\"pins\": [\"\(setup.pin(setup.chain.intermediate))\"], \"enforcePinning\": true}")
        let bad = try await setup.evaluate("api.example.com")
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("enforcePinning") && bad.stderr.contains("at least two distinct pins"))
    }

    @Test("evaluate --config --send-reports delivers the report before exiting", .timeLimit(.minutes(3)))
    func sendReports() async throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        let server = try LoopbackHTTPServer()
        defer { server.stop() }
        try setup.config(
            "\"api.example.com\": {\"pins\": [\"\(setup.pin(setup.other.intermediate))\", \"\(setup.pin(setup.other.root))\"], \"reportURIs\": [\"\(server.url("/hpkp").absoluteString)\"]}"
        )
        let run = try await setup.evaluate("api.example.com", ["--send-reports", "--port", "8443"])
        #expect(run.status == 1)
        // Delivered before the process exited: already recorded, no waiting.
        let requests = server.requests
        try #require(requests.count == 1, "\(run.stderr)")
        #expect(requests[0].requestLine == "POST /hpkp HTTP/1.1")
        #expect(requests[0].headers["content-type"] == "application/json")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(requests[0].body)) as? [String: Any])
        #expect(report["hostname"] as? String == "api.example.com" && report["port"] as? Int == 8443)
        #expect(run.stderr.contains("delivered"))
    }

    @Test("config lint: valid with expiry warnings exits 0, invalid lists every problem and exits 2")
    func lint() async throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        let pins = "[\"\(setup.pin(setup.chain.intermediate))\", \"\(setup.pin(setup.other.root))\"]"
        let path = try setup.config(
            """
            "api.example.com": {"pins": \(pins), "expires": "2030-06-10T00:00:00Z"},
            "old.example.com": {"pins": \(pins), "expires": "2029-01-01T00:00:00Z"},
            "fine.example.com": {"pins": \(pins)}
            """
        )
        let valid = try await Self.run(["config", "lint", path, "--at", "2030-06-01T00:00:00Z"])
        #expect(valid.status == 0, "\(valid.stderr)")
        #expect(valid.stdout.contains("valid; 3 entries"))
        #expect(valid.stdout.contains("warning: api.example.com: pins expire"))
        #expect(valid.stdout.contains("warning: old.example.com: pins expired"))

        try setup.config(
            """
            "*.com": {"pins": \(pins)},
            "api.example.com": {"pins": ["sha256/nope"], "expires": "tomorrow", "anchors": ["missing.pem"]}
            """,
            unlisted: "maybe"
        )
        let invalid = try await Self.run(["config", "lint", path])
        #expect(invalid.status == 2)
        for needle in ["unlistedHosts", "domains[\"*.com\"]", "pins[0]", "expires", "anchors[0]", "5 problems"] {
            #expect(invalid.stderr.contains(needle), "\(needle) in \(invalid.stderr)")
        }
    }

    @Test("pins --config-entry prints a ready-to-paste entry that loads")
    func configEntry() async throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        let bundle = try setup.directory.write("two.pem", TestPKI.pemBundle([setup.chain.intermediate.certificate, setup.chain.root.certificate]))
        let run = try await Self.run(["pins", bundle, "--config-entry", "api.example.com"])
        #expect(run.status == 0)
        #expect(run.stdout.hasPrefix("\"api.example.com\": {"))
        let loaded = try PinningConfiguration(data: Data("{\"version\": 1, \"domains\": {\(run.stdout)}}".utf8), baseDirectory: "/")
        #expect(loaded.entries.first?.pins == [Pin(spkiOf: setup.chain.intermediate.certificate), Pin(spkiOf: setup.chain.root.certificate)])
        let tooBroad = try await Self.run(["pins", bundle, "--config-entry", "*.com"])
        #expect(tooBroad.status == 2 && tooBroad.stderr.contains("too broad"))
    }

    @Test("config lint lists an excluded subdomain and refuses one without a parent")
    func lintExclusion() async throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        let pins = "[\"\(setup.pin(setup.chain.root))\", \"\(setup.pin(setup.chain.intermediate))\"]"
        let file = try setup.config("\"example.com\": {\"pins\": \(pins), \"includeSubdomains\": true}, \"status.example.com\": {\"excludeSubdomainFromParentPolicy\": true}")
        let lint = try await Self.run(["config", "lint", file])
        #expect(lint.status == 0, "\(lint.stderr)")
        #expect(lint.stdout.contains("status.example.com: excluded from its parent's policy"), "\(lint.stdout)")

        let orphan = try setup.config("\"status.example.com\": {\"excludeSubdomainFromParentPolicy\": true}")
        let refused = try await Self.run(["config", "lint", orphan])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("no entry covers this host from above"), "\(refused.stderr)")
    }
}
