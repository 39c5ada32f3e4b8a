import Foundation
import Pinning
import Testing

@Suite("Configuration: the clientIdentity field of an entry")
struct ClientIdentityConfigurationTests {
    static let pins = #"["sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "sha256/BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA="]"#

    static func load(_ identity: String) throws(PinningConfigurationError) -> PinningConfiguration {
        let text = #"{"version": 1, "domains": {"api.example.com": {"pins": \#(Self.pins), "clientIdentity": \#(identity)}}}"#
        return try PinningConfiguration(data: Data(text.utf8), baseDirectory: "/etc/pinning", origin: "test.json")
    }

    @Test("PKCS#12 with a passphrase variable, and PEM certificate + key; relative paths resolve against the file's directory")
    func forms() throws {
        let p12 = try Self.load(#"{"pkcs12": "device.p12", "passphraseEnv": "DEVICE_P12_PASS"}"#).entries[0].clientIdentity
        #expect(p12?.files == .pkcs12("/etc/pinning/device.p12"))
        #expect(p12?.passphraseEnvironmentVariable == "DEVICE_P12_PASS")
        let pem = try Self.load(#"{"certificate": "certs/chain.pem", "key": "/keys/key.pem"}"#).entries[0].clientIdentity
        #expect(pem?.files == .pem(certificateChain: "/etc/pinning/certs/chain.pem", privateKey: "/keys/key.pem"))
        #expect(pem?.passphraseEnvironmentVariable == nil)
        #expect(try Self.load(#"{"pkcs12": "d.p12"}"#).entries[0].clientIdentity?.passphraseEnvironmentVariable == nil)
    }

    @Test("it encodes back as written")
    func roundTrip() throws {
        let configuration = try Self.load(#"{"certificate": "certs/chain.pem", "key": "key.pem", "passphraseEnv": "KEY_PASS"}"#)
        let data = try JSONEncoder().encode(configuration)
        let again = try PinningConfiguration(data: data, baseDirectory: "/etc/pinning")
        #expect(again.entries[0].clientIdentity == configuration.entries[0].clientIdentity)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains("\"certificate\":\"certs\\/chain.pem\"") || text.contains("\"certificate\":\"certs/chain.pem\""), "\(text)")
    }

    @Test(
        "each mistake is refused, naming the field",
        arguments: [
            (#""device.p12""#, "clientIdentity", "must be an object"),
            (#"{}"#, "clientIdentity", "names no file"),
            (#"{"pkcs12": "a.p12", "certificate": "c.pem", "key": "k.pem"}"#, "clientIdentity", "not both"),
            (#"{"certificate": "c.pem"}"#, "clientIdentity.key", "missing"),
            (#"{"key": "k.pem"}"#, "clientIdentity.certificate", "missing"),
            (#"{"pkcs12": ""}"#, "clientIdentity.pkcs12", "empty"),
            (#"{"pkcs12": 12}"#, "clientIdentity.pkcs12", "path string"),
            (#"{"pkcs12": "a.p12", "passphraseEnv": "1BAD-NAME"}"#, "clientIdentity.passphraseEnv", "not an environment variable name"),
            (#"{"pkcs12": "a.p12", "passphrase": "secret"}"#, "clientIdentity.passphrase", "unknown field"),
        ])
    func mistakes(identity: String, field: String, message: String) {
        do {
            _ = try Self.load(identity)
            Issue.record("\(identity) was accepted")
        } catch {
            #expect(error.problems.contains { $0.field == field && $0.message.contains(message) }, "\(error)")
        }
    }

    @Test("an exclusion entry cannot carry one (the excluded host is not pinned)")
    func notOnExclusions() {
        let text = #"""
            {"version": 1, "domains": {"**.example.com": {"pins": \#(Self.pins)},
             "www.example.com": {"excludeSubdomainFromParentPolicy": true, "clientIdentity": {"pkcs12": "a.p12"}}}}
            """#
        #expect(throws: PinningConfigurationError.self) {
            _ = try PinningConfiguration(data: Data(text.utf8), baseDirectory: "/")
        }
    }
}
