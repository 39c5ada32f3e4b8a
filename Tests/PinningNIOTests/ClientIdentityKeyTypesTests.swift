import Foundation
import NIOHTTP1
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// A client identity of every key type the product claims works through the one client context cache
/// (``ClientTLSContexts``). NIOSSL's hash of a configuration DER-encodes the private key with a `try!`, which
/// BoringSSL cannot do for Ed25519: the first client with an Ed25519 identity stopped the process (SIGILL) before
/// connecting (new-user trial 3, defect 1). The README's device example is this path.
@Suite("Client identities of every key type")
struct ClientIdentityKeyTypesTests {
    @Test(
        "PinnedHTTPClient presents an identity of each key type to a mutual-TLS server, which sees the client; the identity's clients share one context, another identity gets its own",
        .timeLimit(.minutes(3)),
        arguments: TestKeyType.allCases)
    func everyKeyType(_ key: TestKeyType) async throws {
        let serverChain = try TestChain(host: "api.example.com", rootName: "Server Root")
        let device = try TestChain(host: "device-7", ipAddresses: [], key: key, leafUsage: .clientAuth, rootName: "Device Root")
        let mutualTLS = try MutualTLSServer(
            identity: try serverChain.leaf.tlsIdentity(chain: [serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [device.root.certificate])
        let server = try await LoopbackHTTPSServer(mutualTLS: mutualTLS) { _, peer in
            SimpleHTTPResponse(status: .ok, body: Array("client \(peer?.subject ?? "none")".utf8))
        }
        defer { Task { await server.stop() } }
        let deviceIdentity = try device.leaf.tlsIdentity(chain: [device.intermediate.certificate])
        let settings = TrustSettings(anchors: [serverChain.root.certificate], anchorsOnly: true)
        let policy = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: serverChain.intermediate.certificate)])
        let client = try PinnedHTTPClient(evaluator: policy, settings: settings, identity: deviceIdentity, group: testGroup)
        let response = try await client.get(try PinnedHTTPClientTests.url("https://api.example.com:\(server.port)/"), resolve: PinnedHTTPClientTests.loopback)
        await client.shutdown()
        #expect(response.bodyText == "client CN=device-7", "\(key)")

        // The cache: the same identity shares a context; another identity of the same key type never does.
        let contexts = ClientTLSContexts(capacity: 4)
        let one = try PinnedTLSClient(evaluator: policy, settings: settings, identity: deviceIdentity, configuration: nil, keyLog: nil, contexts: contexts)
        let again = try PinnedTLSClient(evaluator: policy, settings: settings, identity: deviceIdentity, configuration: nil, keyLog: nil, contexts: contexts)
        let other = try TestChain(host: "device-8", ipAddresses: [], key: key, leafUsage: .clientAuth).leaf.tlsIdentity()
        let another = try PinnedTLSClient(evaluator: policy, settings: settings, identity: other, configuration: nil, keyLog: nil, contexts: contexts)
        #expect(one.sslContext === again.sslContext)
        #expect(one.sslContext !== another.sslContext)
        #expect(contexts.contextsMade == 2)

        // A TLSIdentity is Hashable: hashing one must not encode its key either.
        let identities: Set<TLSIdentity> = [deviceIdentity, deviceIdentity, other]
        #expect(identities.count == 2)
    }
}
