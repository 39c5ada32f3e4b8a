import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// A server PKI, a client PKI and the pieces both sides need.
struct MutualTLSSetup {
    let serverChain: TestChain
    let clientChain: TestChain
    let server: MutualTLSServer
    let serverTrust: ServerTrust

    init(allowedClientPins: [Pin] = []) throws {
        self.serverChain = try TestChain(host: "device.local", rootName: "Server Root")
        self.clientChain = try TestChain(host: "client-7", ipAddresses: [], leafUsage: .clientAuth, rootName: "Client Root", intermediateName: "Client Issuing CA")
        self.server = try MutualTLSServer(
            identity: try Fixtures.identity(self.serverChain.leaf, chain: [self.serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [self.clientChain.root.certificate],
            allowedClientPins: allowedClientPins
        )
        self.serverTrust = ServerTrust(certificates: [], platformRoots: Fixtures.platform([self.serverChain.root.certificate]))
    }

    func client(identity: TLSIdentity?) throws -> PinnedTLSClient {
        try PinnedTLSClient(evaluator: SecurityPolicy.default, trust: self.serverTrust, identity: identity)
    }

    /// Connects and returns what the server decided about this client.
    func serverOutcome(_ client: PinnedTLSClient, on server: MutualTLSTestServer) async throws -> Result<PinnedHandshake, PinningConnectionError>? {
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: server.port)
        do {
            let connection = try await client.connect(host: "device.local", port: server.port, address: address, group: testGroup, timeout: .seconds(30))
            connection.channel.close(promise: nil)
        } catch {
            // TLS 1.3: the client may finish before the server refuses; either way the server's verdict counts.
        }
        return await server.nextOutcome()
    }
}

@Suite("MutualTLSServer over loopback")
struct MutualTLSTests {
    @Test("a client with a .p12 identity is accepted; the server sees its validated chain and identity", .enabled(if: opensslAvailable))
    func acceptedWithPKCS12() async throws {
        let setup = try MutualTLSSetup()
        let directory = try TemporaryDirectory(prefix: "pinning-mtls")
        defer { directory.remove() }
        let cert = try directory.write("client.pem", setup.clientChain.leaf.certificatePEM)
        let key = try directory.write("client.key", setup.clientChain.leaf.privateKeyPEM)
        let cas = try directory.write("cas.pem", TestPKI.pemBundle([setup.clientChain.intermediate.certificate, setup.clientChain.root.certificate]))
        let p12 = directory.path("client.p12")
        let made = try openssl(["pkcs12", "-export", "-in", cert, "-inkey", key, "-certfile", cas, "-out", p12, "-passout", "pass:s3cret"])
        #expect(made.status == 0, "\(made.output)")
        let identity = try TLSIdentity.pkcs12(file: p12, passphrase: "s3cret")

        let server = try await MutualTLSTestServer(setup.server)
        defer { Task { await server.stop() } }
        let outcome = try await setup.serverOutcome(try setup.client(identity: identity), on: server)
        let handshake = try #require(try outcome?.get())
        #expect(handshake.peer.subject == "CN=client-7")
        #expect(handshake.peer.subjectAlternativeNames.map(\.value) == ["client-7"])
        #expect(handshake.peer.pin == Pin(spkiOf: setup.clientChain.leaf.certificate))
        #expect(handshake.peer.certificateChain == setup.clientChain.all)
        #expect(handshake.peer.sha256Fingerprint.count == 95)
        #expect(handshake.host == nil)
    }

    @Test("a client without an identity is refused")
    func refusedWithoutIdentity() async throws {
        let setup = try MutualTLSSetup()
        let server = try await MutualTLSTestServer(setup.server)
        defer { Task { await server.stop() } }
        let outcome = try await setup.serverOutcome(try setup.client(identity: nil), on: server)
        guard case .failure(let error) = try #require(outcome) else {
            Issue.record("a client without a certificate was accepted")
            return
        }
        #expect(error.code == .handshakeFailed)
    }

    @Test("an expired client certificate is refused with certificateExpired")
    func refusedExpired() async throws {
        let setup = try MutualTLSSetup()
        let expired = try TestPKI.leaf(
            "client-old",
            issuer: setup.clientChain.intermediate,
            dnsNames: ["client-old"],
            usage: .clientAuth,
            notValidBefore: Date().addingTimeInterval(-30 * 86400),
            notValidAfter: Date().addingTimeInterval(-86400)
        )
        let server = try await MutualTLSTestServer(setup.server)
        defer { Task { await server.stop() } }
        let identity = try Fixtures.identity(expired, chain: [setup.clientChain.intermediate.certificate])
        let outcome = try await setup.serverOutcome(try setup.client(identity: identity), on: server)
        guard case .failure(let error) = try #require(outcome) else {
            Issue.record("an expired client certificate was accepted")
            return
        }
        #expect(error.code == .untrusted)
        #expect(error.trustFailure?.code == .certificateExpired)
    }

    @Test("a client certificate from another CA is refused with noPathToAnchor")
    func refusedOtherCA() async throws {
        let setup = try MutualTLSSetup()
        let stranger = try TestChain(host: "client-7", ipAddresses: [], leafUsage: .clientAuth, rootName: "Other Root")
        let server = try await MutualTLSTestServer(setup.server)
        defer { Task { await server.stop() } }
        let identity = try Fixtures.identity(stranger.leaf, chain: [stranger.intermediate.certificate])
        let outcome = try await setup.serverOutcome(try setup.client(identity: identity), on: server)
        guard case .failure(let error) = try #require(outcome) else {
            Issue.record("a client of another CA was accepted")
            return
        }
        #expect(error.trustFailure?.code == .noPathToAnchor)
    }

    @Test("a server-auth-only certificate is refused for client authentication")
    func refusedServerAuthOnly() async throws {
        let setup = try MutualTLSSetup()
        let serverOnly = try TestPKI.leaf("client-7", issuer: setup.clientChain.intermediate, dnsNames: ["client-7"], usage: .serverAuth)
        let server = try await MutualTLSTestServer(setup.server)
        defer { Task { await server.stop() } }
        let identity = try Fixtures.identity(serverOnly, chain: [setup.clientChain.intermediate.certificate])
        let outcome = try await setup.serverOutcome(try setup.client(identity: identity), on: server)
        guard case .failure(let error) = try #require(outcome) else {
            Issue.record("a serverAuth-only certificate was accepted as a client")
            return
        }
        #expect(error.trustFailure?.code == .extendedKeyUsage)
    }

    @Test("the client SPKI allow-list: a listed client passes, another client of the same CA is refused")
    func clientAllowList() async throws {
        let base = try MutualTLSSetup()
        let setup = try MutualTLSSetup(allowedClientPins: [])
        _ = base
        let allowed = try MutualTLSServer(
            identity: setup.server.identity,
            clientCertificateAuthorities: [setup.clientChain.root.certificate],
            allowedClientPins: [Pin(spkiOf: setup.clientChain.leaf.certificate)]
        )
        let server = try await MutualTLSTestServer(allowed)
        defer { Task { await server.stop() } }
        let listed = try Fixtures.identity(setup.clientChain.leaf, chain: [setup.clientChain.intermediate.certificate])
        let ok = try await setup.serverOutcome(try setup.client(identity: listed), on: server)
        #expect((try? ok?.get()) != nil)
        let other = try TestPKI.leaf("client-8", issuer: setup.clientChain.intermediate, dnsNames: ["client-8"], usage: .clientAuth)
        let refused = try await setup.serverOutcome(try setup.client(identity: try Fixtures.identity(other, chain: [setup.clientChain.intermediate.certificate])), on: server)
        guard case .failure(let error) = try #require(refused) else {
            Issue.record("a client outside the allow-list was accepted")
            return
        }
        #expect(error.trustFailure?.code == .pinMismatch)
    }

    @Test("server resumption never skips client validation: openssl s_client -reconnect gets a full, validated handshake every time", .enabled(if: opensslAvailable))
    func serverResumption() async throws {
        let setup = try MutualTLSSetup()
        let directory = try TemporaryDirectory(prefix: "pinning-resume")
        defer { directory.remove() }
        let cert = try directory.write("client.pem", setup.clientChain.leaf.certificatePEM)
        let intermediates = try directory.write("intermediates.pem", setup.clientChain.intermediate.certificatePEM)
        let key = try directory.write("client.key", setup.clientChain.leaf.privateKeyPEM)
        let server = try await MutualTLSTestServer(setup.server)
        defer { Task { await server.stop() } }
        let port = server.port
        for version in ["-tls1_2", "-tls1_3"] {
            let result = try await Task.detached {
                try openssl(["s_client", "-connect", "127.0.0.1:\(port)", "-cert", cert, "-cert_chain", intermediates, "-key", key, "-reconnect", version, "-noservername"], input: "", timeout: 20)
            }.value
            var accepted = 0
            var refusals: [String] = []
            while let outcome = await server.nextOutcome(within: 1) {
                switch outcome {
                case .success: accepted += 1
                case .failure(let error): refusals.append(error.description)
                }
            }
            let reused = result.output.components(separatedBy: "Reused,").count - 1
            let fresh = result.output.components(separatedBy: "New,").count - 1
            #expect(reused == 0, "\(version): a session was resumed:\n\(result.output)")
            #expect(fresh == 6, "\(version): \(result.output.prefix(4000))")
            if version == "-tls1_2" {
                // TLS 1.2: each handshake completes on both sides, and each was validated by our callback.
                #expect(accepted == fresh, "\(version): \(accepted) validations for \(fresh) handshakes; refusals: \(refusals)")
            } else {
                // TLS 1.3: s_client drops each connection as soon as its own side is done, before the server has
                // finished (EOF during handshake), so the server never grants anything; no session is reused.
                #expect(accepted + refusals.count == fresh, "\(version): \(refusals)")
            }
        }

        // Control: the same probe does see resumption against a NIOSSL server sharing one context, so the zero
        // above is a property of MutualTLSServer (a fresh context per connection), not of the probe.
        let plain = try await PlainTLSServer(identity: setup.server.identity)
        defer { Task { await plain.stop() } }
        let plainPort = plain.port
        let control = try await Task.detached {
            try openssl(["s_client", "-connect", "127.0.0.1:\(plainPort)", "-reconnect", "-tls1_2", "-noservername"], input: "", timeout: 20)
        }.value
        #expect(control.output.components(separatedBy: "Reused,").count - 1 >= 4, "\(control.output.prefix(4000))")
    }
}
