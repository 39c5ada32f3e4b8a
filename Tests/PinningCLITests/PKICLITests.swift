import Foundation
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

// `pinning pki` end to end: the BUILT binary writes a PKI into a temporary directory, and OpenSSL (when
// /usr/bin/openssl exists), our own evaluator and TLSIdentity must all accept what it wrote.

/// Runs an executable with extra environment variables, capturing stdout and stderr through files.
enum Executable {
    static func run(_ executable: URL, _ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:]) async throws -> CLIRun {
        let result = try await TestTools.run(executable.path, arguments, in: directory, environment: environment)
        #expect(result.exited, "\(executable.lastPathComponent) \(arguments) was killed by a signal")
        return CLIRun(arguments: arguments, status: result.status, stdout: result.stdout, stderr: result.stderr)
    }

    static func pinning(_ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:]) async throws -> CLIRun {
        try await self.run(try PinningBinary.located.get(), arguments, in: directory, environment: environment)
    }

    static func openssl(_ arguments: [String], in directory: TemporaryDirectory) async throws -> CLIRun {
        try await self.run(URL(fileURLWithPath: CLI.opensslPath), arguments, in: directory)
    }
}

/// A PKI made by the binary: root → int → {srv (DNS + IP), cli}; plus ipsrv (IP only) by the root.
struct PKIFixture: Sendable {
    static let passphrase = "correct horse battery staple"

    let directory: TemporaryDirectory
    var pki: String { self.directory.path("pki") }
    func file(_ name: String) -> String { self.directory.path("pki/\(name)") }

    static func make(key: String = "ec") async throws -> PKIFixture {
        let directory = try TemporaryDirectory(prefix: "pinning-pki-test")
        // Until the fixture is whole no test holds it: a step that throws removes the directory here.
        var ready = false
        defer { if !ready { directory.remove() } }
        let fixture = PKIFixture(directory: directory)
        let steps: [[String]] = [
            ["pki", "init", fixture.pki, "--key", key],
            ["pki", "issue", fixture.pki, "--intermediate", "int", "--key", key],
            [
                "pki", "issue", fixture.pki, "--server", "srv", "--issuer", "int", "--dns", "api.test", "--dns", "localhost",
                "--ip", "127.0.0.1", "--ip", "::1", "--key", key,
            ],
            ["pki", "issue", fixture.pki, "--client", "cli", "--issuer", "int", "--key", key],
            ["pki", "issue", fixture.pki, "--server", "ipsrv", "--ip", "10.0.0.7", "--key", key],
        ]
        for step in steps {
            let run = try await Executable.pinning(step, in: directory)
            #expect(run.status == 0, "\(run)")
            guard run.status == 0 else { throw FixtureFailure(run: run) }
        }
        _ = try directory.write("pass.txt", Self.passphrase + "\n")
        ready = true
        return fixture
    }

    struct FixtureFailure: Error, CustomStringConvertible {
        var run: CLIRun
        var description: String { "fixture step failed: \(self.run)" }
    }
}

@Suite("pinning pki (runs the built binary)")
struct PKICLITests {
    static var opensslAvailable: Bool { CLI.hasOpenSSL }

    func certificates(_ path: String) throws -> [Certificate] {
        try CertificateLoader.certificates(fromFile: path)
    }

    // MARK: - Files and extensions

    @Test("init/issue write NAME.pem, NAME.key (0600) and leaf chains; the chain is leaf + intermediates", arguments: ["ec", "rsa"])
    func filesAndModes(key: String) async throws {
        let f = try await PKIFixture.make(key: key)
        defer { f.directory.remove() }
        for name in ["root", "int", "srv", "cli", "ipsrv"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: f.file("\(name).key"))
            let mode = try #require(attributes[.posixPermissions] as? NSNumber).intValue
            #expect(mode == 0o600, "\(name).key has mode \(String(mode, radix: 8))")
            #expect(FileManager.default.fileExists(atPath: f.file("\(name).pem")))
        }
        #expect(!FileManager.default.fileExists(atPath: f.file("int-chain.pem")))
        #expect(!FileManager.default.fileExists(atPath: f.file("root-chain.pem")))
        let int = try #require(try self.certificates(f.file("int.pem")).first)
        let srv = try #require(try self.certificates(f.file("srv.pem")).first)
        #expect(try self.certificates(f.file("srv-chain.pem")) == [srv, int])
        #expect(try self.certificates(f.file("cli-chain.pem")).count == 2)
        #expect(try self.certificates(f.file("ipsrv-chain.pem")).count == 1)
        // The server's common name is its first DNS name; an IP-only server's is its IP.
        #expect(srv.subject.description == "CN=api.test")
        let ipsrv = try #require(try self.certificates(f.file("ipsrv.pem")).first)
        #expect(ipsrv.subject.description == "CN=10.0.0.7")
    }

    @Test("Each role gets its extensions: CA path lengths, key usages, EKUs, SANs, SKI/AKI")
    func extensionsPerRole() async throws {
        let f = try await PKIFixture.make()
        defer { f.directory.remove() }
        let root = try #require(try self.certificates(f.file("root.pem")).first)
        let int = try #require(try self.certificates(f.file("int.pem")).first)
        let srv = try #require(try self.certificates(f.file("srv.pem")).first)
        let cli = try #require(try self.certificates(f.file("cli.pem")).first)

        #expect(try root.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: nil))
        #expect(try int.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: 0))
        #expect(try srv.extensions.basicConstraints == .notCertificateAuthority)
        #expect(try cli.extensions.basicConstraints == .notCertificateAuthority)
        #expect(try root.extensions.keyUsage?.keyCertSign == true)
        #expect(try int.extensions.keyUsage?.keyCertSign == true)
        #expect(try srv.extensions.keyUsage?.digitalSignature == true)
        #expect(try srv.extensions.keyUsage?.keyCertSign == false)
        #expect(try srv.extensions.extendedKeyUsage.map(Array.init) == [.serverAuth])
        #expect(try cli.extensions.extendedKeyUsage.map(Array.init) == [.clientAuth])
        let sans = try #require(try srv.extensions.subjectAlternativeNames).map { $0 }
        #expect(sans.contains(.dnsName("api.test")) && sans.contains(.dnsName("localhost")))
        #expect(sans.count == 4)
        #expect(try int.extensions.authorityKeyIdentifier?.keyIdentifier == root.extensions.subjectKeyIdentifier?.keyIdentifier)
        #expect(try srv.extensions.authorityKeyIdentifier?.keyIdentifier == int.extensions.subjectKeyIdentifier?.keyIdentifier)
        #expect(srv.serialNumber.bytes.count == 20)
    }

    @Test("Every command prints the pin of what it wrote")
    func printsPins() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-pki-test")
        defer { directory.remove() }
        let initRun = try await Executable.pinning(["pki", "init", directory.path("p")], in: directory)
        #expect(initRun.status == 0, "\(initRun)")
        let root = try #require(try self.certificates(directory.path("p/root.pem")).first)
        #expect(initRun.stdout.contains(Pin(spkiOf: root).description), "\(initRun)")
        let issueRun = try await Executable.pinning(["pki", "issue", directory.path("p"), "--server", "web", "--dns", "web.test"], in: directory)
        let web = try #require(try self.certificates(directory.path("p/web.pem")).first)
        #expect(issueRun.stdout.contains(Pin(spkiOf: web).description), "\(issueRun)")
        #expect(issueRun.stdout.contains("mode 0600"), "\(issueRun)")
    }

    // MARK: - Our own evaluator and TLSIdentity accept it

    @Test("pinning evaluate --chain srv-chain.pem --roots root.pem --host NAME exits 0")
    func evaluateAcceptsChain() async throws {
        let f = try await PKIFixture.make()
        defer { f.directory.remove() }
        for host in ["api.test", "localhost", "127.0.0.1"] {
            let run = try await Executable.pinning(
                ["evaluate", "--chain", f.file("srv-chain.pem"), "--roots", f.file("root.pem"), "--host", host], in: f.directory)
            #expect(run.status == 0, "\(run)")
        }
        let wrong = try await Executable.pinning(
            ["evaluate", "--chain", f.file("srv-chain.pem"), "--roots", f.file("root.pem"), "--host", "other.test"], in: f.directory)
        #expect(wrong.status == 1, "\(wrong)")
    }

    @Test("export writes a .p12 (mode 0600) that TLSIdentity loads with key and chain", arguments: [false, true])
    func exportLoadsBack(legacy: Bool) async throws {
        let f = try await PKIFixture.make()
        defer { f.directory.remove() }
        let out = f.directory.path(legacy ? "cli-legacy.p12" : "cli.p12")
        let run = try await Executable.pinning(
            ["pki", "export", f.pki, "cli", "--p12", out, "--passphrase-env", "PKI_TEST_PASS"] + (legacy ? ["--legacy"] : []),
            in: f.directory, environment: ["PKI_TEST_PASS": PKIFixture.passphrase])
        #expect(run.status == 0, "\(run)")
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: out)[.posixPermissions] as? NSNumber).intValue
        #expect(mode == 0o600)
        let identity = try TLSIdentity.pkcs12(file: out, passphrase: PKIFixture.passphrase)
        #expect(identity.certificateChain == (try self.certificates(f.file("cli-chain.pem"))))
        #expect(throws: TLSIdentityError.self) { try TLSIdentity.pkcs12(file: out, passphrase: "wrong") }
    }

    @Test("export --passphrase-file reads the first line")
    func exportPassphraseFile() async throws {
        let f = try await PKIFixture.make()
        defer { f.directory.remove() }
        let out = f.directory.path("srv.p12")
        let run = try await Executable.pinning(
            ["pki", "export", f.pki, "srv", "--p12", out, "--passphrase-file", f.directory.path("pass.txt")], in: f.directory)
        #expect(run.status == 0, "\(run)")
        let identity = try TLSIdentity.pkcs12(file: out, passphrase: PKIFixture.passphrase)
        #expect(identity.certificateChain.count == 2)
    }

    // MARK: - Errors: exit 2 naming the file or option

    @Test("Bad input exits 2 with a message naming the file or option")
    func errors() async throws {
        let f = try await PKIFixture.make()
        defer { f.directory.remove() }
        let pki = f.pki
        let cases: [(arguments: [String], mentions: String)] = [
            (["pki", "init", pki], "root.pem: already exists; pass --force"),
            (["pki", "issue", pki, "--server", "srv", "--dns", "x.test"], "srv.pem: already exists"),
            (["pki", "issue", pki, "--server", "new", "--issuer", "nope"], "--issuer nope"),
            (["pki", "issue", pki, "--server", "new", "--ip", "300.1.2.3"], "--ip"),
            (["pki", "issue", pki, "--server", "new", "--dns", "bad name"], "--dns \"bad name\""),
            (["pki", "issue", pki, "--server", "new", "--client", "new2"], "exactly one of"),
            (["pki", "issue", pki], "exactly one of"),
            (["pki", "issue", pki, "--client", "c2", "--dns", "x.test"], "--dns and --ip apply to --server only"),
            (["pki", "issue", pki, "--server", "new", "--issuer", "srv", "--dns", "x.test"], "is not a CA"),
            (["pki", "issue", pki, "--intermediate", "int2", "--issuer", "int"], "path length 0"),
            (["pki", "issue", pki, "--server", "new", "--dns", "x.test", "--days", "0"], "The value '0' is invalid for '--days <N>'"),
            (["pki", "issue", pki, "--server", "new", "--dns", "x.test", "--days", "36000"], "would outlive its issuer"),
            (["pki", "init", f.directory.path("other"), "--name", "../evil"], "--name \"../evil\""),
            (["pki", "init", f.directory.path("other"), "--key", "dsa"], "--key"),
            (["pki", "export", pki, "cli", "--p12", f.directory.path("x.p12")], "exactly one of --passphrase-env"),
            (["pki", "export", pki, "cli", "--p12", f.directory.path("x.p12"), "--passphrase-env", "PKI_TEST_UNSET_VARIABLE"], "PKI_TEST_UNSET_VARIABLE"),
            (["pki", "export", pki, "cli", "--p12", f.directory.path("x.p12"), "--passphrase-file", f.directory.path("missing.txt")], "--passphrase-file"),
            (["pki", "export", pki, "ghost", "--p12", f.directory.path("x.p12"), "--passphrase-file", f.directory.path("pass.txt")], "ghost"),
            (["pki", "export", pki, "cli", "--p12", f.file("srv.pem"), "--passphrase-file", f.directory.path("pass.txt")], "already exists"),
        ]
        for (arguments, mentions) in cases {
            let run = try await Executable.pinning(arguments, in: f.directory)
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr.contains(mentions), "expected stderr to mention \(mentions): \(run)")
        }
        // A refused overwrite leaves the existing files untouched.
        #expect(try self.certificates(f.file("srv-chain.pem")).count == 2)
        #expect(!FileManager.default.fileExists(atPath: f.file("new.pem")))
        #expect(!FileManager.default.fileExists(atPath: f.file("new.key")))
    }

    @Test("--force replaces existing files")
    func force() async throws {
        let f = try await PKIFixture.make()
        defer { f.directory.remove() }
        let before = try #require(try self.certificates(f.file("srv.pem")).first)
        let run = try await Executable.pinning(["pki", "issue", f.pki, "--server", "srv", "--dns", "api.test", "--force"], in: f.directory)
        #expect(run.status == 0, "\(run)")
        let after = try #require(try self.certificates(f.file("srv.pem")).first)
        #expect(before != after)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: f.file("srv.key"))[.posixPermissions] as? NSNumber).intValue
        #expect(mode == 0o600)
    }

    // MARK: - OpenSSL accepts everything

    @Test(
        "openssl verify: sslserver with -verify_hostname and -verify_ip, sslclient for clients",
        .enabled(if: PKICLITests.opensslAvailable, "needs /usr/bin/openssl"), arguments: ["ec", "rsa"])
    func opensslVerify(key: String) async throws {
        let f = try await PKIFixture.make(key: key)
        defer { f.directory.remove() }
        let base = ["verify", "-CAfile", f.file("root.pem"), "-untrusted", f.file("int.pem")]
        let accepted: [[String]] = [
            base + ["-purpose", "sslserver", "-verify_hostname", "api.test", f.file("srv.pem")],
            base + ["-purpose", "sslserver", "-verify_hostname", "localhost", f.file("srv.pem")],
            base + ["-purpose", "sslserver", "-verify_ip", "127.0.0.1", f.file("srv.pem")],
            base + ["-purpose", "sslserver", "-verify_ip", "::1", f.file("srv.pem")],
            base + ["-purpose", "sslclient", f.file("cli.pem")],
            ["verify", "-CAfile", f.file("root.pem"), "-purpose", "sslserver", "-verify_ip", "10.0.0.7", f.file("ipsrv.pem")],
            ["verify", "-x509_strict", "-CAfile", f.file("root.pem"), "-untrusted", f.file("int.pem"), "-purpose", "sslserver", f.file("srv.pem")],
        ]
        for arguments in accepted {
            let run = try await Executable.openssl(arguments, in: f.directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.stdout.contains(": OK"), "\(run)")
        }
        // And the roles are not interchangeable.
        let refused: [[String]] = [
            base + ["-purpose", "sslclient", f.file("srv.pem")],
            base + ["-purpose", "sslserver", f.file("cli.pem")],
            base + ["-purpose", "sslserver", "-verify_hostname", "other.test", f.file("srv.pem")],
            base + ["-purpose", "sslserver", "-verify_ip", "127.0.0.2", f.file("srv.pem")],
        ]
        for arguments in refused {
            let run = try await Executable.openssl(arguments, in: f.directory)
            #expect(run.status != 0, "\(run)")
        }
    }

    @Test(
        "openssl pkcs12 -info reads the modern (AES-256) and --legacy (3DES) exports",
        .enabled(if: PKICLITests.opensslAvailable, "needs /usr/bin/openssl"))
    func opensslPKCS12Info() async throws {
        let f = try await PKIFixture.make()
        defer { f.directory.remove() }
        let passFile = f.directory.path("pass.txt")
        for legacy in [false, true] {
            let out = f.directory.path(legacy ? "legacy.p12" : "modern.p12")
            let export = try await Executable.pinning(
                ["pki", "export", f.pki, "srv", "--p12", out, "--passphrase-file", passFile] + (legacy ? ["--legacy"] : []), in: f.directory)
            #expect(export.status == 0, "\(export)")
            let info = try await Executable.openssl(["pkcs12", "-info", "-noout", "-in", out, "-passin", "file:\(passFile)"], in: f.directory)
            #expect(info.status == 0, "\(info)")
            if legacy {
                #expect(info.output.contains("pbeWithSHA1And3-KeyTripleDES-CBC"), "\(info)")
                #expect(!info.output.contains("AES"), "\(info)")
            } else {
                #expect(info.output.contains("AES-256-CBC"), "\(info)")
                #expect(!info.output.contains("TripleDES"), "\(info)")
            }
            // The key and both certificates come out again.
            let pemPath = f.directory.path(legacy ? "legacy-out.pem" : "modern-out.pem")
            let dump = try await Executable.openssl(
                ["pkcs12", "-in", out, "-passin", "file:\(passFile)", "-nodes", "-out", pemPath], in: f.directory)
            #expect(dump.status == 0, "\(dump)")
            let text = try String(contentsOfFile: pemPath, encoding: .utf8)
            #expect(text.components(separatedBy: "BEGIN CERTIFICATE").count - 1 == 2, "\(text)")
            #expect(text.contains("BEGIN PRIVATE KEY"), "\(text)")
            let wrong = try await Executable.openssl(["pkcs12", "-info", "-noout", "-in", out, "-passin", "pass:wrong"], in: f.directory)
            #expect(wrong.status != 0, "\(wrong)")
        }
    }
}
