import Foundation
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

// Issue 28, item 5: every public error type has a stable code, beside words that may change. These are the
// codes' spellings as a contract: logs, metrics and JSON reports carry them.

@Suite("Public errors carry stable codes")
struct ErrorCodeTests {
    @Test("the core's errors: a bad host, a bad pin, bad TUF JSON, a TUF rule, a bad configuration")
    func coreCodes() throws {
        let pin = #expect(throws: PinError.self) { try Pin("sha256/not-base64") }
        #expect(pin?.code == "invalidPin")
        let host = #expect(throws: PeerNameError.self) { try PeerName("exa mple.com") }
        #expect(host?.code == "invalidHost")
        let json = #expect(throws: TUFJSONError.self) { try TUFJSON.parse(Array("{\"a\": 1, \"a\": 2}".utf8)) }
        #expect(json?.code == "invalidJSON")
        #expect(TUFError(role: "timestamp", rule: .rollback, "version 3 < 4").code == "rollback")
        let configuration = #expect(throws: PinningConfigurationError.self) {
            try PinningConfiguration(data: Data(#"{"version": 1, "domains": {"api.example.com": {"pinz": []}}}"#.utf8), baseDirectory: "/nonexistent")
        }
        #expect(configuration?.code == "unknownField", "\(String(describing: configuration))")
    }

    @Test("PinningNIO's errors: a fetch that found nothing, a key log, a server configuration")
    func nioCodes() throws {
        #expect(TUFFetchError(kind: .notFound, message: "404").code == "notFound")
        #expect(TUFFetchError(kind: .failed, message: "refused").code == "fetchFailed")
        #expect(TLSKeyLogError(path: "/nonexistent/keys.log", reason: "no such directory").code == "keyLogUnusable")
        var relaxed = SecurityPolicy(pinningMode: .none)
        relaxed.allowInvalidCertificates = true
        let chain = try TestChain(host: "codes.example")
        let refused = #expect(throws: MutualTLSServer.ConfigurationError.self) {
            try MutualTLSServer(identity: try chain.leaf.tlsIdentity(chain: []), clientCertificateAuthorities: [chain.root.certificate], clientRule: .evaluator(relaxed))
        }
        #expect(refused?.code == "invalidServerConfiguration")
        let missing = #expect(throws: CRLFiles.LoadError.self) { try CRLFiles.load(["/nonexistent/crl-ü.pem"]) }
        #expect(missing?.code == "crlFileUnusable")
    }
}
