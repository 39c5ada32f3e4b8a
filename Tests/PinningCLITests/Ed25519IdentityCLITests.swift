import Foundation
import PinningTestSupport
import Testing

/// An Ed25519 client identity made with openssl (as a user makes one) through every CLI path that presents one:
/// `check --identity-cert/--identity-key`, `check --identity` with a PKCS#12 file, `check --config` with an entry's
/// `clientIdentity`, and `proxy --config` with such an entry. Each once stopped the process (SIGILL, exit 132) in
/// the client context cache, which hashed the key through NIOSSL's `try!` DER encoding (new-user trial 3, defect 1).
@Suite("Ed25519 client identities from the CLI", .enabled(if: CLI.hasOpenSSL))
struct Ed25519IdentityCLITests {
    /// `ed-chain.pem` (an openssl Ed25519 clientAuth leaf `CN=ed-device`, issued by the fixture's intermediate,
    /// then the intermediate), `ed.key`, and `ed.p12` (passphrase `s3cret`) in the fixture's directory.
    static func makeEd25519Identity(in fixture: ClientIdentityFixture) async throws {
        let directory = fixture.directory
        let key = directory.path("ed.key")
        let csr = directory.path("ed.csr")
        let leaf = directory.path("ed.pem")
        let extensions = try directory.write("ed.ext", "extendedKeyUsage=clientAuth\nsubjectAltName=DNS:ed-device.fleet.test\n")
        #expect(try await CLI.openssl(["genpkey", "-algorithm", "ed25519", "-out", key]) == 0)
        #expect(try await CLI.openssl(["req", "-new", "-key", key, "-subj", "/CN=ed-device", "-out", csr]) == 0)
        #expect(
            try await CLI.openssl([
                "x509", "-req", "-in", csr, "-CA", directory.path("intermediate.pem"), "-CAkey", directory.path("intermediate.key"),
                "-set_serial", "7", "-days", "30", "-extfile", extensions, "-out", leaf,
            ]) == 0)
        let chain = try String(contentsOfFile: leaf, encoding: .utf8) + String(contentsOfFile: directory.path("intermediate.pem"), encoding: .utf8)
        _ = try directory.write("ed-chain.pem", chain)
        #expect(
            try await CLI.openssl([
                "pkcs12", "-export", "-in", leaf, "-inkey", key, "-certfile", directory.path("intermediate.pem"), "-out", directory.path("ed.p12"),
                "-passout", "pass:s3cret",
            ]) == 0)
    }

    @Test("check presents it (PEM pair, PKCS#12, configuration clientIdentity): exit 0, the server saw CN=ed-device")
    func check() async throws {
        let fixture = try await ClientIdentityFixture()
        defer { fixture.stop() }
        try await Self.makeEd25519Identity(in: fixture)
        let port = fixture.server.port
        let target = ["check", "https://api.test:\(port)/", "--resolve", "api.test:\(port):127.0.0.1"]
        let roots = ["--roots", fixture.directory.path("root.pem")]
        let config = try fixture.configuration(#"{"certificate": "ed-chain.pem", "key": "ed.key"}"#)
        let runs: [(String, [String], [String: String])] = [
            ("PEM pair", target + roots + ["--identity-cert", fixture.directory.path("ed-chain.pem"), "--identity-key", fixture.directory.path("ed.key")], [:]),
            ("PKCS#12", target + roots + ["--identity", fixture.directory.path("ed.p12"), "--passphrase-env", "ED_P12_PASS"], ["ED_P12_PASS": "s3cret"]),
            ("configuration", target + ["--config", config], [:]),
        ]
        for (name, arguments, environment) in runs {
            let run = try await Executable.pinning(arguments, in: fixture.directory, environment: environment)
            #expect(run.status == 0, "\(name): \(run)")
            #expect(run.stdout.contains("\"subject\":\"CN=ed-device\""), "\(name): \(run)")
        }
        let lint = try await Executable.pinning(["config", "lint", config], in: fixture.directory)
        #expect(lint.status == 0, "\(lint)")
    }

    @Test("the proxy starts with an entry whose clientIdentity is Ed25519 and presents it upstream", .enabled(if: curlAvailable))
    func proxy() async throws {
        let fixture = try await ClientIdentityFixture()
        defer { fixture.stop() }
        try await Self.makeEd25519Identity(in: fixture)
        let port = fixture.server.port
        let config = try fixture.configuration(#"{"certificate": "ed-chain.pem", "key": "ed.key"}"#)
        let proxy = try Subprocess(
            ["proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", fixture.directory.path("ca"), "--resolve", "api.test:\(port):127.0.0.1"],
            in: fixture.directory)
        defer { proxy.kill() }
        let lines = try await ProxyFixture.startupLines(proxy, count: 2)
        let proxyPort = try #require(Int(lines.first?.split(separator: ":").last ?? ""), "\(lines) \(proxy.stderr)")
        let presented = try await TestTools.run(
            curlPath,
            ["-sS", "--max-time", "30", "-x", "http://127.0.0.1:\(proxyPort)", "--cacert", fixture.directory.path("ca/ca.pem"), "https://api.test:\(port)/who"],
            timeout: 60)
        #expect(presented.stdout.contains("\"subject\":\"CN=ed-device\""), "\(presented) \(proxy.stderr)")
    }
}
