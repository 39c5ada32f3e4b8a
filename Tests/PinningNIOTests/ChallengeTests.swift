import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// Records every challenge a handler was asked, in order.
final class ChallengeLog: Sendable {
    private let box = NIOLockedValueBox<[ProtectionSpace]>([])
    var spaces: [ProtectionSpace] { self.box.withLockedValue { $0 } }
    func record(_ challenge: AuthenticationChallenge) { self.box.withLockedValue { $0.append(challenge.protectionSpace) } }
}

@Suite("Authentication challenges over loopback")
struct ChallengeTests {
    func address(_ port: Int) throws -> SocketAddress { try SocketAddress(ipAddress: "127.0.0.1", port: port) }

    /// A genuine server for api.example.com whose root is a custom anchor (not a platform root), plus a
    /// different chain from a platform root.
    struct Setup {
        let privateChain: TestChain
        let publicChain: TestChain
        let trust: ServerTrust

        init() throws {
            self.privateChain = try TestChain(host: "api.example.com", rootName: "Private Root")
            self.publicChain = try TestChain(host: "cdn.example.com", rootName: "Public Root")
            self.trust = ServerTrust(
                certificates: [],
                anchors: [self.privateChain.root.certificate],
                platformRoots: TrustRoots([self.publicChain.root.certificate])
            )
        }

        var pinnedPolicy: SecurityPolicy {
            SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: self.privateChain.intermediate.certificate)])
        }
    }

    func connect(_ client: ChallengeTLSClient, host: String, port: Int, requestOverride: AuthenticationChallengeOverride? = nil) async throws(PinningConnectionError) -> PinnedConnection {
        let address: SocketAddress
        do { address = try self.address(port) } catch { throw PinningConnectionError(code: .connectFailed, host: host, message: "\(error)") }
        return try await client.connect(host: host, port: port, address: address, group: testGroup, timeout: .seconds(30), requestOverride: requestOverride)
    }

    @Test("default handler, configured host: the policy (with its anchors and pins) decides; both challenges are asked with host and port")
    func configuredHostUsesPolicy() async throws {
        let setup = try Setup()
        let server = try await PlainTLSServer(identity: try setup.privateChain.leaf.tlsIdentity(chain: [setup.privateChain.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let log = ChallengeLog()
        let handler = ChallengeHandler(
            policy: setup.pinnedPolicy, policyHosts: .only(["api.example.com"]),
            override: {
                log.record($0)
                return nil
            })
        let client = ChallengeTLSClient(handler: handler, settings: setup.trust.clientSettings)
        let connection = try await self.connect(client, host: "api.example.com", port: server.port)
        connection.channel.close(promise: nil)
        #expect(connection.handshake.peer.subject == "CN=api.example.com")
        #expect(
            log.spaces == [
                ProtectionSpace(host: "api.example.com", port: server.port, authenticationMethod: .clientCertificate),
                ProtectionSpace(host: "api.example.com", port: server.port, authenticationMethod: .serverTrust),
            ])

        // The same policy with a pin the server does not have: the default handler cancels; the caller sees the
        // policy's reason.
        let wrongPin = ChallengeHandler(policy: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: setup.publicChain.root.certificate)]), policyHosts: .only(["api.example.com"]))
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.connect(ChallengeTLSClient(handler: wrongPin, settings: setup.trust.clientSettings), host: "api.example.com", port: server.port)
        }
        #expect(error?.code == .challengeCancelled)
        #expect(error?.trustFailure?.code == .pinMismatch)
    }

    @Test("default handler, other host: default handling = platform roots only; the private anchor does not extend to it, and it is never 'trust anything'")
    func otherHostDefaultHandling() async throws {
        let setup = try Setup()
        // A server for cdn.example.com from the platform root: accepted by default handling.
        let cdn = try await PlainTLSServer(identity: try setup.publicChain.leaf.tlsIdentity(chain: [setup.publicChain.intermediate.certificate]))
        defer { Task { await cdn.stop() } }
        let handler = ChallengeHandler(policy: setup.pinnedPolicy, policyHosts: .only(["api.example.com"]))
        // The settings form of the initialiser (the test above uses trust:).
        let client = ChallengeTLSClient(handler: handler, settings: setup.trust.settings)
        let connection = try await self.connect(client, host: "cdn.example.com", port: cdn.port)
        connection.channel.close(promise: nil)

        // A server for other.example.com from the private root (a custom anchor of the policy): refused for the
        // unconfigured host, because default handling uses the platform roots only.
        let privateOther = TestChain(
            root: setup.privateChain.root, intermediate: setup.privateChain.intermediate,
            leaf: try TestPKI.leaf("other.example.com", issuer: setup.privateChain.intermediate, dnsNames: ["other.example.com"])
        )
        let other = try await PlainTLSServer(identity: try privateOther.leaf.tlsIdentity(chain: [privateOther.intermediate.certificate]))
        defer { Task { await other.stop() } }
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.connect(client, host: "other.example.com", port: other.port)
        }
        #expect(error?.code == .untrusted)
        #expect(error?.trustFailure?.code == .noPathToAnchor)

        // A self-signed server for an unconfigured host: refused.
        let selfSigned = try TestPKI.selfSigned("iot.example.com", dnsNames: ["iot.example.com"])
        let iot = try await PlainTLSServer(identity: try selfSigned.tlsIdentity())
        defer { Task { await iot.stop() } }
        let iotError = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.connect(client, host: "iot.example.com", port: iot.port)
        }
        #expect(iotError?.code == .untrusted)
    }

    @Test("useCredential(.serverTrust) from an override is never a bypass: a chain the policy refuses stays refused with its TrustFailure")
    func useCredentialIsNotABypass() async throws {
        let setup = try Setup()
        let attacker = try TestChain(host: "api.example.com", rootName: "Attacker Root")
        let server = try await PlainTLSServer(identity: try attacker.leaf.tlsIdentity(chain: [attacker.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let handler = ChallengeHandler(
            policy: setup.pinnedPolicy, policyHosts: .only(["api.example.com"]),
            override: { challenge in
                challenge.protectionSpace.authenticationMethod == .serverTrust ? .useCredential(.serverTrust) : nil
            })
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.connect(ChallengeTLSClient(handler: handler, settings: setup.trust.clientSettings), host: "api.example.com", port: server.port)
        }
        #expect(error?.code == .untrusted)
        #expect(error?.trustFailure != nil)
    }

    @Test("cancel and reject refuse with typed errors; performDefaultHandling on a configured host drops the pins but not validation")
    func dispositionsMapped() async throws {
        let setup = try Setup()
        let server = try await PlainTLSServer(identity: try setup.privateChain.leaf.tlsIdentity(chain: [setup.privateChain.intermediate.certificate]))
        defer { Task { await server.stop() } }
        let serverTrustOnly: @Sendable (AuthenticationChallengeDisposition) -> AuthenticationChallengeOverride = { answer in
            { challenge in challenge.protectionSpace.authenticationMethod == .serverTrust ? answer : nil }
        }
        let handler = ChallengeHandler(policy: setup.pinnedPolicy, policyHosts: .only(["api.example.com"]))
        let client = ChallengeTLSClient(handler: handler, settings: setup.trust.clientSettings)

        let cancelled = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.connect(client, host: "api.example.com", port: server.port, requestOverride: serverTrustOnly(.cancelAuthenticationChallenge))
        }
        #expect(cancelled?.code == .challengeCancelled)

        let rejected = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.connect(client, host: "api.example.com", port: server.port, requestOverride: serverTrustOnly(.rejectProtectionSpace))
        }
        #expect(rejected?.code == .protectionSpaceRejected)

        let wrongKind = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.connect(
                client, host: "api.example.com", port: server.port, requestOverride: serverTrustOnly(.useCredential(.clientIdentity(try setup.privateChain.leaf.tlsIdentity()))))
        }
        #expect(wrongKind?.code == .invalidCredential)

        // Default handling validates against the platform roots only: the private root is not one, so refused.
        let byDefault = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.connect(client, host: "api.example.com", port: server.port, requestOverride: serverTrustOnly(.performDefaultHandling))
        }
        #expect(byDefault?.trustFailure?.code == .noPathToAnchor)

        // The per-request override wins over the per-client one.
        var overridden = handler
        overridden.override = serverTrustOnly(.cancelAuthenticationChallenge)
        let accepted = try await self.connect(
            ChallengeTLSClient(handler: overridden, settings: setup.trust.clientSettings), host: "api.example.com", port: server.port, requestOverride: serverTrustOnly(.useCredential(.serverTrust)))
        accepted.channel.close(promise: nil)
    }

    @Test("client identity is presented only to its configured hosts; cancelling the client-certificate challenge connects nowhere")
    func clientIdentityOnlyForConfiguredHosts() async throws {
        let mtls = try MutualTLSSetup()
        let server = try await MutualTLSTestServer(mtls.server)
        defer { Task { await server.stop() } }
        let identity = try mtls.clientChain.leaf.tlsIdentity(chain: [mtls.clientChain.intermediate.certificate])

        // Configured for device.local: presented, the server accepts and sees the client.
        let forDevice = ChallengeTLSClient(
            handler: ChallengeHandler(identity: identity, identityHosts: .only(["device.local"])),
            settings: mtls.serverTrust.clientSettings
        )
        let accepted = try await self.connect(forDevice, host: "device.local", port: server.port)
        accepted.channel.close(promise: nil)
        let outcome = await server.nextOutcome()
        #expect(try outcome?.get().peer.subject == "CN=client-7")

        // Configured for another host only: no certificate is sent, so the server refuses this client.
        let elsewhere = ChallengeTLSClient(
            handler: ChallengeHandler(identity: identity, identityHosts: .only(["api.example.com"])),
            settings: mtls.serverTrust.clientSettings
        )
        do {
            let connection = try await self.connect(elsewhere, host: "device.local", port: server.port)
            connection.channel.close(promise: nil)
        } catch {
            // TLS 1.3: the client may fail or finish before the server refuses; the server's verdict counts.
        }
        let refused = await server.nextOutcome()
        #expect(refused != nil)
        if case .success = refused { Issue.record("a client without a certificate was accepted") }

        // Cancelling the client-certificate challenge: no connection at all, a typed error.
        let cancelling = ChallengeTLSClient(
            handler: ChallengeHandler(
                identity: identity, identityHosts: .all,
                override: { challenge in
                    challenge.protectionSpace.authenticationMethod == .clientCertificate ? .cancelAuthenticationChallenge : nil
                }),
            settings: mtls.serverTrust.clientSettings
        )
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await self.connect(cancelling, host: "device.local", port: server.port)
        }
        #expect(error?.code == .challengeCancelled)
        #expect(await server.nextOutcome(within: 0.3) == nil)
    }

    @Test("default dispositions, without a connection")
    func defaultDispositions() async throws {
        let setup = try Setup()
        let identity = try setup.privateChain.leaf.tlsIdentity()
        let handler = ChallengeHandler(policy: setup.pinnedPolicy, policyHosts: .only(["API.example.com"]), identity: identity, identityHosts: .only(["api.example.com"]))
        let clientCert = { (host: String) in AuthenticationChallenge(protectionSpace: ProtectionSpace(host: host, port: 443, authenticationMethod: .clientCertificate)) }
        if case .useCredential(.clientIdentity) = await handler.disposition(for: clientCert("Api.Example.com")) {} else { Issue.record("identity not presented to its host") }
        if case .performDefaultHandling = await handler.disposition(for: clientCert("cdn.example.com")) {} else { Issue.record("identity presented to another host") }
        var trust = setup.trust
        trust.certificates = setup.privateChain.presented
        let serverTrust = { (host: String) in AuthenticationChallenge(protectionSpace: ProtectionSpace(host: host, port: 443, authenticationMethod: .serverTrust), serverTrust: trust) }
        if case .useCredential(.serverTrust) = await handler.disposition(for: serverTrust("api.example.com")) {} else { Issue.record("policy did not trust the genuine chain") }
        if case .performDefaultHandling = await handler.disposition(for: serverTrust("cdn.example.com")) {} else { Issue.record("unconfigured host not default-handled") }
    }
}
