// Certificate loading (DER, PEM bundles, and whatever else a file may hold): CertificateLoader, the entry
// point for every certificate file, PEM bundle and stdin the library and the CLI read.
import Foundation
import FuzzSupport
import Pinning
import X509

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.exportPKI()
    let pki = FuzzPKI.shared
    let chain = [pki.leaf, pki.intermediate, pki.root]
    FuzzSeeds.write([
        "leaf.der": FuzzPKI.der(pki.leaf),
        "root.der": FuzzPKI.der(pki.root),
        "chain.pem": FuzzPKI.pem(chain),
        "chain-crlf.pem": Array(String(decoding: FuzzPKI.pem(chain), as: UTF8.self)
            .replacingOccurrences(of: "\n", with: "\r\n").utf8),
        "leaf-with-key.pem": FuzzPKI.leafKeyPEM + FuzzPKI.pem([pki.leaf]),
        "trusted.pem": Array(String(decoding: FuzzPKI.pem([pki.root]), as: UTF8.self)
            .replacingOccurrences(of: "CERTIFICATE", with: "TRUSTED CERTIFICATE").utf8),
        "text-around.pem": Array("Subject: fuzz\n".utf8) + FuzzPKI.pem([pki.leaf]) + Array("trailer\n".utf8),
    ])
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
    do {
        let certificates = try CertificateLoader.certificates(from: bytes, origin: "<fuzz>")
        precondition(!certificates.isEmpty, "the loader returned no certificate without throwing")
        for certificate in certificates {
            _ = Pin(spkiOf: certificate).description
            _ = certificate.description
        }
    } catch {
        _ = String(describing: error)
    }
    // The listing path (inspect, pins): our own TBSCertificate reader runs on whatever swift-certificates refuses.
    let listing = CertificateLoader.inspect(from: bytes, origin: "<fuzz>")
    precondition(!listing.certificates.isEmpty || !listing.failures.isEmpty, "the listing lost the input")
    for certificate in listing.certificates {
        _ = certificate.pin.description
        _ = certificate.info.subject
    }
    return 0
}

/// The entry point SwiftPM's `--defsym main=FuzzCertificateLoading_main` points at; libFuzzer's driver does the rest.
@_cdecl("FuzzCertificateLoading_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}
