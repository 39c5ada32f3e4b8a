import Foundation
import Pinning
import PinningTestSupport
import Testing

/// `pinning pinset` (runs the built binary): a repository made, published to, renewed and rotated from the command
/// line, and every kind of bad input refused with exit 2 and a line naming the file or option.
@Suite("pinning pinset (runs the built binary)", .serialized)
struct PinSetCLITests {
    /// A directory with four keys (one per role, made by `pinset keygen`), a configuration with an anchor and a
    /// backup pin, and helpers to run the binary there.
    struct Fixture {
        let directory: TemporaryDirectory
        let chain: TestChain
        var repo: String { self.directory.path("repo") }
        func key(_ role: String) -> String { self.directory.path("\(role).pem") }
        var onlineKeys: [String] { ["--targets-key", self.key("targets"), "--snapshot-key", self.key("snapshot"), "--timestamp-key", self.key("timestamp")] }

        static func make() async throws -> Fixture {
            let fixture = Fixture(directory: try TemporaryDirectory(prefix: "pinning-pinset"), chain: try TestChain(host: "localhost"))
            for (role, type) in [("root", "ed25519"), ("targets", "ecdsa-p256"), ("snapshot", "rsa"), ("timestamp", "ed25519")] {
                let run = try await fixture.run(["pinset", "keygen", "--type", type, "--out", fixture.key(role)])
                try #require(run.status == 0, "\(run)")
            }
            try fixture.directory.write("conf/fleet-root.pem", fixture.chain.root.certificatePEM)
            try fixture.writeConfiguration("conf/pinning.json", pins: [Pin(spkiOf: fixture.chain.intermediate.certificate).description, Self.backupPin])
            return fixture
        }

        static let backupPin = "sha256/" + Data(repeating: 7, count: 32).base64EncodedString()

        @discardableResult
        func writeConfiguration(_ name: String, pins: [String], anchors: [String] = ["fleet-root.pem"], host: String = "localhost") throws -> String {
            let pinList = pins.map { "\"\($0)\"" }.joined(separator: ", ")
            let anchorList = anchors.map { "\"\($0)\"" }.joined(separator: ", ")
            return try self.directory.write(name, #"{"version": 1, "domains": {"\#(host)": {"pins": [\#(pinList)], "anchors": [\#(anchorList)], "anchorsOnly": true}}}"#)
        }

        func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> CLIRun {
            try await Executable.pinning(arguments, in: self.directory, environment: environment)
        }

        func initialize() async throws {
            let run = try await self.run(["pinset", "init", self.repo, "--root-key", self.key("root")] + self.onlineKeys)
            try #require(run.status == 0, "\(run)")
        }

        func status() async throws -> TUFJSONObject {
            let run = try await self.run(["pinset", "status", self.repo, "--json"])
            return try #require(try TUFJSON.parse(Array(run.stdout.utf8)).objectValue, "\(run)")
        }
    }

    @Test("keygen writes 0600 PKCS#8 keys and never overwrites; init, publish, timestamp, rotate-root and status on one repository")
    func lifecycle() async throws {
        let fixture = try await Fixture.make()
        defer { fixture.directory.remove() }
        let attributes = try FileManager.default.attributesOfItem(atPath: fixture.key("root"))
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let original = FileManager.default.contents(atPath: fixture.key("root"))
        let again = try await fixture.run(["pinset", "keygen", "--type", "rsa", "--out", fixture.key("root")])
        #expect(again.status == 2 && again.stderr.contains(fixture.key("root")) && again.stderr.contains("never overwritten"), "\(again)")
        #expect(FileManager.default.contents(atPath: fixture.key("root")) == original)
        if CLI.hasOpenSSL {
            for role in ["root", "targets", "snapshot"] {
                let read = try await Executable.openssl(["pkey", "-in", fixture.key(role), "-noout"], in: fixture.directory)
                #expect(read.status == 0, "\(read)")
            }
        }

        let initialized = try await fixture.run(["pinset", "init", fixture.repo, "--root-key", fixture.key("root"), "--expires", "timestamp=2"] + fixture.onlineKeys)
        #expect(initialized.status == 0, "\(initialized)")
        for name in ["1.root.json", "root.json", "1.targets.json", "1.snapshot.json", "timestamp.json"] {
            #expect(FileManager.default.fileExists(atPath: fixture.repo + "/metadata/" + name), "\(name)")
        }
        let reinitialized = try await fixture.run(["pinset", "init", fixture.repo, "--root-key", fixture.key("root")] + fixture.onlineKeys)
        #expect(reinitialized.status == 2 && reinitialized.stderr.contains("already a pin-set repository"), "\(reinitialized)")

        let published = try await fixture.run(["pinset", "publish", fixture.repo, fixture.directory.path("conf/pinning.json")] + fixture.onlineKeys)
        #expect(published.status == 0, "\(published)")
        #expect(published.stdout.contains("with 1 referenced file (fleet-root.pem)"), "\(published)")
        var status = try await fixture.status()
        #expect(status["clientAccepts"] == .bool(true))
        let targets = status["targets"]?.arrayValue?.compactMap { $0.objectValue?["path"]?.stringValue }
        #expect(targets == ["fleet-root.pem", "pinning.json"])
        let configuration = try #require(FileManager.default.contents(atPath: fixture.directory.path("conf/pinning.json")))
        let stored = try FileManager.default.contentsOfDirectory(atPath: fixture.repo + "/targets").filter { $0.hasSuffix(".pinning.json") }
        #expect(stored.count == 1)
        #expect(FileManager.default.contents(atPath: fixture.repo + "/targets/" + (stored.first ?? "")) == configuration)

        let renewed = try await fixture.run(["pinset", "timestamp", fixture.repo, "--timestamp-key", fixture.key("timestamp")])
        #expect(renewed.status == 0 && renewed.stdout.contains("timestamp v3"), "\(renewed)")
        let timestamp = status["roles"]?.arrayValue?.last?.objectValue
        #expect(timestamp?["secondsToExpiry"]?.intValue.map { $0 > 86_400 && $0 <= 2 * 86_400 } == true, "\(String(describing: timestamp))")

        let newRoot = fixture.directory.path("root-2.pem")
        _ = try await fixture.run(["pinset", "keygen", "--type", "ecdsa-p256", "--out", newRoot])
        let rotated = try await fixture.run(["pinset", "rotate-root", fixture.repo, "--old-key", fixture.key("root"), "--new-key", newRoot, "--new-key", fixture.key("root"), "--root-threshold", "2"])
        #expect(rotated.status == 0 && rotated.stdout.contains("root v2"), "\(rotated)")
        status = try await fixture.status()
        #expect(status["clientAccepts"] == .bool(true))
        let root = status["roles"]?.arrayValue?.first?.objectValue
        #expect(root?["version"]?.intValue == 2 && root?["threshold"]?.intValue == 2 && root?["validSignatures"]?.intValue == 2, "\(String(describing: root))")
        #expect(FileManager.default.contents(atPath: fixture.repo + "/metadata/root.json") == FileManager.default.contents(atPath: fixture.repo + "/metadata/2.root.json"))

        let text = try await fixture.run(["pinset", "status", fixture.repo])
        #expect(text.status == 0 && text.stdout.contains("a client accepts it") && text.stdout.contains("root v2"), "\(text)")
    }

    @Test("bad input exits 2 with one line naming the file or option; nothing is written")
    func badInput() async throws {
        let fixture = try await Fixture.make()
        defer { fixture.directory.remove() }
        try await fixture.initialize()
        let configuration = fixture.directory.path("conf/pinning.json")
        let certificate = try fixture.directory.write("cert.pem", fixture.chain.leaf.certificatePEM)
        let encrypted = fixture.directory.path("encrypted.pem")
        let encryptedMade = try await fixture.run(
            ["pinset", "keygen", "--type", "ed25519", "--out", encrypted + ".2", "--passphrase-env", "KEY_PASSPHRASE"], environment: ["KEY_PASSPHRASE": "s3cret"])
        #expect(encryptedMade.status == 0, "\(encryptedMade)")
        let noBackup = try fixture.writeConfiguration("conf/one-pin.json", pins: [Fixture.backupPin])
        let absolute = try fixture.writeConfiguration(
            "conf/absolute.json", pins: [Fixture.backupPin, Pin(spkiOf: fixture.chain.root.certificate).description], anchors: [fixture.directory.path("conf/fleet-root.pem")])
        let missingAnchor = try fixture.writeConfiguration("conf/missing.json", pins: [Fixture.backupPin, Pin(spkiOf: fixture.chain.root.certificate).description], anchors: ["nowhere.pem"])
        let unicodeMissing = fixture.directory.path("ключ-ü.pem")
        let publish = ["pinset", "publish", fixture.repo, configuration]
        let cases: [([String], [String])] = [
            (
                publish + ["--targets-key", fixture.directory.path("missing.pem"), "--snapshot-key", fixture.key("snapshot"), "--timestamp-key", fixture.key("timestamp")],
                ["--targets-key", "missing.pem", "no such file"]
            ),
            (
                publish + ["--targets-key", fixture.directory.path("conf"), "--snapshot-key", fixture.key("snapshot"), "--timestamp-key", fixture.key("timestamp")],
                ["--targets-key", "conf", "directory"]
            ),
            (publish + ["--targets-key", certificate, "--snapshot-key", fixture.key("snapshot"), "--timestamp-key", fixture.key("timestamp")], ["--targets-key", "cert.pem", "not a private key"]),
            (
                publish + ["--targets-key", fixture.key("snapshot"), "--snapshot-key", fixture.key("snapshot"), "--timestamp-key", fixture.key("timestamp")],
                ["--targets-key", "snapshot.pem", "is not a targets key"]
            ),
            (
                publish + ["--targets-key", encrypted + ".2", "--snapshot-key", fixture.key("snapshot"), "--timestamp-key", fixture.key("timestamp")],
                ["--targets-key", "encrypted.pem.2", "encrypted", "--passphrase-env"]
            ),
            (publish + ["--targets-key", unicodeMissing, "--snapshot-key", fixture.key("snapshot"), "--timestamp-key", fixture.key("timestamp")], ["--targets-key", "ключ-ü.pem", "no such file"]),
            (["pinset", "publish", fixture.directory.path("conf"), configuration] + fixture.onlineKeys, ["conf", "not a pin-set repository"]),
            (["pinset", "status", fixture.directory.path("нет-репо")], ["нет-репо", "no such directory", "pinset init"]),
            (["pinset", "status", configuration], ["conf", "not a directory"]),
            (["pinset", "publish", fixture.repo, absolute] + fixture.onlineKeys, ["anchors[0]", "relative path"]),
            (["pinset", "publish", fixture.repo, configuration, "--expires", "targets=0"] + fixture.onlineKeys, ["--expires targets=0"]),
            (["pinset", "publish", fixture.repo, configuration, "--expires", "delegated=3"] + fixture.onlineKeys, ["--expires delegated=3"]),
            (["pinset", "init", fixture.directory.path("repo2"), "--root-key", fixture.key("root"), "--root-threshold", "2"] + fixture.onlineKeys, ["--root-threshold 2"]),
            (["pinset", "keygen", "--type", "dsa", "--out", fixture.directory.path("dsa.pem")], ["--type", "unknown key type \"dsa\""]),
            (["pinset", "timestamp", fixture.repo], ["--timestamp-key FILE is required"]),
            (["pinset", "publish", fixture.repo, configuration, "--targets-key", fixture.key("targets")], ["--snapshot-key FILE is required"]),
            (["pinset", "rotate-root", fixture.repo, "--old-key", fixture.key("targets"), "--new-key", fixture.key("root")], ["--old-key", "targets.pem", "is not a root key"]),
            // The configuration's target where its anchor goes (once a crash of the metadata builder, signal 4).
            (publish + ["--target-name", "fleet-root.pem"] + fixture.onlineKeys, ["--target-name fleet-root.pem", "fleet-root.pem, a file the configuration references"]),
        ]
        let before = try FileManager.default.contentsOfDirectory(atPath: fixture.repo + "/metadata").sorted()
        for (arguments, words) in cases {
            let run = try await fixture.run(arguments)
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(run)")
            for word in words { #expect(run.stderr.contains(word), "\(word): \(run)") }
        }
        // The configuration lint: every problem listed, exit 2.
        let lint = try await fixture.run(["pinset", "publish", fixture.repo, noBackup] + fixture.onlineKeys)
        #expect(lint.status == 2 && lint.stderr.contains("not published") && lint.stderr.contains("at least two distinct pins"), "\(lint)")
        let unreadable = try await fixture.run(["pinset", "publish", fixture.repo, missingAnchor] + fixture.onlineKeys)
        #expect(unreadable.status == 2 && unreadable.stderr.contains("anchors[0]") && unreadable.stderr.contains("nowhere.pem"), "\(unreadable)")
        // A clientIdentity: every client refuses a pin set that names one, so publish refuses it (it once noted it and
        // published). The identity's files need not exist: it is refused before anything reads them.
        let pins = [Fixture.backupPin, Pin(spkiOf: fixture.chain.root.certificate).description].map { "\"\($0)\"" }.joined(separator: ", ")
        let identity = try fixture.directory.write(
            "conf/identity.json",
            #"{"version": 1, "domains": {"localhost": {"pins": [\#(pins)], "anchors": ["fleet-root.pem"], "clientIdentity": {"pkcs12": "device.p12", "passphraseEnv": "DEVPASS"}}}}"#)
        let withIdentity = try await fixture.run(["pinset", "publish", fixture.repo, identity] + fixture.onlineKeys)
        #expect(withIdentity.status == 2 && withIdentity.stderr.contains("not published"), "\(withIdentity)")
        #expect(withIdentity.stderr.contains("domains[\"localhost\"].clientIdentity: a pin set carries no private keys"), "\(withIdentity)")
        #expect(!withIdentity.stdout.contains("published"), "\(withIdentity)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.repo + "/metadata").sorted() == before)
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.path("repo2/metadata/1.root.json")))

        // Non-ASCII paths work where they name real files: a repository and keys under Unicode names.
        let unicodeKey = fixture.directory.path("ключ-ü.pem")
        #expect(try await fixture.run(["pinset", "keygen", "--type", "ed25519", "--out", unicodeKey]).status == 0)
        let unicodeRepo = fixture.directory.path("репо-ü")
        let run = try await fixture.run(["pinset", "init", unicodeRepo, "--root-key", unicodeKey] + fixture.onlineKeys)
        #expect(run.status == 0 && FileManager.default.fileExists(atPath: unicodeRepo + "/metadata/1.root.json"), "\(run)")
        // With the passphrase, the encrypted key reads (and is refused only as the wrong role's key).
        let withPassphrase = try await fixture.run(
            ["pinset", "timestamp", fixture.repo, "--timestamp-key", encrypted + ".2", "--passphrase-env", "KEY_PASSPHRASE"], environment: ["KEY_PASSPHRASE": "s3cret"])
        #expect(withPassphrase.status == 2 && withPassphrase.stderr.contains("is not a timestamp key"), "\(withPassphrase)")
    }

    @Test("a second configuration in the repository: its anchor of the same name with other bytes is refused, naming both; under a directory of its own it is published")
    func twoConfigurations() async throws {
        let fixture = try await Fixture.make()
        defer { fixture.directory.remove() }
        try await fixture.initialize()
        let first = try await fixture.run(["pinset", "publish", fixture.repo, fixture.directory.path("conf/pinning.json")] + fixture.onlineKeys)
        #expect(first.status == 0, "\(first)")
        func versionsAndTargets() async throws -> [String] {
            let status = try await fixture.status()
            let versions = status["roles"]?.arrayValue?.compactMap { $0.objectValue?["version"]?.intValue }.map(String.init) ?? []
            return versions + (status["targets"]?.arrayValue?.compactMap { $0.objectValue?["sha256"]?.stringValue } ?? [])
        }
        let before = try await versionsAndTargets()
        // Another CA's root under the same file name, as the new user's report had it.
        let other = try TestChain(host: "other.example", rootName: "Evil Root")
        try fixture.directory.write("conf2/fleet-root.pem", other.root.certificatePEM)
        let configuration = try fixture.writeConfiguration(
            "conf2/other.json", pins: [Fixture.backupPin, Pin(spkiOf: other.intermediate.certificate).description], host: "other.example")
        let refused = try await fixture.run(["pinset", "publish", fixture.repo, configuration, "--target-name", "other.json"] + fixture.onlineKeys)
        #expect(refused.status == 2 && refused.stderr.split(separator: "\n").count == 1, "\(refused)")
        for word in ["pinset publish:", "\"fleet-root.pem\"", "\"other.json\"", "\"pinning.json\""] { #expect(refused.stderr.contains(word), "\(word): \(refused)") }
        #expect(try await versionsAndTargets() == before, "nothing was written")

        let published = try await fixture.run(["pinset", "publish", fixture.repo, configuration, "--target-name", "other/other.json"] + fixture.onlineKeys)
        #expect(published.status == 0, "\(published)")
        let targets = try await fixture.status()["targets"]?.arrayValue?.compactMap { $0.objectValue?["path"]?.stringValue }
        #expect(targets == ["fleet-root.pem", "other/fleet-root.pem", "other/other.json", "pinning.json"], "\(String(describing: targets))")
    }

    @Test("publish --check-live connects to each named host: pins its live chain passes are published, pins it would fail are refused")
    func checkLive() async throws {
        let fixture = try await Fixture.make()
        defer { fixture.directory.remove() }
        try await fixture.initialize()
        let chain = try fixture.directory.write("server-chain.pem", TestPKI.pemBundle(fixture.chain.presented))
        let key = try fixture.directory.write("server.key", fixture.chain.leaf.privateKeyPEM)
        let server = try await ServeProcess(["--cert", chain, "--key", key], in: fixture.directory)
        defer { server.stop() }
        let live = ["--check-live", "--live-port", String(server.port), "--resolve", "localhost:\(server.port):127.0.0.1"]
        let good = try await fixture.run(["pinset", "publish", fixture.repo, fixture.directory.path("conf/pinning.json")] + fixture.onlineKeys + live)
        #expect(good.status == 0 && good.stdout.contains("live: localhost port \(server.port): its chain passes"), "\(good)")
        let stale = try fixture.writeConfiguration("conf/stale.json", pins: [Fixture.backupPin, "sha256/" + Data(repeating: 9, count: 32).base64EncodedString()])
        let refused = try await fixture.run(["pinset", "publish", fixture.repo, stale] + fixture.onlineKeys + live)
        #expect(refused.status == 2 && refused.stderr.contains("would fail the new pins") && refused.stderr.contains("localhost port \(server.port)"), "\(refused)")
        // The reason in words with its code, as `pinning check` writes it: no Swift type name without --verbose.
        #expect(refused.stderr.contains("  localhost port \(server.port): [pinMismatch] no certificate on the validated path matches a pin"), "\(refused)")
        #expect(!refused.stderr.contains("TrustFailure"), "\(refused)")
        let status = try await fixture.status()
        #expect(status["roles"]?.arrayValue?[1].objectValue?["version"]?.intValue == 2, "the refused publish wrote nothing")
    }

    @Test("a failure (exit 1) has the prefix of bad input (`pinning: pinset timestamp: …`), not `pinning pinset timestamp: …`")
    func failurePrefix() async throws {
        let fixture = try await Fixture.make()
        defer { fixture.directory.remove() }
        try await fixture.initialize()
        // Another pinset command holds the repository's lock.
        let descriptor = open(fixture.repo + "/.pinset.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        try #require(descriptor >= 0 && flock(descriptor, LOCK_EX | LOCK_NB) == 0)
        defer { close(descriptor) }
        let busy = try await fixture.run(["pinset", "timestamp", fixture.repo, "--timestamp-key", fixture.key("timestamp")])
        #expect(busy.status == 1, "\(busy)")
        #expect(busy.stderr.hasPrefix("pinning: pinset timestamp: "), "\(busy)")
        #expect(busy.stderr.contains("another pinning pinset command is writing this repository"), "\(busy)")
    }

    @Test("publish --check-live with an internationalised host name: connected by its A-labels (lookup, SNI, --resolve in either form)")
    func checkLiveInternationalised() async throws {
        let fixture = try await Fixture.make()
        defer { fixture.directory.remove() }
        try await fixture.initialize()
        let chain = try TestChain(host: "xn--bcher-kva.example", rootName: "Bücher Root")
        try fixture.directory.write("conf/buecher-root.pem", chain.root.certificatePEM)
        let configuration = try fixture.writeConfiguration(
            "conf/buecher.json", pins: [Fixture.backupPin, Pin(spkiOf: chain.intermediate.certificate).description], anchors: ["buecher-root.pem"], host: "bücher.example")
        let server = try await ServeProcess(
            ["--cert", try fixture.directory.write("idn-chain.pem", TestPKI.pemBundle(chain.presented)), "--key", try fixture.directory.write("idn.key", chain.leaf.privateKeyPEM)],
            in: fixture.directory)
        defer { server.stop() }
        for resolved in ["bücher.example", "xn--bcher-kva.example"] {
            let run = try await fixture.run(
                ["pinset", "publish", fixture.repo, configuration, "--check-live", "--live-port", String(server.port), "--resolve", "\(resolved):\(server.port):127.0.0.1"]
                    + fixture.onlineKeys)
            #expect(run.status == 0 && run.stdout.contains("live: bücher.example (xn--bcher-kva.example) port \(server.port): its chain passes"), "\(resolved): \(run)")
        }
        // And a chain the pins fail is refused, not passed over as unreachable.
        let stale = try fixture.writeConfiguration(
            "conf/buecher-stale.json", pins: [Fixture.backupPin, "sha256/" + Data(repeating: 9, count: 32).base64EncodedString()], anchors: ["buecher-root.pem"],
            host: "bücher.example")
        let refused = try await fixture.run(
            ["pinset", "publish", fixture.repo, stale, "--check-live", "--live-port", String(server.port), "--resolve", "bücher.example:\(server.port):127.0.0.1"] + fixture.onlineKeys)
        #expect(refused.status == 2 && refused.stderr.contains("bücher.example (xn--bcher-kva.example) port \(server.port): [pinMismatch]"), "\(refused)")
    }
}
