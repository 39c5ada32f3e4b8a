import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

/// New-user trial 3 (NU3): internationalised names where the rest of the CLI takes them (`pki issue --dns`,
/// `serve --bind`), invalid A-labels refused, `--out -` as standard output, the inspect text in words, and
/// non-canonical Base64 pins refused on the command line.
@Suite("NU3: names, --out -, inspect words, pins", .serialized)
struct NU3NamesCLITests {
    @Test("pki issue --dns takes an internationalised name and writes its A-labels into the SAN; evaluate --host matches it")
    func issueIDN() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-nu3-idn")
        defer { directory.remove() }
        let pki = directory.path("pki")
        let initRun = try await Executable.pinning(["pki", "init", pki], in: directory)
        #expect(initRun.status == 0, "\(initRun)")
        let issue = try await Executable.pinning(
            ["pki", "issue", pki, "--server", "geraet", "--dns", "bücher.example", "--dns", "*.Bücher.example", "--dns", "xn--r8jz45g.xn--zckzah"], in: directory)
        #expect(issue.status == 0, "\(issue)")
        let certificate = try #require(try CertificateLoader.certificates(atPath: directory.path("pki/geraet.pem")).first)
        let names = try #require(try certificate.extensions.subjectAlternativeNames).compactMap { name -> String? in
            if case .dnsName(let dns) = name { return dns }
            return nil
        }
        #expect(names == ["xn--bcher-kva.example", "*.xn--bcher-kva.example", "xn--r8jz45g.xn--zckzah"], "\(names)")
        // The name the certificate carries is the one the evaluator looks for, written either way.
        for host in ["bücher.example", "xn--bcher-kva.example", "www.bücher.example"] {
            let evaluate = try await Executable.pinning(
                ["evaluate", "--chain", directory.path("pki/geraet-chain.pem"), "--roots", directory.path("pki/root.pem"), "--host", host], in: directory)
            #expect(evaluate.status == 0, "\(host): \(evaluate)")
        }
    }

    @Test(
        "pki issue --dns still refuses what is not a host name, and an xn-- label that is not an A-label",
        arguments: [
            ("bad name", "not a DNS name (ASCII letters"),
            ("bü cher.example", "not a valid internationalised host name"),
            ("xn--zz.example", "not a valid A-label"),
            ("api.xn--a.example", "not a valid A-label"),
            ("*.com", "not a DNS name"),
            ("😀.example", "U+1F600"),
        ])
    func issueRefused(_ dns: String, _ words: String) async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-nu3-idn-refused")
        defer { directory.remove() }
        let pki = directory.path("pki")
        _ = try await Executable.pinning(["pki", "init", pki], in: directory)
        let run = try await Executable.pinning(["pki", "issue", pki, "--server", "s", "--dns", dns], in: directory)
        #expect(run.status == 2, "\(run)")
        #expect(run.stderr.hasPrefix("pinning: --dns \""), "\(run)")
        #expect(run.stderr.contains(words), "\(run)")
        #expect(run.stderr.split(separator: "\n").count == 1, "\(run)")
        #expect(!FileManager.default.fileExists(atPath: directory.path("pki/s.pem")))
    }

    @Test("pki init --name and --server refuse non-ASCII letters saying ASCII")
    func asciiNames() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-nu3-names")
        defer { directory.remove() }
        let run = try await Executable.pinning(["pki", "init", directory.path("pki"), "--name", "Wurzel-ÄÖÜ"], in: directory)
        #expect(run.status == 2 && run.stderr.contains("a name is 1-64 ASCII letters, digits"), "\(run)")
        _ = try await Executable.pinning(["pki", "init", directory.path("p2")], in: directory)
        let server = try await Executable.pinning(["pki", "issue", directory.path("p2"), "--server", "gerät"], in: directory)
        #expect(server.status == 2 && server.stderr.contains("--server \"gerät\": a name is 1-64 ASCII letters"), "\(server)")
    }

    @Test("serve --bind takes an internationalised host name by its A-labels; other names as before")
    func bindIDN() {
        #expect(InProcessCLI.bindHost("bücher.example").host == "xn--bcher-kva.example")
        #expect(InProcessCLI.bindHost("localhost").host == "localhost")
        #expect(InProcessCLI.bindHost("127.0.0.1").host == "127.0.0.1")
        let bad = InProcessCLI.bindHost("bad..host")
        #expect(bad.refusal?.hasPrefix("--bind bad..host: neither an IP address nor a host name") == true, "\(bad)")
        let invalid = InProcessCLI.bindHost("xn--zz.example")
        #expect(invalid.refusal?.contains("not a valid A-label") == true, "\(invalid)")
        let emoji = InProcessCLI.bindHost("😀.example")
        #expect(emoji.refusal?.contains("U+1F600") == true, "\(emoji)")
    }

    @Test("config export --out - writes to standard output and makes no file named -; ./- is still a file")
    func outDash() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-nu3-out")
        defer { directory.remove() }
        let pinA = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        let pinB = "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="
        let config = try directory.write("pins.json", #"{"version": 1, "domains": {"api.example.com": {"pins": ["\#(pinA)", "\#(pinB)"]}}}"#)
        let plain = try await Executable.pinning(["config", "export", config, "--format", "okhttp"], in: directory)
        let dash = try await Executable.pinning(["config", "export", config, "--format", "okhttp", "--out", "-"], in: directory)
        #expect(dash.status == 0 && !dash.stdout.isEmpty && dash.stdout == plain.stdout, "\(dash)")
        #expect(!FileManager.default.fileExists(atPath: directory.path("-")))
        let file = try await Executable.pinning(["config", "export", config, "--format", "okhttp", "--out", "./-"], in: directory)
        #expect(file.status == 0 && file.stdout.isEmpty, "\(file)")
        #expect(FileManager.default.contents(atPath: directory.path("-")).map { String(decoding: $0, as: UTF8.self) } == plain.stdout)
        let help = try await Executable.pinning(["config", "export", "--help"], in: directory)
        // Help wraps its lines: compared with the whitespace runs made single spaces.
        let helpText = help.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
        #expect(helpText.contains("('-' is standard output; ./- is a file named -)"), "\(help)")
    }

    @Test("config lint refuses an invalid A-label key naming it; valid A-labels pass")
    func lintALabels() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-nu3-lint")
        defer { directory.remove() }
        let pins = #"{"pins": ["sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="]}"#
        let bad = try directory.write("bad.json", #"{"version": 1, "domains": {"xn--a.example": \#(pins), "xn--zz.example": \#(pins)}}"#)
        let run = try await Executable.pinning(["config", "lint", bad], in: directory)
        #expect(run.status == 2, "\(run)")
        #expect(run.output.contains("domains[\"xn--a.example\"]") && run.output.contains("domains[\"xn--zz.example\"]"), "\(run)")
        #expect(run.output.contains("not a valid A-label"), "\(run)")
        let good = try directory.write("good.json", #"{"version": 1, "domains": {"xn--bcher-kva.example": \#(pins), "xn--r8jz45g.xn--zckzah": \#(pins)}}"#)
        let ok = try await Executable.pinning(["config", "lint", good], in: directory)
        #expect(ok.status == 0, "\(ok)")
    }

    @Test("--pin-sha256 in non-canonical Base64: one line naming the option and the text meant, exit 2")
    func pinOption() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-nu3-pin")
        defer { directory.remove() }
        let chain = try TestChain()
        let chainPath = try directory.write("chain.pem", chain.leaf.certificatePEM + chain.intermediate.certificatePEM)
        let rootPath = try directory.write("root.pem", chain.root.certificatePEM)
        let written = "sha256/" + String(repeating: "B", count: 43) + "="
        let run = try await Executable.pinning(["evaluate", "--chain", chainPath, "--roots", rootPath, "--pin-sha256", written], in: directory)
        #expect(run.status == 2, "\(run)")
        #expect(
            run.stderr == "pinning: --pin-sha256: invalid pin \"\(written)\": not canonical Base64; did you mean sha256/\(String(repeating: "B", count: 42))A=?\n",
            "\(run)")
    }

    @Test(
        "inspect: a malformed subjectAltName in words; the library's text only with --verbose or --json",
        .enabled(if: CLITests.opensslAvailable, "needs openssl to write a raw UTF-8 dNSName"))
    func inspectWords() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-nu3-inspect")
        defer { directory.remove() }
        // openssl writes the UTF-8 bytes into the IA5String as given, which swift-asn1 refuses.
        let made = try await Executable.openssl(
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", directory.path("k.pem"), "-out",
                directory.path("c.pem"), "-subj", "/CN=device", "-days", "1", "-addext", "subjectAltName=DNS:gerät-7.fleet",
            ], in: directory)
        #expect(made.status == 0, "\(made)")
        let plain = try await Executable.pinning(["inspect", directory.path("c.pem")], in: directory)
        #expect(plain.status == 0, "\(plain)")
        let line = plain.stdout.split(separator: "\n").first { $0.contains("subjectAltName extension is malformed") }.map(String.init) ?? ""
        #expect(line == "  problem      subjectAltName extension is malformed: a string field holds characters its type does not allow", "\(plain)")
        let verbose = try await Executable.pinning(["inspect", "--verbose", directory.path("c.pem")], in: directory)
        #expect(verbose.stdout.contains("a string field holds characters its type does not allow (Invalid bytes"), "\(verbose)")
        let json = try await Executable.pinning(["inspect", "--json", directory.path("c.pem")], in: directory)
        #expect(json.stdout.contains("(Invalid bytes"), "\(json)")
    }
}
