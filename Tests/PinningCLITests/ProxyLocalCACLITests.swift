import Foundation
import PinningTestSupport
import Testing

// The local CA's "issued again" warning, at start-up and on a SIGHUP reload: the CA certificate is name-constrained
// to the names the configuration covers, so a configuration that covers other names gets a new certificate with
// the same key, and the clients that imported the old one are told to import it again.
@Suite("pinning proxy: the local CA issued again for other names, at start-up and on reload")
struct ProxyLocalCACLITests {
    static let warning =
        "pinning: proxy: warning: the local CA certificate was issued again (same key): the configuration covers other names than the certificate permitted"

    @Test("a SIGHUP reload covering another name warns, then succeeds; a new start with the first configuration warns again")
    func reissuedForOtherNames() async throws {
        let fixture = try await ProxyFixture()
        defer { fixture.stop() }
        #expect(!fixture.proxy.stderr.contains("issued again"), "a CA created on first run is not issued again: \(fixture.proxy.stderr)")

        let config = fixture.directory.path("pinning.json")
        let first = try String(contentsOfFile: config, encoding: .utf8)
        let pins = "\"pins\": [\"\(ProxyFixture.unrelatedPins[0])\", \"\(ProxyFixture.unrelatedPins[1])\"]"
        let widened = first.replacingOccurrences(of: "\"domains\": {", with: "\"domains\": {\n  \"more.test\": {\(pins)},")
        #expect(widened != first)
        _ = try fixture.directory.write("pinning.json", widened)
        kill(fixture.proxy.process.processIdentifier, SIGHUP)
        let deadline = Date().addingTimeInterval(30)
        while !fixture.proxy.stderr.contains("reload succeeded") && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let reloaded = fixture.proxy.stderr
        let warned = try #require(reloaded.range(of: Self.warning), "\(reloaded)")
        let succeeded = try #require(reloaded.range(of: "reload succeeded: "), "\(reloaded)")
        #expect(reloaded[succeeded.upperBound...].hasPrefix("\(config), 3 entries"), "\(reloaded)")
        #expect(warned.lowerBound < succeeded.lowerBound, "the warning comes before the reload's line: \(reloaded)")
        #expect(reloaded.contains("must import \(fixture.caPath) again"), "\(reloaded)")
        fixture.proxy.kill()

        // The CA directory now permits three names; the first configuration covers two.
        _ = try fixture.directory.write("pinning.json", first)
        let again = try Subprocess(
            ["proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", fixture.directory.path("ca")], in: fixture.directory)
        defer { again.kill() }
        let lines = try await ProxyFixture.startupLines(again, count: 2)
        #expect(lines.first?.hasPrefix("proxy listening on http://127.0.0.1:") == true, "\(lines) / \(again.stderr)")
        #expect(again.stderr.contains(Self.warning), "\(again.stderr)")
    }
}
