import Foundation
import Pinning
import PinningTestSupport
import Testing

/// The command line as argument-parser models it (issue 17, item 7): enumerated options are enums whose help lists
/// their values, option combinations are refused in `validate()` before any file is read or any socket opened, and
/// every such refusal is one `pinning: …` line on stderr with exit status 2, as before the change.
@Suite("CLI idiom: enumerated options and validate()")
struct OptionIdiomCLITests {
    struct Refusal: Sendable, CustomTestStringConvertible {
        var arguments: [String]
        /// The whole of stderr.
        var line: String

        var testDescription: String { self.arguments.prefix(3).joined(separator: " ") + " …" }
    }

    /// Every file named here is missing: the refusal must come from parsing, before any file is opened.
    static let refusals: [Refusal] = [
        Refusal(
            arguments: ["evaluate", "--chain", "missing.pem", "--mode", "bogus"],
            line: "pinning: --mode: unknown mode \"bogus\"; use none, public-key or certificate"),
        Refusal(
            arguments: ["check", "https://localhost:1/", "--mode=publickey"],
            line: "pinning: --mode: unknown mode \"publickey\"; use none, public-key or certificate"),
        Refusal(
            arguments: ["bench", "--chain", "missing.pem", "--profile", "web-pki"],
            line: "pinning: --profile: unknown profile \"web-pki\"; use rfc5280 or webpki"),
        Refusal(
            arguments: ["bench", "handshake", "--key", "dsa"],
            line: "pinning: --key: unknown key type \"dsa\"; use p256, p384, rsa2048 or ed25519"),
        Refusal(
            arguments: ["evaluate", "--chain", "missing.pem", "--send-reports"],
            line: "pinning: --send-reports needs --config"),
        Refusal(
            arguments: ["check", "https://localhost:1/", "--no-reports"],
            line: "pinning: --no-reports needs --config or --pinset: only a configuration's entries send failure reports"),
        Refusal(
            arguments: ["evaluate", "--chain", "missing.pem", "--config", "missing.json"],
            line: "pinning: --config needs --host: the configuration pins hosts"),
        Refusal(
            arguments: ["evaluate", "--chain", "missing.pem", "--config", "missing.json", "--host", "h.example", "--mode", "none", "--anchors-only"],
            line: "pinning: --mode, --anchors-only cannot be combined with --config: the configuration decides pins, anchors and validation"),
        Refusal(
            arguments: ["check", "https://localhost:1/", "--config", "missing.json", "--pin-sha256", "sha256/x"],
            line: "pinning: --pin-sha256 cannot be combined with --config: the configuration decides pins, anchors and validation"),
        Refusal(
            arguments: ["check", "https://localhost:1/", "--identity", "missing.p12", "--identity-key", "missing.key"],
            line: "pinning: --identity cannot be combined with --identity-cert/--identity-key"),
        Refusal(
            arguments: ["check", "https://localhost:1/", "--identity-cert", "missing.pem"],
            line: "pinning: --identity-cert and --identity-key go together"),
        Refusal(
            arguments: ["check", "https://localhost:1/", "--passphrase-file", "missing.txt"],
            line: "pinning: --passphrase-env/--passphrase-file need --identity or --identity-key"),
        Refusal(
            arguments: ["check", "https://localhost:1/", "--identity", "missing.p12", "--passphrase-env", "NO_SUCH_VARIABLE", "--passphrase-file", "missing.txt"],
            line: "pinning: --passphrase-env and --passphrase-file cannot be combined"),
        Refusal(
            arguments: ["serve", "--cert", "missing.pem", "--key", "missing.key", "--passphrase-env", "NO_SUCH_VARIABLE", "--passphrase-file", "missing.txt"],
            line: "pinning: --passphrase-env and --passphrase-file cannot be combined"),
        Refusal(
            arguments: ["bench", "evaluations", "--chain", "missing.pem", "--config", "missing.json"],
            line: "pinning: --config: bench measures a security policy; give the policy flags of evaluate instead"),
    ]

    /// Parsed in process as the binary parses them (InProcessCLI); `throughTheBinary()` runs one refusal of each
    /// subcommand through the BUILT binary.
    @Test("a refused value or combination is one pinning: line, exit 2, before any file is read", arguments: Self.refusals)
    func refusedWhileParsing(_ refusal: Refusal) {
        let run = InProcessCLI.parse(refusal.arguments)
        #expect(run.status == 2, "\(run)")
        #expect(run.stderr == refusal.line + "\n", "\(run)")
        #expect(run.stdout.isEmpty, "\(run)")
    }

    @Test("the same refusals through the binary: one per subcommand, same line, exit 2")
    func throughTheBinary() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-idiom")
        defer { directory.remove() }
        var subcommands: Set<String> = []
        for refusal in Self.refusals where subcommands.insert(refusal.arguments.prefix(2).joined(separator: " ")).inserted {
            let run = try await Executable.pinning(refusal.arguments, in: directory)
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr == refusal.line + "\n", "\(run)")
            #expect(run.stdout.isEmpty, "\(run)")
        }
    }

    @Test("--help still answers on a command line that validate() would refuse")
    func helpBeforeValidation() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-idiom")
        defer { directory.remove() }
        let run = try await Executable.pinning(["evaluate", "--chain", "missing.pem", "--send-reports", "--help"], in: directory)
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("--send-reports"), "\(run)")
    }

    @Test("help lists each enumerated option's values")
    func helpListsValues() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-idiom")
        defer { directory.remove() }
        for command in [["evaluate"], ["check"], ["bench", "evaluations"]] {
            let help = try await Executable.pinning(command + ["--help"], in: directory)
            #expect(help.status == 0, "\(help)")
            #expect(Self.unwrapped(help.stdout).contains("Pinning mode: none, public-key or certificate."), "\(help)")
            #expect(Self.unwrapped(help.stdout).contains("Certificate profile: rfc5280 or webpki (default rfc5280)."), "\(help)")
        }
        let handshake = try await Executable.pinning(["bench", "handshake", "--help"], in: directory)
        #expect(handshake.status == 0, "\(handshake)")
        #expect(Self.unwrapped(handshake.stdout).contains("Key type of the minted chain: p256, p384, rsa2048 or ed25519 (default p256)."), "\(handshake)")
    }

    /// Help text with its line wrapping undone: every run of spaces and line breaks as one space.
    static func unwrapped(_ text: String) -> String {
        text.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
    }

    @Test("every spelling accepted before is accepted: --mode publicKey and public-key, --profile in any letter case")
    func spellings() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-idiom")
        defer { directory.remove() }
        let chain = try TestChain(host: "api.example.test")
        let chainFile = try directory.write("chain.pem", TestPKI.pemBundle(chain.presented))
        let root = try directory.write("root.pem", chain.root.certificatePEM)
        let pin = Pin(spkiOf: chain.intermediate.certificate).description
        let base = ["evaluate", "--chain", chainFile, "--roots", root, "--host", "api.example.test"]
        for mode in ["publicKey", "public-key"] {
            let run = try await Executable.pinning(base + ["--mode", mode, "--pin-sha256", pin, "--json"], in: directory)
            #expect(run.status == 0, "\(mode): \(run)")
            let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
            #expect(object?["mode"] as? String == "public-key", "\(mode): \(run)")
        }
        let certificate = try directory.write("intermediate.pem", chain.intermediate.certificatePEM)
        let byCertificate = try await Executable.pinning(base + ["--mode", "certificate", "--pin", certificate], in: directory)
        #expect(byCertificate.status == 0, "\(byCertificate)")
        for profile in ["RFC5280", "rfc5280", "webPKI", "WEBPKI"] {
            let run = try await Executable.pinning(base + ["--profile", profile], in: directory)
            // The verdict depends on the profile; the spelling is never the problem.
            #expect(run.status == 0 || run.status == 1, "\(profile): \(run)")
            #expect(run.stdout.contains("TRUSTED"), "\(profile): \(run)")
        }
    }

    @Test("bench handshake --key ed25519, a value help lists, runs: the NIOSSL clients accept Ed25519 servers too")
    func benchEd25519() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-idiom")
        defer { directory.remove() }
        let run = try await Executable.pinning(
            ["bench", "handshake", "--key", "ed25519", "--connections", "2", "--concurrency", "1", "--rounds", "1", "--json"],
            in: directory
        )
        #expect(run.status == 0, "\(run)")
        let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
        for key in ["handshakesPerSecond", "baselineHandshakesPerSecond", "unverifiedHandshakesPerSecond"] {
            #expect((object?[key] as? Double ?? 0) > 0, "\(key): \(run)")
        }
    }

    @Test("serve: a port already taken is said in words (exit 3), not as NIO's bind() dump")
    func listenProblemInWords() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let first = try await ServeProcess(["--cert", fixture.serverChain, "--key", fixture.serverKey], in: fixture.directory)
        defer { first.stop() }
        let second = try Subprocess(
            ["serve", "--port", "\(first.port)", "--cert", fixture.serverChain, "--key", fixture.serverKey],
            in: fixture.directory
        )
        #expect(await second.wait(seconds: 20) == 3, "\(second.stderr)")
        #expect(second.stderr == "pinning: serve: cannot listen on 127.0.0.1:\(first.port): address already in use\n", "\(second.stderr)")
    }
}
