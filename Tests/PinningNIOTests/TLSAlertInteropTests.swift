import Foundation
import NIOCore
import NIOPosix
import Pinning
import PinningNIO
import PinningPKI
import PinningTestSupport
import Testing

/// The alert values ``TLSAlertObserver`` reads, against OpenSSL on loopback: `openssl s_server` refusing our client
/// certificate (TLS 1.2 in plaintext; TLS 1.3 encrypted under each AEAD, after our side of the handshake is done),
/// and `openssl s_client` refusing our server's certificate or leaving without one. PKIs are made at test time.
@Suite("TLS alerts as values, against openssl s_server and s_client", .serialized, .enabled(if: opensslAvailable))
struct TLSAlertInteropTests {
    struct Fixture {
        let directory: TemporaryDirectory
        let server: TestChain
        let client: TestChain
        let stranger: TestChain
        let serverCert: String
        let serverChain: String
        let serverKey: String
        let serverRoot: String
        let clientRoot: String

        init() throws {
            let directory = try TemporaryDirectory(prefix: "pinning-alert-values")
            self.directory = directory
            // Until the fixture is whole no test holds it: a step that throws removes the directory here.
            var ready = false
            defer { if !ready { directory.remove() } }
            self.server = try TestChain(host: "localhost", rootName: "Alert Server Root")
            self.client = try TestChain(host: "client-1", ipAddresses: [], leafUsage: .clientAuth, rootName: "Alert Client Root")
            self.stranger = try TestChain(host: "client-2", ipAddresses: [], leafUsage: .clientAuth, rootName: "Alert Stranger Root")
            self.serverCert = try self.directory.write("server.pem", TestPKI.pemBundle([self.server.leaf.certificate]))
            self.serverChain = try self.directory.write("server-intermediate.pem", TestPKI.pemBundle([self.server.intermediate.certificate]))
            self.serverKey = try self.directory.write("server.key", self.server.leaf.privateKeyPEM)
            self.serverRoot = try self.directory.write("server-root.pem", TestPKI.pemBundle([self.server.root.certificate]))
            self.clientRoot = try self.directory.write("client-root.pem", TestPKI.pemBundle([self.client.root.certificate]))
            ready = true
        }

        func pinnedClient(identity: TLSIdentity?, trusting root: TestChain? = nil) throws -> PinnedHTTPClient {
            try PinnedHTTPClient(
                evaluator: SecurityPolicy.default,
                settings: TrustSettings(anchors: [(root ?? self.server).root.certificate], anchorsOnly: true),
                identity: identity
            )
        }
    }

    static let resolveLoopback: PinnedHTTPClient.Resolve = { _, port in try? SocketAddress(ipAddress: "127.0.0.1", port: port) }

    /// One GET; the error it failed with.
    static func failure(_ client: PinnedHTTPClient, port: Int) async -> PinningConnectionError? {
        defer { Task { await client.shutdown() } }
        do {
            _ = try await client.get(URL(string: "https://localhost:\(port)/")!, resolve: Self.resolveLoopback)
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "s_server -Verify 1 refusing our client certificate: the alert it sent, as a value, for TLS 1.2 and each TLS 1.3 AEAD",
        arguments: [
            ["-tls1_2"], ["-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256"], ["-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384"],
            ["-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"],
        ]
    )
    func serverRefusesOurCertificate(_ protocolArguments: [String]) async throws {
        let fixture = try Fixture()
        defer { fixture.directory.remove() }
        let server = try await ServerProcess.opensslServer(
            ["-cert", fixture.serverCert, "-cert_chain", fixture.serverChain, "-key", fixture.serverKey, "-www", "-Verify", "1", "-verify_return_error", "-CAfile", fixture.clientRoot]
                + protocolArguments
        )
        defer { server.stop() }
        let tls13 = protocolArguments.first == "-tls1_3"
        let stranger = try fixture.stranger.leaf.tlsIdentity(chain: [fixture.stranger.intermediate.certificate])
        let member = try fixture.client.leaf.tlsIdentity(chain: [fixture.client.intermediate.certificate])
        // No certificate: TLS 1.3 has certificate_required (RFC 8446 §4.4.2.4); OpenSSL sends handshake_failure
        // under TLS 1.2. A certificate from a CA it does not know: unknown_ca.
        for (identity, expected) in [(nil, tls13 ? 116 : 40), (stranger, 48)] as [(TLSIdentity?, Int)] {
            for _ in 0..<3 {
                let error = try #require(await Self.failure(try fixture.pinnedClient(identity: identity), port: server.port))
                #expect(error.receivedAlert == TLSAlert(code: expected, level: .fatal), "\(protocolArguments) \(error.debugDescription)")
                #expect(error.message == "the server refused the handshake: TLS alert \(TLSAlert(code: expected).name) (\(expected))", "\(error.message)")
                #expect(error.code == .handshakeFailed)
            }
        }
        // The CA it knows: no failure, so no alert.
        #expect(await Self.failure(try fixture.pinnedClient(identity: member), port: server.port) == nil)
    }

    @Test("our client refusing s_server's certificate: the alert we sent, as a value", arguments: ["-tls1_2", "-tls1_3"])
    func weRefuseTheServer(_ version: String) async throws {
        let fixture = try Fixture()
        defer { fixture.directory.remove() }
        let server = try await ServerProcess.opensslServer(["-cert", fixture.serverCert, "-cert_chain", fixture.serverChain, "-key", fixture.serverKey, "-www", version])
        defer { server.stop() }
        // Trusting another root: the policy refuses, BoringSSL ends the handshake with an alert about the certificate.
        let error = try #require(await Self.failure(try fixture.pinnedClient(identity: nil, trusting: fixture.stranger), port: server.port))
        #expect(error.code == .untrusted, "\(error.debugDescription)")
        #expect(error.receivedAlert == nil)
        // BoringSSL's alert when a custom verification callback refuses: certificate_unknown (TLS 1.3: encrypted
        // under our handshake secret).
        #expect(error.sentAlert == TLSAlert(code: 46, level: .fatal), "\(error.debugDescription)")
    }

    /// Runs `openssl s_client` against `port` until it ends (it quits on end of input once connected).
    static func sClient(_ port: Int, _ arguments: [String]) async throws {
        _ = try await TestTools.openssl(["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost"] + arguments, input: "", timeout: 30)
    }

    @Test("our MutualTLSServer: s_client without a certificate (the alert we sent) and s_client refusing our certificate (the alert it sent)", arguments: ["-tls1_2", "-tls1_3"])
    func ourServer(_ version: String) async throws {
        let fixture = try Fixture()
        defer { fixture.directory.remove() }
        let mutual = try MutualTLSServer(
            identity: try fixture.server.leaf.tlsIdentity(chain: [fixture.server.intermediate.certificate]),
            clientCertificateAuthorities: [fixture.client.root.certificate]
        )
        let server = try await MutualTLSTestServer(mutual)
        defer { Task { await server.stop() } }

        // No client certificate: our server refuses with certificate_required (TLS 1.3) or handshake_failure (1.2).
        try await Self.sClient(server.port, [version, "-CAfile", fixture.serverRoot])
        guard case .failure(let refused)? = await server.nextOutcome(within: 10) else {
            Issue.record("no refusal for a client without a certificate")
            return
        }
        #expect(refused.sentAlert == TLSAlert(code: version == "-tls1_3" ? 116 : 40, level: .fatal), "\(refused.debugDescription)")

        // s_client trusting another root: OpenSSL ends the handshake with unknown_ca (it cannot find our issuer).
        let member = try fixture.directory.write("member.pem", TestPKI.pemBundle(fixture.client.presented))
        let memberKey = try fixture.directory.write("member.key", fixture.client.leaf.privateKeyPEM)
        let strangerRoot = try fixture.directory.write("stranger-root.pem", TestPKI.pemBundle([fixture.stranger.root.certificate]))
        try await Self.sClient(server.port, [version, "-CAfile", strangerRoot, "-verify_return_error", "-cert", member, "-key", memberKey])
        guard case .failure(let refusing)? = await server.nextOutcome(within: 10) else {
            Issue.record("no failure when s_client refused our certificate")
            return
        }
        #expect(refusing.receivedAlert == TLSAlert(code: 48, level: .fatal), "\(refusing.debugDescription)")
        #expect(
            ConnectionFailureWords.clientHandshakeProblem(refusing) == "the client refused this server's certificate: TLS alert unknown_ca (48)"
        )
    }

    @Test("after a trusted handshake the observer ends (TLS 1.3: after the server's next record) and its secrets are gone", arguments: ["-tls1_2", "-tls1_3"])
    func observerEnds(_ version: String) async throws {
        let fixture = try Fixture()
        defer { fixture.directory.remove() }
        let server = try await ServerProcess.opensslServer(["-cert", fixture.serverCert, "-cert_chain", fixture.serverChain, "-key", fixture.serverKey, "-www", version])
        defer { server.stop() }
        let client = try PinnedTLSClient(evaluator: SecurityPolicy.default, settings: TrustSettings(anchors: [fixture.server.root.certificate], anchorsOnly: true))
        let connection = try await client.connect(
            host: "localhost", port: server.port, address: try SocketAddress(ipAddress: "127.0.0.1", port: server.port), group: MultiThreadedEventLoopGroup.singleton)
        defer { connection.channel.close(promise: nil) }
        let channel = connection.channel
        // s_server sends its session tickets right after the handshake (TLS 1.3); the connection stays open and idle.
        var observing = true
        for _ in 0..<500 where observing {
            observing = try await channel.eventLoop.submit { try channel.pipeline.syncOperations.handler(type: TLSAlertObserver.self).isObserving }.get()
            if observing { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(!observing, "the observer still reads (and may hold secrets) on an idle trusted connection")
        let alerts = try await channel.eventLoop.submit { try channel.pipeline.syncOperations.handler(type: TLSAlertObserver.self).alerts }.get()
        #expect(alerts == TLSAlertsSeen())
    }
}
