import Foundation
import Pinning
public import PinningPKI
import X509

extension TestChain {
    /// A device chain (root → issuing CA → device) whose names are not ASCII (UTF8String subjects; no SAN, as
    /// many device certificates have none): the mTLS adapters' tests check they reach handlers intact.
    public static func device(rootName: String, deviceName: String = "gerät-7") throws -> TestChain {
        let root = try TestPKI.root(rootName)
        let intermediate = try TestPKI.intermediate("Client Issuing CA Zürich", issuer: root)
        let leaf = try TestPKI.leaf(deviceName, issuer: intermediate, usage: .clientAuth, includeSAN: false)
        return TestChain(root: root, intermediate: intermediate, leaf: leaf)
    }
}

extension TestCRL {
    /// A CRL from `issuer` listing `revoked` (key compromise, a minute ago), valid from two minutes ago for a day.
    public static func revoking(_ revoked: TestIdentity, issuer: TestIdentity) throws -> TestCRL {
        try TestCRL(
            issuer: issuer,
            entries: [.init(serialNumber: revoked.certificate.serialNumber, revocationDate: Date().addingTimeInterval(-60), reason: .keyCompromise)],
            number: 1,
            thisUpdate: Date().addingTimeInterval(-120),
            nextUpdate: Date().addingTimeInterval(86400)
        )
    }
}
