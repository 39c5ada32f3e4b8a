import Foundation
import NIOCore
import NIOPosix
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

/// `TLSKeyLog` on the NIO types (issue 15): a `MutualTLSServer` and a `PinnedTLSClient` each given a key log write
/// the same handshake's secrets (the same client random on both sides), in the NSS format Wireshark reads.
@Suite("TLSKeyLog on PinnedTLSClient and MutualTLSServer")
struct TLSKeyLogTests {
    @Test("client and server log the same TLS 1.3 handshake; the files are mode 0600")
    func bothSides() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-keylog-nio")
        defer { directory.remove() }
        let clientLog = try TLSKeyLog(path: directory.path("client.keys"))
        let serverLog = try TLSKeyLog(path: directory.path("server.keys"))
        let setup = try MutualTLSSetup()
        var configuration = MutualTLSServer.Configuration(
            identity: try setup.serverChain.leaf.tlsIdentity(chain: [setup.serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [setup.clientChain.root.certificate])
        configuration.keyLog = serverLog
        let server = try MutualTLSServer(configuration: configuration)
        let running = try await MutualTLSTestServer(server)
        defer { Task { await running.stop() } }
        let client = try PinnedTLSClient(
            evaluator: SecurityPolicy.default, settings: setup.serverTrust.clientSettings,
            identity: try setup.clientChain.leaf.tlsIdentity(chain: [setup.clientChain.intermediate.certificate]), keyLog: clientLog)
        let outcome = try await setup.serverOutcome(client, on: running)
        guard case .success = try #require(outcome) else {
            Issue.record("the handshake failed: \(String(describing: outcome))")
            return
        }
        func secrets(_ name: String) throws -> Set<String> {
            Set(try String(contentsOfFile: directory.path(name), encoding: .utf8).split(separator: "\n").map(String.init))
        }
        let clientLines = try secrets("client.keys")
        let serverLines = try secrets("server.keys")
        let labels = Set(clientLines.compactMap { $0.split(separator: " ").first.map(String.init) })
        #expect(labels.isSuperset(of: ["CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"]), "\(labels)")
        // Each line: LABEL, 32-byte client random in hex, secret in hex. Both sides wrote the same handshake.
        #expect(clientLines.allSatisfy { $0.split(separator: " ").count == 3 && $0.split(separator: " ")[1].count == 64 })
        #expect(!clientLines.isDisjoint(with: serverLines), "client \(clientLines) server \(serverLines)")
        for name in ["client.keys", "server.keys"] {
            let mode = try FileManager.default.attributesOfItem(atPath: directory.path(name))[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(name): \(String(describing: mode))")
        }
        #expect(clientLog.writeFailure == nil && serverLog.writeFailure == nil)
    }

    @Test("refusals name the file: a directory, a missing parent, a file other users may read")
    func refusals() throws {
        let directory = try TemporaryDirectory(prefix: "pinning-keylog-nio")
        defer { directory.remove() }
        #expect(throws: TLSKeyLogError.self) { try TLSKeyLog(path: directory.path) }
        #expect(throws: TLSKeyLogError.self) { try TLSKeyLog(path: directory.path("missing/keys.log")) }
        let shared = try directory.write("shared.log", "")
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: shared)
        do {
            _ = try TLSKeyLog(path: shared)
            Issue.record("a group-readable key log was accepted")
        } catch {
            #expect(error.description == "cannot use the key log \(shared): other users may read it (mode 640): session keys must stay private; chmod 600 it or choose a new file")
        }
        #expect(try TLSKeyLog.fromEnvironment([:]) == nil)
        #expect(try TLSKeyLog.fromEnvironment(["SSLKEYLOGFILE": ""]) == nil)
        #expect(try TLSKeyLog.fromEnvironment(["SSLKEYLOGFILE": directory.path("env.log")])?.path == directory.path("env.log"))
    }
}
