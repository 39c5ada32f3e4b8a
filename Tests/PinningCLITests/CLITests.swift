import Crypto
import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

// Runs the BUILT `pinning` executable (Foundation `Process`) against a PKI minted once per suite, with
// `--roots` (never the OS store) and fixed `--at` instants, and checks exit status, stdout and stderr
// against the CLI contract: 0 trusted, 1 not trusted, 2 bad input with a message naming the file or option.

// MARK: - Locating and running the binary

/// Finds `<build dir>/pinning`.
///
/// Order: `$PINNING_BINARY`; directories around the running test bundle / executable (walking up a few
/// levels, which covers Linux `.build/<triple>/debug/<pkg>PackageTests.xctest` and macOS
/// `.build/debug/<pkg>PackageTests.xctest/Contents/MacOS/…`); finally `.build/{,<triple>/}{debug,release}`
/// relative to this source file.
enum PinningBinary {
    static let located: Result<URL, LookupError> = Self.locate()

    struct LookupError: Error, CustomStringConvertible {
        var searched: [String]
        var description: String {
            "the pinning executable was not found; build it with `swift build --build-tests` "
                + "(or set PINNING_BINARY). Searched:\n  " + self.searched.joined(separator: "\n  ")
        }
    }

    static func locate() -> Result<URL, LookupError> {
        let fileManager = FileManager.default
        var directories: [URL] = []
        func addWalkingUp(_ start: URL, levels: Int) {
            var url = start.standardizedFileURL
            for _ in 0...levels {
                directories.append(url)
                url = url.deletingLastPathComponent()
            }
        }
        var candidates: [URL] = []
        if let explicit = ProcessInfo.processInfo.environment["PINNING_BINARY"], !explicit.isEmpty {
            candidates.append(URL(fileURLWithPath: explicit))
        }
        addWalkingUp(Bundle.main.bundleURL, levels: 4)
        if let executable = Bundle.main.executableURL {
            addWalkingUp(executable.deletingLastPathComponent(), levels: 4)
        }
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            addWalkingUp(bundle.bundleURL.deletingLastPathComponent(), levels: 1)
        }
        if let argument0 = CommandLine.arguments.first, argument0.contains("/") {
            addWalkingUp(URL(fileURLWithPath: argument0).deletingLastPathComponent(), levels: 4)
        }
        // Tests/PinningCLITests/CLITests.swift → the package root.
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let buildDirectory = packageRoot.appendingPathComponent(".build")
        for configuration in ["debug", "release"] {
            directories.append(buildDirectory.appendingPathComponent(configuration))
        }
        if let triples = try? fileManager.contentsOfDirectory(atPath: buildDirectory.path) {
            for triple in triples.sorted() where triple.contains("-") {
                for configuration in ["debug", "release"] {
                    directories.append(buildDirectory.appendingPathComponent(triple).appendingPathComponent(configuration))
                }
            }
        }
        candidates += directories.map { $0.appendingPathComponent("pinning") }

        var searched: [String] = []
        for candidate in candidates {
            let path = candidate.standardizedFileURL.path
            if searched.contains(path) { continue }
            searched.append(path)
            var isDirectory: ObjCBool = false
            if fileManager.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                fileManager.isExecutableFile(atPath: path)
            {
                return .success(URL(fileURLWithPath: path))
            }
        }
        return .failure(LookupError(searched: searched))
    }
}

/// One run of the binary.
struct CLIRun: Sendable, CustomStringConvertible {
    var arguments: [String]
    var status: Int32
    var stdout: String
    var stderr: String

    var description: String {
        "pinning \(self.arguments.joined(separator: " ")) → exit \(self.status)\n--- stdout\n\(self.stdout)--- stderr\n\(self.stderr)"
    }

    /// stdout and stderr together, for assertions that do not care which stream a line went to.
    var output: String { self.stdout + "\n" + self.stderr }
}

enum CLI {
    static func run(_ arguments: [String], in directory: TemporaryDirectory) async throws -> CLIRun {
        try await Executable.run(try PinningBinary.located.get(), arguments, in: directory)
    }

    static let opensslPath = TestTools.opensslPath
    static var hasOpenSSL: Bool { TestTools.opensslAvailable }

    /// Runs openssl (without blocking a thread: ``TestTools/run(_:_:input:in:environment:timeout:)``); returns its
    /// exit status. `stdoutPath` receives what it printed on stdout.
    @discardableResult
    static func openssl(_ arguments: [String], stdin: String? = nil, stdoutPath: String? = nil) async throws -> Int32 {
        let result = try await TestTools.openssl(arguments, input: stdin)
        if let stdoutPath {
            try Data(result.stdout.utf8).write(to: URL(fileURLWithPath: stdoutPath))
        }
        return result.exited ? result.status : -1
    }
}

// MARK: - The PKI, minted once

/// Every file the tests point the CLI at.
struct CLIFixture: Sendable {
    static let day: TimeInterval = 86400
    /// 2030-06-01T00:00:00Z: everything is valid then.
    static let at = "2030-06-01T00:00:00Z"
    /// 2031-01-01T00:00:00Z: the leaf (valid to 2030-08-30) has expired, the CAs have not.
    static let afterLeafExpiry = "2031-01-01T00:00:00Z"
    static let host = "localhost"

    let directory: TemporaryDirectory
    let chain: TestChain
    let otherRoot: TestIdentity
    let selfSigned: TestIdentity
    let attackerRoot: TestIdentity
    let attackerIntermediate: TestIdentity
    let attackerLeaf: TestIdentity

    let chainPEM: String  // [leaf, intermediate]
    let chainP7B: String?  // the same, PKCS#7 DER via openssl (nil without openssl)
    let leafDER: String
    let rootPEM: String
    let intermediatePEM: String
    let otherRootPEM: String
    let selfSignedPEM: String
    let bothRootsPEM: String  // genuine root + attacker root: the client trusts both CAs
    let attackChainPEM: String  // [attackerLeaf, attackerIntermediate, genuine intermediate]
    let garbage: String
    let missing: String
    let empty: String
    let privateKey: String  // a PEM file holding only a PRIVATE KEY
    let emptyDirectory: String

    var leaf: Certificate { self.chain.leaf.certificate }
    var intermediate: Certificate { self.chain.intermediate.certificate }
    var root: Certificate { self.chain.root.certificate }

    init() async throws {
        let reference = TestPKI.referenceTime
        let caStart = reference.addingTimeInterval(-365 * Self.day)
        let caEnd = reference.addingTimeInterval(10 * 365 * Self.day)
        let leafStart = reference.addingTimeInterval(-30 * Self.day)
        let leafEnd = reference.addingTimeInterval(90 * Self.day)

        func mintChain(_ prefix: String) throws -> TestChain {
            let root = try TestPKI.root("\(prefix) Root CA", notValidBefore: caStart, notValidAfter: caEnd)
            let intermediate = try TestPKI.intermediate(
                "\(prefix) Intermediate CA", issuer: root, notValidBefore: caStart, notValidAfter: caEnd)
            let leaf = try TestPKI.leaf(
                Self.host, issuer: intermediate, dnsNames: [Self.host], ipAddresses: ["127.0.0.1"],
                notValidBefore: leafStart, notValidAfter: leafEnd)
            return TestChain(root: root, intermediate: intermediate, leaf: leaf)
        }
        self.chain = try mintChain("CLI Test")
        let attacker = try mintChain("Attacker")
        self.attackerRoot = attacker.root
        self.attackerIntermediate = attacker.intermediate
        self.attackerLeaf = attacker.leaf
        self.otherRoot = try TestPKI.root("Unrelated Root CA", notValidBefore: caStart, notValidAfter: caEnd)
        self.selfSigned = try TestPKI.selfSigned(
            "selfsigned.example", dnsNames: ["selfsigned.example"], notValidBefore: leafStart, notValidAfter: leafEnd)

        let directory = try TemporaryDirectory(prefix: "pinning-cli-tests")
        // Shared by every test of the run (CLITests.fixture), so no test removes it: the process does, at exit.
        directory.removeAtExit()
        self.directory = directory
        self.chainPEM = try directory.write("chain.pem", TestPKI.pemBundle(self.chain.presented))
        self.leafDER = try directory.write("leaf.der", bytes: self.chain.leaf.der)
        self.rootPEM = try directory.write("root.pem", TestPKI.pemBundle([self.chain.root.certificate]))
        self.intermediatePEM = try directory.write("intermediate.pem", TestPKI.pemBundle([self.chain.intermediate.certificate]))
        self.otherRootPEM = try directory.write("other-root.pem", TestPKI.pemBundle([self.otherRoot.certificate]))
        self.selfSignedPEM = try directory.write("selfsigned.pem", TestPKI.pemBundle([self.selfSigned.certificate]))
        self.bothRootsPEM = try directory.write(
            "both-roots.pem", TestPKI.pemBundle([self.chain.root.certificate, attacker.root.certificate]))
        self.attackChainPEM = try directory.write(
            "attack-chain.pem",
            TestPKI.pemBundle([attacker.leaf.certificate, attacker.intermediate.certificate, self.chain.intermediate.certificate]))
        self.garbage = try directory.write("garbage.pem", "this is not a certificate\n")
        self.missing = directory.path("does-not-exist.pem")
        self.empty = try directory.write("empty.pem", "")
        self.privateKey = try directory.write("key.pem", self.chain.leaf.privateKeyPEM)
        self.emptyDirectory = directory.path("empty-dir")
        try FileManager.default.createDirectory(atPath: self.emptyDirectory, withIntermediateDirectories: true)

        if CLI.hasOpenSSL {
            let p7b = directory.path("chain.p7b")
            let status = try await CLI.openssl(["crl2pkcs7", "-nocrl", "-certfile", self.chainPEM, "-outform", "DER", "-out", p7b])
            self.chainP7B = status == 0 ? p7b : nil
        } else {
            self.chainP7B = nil
        }
    }

    /// The common "evaluate the genuine chain for localhost at 2030-06-01 against root.pem" arguments.
    func evaluate(_ extra: [String], chain: String? = nil, roots: String? = nil, at: String = CLIFixture.at) -> [String] {
        ["evaluate", "--chain", chain ?? self.chainPEM, "--roots", roots ?? self.rootPEM, "--at", at] + extra
    }

    func run(_ arguments: [String]) async throws -> CLIRun {
        try await CLI.run(arguments, in: self.directory)
    }
}

func pin(_ certificate: Certificate) -> String { Pin(spkiOf: certificate).description }

/// Upper-case colon-separated SHA-256 of the DER, computed here with swift-crypto.
func sha256Fingerprint(_ certificate: Certificate) -> String {
    SHA256.hash(data: certificate.derBytes).map { String(format: "%02X", $0) }.joined(separator: ":")
}

func rfc3339(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.timeZone = TimeZone(identifier: "UTC")
    return formatter.string(from: date)
}

func jsonObject(_ run: CLIRun) throws -> [String: Any] {
    let value = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8))
    return try #require(value as? [String: Any], "stdout is not a JSON object: \(run)")
}

/// Every value of `key` anywhere inside `value`, depth first.
func values(of key: String, in value: Any) -> [Any] {
    if let object = value as? [String: Any] {
        var found: [Any] = []
        if let hit = object[key] { found.append(hit) }
        for (name, nested) in object.sorted(by: { $0.key < $1.key }) where name != key {
            found += values(of: key, in: nested)
        }
        return found
    }
    if let array = value as? [Any] {
        return array.flatMap { values(of: key, in: $0) }
    }
    return []
}

/// A well-formed pin no certificate here has.
let unrelatedPin = "sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString()

// MARK: - Tests

@Suite("pinning CLI (runs the built binary)")
struct CLITests {
    /// Minted once, on first use (a task, so that minting awaits openssl without blocking a thread).
    static let fixture = Task { try await CLIFixture() }

    static var opensslAvailable: Bool { CLI.hasOpenSSL }

    func fixture() async throws -> CLIFixture {
        _ = try PinningBinary.located.get()
        return try await Self.fixture.value
    }

    @Test("The binary is found next to the test bundle")
    func binaryIsFound() throws {
        let url = try PinningBinary.located.get()
        #expect(FileManager.default.isExecutableFile(atPath: url.path))
    }

    // MARK: evaluate: trusted and untrusted

    @Test("A valid chain for its host is TRUSTED, exit 0, with the chain, pins and validated path")
    func trustedChain() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "localhost"]))
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("TRUSTED"), "\(run)")
        #expect(!run.stdout.contains("NOT TRUSTED"), "\(run)")
        for certificate in f.chain.presented {
            #expect(run.stdout.contains(pin(certificate)), "missing pin of \(certificate.subject): \(run)")
            #expect(run.stdout.contains(rfc3339(certificate.notValidBefore)), "\(run)")
            #expect(run.stdout.contains(rfc3339(certificate.notValidAfter)), "\(run)")
        }
        #expect(run.stdout.contains("CN=localhost"), "\(run)")
        #expect(run.stdout.contains("CLI Test Intermediate CA"), "\(run)")
        // The validated path reaches the root given with --roots.
        #expect(run.stdout.contains("validated path"), "\(run)")
        #expect(run.stdout.contains(pin(f.root)), "validated path should end at the root: \(run)")
        #expect(run.stderr.isEmpty, "\(run)")
    }

    @Test("An IP address host in the leaf's SANs is trusted")
    func ipHost() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "127.0.0.1"]))
        #expect(run.status == 0, "\(run)")
    }

    @Test("A wrong host is NOT TRUSTED, exit 1, and the reason names the host and the leaf's names")
    func wrongHost() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "wrong.example"]))
        #expect(run.status == 1, "\(run)")
        #expect(run.stdout.contains("NOT TRUSTED"), "\(run)")
        #expect(run.stdout.contains("wrong.example"), "\(run)")
        #expect(run.stdout.contains("localhost"), "leaf names missing: \(run)")
    }

    @Test("--no-validate-domain-name accepts a chain for another host")
    func noValidateDomainName() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "wrong.example", "--no-validate-domain-name"]))
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("TRUSTED"), "\(run)")
    }

    @Test("--no-validate-domain-name does not rescue a chain that does not validate")
    func noValidateDomainNameStillValidates() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "wrong.example", "--no-validate-domain-name"], roots: f.otherRootPEM))
        #expect(run.status == 1, "\(run)")
    }

    @Test("An expired leaf (--at after notAfter) is NOT TRUSTED, exit 1, and the output gives the dates")
    func expired() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "localhost"], at: CLIFixture.afterLeafExpiry))
        #expect(run.status == 1, "\(run)")
        #expect(run.stdout.contains("NOT TRUSTED"), "\(run)")
        #expect(run.stdout.contains(rfc3339(f.leaf.notValidAfter)), "leaf notAfter missing: \(run)")
        #expect(run.stdout.contains(CLIFixture.afterLeafExpiry), "validation time missing: \(run)")
        let reason = run.stdout.split(separator: "\n").first { $0.contains("reason") }.map(String.init) ?? ""
        #expect(reason.lowercased().contains("expir") || reason.contains(rfc3339(f.leaf.notValidAfter)), "reason: \(reason)\n\(run)")
    }

    @Test("A chain that does not reach --roots is NOT TRUSTED")
    func unknownRoot() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "localhost"], roots: f.otherRootPEM))
        #expect(run.status == 1, "\(run)")
        #expect(run.stdout.contains("NOT TRUSTED"), "\(run)")
    }

    // MARK: pinning

    @Test("--pin-sha256 of the intermediate's key: trusted")
    func publicKeyPinOfIntermediate() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "localhost", "--pin-sha256", pin(f.intermediate)]))
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("TRUSTED"), "\(run)")
        let explicit = try await f.run(
            f.evaluate(["--host", "localhost", "--mode", "public-key", "--pin-sha256", pin(f.intermediate)]))
        #expect(explicit.status == 0, "\(explicit)")
    }

    @Test("A wrong --pin-sha256: exit 1, listing the expected pin and each presented certificate's pin")
    func wrongPublicKeyPin() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "localhost", "--pin-sha256", unrelatedPin]))
        #expect(run.status == 1, "\(run)")
        #expect(run.stdout.contains("NOT TRUSTED"), "\(run)")
        #expect(run.stdout.contains(unrelatedPin), "expected pin not listed: \(run)")
        for certificate in f.chain.presented {
            #expect(run.stdout.contains(pin(certificate)), "pin of \(certificate.subject) not listed: \(run)")
        }
    }

    @Test("--pin FILE in certificate mode: a self-signed leaf with --allow-invalid-certificates is trusted")
    func certificatePinSelfSigned() async throws {
        let f = try await fixture()
        let run = try await f.run(
            f.evaluate(
                ["--host", "selfsigned.example", "--mode", "certificate", "--pin", f.selfSignedPEM, "--allow-invalid-certificates"],
                chain: f.selfSignedPEM))
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("TRUSTED"), "\(run)")
    }

    @Test("A self-signed leaf without pin or --allow-invalid-certificates is not trusted")
    func selfSignedUnpinned() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "selfsigned.example"], chain: f.selfSignedPEM))
        #expect(run.status == 1, "\(run)")
    }

    @Test("Certificate mode with a pinned certificate that is not the server's: not trusted, even allowing invalid")
    func certificatePinMismatch() async throws {
        let f = try await fixture()
        let run = try await f.run(
            f.evaluate(
                ["--host", "selfsigned.example", "--mode", "certificate", "--pin", f.intermediatePEM, "--allow-invalid-certificates"],
                chain: f.selfSignedPEM))
        #expect(run.status == 1, "\(run)")
    }

    @Test("Appended-certificate attack: attacker chain + genuine intermediate, pinned on the genuine one → 1")
    func appendedCertificateAttack() async throws {
        let f = try await fixture()
        // Control: the genuine chain passes the same policy with the same roots.
        let control = try await f.run(
            f.evaluate(["--host", "localhost", "--pin-sha256", pin(f.intermediate)], roots: f.bothRootsPEM))
        #expect(control.status == 0, "\(control)")

        let publicKey = try await f.run(
            f.evaluate(["--host", "localhost", "--pin-sha256", pin(f.intermediate)], chain: f.attackChainPEM, roots: f.bothRootsPEM))
        #expect(publicKey.status == 1, "public-key pin bypassed by an appended certificate: \(publicKey)")
        #expect(publicKey.stdout.contains("NOT TRUSTED"), "\(publicKey)")

        let certificate = try await f.run(
            f.evaluate(
                ["--host", "localhost", "--mode", "certificate", "--pin", f.intermediatePEM],
                chain: f.attackChainPEM, roots: f.bothRootsPEM))
        #expect(certificate.status == 1, "certificate pin bypassed by an appended certificate: \(certificate)")

        let json = try await f.run(
            f.evaluate(
                ["--host", "localhost", "--pin-sha256", pin(f.intermediate), "--json"], chain: f.attackChainPEM, roots: f.bothRootsPEM))
        #expect(json.status == 1, "\(json)")
        let object = try jsonObject(json)
        #expect(object["trusted"] as? Bool == false)
        let presented = try #require(object["presentedChain"] as? [[String: Any]])
        #expect(
            presented.compactMap { $0["spkiPin"] as? String }
                == [pin(f.attackerLeaf.certificate), pin(f.attackerIntermediate.certificate), pin(f.intermediate)])
    }

    // MARK: anchors

    @Test("--anchor adds a trust anchor to --roots")
    func anchorAdded() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "localhost", "--anchor", f.rootPEM], roots: f.otherRootPEM))
        #expect(run.status == 0, "\(run)")
    }

    @Test("--anchor with --anchors-only trusts the anchor")
    func anchorsOnlyTrusted() async throws {
        let f = try await fixture()
        let run = try await f.run(
            f.evaluate(["--host", "localhost", "--anchor", f.rootPEM, "--anchors-only"], roots: f.otherRootPEM))
        #expect(run.status == 0, "\(run)")
    }

    @Test("--anchors-only ignores the --roots store")
    func anchorsOnlyIgnoresRoots() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "localhost", "--anchor", f.otherRootPEM, "--anchors-only"]))
        #expect(run.status == 1, "root.pem from --roots should not count with --anchors-only: \(run)")
    }

    // MARK: formats

    @Test("A PKCS#7 chain (openssl crl2pkcs7) evaluates like the PEM one", .enabled(if: CLITests.opensslAvailable))
    func pkcs7Chain() async throws {
        let f = try await fixture()
        let p7b = try #require(f.chainP7B, "openssl crl2pkcs7 failed")
        let run = try await f.run(f.evaluate(["--host", "localhost", "--pin-sha256", pin(f.intermediate)], chain: p7b))
        #expect(run.status == 0, "\(run)")
    }

    // MARK: JSON

    @Test("--json when trusted: trusted true, presentedChain with each spkiPin")
    func jsonTrusted() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "localhost", "--json"]))
        #expect(run.status == 0, "\(run)")
        let object = try jsonObject(run)
        #expect(object["trusted"] as? Bool == true)
        let presented = try #require(object["presentedChain"] as? [[String: Any]], "\(run)")
        #expect(presented.compactMap { $0["spkiPin"] as? String } == f.chain.presented.map(pin))
    }

    @Test("--json when untrusted: trusted false, non-empty reason and code, presentedChain with each spkiPin")
    func jsonUntrusted() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "localhost", "--pin-sha256", unrelatedPin, "--json"]))
        #expect(run.status == 1, "\(run)")
        let object = try jsonObject(run)
        #expect(object["trusted"] as? Bool == false)
        #expect(!((object["reason"] as? String) ?? "").isEmpty, "\(run)")
        #expect(!((object["code"] as? String) ?? "").isEmpty, "\(run)")
        let presented = try #require(object["presentedChain"] as? [[String: Any]], "\(run)")
        #expect(presented.compactMap { $0["spkiPin"] as? String } == f.chain.presented.map(pin))
        let expected = object["expectedPins"] as? [String]
        #expect(expected == [unrelatedPin], "\(run)")
    }

    @Test("--json for a wrong host: reason non-empty, code present")
    func jsonWrongHost() async throws {
        let f = try await fixture()
        let run = try await f.run(f.evaluate(["--host", "wrong.example", "--json"]))
        #expect(run.status == 1, "\(run)")
        let object = try jsonObject(run)
        #expect(object["trusted"] as? Bool == false)
        #expect(((object["reason"] as? String) ?? "").contains("wrong.example"), "\(run)")
        #expect(object["code"] is String, "\(run)")
    }

    // MARK: bad input → 2

    struct BadInput: Sendable, CustomStringConvertible {
        var name: String
        /// Builds the arguments from the fixture.
        var arguments: @Sendable (CLIFixture) -> [String]
        /// What stderr must mention (file or option).
        var mentions: @Sendable (CLIFixture) -> [String]
        var description: String { self.name }
    }

    static let badInputs: [BadInput] = [
        BadInput(
            name: "missing --chain file",
            arguments: { f in ["evaluate", "--chain", f.missing, "--roots", f.rootPEM, "--at", CLIFixture.at] },
            mentions: { _ in ["does-not-exist.pem"] }),
        BadInput(
            name: "garbage --chain file",
            arguments: { f in ["evaluate", "--chain", f.garbage, "--roots", f.rootPEM, "--at", CLIFixture.at] },
            mentions: { _ in ["garbage.pem"] }),
        BadInput(
            name: "empty --chain file",
            arguments: { f in ["evaluate", "--chain", f.empty, "--roots", f.rootPEM, "--at", CLIFixture.at] },
            mentions: { _ in ["--chain", "empty.pem"] }),
        BadInput(
            name: "--chain file holding only a private key",
            arguments: { f in ["evaluate", "--chain", f.privateKey, "--roots", f.rootPEM, "--at", CLIFixture.at] },
            mentions: { _ in ["--chain", "key.pem"] }),
        BadInput(
            name: "--roots directory without certificates",
            arguments: { f in f.evaluate([], roots: f.emptyDirectory) },
            mentions: { _ in ["--roots", "empty-dir"] }),
        BadInput(
            name: "invalid --host",
            arguments: { f in f.evaluate(["--host", "bad..host"]) },
            mentions: { _ in ["--host"] }),
        BadInput(
            name: "bad --pin-sha256",
            arguments: { f in f.evaluate(["--pin-sha256", "sha256/not*base64"]) },
            mentions: { _ in ["--pin-sha256"] }),
        BadInput(
            name: "--pin-sha256 of the wrong length",
            arguments: { f in f.evaluate(["--pin-sha256", "sha256/" + Data(repeating: 1, count: 20).base64EncodedString()]) },
            mentions: { _ in ["--pin-sha256"] }),
        BadInput(
            name: "--pin-sha256 with another algorithm",
            arguments: { f in f.evaluate(["--pin-sha256", "md5/" + Data(repeating: 1, count: 16).base64EncodedString()]) },
            mentions: { _ in ["--pin-sha256"] }),
        BadInput(
            name: "bad --at",
            arguments: { f in f.evaluate([], at: "next tuesday") },
            mentions: { _ in ["--at"] }),
        BadInput(
            name: "--at without a time zone",
            arguments: { f in f.evaluate([], at: "2030-06-01T00:00:00") },
            mentions: { _ in ["--at"] }),
        // Foundation's parser once moved these to 2030-03-02 and 2030-06-02 and validated there.
        BadInput(
            name: "--at on 30 February",
            arguments: { f in f.evaluate([], at: "2030-02-30T00:00:00Z") },
            mentions: { _ in ["--at: \"2030-02-30T00:00:00Z\" is not an RFC 3339 instant", "day 30 does not exist: February 2030 has 28 days"] }),
        BadInput(
            name: "--at at hour 24",
            arguments: { f in f.evaluate([], at: "2030-06-01T24:00:00Z") },
            mentions: { _ in ["--at: \"2030-06-01T24:00:00Z\"", "hour 24 does not exist"] }),
        BadInput(
            name: "unknown --mode",
            arguments: { f in f.evaluate(["--mode", "bogus"]) },
            mentions: { _ in ["--mode"] }),
        BadInput(
            name: "unknown --profile",
            arguments: { f in f.evaluate(["--profile", "bogus"]) },
            mentions: { _ in ["--profile: unknown profile \"bogus\"; use rfc5280 or webpki"] }),
        BadInput(
            name: "--send-reports without --config",
            arguments: { f in f.evaluate(["--send-reports"]) },
            mentions: { _ in ["--send-reports needs --config"] }),
        BadInput(
            name: "unknown flag",
            arguments: { f in f.evaluate(["--bogus-flag"]) },
            mentions: { _ in ["--bogus-flag"] }),
        BadInput(
            name: "missing --chain option",
            arguments: { f in ["evaluate", "--roots", f.rootPEM, "--at", CLIFixture.at] },
            mentions: { _ in ["--chain"] }),
        BadInput(
            name: "--chain without a value",
            arguments: { _ in ["evaluate", "--chain"] },
            mentions: { _ in ["--chain"] }),
        BadInput(
            name: "garbage --roots",
            arguments: { f in f.evaluate([], roots: f.garbage) },
            mentions: { _ in ["--roots"] }),
        BadInput(
            name: "missing --roots",
            arguments: { f in f.evaluate([], roots: f.missing) },
            mentions: { _ in ["--roots"] }),
        BadInput(
            name: "garbage --pin file",
            arguments: { f in f.evaluate(["--pin", f.garbage]) },
            mentions: { _ in ["--pin", "garbage.pem"] }),
        BadInput(
            name: "missing --anchor file",
            arguments: { f in f.evaluate(["--anchor", f.missing]) },
            mentions: { _ in ["--anchor", "does-not-exist.pem"] }),
        BadInput(
            name: "unknown subcommand",
            arguments: { _ in ["frobnicate"] },
            mentions: { _ in ["frobnicate"] }),
        BadInput(
            name: "inspect without files",
            arguments: { _ in ["inspect"] },
            mentions: { _ in ["file"] }),
    ]

    @Test("Bad input exits 2 with a message on stderr naming the file or option", arguments: CLITests.badInputs)
    func badInput(_ input: BadInput) async throws {
        let f = try await fixture()
        let run = try await f.run(input.arguments(f))
        #expect(run.status == 2, "\(input): \(run)")
        #expect(!run.stderr.isEmpty, "\(input): nothing on stderr: \(run)")
        for mention in input.mentions(f) {
            #expect(run.stderr.contains(mention), "\(input): stderr does not mention \(mention): \(run)")
        }
        #expect(!run.stdout.contains("TRUSTED"), "\(input): printed a verdict: \(run)")
    }

    // MARK: inspect and pins

    @Test("inspect a PEM bundle: subject, SHA-256 fingerprint and pin of every certificate")
    func inspectPEM() async throws {
        let f = try await fixture()
        let run = try await f.run(["inspect", f.chainPEM])
        #expect(run.status == 0, "\(run)")
        try Self.expectInspected(run, f.chain.presented)
    }

    @Test("inspect DER and PEM files together")
    func inspectDER() async throws {
        let f = try await fixture()
        let run = try await f.run(["inspect", f.leafDER, f.rootPEM])
        #expect(run.status == 0, "\(run)")
        try Self.expectInspected(run, [f.leaf, f.root])
    }

    @Test("inspect a PKCS#7 file", .enabled(if: CLITests.opensslAvailable))
    func inspectPKCS7() async throws {
        let f = try await fixture()
        let p7b = try #require(f.chainP7B, "openssl crl2pkcs7 failed")
        let run = try await f.run(["inspect", p7b])
        #expect(run.status == 0, "\(run)")
        try Self.expectInspected(run, f.chain.presented)
    }

    static func expectInspected(_ run: CLIRun, _ certificates: [Certificate]) throws {
        let normalized = run.stdout.uppercased().replacingOccurrences(of: ":", with: "")
        for certificate in certificates {
            #expect(run.stdout.contains(certificate.subject.description), "subject \(certificate.subject): \(run)")
            #expect(
                normalized.contains(sha256Fingerprint(certificate).replacingOccurrences(of: ":", with: "")),
                "SHA-256 fingerprint of \(certificate.subject): \(run)")
            #expect(run.stdout.contains(pin(certificate)), "pin of \(certificate.subject): \(run)")
        }
        #expect(run.stdout.contains("sha256/"))
    }

    @Test("inspect --json is an array with every certificate's pin")
    func inspectJSON() async throws {
        let f = try await fixture()
        let run = try await f.run(["inspect", f.chainPEM, f.leafDER, "--json"])
        #expect(run.status == 0, "\(run)")
        let value = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8))
        let array = try #require(value as? [Any], "not a JSON array: \(run)")
        #expect(array.count == 3)
        let pins = array.map { values(of: "spkiPin", in: $0).first as? String }
        #expect(pins == [pin(f.leaf), pin(f.intermediate), pin(f.leaf)], "\(run)")
        let fingerprints = array.map { (values(of: "sha256Fingerprint", in: $0).first as? String)?.uppercased() }
        #expect(fingerprints == [f.leaf, f.intermediate, f.leaf].map(sha256Fingerprint), "\(run)")
    }

    @Test("inspect a file that is not a certificate: exit 2 naming the file")
    func inspectGarbage() async throws {
        let f = try await fixture()
        for path in [f.garbage, f.missing, f.empty, f.privateKey] {
            let run = try await f.run(["inspect", path])
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr.contains(URL(fileURLWithPath: path).lastPathComponent), "\(run)")
        }
        // A good file first does not hide the bad one.
        let mixed = try await f.run(["inspect", f.chainPEM, f.garbage])
        #expect(mixed.status == 2, "\(mixed)")
        #expect(mixed.stderr.contains("garbage.pem"), "\(mixed)")
    }

    @Test("inspect and pins: a file that holds no certificate, or is missing, hides no other file's certificates, in any order")
    func badFileHidesNothing() async throws {
        let f = try await fixture()
        for command in ["inspect", "pins"] {
            for files in [[f.rootPEM, f.garbage], [f.garbage, f.rootPEM], [f.missing, f.leafDER, f.garbage, f.rootPEM]] {
                let run = try await f.run([command] + files)
                #expect(run.status == 2, "\(command) \(files): \(run)")
                #expect(run.stdout.contains(pin(f.root)), "\(command) \(files): \(run)")
                if files.contains(f.leafDER) { #expect(run.stdout.contains(pin(f.leaf)), "\(command) \(files): \(run)") }
                // One `pinning:` line per bad file, each naming it.
                let lines = run.stderr.split(separator: "\n")
                let bad = files.filter { $0 == f.garbage || $0 == f.missing }
                #expect(lines.count == bad.count, "\(command) \(files): \(run)")
                for path in bad {
                    #expect(lines.contains { $0.hasPrefix("pinning: ") && $0.contains(URL(fileURLWithPath: path).lastPathComponent) }, "\(command) \(files): \(run)")
                }
            }
        }
    }

    @Test("pins prints one sha256/ line per certificate, in order")
    func pins() async throws {
        let f = try await fixture()
        let run = try await f.run(["pins", f.chainPEM, f.leafDER])
        #expect(run.status == 0, "\(run)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(run)")
        let printed = lines.map { $0.split(separator: " ").first.map(String.init) ?? "" }
        #expect(printed == [pin(f.leaf), pin(f.intermediate), pin(f.leaf)], "\(run)")
        let garbage = try await f.run(["pins", f.garbage])
        #expect(garbage.status == 2, "\(garbage)")
        #expect(garbage.stderr.contains("garbage.pem"), "\(garbage)")
    }

    @Test("pins agree with openssl's SPKI SHA-256", .enabled(if: CLITests.opensslAvailable))
    func pinsMatchOpenSSL() async throws {
        let f = try await fixture()
        let spki = f.directory.path("leaf-spki-\(UUID().uuidString).der")
        let status = try await CLI.openssl(["x509", "-in", f.leafDER, "-inform", "DER", "-pubkey", "-noout"], stdoutPath: spki + ".pem")
        #expect(status == 0)
        #expect(try await CLI.openssl(["pkey", "-pubin", "-in", spki + ".pem", "-outform", "DER", "-out", spki]) == 0)
        let digest = SHA256.hash(data: try Data(contentsOf: URL(fileURLWithPath: spki)))
        let expected = "sha256/" + Data(digest).base64EncodedString()
        let run = try await f.run(["pins", f.leafDER])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.hasPrefix(expected), "openssl says \(expected): \(run)")
    }
}

@Suite("pinning demo (runs the built binary)")
struct DemoCommandTests {
    @Test("The demo runs real servers, exits 0, and shows the unpinned client fooled by the proxy and the pinned client refusing it")
    func demo() async throws {
        _ = try PinningBinary.located.get()
        let directory = try TemporaryDirectory(prefix: "pinning-demo-test")
        defer { directory.remove() }
        let run = try await CLI.run(["demo"], in: directory)
        #expect(run.status == 0, "\(run)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        func line(_ scenario: String) -> String { lines.first { $0.hasPrefix(scenario) } ?? "" }
        // The danger: an unpinned client accepts the intercepting proxy (real servers on 127.0.0.1).
        #expect(line("unpinned client -> intercepting proxy").contains("accepted, HTTP 200"), "\(run)")
        // Pinning refuses it, also with the genuine certificates appended, and says why.
        #expect(line("public-key pinned -> intercepting proxy").contains("refused by policy"), "\(run)")
        #expect(line("public-key pinned -> proxy appending genuine certs").contains("refused by policy"), "\(run)")
        #expect(line("certificate pinned -> self-signed device").contains("accepted"), "\(run)")
        #expect(line("mutual TLS with the .p12 identity").contains("accepted, HTTP 200"), "\(run)")
        #expect(line("mutual TLS without an identity").contains("refused"), "\(run)")
        #expect(line("client.p12 with a wrong passphrase").contains("wrong passphrase"), "\(run)")
        #expect(lines.filter { $0.hasSuffix(" yes") }.count == 10, "\(run)")
        #expect(run.stdout.contains("[pinMismatch]"), "\(run)")
        #expect(run.stdout.contains("all as expected"), "\(run)")
        #expect(!lines.contains { $0.hasSuffix(" NO") }, "\(run)")
    }
}
