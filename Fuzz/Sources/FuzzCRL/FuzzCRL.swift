// Certificate revocation lists (issue 14): DER and PEM, as `--crl` files and downloads will hand them to the core.
import Foundation
import FuzzSupport
import Pinning
import PinningPKI
import X509

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.exportPKI()
    do {
        let root = try TestPKI.root("Fuzz CRL Root")
        let leaf = try TestPKI.leaf("revoked.fuzz", issuer: root, dnsNames: ["revoked.fuzz"])
        let now = Date(timeIntervalSince1970: 1_767_225_600)
        let listed = try TestCRL(
            issuer: root, entries: [.init(serialNumber: leaf.certificate.serialNumber, revocationDate: now, reason: .keyCompromise)], number: 42,
            thisUpdate: now, nextUpdate: now.addingTimeInterval(86400))
        let empty = try TestCRL(issuer: root, entries: [], number: 0, thisUpdate: now, nextUpdate: nil)
        FuzzSeeds.write(["listed.der": listed.der, "listed.pem": Array(listed.pem.utf8), "empty.der": empty.der])
    } catch {
        preconditionFailure("cannot make the CRL seeds: \(error)")
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
    do {
        for crl in try CertificateRevocationList.read(bytes) {
            // Everything a checker touches: look-ups, the reason text, the signature against a real CA.
            _ = crl.entry(for: FuzzPKI.shared.leaf)
            for entry in crl.entries.prefix(8) {
                precondition(crl.entry(forSerialNumber: entry.serialNumber) != nil, "a listed serial is not found by look-up")
            }
            _ = crl.unusable
            do {
                try crl.verifySignature(issuer: FuzzPKI.shared.root)
            } catch {
                _ = error.description
            }
        }
    } catch {
        _ = error.description
    }
    return 0
}

/// The entry point SwiftPM's `--defsym main=FuzzCRL_main` points at; libFuzzer's driver does the rest.
@_cdecl("FuzzCRL_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}
