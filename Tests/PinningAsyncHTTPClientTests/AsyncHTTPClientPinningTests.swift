import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import PinningAsyncHTTPClient
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// Each test talks to a NIOSSL server on 127.0.0.1. The client asks for `https://<name>:<port>/` and AHC's
/// `dnsOverride` sends that name to 127.0.0.1, so SNI and the name check see the DNS name.
@Suite("AsyncHTTPClient pinning over loopback", .timeLimit(.minutes(3)))
struct AsyncHTTPClientPinningTests {
    /// Runs one GET through a client built from `pinning`; returns the status and body, or throws.
    func get(_ pinning: AsyncHTTPClientPinning, port: Int, host: String? = nil) async throws -> (UInt, String) {
        let name = host ?? pinning.host
        var configuration = try pinning.makeHTTPClientConfiguration()
        configuration.dnsOverride = [name: "127.0.0.1"]
        // Safety nets only (a refusal arrives at once): generous enough for a loaded 2-core machine running the
        // suite in parallel under a sanitizer, where a 5-second connect timeout once expired.
        configuration.timeout = .init(connect: .seconds(30), read: .seconds(30))
        let client = HTTPClient(eventLoopGroup: testGroup, configuration: configuration)
        do {
            let response = try await client.execute(HTTPClientRequest(url: "https://\(name):\(port)/"), timeout: .seconds(50))
            let body = try await response.body.collect(upTo: 1 << 16)
            try await client.shutdown()
            return (response.status.code, String(buffer: body))
        } catch {
            try await client.shutdown()
            throw error
        }
    }

    /// The PinningConnectionError inside whatever AHC threw.
    func pinningError(_ error: (any Error)?) -> PinningConnectionError? {
        error as? PinningConnectionError
    }

    // MARK: Enforced

    @Test("genuine server: anchors through trustRoots, leaf pin checked after the handshake, 200")
    func genuineAccepted() async throws {
        let genuine = try TestChain(host: "api.example.com")
        let server = try await HTTPSTestServer(identity: try genuine.leaf.tlsIdentity(chain: [genuine.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let pinning = try AsyncHTTPClientPinning(
            host: "api.example.com",
            policy: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: genuine.leaf.certificate)]),
            settings: TrustSettings(anchors: [genuine.root.certificate], anchorsOnly: true)
        )
        let (status, body) = try await self.get(pinning, port: server.port)
        #expect(status == 200)
        #expect(body == "hello anonymous")
    }

    @Test("Ed25519 and P-384 servers are reached: the adapter uses the pinned clients' signature algorithms and groups", arguments: [TestKeyType.ed25519, .p384])
    func keyTypesReached(_ key: TestKeyType) async throws {
        let genuine = try TestChain(host: "api.example.com", key: key)
        let server = try await HTTPSTestServer(identity: try genuine.leaf.tlsIdentity(chain: [genuine.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let pinning = try AsyncHTTPClientPinning(
            host: "api.example.com",
            policy: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: genuine.leaf.certificate)]),
            settings: TrustSettings(anchors: [genuine.root.certificate], anchorsOnly: true)
        )
        #expect(try pinning.makeTLSConfiguration().verifySignatureAlgorithms == TLSConfiguration.pinningAcceptedSignatureAlgorithms)
        let (status, _) = try await self.get(pinning, port: server.port)
        #expect(status == 200)
    }

    @Test("wrong leaf pin: refused at once with pinMismatch (no connection-establishment retries)")
    func leafPinMismatchRefused() async throws {
        let genuine = try TestChain(host: "api.example.com")
        let server = try await HTTPSTestServer(identity: try genuine.leaf.tlsIdentity(chain: [genuine.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let other = try TestChain(host: "api.example.com")
        let pinning = try AsyncHTTPClientPinning(
            host: "api.example.com",
            policy: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: other.leaf.certificate)]),
            settings: TrustSettings(anchors: [genuine.root.certificate], anchorsOnly: true)
        )
        // No wall-clock bound (a loaded 2-core CI machine makes those flaky): the configuration turns
        // connection-establishment retries off, and the first attempt's refusal is what the caller gets.
        #expect(try pinning.makeHTTPClientConfiguration().connectionPool.retryConnectionEstablishment == false)
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.get(pinning, port: server.port)
        }
        #expect(error?.code == .untrusted)
        #expect(error?.trustFailure?.code == .pinMismatch)
    }

    @Test("a chain to a root that is not an anchor is refused by BoringSSL through trustRoots")
    func unknownRootRefused() async throws {
        let attacker = try TestChain(host: "api.example.com", rootName: "Intercepting Proxy Root")
        let genuine = try TestChain(host: "api.example.com", rootName: "Genuine Root")
        let server = try await HTTPSTestServer(identity: try attacker.leaf.tlsIdentity(chain: [attacker.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let pinning = try AsyncHTTPClientPinning(
            host: "api.example.com",
            policy: .default,
            settings: TrustSettings(anchors: [genuine.root.certificate], anchorsOnly: true)
        )
        await #expect(throws: (any Error).self) {
            _ = try await self.get(pinning, port: server.port)
        }
    }

    @Test("intercepting server trusted by the platform roots: accepted unpinned, refused with a leaf pin")
    func interceptingServer() async throws {
        let attacker = try TestChain(host: "api.example.com", rootName: "Intercepting Proxy Root")
        let genuine = try TestChain(host: "api.example.com", rootName: "Genuine Root")
        let server = try await HTTPSTestServer(identity: try attacker.leaf.tlsIdentity(chain: [attacker.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let trust = ServerTrust(certificates: [], platformRoots: TrustRoots([attacker.root.certificate, genuine.root.certificate]))
        let unpinned = try AsyncHTTPClientPinning(host: "api.example.com", policy: .default, settings: trust.clientSettings)
        #expect(try await self.get(unpinned, port: server.port).0 == 200)
        let pinned = try AsyncHTTPClientPinning(
            host: "api.example.com",
            policy: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: genuine.leaf.certificate)]),
            settings: trust.clientSettings
        )
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.get(pinned, port: server.port)
        }
        #expect(error?.trustFailure?.code == .pinMismatch)
    }

    @Test("host name checked by us, not NIOSSL: a leaf whose IP SAN is 127.0.0.1 but whose DNS name differs is refused")
    func hostnameCheckedOnLeaf() async throws {
        // NIOSSL's .fullVerification would accept this leaf for any DNS name, because its IP SAN equals the
        // socket's address.
        let chain = try TestChain(host: "other.example.com", ipAddresses: ["127.0.0.1"])
        let server = try await HTTPSTestServer(identity: try chain.leaf.tlsIdentity(chain: [chain.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let pinning = try AsyncHTTPClientPinning(
            host: "api.example.com",
            policy: .default,
            settings: TrustSettings(anchors: [chain.root.certificate], anchorsOnly: true)
        )
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.get(pinning, port: server.port)
        }
        #expect(error?.trustFailure?.code == .hostnameMismatch)
    }

    @Test("an expired leaf is refused")
    func expiredLeafRefused() async throws {
        let root = try TestPKI.root("Root")
        let leaf = try TestPKI.leaf(
            "api.example.com", issuer: root, dnsNames: ["api.example.com"],
            notValidBefore: Date().addingTimeInterval(-10 * 86400), notValidAfter: Date().addingTimeInterval(-86400)
        )
        let server = try await HTTPSTestServer(identity: try leaf.tlsIdentity())
        defer { Task { await server.stop() } }
        let pinning = try AsyncHTTPClientPinning(
            host: "api.example.com", policy: .default,
            settings: TrustSettings(anchors: [root.certificate], anchorsOnly: true)
        )
        await #expect(throws: (any Error).self) {
            _ = try await self.get(pinning, port: server.port)
        }
    }

    @Test("self-signed device certificate pinned in certificate mode: accepted; another self-signed one refused")
    func selfSignedCertificatePinning() async throws {
        let device = try TestPKI.selfSigned("device.local", dnsNames: ["device.local"], isCA: true)
        let server = try await HTTPSTestServer(identity: try device.tlsIdentity())
        defer { Task { await server.stop() } }
        let pinning = try AsyncHTTPClientPinning(
            host: "device.local",
            policy: SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [device.certificate]),
            settings: TrustSettings(anchorsOnly: true)
        )
        #expect(try await self.get(pinning, port: server.port).0 == 200)

        let impostor = try TestPKI.selfSigned("device.local", dnsNames: ["device.local"], isCA: true)
        let other = try AsyncHTTPClientPinning(
            host: "device.local",
            policy: SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [impostor.certificate]),
            settings: TrustSettings(anchorsOnly: true)
        )
        await #expect(throws: (any Error).self) {
            _ = try await self.get(other, port: server.port)
        }
    }

    @Test("mutual TLS: the TLSIdentity is presented and the server sees its subject; without it the request fails at once")
    func mutualTLS() async throws {
        let serverChain = try TestChain(host: "device.local", rootName: "Server Root")
        let clientChain = try TestChain(host: "client-7", ipAddresses: [], leafUsage: .clientAuth, rootName: "Client Root")
        let mtls = try MutualTLSServer(
            identity: try serverChain.leaf.tlsIdentity(chain: [serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [clientChain.root.certificate]
        )
        let server = try await HTTPSTestServer(mutualTLS: mtls)
        defer { Task { await server.stop() } }
        let trust = ServerTrust(certificates: [], anchors: [serverChain.root.certificate], anchorsOnly: true)
        let identity = try clientChain.leaf.tlsIdentity(chain: [clientChain.intermediate.certificate])
        let withIdentity = try AsyncHTTPClientPinning(host: "device.local", policy: .default, settings: trust.clientSettings, identity: identity)
        let (status, body) = try await self.get(withIdentity, port: server.port)
        #expect(status == 200)
        #expect(body == "hello CN=client-7")

        // Without an identity: under TLS 1.3 our handshake completes before the server refuses, so the refusal
        // arrives while the leaf check runs; it must fail the request promptly (AHC waited past its own deadline
        // when handed a connection that had closed meanwhile).
        let without = try AsyncHTTPClientPinning(host: "device.local", policy: .default, settings: trust.clientSettings)
        let error = await #expect(throws: (any Error).self) {
            _ = try await self.get(without, port: server.port)
        }
        // The request failed on the refusal, not on one of the bounds `get` sets (the hang this guards against
        // ends at the 50 s deadline, or at the 30 s read timeout). Told by the error, not the wall clock: under
        // the whole suite on 2 cores, resuming this task waits behind every test queued on the cooperative pool
        // (a prompt failure has taken 9.6 s).
        let bounds: [HTTPClientError] = [.deadlineExceeded, .readTimeout, .connectTimeout]
        #expect(!bounds.contains { (error as? HTTPClientError) == $0 }, "\(String(describing: error))")
    }

    @Test(
        "mutual TLS with P-384 and RSA identities works; an Ed25519 identity is refused at configuration time (AsyncHTTPClient's context cache would stop the process on it)",
        arguments: [TestKeyType.p384, .rsa2048, .ed25519])
    func identityKeyTypes(_ key: TestKeyType) async throws {
        let serverChain = try TestChain(host: "device.local", rootName: "Server Root")
        let clientChain = try TestChain(host: "client-7", ipAddresses: [], key: key, leafUsage: .clientAuth, rootName: "Client Root")
        let identity = try clientChain.leaf.tlsIdentity(chain: [clientChain.intermediate.certificate])
        let trust = ServerTrust(certificates: [], anchors: [serverChain.root.certificate], anchorsOnly: true)
        guard key != .ed25519 else {
            let error = #expect(throws: AsyncHTTPClientPinningError.self) {
                _ = try AsyncHTTPClientPinning(host: "device.local", policy: .default, settings: trust.clientSettings, identity: identity)
            }
            #expect(error?.code == .unsupportedIdentity && error?.message.contains("use PinnedHTTPClient") == true, "\(String(describing: error))")
            return
        }
        let mtls = try MutualTLSServer(
            identity: try serverChain.leaf.tlsIdentity(chain: [serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [clientChain.root.certificate]
        )
        let server = try await HTTPSTestServer(mutualTLS: mtls)
        defer { Task { await server.stop() } }
        let pinning = try AsyncHTTPClientPinning(host: "device.local", policy: .default, settings: trust.clientSettings, identity: identity)
        let (status, body) = try await self.get(pinning, port: server.port)
        #expect(status == 200 && body == "hello CN=client-7", "\(key)")
    }

    // MARK: Documented as not enforceable

    @Test("NOT ENFORCEABLE: an intermediate SPKI pin never matches (only the leaf is reachable): the genuine server is refused, fail closed")
    func intermediatePinFailsClosed() async throws {
        let genuine = try TestChain(host: "api.example.com")
        let server = try await HTTPSTestServer(identity: try genuine.leaf.tlsIdentity(chain: [genuine.intermediate.certificate]))
        defer { Task { await server.stop() } }
        for pinned in [genuine.intermediate.certificate, genuine.root.certificate] {
            let pinning = try AsyncHTTPClientPinning(
                host: "api.example.com",
                policy: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: pinned)]),
                settings: TrustSettings(anchors: [genuine.root.certificate], anchorsOnly: true)
            )
            let error = await #expect(throws: PinningConnectionError.self) {
                _ = try await self.get(pinning, port: server.port)
            }
            #expect(error?.trustFailure?.code == .pinMismatch)
        }
    }

    @Test("NOT ENFORCEABLE: pinned intermediate certificates (either mode) are refused at configuration time")
    func pinnedIntermediateCertificateRejected() throws {
        let genuine = try TestChain(host: "api.example.com")
        for mode in [SecurityPolicy.PinningMode.publicKey, .certificate] {
            let error = #expect(throws: AsyncHTTPClientPinningError.self) {
                _ = try AsyncHTTPClientPinning(host: "api.example.com", policy: SecurityPolicy(pinningMode: mode, pinnedCertificates: [genuine.intermediate.certificate]))
            }
            #expect(error?.code == .unenforceablePin)
            #expect(error?.description.contains("is a CA") == true)
        }
    }

    @Test("NOT ENFORCEABLE: a pinned root certificate: public-key mode refuses every connection; certificate mode refuses when an intermediate sits between root and leaf")
    func pinnedRootCertificate() async throws {
        let genuine = try TestChain(host: "api.example.com")
        let server = try await HTTPSTestServer(identity: try genuine.leaf.tlsIdentity(chain: [genuine.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let trust = ServerTrust(certificates: [], anchors: [genuine.root.certificate], anchorsOnly: true)
        for mode in [SecurityPolicy.PinningMode.publicKey, .certificate] {
            let pinning = try AsyncHTTPClientPinning(
                host: "api.example.com",
                policy: SecurityPolicy(pinningMode: mode, pinnedCertificates: [genuine.root.certificate]),
                settings: trust.clientSettings
            )
            let error = await #expect(throws: PinningConnectionError.self) {
                _ = try await self.get(pinning, port: server.port)
            }
            #expect(error?.code == .untrusted)
        }
    }

    @Test("NOT ENFORCEABLE: allowInvalidCertificates is refused at configuration time")
    func allowInvalidRejected() throws {
        var policy = SecurityPolicy(pinningMode: .publicKey, pins: [try Pin(sha256Digest: Array(repeating: 1, count: 32))])
        policy.allowInvalidCertificates = true
        let error = #expect(throws: AsyncHTTPClientPinningError.self) {
            _ = try AsyncHTTPClientPinning(host: "api.example.com", policy: policy)
        }
        #expect(error?.code == .unenforceablePolicy)
    }

    @Test("anchors-only trust without anchors is refused at configuration time")
    func noAnchorsRejected() throws {
        let error = #expect(throws: AsyncHTTPClientPinningError.self) {
            _ = try AsyncHTTPClientPinning(host: "api.example.com", policy: .default, settings: TrustSettings(anchorsOnly: true))
        }
        #expect(error?.code == .noAnchors)
    }

    @Test("NOT ENFORCEABLE per request host: the leaf is checked against the configured host, so a request for another host is refused")
    func otherHostRefused() async throws {
        let chain = try TestChain(host: "cdn.example.com")
        let server = try await HTTPSTestServer(identity: try chain.leaf.tlsIdentity(chain: [chain.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let pinning = try AsyncHTTPClientPinning(
            host: "api.example.com", policy: .default,
            settings: TrustSettings(anchors: [chain.root.certificate], anchorsOnly: true)
        )
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.get(pinning, port: server.port, host: "cdn.example.com")
        }
        #expect(error?.trustFailure?.code == .hostnameMismatch)
    }

    @Test("the configuration AHC gets: noHostnameVerification, no retries, redirects off, both initializers set")
    func configurationShape() throws {
        let chain = try TestChain(host: "api.example.com")
        let pinning = try AsyncHTTPClientPinning(
            host: "api.example.com", policy: .default,
            settings: TrustSettings(anchors: [chain.root.certificate], anchorsOnly: true)
        )
        let configuration = try pinning.makeHTTPClientConfiguration()
        #expect(configuration.tlsConfiguration?.certificateVerification == .noHostnameVerification)
        #expect(configuration.connectionPool.retryConnectionEstablishment == false)
        #expect(configuration.http1_1ConnectionDebugInitializer != nil)
        #expect(configuration.http2ConnectionDebugInitializer != nil)
    }
}
