import Foundation
import NIOCore
import NIOHTTP1
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// The live rotation of issue 29 item 4, for the library: a `PinnedHTTPClient` follows a pin set while the
/// upstream's key is rotated to its backup pin and a new pin set withdraws the old key. The client follows within
/// the refresh interval without being rebuilt, and a request started before the change completes.
@Suite("Pin set rotation, live, in a PinnedHTTPClient")
struct PinSetRotationTests {
    /// Waits (polling, bounded) until `condition` holds.
    static func eventually(within seconds: Double = 60, _ condition: () async -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return await condition()
    }

    @Test("rotated to the backup key and a new pin set published: the client follows on its schedule; the request in flight completes")
    func rotation() async throws {
        let keys = try PinSetRotationKeys(rootName: "Rotation Test Root")
        let directory = try TemporaryDirectory(prefix: "pinset-rotation")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        try repository.publish(keys.configuration([keys.a, keys.b]), files: ["root.pem": keys.anchor])

        let fetchClient = try PinnedHTTPClient(evaluator: SecurityPolicy.defaultEvaluation)
        let updater = try PinSetUpdater(
            bootstrapRoot: repository.bootstrapRoot, directory: directory.path("state"), metadataURL: repository.metadataURL,
            options: PinSetUpdater.Options(refreshInterval: .milliseconds(300), jitter: 0.1),
            fetcher: TUFHTTPFetcher(client: fetchClient, allowsPlainHTTP: true))
        #expect(await updater.refresh() == .updated(version: 2))
        let schedule = Task { await updater.run() }
        defer { schedule.cancel() }

        let server = try await RotatingHTTPSServer(identity: try keys.a.tlsIdentity())
        defer { Task { await server.stop() } }
        // A second server still presenting key A after the rotation (a stale replica, or someone holding the old key).
        let stale = try await RotatingHTTPSServer(identity: try keys.a.tlsIdentity())
        defer { Task { await stale.stop() } }
        let client = try PinnedHTTPClient(configurationSource: updater, configuration: PinnedHTTPClientConfiguration(requestTimeout: .seconds(120)))
        defer { Task { await client.shutdown() } }
        let loopback: PinnedHTTPClient.Resolve = { _, port in try? SocketAddress(ipAddress: "127.0.0.1", port: port) }
        @Sendable func url(_ port: Int, _ path: String) -> URL { URL(string: "https://api.test:\(port)\(path)")! }

        let first = try await client.get(url(server.port, "/hello"), resolve: loopback)
        #expect(first.status == .ok && first.presentedChain.first == keys.a.certificate)

        // A long request under pin set 2, on key A.
        let long = Task { try await client.get(url(server.port, "/long"), resolve: loopback) }
        #expect(await Self.eventually { server.longRequestsStarted == 1 })

        // The upstream's key is rotated to its backup pin; the new pin set withdraws A and adds C as the backup.
        try server.rotate(to: try keys.b.tlsIdentity())
        try repository.publish(keys.configuration([keys.b, keys.c]), files: ["root.pem": keys.anchor])
        #expect(await Self.eventually { updater.currentConfiguration()?.generation == 3 }, "followed on the schedule: \(updater.status)")

        let rotated = try await client.get(url(server.port, "/hello"), resolve: loopback)
        #expect(rotated.status == .ok && rotated.presentedChain.first == keys.b.certificate)
        let refused = await #expect(throws: PinningConnectionError.self) {
            _ = try await client.get(url(stale.port, "/hello"), resolve: loopback)
        }
        #expect(refused?.trustFailure?.code == .pinMismatch, "key A is withdrawn by pin set 3: \(String(describing: refused))")

        // The request started under pin set 2 was not dropped: it completes on its connection, key A's.
        server.releaseLongRequests()
        let finished = try await long.value
        #expect(finished.status == .ok && finished.bodyText == "done /long")
        #expect(finished.presentedChain.first == keys.a.certificate)
        // That connection, trusted under pin set 2, is not reused for a new request: a new one presents key B.
        let after = try await client.get(url(server.port, "/hello"), resolve: loopback)
        #expect(after.presentedChain.first == keys.b.certificate)
        await fetchClient.shutdown()
    }
}
