import Foundation
import Pinning
import PinningTestSupport
import Testing

/// `pinning proxy --tunnel L=HOST:PORT` with an internationalised HOST: the host is converted to its A-label form,
/// as `--resolve`, CONNECT and the configuration's keys convert it, so it matches `--resolve` and the entry and is
/// sent as SNI (it was kept as typed, looked up as raw UTF-8, and never connected: new-user trial 3, defect 5).
@Suite("pinning proxy --tunnel: the upstream host as an A-label")
struct ProxyTunnelHostCLITests {
    @Test(
        "a Unicode upstream host becomes its A-label; ASCII is lower-cased; an IP address is kept",
        arguments: [
            ("127.0.0.1:0=bücher.example:18502", "xn--bcher-kva.example"),
            ("127.0.0.1:0=BÜCHER.Example:443", "xn--bcher-kva.example"),
            ("127.0.0.1:0=例え.テスト:443", "xn--r8jz45g.xn--zckzah"),
            ("127.0.0.1:0=xn--bcher-kva.example:18502", "xn--bcher-kva.example"),
            ("127.0.0.1:0=API.Test:443", "api.test"),
            ("127.0.0.1:0=[::1]:443", "::1"),
        ])
    func converted(_ spec: String, _ host: String) {
        let parsed = InProcessCLI.tunnelUpstream(spec)
        #expect(parsed.host == host && parsed.refusal == nil, "\(parsed)")
    }

    @Test("a host the URL parser does not read as a name is refused at start-up with one line naming the option")
    func refused() {
        for spec in ["127.0.0.1:0=bü/cher.example:443", "127.0.0.1:0=bü cher.example:443"] {
            let parsed = InProcessCLI.tunnelUpstream(spec)
            #expect(parsed.host == nil, "\(spec): \(parsed)")
            #expect(parsed.refusal?.hasPrefix("pinning: --tunnel ") == true && parsed.refusal?.contains("\n") == false, "\(spec): \(parsed)")
        }
    }
}

/// The same end to end (runs the built binary): `pinning serve` for `xn--bcher-kva.test`, a configuration keyed
/// `bücher.test`, `--tunnel 127.0.0.1:0=bücher.test:PORT` and `--resolve bücher.test:PORT:127.0.0.1`.
@Suite("pinning proxy --tunnel to an internationalised host", .enabled(if: curlAvailable))
struct ProxyTunnelIDNCLITests {
    @Test("the tunnel connects, is judged by the entry and matches --resolve; its start-up line names the A-label")
    func connects() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-tunnel-idn")
        defer { directory.remove() }
        let root = try TestPKI.root("Tunnel IDN Root")
        let intermediate = try TestPKI.intermediate("Tunnel IDN Intermediate", issuer: root)
        let leaf = try TestPKI.leaf("xn--bcher-kva.test", issuer: intermediate, dnsNames: ["xn--bcher-kva.test"])
        let chain = try directory.write("chain.pem", TestPKI.pemBundle([leaf.certificate, intermediate.certificate]))
        let key = try directory.write("leaf.key", leaf.privateKeyPEM)
        _ = try directory.write("root.pem", root.certificatePEM)
        let server = try await ServeProcess(["--cert", chain, "--key", key], in: directory)
        defer { server.stop() }
        let pin = Pin(spkiOf: intermediate.certificate).description
        let config = try directory.write(
            "pinning.json",
            #"{"version": 1, "domains": {"bücher.test": {"pins": ["\#(pin)", "\#(ProxyFixture.backupPin)"], "anchors": ["root.pem"], "anchorsOnly": true}}}"#)
        let proxy = try Subprocess(
            [
                "proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", directory.path("ca"),
                "--tunnel", "127.0.0.1:0=bücher.test:\(server.port)", "--resolve", "bücher.test:\(server.port):127.0.0.1",
            ],
            in: directory)
        defer { proxy.kill() }
        let lines = try await ProxyFixture.startupLines(proxy, count: 3)
        #expect(lines.count == 3 && lines[1].hasSuffix(" -> xn--bcher-kva.test:\(server.port)"), "\(lines) \(proxy.stderr)")
        let tunnelPort = try #require(Int(lines.dropFirst().first?.split(separator: " ")[3].split(separator: ":").last ?? ""), "\(lines)")
        let through = try await TestTools.run(
            curlPath, ["-sS", "--max-time", "30", "http://127.0.0.1:\(tunnelPort)/idn", "-H", "Host: xn--bcher-kva.test"], in: directory, timeout: 60)
        #expect(through.status == 0 && through.stdout.contains("\"path\":\"/idn\""), "\(through) \(proxy.stderr)")
    }
}
