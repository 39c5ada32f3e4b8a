import Foundation
import PinningPKI
import Testing
import X509

/// The README's "Test PKIs in your own tests" snippet, compiled and checked: what a user of the PinningPKI
/// product writes, with nothing but `import PinningPKI`.
@Suite("PinningPKI as the README shows it")
struct PinningPKIReadmeTests {
    @Test("the README snippet mints what it says")
    func readmeSnippet() throws {
        let chain = try TestChain(host: "api.example.com")
        let device = try TestChain(host: "device-7", key: .ed25519, leafUsage: .clientAuth)
        let expired = try TestPKI.leaf(
            "old.example.com", issuer: chain.intermediate, dnsNames: ["old.example.com"],
            notValidBefore: Date() - 30 * 86400, notValidAfter: Date() - 86400)
        let constrained = try TestPKI.intermediate("Fleet CA", issuer: chain.root, permittedDNSDomains: ["fleet.internal"])
        let pem = TestPKI.pemBundle(chain.presented)
        let key = chain.leaf.privateKeyPEM

        #expect(chain.presented.map(\.subject.description) == ["CN=api.example.com", "CN=Test Intermediate CA"])
        #expect(device.leaf.certificate.signatureAlgorithm == .ed25519)
        #expect(expired.certificate.notValidAfter < Date())
        let constraints = try constrained.certificate.extensions.nameConstraints
        #expect(constraints.map { Array($0.permittedDNSDomains) } == ["fleet.internal"])
        #expect(pem.components(separatedBy: "-----BEGIN CERTIFICATE-----").count == 3)
        #expect(key.hasPrefix("-----BEGIN PRIVATE KEY-----"))
    }
}
