import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO
import PinningProxy
import PinningTestSupport
import Testing
import X509

/// AsyncHTTPClient has no hook to judge a chain during the handshake, so the adapter can pin only the leaf. Through
/// `PinningProxy` (issue 16: "AsyncHTTPClient through the proxy"), an unmodified AsyncHTTPClient gets the whole
/// per-host policy: pins anywhere in the chain, anchors, and the entry's client identity. AHC's own proxy support
/// sends `CONNECT`; it trusts only the proxy's local CA.
@Suite("AsyncHTTPClient through PinningProxy", .timeLimit(.minutes(3)))
struct AsyncHTTPClientThroughProxyTests {
    @Test("an intermediate pin and a client identity hold for a plain AsyncHTTPClient; a wrong pin is a 502 that says pinMismatch")
    func throughProxy() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-ahc-proxy")
        defer { directory.remove() }
        let genuine = try TestChain(host: "api.example.com")
        let device = try TestPKI.leaf("device-ü 3", issuer: genuine.intermediate, dnsNames: ["device-3.fleet.test"], usage: .clientAuth)
        // One server certificate for both names, so bad.example.com differs from api.example.com only in its pins.
        let serverLeaf = try TestPKI.leaf("api.example.com", issuer: genuine.intermediate, dnsNames: ["api.example.com", "bad.example.com"])
        // The upstream requires a client certificate under the same root and answers with its subject.
        let mutual = try MutualTLSServer(
            identity: try serverLeaf.tlsIdentity(chain: [genuine.intermediate.certificate]),
            clientCertificateAuthorities: [genuine.root.certificate]
        )
        let server = try await HTTPSTestServer(mutualTLS: mutual)
        defer { Task { await server.stop() } }
        try directory.write("root.pem", genuine.root.certificatePEM)
        let intermediatePin = Pin(spkiOf: genuine.intermediate.certificate).description
        let unrelated = ["sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString(), "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString()]
        let configuration = try PinningConfiguration(
            data: Data(
                """
                {"version": 1, "domains": {
                  "api.example.com": {"pins": ["\(intermediatePin)", "\(unrelated[1])"], "anchors": ["root.pem"], "anchorsOnly": true},
                  "bad.example.com": {"pins": ["\(unrelated[0])", "\(unrelated[1])"], "anchors": ["root.pem"], "anchorsOnly": true}
                }}
                """.utf8),
            baseDirectory: directory.path
        )
        let authority = try ProxyCertificateAuthority.load(directory: directory.path("ca"), coverage: configuration.entries.map(\.coverage))
        var resolve = ProxySettings.Resolve()
        let upstream = try SocketAddress(ipAddress: "127.0.0.1", port: server.port)
        resolve.add(host: "api.example.com", port: server.port, address: upstream)
        resolve.add(host: "bad.example.com", port: server.port, address: upstream)
        let settings = ProxySettings(
            configuration: configuration,
            identities: ["api.example.com": try device.tlsIdentity(chain: [genuine.intermediate.certificate])],
            listen: try SocketAddress(ipAddress: "127.0.0.1", port: 0),
            resolve: resolve
        )
        let records = NIOLockedValueBoxForTests<[ProxyLogRecord]>([])
        let proxy = try PinningProxy(settings: settings, authority: authority, group: testGroup) { record in
            records.withLockedValue { $0.append(record) }
        }
        let addresses = try await proxy.start()
        let proxyPort = try #require(addresses.first?.port)

        // A plain AsyncHTTPClient: its proxy setting, and the local CA as its only root. No pinning code.
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: authority.certificate.derBytes, format: .der)])
        var clientConfiguration = HTTPClient.Configuration(tlsConfiguration: tls)
        clientConfiguration.proxy = .server(host: "127.0.0.1", port: proxyPort)
        clientConfiguration.timeout = .init(connect: .seconds(30), read: .seconds(30))
        let client = HTTPClient(eventLoopGroup: testGroup, configuration: clientConfiguration)
        do {
            let trusted = try await client.execute(HTTPClientRequest(url: "https://api.example.com:\(server.port)/"), timeout: .seconds(50))
            let body = String(buffer: try await trusted.body.collect(upTo: 1 << 16))
            #expect(trusted.status == .ok)
            // The upstream saw the entry's identity: the proxy presented it.
            #expect(body == "hello CN=device-ü 3", "\(body)")

            let refused = try await client.execute(HTTPClientRequest(url: "https://bad.example.com:\(server.port)/"), timeout: .seconds(50))
            let explanation = String(buffer: try await refused.body.collect(upTo: 1 << 16))
            #expect(refused.status == .badGateway)
            #expect(refused.headers["X-Pinning-Failure"] == ["pinMismatch"], "\(refused.headers)")
            #expect(explanation.contains("pin"), "\(explanation)")
        } catch {
            try await client.shutdown()
            await proxy.stop()
            throw error
        }
        try await client.shutdown()
        await proxy.stop()
        // A connection's record is written when the connection has finished closing, on its event loop, which
        // may be after stop() returned (stop closes the listeners): wait for the connections to drain, then for
        // both records, up to 10 s.
        await proxy.drain(timeout: .seconds(10))
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline,
            !records.withLockedValue({ $0.contains { $0.host == "bad.example.com" } && $0.contains { $0.host == "api.example.com" } })
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        let logged = records.withLockedValue { $0 }
        #expect(logged.contains { $0.host == "api.example.com" && $0.verdict == .trusted }, "\(logged)")
        #expect(logged.contains { $0.host == "bad.example.com" && $0.failure == "pinMismatch" }, "\(logged)")
    }
}

/// A lock around a value (the test's log collector is called on the proxy's event loops).
final class NIOLockedValueBoxForTests<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLockedValue<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try self.lock.withLock { try body(&self.value) }
    }
}
