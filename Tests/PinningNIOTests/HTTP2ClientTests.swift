import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

// PinnedHTTPClient's HTTP/2 (issue 13) against nginx, a server we did not write: ALPN picks h2, concurrent
// requests share one connection (counted by nginx itself: its access log records each request's connection
// serial number), an intercepting server is refused with the TrustFailure before any HTTP/2 is spoken, and a
// server without HTTP/2 is spoken to in HTTP/1.1.

let nginxPath = "/usr/sbin/nginx"
let nginxAvailable = FileManager.default.isExecutableFile(atPath: nginxPath)

/// nginx on 127.0.0.1 with TLS (and HTTP/2 when asked), every file in a temporary directory, in the foreground.
final class NginxServer: @unchecked Sendable {
    let directory: TemporaryDirectory
    let process = Process()
    let port: Int

    init(identity chain: [Certificate], key: String, http2: Bool) async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-nginx")
        self.directory = directory
        // Until the fixture is whole no test holds it: a step that throws removes the directory here.
        var ready = false
        defer { if !ready { directory.remove() } }
        let port = try Self.freePort()
        self.port = port
        let certificate = try self.directory.write("chain.pem", TestPKI.pemBundle(chain))
        let keyFile = try self.directory.write("key.pem", key)
        let path = self.directory.path
        // nginx 1.22 (Debian 12) spells HTTP/2 on the listen line; `http2 on;` is 1.25's.
        let configuration = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(path)/nginx.pid;
            error_log \(path)/error.log warn;
            events { worker_connections 64; }
            http {
                access_log \(path)/access.log;
                log_format connections '$connection $server_protocol $request_uri';
                client_body_temp_path \(path)/body;
                proxy_temp_path \(path)/proxy;
                fastcgi_temp_path \(path)/fastcgi;
                uwsgi_temp_path \(path)/uwsgi;
                scgi_temp_path \(path)/scgi;
                server {
                    listen 127.0.0.1:\(port) ssl\(http2 ? " http2" : "");
                    server_name api.example.com;
                    ssl_certificate \(certificate);
                    ssl_certificate_key \(keyFile);
                    access_log \(path)/connections.log connections;
                    location / { default_type text/plain; return 200 "hello $request_uri $server_protocol\\n"; }
                }
            }
            """
        let conf = try self.directory.write("nginx.conf", configuration)
        self.process.executableURL = URL(fileURLWithPath: nginxPath)
        self.process.arguments = ["-p", path, "-c", conf, "-e", "\(path)/error.log"]
        self.process.standardOutput = FileHandle.nullDevice
        self.process.standardError = FileHandle.nullDevice
        try self.process.run()
        let deadline = Date().addingTimeInterval(10)
        while !Self.accepts(port) {
            guard self.process.isRunning, Date() < deadline else {
                self.stop()
                let log = (try? String(contentsOfFile: "\(path)/error.log", encoding: .utf8)) ?? ""
                throw ServerProcess.StartError(description: "nginx did not start listening: \(log)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        ready = true
    }

    /// Each logged request: nginx's connection serial number, the protocol, the URI.
    var requests: [(connection: String, protocol: String, uri: String)] {
        let text = (try? String(contentsOfFile: self.directory.path("connections.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            return fields.count == 3 ? (String(fields[0]), String(fields[1]), String(fields[2])) : nil
        }
    }

    /// SIGKILL (a test server with nothing to flush: its access log is written per request, unbuffered; and
    /// a single-process nginx started from the test runner was seen to sit through SIGTERM), polled for at most
    /// 2 s rather than waited for.
    func stop() {
        if self.process.isRunning {
            kill(self.process.processIdentifier, SIGKILL)
            let reaped = Date().addingTimeInterval(2)
            while self.process.isRunning && Date() < reaped { usleep(20_000) }
        }
        self.directory.remove()
    }

    private static func freePort() throws -> Int {
        let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).wait()
        let port = channel.localAddress?.port ?? 0
        try channel.close().wait()
        return port
    }

    private static func accepts(_ port: Int) -> Bool {
        do {
            let channel = try ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).wait()
            try channel.close().wait()
            return true
        } catch {
            return false
        }
    }
}

@Suite("PinnedHTTPClient over HTTP/2 (nginx)", .enabled(if: nginxAvailable), .serialized)
struct HTTP2ClientTests {
    static let loopback: PinnedHTTPClient.Resolve = { _, port in try? SocketAddress(ipAddress: "127.0.0.1", port: port) }

    @Test("h2 negotiated with ALPN after the pin check; 12 concurrent requests are streams of one connection, as nginx counts them")
    func multiplexed() async throws {
        let genuine = try TestChain(host: "api.example.com")
        let nginx = try await NginxServer(identity: genuine.presented, key: genuine.leaf.privateKeyPEM, http2: true)
        defer { nginx.stop() }
        let client = try PinnedHTTPClient(
            evaluator: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: genuine.intermediate.certificate)]),
            settings: TrustSettings(platformRoots: TrustRoots([genuine.root.certificate])),
            configuration: PinnedHTTPClientConfiguration(httpVersions: .automatic),
            group: testGroup
        )
        let responses = try await withThrowingTaskGroup(of: PinnedHTTPResponse.self) { group in
            for index in 0..<12 {
                group.addTask {
                    try await client.get(URL(string: "https://api.example.com:\(nginx.port)/r\(index)")!, resolve: Self.loopback)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        await client.shutdown()
        #expect(responses.count == 12)
        for response in responses {
            #expect(response.status == .ok && response.version.major == 2, "\(response.version) \(response.bodyText)")
            #expect(response.bodyText.hasSuffix(" HTTP/2.0\n"), "\(response.bodyText)")
            #expect(response.handshake.peer.subject == "CN=api.example.com")
        }
        #expect(client.openedConnections == 1)
        let logged = nginx.requests
        #expect(logged.count == 12, "\(logged)")
        #expect(Set(logged.map(\.connection)).count == 1, "nginx saw these connections: \(Set(logged.map(\.connection)))")
        #expect(Set(logged.map(\.protocol)) == ["HTTP/2.0"])
    }

    @Test("an intercepting server (another CA the platform trusts) is refused with the TrustFailure; nginx logs no request")
    func interceptingRefused() async throws {
        let genuine = try TestChain(host: "api.example.com", rootName: "Genuine Root")
        let attacker = try TestChain(host: "api.example.com", rootName: "Intercepting Root", intermediateName: "Intercepting Intermediate")
        let nginx = try await NginxServer(identity: attacker.presented, key: attacker.leaf.privateKeyPEM, http2: true)
        defer { nginx.stop() }
        let client = try PinnedHTTPClient(
            evaluator: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: genuine.intermediate.certificate)]),
            settings: TrustSettings(platformRoots: TrustRoots([genuine.root.certificate, attacker.root.certificate])),
            configuration: PinnedHTTPClientConfiguration(httpVersions: .automatic),
            group: testGroup
        )
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await client.get(URL(string: "https://api.example.com:\(nginx.port)/")!, resolve: Self.loopback)
        }
        await client.shutdown()
        #expect(error?.code == .untrusted)
        #expect(error?.trustFailure?.code == .pinMismatch, "\(String(describing: error))")
        #expect(nginx.requests.isEmpty)
    }

    @Test("a server without HTTP/2 is spoken to in HTTP/1.1, one connection at a time, as before")
    func http1Fallback() async throws {
        let genuine = try TestChain(host: "api.example.com")
        let nginx = try await NginxServer(identity: genuine.presented, key: genuine.leaf.privateKeyPEM, http2: false)
        defer { nginx.stop() }
        let client = try PinnedHTTPClient(
            evaluator: SecurityPolicy.default,
            settings: TrustSettings(platformRoots: TrustRoots([genuine.root.certificate])),
            configuration: PinnedHTTPClientConfiguration(httpVersions: .automatic),
            group: testGroup
        )
        for index in 0..<3 {
            let response = try await client.get(URL(string: "https://api.example.com:\(nginx.port)/one\(index)")!, resolve: Self.loopback)
            #expect(response.version == .http1_1 && response.bodyText.hasSuffix(" HTTP/1.1\n"), "\(response.bodyText)")
        }
        await client.shutdown()
        // Keep-alive: the three sequential requests reuse one connection.
        #expect(client.openedConnections == 1)
        #expect(Set(nginx.requests.map(\.protocol)) == ["HTTP/1.1"])
    }
}
