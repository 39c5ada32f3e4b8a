import Foundation
import Pinning
import PinningTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif
// `stat` comes from the C headers, which Glibc, CoreFoundation and Dispatch's CDispatch all import; which module the
// compiler credits with it depends on how the target's files are batched, so all three are named here.
#if canImport(CoreFoundation)
    import CoreFoundation
#endif
#if canImport(CDispatch)
    import CDispatch
#endif

// TLS key logging (issue 15): `--keylog FILE` on check, serve, demo and proxy writes the NSS key log format, and
// Wireshark's tshark, which we did not write, decrypts a capture of a real `check` → `serve` exchange on loopback
// with it, for TLS 1.2 and TLS 1.3, from the client's log and from the server's. Captures use tcpdump on the
// loopback interface with a filter on the server's port, so nothing else is recorded.

let tcpdumpPath = "/usr/bin/tcpdump"
let tsharkPath = "/usr/bin/tshark"
/// Capturing needs tcpdump, tshark and the right to capture (root here and in CI).
let captureAvailable = FileManager.default.isExecutableFile(atPath: tcpdumpPath) && FileManager.default.isExecutableFile(atPath: tsharkPath) && geteuid() == 0

/// A tcpdump capture of loopback traffic to or from `port`, written to `path` when stopped.
func startCapture(port: Int, path: String, in directory: TemporaryDirectory) async throws -> ServerProcess {
    try await ServerProcess(tcpdumpPath, ["-i", "lo", "-U", "-w", path, "tcp port \(port)"], in: directory) { line in
        line.contains("listening on") ? port : nil
    }
}

/// What tshark reads from a capture: the HTTP request paths, and its whole dissection (`-V`).
func tsharkRead(_ capture: String, keyLog: String?, in directory: TemporaryDirectory) async throws -> (paths: String, dissection: String) {
    let options = keyLog.map { ["-o", "tls.keylog_file:\($0)"] } ?? []
    let paths = try await TestTools.run(
        tsharkPath, ["-r", capture] + options + ["-Y", "http.request", "-T", "fields", "-e", "http.request.uri"], in: directory, timeout: 120)
    let dissection = try await TestTools.run(tsharkPath, ["-r", capture] + options + ["-V"], in: directory, timeout: 120)
    return (paths.stdout, dissection.stdout)
}

@Suite("TLS key logging: --keylog, read by tshark", .serialized)
struct KeyLogCLITests {
    /// A server chain whose leaf's common name is found nowhere else (not the host name, which the client sends
    /// in clear as SNI), so finding it in a dissection means tshark read the certificate.
    struct Fixture {
        let directory: TemporaryDirectory
        let root: String
        let chain: String
        let key: String
        let host: String
        let marker: String

        init() throws {
            let directory = try TemporaryDirectory(prefix: "pinning-keylog")
            self.directory = directory
            // Until the fixture is whole no test holds it: a step that throws removes the directory here.
            var ready = false
            defer { if !ready { directory.remove() } }
            let id = UUID().uuidString.prefix(8).lowercased()
            self.host = "keylog-\(id).test"
            self.marker = "Subject Marker \(id)"
            let root = try TestPKI.root("Key Log Root")
            let leaf = try TestPKI.leaf(self.marker, issuer: root, dnsNames: [self.host])
            self.root = try self.directory.write("root.pem", root.certificatePEM)
            self.chain = try self.directory.write("chain.pem", leaf.certificatePEM)
            self.key = try self.directory.write("leaf.key", leaf.privateKeyPEM)
            ready = true
        }

        func check(port: Int, path: String, _ extra: [String], environment: [String: String] = [:]) async throws -> CLIRun {
            try await Executable.pinning(
                ["check", "https://\(self.host):\(port)\(path)", "--anchor", self.root, "--anchors-only", "--resolve", "\(self.host):\(port):127.0.0.1"] + extra,
                in: self.directory, environment: environment)
        }
    }

    @Test(
        "tshark decrypts a check → serve capture with the key log of either side, TLS 1.2 and 1.3; without it, it finds neither the request nor (TLS 1.3) the certificate",
        .enabled(if: captureAvailable, "needs tcpdump, tshark and root"),
        arguments: ["1.2", "1.3"], ["client", "server"])
    func tsharkDecrypts(_ version: String, _ side: String) async throws {
        let fixture = try Fixture()
        defer { fixture.directory.remove() }
        let keys = fixture.directory.path("keys-\(side).log")
        let server = try await ServeProcess(["--cert", fixture.chain, "--key", fixture.key] + (side == "server" ? ["--keylog", keys] : []), in: fixture.directory)
        defer { server.stop() }
        let capturePath = fixture.directory.path("capture.pcap")
        let capture = try await startCapture(port: server.port, path: capturePath, in: fixture.directory)
        let probe = "/probe-\(UUID().uuidString.prefix(8))"
        let run = try await fixture.check(port: server.port, path: probe, ["--tls-max", version] + (side == "client" ? ["--keylog", keys] : []))
        try await Task.sleep(for: .milliseconds(500))
        capture.stop()
        #expect(run.status == 0, "\(run)")

        // The file: mode 0600, NSS lines for the version, and the loud warning on the side that logged.
        var status = stat()
        #expect(stat(keys, &status) == 0 && status.st_mode & 0o777 == 0o600)
        let lines = try String(contentsOfFile: keys, encoding: .utf8)
        #expect(lines.contains(version == "1.3" ? "CLIENT_HANDSHAKE_TRAFFIC_SECRET " : "CLIENT_RANDOM "), "\(lines)")
        if side == "client" {
            #expect(run.stderr.contains("WARNING: TLS session keys are being written to \(keys)"), "\(run.stderr)")
        } else {
            #expect(server.subprocess.stderr.contains("WARNING: TLS session keys are being written to \(keys)"), "\(server.subprocess.stderr)")
        }

        let decrypted = try await tsharkRead(capturePath, keyLog: keys, in: fixture.directory)
        #expect(decrypted.paths.contains(probe), "\(decrypted.paths)")
        #expect(decrypted.dissection.contains(fixture.marker), "certificate subject not in the decrypted dissection")
        let opaque = try await tsharkRead(capturePath, keyLog: nil, in: fixture.directory)
        #expect(!opaque.paths.contains(probe), "\(opaque.paths)")
        #expect(!opaque.dissection.contains(probe))
        if version == "1.3" {
            // TLS 1.3 encrypts the certificate; TLS 1.2 sends it in clear, so only the request is hidden there.
            #expect(!opaque.dissection.contains(fixture.marker))
        }
    }

    @Test("the key log is opt-in: SSLKEYLOGFILE is read only with --keylog-from-env; a file other users may read is refused; both options at once are refused")
    func optIn() async throws {
        let fixture = try Fixture()
        defer { fixture.directory.remove() }
        let server = try await ServeProcess(["--cert", fixture.chain, "--key", fixture.key], in: fixture.directory)
        defer { server.stop() }
        let fromEnvironment = fixture.directory.path("env-keys.log")

        let ignored = try await fixture.check(port: server.port, path: "/", [], environment: ["SSLKEYLOGFILE": fromEnvironment])
        #expect(ignored.status == 0, "\(ignored)")
        #expect(!FileManager.default.fileExists(atPath: fromEnvironment))
        #expect(!ignored.stderr.contains("WARNING"), "\(ignored.stderr)")

        let honoured = try await fixture.check(port: server.port, path: "/", ["--keylog-from-env"], environment: ["SSLKEYLOGFILE": fromEnvironment])
        #expect(honoured.status == 0, "\(honoured)")
        #expect(honoured.stderr.contains("WARNING: TLS session keys are being written to \(fromEnvironment) (--keylog-from-env (SSLKEYLOGFILE))"), "\(honoured.stderr)")
        let first = try String(contentsOfFile: fromEnvironment, encoding: .utf8)
        #expect(first.contains("CLIENT_HANDSHAKE_TRAFFIC_SECRET "))

        // Appended, never truncated: a second run adds its lines after the first run's.
        let again = try await fixture.check(port: server.port, path: "/", ["--keylog", fromEnvironment])
        #expect(again.status == 0, "\(again)")
        let second = try String(contentsOfFile: fromEnvironment, encoding: .utf8)
        #expect(second.hasPrefix(first) && second.count > first.count)

        let unset = try await fixture.check(port: server.port, path: "/", ["--keylog-from-env"], environment: ["SSLKEYLOGFILE": ""])
        #expect(unset.status == 0 && unset.stderr.contains("SSLKEYLOGFILE is not set; no keys are logged"), "\(unset)")

        let readable = try fixture.directory.write("readable.log", "")
        chmod(readable, 0o644)
        let refused = try await fixture.check(port: server.port, path: "/", ["--keylog", readable])
        #expect(refused.status == 2, "\(refused)")
        #expect(refused.stderr.contains("--keylog: cannot use the key log \(readable): other users may read it (mode 644)"), "\(refused.stderr)")

        let missingDirectory = fixture.directory.path("no/such/dir/keys.log")
        let cannot = try await fixture.check(port: server.port, path: "/", ["--keylog", missingDirectory])
        #expect(cannot.status == 2 && cannot.stderr.contains("cannot use the key log \(missingDirectory): no such file or directory"), "\(cannot)")

        let both = try await fixture.check(port: server.port, path: "/", ["--keylog", fromEnvironment, "--keylog-from-env"])
        #expect(both.status == 2 && both.stderr.contains("--keylog and --keylog-from-env: give one of them"), "\(both)")

        let badVersion = try await fixture.check(port: server.port, path: "/", ["--tls-max", "1.1"])
        #expect(badVersion.status == 2 && badVersion.stderr.contains("--tls-max: unknown TLS version \"1.1\"; use 1.2 or 1.3"), "\(badVersion)")
    }

    @Test("demo and proxy log keys too (--keylog), with the warning")
    func demoAndProxy() async throws {
        let fixture = try Fixture()
        defer { fixture.directory.remove() }
        let demoKeys = fixture.directory.path("demo-keys.log")
        let demo = try await Executable.pinning(["demo", "--keylog", demoKeys], in: fixture.directory)
        #expect(demo.status == 0, "\(demo)")
        #expect(demo.stderr.contains("WARNING: TLS session keys are being written to \(demoKeys)"), "\(demo.stderr)")
        #expect(try String(contentsOfFile: demoKeys, encoding: .utf8).contains("CLIENT_HANDSHAKE_TRAFFIC_SECRET "))

        let proxyFixture = try await ProxyFixture(extraArguments: ["--keylog", fixture.directory.path("proxy-keys.log")])
        defer { proxyFixture.stop() }
        let fetched = try await proxyFixture.viaProxy("https://api.test:\(proxyFixture.upstreamPort)/")
        #expect(fetched.stdout.contains("HTTP/1.1 200"), "\(fetched)")
        #expect(proxyFixture.proxy.stderr.contains("pinning: proxy: WARNING: TLS session keys are being written to"), "\(proxyFixture.proxy.stderr)")
        // The proxy logs its upstream handshakes (the client's side is the client's own: curl reads SSLKEYLOGFILE).
        #expect(try String(contentsOfFile: fixture.directory.path("proxy-keys.log"), encoding: .utf8).contains("CLIENT_HANDSHAKE_TRAFFIC_SECRET "))
    }
}
