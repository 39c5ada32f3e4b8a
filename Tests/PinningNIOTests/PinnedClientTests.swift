import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

@Suite("PinnedTLSClient over loopback")
struct PinnedClientTests {
    static let loopback: SocketAddress? = try? SocketAddress(ipAddress: "127.0.0.1", port: 0)

    func address(_ port: Int) throws -> SocketAddress {
        try SocketAddress(ipAddress: "127.0.0.1", port: port)
    }

    @Test("genuine server: trusted through its private root; the peer is reported")
    func genuineServerAccepted() async throws {
        let genuine = try TestChain(host: "api.example.com")
        let server = try await PlainTLSServer(identity: try genuine.leaf.tlsIdentity(chain: [genuine.intermediate.certificate]))
        defer { Task { await server.stop() } }
        var policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: genuine.intermediate.certificate)])
        policy.validatesDomainName = true
        let client = try PinnedTLSClient(
            evaluator: policy,
            settings: TrustSettings(platformRoots: Fixtures.platform([genuine.root.certificate]))
        )
        let connection = try await client.connect(host: "api.example.com", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
        defer { connection.channel.close(promise: nil) }
        #expect(connection.handshake.peer.subject == "CN=api.example.com")
        #expect(connection.handshake.peer.certificateChain == genuine.all)
        #expect(connection.handshake.host == "api.example.com")
    }

    @Test("clients built from TrustSettings judge each presented chain with them: the private root is trusted, another is not")
    func settingsInitializers() async throws {
        let genuine = try TestChain(host: "api.example.com")
        let other = try TestChain(host: "api.example.com", rootName: "Other Root")
        let server = try await PlainTLSServer(identity: try genuine.leaf.tlsIdentity(chain: [genuine.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let trusted = TrustSettings(anchors: [genuine.root.certificate], anchorsOnly: true)
        let client = try PinnedTLSClient(evaluator: SecurityPolicy.default, settings: trusted)
        #expect(client.settings.anchors == [genuine.root.certificate])
        let connection = try await client.connect(host: "api.example.com", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
        connection.channel.close(promise: nil)
        #expect(connection.handshake.peer.certificateChain == genuine.all)

        let refusing = try PinnedTLSClient(evaluator: SecurityPolicy.default, settings: TrustSettings(anchors: [other.root.certificate], anchorsOnly: true))
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await refusing.connect(host: "api.example.com", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
        }
        #expect(error?.code == .untrusted)

        let http = try PinnedHTTPClient(evaluator: SecurityPolicy.default, settings: TrustSettings(anchors: [other.root.certificate], anchorsOnly: true))
        defer { Task { await http.shutdown() } }
        let httpError = await #expect(throws: PinningConnectionError.self) {
            _ = try await http.get(URL(string: "https://api.example.com:\(server.port)/")!, resolve: { _, port in try? SocketAddress(ipAddress: "127.0.0.1", port: port) })
        }
        #expect(httpError?.code == .untrusted)
    }

    @Test("intercepting server trusted by the platform roots: accepted unpinned, refused pinned (pinMismatch reaches the caller)")
    func interceptingServer() async throws {
        let genuine = try TestChain(host: "api.example.com", rootName: "Genuine Root")
        let attacker = try TestChain(host: "api.example.com", rootName: "Intercepting Proxy Root", intermediateName: "Proxy Intermediate")
        let server = try await PlainTLSServer(identity: try attacker.leaf.tlsIdentity(chain: [attacker.intermediate.certificate]))
        defer { Task { await server.stop() } }
        // The device's platform store trusts the proxy's root (as a corporate MITM or a malicious profile would).
        let trust = ServerTrust(certificates: [], platformRoots: Fixtures.platform([attacker.root.certificate, genuine.root.certificate]))

        let unpinned = try PinnedTLSClient(evaluator: SecurityPolicy.default, settings: trust.clientSettings)
        let accepted = try await unpinned.connect(host: "api.example.com", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
        accepted.channel.close(promise: nil)
        #expect(accepted.handshake.peer.certificateChain.last == attacker.root.certificate)

        let pinned = try PinnedTLSClient(
            evaluator: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: genuine.intermediate.certificate)]),
            settings: trust.clientSettings
        )
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await pinned.connect(host: "api.example.com", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
        }
        #expect(error?.code == .untrusted)
        #expect(error?.trustFailure?.code == .pinMismatch)
        #expect(error?.description.hasPrefix("untrusted: ") == true)
        #expect(error?.description.contains("api.example.com") == true)
    }

    @Test("intercepting server that appends the genuine certificates: still refused")
    func appendedGenuineCertificates() async throws {
        let genuine = try TestChain(host: "api.example.com", rootName: "Genuine Root")
        let attacker = try TestChain(host: "api.example.com", rootName: "Intercepting Proxy Root", intermediateName: "Proxy Intermediate")
        let served = attacker.presented + genuine.all
        let server = try await PlainTLSServer(identity: try attacker.leaf.tlsIdentity(), servedChain: served)
        defer { Task { await server.stop() } }
        let trust = ServerTrust(certificates: [], platformRoots: Fixtures.platform([attacker.root.certificate, genuine.root.certificate]))
        for pin in [genuine.leaf, genuine.intermediate, genuine.root].map({ Pin(spkiOf: $0.certificate) }) {
            let client = try PinnedTLSClient(evaluator: SecurityPolicy(pinningMode: .publicKey, pins: [pin]), settings: trust.clientSettings)
            let error = await #expect(throws: PinningConnectionError.self) {
                _ = try await client.connect(host: "api.example.com", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
            }
            #expect(error?.trustFailure?.code == .pinMismatch)
            #expect(error?.trustFailure?.presentedChain.count == 5)
        }
    }

    @Test("allowInvalidCertificates over a live connection: a certificate under the pinned CA that may not issue vouches for nobody")
    func allowInvalidKeepsIssuerRules() async throws {
        let host = "victim.example"
        let root = try TestPKI.root("Genuine Root")
        let pinnedCA = try TestPKI.intermediate("Pinned Issuing CA", issuer: root, maxPathLength: 1)
        let tail = [pinnedCA.certificate, root.certificate]
        // Three certificates an attacker may legitimately hold under the pinned CA, used as issuers.
        let device = try TestPKI.intermediate("Attacker Device", issuer: pinnedCA, isCA: false)
        let regional = try TestPKI.intermediate("Regional CA", issuer: pinnedCA, maxPathLength: 0)
        let rogue = try TestPKI.intermediate("Attacker CA", issuer: regional, maxPathLength: nil)
        let fleet = try TestPKI.intermediate("Fleet CA", issuer: pinnedCA, maxPathLength: 0, permittedDNSDomains: ["fleet.internal"])
        let attacks: [(name: String, leaf: TestIdentity, chain: [Certificate])] = [
            ("not a CA", try TestPKI.leaf(host, issuer: device, dnsNames: [host]), [device.certificate] + tail),
            ("pathLen", try TestPKI.leaf(host, issuer: rogue, dnsNames: [host]), [rogue.certificate, regional.certificate] + tail),
            ("name constraints", try TestPKI.leaf(host, issuer: fleet, dnsNames: [host]), [fleet.certificate] + tail),
        ]
        var byKey = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: pinnedCA.certificate)])
        byKey.allowInvalidCertificates = true
        var byCertificate = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [pinnedCA.certificate])
        byCertificate.allowInvalidCertificates = true
        let noRoots = ServerTrust(certificates: [], platformRoots: Fixtures.platform([]))

        for attack in attacks {
            let server = try await PlainTLSServer(identity: try attack.leaf.tlsIdentity(), servedChain: [attack.leaf.certificate] + attack.chain)
            for policy in [byKey, byCertificate] {
                let client = try PinnedTLSClient(evaluator: policy, settings: noRoots.clientSettings)
                let error = await #expect(throws: PinningConnectionError.self, "\(attack.name), \(policy.pinningMode): connected") {
                    _ = try await client.connect(host: host, port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
                }
                #expect(error?.trustFailure?.code == .constraintViolation, "\(attack.name), \(policy.pinningMode): \(String(describing: error))")
            }
            await server.stop()
        }

        // The genuine server under the same policies connects: only the unknown root is waived.
        let genuine = try TestPKI.leaf(host, issuer: pinnedCA, dnsNames: [host])
        let server = try await PlainTLSServer(identity: try genuine.tlsIdentity(), servedChain: [genuine.certificate] + tail)
        defer { Task { await server.stop() } }
        for policy in [byKey, byCertificate] {
            let connection = try await PinnedTLSClient(evaluator: policy, settings: noRoots.clientSettings)
                .connect(host: host, port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
            connection.channel.close(promise: nil)
            #expect(connection.handshake.peer.leaf == genuine.certificate)
        }
    }

    @Test("self-signed device certificate: certificate pinning with allowInvalidCertificates")
    func selfSignedDevice() async throws {
        let device = try TestPKI.selfSigned("device-42.local", dnsNames: ["device-42.local"], ipAddresses: ["127.0.0.1"])
        let server = try await PlainTLSServer(identity: try device.tlsIdentity())
        defer { Task { await server.stop() } }
        var policy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [device.certificate])
        policy.allowInvalidCertificates = true
        let client = try PinnedTLSClient(evaluator: policy, settings: TrustSettings(platformRoots: Fixtures.platform([])))
        for host in ["device-42.local", "127.0.0.1"] {
            let connection = try await client.connect(host: host, port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
            connection.channel.close(promise: nil)
            #expect(connection.handshake.peer.leaf == device.certificate)
        }
        // Another device's certificate is refused, and so is the right certificate for the wrong name.
        let impostor = try TestPKI.selfSigned("device-42.local", dnsNames: ["device-42.local"], ipAddresses: ["127.0.0.1"])
        var other = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [impostor.certificate])
        other.allowInvalidCertificates = true
        let refusing = try PinnedTLSClient(evaluator: other, settings: TrustSettings(platformRoots: Fixtures.platform([])))
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await refusing.connect(host: "device-42.local", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
        }
        #expect(error?.trustFailure?.code == .pinMismatch)
        let wrongName = await #expect(throws: PinningConnectionError.self) {
            _ = try await client.connect(host: "device-43.local", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
        }
        #expect(wrongName?.trustFailure?.code == .hostnameMismatch)
    }

    @Test("an IP SAN equal to the socket address does not stand in for the DNS name (NIOSSL quirk avoided)")
    func ipSANDoesNotMatchDNSName() async throws {
        let chain = try TestChain(host: "other.example", ipAddresses: ["127.0.0.1"])
        let server = try await PlainTLSServer(identity: try chain.leaf.tlsIdentity(chain: [chain.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let client = try PinnedTLSClient(evaluator: SecurityPolicy.default, settings: TrustSettings(platformRoots: Fixtures.platform([chain.root.certificate])))
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await client.connect(host: "api.example.com", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
        }
        #expect(error?.trustFailure?.code == .hostnameMismatch)
    }

    @Test("32 concurrent pinned connections through one client")
    func concurrentConnections() async throws {
        let genuine = try TestChain(host: "api.example.com")
        let server = try await PlainTLSServer(identity: try genuine.leaf.tlsIdentity(chain: [genuine.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let counting = CountingEvaluator(SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: genuine.leaf.certificate)]))
        let client = try PinnedTLSClient(evaluator: counting, settings: TrustSettings(platformRoots: Fixtures.platform([genuine.root.certificate])))
        let port = server.port
        let trusted = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<32 {
                group.addTask {
                    let connection = try await client.connect(
                        host: "api.example.com", port: port, address: try SocketAddress(ipAddress: "127.0.0.1", port: port), group: testGroup, timeout: .seconds(10))
                    try await connection.channel.close()
                    return connection.handshake.peer.leaf == genuine.leaf.certificate
                }
            }
            var count = 0
            for try await ok in group where ok { count += 1 }
            return count
        }
        #expect(trusted == 32)
        #expect(counting.evaluations == 32)
    }

    @Test("resumption never skips the policy: every connection of one client is evaluated, and a refusing evaluator on the same context refuses")
    func clientResumption() async throws {
        let genuine = try TestChain(host: "api.example.com")
        // The server shares one NIOSSL context, so it issues tickets and would resume if a client offered one.
        let server = try await PlainTLSServer(identity: try genuine.leaf.tlsIdentity(chain: [genuine.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let counting = CountingEvaluator(SecurityPolicy.default)
        let client = try PinnedTLSClient(evaluator: counting, settings: TrustSettings(platformRoots: Fixtures.platform([genuine.root.certificate])))
        for _ in 0..<4 {
            let connection = try await client.connect(host: "api.example.com", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
            // Let the server's session tickets arrive before closing, so a resumable session could exist.
            try await Task.sleep(for: .milliseconds(50))
            try await connection.channel.close()
        }
        #expect(counting.evaluations == 4)
        let refusing = try PinnedTLSClient(
            evaluator: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: try TestPKI.selfSigned("x").certificate)]),
            settings: client.settings,
            configuration: client.configuration
        )
        await #expect(throws: PinningConnectionError.self) {
            _ = try await refusing.connect(host: "api.example.com", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
        }
    }

    @Test("a caching evaluator answers repeat handshakes from its cache on the event loop; a refusal is never cached")
    func cachedHandshakes() async throws {
        let genuine = try TestChain(host: "api.example.com")
        let server = try await PlainTLSServer(identity: try genuine.leaf.tlsIdentity(chain: [genuine.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let cache = EvaluationCache()
        let trust = ServerTrust(certificates: [], platformRoots: Fixtures.platform([genuine.root.certificate]))
        let policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: genuine.intermediate.certificate)])
        let client = try PinnedTLSClient(evaluator: CachingTrustEvaluator(policy, cache: cache), settings: trust.clientSettings)
        for _ in 0..<3 {
            let connection = try await client.connect(host: "api.example.com", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
            // The peer's facts are computed from the validated path whichever way the verdict came.
            #expect(connection.handshake.peer.subject == "CN=api.example.com")
            #expect(connection.handshake.peer.pin == Pin(spkiOf: genuine.leaf.certificate))
            #expect(connection.handshake.peer.certificateChain == genuine.all)
            try await connection.channel.close()
        }
        // One evaluation, then two immediate answers (immediateEvaluation counts hits, never misses).
        #expect(cache.statistics == EvaluationCache.Statistics(hits: 2, misses: 1))
        // Another host on the same cache: not answered from it, and refused by name.
        let wrongHost = try PinnedTLSClient(evaluator: CachingTrustEvaluator(policy, cache: cache), settings: trust.clientSettings)
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await wrongHost.connect(host: "other.example.com", port: server.port, address: try self.address(server.port), group: testGroup, timeout: .seconds(30))
        }
        #expect(error?.trustFailure?.code == .hostnameMismatch)
        #expect(cache.count == 1)
    }

    @Test("a closed port fails fast with connectFailed")
    func closedPort() async throws {
        let client = try PinnedTLSClient(evaluator: SecurityPolicy.default)
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await client.connect(host: "localhost", port: 1, address: try self.address(1), group: testGroup, timeout: .seconds(3))
        }
        // connectFailed (the refusal) rather than timedOut proves it failed before the 3 s timeout, without a
        // wall-clock assertion that a loaded 2-core machine could break.
        #expect(error?.code == .connectFailed)
    }
}
