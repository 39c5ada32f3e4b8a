import Foundation
@_spi(FixedValidationTime) import Pinning
import PinningTestSupport
import Testing

@testable import PinningNIO

/// Issue 28: clients hold TrustSettings, and a ServerTrust template can no longer freeze a client's clock. Every
/// deprecated `trust:` initialiser (PinnedTLSClient, PinnedHTTPClient, ChallengeTLSClient, HTTPPinFailureReporter,
/// AsyncHTTPClientPinning) turns its template into settings through `TrustSettings.ofTemplate(_:for:)` first.
@Suite("A ServerTrust template cannot freeze a client's clock")
struct FixedValidationTimeTests {
    @Test("A template that fixes ServerTrust.validationTime is refused, naming the initialiser")
    func fixedInstantRefused() throws {
        let frozen = ServerTrust(certificates: [], validationTime: Date(timeIntervalSince1970: 1_600_000_000))
        let error = #expect(throws: FixedValidationTimeError.self) {
            try TrustSettings.ofTemplate(frozen, for: "PinnedTLSClient(trust:)")
        }
        #expect(error?.code == "fixedValidationTime")
        #expect(error?.description.hasPrefix("PinnedTLSClient(trust:): ") == true)
        #expect(error?.description.contains("\n") == false)
    }

    @Test("A template without a fixed instant gives its settings; an instant set through the SPI is kept")
    func templatesWithoutAFrozenClock() throws {
        let root = try TestPKI.root("Template Root")
        let plain = ServerTrust(certificates: [], anchors: [root.certificate], anchorsOnly: true)
        let given = try TrustSettings.ofTemplate(plain, for: "test")
        #expect(given.anchors == [root.certificate] && given.anchorsOnly && given.validationTime == nil)
        let instant = Date(timeIntervalSince1970: 1_700_000_000)
        let replay = ServerTrust(certificates: [], settings: plain.settings.validatingAt(instant))
        let settings = try TrustSettings.ofTemplate(replay, for: "test")
        #expect(settings.validationTime == instant)
    }

    @Test("Each handshake's trust comes from the client's settings and the presented chain only")
    func handshakeTrustComesFromSettings() async throws {
        let chain = try TestChain(host: "settings.example")
        let settings = TrustSettings(anchors: [chain.root.certificate], anchorsOnly: true)
        let client = try PinnedTLSClient(evaluator: SecurityPolicy.default, settings: settings)
        #expect(client.settings.anchors == [chain.root.certificate] && client.settings.anchorsOnly)
        #expect(client.settings.validationTime == nil, "no instant unless the SPI sets one: each handshake is judged now")
    }
}
