import Foundation
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

/// How `pinning check --pinset` and `pinning proxy --pinset` reach the repository (new-user trial round 2, items 7
/// and 8): its https server under a private CA is judged by the command's `--roots` (and reached through its
/// `--resolve`), and redirects are followed as python-tuf and `curl -L` follow them, bounded, never from https to
/// http. The repository is served by a Python `http.server` (https and http) that answers redirects by path.
@Suite("pinning --pinset: the repository's server under --roots, redirects", .serialized, .enabled(if: TestTools.python3Available))
struct PinSetFetchCLITests {
    /// `/moved/P`, 302 to `https://repo.test:HTTPS/P`; `/relative/P`, 307 to `/P`; `/loop/P`, 301 to itself;
    /// `/down/P`, 302 to `http://127.0.0.1:HTTP/P`; `/plain/P`, 302 to `http://127.0.0.1:HTTP/P`; `/up/P`, 308 to
    /// `https://repo.test:HTTPS/P`; `/aside/P`, 307 to `http://127.0.0.1:OTHER/P` (a second plain listener: another port
    /// of the same address, which `pinning tuf`, having no --resolve, can reach); anything else is a file of the
    /// repository. Prints `HTTP n`, `OTHER n`, then `PORT n` (https).
    static let server = #"""
        import http.server, ssl, sys, threading
        root, cert, key = sys.argv[1:4]
        ports = {}
        class H(http.server.SimpleHTTPRequestHandler):
            def __init__(s, *a, **k): super().__init__(*a, directory=root, **k)
            def log_message(s, *a): pass
            def go(s, code, location):
                s.send_response(code); s.send_header('Location', location); s.send_header('Content-Length', '0'); s.end_headers()
            def do_GET(s):
                p = s.path
                rules = [('/moved/', 302, 'https://repo.test:%d/' % ports['https']), ('/relative/', 307, '/'),
                         ('/down/', 302, 'http://127.0.0.1:%d/' % ports['http']), ('/plain/', 302, 'http://127.0.0.1:%d/' % ports['http']),
                         ('/up/', 308, 'https://repo.test:%d/' % ports['https']), ('/aside/', 307, 'http://127.0.0.1:%d/' % ports['other'])]
                if p.startswith('/loop/'): return s.go(301, p)
                for prefix, code, base in rules:
                    if p.startswith(prefix): return s.go(code, base + p[len(prefix):])
                return super().do_GET()
        plain = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
        other = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
        tls = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); context.load_cert_chain(cert, key)
        tls.socket = context.wrap_socket(tls.socket, server_side=True)
        ports['http'], ports['other'], ports['https'] = plain.server_address[1], other.server_address[1], tls.server_address[1]
        threading.Thread(target=plain.serve_forever, daemon=True).start()
        threading.Thread(target=other.serve_forever, daemon=True).start()
        print('HTTP %d' % ports['http']); print('OTHER %d' % ports['other']); print('PORT %d' % ports['https'], flush=True)
        tls.serve_forever()
        """#

    struct Setup {
        let directory: TemporaryDirectory
        let keys: PinSetRotationKeys
        let repository: PinSetTestRepository
        let files: ServerProcess
        let httpPort: Int
        let otherPort: Int
        let api: RotatingHTTPSServer

        init() async throws {
            let directory = try TemporaryDirectory(prefix: "pinset-fetch-cli")
            let repository: PinSetTestRepository
            do {
                repository = try PinSetTestRepository()
            } catch {
                directory.remove()
                throw error
            }
            self.directory = directory
            self.repository = repository
            do {
                self.keys = try PinSetRotationKeys(rootName: "Pin Set Fetch Root")
                try repository.publish(self.keys.configuration([self.keys.a, self.keys.b]), files: ["root.pem": self.keys.anchor])
                try directory.write("root.json", String(decoding: repository.bootstrapRoot, as: UTF8.self))
                // The repository's own CA: in no system store, only in --roots.
                let fleet = try TestPKI.root("Fleet Repository CA")
                // 127.0.0.1 too, for `pinning tuf`, which has no --resolve.
                let host = try TestPKI.leaf("repo.test", issuer: fleet, dnsNames: ["repo.test"], ipAddresses: ["127.0.0.1"])
                try directory.write("fleet-ca.pem", fleet.certificatePEM)
                try directory.write("repo.pem", host.certificatePEM)
                try directory.write("repo.key", host.privateKeyPEM)
                let script = try directory.write("repo-server.py", PinSetFetchCLITests.server)
                self.files = try await ServerProcess(
                    "/usr/bin/python3", ["-u", script, repository.writer.directory, directory.path("repo.pem"), directory.path("repo.key")], in: directory
                ) { line in line.hasPrefix("PORT ") ? Int(line.dropFirst(5)) : nil }
            } catch {
                repository.remove()
                directory.remove()
                throw error
            }
            let printed = self.files.output.split(separator: "\n").first { $0.hasPrefix("HTTP ") }
            self.httpPort = printed.flatMap { Int($0.dropFirst(5)) } ?? 0
            let other = self.files.output.split(separator: "\n").first { $0.hasPrefix("OTHER ") }
            self.otherPort = other.flatMap { Int($0.dropFirst(6)) } ?? 0
            do {
                self.api = try await RotatingHTTPSServer(identity: try self.keys.a.tlsIdentity())
            } catch {
                self.files.stop()
                repository.remove()
                directory.remove()
                throw error
            }
        }

        var httpsBase: String { "https://repo.test:\(self.files.port)" }

        /// `check` of api.test following the pin set at `metadata`, kept in a directory of its own (`state`).
        func check(_ metadata: String, state: String, roots: Bool = true, environment: [String: String] = [:], extra: [String] = []) async throws -> CLIRun {
            var arguments = [
                "check", "https://api.test:\(self.api.port)/hello", "--resolve", "api.test:\(self.api.port):127.0.0.1",
                "--resolve", "repo.test:\(self.files.port):127.0.0.1", "--pinset", metadata, "--pinset-root", self.directory.path("root.json"),
                "--pinset-dir", self.directory.path(state), "--no-reports",
            ]
            if roots { arguments += ["--roots", self.directory.path("fleet-ca.pem")] }
            return try await Executable.pinning(arguments + extra, in: self.directory, environment: environment)
        }

        /// Stops the servers and removes every file (the API server's stop finishes in the background).
        func stop() {
            self.files.stop()
            self.repository.remove()
            self.directory.remove()
            let api = self.api
            Task { await api.stop() }
        }
    }

    @Test("--roots judges the repository's https server together with the platform's roots (check and proxy), read once; without it the refusal is in words, [code] reason")
    func rootsApplyToTheRepository() async throws {
        let setup = try await Setup()
        defer { setup.stop() }
        let metadata = setup.httpsBase + "/metadata/"

        let refused = try await setup.check(metadata, state: "no-roots", roots: false)
        #expect(refused.status == 3, "\(refused)")
        #expect(refused.stderr.contains("\(metadata)2.root.json: repo.test: [noPathToAnchor]"), "names the URL, then the refusal: \(refused)")
        #expect(!refused.stderr.contains("TrustFailure"), "no type name: \(refused)")

        let trusted = try await setup.check(metadata, state: "roots")
        #expect(trusted.status == 0, "\(trusted)")
        #expect(trusted.stdout.contains("pin set: version 2"), "\(trusted)")

        // Together with the platform's roots, not instead of them: a repository under a CA of the platform's store
        // (here SSL_CERT_FILE) still passes beside a --roots that names another CA, as before --roots reached it.
        let other = try TestPKI.root("Some Other Private CA")
        let otherPEM = try setup.directory.write("other-ca.pem", other.certificatePEM)
        let platform = try await setup.check(metadata, state: "platform", roots: false, environment: ["SSL_CERT_FILE": setup.directory.path("fleet-ca.pem")])
        #expect(platform.status == 0, "\(platform)")
        let beside = try await Executable.run(
            try PinningBinary.located.get(),
            [
                "check", "https://api.test:\(setup.api.port)/hello", "--resolve", "api.test:\(setup.api.port):127.0.0.1",
                "--resolve", "repo.test:\(setup.files.port):127.0.0.1", "--pinset", metadata, "--pinset-root", setup.directory.path("root.json"),
                "--pinset-dir", setup.directory.path("beside-other"), "--no-reports", "--roots", otherPEM,
            ],
            in: setup.directory, environment: ["SSL_CERT_FILE": setup.directory.path("fleet-ca.pem")])
        #expect(beside.status == 0 && beside.stdout.contains("pin set: version 2"), "\(beside)")

        // --roots is read once: from a pipe (the second read of /dev/stdin would find it empty).
        let pinning = try PinningBinary.located.get().path
        let piped = try await Executable.run(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c",
                "cat fleet-ca.pem | \"$0\" check https://api.test:\(setup.api.port)/hello --resolve api.test:\(setup.api.port):127.0.0.1 "
                    + "--resolve repo.test:\(setup.files.port):127.0.0.1 --pinset \(metadata) --pinset-root root.json --pinset-dir piped --no-reports --roots /dev/stdin",
                pinning,
            ],
            in: setup.directory)
        #expect(piped.status == 0 && piped.stdout.contains("pin set: version 2"), "\(piped)")

        let proxy = try Subprocess(
            [
                "proxy", "--pinset", metadata, "--pinset-root", setup.directory.path("root.json"), "--pinset-dir", setup.directory.path("proxy-state"),
                "--listen", "127.0.0.1:0", "--ca-dir", setup.directory.path("ca"), "--roots", setup.directory.path("fleet-ca.pem"),
                "--resolve", "repo.test:\(setup.files.port):127.0.0.1", "--no-reports",
            ],
            in: setup.directory)
        defer { proxy.kill() }
        let lines = try await ProxyFixture.startupLines(proxy, count: 2)
        #expect(lines.count == 2, "the proxy started with the pin set fetched under --roots: \(lines) \(proxy.stderr)")
        #expect(proxy.stderr.contains("pin set version 2 applied"), "\(proxy.stderr)")
    }

    @Test("pinning tuf --roots: the repository's https server is judged by the platform's roots together with --roots, read once")
    func tufRoots() async throws {
        let setup = try await Setup()
        defer { setup.stop() }
        let metadata = "https://127.0.0.1:\(setup.files.port)/metadata/"
        func refresh(_ state: String, _ extra: [String], environment: [String: String] = [:]) async throws -> CLIRun {
            let directory = setup.directory.path(state)
            let initialized = try await Executable.pinning(["tuf", "--metadata-dir", directory, "init", setup.directory.path("root.json")], in: setup.directory)
            #expect(initialized.status == 0, "\(initialized)")
            return try await Executable.pinning(
                ["tuf", "--metadata-dir", directory, "--metadata-url", metadata, "refresh"] + extra, in: setup.directory, environment: environment)
        }

        let refused = try await refresh("tuf-no-roots", [])
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("[noPathToAnchor]"), "\(refused)")

        let trusted = try await refresh("tuf-roots", ["--roots", setup.directory.path("fleet-ca.pem")])
        #expect(trusted.status == 0, "\(trusted)")
        #expect(trusted.stdout.contains("pinning tuf: refreshed: root v1, timestamp v"), "\(trusted)")

        // Together with the platform's roots, not instead: SSL_CERT_FILE's CA still passes beside another --roots.
        let other = try TestPKI.root("Some Other Private CA")
        let otherPEM = try setup.directory.write("other-ca.pem", other.certificatePEM)
        let beside = try await refresh("tuf-beside", ["--roots", otherPEM], environment: ["SSL_CERT_FILE": setup.directory.path("fleet-ca.pem")])
        #expect(beside.status == 0, "\(beside)")
        let alone = try await refresh("tuf-other", ["--roots", otherPEM])
        #expect(alone.status == 1, "\(alone)")

        // download reads them too, once: from a pipe.
        let pinning = try PinningBinary.located.get().path
        let state = setup.directory.path("tuf-piped")
        let targets = setup.directory.path("tuf-targets")
        try FileManager.default.createDirectory(atPath: targets, withIntermediateDirectories: true)
        let initialized = try await Executable.pinning(["tuf", "--metadata-dir", state, "init", setup.directory.path("root.json")], in: setup.directory)
        #expect(initialized.status == 0, "\(initialized)")
        let piped = try await Executable.run(
            URL(fileURLWithPath: "/bin/sh"),
            [
                "-c",
                "cat fleet-ca.pem | \"$0\" tuf --metadata-dir \(state) --metadata-url \(metadata) --target-base-url https://127.0.0.1:\(setup.files.port)/targets/ "
                    + "--target-name pinning.json --target-dir \(targets) --roots /dev/stdin download",
                pinning,
            ],
            in: setup.directory)
        #expect(piped.status == 0 && piped.stdout.contains("pinning.json: downloaded and verified"), "\(piped)")

        // A --roots that cannot be read is bad input, naming the option.
        let missing = try await refresh("tuf-missing", ["--roots", setup.directory.path("absent.pem")])
        #expect(missing.status == 2, "\(missing)")
        #expect(missing.stderr.hasPrefix("pinning: tuf: --roots "), "\(missing)")
        #expect(missing.stderr.split(separator: "\n").count == 1, "\(missing)")
    }

    @Test(
        "redirects are followed (https 302 and relative 307, http 302); a loop, https to http, and a plain http redirect to another host are refused naming the URL; --pinset-redirect-anywhere follows the last (308)"
    )
    func redirects() async throws {
        let setup = try await Setup()
        defer { setup.stop() }
        let plain = "http://127.0.0.1:\(setup.httpPort)"
        for (index, metadata) in [setup.httpsBase + "/moved/metadata/", setup.httpsBase + "/relative/metadata/", plain + "/plain/metadata/"].enumerated() {
            let run = try await setup.check(metadata, state: "followed-\(index)")
            #expect(run.status == 0, "\(metadata): \(run)")
            #expect(run.stdout.contains("pin set: version 2"), "\(metadata): \(run)")
        }

        // A redirect read over plain http (anyone on the path can write it) to another host: refused unless opted in.
        let away = try await setup.check(plain + "/up/metadata/", state: "up")
        #expect(away.status == 3, "\(away)")
        #expect(
            away.stderr.contains(
                "refusing a redirect from plain http to another host or port (\(setup.httpsBase)/metadata/2.root.json): a redirect read over plain http is followed only on 127.0.0.1 port \(setup.httpPort), or to https on 127.0.0.1"
            ), "\(away)")
        let anywhere = try await setup.check(plain + "/up/metadata/", state: "up-anywhere", extra: ["--pinset-redirect-anywhere"])
        #expect(anywhere.status == 0 && anywhere.stdout.contains("pin set: version 2"), "\(anywhere)")

        let loop = try await setup.check(setup.httpsBase + "/loop/metadata/", state: "loop")
        #expect(loop.status == 3, "\(loop)")
        #expect(loop.stderr.contains("\(setup.httpsBase)/loop/metadata/"), "names the URL: \(loop)")
        #expect(loop.stderr.contains("more than 5 redirects"), "\(loop)")

        let down = try await setup.check(setup.httpsBase + "/down/metadata/", state: "down")
        #expect(down.status == 3, "\(down)")
        #expect(down.stderr.contains("refusing a redirect from https to plain http (\(plain)/metadata/"), "\(down)")
        #expect(down.stderr.contains("a URL given as https is followed over https only"), "\(down)")
    }

    @Test("pinning tuf --pinset-redirect-anywhere: a redirect read over plain http to another port is refused without it, naming the URL, and followed with it")
    func tufRedirectAnywhere() async throws {
        let setup = try await Setup()
        defer { setup.stop() }
        #expect(setup.otherPort > 0, "\(setup.files.output)")
        let plain = "http://127.0.0.1:\(setup.httpPort)"
        func refresh(_ state: String, _ extra: [String]) async throws -> CLIRun {
            let directory = setup.directory.path(state)
            let initialized = try await Executable.pinning(["tuf", "--metadata-dir", directory, "init", setup.directory.path("root.json")], in: setup.directory)
            #expect(initialized.status == 0, "\(initialized)")
            return try await Executable.pinning(["tuf", "--metadata-dir", directory, "--metadata-url", plain + "/aside/metadata/", "refresh"] + extra, in: setup.directory)
        }

        let refused = try await refresh("tuf-aside", [])
        #expect(refused.status == 1, "\(refused)")
        #expect(
            refused.stderr.contains(
                "refusing a redirect from plain http to another host or port (http://127.0.0.1:\(setup.otherPort)/metadata/2.root.json): a redirect read over plain http is followed only on 127.0.0.1 port \(setup.httpPort), or to https on 127.0.0.1"
            ), "\(refused)")

        let followed = try await refresh("tuf-aside-anywhere", ["--pinset-redirect-anywhere"])
        #expect(followed.status == 0, "\(followed)")
        #expect(followed.stdout.contains("pinning tuf: refreshed: root v1, timestamp v"), "\(followed)")

        // download follows it the same way (its refresh and its targets).
        let targets = setup.directory.path("tuf-aside-targets")
        try FileManager.default.createDirectory(atPath: targets, withIntermediateDirectories: true)
        let download = try await Executable.pinning(
            [
                "tuf", "--metadata-dir", setup.directory.path("tuf-aside-anywhere"), "--metadata-url", plain + "/aside/metadata/",
                "--target-base-url", plain + "/aside/targets/", "--target-name", "pinning.json", "--target-dir", targets, "--pinset-redirect-anywhere",
                "download",
            ], in: setup.directory)
        #expect(download.status == 0 && download.stdout.contains("pinning.json: downloaded and verified"), "\(download)")
    }
}
