// PKCS#7 / CMS certificate bundles (.p7b/.p7c), as DER and inside a "-----BEGIN PKCS7-----" block.
import Foundation
import FuzzSupport
import Pinning
import X509

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.exportPKI()
    // The PKCS#7 seeds themselves are made by scripts/fuzz.sh with openssl crl2pkcs7 from the exported PKI.
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
    let armoured = "-----BEGIN PKCS7-----\n"
        + Data(bytes).base64EncodedString(options: [.lineLength64Characters]) + "\n-----END PKCS7-----\n"
    for input in [bytes, Array(armoured.utf8)] {
        do {
            let certificates = try CertificateLoader.certificates(from: input, origin: "<fuzz>")
            precondition(!certificates.isEmpty, "the loader returned no certificate without throwing")
            for certificate in certificates {
                _ = Pin(spkiOf: certificate)
            }
        } catch {
            _ = String(describing: error)
        }
    }
    return 0
}

/// The entry point SwiftPM's `--defsym main=FuzzPKCS7_main` points at; libFuzzer's driver does the rest.
@_cdecl("FuzzPKCS7_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}
