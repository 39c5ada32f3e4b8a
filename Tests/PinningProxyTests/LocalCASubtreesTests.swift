import Foundation
import Pinning
import PinningTestSupport
import SwiftASN1
import Testing
import X509

@testable import PinningProxy

/// The local CA's name constraints for large configurations (new-user trial 3, defect 2): the certificate is
/// written as PEM in linear time, a name below a wildcard entry's subtree adds no subtree, and a configuration
/// needing more than ``ProxyCertificateAuthority/maximumPermittedDNSDomains`` subtrees is refused, never widened.
@Suite("PinningProxy: the local CA's subtrees")
struct LocalCASubtreesTests {
    static let pins = PinningProxyTests.pins

    static func coverage(exact count: Int, wildcard: Bool = false) -> [PinningConfiguration.Entry.Coverage] {
        var coverage = (0..<count).map { PinningConfiguration.Entry.Coverage.exact("host-\($0).fleet.example") }
        if wildcard { coverage.append(.oneLabel(suffix: "fleet.example")) }
        coverage.append(.exact("api.example.com"))
        return coverage
    }

    @Test("a name inside another listed subtree adds none; a name that only ends with the same characters is kept")
    func redundantNamesDropped() {
        let coverage: [PinningConfiguration.Entry.Coverage] = [
            .exact("host-1.fleet.example"), .exact("a.b.fleet.example"), .oneLabel(suffix: "fleet.example"), .exact("xfleet.example"),
            .anyDepth(suffix: "corp.example"), .exact("corp.example"), .exact("api.example.com"), .exact("127.0.0.1"),
        ]
        #expect(ProxyCertificateAuthority.permittedDNSDomains(coverage) == ["api.example.com", "corp.example", "fleet.example", "xfleet.example"])
        // Without the wildcard, every exact name is its own subtree.
        #expect(ProxyCertificateAuthority.permittedDNSDomains([.exact("host-1.fleet.example"), .exact("a.b.fleet.example")]) == ["a.b.fleet.example", "host-1.fleet.example"])
    }

    @Test(
        "at the bound the CA is issued with every subtree, its PEM exactly swift-asn1's; one more is refused naming the wildcard to use; the wildcard makes it one subtree",
        .timeLimit(.minutes(5)))
    func bound() throws {
        let directory = try TemporaryDirectory(prefix: "pinning-proxy-subtrees")
        defer { directory.remove() }
        let maximum = ProxyCertificateAuthority.maximumPermittedDNSDomains
        let atBound = try ProxyCertificateAuthority.load(directory: directory.path("at"), coverage: Self.coverage(exact: maximum - 1))
        #expect(atBound.permittedDNSDomains.count == maximum)
        let written = try String(contentsOfFile: directory.path("at/ca.pem"), encoding: .utf8)
        #expect(written == (try atBound.certificate.serializeAsPEM().pemString) + "\n")
        #expect(ProxyCertificateAuthority.permittedDNSDomains(of: try Certificate(pemEncoded: written)).count == maximum)

        let over = #expect(throws: ProxyError.self) {
            try ProxyCertificateAuthority.load(directory: directory.path("over"), coverage: Self.coverage(exact: maximum))
        }
        #expect(over?.message.contains("\(maximum + 1) name-constraint subtrees") == true, "\(String(describing: over))")
        #expect(over?.message.contains("\"*.fleet.example\"") == true && over?.message.contains("\(maximum) names below it") == true, "\(String(describing: over))")
        #expect(over?.message.contains("\n") == false)
        #expect(!FileManager.default.fileExists(atPath: directory.path("over/ca.pem")), "refused before anything is issued")

        let grouped = try ProxyCertificateAuthority.load(directory: directory.path("grouped"), coverage: Self.coverage(exact: maximum, wildcard: true))
        #expect(grouped.permittedDNSDomains == ["api.example.com", "fleet.example"])
        #expect(grouped.permits("host-7.fleet.example") && !grouped.permits("other.example"))
    }
}
