import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
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
            identity: try self.serverChain.leaf.tlsIdentity(chain: [self.serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [self.clientChain.root.certificate],
            clientRule: .builtIn(pins: allowedClientPins)
        )
        self.serverTrust = ServerTrust(certificates: [], platformRoots: Fixtures.platform([self.serverChain.root.certificate]))
    }

    func client(identity: TLSIdentity?) throws -> PinnedTLSClient {
        try PinnedTLSClient(evaluator: SecurityPolicy.default, settings: self.serverTrust.clientSettings, identity: identity)
    }

    /// The client's certificate, its intermediate and its key as PEM files in `directory`, for `openssl s_client`'s
    /// `-cert`, `-cert_chain` and `-key`.
    func clientFiles(in directory: TemporaryDirectory) throws -> (cert: String, intermediates: String, key: String) {
        (
            try directory.write("client.pem", self.clientChain.leaf.certificatePEM),
            try directory.write("intermediates.pem", self.clientChain.intermediate.certificatePEM),
            try directory.write("client.key", self.clientChain.leaf.privateKeyPEM)
        )
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
        let made = try await openssl(["pkcs12", "-export", "-in", cert, "-inkey", key, "-certfile", cas, "-out", p12, "-passout", "pass:s3cret"])
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
        let identity = try expired.tlsIdentity(chain: [setup.clientChain.intermediate.certificate])
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
        let identity = try stranger.leaf.tlsIdentity(chain: [stranger.intermediate.certificate])
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
        let identity = try serverOnly.tlsIdentity(chain: [setup.clientChain.intermediate.certificate])
        let outcome = try await setup.serverOutcome(try setup.client(identity: identity), on: server)
        guard case .failure(let error) = try #require(outcome) else {
            Issue.record("a serverAuth-only certificate was accepted as a client")
            return
        }
        #expect(error.trustFailure?.code == .extendedKeyUsage)
    }

    @Test(
        "evaluationCache: a device's second full handshake is answered from the cache with the same validated chain; an expired device is refused every time (refusals are never stored); a server with a clientCheck still runs it on every connection"
    )
    func clientVerdictCache() async throws {
        let setup = try MutualTLSSetup()
        let cache = EvaluationCache()
        let mtls = try MutualTLSServer(
            identity: setup.server.identity,
            clientCertificateAuthorities: [setup.clientChain.root.certificate],
            clientRule: .builtIn(cache: cache)
        )
        let server = try await MutualTLSTestServer(mtls)
        defer { Task { await server.stop() } }
        let device = try setup.client(identity: try setup.clientChain.leaf.tlsIdentity(chain: [setup.clientChain.intermediate.certificate]))
        let first = try #require(try await setup.serverOutcome(device, on: server)?.get())
        #expect(cache.statistics.hits == 0 && cache.count == 1, "\(String(describing: cache.statistics))")
        let second = try #require(try await setup.serverOutcome(device, on: server)?.get())
        #expect(cache.statistics.hits == 1, "\(String(describing: cache.statistics))")
        #expect(second.peer.certificateChain == first.peer.certificateChain && second.peer.subject == "CN=client-7")

        let expired = try TestPKI.leaf(
            "client-old", issuer: setup.clientChain.intermediate, dnsNames: ["client-old"], usage: .clientAuth,
            notValidBefore: Date().addingTimeInterval(-7200), notValidAfter: Date().addingTimeInterval(-3600))
        let old = try setup.client(identity: try expired.tlsIdentity(chain: [setup.clientChain.intermediate.certificate]))
        for _ in 0..<2 {
            guard case .failure(let error) = try #require(try await setup.serverOutcome(old, on: server)) else {
                Issue.record("an expired device was accepted")
                return
            }
            #expect(error.trustFailure?.code == .certificateExpired)
        }
        #expect(cache.count == 1 && cache.statistics.hits == 1, "refusals are not stored: \(String(describing: cache.statistics))")

        let checks = TestCounter()
        var checkedConfiguration = MutualTLSServer.Configuration(
            identity: setup.server.identity,
            clientCertificateAuthorities: [setup.clientChain.root.certificate],
            clientRule: .builtIn(cache: cache)
        )
        checkedConfiguration.clientCheck = { _, _ in
            checks.increment()
            return nil
        }
        let checked = try MutualTLSServer(configuration: checkedConfiguration)
        let checkedServer = try await MutualTLSTestServer(checked)
        defer { Task { await checkedServer.stop() } }
        for _ in 0..<2 {
            #expect((try? await setup.serverOutcome(device, on: checkedServer)?.get()) != nil)
        }
        #expect(checks.value == 2, "the clientCheck ran on every connection")
    }

    @Test("the client SPKI allow-list: a listed client passes, another client of the same CA is refused")
    func clientAllowList() async throws {
        let base = try MutualTLSSetup()
        let setup = try MutualTLSSetup(allowedClientPins: [])
        _ = base
        let allowed = try MutualTLSServer(
            identity: setup.server.identity,
            clientCertificateAuthorities: [setup.clientChain.root.certificate],
            clientRule: .builtIn(pins: [Pin(spkiOf: setup.clientChain.leaf.certificate)])
        )
        // How clients are judged, as a value: only the client CAs, for client authentication, no fixed clock.
        #expect(allowed.clientSettings.anchors == [setup.clientChain.root.certificate] && allowed.clientSettings.anchorsOnly)
        #expect(allowed.clientSettings.purpose == .clientAuthentication && allowed.clientSettings.trust(for: []).validationTime == nil)
        let server = try await MutualTLSTestServer(allowed)
        defer { Task { await server.stop() } }
        let listed = try setup.clientChain.leaf.tlsIdentity(chain: [setup.clientChain.intermediate.certificate])
        let ok = try await setup.serverOutcome(try setup.client(identity: listed), on: server)
        #expect((try? ok?.get()) != nil)
        let other = try TestPKI.leaf("client-8", issuer: setup.clientChain.intermediate, dnsNames: ["client-8"], usage: .clientAuth)
        let refused = try await setup.serverOutcome(try setup.client(identity: try other.tlsIdentity(chain: [setup.clientChain.intermediate.certificate])), on: server)
        guard case .failure(let error) = try #require(refused) else {
            Issue.record("a client outside the allow-list was accepted")
            return
        }
        #expect(error.trustFailure?.code == .pinMismatch)
    }

    @Test(
        "server resumption: a session saved by openssl s_client -sess_out is resumed by -sess_in (TLS 1.2 and 1.3), and every connection, resumed or not, carries the client our policy validated",
        .enabled(if: opensslAvailable))
    func serverResumption() async throws {
        let setup = try MutualTLSSetup()
        let directory = try TemporaryDirectory(prefix: "pinning-resume")
        defer { directory.remove() }
        let (cert, intermediates, key) = try setup.clientFiles(in: directory)
        let server = try await ResumptionTestServer(setup.server)
        defer { Task { await server.stop() } }
        for version in ["-tls1_2", "-tls1_3"] {
            let session = directory.path("session\(version).pem")
            for round in 0..<4 {
                let output = try await Self.sessionProbe(port: server.port, cert: cert, intermediates: intermediates, key: key, version: version, session: session, reuse: round > 0)
                #expect(output.contains(round == 0 ? "New," : "Reused,"), "\(version) round \(round): \(output.prefix(3000))")
                #expect(output.contains("client CN=client-7"), "\(version) round \(round): \(output.suffix(1500))")
                let outcome = await server.log.nextOutcome()
                guard case .success(let handshake) = outcome else {
                    Issue.record("\(version) round \(round): \(String(describing: outcome))")
                    continue
                }
                #expect(handshake.peer.subject == "CN=client-7")
                #expect(handshake.peer.certificateChain == setup.clientChain.all)
            }
        }
    }

    @Test(
        "an event that follows the handshake event while a resumed session is re-checked in a task reaches the application after it, not dropped (TLS 1.2 and 1.3)",
        .enabled(if: opensslAvailable), arguments: ["-tls1_2", "-tls1_3"])
    func eventsBehindResumedSessionCheck(_ version: String) async throws {
        let setup = try MutualTLSSetup()
        let directory = try TemporaryDirectory(prefix: "pinning-resume-events")
        defer { directory.remove() }
        let (cert, intermediates, key) = try setup.clientFiles(in: directory)
        var configuration = MutualTLSServer.Configuration(
            identity: setup.server.identity, clientCertificateAuthorities: [setup.clientChain.root.certificate], clientRule: .builtIn())
        // A clientCheck sends the resumed session's re-check to a task, so the handler holds what follows meanwhile.
        configuration.clientCheck = { _, _ in nil }
        let server = try MutualTLSServer(configuration: configuration)
        let seen = NIOLockedValueBox<[[String]]>([])
        let http = try await LoopbackHTTPSServer(
            tls: { pipeline in
                _ = try server.addHandlers(to: pipeline)
                let handshake = try pipeline.handler(type: PinningHandshakeHandler.self)
                try pipeline.addHandler(MarkerBehindHandshake(), position: .before(handshake))
                try pipeline.addHandler(EventOrderRecorder(seen: seen))
            },
            respond: { _, peer in SimpleHTTPResponse(status: .ok, body: Array("client \(peer?.subject ?? "none")\n".utf8)) }
        )
        defer { Task { await http.stop() } }
        let session = directory.path("session\(version).pem")
        for round in 0..<2 {
            let output = try await Self.sessionProbe(port: http.port, cert: cert, intermediates: intermediates, key: key, version: version, session: session, reuse: round > 0)
            #expect(output.contains(round == 0 ? "New," : "Reused,"), "round \(round): \(output.prefix(3000))")
            #expect(output.contains("client CN=client-7"), "round \(round): \(output.suffix(1500))")
        }
        // Each connection's recorder hands in its list when the channel goes inactive, just after the response.
        for _ in 0..<100 where seen.withLockedValue({ $0.count }) < 2 { try await Task.sleep(for: .milliseconds(50)) }
        #expect(seen.withLockedValue { $0 } == [["handshake", "marker"], ["handshake", "marker"]])
    }

    /// Runs `openssl s_client` once (GET, then waits for the server to close), saving or reusing a session.
    static func sessionProbe(port: Int, cert: String, intermediates: String, key: String, version: String, session: String, reuse: Bool) async throws -> String {
        try await openssl(
            [
                "s_client", "-connect", "127.0.0.1:\(port)", "-cert", cert, "-cert_chain", intermediates, "-key", key, version, "-noservername", "-ign_eof",
                reuse ? "-sess_in" : "-sess_out", session,
            ],
            input: "GET / HTTP/1.0\r\n\r\n",
            timeout: 20
        ).output
    }

    @Test(
        "a session made while the client certificate was valid is refused on resumption once the validation time is past its notAfter; resumed while valid, it carries the validated client; the same with an evaluation cache (which answers the valid resumption)",
        .enabled(if: opensslAvailable),
        arguments: ["-tls1_2", "-tls1_3"], [false, true]
    )
    func resumptionRechecksExpiry(_ version: String, cached: Bool) async throws {
        let setup = try MutualTLSSetup()
        let now = Date()
        let leaf = try TestPKI.leaf(
            "client-soon",
            issuer: setup.clientChain.intermediate,
            dnsNames: ["client-soon"],
            usage: .clientAuth,
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(86400)
        )
        let clock = TestClock(now)
        let cache = cached ? EvaluationCache(maximumEntries: 16, timeToLive: .seconds(7 * 86400), clock: { clock.now }) : nil
        let mtls = try MutualTLSServer(
            configuration: MutualTLSServer.Configuration(
                identity: setup.server.identity, clientCertificateAuthorities: [setup.clientChain.root.certificate], clientRule: .builtIn(cache: cache)),
            clock: { clock.now }
        )
        let directory = try TemporaryDirectory(prefix: "pinning-resume-expiry")
        defer { directory.remove() }
        let cert = try directory.write("client.pem", leaf.certificatePEM)
        let intermediates = try directory.write("intermediates.pem", setup.clientChain.intermediate.certificatePEM)
        let key = try directory.write("client.key", leaf.privateKeyPEM)
        let session = directory.path("session.pem")
        let server = try await ResumptionTestServer(mtls)
        defer { Task { await server.stop() } }

        let first = try await Self.sessionProbe(port: server.port, cert: cert, intermediates: intermediates, key: key, version: version, session: session, reuse: false)
        #expect(first.contains("New,"), "\(first.prefix(3000))")
        let full = try #require(try await server.log.nextOutcome()?.get(), "\(first.prefix(3000))")
        #expect(full.peer.subject == "CN=client-soon")

        // Still valid: the session resumes and the channel carries the re-validated client.
        let second = try await Self.sessionProbe(port: server.port, cert: cert, intermediates: intermediates, key: key, version: version, session: session, reuse: true)
        #expect(second.contains("Reused,"), "\(second.prefix(3000))")
        #expect(second.contains("CN=client-soon"), "the reply names the client: \(second.suffix(1500))")
        let resumed = try #require(try await server.log.nextOutcome()?.get())
        #expect(resumed.peer.subject == "CN=client-soon")
        #expect(resumed.peer.certificateChain == [leaf.certificate, setup.clientChain.intermediate.certificate, setup.clientChain.root.certificate])
        if let cache {
            #expect(cache.statistics.hits == 1, "the resumed session's chain was answered from the cache: \(String(describing: cache.statistics))")
        }

        // A day later the certificate has expired: the same session is resumed by TLS, and refused by us.
        clock.now = now.addingTimeInterval(2 * 86400)
        let third = try await Self.sessionProbe(port: server.port, cert: cert, intermediates: intermediates, key: key, version: version, session: session, reuse: true)
        #expect(third.contains("Reused,"), "\(third.prefix(3000))")
        #expect(!third.contains("CN=client-soon"), "no reply after the refusal: \(third.suffix(1500))")
        guard case .failure(let error) = try #require(await server.log.nextOutcome()) else {
            Issue.record("\(version): a resumed session of an expired client certificate was accepted")
            return
        }
        #expect(error.trustFailure?.code == .certificateExpired, "\(error.debugDescription)")
        if let cache {
            #expect(cache.statistics.expirations == 1, "the stored verdict stopped counting at the notAfter: \(String(describing: cache.statistics))")
        }
    }

    @Test("the ClientCheck hook (where revocation plugs in) runs again on resumption: a client refused after its session was made cannot resume it", .enabled(if: opensslAvailable))
    func resumptionRunsClientCheck() async throws {
        let setup = try MutualTLSSetup()
        let revoked = TestFlag()
        var configuration = MutualTLSServer.Configuration(identity: setup.server.identity, clientCertificateAuthorities: [setup.clientChain.root.certificate])
        configuration.clientCheck = { peer, resumed in revoked.isSet ? "\(peer.subject) is revoked (resumed: \(resumed))" : nil }
        let mtls = try MutualTLSServer(configuration: configuration)
        let directory = try TemporaryDirectory(prefix: "pinning-resume-check")
        defer { directory.remove() }
        let (cert, intermediates, key) = try setup.clientFiles(in: directory)
        let session = directory.path("session.pem")
        let server = try await ResumptionTestServer(mtls)
        defer { Task { await server.stop() } }
        _ = try await Self.sessionProbe(port: server.port, cert: cert, intermediates: intermediates, key: key, version: "-tls1_3", session: session, reuse: false)
        #expect((try? await server.log.nextOutcome()?.get()) != nil)
        revoked.set()
        let output = try await Self.sessionProbe(port: server.port, cert: cert, intermediates: intermediates, key: key, version: "-tls1_3", session: session, reuse: true)
        #expect(output.contains("Reused,"), "\(output.prefix(3000))")
        guard case .failure(let error) = try #require(await server.log.nextOutcome()) else {
            Issue.record("a resumed session was accepted although the client check refuses the client")
            return
        }
        #expect(error.code == .refusedByCheck)
        #expect(error.message == "the client CN=client-7 was refused on resuming its session: CN=client-7 is revoked (resumed: true)")
    }

    @Test(
        "CRLs (issue 14): a client revoked after its session was made is refused on resuming it, once the CRL file changes; other clients are not; the same with an evaluation cache",
        .enabled(if: opensslAvailable),
        arguments: ["-tls1_2", "-tls1_3"], [false, true]
    )
    func resumptionRechecksRevocation(_ version: String, cached: Bool) async throws {
        let setup = try MutualTLSSetup()
        let directory = try TemporaryDirectory(prefix: "pinning-resume-crl")
        defer { directory.remove() }
        let issuer = setup.clientChain.intermediate
        func publish(revoking revoked: [TestIdentity], number: Int) throws {
            let crl = try TestCRL(
                issuer: issuer,
                entries: revoked.map { .init(serialNumber: $0.certificate.serialNumber, revocationDate: Date().addingTimeInterval(-1), reason: .keyCompromise) },
                number: number,
                thisUpdate: Date().addingTimeInterval(-60),
                nextUpdate: Date().addingTimeInterval(3600)
            )
            try directory.write("devices.crl.pem", crl.pem)
        }
        try publish(revoking: [], number: 1)
        let revocation = try RevocationSource.watching([directory.path("devices.crl.pem")], interval: .seconds(3600))
        let cache = cached ? EvaluationCache() : nil
        var configuration = MutualTLSServer.Configuration(
            identity: setup.server.identity, clientCertificateAuthorities: [setup.clientChain.root.certificate], clientRule: .builtIn(cache: cache))
        configuration.revocation = revocation
        let mtls = try MutualTLSServer(configuration: configuration)
        let cert = try directory.write("client.pem", setup.clientChain.leaf.certificatePEM)
        let intermediates = try directory.write("intermediates.pem", issuer.certificatePEM)
        let key = try directory.write("client.key", setup.clientChain.leaf.privateKeyPEM)
        let session = directory.path("session.pem")
        let server = try await ResumptionTestServer(mtls)
        defer { Task { await server.stop() } }

        let first = try await Self.sessionProbe(port: server.port, cert: cert, intermediates: intermediates, key: key, version: version, session: session, reuse: false)
        #expect(first.contains("New,"), "\(first.prefix(3000))")
        #expect((try? await server.log.nextOutcome()?.get()) != nil)
        if let cache {
            // Resumed under the same CRL: answered from the cache.
            let again = try await Self.sessionProbe(port: server.port, cert: cert, intermediates: intermediates, key: key, version: version, session: session, reuse: true)
            #expect(again.contains("Reused,") && again.contains("CN=client-7"), "\(again.suffix(1500))")
            #expect((try? await server.log.nextOutcome()?.get()) != nil)
            #expect(cache.statistics.hits == 1, "\(String(describing: cache.statistics))")
        }

        // The CRL now lists the client; the source reads it (the polling would, at its next interval).
        try publish(revoking: [setup.clientChain.leaf], number: 2)
        guard case .reloaded(crls: 1) = revocation.reloadIfChanged() else {
            Issue.record("the changed CRL file was not read")
            return
        }
        let output = try await Self.sessionProbe(port: server.port, cert: cert, intermediates: intermediates, key: key, version: version, session: session, reuse: true)
        #expect(output.contains("Reused,"), "\(output.prefix(3000))")
        #expect(!output.contains("CN=client-7"), "no reply after the refusal: \(output.suffix(1500))")
        guard case .failure(let error) = try #require(await server.log.nextOutcome()) else {
            Issue.record("\(version): a resumed session of a revoked client was accepted")
            return
        }
        #expect(error.trustFailure?.code == .revoked, "\(error.debugDescription)")
        // Another client of the same CA still gets in, with a full handshake.
        let other = try TestPKI.leaf("client-8", issuer: issuer, dnsNames: ["client-8"], usage: .clientAuth)
        let otherCert = try directory.write("other.pem", other.certificatePEM)
        let otherKey = try directory.write("other.key", other.privateKeyPEM)
        let fresh = try await Self.sessionProbe(
            port: server.port, cert: otherCert, intermediates: intermediates, key: otherKey, version: version, session: directory.path("other-session.pem"), reuse: false)
        #expect(fresh.contains("CN=client-8"), "\(fresh.suffix(1500))")
        #expect((try? await server.log.nextOutcome()?.get())?.peer.subject == "CN=client-8")
    }
}

/// A settable instant for MutualTLSServer's SPI clock.
final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Date
    init(_ value: Date) { self.value = value }
    var now: Date {
        get { self.lock.withLock { self.value } }
        set { self.lock.withLock { self.value = newValue } }
    }
}

final class TestCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { self.lock.withLock { self.count } }
    func increment() { self.lock.withLock { self.count += 1 } }
}

final class TestFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { self.lock.withLock { self.value } }
    func set() { self.lock.withLock { self.value = true } }
}

/// A MutualTLSServer with an HTTP responder (the reply names the client) that logs each connection's outcome.
final class ResumptionTestServer: Sendable {
    let http: LoopbackHTTPSServer
    let log: MutualTLSTestLog
    var port: Int { self.http.port }

    init(_ server: MutualTLSServer) async throws {
        let log = MutualTLSTestLog()
        self.log = log
        self.http = try await LoopbackHTTPSServer(
            tls: { pipeline in
                let handshake = try server.addHandlers(to: pipeline)
                handshake.whenComplete { result in
                    log.outcomes.append(result.mapError { ($0 as? PinningConnectionError) ?? PinningConnectionError(code: .handshakeFailed, host: nil, message: "\($0)") })
                }
            },
            respond: { head, peer in SimpleHTTPResponse(status: .ok, body: Array("client \(peer?.subject ?? "none")\n".utf8)) }
        )
    }

    func stop() async { await self.http.stop() }
}

final class MutualTLSTestLog: Sendable {
    let outcomes = OutcomeLog()

    func nextOutcome(within seconds: Double = 5) async -> Result<PinnedHandshake, PinningConnectionError>? {
        await self.outcomes.next(within: seconds)
    }
}

/// Fires a marker event right behind the TLS handshake event, as a peer's half-closure or an idle-state event
/// can follow it before the application has seen the handshake.
final class MarkerBehindHandshake: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    struct Marker {}

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        context.fireUserInboundEventTriggered(event)
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls {
            context.fireUserInboundEventTriggered(Marker())
        }
    }
}

/// Records, in order, the handshake and marker events that reach the application, and hands the list in when the
/// connection closes.
final class EventOrderRecorder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let seen: NIOLockedValueBox<[[String]]>
    private var events: [String] = []

    init(seen: NIOLockedValueBox<[[String]]>) {
        self.seen = seen
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls { self.events.append("handshake") }
        if event is MarkerBehindHandshake.Marker { self.events.append("marker") }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let events = self.events
        self.seen.withLockedValue { $0.append(events) }
        context.fireChannelInactive()
    }
}
