import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Pinning
import PinningTestSupport
import Testing
import X509

@testable import PinningNIO

/// Issue 27 at the connection level: a client presenting a same-subject mesh is refused with the bound named,
/// a normal client is served beside such attacks, and a decision whose peer has gone is abandoned.
@Suite("Hostile client chains against an mTLS server")
struct HostileChainServerTests {
    @Test("Mesh clients are refused with pathBuildingLimitExceeded while a normal client beside them is accepted")
    func normalClientBesideAttacks() async throws {
        let setup = try MutualTLSSetup()
        // An attacker with no certificate from the client CA: a leaf under a mesh of 8 keys, all 56 cross-signed
        // certificates presented (34 KB).
        let mesh = try SameSubjectMesh(keys: 8, leafName: "client-evil")
        let attacker = try setup.client(identity: try mesh.leaf.tlsIdentity(chain: mesh.crossSigned))
        let normal = try setup.client(
            identity: try setup.clientChain.leaf.tlsIdentity(chain: [setup.clientChain.intermediate.certificate])
        )
        let server = try await MutualTLSTestServer(setup.server)
        defer { Task { await server.stop() } }
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: server.port)

        let attacks = 6
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<attacks {
                group.addTask {
                    // The attacker's side fails or not (TLS 1.3); the server's verdict is what counts.
                    let connection = try? await attacker.connect(host: "device.local", port: server.port, address: address, group: testGroup, timeout: .seconds(60))
                    connection?.channel.close(promise: nil)
                }
            }
            group.addTask {
                let connection = try? await normal.connect(host: "device.local", port: server.port, address: address, group: testGroup, timeout: .seconds(60))
                connection?.channel.close(promise: nil)
            }
        }
        var accepted: [PinnedHandshake] = []
        var refusals: [PinningConnectionError] = []
        for _ in 0..<(attacks + 1) {
            switch await server.nextOutcome(within: 60) {
            case .success(let handshake): accepted.append(handshake)
            case .failure(let error): refusals.append(error)
            case nil: Issue.record("a connection reported no outcome")
            }
        }
        #expect(accepted.map(\.peer.subject) == ["CN=client-7"], "the normal client is served")
        #expect(refusals.count == attacks)
        for refusal in refusals {
            #expect(refusal.trustFailure?.code == .pathBuildingLimitExceeded, "\(refusal)")
        }
    }

    @Test("A decision whose connection went away before it ran is abandoned and refused")
    func abandonedDecision() async throws {
        let mesh = try SameSubjectMesh(keys: 8)
        let unrelated = try TestPKI.root("Unrelated Root CA")
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let verdict = HandshakeVerdict()
        // Made on the loop it is called on, as NIOSSL calls it.
        let callback = try await loop.submit {
            NIOLoopBound(
                PeerVerification.callback(verdict: verdict) { presented in
                    await ServerTrust(certificates: presented, anchors: [unrelated.certificate], anchorsOnly: true).evaluate(.basicX509)
                },
                eventLoop: loop
            )
        }.get()
        let presented = try mesh.presented.map { try NIOSSLCertificate(bytes: Array($0.derBytes), format: .der) }
        let promise = loop.makePromise(of: NIOSSLVerificationResultWithMetadata.self)
        // The callback starts the decision in a later tick of the loop; the connection goes away in this one.
        loop.execute {
            callback.value(presented, promise)
            verdict.abandon()
        }
        guard case .failed = try await promise.futureResult.get() else {
            Issue.record("an abandoned decision verified the peer")
            return
        }
        guard case .untrusted(let failure) = verdict.current else {
            Issue.record("no refusal recorded: \(verdict.current)")
            return
        }
        #expect(failure.code == .pathBuildingLimitExceeded)
        #expect(failure.reason.contains("abandoned"), "\(failure.reason)")
    }
}
