import Foundation
import PinningTestSupport
import Testing

/// `pinning check --identity-cert CHAIN --identity-key KEY`: a refusal names the option whose file is at fault (the
/// pair was once named together for every failure, so a user with a good certificate and a bad key was sent to
/// look at both). A key that is not the certificate's names both: either file may be the wrong one. In process
/// (``InProcessCLI/checkIdentityRefusal(_:)``): the identity is loaded before anything connects.
@Suite("pinning check: identity errors name the option at fault")
struct CheckIdentityOptionCLITests {
    @Test("each file's failure names its own option; a key of another certificate names both")
    func optionAtFault() throws {
        let directory = try TemporaryDirectory(prefix: "pinning-identity-option")
        defer { directory.remove() }
        let client = try TestChain(host: "client-7", ipAddresses: [], leafUsage: .clientAuth)
        let other = try TestChain(host: "other")
        let cert = try directory.write("client-chain.pem", TestPKI.pemBundle(client.presented))
        let key = try directory.write("client.key", client.leaf.privateKeyPEM)
        let otherKey = try directory.write("other.key", other.leaf.privateKeyPEM)
        let missing = directory.path("missing.pem")
        let certificatePEM = client.leaf.certificatePEM
        let truncatedCert = try directory.write("truncated.pem", String(certificatePEM.prefix(certificatePEM.count / 2)))
        let keyPEM = client.leaf.privateKeyPEM
        let truncatedKey = try directory.write("truncated.key", String(keyPEM.prefix(keyPEM.count / 2)))
        let combined = try directory.write("combined.pem", TestPKI.pemBundle(client.presented) + keyPEM)
        let keyOnly = try directory.write("key-only.pem", keyPEM)

        let cases: [(String, [String], String?)] = [
            ("missing certificate file", ["--identity-cert", missing, "--identity-key", key], "--identity-cert \(missing): unreadable file"),
            ("missing key file", ["--identity-cert", cert, "--identity-key", missing], "--identity-key \(missing): unreadable file"),
            ("truncated certificate", ["--identity-cert", truncatedCert, "--identity-key", key], "--identity-cert \(truncatedCert): corrupt file"),
            ("truncated key", ["--identity-cert", cert, "--identity-key", truncatedKey], "--identity-key \(truncatedKey): "),
            ("a key as the certificate", ["--identity-cert", keyOnly, "--identity-key", key], "--identity-cert \(keyOnly): "),
            (
                "a key of another certificate", ["--identity-cert", cert, "--identity-key", otherKey],
                "--identity-cert/--identity-key \(otherKey): no certificate matching the key: the key does not belong to the first certificate of \(cert) "
            ),
            ("one file holding both", ["--identity-cert", combined, "--identity-key", combined], nil),
            ("one file with a key but no certificate, given for both", ["--identity-cert", keyOnly, "--identity-key", keyOnly], "--identity-cert \(keyOnly): "),
            ("one file with certificates but no key, given for both", ["--identity-cert", cert, "--identity-key", cert], "--identity-key \(cert): "),
        ]
        for (name, arguments, expected) in cases {
            let refusal = InProcessCLI.checkIdentityRefusal(arguments)
            guard let expected else {
                #expect(refusal == nil, "\(name): \(refusal ?? "")")
                continue
            }
            #expect(refusal?.hasPrefix("pinning: \(expected)") == true, "\(name): \(refusal ?? "loaded")")
            #expect(refusal?.contains("\n") == false, "\(name): one line")
        }
    }
}
