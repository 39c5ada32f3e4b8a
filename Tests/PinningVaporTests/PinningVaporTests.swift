import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import PinningVapor
import Testing
import Vapor
import X509

/// Refusals reported by the server's `onRefusal`.
final class Refusals: Sendable {
    private let box = NIOLockedValueBox<[PinningConnectionError]>([])
    var all: [PinningConnectionError] { self.box.withLockedValue { $0 } }
    func append(_ error: PinningConnectionError) { self.box.withLockedValue { $0.append(error) } }
}

/// The clients the handlers saw.
final class Seen: Sendable {
    private let box = NIOLockedValueBox<[String]>([])
    var all: [String] { self.box.withLockedValue { $0 } }
    func append(_ subject: String) { self.box.withLockedValue { $0.append(subject) } }
}

@Suite("Vapor: mutual TLS with the full client policy, and app.client on the pinned client (loopback)", .timeLimit(.minutes(4)))
final class PinningVaporTests: Sendable {
    let serverChain: TestChain
    let clientChain: TestChain
    let directory: TemporaryDirectory

    init() throws {
        self.serverChain = try TestChain(host: "device.local", rootName: "Server Root")
        // Non-ASCII in the device's subject: it must reach the handler intact.
        self.clientChain = try TestChain.device(rootName: "Client Root")
        self.directory = try TemporaryDirectory()
    }

    /// Each test has its own instance, so its own directory, removed when the test ends (passed, failed or thrown).
    deinit {
        self.directory.remove()
    }

    /// A Vapor application on 127.0.0.1:0 with `configure` applied to its HTTP server configuration; `body` gets
    /// the bound port. The application is shut down afterwards.
    func withApp(
        configure: (inout HTTPServer.Configuration) -> Void,
        routes: (Application) -> Void,
        _ body: (Int) async throws -> Void
    ) async throws {
        let app = try await Application.make(.testing)
        app.logger.logLevel = .critical
        app.http.server.configuration.hostname = "127.0.0.1"
        app.http.server.configuration.port = 0
        configure(&app.http.server.configuration)
        routes(app)
        do {
            try await app.server.start(address: .hostname("127.0.0.1", port: 0))
            let port = try #require(app.http.server.shared.localAddress?.port)
            try await body(port)
        } catch {
            await app.server.shutdown()
            try await app.asyncShutdown()
            throw error
        }
        await app.server.shutdown()
        try await app.asyncShutdown()
    }

    /// ``withApp(configure:routes:_:)`` with `server`'s mutual TLS and the test routes.
    func withMutualTLSApp(
        _ server: MutualTLSServer,
        mode: ClientCertificateMode = .require,
        refusals: Refusals = Refusals(),
        seen: Seen,
        _ body: (Int) async throws -> Void
    ) async throws {
        let configure: (inout HTTPServer.Configuration) -> Void = { $0.useMutualTLS(server, mode: mode, onRefusal: refusals.append) }
        try await self.withApp(configure: configure, routes: self.routes(seen: seen), body)
    }

    func mutualTLSServer(revocation: RevocationSource? = nil) throws -> MutualTLSServer {
        var configuration = MutualTLSServer.Configuration(
            identity: try self.serverChain.leaf.tlsIdentity(chain: [self.serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [self.clientChain.root.certificate])
        configuration.revocation = revocation
        return try MutualTLSServer(configuration: configuration)
    }

    func routes(seen: Seen) -> (Application) -> Void {
        { app in
            app.get("open") { req -> String in
                "open to \(req.authenticatedClient?.subject ?? "anyone")"
            }
            app.grouped(MutualTLSMiddleware()).get("me") { req -> String in
                let client = try #require(req.authenticatedClient)
                seen.append(client.subject)
                return "hello \(client.subject) via \(client.certificateChain.count) certificates"
            }
        }
    }

    /// curl (software we did not write) to `path` over the loopback, with a client identity from `chain` or none.
    /// The time limit only bounds a hang: in CI the whole suite shares 2 cores, and a handshake whose verification
    /// task waits behind the CPU-bound limbo tests once took longer than 20 s.
    func curl(
        port: Int,
        path: String,
        identity chain: TestChain?,
        leaf: TestIdentity? = nil,
        issuer: TestIdentity? = nil,
        extra: [String] = []
    ) async throws -> TestTools.ProcessResult {
        let ca = try self.directory.write("server-root.pem", self.serverChain.root.certificatePEM)
        var arguments = ["-sS", "--max-time", "120", "--cacert", ca, "--resolve", "device.local:\(port):127.0.0.1", "-w", "\n%{http_code}"]
        if let chain {
            let device = leaf ?? chain.leaf
            let name = UUID().uuidString
            let cert = try self.directory.write("\(name).pem", TestPKI.pemBundle([device.certificate, (issuer ?? chain.intermediate).certificate]))
            let key = try self.directory.write("\(name).key", device.privateKeyPEM)
            arguments += ["--cert", cert, "--key", key]
        }
        return try await TestTools.run("/usr/bin/curl", arguments + extra + ["https://device.local:\(port)/\(path)"])
    }

    @Test("a device with a valid identity is served (curl); the handler sees the validated chain up to the client CA")
    func deviceServed() async throws {
        let seen = Seen()
        let refusals = Refusals()
        let server = try self.mutualTLSServer()
        try await self.withMutualTLSApp(server, refusals: refusals, seen: seen) { port in
            let result = try await self.curl(port: port, path: "me", identity: self.clientChain)
            #expect(result.status == 0, "\(result)")
            // Leaf, intermediate and the client root that anchored it: the path the policy validated.
            #expect(result.stdout == "hello CN=gerät-7 via 3 certificates\n200", "\(result)")
            // A device offering h2 (curl's default with TLS) is answered over HTTP/1.1, with its identity: Vapor
            // does not hand the client chain to HTTP/2 requests, so useMutualTLS does not offer h2.
            let h2 = try await self.curl(port: port, path: "me", identity: self.clientChain, extra: ["--http2", "-w", "\n%{http_code} %{http_version}"])
            #expect(h2.stdout == "hello CN=gerät-7 via 3 certificates\n200 1.1", "\(h2)")
        }
        #expect(seen.all == ["CN=gerät-7", "CN=gerät-7"])
        #expect(refusals.all.isEmpty)
    }

    @Test("no certificate, another CA's device, a revoked device: refused at the handshake, the handler never runs")
    func refusedDevices() async throws {
        let seen = Seen()
        let refusals = Refusals()
        let crl = try TestCRL.revoking(self.clientChain.leaf, issuer: self.clientChain.intermediate)
        let revocation = RevocationSource(policy: RevocationPolicy(crls: try CertificateRevocationList.read(crl.der), mode: .hard, scope: .leaf))
        let server = try self.mutualTLSServer(revocation: revocation)
        let other = try TestChain.device(rootName: "Other Root")
        let sibling = try TestPKI.leaf("device-8", issuer: self.clientChain.intermediate, usage: .clientAuth)
        try await self.withMutualTLSApp(server, refusals: refusals, seen: seen) { port in
            let none = try await self.curl(port: port, path: "me", identity: nil)
            #expect(none.status != 0, "\(none)")
            let foreign = try await self.curl(port: port, path: "me", identity: other)
            #expect(foreign.status != 0, "\(foreign)")
            let revoked = try await self.curl(port: port, path: "me", identity: self.clientChain)
            #expect(revoked.status != 0, "\(revoked)")
            // Another device of the same CA, not on the CRL, is served by the same server.
            let served = try await self.curl(port: port, path: "me", identity: self.clientChain, leaf: sibling)
            #expect(served.stdout == "hello CN=device-8 via 3 certificates\n200", "\(served)")
        }
        #expect(seen.all == ["CN=device-8"])
        // No certificate fails in BoringSSL before any callback; the other two are the policy's refusals.
        #expect(refusals.all.map { $0.trustFailure?.code } == [.noPathToAnchor, .revoked], "\(refusals.all)")
    }

    @Test(
        "a SecurityPolicy judges the clients (clientEvaluator): the pinned CA's device is served, from the cache the second time; another CA of the same root and a serverAuth-only certificate are refused"
    )
    func securityPolicyJudgesClients() async throws {
        let seen = Seen()
        let refusals = Refusals()
        let identity = try self.serverChain.leaf.tlsIdentity(chain: [self.serverChain.intermediate.certificate])
        // AFSecurityPolicy's key pinning for clients: only devices under this issuing CA, although the server
        // accepts the whole client root.
        let policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: self.clientChain.intermediate.certificate)])
        let cache = EvaluationCache()
        let server = try MutualTLSServer(
            identity: identity,
            clientCertificateAuthorities: [self.clientChain.root.certificate],
            clientRule: .evaluator(CachingTrustEvaluator(policy, cache: cache))
        )
        let otherCA = try TestPKI.intermediate("Other Issuing CA", issuer: self.clientChain.root)
        let outsider = try TestPKI.leaf("device-9", issuer: otherCA, usage: .clientAuth)
        let serverOnly = try TestPKI.leaf("device-10", issuer: self.clientChain.intermediate, usage: .serverAuth)
        try await self.withMutualTLSApp(server, refusals: refusals, seen: seen) { port in
            for _ in 0..<2 {
                let served = try await self.curl(port: port, path: "me", identity: self.clientChain)
                #expect(served.stdout == "hello CN=gerät-7 via 3 certificates\n200", "\(served)")
            }
            let foreign = try await self.curl(port: port, path: "me", identity: self.clientChain, leaf: outsider, issuer: otherCA)
            #expect(foreign.status != 0, "\(foreign)")
            // The trust handed to the evaluator carries the clientAuth purpose: the policy cannot forget it.
            let wrongPurpose = try await self.curl(port: port, path: "me", identity: self.clientChain, leaf: serverOnly)
            #expect(wrongPurpose.status != 0, "\(wrongPurpose)")
        }
        #expect(seen.all == ["CN=gerät-7", "CN=gerät-7"])
        #expect(refusals.all.map { $0.trustFailure?.code } == [.pinMismatch, .extendedKeyUsage], "\(refusals.all)")
        // The device's second connection was answered from the evaluator's cache; refusals are never stored.
        #expect(cache.statistics.hits == 1, "\(cache.statistics)")
        // allowInvalidCertificates would let in clients no client CA vouches for: refused when the server is made.
        var relaxed = SecurityPolicy(pinningMode: .none)
        relaxed.allowInvalidCertificates = true
        #expect(throws: MutualTLSServer.ConfigurationError.self) {
            try MutualTLSServer(identity: identity, clientCertificateAuthorities: [self.clientChain.root.certificate], clientRule: .evaluator(relaxed))
        }
        #expect(throws: MutualTLSServer.ConfigurationError.self) {
            try MutualTLSServer(
                identity: identity, clientCertificateAuthorities: [self.clientChain.root.certificate],
                clientRule: .evaluator(CachingTrustEvaluator(relaxed, cache: EvaluationCache())))
        }
        // (Pins or a cache beside an evaluator cannot be written any more: the rule is one ClientRule.)
    }

    @Test("an evaluator of the user's that trusts a chain without validating it (allowInvalidCertificates inside) cannot widen what the server accepts: refused with insecurePolicy")
    func evaluatorCannotWiden() async throws {
        /// Hides its SecurityPolicy from the server's check when the server is made, as any composition may.
        struct Composed: ServerTrustEvaluating {
            let policy: SecurityPolicy
            func evaluate(_ trust: ServerTrust, forDomain domain: String?) async -> TrustEvaluation {
                await self.policy.evaluate(trust, forDomain: domain)
            }
        }
        var relaxed = SecurityPolicy(pinningMode: .none)
        relaxed.allowInvalidCertificates = true
        let seen = Seen()
        let refusals = Refusals()
        let server = try MutualTLSServer(
            identity: try self.serverChain.leaf.tlsIdentity(chain: [self.serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [self.clientChain.root.certificate],
            clientRule: .evaluator(Composed(policy: relaxed))
        )
        let other = try TestChain.device(rootName: "Other Root")
        try await self.withMutualTLSApp(server, refusals: refusals, seen: seen) { port in
            let foreign = try await self.curl(port: port, path: "me", identity: other)
            #expect(foreign.status != 0, "\(foreign)")
        }
        #expect(seen.all.isEmpty)
        #expect(refusals.all.map { $0.trustFailure?.code } == [.insecurePolicy], "\(refusals.all)")
    }

    @Test("HTTP/2 turned back on after useMutualTLS fails closed: Vapor hands HTTP/2 requests no client, so the middleware answers 403")
    func http2FailsClosed() async throws {
        let seen = Seen()
        let server = try self.mutualTLSServer()
        let configure: (inout HTTPServer.Configuration) -> Void = { configuration in
            configuration.useMutualTLS(server)
            configuration.supportVersions = [.one, .two]
        }
        try await self.withApp(configure: configure, routes: self.routes(seen: seen)) { port in
            let h2 = try await self.curl(port: port, path: "me", identity: self.clientChain, extra: ["--http2", "-w", "\n%{http_code} %{http_version}"])
            #expect(h2.stdout.hasSuffix("\n403 2"), "\(h2)")
            let h1 = try await self.curl(port: port, path: "me", identity: self.clientChain, extra: ["--http1.1"])
            #expect(h1.stdout == "hello CN=gerät-7 via 3 certificates\n200", "\(h1)")
        }
        #expect(seen.all == ["CN=gerät-7"])
    }

    @Test("allow mode: anyone reaches the open route, MutualTLSMiddleware answers 403 without a device, a device is served")
    func allowMode() async throws {
        let seen = Seen()
        let server = try self.mutualTLSServer()
        try await self.withMutualTLSApp(server, mode: .allow, seen: seen) { port in
            let anonymous = try await self.curl(port: port, path: "open", identity: nil)
            #expect(anonymous.stdout == "open to anyone\n200", "\(anonymous)")
            let forbidden = try await self.curl(port: port, path: "me", identity: nil)
            #expect(forbidden.stdout.hasSuffix("\n403"), "\(forbidden)")
            #expect(forbidden.stdout.contains("a client certificate is required"), "\(forbidden)")
            let device = try await self.curl(port: port, path: "me", identity: self.clientChain)
            #expect(device.stdout == "hello CN=gerät-7 via 3 certificates\n200", "\(device)")
            // A certificate that is presented is still judged: another CA's device is refused at the handshake.
            let other = try TestChain.device(rootName: "Other Root")
            let foreign = try await self.curl(port: port, path: "open", identity: other)
            #expect(foreign.status != 0, "\(foreign)")
        }
        #expect(seen.all == ["CN=gerät-7"])
    }

    @Test("no session is resumed (a resumed session would skip the verification callback): openssl s_client -sess_in gets a new one")
    func noResumption() async throws {
        let server = try self.mutualTLSServer()
        let ca = try self.directory.write("server-root-r.pem", self.serverChain.root.certificatePEM)
        let cert = try self.directory.write("device-r.pem", self.clientChain.leaf.certificatePEM)
        // s_client sends only the first certificate of -cert; the intermediate goes in -cert_chain.
        let intermediate = try self.directory.write("device-r-chain.pem", self.clientChain.intermediate.certificatePEM)
        let key = try self.directory.write("device-r.key", self.clientChain.leaf.privateKeyPEM)
        let session = self.directory.path("session.pem")
        try await self.withMutualTLSApp(server, seen: Seen()) { port in
            for version in ["-tls1_2", "-tls1_3"] {
                let common = ["s_client", version, "-connect", "127.0.0.1:\(port)", "-servername", "device.local", "-CAfile", ca, "-cert", cert, "-cert_chain", intermediate, "-key", key, "-ign_eof"]
                let first = try await TestTools.run(TestTools.opensslPath, common + ["-sess_out", session], input: Data("GET /me HTTP/1.0\r\n\r\n".utf8))
                #expect(first.stdout.contains("hello CN=gerät-7"), "\(first)")
                let second = try await TestTools.run(TestTools.opensslPath, common + ["-sess_in", session], input: Data("GET /me HTTP/1.0\r\n\r\n".utf8))
                #expect(second.stdout.contains("hello CN=gerät-7"), "\(second)")
                #expect(!second.stdout.contains("Reused,"), "\(version): \(second)")
                #expect(second.stdout.contains("New,"), "\(version): \(second)")
            }
        }
    }

    /// A plain-TLS Vapor upstream (no client certificates) serving `leaf`, with an echo route.
    func withUpstream(leaf: TestIdentity, chain: [Certificate], _ body: (Int) async throws -> Void) async throws {
        let identity = try leaf.tlsIdentity(chain: chain)
        try await self.withApp(
            configure: { configuration in
                configuration.tlsConfiguration = .makeServerConfiguration(certificateChain: identity.certificateSources, privateKey: identity.privateKeySource)
                configuration.supportVersions = [.one, .two]
            },
            routes: { app in
                app.post("echo") { req -> String in
                    "\(req.method) \(req.body.string ?? "") \(req.headers.first(name: "x-device") ?? "")"
                }
                app.get("hello") { _ in "hello" }
            },
            body
        )
    }

    @Test("app.client on the pinned client: a POST with a body reaches the genuine upstream; an intercepting upstream is refused with the TrustFailure")
    func pinnedClient() async throws {
        // The intercepting upstream's CA is trusted too (as a corporate proxy's root would be): only the pin tells.
        let interceptor = try TestChain(host: "device.local", rootName: "Interception Root")
        let policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: self.serverChain.leaf.certificate)])
        let settings = TrustSettings(anchors: [self.serverChain.root.certificate, interceptor.root.certificate], anchorsOnly: true)
        let pinned = try PinnedHTTPClient(evaluator: policy, settings: settings)
        let app = try await Application.make(.testing)
        app.clients.use(.pinned(pinned, resolve: { host, port in host == "device.local" ? try? SocketAddress(ipAddress: "127.0.0.1", port: port) : nil }))

        try await self.withUpstream(leaf: self.serverChain.leaf, chain: [self.serverChain.intermediate.certificate]) { port in
            let response = try await app.client.post(URI(string: "https://device.local:\(port)/echo")) { request in
                request.headers.add(name: "x-device", value: "gerät-7")
                request.body = ByteBuffer(string: "reading=21.5°C")
            }.get()
            #expect(response.status == .ok)
            #expect(response.body.map { String(buffer: $0) } == "POST reading=21.5°C gerät-7")
            let hello = try await app.client.get(URI(string: "https://device.local:\(port)/hello")).get()
            #expect(hello.body.map { String(buffer: $0) } == "hello")
            // The same request body over HTTP/2 (a stream's DATA frames, with its Content-Length), when asked for.
            let h2 = try PinnedHTTPClient(evaluator: policy, settings: settings, configuration: PinnedHTTPClientConfiguration(httpVersions: .automatic))
            let posted = try await h2.send(
                .POST, URL(string: "https://device.local:\(port)/echo")!, headers: ["x-device": "gerät-8"], body: Array("reading=19°C".utf8),
                resolve: { _, port in try? SocketAddress(ipAddress: "127.0.0.1", port: port) })
            #expect(posted.version.major == 2)
            #expect(posted.bodyText == "POST reading=19°C gerät-8")
            await h2.shutdown()
        }
        try await self.withUpstream(leaf: interceptor.leaf, chain: [interceptor.intermediate.certificate]) { port in
            do {
                _ = try await app.client.get(URI(string: "https://device.local:\(port)/hello")).get()
                Issue.record("the intercepting upstream was trusted")
            } catch let error as PinningConnectionError {
                #expect(error.code == .untrusted)
                #expect(error.trustFailure?.code == .pinMismatch, "\(error)")
            }
        }
        // Plain http has nothing to pin: refused before any connection.
        await #expect(throws: PinningConnectionError.self) {
            _ = try await app.client.get(URI(string: "http://device.local/hello")).get()
        }
        await pinned.shutdown()
        try await app.asyncShutdown()
    }

    @Test("app.client on a client made with configurationSource: follows a pin set: trusted under one version, refused once a new version withdraws the pin, no client rebuilt")
    func followsPinSet() async throws {
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        let state = try TemporaryDirectory(prefix: "vapor-pinset")
        defer { state.remove() }
        let backup = "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString()
        func configuration(_ pins: [String]) -> [UInt8] {
            let list = pins.map { "\"\($0)\"" }.joined(separator: ", ")
            return Array(#"{"version": 1, "domains": {"device.local": {"pins": [\#(list)], "anchors": ["root.pem"], "anchorsOnly": true}}}"#.utf8)
        }
        let anchor = ["root.pem": Array(self.serverChain.root.certificatePEM.utf8)]
        try repository.publish(configuration([Pin(spkiOf: self.serverChain.leaf.certificate).description, backup]), files: anchor)
        let fetchClient = try PinnedHTTPClient(evaluator: SecurityPolicy.defaultEvaluation)
        let updater = try PinSetUpdater(
            bootstrapRoot: repository.bootstrapRoot, directory: state.path("state"), metadataURL: repository.metadataURL,
            fetcher: TUFHTTPFetcher(client: fetchClient, allowsPlainHTTP: true))
        #expect(await updater.refresh() == .updated(version: 2))

        let pinned = try PinnedHTTPClient(configurationSource: updater)
        let app = try await Application.make(.testing)
        app.clients.use(.pinned(pinned, resolve: { host, port in host == "device.local" ? try? SocketAddress(ipAddress: "127.0.0.1", port: port) : nil }))
        try await self.withUpstream(leaf: self.serverChain.leaf, chain: [self.serverChain.intermediate.certificate]) { port in
            let hello = try await app.client.get(URI(string: "https://device.local:\(port)/hello")).get()
            #expect(hello.status == .ok && hello.body.map { String(buffer: $0) } == "hello")

            // Version 3 withdraws the leaf's key (the backup and a new one remain): the same upstream is refused.
            let next = "sha256/" + Data(repeating: 0x43, count: 32).base64EncodedString()
            try repository.publish(configuration([backup, next]), files: anchor)
            #expect(await updater.refresh() == .updated(version: 3))
            do {
                _ = try await app.client.get(URI(string: "https://device.local:\(port)/hello")).get()
                Issue.record("a pin withdrawn by pin set 3 was still trusted")
            } catch let error as PinningConnectionError {
                #expect(error.code == .untrusted && error.trustFailure?.code == .pinMismatch, "\(error)")
            }
        }
        await pinned.shutdown()
        await fetchClient.shutdown()
        try await app.asyncShutdown()
    }
}
