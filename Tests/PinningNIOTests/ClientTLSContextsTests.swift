import Foundation
import NIOCore
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// The one place client TLS contexts are made (issue 28 item 4): equal TLS settings share one context across
/// clients, report batches and challenge connections; different ones do not; and sharing never lets a handshake
/// skip the evaluator. Each test counts with a cache of its own, so tests running beside it cannot move its numbers.
@Suite("Client TLS contexts")
struct ClientTLSContextsTests {
    func client(
        _ evaluator: any ServerTrustEvaluating = SecurityPolicy.default,
        settings: TrustSettings = .default,
        identity: TLSIdentity? = nil,
        configuration: TLSConfiguration? = nil,
        keyLog: TLSKeyLog? = nil,
        contexts: ClientTLSContexts
    ) throws -> PinnedTLSClient {
        try PinnedTLSClient(evaluator: evaluator, settings: settings, identity: identity, configuration: configuration, keyLog: keyLog, contexts: contexts)
    }

    @Test("equal TLS settings share one context whatever the evaluator and trust settings; ALPN, identity, key log and versions each make their own")
    func equalSettingsShare() throws {
        let contexts = ClientTLSContexts(capacity: 16)
        let chain = try TestChain(host: "api.example.com")
        let first = try self.client(contexts: contexts)
        for evaluator in [SecurityPolicy.default, SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: chain.root.certificate)])] {
            for settings in [TrustSettings.default, TrustSettings(anchors: [chain.root.certificate], anchorsOnly: true)] {
                let again = try self.client(evaluator, settings: settings, contexts: contexts)
                #expect(again.sslContext === first.sslContext)
            }
        }
        #expect(contexts.contextsMade == 1)

        // Each of these changes the context: one more each, and asking again is a hit.
        var alpn = TLSConfiguration.makePinnedClientConfiguration()
        alpn.applicationProtocols = ["h2", "http/1.1"]
        var tls13 = TLSConfiguration.makePinnedClientConfiguration()
        tls13.minimumTLSVersion = .tlsv13
        let identity = try chain.leaf.tlsIdentity(chain: [chain.intermediate.certificate])
        let other = try TestChain(host: "client.example.com").leaf.tlsIdentity()
        let directory = try TemporaryDirectory(prefix: "pinning-contexts")
        defer { directory.remove() }
        let keyLog = try TLSKeyLog(path: directory.path("a.keys"))
        let otherKeyLog = try TLSKeyLog(path: directory.path("b.keys"))
        let variants: [() throws -> PinnedTLSClient] = [
            { try self.client(configuration: alpn, contexts: contexts) },
            { try self.client(configuration: tls13, contexts: contexts) },
            { try self.client(identity: identity, contexts: contexts) },
            { try self.client(identity: other, contexts: contexts) },
            { try self.client(keyLog: keyLog, contexts: contexts) },
            { try self.client(keyLog: otherKeyLog, contexts: contexts) },
        ]
        var seen: [ObjectIdentifier] = [ObjectIdentifier(first.sslContext)]
        for (index, make) in variants.enumerated() {
            let made = try make()
            #expect(!seen.contains(ObjectIdentifier(made.sslContext)), "variant \(index) reused another's context")
            seen.append(ObjectIdentifier(made.sslContext))
            #expect(contexts.contextsMade == 2 + index)
            #expect(try make().sslContext === made.sslContext, "variant \(index) asked again")
            #expect(contexts.contextsMade == 2 + index)
        }
        // The key log is applied to the shared context's configuration (NIOSSL calls it per handshake), behind the
        // alert observers' callback, which every context carries (TLSAlertSecrets keeps only the lines of
        // connections whose TLSAlertObserver registered them): without a key log, that callback alone.
        let logged = try self.client(keyLog: keyLog, contexts: contexts)
        #expect(logged.configuration.keyLogCallback != nil && first.configuration.keyLogCallback != nil)
        let before = try String(contentsOfFile: keyLog.path, encoding: .utf8)
        first.configuration.keyLogCallback?(ByteBuffer(string: "CLIENT_TRAFFIC_SECRET_0 \(String(repeating: "ab", count: 32)) \(String(repeating: "cd", count: 32))\n"))
        #expect(try String(contentsOfFile: keyLog.path, encoding: .utf8) == before, "no key log given: nothing is written anywhere")
        logged.configuration.keyLogCallback?(ByteBuffer(string: "CLIENT_TRAFFIC_SECRET_0 \(String(repeating: "ab", count: 32)) \(String(repeating: "cd", count: 32))\n"))
        #expect(try String(contentsOfFile: keyLog.path, encoding: .utf8).hasSuffix("CLIENT_TRAFFIC_SECRET_0 \(String(repeating: "ab", count: 32)) \(String(repeating: "cd", count: 32))\n"))
    }

    @Test("bounded: past the capacity the least recently used context is dropped; a configuration that reads a file is never kept")
    func boundedAndFilesNotKept() throws {
        let contexts = ClientTLSContexts(capacity: 2)
        func configuration(_ protocols: [String]) -> TLSConfiguration {
            var configuration = TLSConfiguration.makePinnedClientConfiguration()
            configuration.applicationProtocols = protocols
            return configuration
        }
        _ = try self.client(configuration: configuration(["a"]), contexts: contexts)
        _ = try self.client(configuration: configuration(["b"]), contexts: contexts)
        _ = try self.client(configuration: configuration(["a"]), contexts: contexts)  // a is now the most recent
        _ = try self.client(configuration: configuration(["c"]), contexts: contexts)  // drops b
        #expect(contexts.count == 2 && contexts.contextsMade == 3)
        _ = try self.client(configuration: configuration(["a"]), contexts: contexts)
        #expect(contexts.contextsMade == 3)
        _ = try self.client(configuration: configuration(["b"]), contexts: contexts)
        #expect(contexts.contextsMade == 4)

        // Roots read from a file: the file may change between two clients, so each reads it again.
        let directory = try TemporaryDirectory(prefix: "pinning-contexts-file")
        defer { directory.remove() }
        let roots = try directory.write("roots.pem", try TestChain().root.certificatePEM)
        var fromFile = TLSConfiguration.makePinnedClientConfiguration()
        fromFile.trustRoots = .file(roots)
        let one = try self.client(configuration: fromFile, contexts: contexts)
        let two = try self.client(configuration: fromFile, contexts: contexts)
        #expect(one.sslContext !== two.sslContext)
        #expect(contexts.contextsMade == 6 && contexts.count == 2)
    }

    @Test(
        "a shared context never lets a handshake skip the evaluator: against a server that issues tickets, every connection of every client is evaluated, and a refusing client on the same context refuses",
        .timeLimit(.minutes(3)))
    func sharedContextNeverSkipsEvaluation() async throws {
        let genuine = try TestChain(host: "api.example.com")
        // The server shares one NIOSSL context, so it issues session tickets and would resume a session offered.
        let server = try await PlainTLSServer(identity: try genuine.leaf.tlsIdentity(chain: [genuine.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let contexts = ClientTLSContexts(capacity: 4)
        let settings = TrustSettings(platformRoots: Fixtures.platform([genuine.root.certificate]))
        let trusting = CountingEvaluator(SecurityPolicy.default)
        let refusing = CountingEvaluator(SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: try TestPKI.selfSigned("x").certificate)]))
        let accepted = try self.client(trusting, settings: settings, contexts: contexts)
        let refused = try self.client(refusing, settings: settings, contexts: contexts)
        #expect(accepted.sslContext === refused.sslContext && contexts.contextsMade == 1)
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: server.port)
        for round in 1...3 {
            let connection = try await accepted.connect(host: "api.example.com", port: server.port, address: address, group: testGroup, timeout: .seconds(30))
            // Let the server's tickets arrive before closing, so a resumable session could exist.
            try await Task.sleep(for: .milliseconds(50))
            try await connection.channel.close()
            let error = await #expect(throws: PinningConnectionError.self) {
                _ = try await refused.connect(host: "api.example.com", port: server.port, address: address, group: testGroup, timeout: .seconds(30))
            }
            #expect(error?.code == .untrusted && error?.trustFailure?.code == .pinMismatch, "\(String(describing: error))")
            #expect(trusting.evaluations == round && refusing.evaluations == round)
        }
        #expect(contexts.contextsMade == 1)
    }

    @Test("N report batches with equal settings make one context; the collector is still judged by each reporter's own settings", .timeLimit(.minutes(3)))
    func reportBatchesShareOneContext() async throws {
        let (collectorPKI, collector) = try await PinFailureReportDeliveryTests.httpsCollector()
        defer { Task { await collector.stop() } }
        let contexts = ClientTLSContexts(capacity: 4)
        let outcomes = PinFailureReportDeliveryTests.Outcomes()
        var reporter = HTTPPinFailureReporter(
            timeout: .seconds(30), maximumAttempts: 1,
            settings: TrustSettings(platformRoots: Fixtures.platform([collectorPKI.root.certificate])),
            group: testGroup, onOutcome: { outcomes.append($0) })
        reporter.contexts = contexts
        let uri = try #require(URL(string: "https://127.0.0.1:\(collector.port)/pins"))
        let batches = 4
        for _ in 0..<batches {
            await reporter.send(PinFailureReportDeliveryTests.minimalReport, to: [uri])
        }
        #expect(outcomes.all.count == batches && outcomes.all.allSatisfy { $0.delivered && $0.status == 204 }, "\(outcomes.all)")
        #expect(collector.requests.count == batches)
        #expect(contexts.contextsMade == 1)

        // Other trust settings, the same TLS settings: the same context, and the collector refused by them.
        var strict = reporter
        strict.settings = TrustSettings(platformRoots: Fixtures.platform([try TestChain(rootName: "Unrelated Root").root.certificate]))
        await strict.send(PinFailureReportDeliveryTests.minimalReport, to: [uri])
        #expect(outcomes.all.last?.delivered == false && outcomes.all.last?.message.hasPrefix("untrusted: ") == true, "\(String(describing: outcomes.all.last))")
        #expect(collector.requests.count == batches)
        #expect(contexts.contextsMade == 1)
    }

    @Test("N CRL downloads make one context (a download's client is made each time; its context is not)")
    func crlDownloadsShareOneContext() async throws {
        let server = try LoopbackHTTPServer(statuses: [200])
        defer { server.stop() }
        let chain = try TestChain()
        server.responseBody = try TestCRL(
            issuer: chain.intermediate, entries: [], number: 1, thisUpdate: Date().addingTimeInterval(-60), nextUpdate: Date().addingTimeInterval(86400)
        ).der
        let contexts = ClientTLSContexts(capacity: 4)
        let fetcher = CRLFetcher(timeout: .seconds(30), group: testGroup, contexts: contexts)
        for index in 1...3 {
            // Another URL each time: the fetcher's own cache of CRLs cannot answer it.
            let fetched = await fetcher.crls(at: server.url("/\(index).crl"))
            #expect(try fetched.get().crls.count == 1)
        }
        #expect(fetcher.downloadCount == 3)
        #expect(contexts.contextsMade == 1)
    }

    @Test("N challenge connections with equal settings make one context; another identity or base configuration makes another")
    func challengeConnectionsShareOneContext() async throws {
        let contexts = ClientTLSContexts(capacity: 4)
        let identity = try TestChain(host: "client.example.com").leaf.tlsIdentity()
        // The identity answers the client-certificate challenge of api.example.com only.
        var client = ChallengeTLSClient(handler: ChallengeHandler(identity: identity, identityHosts: .only(["api.example.com"])))
        client.contexts = contexts
        var made: [PinnedTLSClient] = []
        for port in 1...5 {
            made.append(try await client.makeConnectionClient(host: "api.example.com", port: port))
        }
        #expect(made.allSatisfy { $0.identity != nil && $0.sslContext === made[0].sslContext })
        #expect(contexts.contextsMade == 1)
        // Without the identity (another host): another context, shared by that host's connections.
        let anonymous = try await client.makeConnectionClient(host: "cdn.example.com", port: 443)
        #expect(anonymous.identity == nil && anonymous.sslContext !== made[0].sslContext)
        #expect(try await client.makeConnectionClient(host: "cdn.example.com", port: 8443).sslContext === anonymous.sslContext)
        #expect(contexts.contextsMade == 2)
        client.configuration.applicationProtocols = ["http/1.1"]
        let other = try await client.makeConnectionClient(host: "api.example.com", port: 443)
        #expect(other.sslContext !== made[0].sslContext)
        #expect(contexts.contextsMade == 3)
    }
}
