import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

// `pinning proxy` (issue 16) driven through its CLI contract by clients we did not write: curl (-x, --cacert) and
// Python requests (proxies=, verify=). Upstreams are `pinning serve` and `openssl s_server` on loopback; names are
// mapped with --resolve, so nothing leaves 127.0.0.1.

let curlPath = "/usr/bin/curl"
let curlAvailable = FileManager.default.isExecutableFile(atPath: curlPath)
let pythonRequestsAvailable: Bool = {
    guard TestTools.python3Available else { return false }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = ["-c", "import requests"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    do {
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus == 0
    } catch {
        return false
    }
}()

/// One upstream (`pinning serve` for api.test and bad.test), a configuration pinning api.test to its intermediate
/// (and a backup) and bad.test to two keys it does not have, and a running proxy with a tunnel to api.test.
final class ProxyFixture: @unchecked Sendable {
    let directory: TemporaryDirectory
    let upstream: ServeProcess
    let proxy: Subprocess
    let proxyPort: Int
    let tunnelPort: Int
    let caPath: String
    let caPin: String
    var upstreamPort: Int { self.upstream.port }

    static let backupPin = "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString()
    static let unrelatedPins = ["sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString(), backupPin]

    init(unlistedHosts: String = "default", extraArguments: [String] = []) async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-proxy-test")
        self.directory = directory
        // A fixture that fails to start is nobody's to stop: its directory goes here.
        var started = false
        defer { if !started { directory.remove() } }
        let root = try TestPKI.root("Proxy Test Root")
        let intermediate = try TestPKI.intermediate("Proxy Test Intermediate", issuer: root)
        let leaf = try TestPKI.leaf("api.test", issuer: intermediate, dnsNames: ["api.test", "bad.test", "localhost"])
        let chain = try directory.write("upstream-chain.pem", TestPKI.pemBundle([leaf.certificate, intermediate.certificate]))
        let key = try directory.write("upstream.key", leaf.privateKeyPEM)
        _ = try directory.write("upstream-leaf.pem", leaf.certificatePEM)
        _ = try directory.write("upstream-intermediate.pem", intermediate.certificatePEM)
        _ = try directory.write("root.pem", root.certificatePEM)
        self.upstream = try await ServeProcess(["--cert", chain, "--key", key], in: directory)
        let pin = Pin(spkiOf: intermediate.certificate).description
        let configuration = """
            {"version": 1, "unlistedHosts": "\(unlistedHosts)", "domains": {
              "api.test": {"pins": ["\(pin)", "\(Self.backupPin)"], "anchors": ["root.pem"], "anchorsOnly": true},
              "bad.test": {"pins": ["\(Self.unrelatedPins[0])", "\(Self.unrelatedPins[1])"], "anchors": ["root.pem"], "anchorsOnly": true}
            }}
            """
        let configPath = try directory.write("pinning.json", configuration)
        let port = self.upstream.port
        self.proxy = try Subprocess(
            [
                "proxy", "--config", configPath, "--listen", "127.0.0.1:0", "--ca-dir", directory.path("ca"),
                "--resolve", "api.test:\(port):127.0.0.1", "--resolve", "bad.test:\(port):127.0.0.1",
                "--resolve", "localhost:\(port):127.0.0.1", "--tunnel", "127.0.0.1:0=api.test:\(port)",
            ] + extraArguments,
            in: directory
        )
        let lines = try await Self.startupLines(self.proxy, count: 3)
        guard lines.count == 3, lines[0].hasPrefix("proxy listening on http://127.0.0.1:"),
            lines[1].hasPrefix("tunnel listening on 127.0.0.1:"), lines[1].hasSuffix(" -> api.test:\(port)"),
            lines[2].hasPrefix("local CA: ")
        else {
            self.proxy.kill()
            self.upstream.stop()
            throw ServeProcess.ServeError(message: "unexpected start-up lines: \(lines); stderr \(self.proxy.stderr)")
        }
        self.proxyPort = Int(lines[0].split(separator: ":").last ?? "") ?? 0
        self.tunnelPort = Int(lines[1].split(separator: " ")[3].split(separator: ":").last ?? "") ?? 0
        // local CA: PATH (sha256/…)
        let caLine = lines[2].dropFirst("local CA: ".count)
        let open = caLine.lastIndex(of: "(") ?? caLine.endIndex
        self.caPath = caLine[..<open].trimmingCharacters(in: .whitespaces)
        self.caPin = String(caLine[open...].dropFirst().dropLast())
        started = true
    }

    /// The first `count` stdout lines, waiting up to 60 s for them.
    static func startupLines(_ process: Subprocess, count: Int) async throws -> [String] {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && process.process.isRunning {
            let lines = process.stdout.split(separator: "\n").map(String.init)
            if lines.count >= count { return Array(lines.prefix(count)) }
            try await Task.sleep(for: .milliseconds(20))
        }
        return process.stdout.split(separator: "\n").map(String.init)
    }

    /// Stops both processes and removes the directory.
    func stop() {
        self.proxy.kill()
        self.upstream.stop()
        self.directory.remove()
    }

    /// curl through the proxy; `-D -` puts the response heads before the body on stdout.
    func curl(_ arguments: [String]) async throws -> TestTools.ProcessResult {
        try await TestTools.run(curlPath, ["-sS", "--max-time", "30", "-D", "-"] + arguments, in: self.directory, timeout: 60)
    }

    func viaProxy(_ url: String) async throws -> TestTools.ProcessResult {
        try await self.curl(["-x", "http://127.0.0.1:\(self.proxyPort)", "--cacert", self.caPath, url])
    }
}

@Suite("pinning proxy: curl, Python requests and openssl through the forward proxy and tunnels", .enabled(if: curlAvailable))
struct ProxyCLITests {
    @Test("a covered host is intercepted: curl trusts the local CA, the upstream is judged by its entry; a refused upstream is a 502 saying why")
    func interceptAndRefuse() async throws {
        let fixture = try await ProxyFixture()
        defer { fixture.stop() }
        let good = try await fixture.viaProxy("https://api.test:\(fixture.upstreamPort)/hello?x=1")
        #expect(good.status == 0, "\(good)")
        #expect(good.stdout.contains("HTTP/1.1 200 Connection Established"))
        #expect(good.stdout.contains("HTTP/1.1 200 OK"))
        #expect(good.stdout.contains("\"path\":\"/hello?x=1\""), "\(good)")

        let bad = try await fixture.viaProxy("https://bad.test:\(fixture.upstreamPort)/")
        #expect(bad.status == 0, "\(bad)")
        #expect(bad.stdout.contains("HTTP/1.1 502 Bad Gateway"), "\(bad)")
        #expect(bad.stdout.lowercased().contains("x-pinning-failure: pinmismatch"), "\(bad)")
        #expect(bad.stdout.contains("\n\n[pinMismatch] no certificate on the validated path matches a pin\n"), "\(bad)")
        #expect(!bad.stdout.contains("TrustFailure"), "no Swift type name in the body: \(bad)")
        #expect(bad.stdout.contains(ProxyFixture.unrelatedPins[0]), "the body names the expected pins: \(bad)")

        // The leaf curl was given is for the host, by the local CA, name-constrained to the covered names.
        let info = try await TestTools.openssl(["x509", "-in", fixture.caPath, "-noout", "-text"])
        #expect(info.stdout.contains("Name Constraints: critical"), "\(info)")
        #expect(info.stdout.contains("DNS:api.test") && info.stdout.contains("DNS:bad.test"), "\(info)")
        #expect(info.stdout.contains("IP:0.0.0.0/0.0.0.0"), "every IPv4 address excluded: \(info)")

        // One log line per connection outcome, on stderr.
        try await Task.sleep(for: .milliseconds(200))
        let log = fixture.proxy.stderr
        #expect(log.contains("intercept client=127.0.0.1:") && log.contains("host=api.test") && log.contains("verdict=trusted"), "\(log)")
        #expect(log.contains("host=bad.test") && log.contains("verdict=untrusted failure=pinMismatch"), "\(log)")
        #expect(log.contains("message=\"[pinMismatch] no certificate on the validated path matches a pin\""), "\(log)")
        #expect(!log.contains("TrustFailure"), "no Swift type name in the log: \(log)")
    }

    @Test("keep-alive on both sides; content-length and chunked request bodies and a chunked response stream through (a Python upstream)", .enabled(if: TestTools.python3Available))
    func keepAliveAndBodies() async throws {
        let fixture = try await ProxyFixture()
        defer { fixture.stop() }
        // A Python `ssl` HTTP/1.1 server with the same certificate: it counts request body bytes (Content-Length
        // or chunked) and answers /chunked with a chunked body of 300,000 bytes.
        let script = try fixture.directory.write("echo.py", Self.echoServer)
        let echo = try await ServerProcess(
            "/usr/bin/python3", ["-u", script, fixture.directory.path("upstream-chain.pem"), fixture.directory.path("upstream.key")], in: fixture.directory
        ) { line in line.hasPrefix("PORT ") ? Int(line.dropFirst(5)) : nil }
        defer { echo.stop() }
        let proxied = try Subprocess(
            [
                "proxy", "--config", fixture.directory.path("pinning.json"), "--listen", "127.0.0.1:0", "--ca-dir", fixture.directory.path("ca"),
                "--resolve", "api.test:\(echo.port):127.0.0.1",
            ],
            in: fixture.directory
        )
        defer { proxied.kill() }
        let lines = try await ProxyFixture.startupLines(proxied, count: 2)
        let port = try #require(Int(lines.first?.split(separator: ":").last ?? ""), "\(lines) \(proxied.stderr)")
        let url = "https://api.test:\(echo.port)/count"
        let body = try fixture.directory.write("body.bin", String(repeating: "0123456789", count: 50_000))
        let proxy = ["-x", "http://127.0.0.1:\(port)", "--cacert", fixture.caPath, "-D", "-"]
        // Four requests on one curl connection (curl reuses it): a GET, a POST with a length, a chunked POST, a
        // GET answered in chunks.
        let result = try await fixture.curl(
            proxy + [url, "--next"] + proxy + ["--data-binary", "@\(body)", url, "--next"] + proxy
                + ["-H", "Transfer-Encoding: chunked", "--data-binary", "@\(body)", url, "--next"] + proxy + ["https://api.test:\(echo.port)/chunked", "-o", fixture.directory.path("chunked.out")]
        )
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.components(separatedBy: "HTTP/1.1 200 OK").count - 1 == 4, "\(result)")
        #expect(result.stdout.contains("{\"method\": \"GET\", \"bytes\": 0}"), "\(result)")
        #expect(result.stdout.components(separatedBy: "{\"method\": \"POST\", \"bytes\": 500000}").count - 1 == 2, "\(result)")
        #expect(result.stdout.lowercased().contains("transfer-encoding: chunked"), "\(result)")
        let chunked = try Data(contentsOf: URL(fileURLWithPath: fixture.directory.path("chunked.out")))
        #expect(chunked.count == 300_000)
        try await Task.sleep(for: .milliseconds(300))
        let intercepts = proxied.stderr.split(separator: "\n").filter { $0.hasPrefix("intercept ") }
        #expect(intercepts.count == 1, "one client connection for the four requests: \(proxied.stderr)")
        #expect(intercepts.first?.contains("requests=4") ?? false, "\(intercepts)")
        #expect(intercepts.first?.contains("bytes_up=1000000") ?? false, "both bodies reached the upstream: \(intercepts)")
    }

    static let echoServer = #"""
        import json, socket, ssl, sys, threading
        cert, key = sys.argv[1:3]
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        print("PORT", listener.getsockname()[1], flush=True)
        CRLF = b"\r\n"

        def serve(conn):
            f = conn.makefile("rb")
            while True:
                line = f.readline()
                if not line:
                    return
                method, path, _ = line.decode().split(" ", 2)
                headers = {}
                while True:
                    h = f.readline()
                    if h in (CRLF, b""):
                        break
                    name, value = h.decode().split(":", 1)
                    headers[name.strip().lower()] = value.strip()
                count = 0
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    while True:
                        size = int(f.readline().split(b";")[0], 16)
                        if size == 0:
                            while f.readline() not in (CRLF, b""):
                                pass
                            break
                        count += len(f.read(size))
                        f.readline()
                else:
                    count = len(f.read(int(headers.get("content-length", "0"))))
                if path == "/chunked":
                    conn.sendall(b"HTTP/1.1 200 OK" + CRLF + b"Transfer-Encoding: chunked" + CRLF + CRLF)
                    for _ in range(30):
                        conn.sendall(b"2710" + CRLF + b"x" * 10000 + CRLF)
                    conn.sendall(b"0" + CRLF + CRLF)
                else:
                    body = json.dumps({"method": method, "bytes": count}).encode()
                    conn.sendall(b"HTTP/1.1 200 OK" + CRLF + b"Content-Length: " + str(len(body)).encode() + CRLF + CRLF + body)

        while True:
            raw, _ = listener.accept()
            try:
                conn = ctx.wrap_socket(raw, server_side=True)
            except Exception as error:
                print("error", error, file=sys.stderr, flush=True)
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()
        """#

    @Test("a tunnel forwards a plain TCP client over pinned TLS; /proxy.pac, /status and /metrics; no open relay")
    func tunnelAndLocalPaths() async throws {
        let fixture = try await ProxyFixture()
        defer { fixture.stop() }
        let tunnelled = try await fixture.curl(["http://127.0.0.1:\(fixture.tunnelPort)/through-the-tunnel", "-H", "Host: api.test"])
        #expect(tunnelled.status == 0 && tunnelled.stdout.contains("\"path\":\"/through-the-tunnel\""), "\(tunnelled)")

        let pac = try await fixture.curl(["http://127.0.0.1:\(fixture.proxyPort)/proxy.pac"])
        #expect(pac.stdout.contains("application/x-ns-proxy-autoconfig"), "\(pac)")
        #expect(pac.stdout.contains("\"api.test\"") && pac.stdout.contains("\"bad.test\""), "\(pac)")
        #expect(pac.stdout.contains("return \"PROXY 127.0.0.1:\(fixture.proxyPort)\";"), "\(pac)")
        #expect(!pac.stdout.contains("; DIRECT"), "a covered host never falls back to DIRECT: \(pac)")

        let status = try await fixture.curl(["http://127.0.0.1:\(fixture.proxyPort)/status"])
        let json = try #require(status.stdout.split(separator: "\r\n\r\n", maxSplits: 1).last)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["entries"] as? Int == 2)
        #expect(object["localCA"] as? String == fixture.caPath)
        #expect(object["localCAPin"] as? String == fixture.caPin)
        #expect(object["reloads"] as? Int == 0)
        #expect(object["uptimeSeconds"] is Int && object["localCAExpires"] is String)

        _ = try await fixture.viaProxy("https://bad.test:\(fixture.upstreamPort)/")
        let metrics = try await fixture.curl(["http://127.0.0.1:\(fixture.proxyPort)/metrics"])
        #expect(metrics.stdout.contains("pinning_proxy_connections_total{kind=\"tunnel\"} 1"), "\(metrics)")
        #expect(metrics.stdout.contains("pinning_proxy_refusals_total{host=\"bad.test\",code=\"pinMismatch\"} 1"), "\(metrics)")
        #expect(metrics.stdout.contains("pinning_proxy_upstream_handshake_seconds_count"), "\(metrics)")
        #expect(metrics.stdout.contains("pinning_proxy_seconds_until_expiry{kind=\"local_ca\""), "\(metrics)")

        let relay = try await fixture.curl(["-x", "http://127.0.0.1:\(fixture.proxyPort)", "http://example.com/"])
        #expect(relay.stdout.contains("HTTP/1.1 405"), "absolute-form requests are refused: \(relay)")
        let other = try await fixture.curl(["http://127.0.0.1:\(fixture.proxyPort)/elsewhere"])
        #expect(other.stdout.contains("HTTP/1.1 400"), "\(other)")
    }

    @Test("a tunnel carries a protocol that is not HTTP: a plain TCP client through the proxy to openssl s_server -rev over pinned TLS", .enabled(if: TestTools.opensslAvailable))
    func tunnelToOpenSSL() async throws {
        let fixture = try await ProxyFixture()
        defer { fixture.stop() }
        let reverser = try await ServerProcess.opensslServer(
            [
                "-cert", fixture.directory.path("upstream-leaf.pem"), "-cert_chain", fixture.directory.path("upstream-intermediate.pem"),
                "-key", fixture.directory.path("upstream.key"), "-rev",
            ],
            in: fixture.directory
        )
        defer { reverser.stop() }
        let proxy = try Subprocess(
            [
                "proxy", "--config", fixture.directory.path("pinning.json"), "--listen", "127.0.0.1:0", "--ca-dir", fixture.directory.path("ca"),
                "--resolve", "api.test:\(reverser.port):127.0.0.1", "--resolve", "bad.test:\(reverser.port):127.0.0.1",
                "--tunnel", "127.0.0.1:0=api.test:\(reverser.port)", "--tunnel", "127.0.0.1:0=bad.test:\(reverser.port)",
            ],
            in: fixture.directory
        )
        defer { proxy.kill() }
        let lines = try await ProxyFixture.startupLines(proxy, count: 4)
        let ports = lines.filter { $0.hasPrefix("tunnel listening on ") }.compactMap { Int($0.split(separator: " ")[3].split(separator: ":").last ?? "") }
        try #require(ports.count == 2, "\(lines) \(proxy.stderr)")
        let script = try fixture.directory.write(
            "line.py",
            """
            import socket, sys
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
            s.sendall(b"pinned tunnel\\n")
            data = b""
            try:
                while b"\\n" not in data:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except (socket.timeout, ConnectionResetError):
                pass
            print(repr(data))
            """
        )
        let good = try await TestTools.run("/usr/bin/python3", [script, "\(ports[0])"], timeout: 60)
        #expect(good.stdout.contains("lennut dennip"), "\(good) \(reverser.output)")
        // A client that speaks first, at once, 200 times: its first bytes are sent before the upstream is
        // trusted, and must be passed on, never dropped.
        let eager = try fixture.directory.write(
            "eager.py",
            """
            import socket, sys
            answered = 0
            for i in range(200):
                s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
                s.sendall(b"eager %d\\n" % i)
                data = b""
                try:
                    while b"\\n" not in data:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                except (socket.timeout, ConnectionResetError):
                    pass
                s.close()
                if data.strip() == (b"eager %d" % i)[::-1]:
                    answered += 1
            print("answered", answered)
            """
        )
        let eagerRun = try await TestTools.run("/usr/bin/python3", [eager, "\(ports[0])"], timeout: 300)
        #expect(eagerRun.stdout.contains("answered 200"), "\(eagerRun)")
        // bad.test's pins do not match: the tunnel closes without a byte, and the log says why.
        let refused = try await TestTools.run("/usr/bin/python3", [script, "\(ports[1])"], timeout: 60)
        #expect(refused.stdout.contains("b''"), "\(refused)")
        try await Task.sleep(for: .milliseconds(300))
        #expect(proxy.stderr.contains("tunnel client=") && proxy.stderr.contains("host=bad.test") && proxy.stderr.contains("failure=pinMismatch"), "\(proxy.stderr)")
    }

    @Test(
        "an upstream that speaks first (as MySQL, SMTP and FTP servers do): its greeting reaches the client through the tunnel, 100 times out of 100",
        .enabled(if: TestTools.python3Available))
    func upstreamSpeaksFirst() async throws {
        let fixture = try await ProxyFixture()
        defer { fixture.stop() }
        let serverScript = try fixture.directory.write(
            "greeter.py",
            """
            import socket, ssl, sys, threading
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(sys.argv[1], sys.argv[2])
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(64)
            print("PORT", listener.getsockname()[1], flush=True)
            def serve(raw):
                try:
                    with context.wrap_socket(raw, server_side=True) as tls:
                        tls.sendall(b"220 greeter ready\\n")
                        line = tls.recv(4096)
                        tls.sendall(b"250 " + line)
                except Exception:
                    pass
            while True:
                raw, _ = listener.accept()
                threading.Thread(target=serve, args=(raw,), daemon=True).start()
            """
        )
        let greeter = try await ServerProcess(
            "/usr/bin/python3", ["-u", serverScript, fixture.directory.path("upstream-chain.pem"), fixture.directory.path("upstream.key")], in: fixture.directory
        ) { line in
            line.hasPrefix("PORT ") ? Int(line.dropFirst(5)) : nil
        }
        defer { greeter.stop() }
        let proxy = try Subprocess(
            [
                "proxy", "--config", fixture.directory.path("pinning.json"), "--listen", "127.0.0.1:0", "--ca-dir", fixture.directory.path("ca"),
                "--resolve", "api.test:\(greeter.port):127.0.0.1", "--tunnel", "127.0.0.1:0=api.test:\(greeter.port)",
            ],
            in: fixture.directory
        )
        defer { proxy.kill() }
        let lines = try await ProxyFixture.startupLines(proxy, count: 3)
        let port = try #require(lines.first { $0.hasPrefix("tunnel listening on ") }.flatMap { Int($0.split(separator: " ")[3].split(separator: ":").last ?? "") })
        let client = try fixture.directory.write(
            "greeted.py",
            """
            import socket, sys
            greeted = 0
            for i in range(100):
                s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
                data = b""
                try:
                    while b"\\n" not in data:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    if data == b"220 greeter ready\\n":
                        s.sendall(b"HELO %d\\n" % i)
                        reply = s.recv(4096)
                        if reply == b"250 HELO %d\\n" % i:
                            greeted += 1
                except (socket.timeout, ConnectionResetError):
                    pass
                s.close()
            print("greeted", greeted)
            """
        )
        let run = try await TestTools.run("/usr/bin/python3", [client, "\(port)"], timeout: 600)
        #expect(run.stdout.contains("greeted 100"), "\(run) \(proxy.stderr.suffix(2000))")
    }

    @Test("unlisted hosts: a byte tunnel under \"default\" (the client validates), 403 naming the host under \"reject\"")
    func unlistedHosts() async throws {
        let passing = try await ProxyFixture()
        defer { passing.stop() }
        // localhost is not in the configuration: curl sees the upstream's own certificate, validated by curl.
        let rootPath = passing.directory.path("root.pem")
        let through = try await passing.curl([
            "-x", "http://127.0.0.1:\(passing.proxyPort)", "--cacert", rootPath, "https://localhost:\(passing.upstreamPort)/plain",
        ])
        #expect(through.status == 0 && through.stdout.contains("\"path\":\"/plain\""), "\(through)")

        let rejecting = try await ProxyFixture(unlistedHosts: "reject")
        defer { rejecting.stop() }
        let refused = try await rejecting.curl(["-x", "http://127.0.0.1:\(rejecting.proxyPort)", "--cacert", rootPath, "https://localhost:\(rejecting.upstreamPort)/"])
        #expect(refused.stdout.contains("HTTP/1.1 403"), "\(refused)")
        #expect(refused.status != 0, "curl reports the refused CONNECT: \(refused)")
    }

    @Test("Python requests through the proxy (proxies=, verify= the local CA): trusted 200, refused 502 with X-Pinning-Failure", .enabled(if: pythonRequestsAvailable))
    func pythonRequests() async throws {
        let fixture = try await ProxyFixture()
        defer { fixture.stop() }
        let script = try fixture.directory.write(
            "client.py",
            """
            import sys, requests
            proxy, ca, port = sys.argv[1], sys.argv[2], sys.argv[3]
            proxies = {"https": proxy}
            good = requests.get("https://api.test:%s/py" % port, proxies=proxies, verify=ca, timeout=30)
            print("good", good.status_code, good.json()["path"])
            bad = requests.get("https://bad.test:%s/py" % port, proxies=proxies, verify=ca, timeout=30)
            print("bad", bad.status_code, bad.headers.get("X-Pinning-Failure"))
            """
        )
        let result = try await TestTools.run(
            "/usr/bin/python3", [script, "http://127.0.0.1:\(fixture.proxyPort)", fixture.caPath, "\(fixture.upstreamPort)"], in: fixture.directory,
            environment: ["NO_PROXY": "", "no_proxy": ""], timeout: 90
        )
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("good 200 /py"), "\(result)")
        #expect(result.stdout.contains("bad 502 pinMismatch"), "\(result)")
    }

    @Test(
        "SIGHUP reloads: the next request on an open connection uses the new pins; a broken configuration is refused whole and the old one stays; 100 SIGHUPs under load fail no request",
        .enabled(if: pythonRequestsAvailable))
    func reload() async throws {
        let fixture = try await ProxyFixture()
        defer { fixture.stop() }
        let config = fixture.directory.path("pinning.json")
        let good = try String(contentsOfFile: config, encoding: .utf8)
        let pin = try #require(good.split(separator: "\"").first { $0.hasPrefix("sha256/") && $0 != ProxyFixture.backupPin })
        let wrongPins = good.replacingOccurrences(of: String(pin), with: ProxyFixture.unrelatedPins[0])
        let goodPath = try fixture.directory.write("good.json.txt", good)
        let wrongPath = try fixture.directory.write("wrong.json.txt", wrongPins)
        let invalidPath = try fixture.directory.write("invalid.json.txt", #"{"version": 1, "domains": {"api.test": {"pins": []}}}"#)
        let script = try fixture.directory.write(
            "reload.py",
            #"""
            import os, signal, sys, threading, time, requests
            proxy, ca, port, pid, config, good, wrong, invalid = sys.argv[1:9]
            pid = int(pid)
            url = "https://api.test:%s/r" % port
            session = requests.Session()
            def get():
                # verify= per request: a Session's own verify is overridden by REQUESTS_CA_BUNDLE when that is set.
                return session.get(url, proxies={"https": proxy}, verify=ca, timeout=30)
            def status():
                return requests.get(proxy + "/status", proxies={"http": None, "https": None}, timeout=10).json()
            def swap(path, key):
                before = status()[key]
                with open(path) as source, open(config, "w") as target:
                    target.write(source.read())
                os.kill(pid, signal.SIGHUP)
                deadline = time.time() + 30
                while status()[key] == before and time.time() < deadline:
                    time.sleep(0.02)
            print("before", get().status_code)
            swap(wrong, "reloads")
            r = get()
            print("wrong", r.status_code, r.headers.get("X-Pinning-Failure"))
            swap(invalid, "failedReloads")
            r = get()
            print("invalid", r.status_code, r.headers.get("X-Pinning-Failure"))
            swap(good, "reloads")
            print("good", get().status_code)
            def hup():
                for _ in range(100):
                    os.kill(pid, signal.SIGHUP)
                    time.sleep(0.01)
            sender = threading.Thread(target=hup)
            sender.start()
            count = failures = 0
            while sender.is_alive() or count < 50:
                r = get()
                count += 1
                if r.status_code != 200:
                    failures += 1
                    print("failed", r.status_code, r.text[:200])
            print("load", count, failures)
            st = status()
            print("status", st["reloads"], st["failedReloads"])
            """#
        )
        let result = try await TestTools.run(
            "/usr/bin/python3",
            [
                script, "http://127.0.0.1:\(fixture.proxyPort)", fixture.caPath, "\(fixture.upstreamPort)", "\(fixture.proxy.process.processIdentifier)",
                config, goodPath, wrongPath, invalidPath,
            ],
            in: fixture.directory, environment: ["NO_PROXY": "", "no_proxy": ""], timeout: 300
        )
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("before 200"), "\(result)")
        #expect(result.stdout.contains("wrong 502 pinMismatch"), "the new pins apply at once: \(result)")
        #expect(result.stdout.contains("invalid 502 pinMismatch"), "a refused reload keeps the previous policy: \(result)")
        #expect(result.stdout.contains("good 200"), "\(result)")
        let load = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("load ") }, "\(result)")
        #expect(load.hasSuffix(" 0"), "no request the policy allows failed during 100 SIGHUPs: \(load)")
        #expect(fixture.proxy.stderr.contains("reload refused, the previous configuration stays: invalid pinning configuration"), "\(fixture.proxy.stderr)")
        #expect(fixture.proxy.stderr.contains("domains[\"api.test\"].pins"), "every problem is logged: \(fixture.proxy.stderr)")
        let refusals = fixture.proxy.stderr.split(separator: "\n").filter { $0.contains("reload refused") }
        #expect(!refusals.isEmpty && refusals.allSatisfy { !$0.contains("\\u{a}") }, "problems joined in one line, no escaped line break: \(refusals.prefix(1))")
    }

    @Test("limits: over --max-connections a client gets 503 in words; a connection idle past --idle-timeout is closed")
    func limits() async throws {
        let fixture = try await ProxyFixture(extraArguments: [])
        defer { fixture.stop() }
        let limited = try Subprocess(
            [
                "proxy", "--config", fixture.directory.path("pinning.json"), "--listen", "127.0.0.1:0", "--ca-dir", fixture.directory.path("ca"),
                "--max-connections", "1", "--idle-timeout", "1",
            ],
            in: fixture.directory
        )
        defer { limited.kill() }
        let lines = try await ProxyFixture.startupLines(limited, count: 2)
        let port = try #require(Int(lines.first?.split(separator: ":").last ?? ""), "\(lines) \(limited.stderr)")
        let script = try fixture.directory.write(
            "hold.py",
            """
            import socket, subprocess, sys, time
            port = int(sys.argv[1])
            held = socket.create_connection(("127.0.0.1", port), timeout=20)
            time.sleep(0.3)
            over = subprocess.run(["/usr/bin/curl", "-sS", "-D", "-", "http://127.0.0.1:%d/status" % port], capture_output=True, text=True)
            print("over", over.stdout.splitlines()[0] if over.stdout else over.stderr)
            print("body", over.stdout.strip().splitlines()[-1] if over.stdout else "")
            start = time.time()
            closed = held.recv(10) == b""
            print("idle-closed", closed, round(time.time() - start, 1))
            time.sleep(0.3)
            after = subprocess.run(["/usr/bin/curl", "-sS", "-D", "-", "http://127.0.0.1:%d/status" % port], capture_output=True, text=True)
            print("after", after.stdout.splitlines()[0] if after.stdout else after.stderr)
            """
        )
        let result = try await TestTools.run("/usr/bin/python3", [script, "\(port)"], in: fixture.directory, timeout: 60)
        #expect(result.stdout.contains("over HTTP/1.1 503 Service Unavailable"), "\(result)")
        #expect(result.stdout.contains("more than 1 connections are open"), "\(result)")
        #expect(result.stdout.contains("idle-closed True"), "\(result)")
        #expect(result.stdout.contains("after HTTP/1.1 200 OK"), "\(result)")
    }

    @Test("the local CA is made once: key mode 0600, never overwritten; the same key and pin on the next start")
    func localCAPersists() async throws {
        let first = try await ProxyFixture()
        defer { first.stop() }
        let keyPath = first.directory.path("ca/ca.key")
        let key = try String(contentsOfFile: keyPath, encoding: .utf8)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: keyPath)[.posixPermissions] as? Int)
        #expect(mode & 0o777 == 0o600)
        first.proxy.kill()
        // A second proxy on the same directory.
        let again = try Subprocess(
            ["proxy", "--config", first.directory.path("pinning.json"), "--listen", "127.0.0.1:0", "--ca-dir", first.directory.path("ca")], in: first.directory
        )
        defer { again.kill() }
        let lines = try await ProxyFixture.startupLines(again, count: 2)
        #expect(lines.last == "local CA: \(first.caPath) (\(first.caPin))", "\(lines) \(again.stderr)")
        #expect(try String(contentsOfFile: keyPath, encoding: .utf8) == key)
    }

    @Test("bad input exits 2 naming the option; a port in use exits 3; SIGTERM exits 0")
    func exitStatuses() async throws {
        let fixture = try await ProxyFixture()
        defer { fixture.stop() }
        let config = fixture.directory.path("pinning.json")
        let ca = fixture.directory.path("ca")
        let cases: [([String], String)] = [
            (["proxy", "--config", fixture.directory.path("missing.json"), "--ca-dir", ca], "missing.json"),
            (["proxy", "--config", config, "--listen", "0.0.0.0:0", "--ca-dir", ca], "--listen"),
            (["proxy", "--config", config, "--listen", "nowhere", "--ca-dir", ca], "--listen"),
            (["proxy", "--config", config, "--listen", "127.0.0.1:0", "--tunnel", "127.0.0.1:0", "--ca-dir", ca], "--tunnel"),
            (["proxy", "--config", config, "--listen", "127.0.0.1:0", "--log-format", "xml", "--ca-dir", ca], "--log-format"),
            (["proxy", "--config", config, "--listen", "127.0.0.1:0", "--max-connections", "0", "--ca-dir", ca], "--max-connections"),
            (["proxy", "--config", config, "--listen", "127.0.0.1:0", "--idle-timeout", "inf", "--ca-dir", ca], "--idle-timeout"),
            (["proxy", "--config", config, "--listen", "127.0.0.1:0", "--resolve", "x", "--ca-dir", ca], "--resolve"),
            (["proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", config], "--ca-dir"),
        ]
        for (arguments, named) in cases {
            let run = try await Executable.pinning(arguments, in: fixture.directory)
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr.contains(named), "\(run)")
            #expect(!run.stderr.contains("Fatal error"), "\(run)")
        }
        // The option and the path once each (it was "--ca-dir X: --ca-dir X: exists and is not a directory").
        let notDirectory = try await Executable.pinning(["proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", config], in: fixture.directory)
        #expect(notDirectory.stderr == "pinning: --ca-dir \(config): exists and is not a directory\n", "\(notDirectory)")
        let underFile = config + "/ca"
        let uncreatable = try await Executable.pinning(["proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", underFile], in: fixture.directory)
        #expect(uncreatable.status == 2, "\(uncreatable)")
        #expect(uncreatable.stderr.hasPrefix("pinning: --ca-dir \(underFile): cannot create the directory: "), "\(uncreatable)")
        #expect(uncreatable.stderr.components(separatedBy: "--ca-dir").count == 2, "\(uncreatable)")
        let busy = try await Executable.pinning(["proxy", "--config", config, "--listen", "127.0.0.1:\(fixture.proxyPort)", "--ca-dir", ca], in: fixture.directory)
        #expect(busy.status == 3, "\(busy)")
        #expect(busy.stderr.contains("cannot listen on 127.0.0.1:\(fixture.proxyPort)"), "\(busy)")

        fixture.proxy.process.terminate()
        let status = await fixture.proxy.wait(seconds: 30)
        #expect(status == 0, "stderr: \(fixture.proxy.stderr)")
    }
}

/// A private PKI with a server for api.test, client identities as PEM and PKCS#12, and an mTLS `pinning serve`.
struct ClientIdentityFixture {
    let directory: TemporaryDirectory
    let server: ServeProcess
    let intermediatePin: String

    init() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-identity-test")
        self.directory = directory
        // A fixture that fails to start is nobody's to stop: its directory goes here.
        var started = false
        defer { if !started { directory.remove() } }
        let root = try TestPKI.root("Identity Test Root")
        let intermediate = try TestPKI.intermediate("Identity Test Intermediate", issuer: root)
        let leaf = try TestPKI.leaf("api.test", issuer: intermediate, dnsNames: ["api.test", "other.test"])
        let device = try TestPKI.leaf("device-ü 1", issuer: intermediate, dnsNames: ["device-1.fleet.test"], usage: .clientAuth)
        let serverOnly = try TestPKI.leaf("server-only", issuer: intermediate, usage: .serverAuth)
        let soon = try TestPKI.leaf("expiring", issuer: intermediate, usage: .clientAuth, notValidAfter: Date().addingTimeInterval(10 * 86400))
        _ = try directory.write("root.pem", root.certificatePEM)
        _ = try directory.write("intermediate.pem", intermediate.certificatePEM)
        _ = try directory.write("intermediate.key", intermediate.privateKeyPEM)
        _ = try directory.write("server-chain.pem", TestPKI.pemBundle([leaf.certificate, intermediate.certificate]))
        _ = try directory.write("server.key", leaf.privateKeyPEM)
        _ = try directory.write("device-chain.pem", TestPKI.pemBundle([device.certificate, intermediate.certificate]))
        _ = try directory.write("device.key", device.privateKeyPEM)
        _ = try directory.write("server-only.pem", serverOnly.certificatePEM)
        _ = try directory.write("server-only.key", serverOnly.privateKeyPEM)
        _ = try directory.write("expiring.pem", soon.certificatePEM)
        _ = try directory.write("expiring.key", soon.privateKeyPEM)
        let p12 = try device.pkcs12(passphrase: "pässwort", intermediates: [intermediate.certificate])
        try Data(p12).write(to: URL(fileURLWithPath: directory.path("device.p12")))
        self.intermediatePin = Pin(spkiOf: intermediate.certificate).description
        self.server = try await ServeProcess(
            ["--cert", directory.path("server-chain.pem"), "--key", directory.path("server.key"), "--client-ca", directory.path("root.pem")], in: directory
        )
        started = true
    }

    /// Stops the server and removes the directory.
    func stop() {
        self.server.stop()
        self.directory.remove()
    }

    /// A configuration whose api.test entry has `identity` (a JSON object) and other.test none.
    func configuration(_ identity: String, name: String = "pinning.json") throws -> String {
        try self.directory.write(
            name,
            """
            {"version": 1, "domains": {
              "api.test": {"pins": ["\(self.intermediatePin)", "\(ProxyFixture.backupPin)"], "anchors": ["root.pem"], "anchorsOnly": true, "clientIdentity": \(identity)},
              "other.test": {"pins": ["\(self.intermediatePin)", "\(ProxyFixture.backupPin)"], "anchors": ["root.pem"], "anchorsOnly": true}
            }}
            """
        )
    }
}

@Suite("clientIdentity in the configuration: proxy, check --config and config lint")
struct ClientIdentityCLITests {
    @Test("the proxy presents an entry's identity (PEM, and PKCS#12 with passphraseEnv) to that entry's hosts only", .enabled(if: curlAvailable))
    func proxyPresentsIdentity() async throws {
        let fixture = try await ClientIdentityFixture()
        defer { fixture.stop() }
        let port = fixture.server.port
        for (index, identity) in [
            #"{"certificate": "device-chain.pem", "key": "device.key"}"#, #"{"pkcs12": "device.p12", "passphraseEnv": "DEVICE_P12_PASS"}"#,
        ].enumerated() {
            let config = try fixture.configuration(identity, name: "pinning-\(index).json")
            let proxy = try Subprocess(
                [
                    "proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", fixture.directory.path("ca"),
                    "--resolve", "api.test:\(port):127.0.0.1", "--resolve", "other.test:\(port):127.0.0.1",
                ],
                in: fixture.directory, environment: ["DEVICE_P12_PASS": "pässwort"]
            )
            defer { proxy.kill() }
            let lines = try await ProxyFixture.startupLines(proxy, count: 2)
            let proxyPort = try #require(Int(lines.first?.split(separator: ":").last ?? ""), "\(lines) \(proxy.stderr)")
            let ca = fixture.directory.path("ca/ca.pem")
            let presented = try await TestTools.run(
                curlPath, ["-sS", "--max-time", "30", "-x", "http://127.0.0.1:\(proxyPort)", "--cacert", ca, "https://api.test:\(port)/who"], timeout: 60)
            #expect(presented.stdout.contains("\"subject\":\"CN=device-ü 1\""), "\(presented) \(proxy.stderr)")
            // other.test has no identity: the server requires one, so the upstream handshake fails and curl gets a 502.
            let anonymous = try await TestTools.run(
                curlPath, ["-sS", "--max-time", "30", "-D", "-", "-x", "http://127.0.0.1:\(proxyPort)", "--cacert", ca, "https://other.test:\(port)/who"],
                timeout: 60)
            #expect(anonymous.stdout.contains("HTTP/1.1 502 Bad Gateway"), "\(anonymous)")
            #expect(anonymous.stdout.contains("x-pinning-failure: handshakeFailed"), "\(anonymous)")
            #expect(anonymous.stdout.contains("this entry has no clientIdentity"), "\(anonymous)")
            #expect(!anonymous.stdout.contains("device-ü"), "\(anonymous)")
        }
    }

    @Test("check --config presents the entry's identity")
    func checkUsesIdentity() async throws {
        let fixture = try await ClientIdentityFixture()
        defer { fixture.stop() }
        let config = try fixture.configuration(#"{"certificate": "device-chain.pem", "key": "device.key"}"#)
        let port = fixture.server.port
        let run = try await Executable.pinning(
            ["check", "https://api.test:\(port)/", "--config", config, "--resolve", "api.test:\(port):127.0.0.1"], in: fixture.directory)
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("\"subject\":\"CN=device-ü 1\""), "\(run)")
    }

    @Test("config lint loads and checks each identity: errors for a missing or mismatched key, no clientAuth, an unset passphrase variable; a warning within 30 days")
    func lintChecksIdentities() async throws {
        let fixture = try await ClientIdentityFixture()
        defer { fixture.stop() }
        // Each error names the configuration's member at fault (they once all read `clientIdentity: FILE: …`, so a
        // user with a good certificate and a bad key was sent to look at both); a key that is not the
        // certificate's names the object (either file may be the wrong one).
        let field = "domains[\"api.test\"].clientIdentity"
        let cases: [(String, String)] = [
            (#"{"certificate": "device-chain.pem"}"#, "clientIdentity.key: missing"),
            (#"{"certificate": "device-chain.pem", "key": "server.key"}"#, "\(field): \(fixture.directory.path("server.key")): no certificate matching the key"),
            (#"{"certificate": "server-only.pem", "key": "server-only.key"}"#, "\(field).certificate: the certificate CN=server-only has an extended key usage without clientAuth"),
            (
                #"{"pkcs12": "device.p12", "passphraseEnv": "UNSET_PINNING_TEST_VARIABLE"}"#,
                "\(field).passphraseEnv: the passphrase variable UNSET_PINNING_TEST_VARIABLE (passphraseEnv) is not set"
            ),
            (#"{"pkcs12": "missing.p12"}"#, "\(field).pkcs12: \(fixture.directory.path("missing.p12")): unreadable file"),
            (#"{"certificate": "missing-chain.pem", "key": "device.key"}"#, "\(field).certificate: \(fixture.directory.path("missing-chain.pem")): unreadable file"),
            (#"{"certificate": "device-chain.pem", "key": "missing.key"}"#, "\(field).key: \(fixture.directory.path("missing.key")): unreadable file"),
            (#"{"certificate": "device.key", "key": "device.key"}"#, "\(field).certificate: "),
            (#"{"certificate": "device-chain.pem", "key": "device-chain.pem"}"#, "\(field).key: "),
            (#"{"pkcs12": "device.p12", "certificate": "device-chain.pem"}"#, "not both"),
            (#"{"pkcs12": "device.p12", "colour": "blue"}"#, "clientIdentity.colour"),
        ]
        for (index, (identity, expected)) in cases.enumerated() {
            let config = try fixture.configuration(identity, name: "lint-\(index).json")
            let run = try await Executable.pinning(["config", "lint", config], in: fixture.directory)
            #expect(run.status == 2, "\(identity): \(run)")
            #expect(run.stderr.contains(expected), "\(identity): \(run)")
        }
        let soon = try fixture.configuration(#"{"certificate": "expiring.pem", "key": "expiring.key"}"#, name: "soon.json")
        let warned = try await Executable.pinning(["config", "lint", soon], in: fixture.directory)
        #expect(warned.status == 0, "\(warned)")
        #expect(warned.stdout.contains("warning: domains[\"api.test\"].clientIdentity.certificate: the certificate CN=expiring expires at"), "\(warned)")
        let good = try fixture.configuration(#"{"pkcs12": "device.p12", "passphraseEnv": "DEVICE_P12_PASS"}"#, name: "good.json")
        let valid = try await Executable.pinning(["config", "lint", good], in: fixture.directory, environment: ["DEVICE_P12_PASS": "pässwort"])
        #expect(valid.status == 0 && valid.stdout.contains("client identity"), "\(valid)")
    }
}

let chromiumAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") && FileManager.default.isExecutableFile(atPath: "/usr/bin/certutil")

@Suite("pinning proxy with a real browser: headless Chromium, the PAC file and the local CA in a fresh NSS database", .enabled(if: chromiumAvailable))
struct ProxyBrowserTests {
    @Test("a page from an upstream that requires a client certificate loads; a page behind an intercepting server shows the 502 explanation")
    func chromium() async throws {
        let fixture = try await ClientIdentityFixture()
        defer { fixture.stop() }
        // An intercepting server for intercepted.test: a chain from a root the entry does not trust.
        let attackerRoot = try TestPKI.root("Intercepting Proxy Root")
        let attackerLeaf = try TestPKI.leaf("intercepted.test", issuer: attackerRoot, dnsNames: ["intercepted.test"])
        let attacker = try await ServeProcess(
            [
                "--cert", try fixture.directory.write("attacker.pem", attackerLeaf.certificatePEM), "--key",
                try fixture.directory.write("attacker.key", attackerLeaf.privateKeyPEM),
            ],
            in: fixture.directory
        )
        defer { attacker.stop() }
        let config = try fixture.directory.write(
            "browser.json",
            """
            {"version": 1, "domains": {
              "api.test": {"pins": ["\(fixture.intermediatePin)", "\(ProxyFixture.backupPin)"], "anchors": ["root.pem"], "anchorsOnly": true,
                           "clientIdentity": {"certificate": "device-chain.pem", "key": "device.key"}},
              "intercepted.test": {"pins": ["\(fixture.intermediatePin)", "\(ProxyFixture.backupPin)"], "anchors": ["root.pem"], "anchorsOnly": true}
            }}
            """
        )
        let port = fixture.server.port
        let proxy = try Subprocess(
            [
                "proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", fixture.directory.path("ca"),
                "--resolve", "api.test:\(port):127.0.0.1", "--resolve", "intercepted.test:\(attacker.port):127.0.0.1",
            ],
            in: fixture.directory
        )
        defer { proxy.kill() }
        let lines = try await ProxyFixture.startupLines(proxy, count: 2)
        let proxyPort = try #require(Int(lines.first?.split(separator: ":").last ?? ""), "\(lines) \(proxy.stderr)")

        // A fresh NSS database in a fresh HOME, holding only the local CA (as a user would import it).
        let home = fixture.directory.path("home")
        let database = home + "/.pki/nssdb"
        try FileManager.default.createDirectory(atPath: database, withIntermediateDirectories: true)
        let created = try await TestTools.run("/usr/bin/certutil", ["-d", "sql:" + database, "-N", "--empty-password"])
        #expect(created.status == 0, "\(created)")
        let imported = try await TestTools.run(
            "/usr/bin/certutil", ["-d", "sql:" + database, "-A", "-t", "C,,", "-n", "pinning proxy", "-i", fixture.directory.path("ca/ca.pem")])
        #expect(imported.status == 0, "\(imported)")

        func page(_ url: String) async throws -> TestTools.ProcessResult {
            try await TestTools.run(
                "/usr/bin/chromium",
                [
                    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + fixture.directory.path("chromium-\(UUID().uuidString)"),
                    "--proxy-pac-url=http://127.0.0.1:\(proxyPort)/proxy.pac", "--dump-dom", url,
                ],
                in: fixture.directory, environment: ["HOME": home], timeout: 120
            )
        }
        let loaded = try await page("https://api.test:\(port)/from-the-browser")
        #expect(loaded.stdout.contains("\"path\":\"/from-the-browser\""), "\(loaded)")
        #expect(loaded.stdout.contains("\"subject\":\"CN=device-ü 1\""), "the upstream saw the entry's client certificate: \(loaded)")

        let refused = try await page("https://intercepted.test:\(attacker.port)/")
        #expect(refused.stdout.contains("pinning proxy refused intercepted.test:\(attacker.port)"), "\(refused)")
        #expect(refused.stdout.contains("[noPathToAnchor] "), "\(refused)")
        #expect(!refused.stdout.contains("TrustFailure"), "\(refused)")
        try await Task.sleep(for: .milliseconds(300))
        #expect(proxy.stderr.contains("host=intercepted.test") && proxy.stderr.contains("verdict=untrusted"), "\(proxy.stderr)")
    }
}
