import Foundation
import Pinning
import PinningTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// `pinning proxy` with the two clients issue 16's proof names for tunnels and interception that were not yet
// automated: psql to a PostgreSQL server behind TLS (stunnel in server mode, requiring a client certificate, in
// front of a PostgreSQL 15 on loopback), and `openssl s_client` through the forward proxy. Everything listens on
// 127.0.0.1; PostgreSQL and stunnel come from Debian's packages, which `.ci/run` installs.

// PostgreSQL comes from PinningTestSupport's PostgresCluster (shared with the collector's tests).
let stunnelPath = "/usr/bin/stunnel4"
let stunnelAvailable = FileManager.default.isExecutableFile(atPath: stunnelPath)
/// A PostgreSQL server can be started here, and its psql is beside it.
let psqlRunnable = PostgresCluster.available && PostgresCluster.bin.map { FileManager.default.isExecutableFile(atPath: $0 + "/psql") } == true

/// stunnel in server mode on 127.0.0.1: TLS with `certificate`/`key`, requiring a client certificate under
/// `clientCA`, forwarding to 127.0.0.1:`target`.
func stunnelServer(certificate: String, key: String, clientCA: String, target: Int, in directory: TemporaryDirectory) async throws -> ServerProcess {
    let port = try PostgresCluster.unusedLoopbackPort()
    let configuration = try directory.write(
        "stunnel-server-\(port).conf",
        """
        foreground = yes
        pid =
        [database]
        accept = 127.0.0.1:\(port)
        connect = 127.0.0.1:\(target)
        cert = \(certificate)
        key = \(key)
        CAfile = \(clientCA)
        verifyChain = yes
        requireCert = yes

        """
    )
    return try await ServerProcess(stunnelPath, [configuration], in: directory) { line in
        line.contains("Configuration successful") ? port : nil
    }
}

@Suite("pinning proxy with psql and openssl s_client", .serialized)
struct ProxyTunnelClientsTests {
    @Test(
        "psql reaches PostgreSQL through a tunnel over pinned mutual TLS (stunnel in front, requiring a client certificate); without the entry's identity it is refused",
        .enabled(if: psqlRunnable && stunnelAvailable, "needs Debian's postgresql and stunnel4")
    )
    func psqlThroughTunnel() async throws {
        let bin = try #require(PostgresCluster.bin)
        let directory = try TemporaryDirectory(prefix: "pinning-proxy-psql")
        defer { directory.remove() }
        let root = try TestPKI.root("Database Root")
        let intermediate = try TestPKI.intermediate("Database Issuing CA", issuer: root)
        let server = try TestPKI.leaf("db.test", issuer: intermediate, dnsNames: ["db.test", "db-anonymous.test"])
        let device = try TestPKI.leaf("device-ü 7", issuer: intermediate, dnsNames: ["device-7.fleet.test"], usage: .clientAuth)
        let serverChain = try directory.write("db-chain.pem", TestPKI.pemBundle([server.certificate, intermediate.certificate]))
        let serverKey = try directory.write("db.key", server.privateKeyPEM)
        let rootPath = try directory.write("root.pem", root.certificatePEM)
        _ = try directory.write("device-chain.pem", TestPKI.pemBundle([device.certificate, intermediate.certificate]))
        _ = try directory.write("device.key", device.privateKeyPEM)
        let pin = Pin(spkiOf: intermediate.certificate).description
        let config = try directory.write(
            "pinning.json",
            """
            {"version": 1, "domains": {
              "db.test": {"pins": ["\(pin)", "\(ProxyFixture.backupPin)"], "anchors": ["root.pem"], "anchorsOnly": true,
                          "clientIdentity": {"certificate": "device-chain.pem", "key": "device.key"}},
              "db-anonymous.test": {"pins": ["\(pin)", "\(ProxyFixture.backupPin)"], "anchors": ["root.pem"], "anchorsOnly": true}
            }}
            """
        )

        let postgres = try await PostgresCluster()
        defer { postgres.stop() }
        let stunnel = try await stunnelServer(certificate: serverChain, key: serverKey, clientCA: rootPath, target: postgres.port, in: directory)
        defer { stunnel.stop() }
        let upstream = stunnel.port
        let proxy = try Subprocess(
            [
                "proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", directory.path("ca"),
                "--resolve", "db.test:\(upstream):127.0.0.1", "--resolve", "db-anonymous.test:\(upstream):127.0.0.1",
                "--tunnel", "127.0.0.1:0=db.test:\(upstream)", "--tunnel", "127.0.0.1:0=db-anonymous.test:\(upstream)",
            ],
            in: directory
        )
        defer { proxy.kill() }
        let lines = try await ProxyFixture.startupLines(proxy, count: 4)
        let tunnels = lines.filter { $0.hasPrefix("tunnel listening on ") }.compactMap { Int($0.split(separator: " ")[3].split(separator: ":").last ?? "") }
        try #require(tunnels.count == 2, "\(lines) \(proxy.stderr)")

        func psql(port: Int, _ query: String) async throws -> TestTools.ProcessResult {
            try await TestTools.run(
                "\(bin)/psql",
                ["host=127.0.0.1 port=\(port) user=pinning dbname=postgres sslmode=disable connect_timeout=20", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", query],
                in: directory, environment: ["PGCLIENTENCODING": "UTF8"], timeout: 60
            )
        }
        // Non-ASCII text both ways, and a 1 MB result, so the tunnel carries more than one TLS record each way.
        let answer = try await psql(port: tunnels[0], "SELECT 'tunnel ü ' || current_user || ' ' || (6*7)::text, length(repeat('x', 1000000))")
        #expect(answer.status == 0, "\(answer) \(proxy.stderr) \(stunnel.output)")
        #expect(answer.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "tunnel ü pinning 42|1000000", "\(answer)")
        let table = try await psql(port: tunnels[0], "CREATE TABLE fleet(name text); INSERT INTO fleet SELECT 'device ' || i FROM generate_series(1, 5000) i; SELECT count(*) FROM fleet")
        #expect(table.status == 0 && table.stdout.contains("5000"), "\(table)")

        // The same server through an entry with no clientIdentity: stunnel requires a certificate, so psql gets
        // no database. (What psql prints is its own; the point is that nothing answers.)
        let anonymous = try await psql(port: tunnels[1], "SELECT 'should not answer'")
        #expect(anonymous.status != 0, "\(anonymous)")
        #expect(!anonymous.stdout.contains("should not answer"), "\(anonymous)")

        try await Task.sleep(for: .milliseconds(300))
        // One log line per tunnel connection: the database's host and entry, trusted, bytes both ways.
        let log = proxy.stderr.split(separator: "\n").filter { $0.hasPrefix("tunnel ") && $0.contains("host=db.test ") }
        #expect(log.count >= 2, "\(proxy.stderr)")
        #expect(log.contains { $0.contains("verdict=trusted") }, "\(proxy.stderr)")
    }

    @Test(
        "openssl s_client through the forward proxy: it verifies the local CA's certificate for the host, gets the upstream's reply, and a refused upstream's 502",
        .enabled(if: TestTools.opensslAvailable))
    func opensslThroughForwardProxy() async throws {
        let fixture = try await ProxyFixture()
        defer { fixture.stop() }
        func sClient(_ host: String) async throws -> TestTools.ProcessResult {
            try await TestTools.openssl(
                [
                    "s_client", "-proxy", "127.0.0.1:\(fixture.proxyPort)", "-connect", "\(host):\(fixture.upstreamPort)", "-servername", host,
                    "-CAfile", fixture.caPath, "-verify_hostname", host, "-verify_return_error", "-brief", "-ign_eof",
                ],
                input: "GET /via-s_client HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n",
                in: fixture.directory, timeout: 60
            )
        }
        let trusted = try await sClient("api.test")
        #expect(trusted.status == 0, "\(trusted)")
        #expect(trusted.stderr.contains("Verification: OK"), "\(trusted)")
        #expect(trusted.stdout.contains("HTTP/1.1 200"), "\(trusted)")
        #expect(trusted.stdout.contains("\"path\":\"/via-s_client\""), "\(trusted)")
        // s_client saw the local CA's certificate for api.test, not the upstream's own.
        let shown = try await TestTools.openssl(
            ["s_client", "-proxy", "127.0.0.1:\(fixture.proxyPort)", "-connect", "api.test:\(fixture.upstreamPort)", "-servername", "api.test", "-showcerts"],
            input: "", in: fixture.directory, timeout: 60
        )
        #expect(shown.stdout.contains("CN=pinning proxy local CA") || shown.stdout.contains("CN = pinning proxy local CA"), "\(shown.stdout.prefix(1500))")
        #expect(!shown.stdout.contains("Proxy Test Intermediate"), "\(shown.stdout.prefix(1500))")

        let refused = try await sClient("bad.test")
        #expect(refused.stdout.contains("HTTP/1.1 502 Bad Gateway"), "\(refused)")
        #expect(refused.stdout.lowercased().contains("x-pinning-failure: pinmismatch"), "\(refused)")
    }
}
