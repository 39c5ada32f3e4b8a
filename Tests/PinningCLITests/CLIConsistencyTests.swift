import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

// Issue 11 items 2, 11 and 12 through the BUILT binary: non-ASCII passphrases end to end with OpenSSL-made
// files, serve's own messages and passphrase options, curl's pin syntax, bracketed IPv6 binds, non-regular
// files for every file option, help texts and --version.

/// Runs `/bin/bash -c SCRIPT` with `PINNING` set to the built binary (for `<(…)` process substitution).
func bash(_ script: String, in directory: TemporaryDirectory, environment: [String: String] = [:]) async throws -> CLIRun {
    let binary = try PinningBinary.located.get().path
    return try await Executable.run(URL(fileURLWithPath: "/bin/bash"), ["-c", script], in: directory, environment: environment.merging(["PINNING": binary]) { a, _ in a })
}

/// A FIFO at `path` fed with `contents` by a background writer (as a shell's `<(cat file)` is).
func fifo(_ path: String, _ contents: String) throws {
    #expect(mkfifo(path, 0o600) == 0)
    let bytes = Array(contents.utf8)
    Thread.detachNewThread {
        // Blocks until the reader opens it; a reader that never comes leaves the thread parked, harmlessly.
        guard let handle = FileHandle(forWritingAtPath: path) else { return }
        handle.write(Data(bytes))
        try? handle.close()
    }
}

@Suite("CLI: passphrases, serve's identity, pins, binds, file kinds, help and --version", .serialized)
struct CLIConsistencyTests {
    static let passphrases = ["wörd", "café", "x€", "密码", "a😀b"]

    @Test(
        "pki export with a non-ASCII passphrase: openssl pkcs12 opens it; check --identity uses it against serve",
        .enabled(if: CLI.hasOpenSSL), arguments: Self.passphrases)
    func exportAndConnect(passphrase: String) async throws {
        let f = try await PKIFixture.make()
        defer { f.directory.remove() }
        let out = f.directory.path("cli.p12")
        let export = try await Executable.pinning(
            ["pki", "export", f.pki, "cli", "--p12", out, "--passphrase-env", "P12_PASS"], in: f.directory, environment: ["P12_PASS": passphrase]
        )
        #expect(export.status == 0, "\(export)")
        let passFile = try f.directory.write("utf8-pass.txt", passphrase + "\n")
        let opened = try await Executable.openssl(["pkcs12", "-in", out, "-passin", "file:\(passFile)", "-nodes", "-noout"], in: f.directory)
        #expect(opened.status == 0, "\(opened)")

        // An OpenSSL-made .p12 with the same passphrase, used by check --identity for mutual TLS against serve.
        let opensslP12 = f.directory.path("openssl.p12")
        let made = try await Executable.openssl(
            [
                "pkcs12", "-export", "-in", f.file("cli.pem"), "-inkey", f.file("cli.key"), "-certfile", f.file("int.pem"),
                "-out", opensslP12, "-passout", "file:\(passFile)",
            ], in: f.directory)
        #expect(made.status == 0, "\(made)")
        let server = try await ServeProcess(["--cert", f.file("srv-chain.pem"), "--key", f.file("srv.key"), "--client-ca", f.file("root.pem")], in: f.directory)
        defer { server.stop() }
        for p12 in [out, opensslP12] {
            let run = try await Executable.pinning(
                [
                    "check", "https://localhost:\(server.port)/", "--resolve", "localhost:\(server.port):127.0.0.1", "--roots", f.file("root.pem"),
                    "--identity", p12, "--passphrase-file", passFile,
                ], in: f.directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.stdout.contains("\"subject\":\"CN=cli\""), "\(run)")
            let wrong = try await Executable.pinning(
                ["check", "https://localhost:\(server.port)/", "--roots", f.file("root.pem"), "--identity", p12, "--passphrase-env", "P12_PASS"],
                in: f.directory, environment: ["P12_PASS": passphrase + "!"])
            #expect(wrong.status == 2, "\(wrong)")
            #expect(wrong.stderr.contains(p12) && wrong.stderr.contains("wrong passphrase"), "\(wrong)")
        }

        // check --identity-key with an OpenSSL-encrypted PKCS#8 key under the same passphrase.
        let encrypted = f.directory.path("cli-enc.key")
        let topk8 = try await Executable.openssl(
            ["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", f.file("cli.key"), "-out", encrypted, "-passout", "file:\(passFile)"], in: f.directory)
        #expect(topk8.status == 0, "\(topk8)")
        let pem = try await Executable.pinning(
            [
                "check", "https://localhost:\(server.port)/", "--resolve", "localhost:\(server.port):127.0.0.1", "--roots", f.file("root.pem"),
                "--identity-cert", f.file("cli-chain.pem"), "--identity-key", encrypted, "--passphrase-env", "P12_PASS",
            ],
            in: f.directory, environment: ["P12_PASS": passphrase])
        #expect(pem.status == 0, "\(pem)")
    }

    @Test("passphrase files that are not UTF-8 or hold a NUL are refused naming the option")
    func passphraseFileRefusals() async throws {
        let f = try await PKIFixture.make()
        defer { f.directory.remove() }
        let latin1 = try f.directory.write("latin1.txt", bytes: [0x77, 0xF6, 0x72, 0x64, 0x0A])
        let nul = try f.directory.write("nul.txt", bytes: [0x61, 0x00, 0x62, 0x0A])
        for (file, words) in [(latin1, "not UTF-8"), (nul, "NUL")] {
            let run = try await Executable.pinning(["pki", "export", f.pki, "cli", "--p12", f.directory.path("x.p12"), "--passphrase-file", file], in: f.directory)
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr.contains("--passphrase-file \(file)") && run.stderr.contains(words), "\(run)")
        }
    }

    @Test("serve: a key that is not the server certificate's says so about the server, not about client certificates")
    func serveMismatchedKey() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let run = try Subprocess(["serve", "--port", "0", "--cert", fixture.serverChain, "--key", fixture.clientKey], in: fixture.directory)
        let status = await run.wait(seconds: 10)
        #expect(status == 2, "\(run.stderr)")
        #expect(run.stderr.contains("--key \(fixture.clientKey) is not the private key of the server certificate CN=localhost"), "\(run.stderr)")
        #expect(!run.stderr.contains("client certificate"), "\(run.stderr)")
        #expect(run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
    }

    @Test("serve: the key file given as --cert too is refused as --cert's (it holds no certificate), not as --key's")
    func serveKeyAsCertificate() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let run = try Subprocess(["serve", "--port", "0", "--cert", fixture.serverKey, "--key", fixture.serverKey], in: fixture.directory)
        let status = await run.wait(seconds: 10)
        #expect(status == 2, "\(run.stderr)")
        #expect(run.stderr.contains("pinning: --cert \(fixture.serverKey): no certificate: "), "\(run.stderr)")
        #expect(!run.stderr.contains("--key"), "\(run.stderr)")
        #expect(run.stderr.split(separator: "\n").count == 1, "\(run.stderr)")
        // A file that is missing is named by its option too, whichever of the two it is.
        let missing = fixture.directory.path("missing.key")
        let noKey = try Subprocess(["serve", "--port", "0", "--cert", fixture.serverChain, "--key", missing], in: fixture.directory)
        #expect(await noKey.wait(seconds: 10) == 2, "\(noKey.stderr)")
        #expect(noKey.stderr.contains("pinning: --key \(missing): unreadable file"), "\(noKey.stderr)")
    }

    @Test("serve: an encrypted --key names the options to give its passphrase with, and works with them", .enabled(if: CLI.hasOpenSSL))
    func serveEncryptedKey() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let encrypted = fixture.directory.path("server-enc.key")
        #expect(try await CLI.openssl(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", fixture.serverKey, "-out", encrypted, "-passout", "pass:sérvér"]) == 0)
        let run = try Subprocess(["serve", "--port", "0", "--cert", fixture.serverChain, "--key", encrypted], in: fixture.directory)
        let status = await run.wait(seconds: 10)
        #expect(status == 2, "\(run.stderr)")
        #expect(run.stderr.contains("--key \(encrypted): the private key is encrypted; give its passphrase with --passphrase-env VAR or --passphrase-file FILE"), "\(run.stderr)")

        let passFile = try fixture.directory.write("server-pass.txt", "sérvér\n")
        let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", encrypted, "--passphrase-file", passFile], in: fixture.directory)
        defer { server.stop() }
        let check = try await fixture.check(fixture.checkArguments(server.port))
        #expect(check.status == 0, "\(check)")

        let wrong = try Subprocess(
            ["serve", "--port", "0", "--cert", fixture.serverChain, "--key", encrypted, "--passphrase-env", "SERVE_PASS"],
            in: fixture.directory, environment: ["SERVE_PASS": "server"])
        #expect(await wrong.wait(seconds: 10) == 2, "\(wrong.stderr)")
        #expect(wrong.stderr.contains("--key \(encrypted): the passphrase does not decrypt the private key"), "\(wrong.stderr)")
    }

    @Test("curl's sha256//BASE64 pins, and its ;-separated list, are accepted by --pin-sha256")
    func curlPinSyntax() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let chain = try fixture.directory.write("presented.pem", TestPKI.pemBundle(fixture.server.presented))
        let intermediate = Pin(spkiOf: fixture.server.intermediate.certificate).base64
        let other = Pin(spkiOf: fixture.client.root.certificate).base64
        let base = ["evaluate", "--chain", chain, "--roots", fixture.root, "--host", "localhost"]
        for pins in [["sha256//\(intermediate)"], ["SHA256//\(intermediate)"], ["sha256//\(other);sha256//\(intermediate)"]] {
            let run = try await Executable.pinning(base + pins.flatMap { ["--pin-sha256", $0] }, in: fixture.directory)
            #expect(run.status == 0, "\(run)")
        }
        let mismatch = try await Executable.pinning(base + ["--pin-sha256", "sha256//\(other)"], in: fixture.directory)
        #expect(mismatch.status == 1, "\(mismatch)")
        let config = try fixture.directory.write(
            "curl-pins.json",
            "{\"version\": 1, \"domains\": {\"localhost\": {\"pins\": [\"sha256//\(intermediate)\", \"sha256//\(other)\"]}}}"
        )
        let configured = try await Executable.pinning(["evaluate", "--chain", chain, "--roots", fixture.root, "--host", "localhost", "--config", config], in: fixture.directory)
        #expect(configured.status == 0, "\(configured)")
    }

    @Test("serve --bind accepts [::1] and ::1; a malformed bind is bad input", .enabled(if: ipv6LoopbackAvailable()))
    func bracketedIPv6() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        for bind in ["[::1]", "::1"] {
            let server = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey, "--bind", bind], in: fixture.directory)
            defer { server.stop() }
            #expect(server.subprocess.stdout.contains("listening on https://[::1]:\(server.port)\n"), "\(server.subprocess.stdout)")
            let run = try await fixture.check(
                ["check", "https://localhost:\(server.port)/", "--resolve", "localhost:\(server.port):[::1]", "--roots", fixture.root])
            #expect(run.status == 0, "\(run)")
        }
        for bind in ["[::1", "::1]", "[]", "[127.0.0.1x]", ":::1", "bad..host"] {
            let run = try Subprocess(["serve", "--port", "0", "--cert", fixture.serverChain, "--key", fixture.serverKey, "--bind", bind], in: fixture.directory)
            #expect(await run.wait(seconds: 10) == 2, "\(bind): \(run.stderr)")
            #expect(run.stderr.contains("--bind"), "\(run.stderr)")
        }
    }

    @Test(
        "FIFOs and <(…) work for every file option: serve --cert/--key/--passphrase-file, check --identity-cert/--identity-key/--identity/--roots, evaluate --chain/--config",
        .enabled(if: CLI.hasOpenSSL))
    func nonRegularFiles() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let certFIFO = fixture.directory.path("cert.fifo")
        let keyFIFO = fixture.directory.path("key.fifo")
        let caFIFO = fixture.directory.path("ca.fifo")
        try fifo(certFIFO, TestPKI.pemBundle(fixture.server.presented))
        try fifo(keyFIFO, fixture.server.leaf.privateKeyPEM)
        try fifo(caFIFO, fixture.client.root.certificatePEM)
        let server = try await ServeProcess(["--cert", certFIFO, "--key", keyFIFO, "--client-ca", caFIFO], in: fixture.directory)
        defer { server.stop() }
        let target = "https://localhost:\(server.port)/ --resolve localhost:\(server.port):127.0.0.1"
        let cert = fixture.clientCert
        let key = fixture.clientKey
        let pemRun = try await bash(
            "\"$PINNING\" check \(target) --roots <(cat '\(fixture.root)') --identity-cert <(cat '\(cert)') --identity-key <(cat '\(key)')",
            in: fixture.directory)
        #expect(pemRun.status == 0, "\(pemRun)")
        #expect(pemRun.stdout.contains("\"subject\":\"CN=client-7\""), "\(pemRun)")
        let p12 = try #require(fixture.clientP12)
        let p12Run = try await bash(
            "\"$PINNING\" check \(target) --roots '\(fixture.root)' --identity <(cat '\(p12)') --passphrase-file <(printf 's3cret\\n')",
            in: fixture.directory)
        #expect(p12Run.status == 0, "\(p12Run)")

        let chain = try fixture.directory.write("presented.pem", TestPKI.pemBundle(fixture.server.presented))
        let pin = Pin(spkiOf: fixture.server.intermediate.certificate).description
        let pin2 = Pin(spkiOf: fixture.server.root.certificate).description
        let evaluate = try await bash(
            "\"$PINNING\" evaluate --chain <(cat '\(chain)') --roots <(cat '\(fixture.root)') --host localhost --config <(printf '%s' '{\"version\": 1, \"domains\": {\"localhost\": {\"pins\": [\"\(pin)\", \"\(pin2)\"]}}}')",
            in: fixture.directory)
        #expect(evaluate.status == 0, "\(evaluate)")
    }

    @Test("pinning help SUBCOMMAND: every help text reads whole (no sentence broken by a hard line break)")
    func helpTexts() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-help")
        defer { directory.remove() }
        let subcommands = [
            [], ["evaluate"], ["check"], ["serve"], ["inspect"], ["pins"], ["config"], ["config", "lint"], ["pki"], ["pki", "init"],
            ["pki", "issue"], ["pki", "export"], ["bench"], ["bench", "evaluations"], ["bench", "handshake"], ["demo"], ["tuf"],
        ]
        for subcommand in subcommands {
            let run = try await Executable.pinning(["help"] + subcommand, in: directory)
            #expect(run.status == 0, "\(run)")
            let broken = HelpText.brokenLines(run.stdout)
            #expect(broken.isEmpty, "pinning help \(subcommand.joined(separator: " ")): lines broken mid-sentence:\n\(broken.joined(separator: "\n"))\n\(run.stdout)")
        }
    }

    @Test("--version prints the version and exits 0")
    func version() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-version")
        defer { directory.remove() }
        let run = try await Executable.pinning(["--version"], in: directory)
        #expect(run.status == 0, "\(run)")
        let version = run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version.split(separator: ".").count == 3 && version.split(separator: ".").allSatisfy { Int($0) != nil }, "\(run)")
        let help = try await Executable.pinning(["--help"], in: directory)
        #expect(help.stdout.contains("--version"), "\(help)")
    }
}

/// Finds hard line breaks inside sentences in argument-parser's help output.
enum HelpText {
    /// argument-parser wraps prose to lines of at most 79 characters. A line that could have taken the next
    /// line's first word, does not end a sentence, and is followed by more of the same sentence was broken by a
    /// newline in the source text.
    static func brokenLines(_ help: String) -> [String] {
        let lines = help.components(separatedBy: "\n")
        var broken: [String] = []
        for (index, line) in lines.enumerated() where index + 1 < lines.count {
            let next = lines[index + 1]
            let text = line.trimmingCharacters(in: .whitespaces)
            let following = next.trimmingCharacters(in: .whitespaces)
            guard !text.isEmpty, !following.isEmpty else { continue }
            // Option rows (and the row after the last continuation line) and section headers are not prose.
            if line.hasPrefix("  -") || next.hasPrefix("  -") || text == text.uppercased() { continue }
            // The wrapper breaks a line only when the next word does not fit in 79 columns.
            let nextWord = following.prefix { !$0.isWhitespace }
            if line.count + 1 + nextWord.count > 79 { continue }
            if let last = text.last, ".:;!?)".contains(last) { continue }
            // The next line continues the sentence: it starts in lower case, with a digit, "(" or an option name.
            if let first = following.first, first.isLowercase || first.isNumber || first == "(" || first == "-" {
                broken.append(line)
            }
        }
        return broken
    }
}
