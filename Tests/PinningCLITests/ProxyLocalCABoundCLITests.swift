import Foundation
import PinningTestSupport
import Testing

/// `pinning proxy` with a pin set that covers more DNS names than the local CA lists (10,000): it once never started
/// (the CA's PEM encoding was quadratic; new-user trial 3, defect 2). Now it is refused in one line naming the pin
/// set and the wildcard entry to use: at start-up (exit 2), and as a new version of a followed pin set (not applied,
/// the previous one stays). The constraints are never widened.
@Suite("pinning proxy: a pin set too large for the local CA", .serialized)
struct ProxyLocalCABoundCLITests {
    static let pins = ProxyFixture.unrelatedPins

    /// A configuration with `count` exact names under fleet.example (and `*.fleet.example` when `wildcard`).
    static func configuration(_ count: Int, wildcard: Bool = false) -> [UInt8] {
        var domains = (0..<count).map { #""h\#($0).fleet.example": {"pins": ["\#(pins[0])", "\#(pins[1])"]}"# }
        if wildcard { domains.append(#""*.fleet.example": {"pins": ["\#(pins[0])", "\#(pins[1])"]}"#) }
        return Array(#"{"version": 1, "domains": {\#(domains.joined(separator: ",\n"))}}"#.utf8)
    }

    @Test("refused at start (exit 2, one line naming the pin set and *.fleet.example) and as an update (the previous version stays)", .timeLimit(.minutes(5)))
    func refused() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-proxy-ca-bound")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        let root = try directory.write("root.json", String(decoding: repository.bootstrapRoot, as: UTF8.self))
        let metadataURL = repository.metadataURL.absoluteString
        func proxy(_ state: String) throws -> Subprocess {
            try Subprocess(
                [
                    "proxy", "--pinset", metadataURL, "--pinset-root", root, "--pinset-dir", directory.path(state), "--pinset-refresh", "0.3",
                    "--listen", "127.0.0.1:0", "--ca-dir", directory.path("ca-\(state)"),
                ],
                in: directory)
        }

        // Version 2: 10,000 names and the wildcard: one subtree, the proxy starts.
        try repository.publish(Self.configuration(10_000, wildcard: true))
        let following = try proxy("following")
        defer { following.kill() }
        let lines = try await ProxyFixture.startupLines(following, count: 2)
        #expect(lines.first?.hasPrefix("proxy listening on ") == true, "\(lines) \(following.stderr)")

        // Version 3: 10,001 exact names, no wildcard: not applied; the proxy goes on with version 2.
        try repository.publish(Self.configuration(10_001))
        let refusedUpdate = await PinSetFollowCLITests.eventually { following.stderr.contains("reload refused, pin set version 3 not applied") }
        #expect(refusedUpdate, "\(following.stderr)")
        #expect(following.stderr.contains("10001 name-constraint subtrees") && following.stderr.contains("\"*.fleet.example\""), "\(following.stderr)")
        #expect(following.process.isRunning)

        // A proxy starting on version 3: exit 2, one line.
        let starting = try proxy("starting")
        defer { starting.kill() }
        let status = await starting.wait(seconds: 120)
        #expect(status == 2, "\(starting.stderr)")
        let refusal = starting.stderr.split(separator: "\n").filter { $0.contains("name-constraint subtrees") }
        #expect(refusal.count == 1 && refusal.first?.hasPrefix("pinning: ") == true, "\(starting.stderr)")
        #expect(refusal.first?.contains("the pin set (version 3 from \(metadataURL)): the local CA would need 10001 name-constraint subtrees") == true, "\(starting.stderr)")
        #expect(refusal.first?.contains("e.g. an entry \"*.fleet.example\" (or \"**.fleet.example\") is one subtree for the 10001 names below it") == true, "\(starting.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.path("ca-starting/ca.pem")))
        #expect(starting.stdout.isEmpty, "\(starting.stdout)")
    }
}
