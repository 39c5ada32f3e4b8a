// PKCS#12 identities with a passphrase (the seeds use "fuzz-pass"): the crash-proof loader in front of
// NIOSSL/BoringSSL.
import FuzzSupport
import Pinning
import PinningNIO

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.exportPKI()
    // The PKCS#12 seeds are made by scripts/fuzz.sh with openssl pkcs12 -export from the exported PKI.
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
    do {
        _ = try TLSIdentity.pkcs12(bytes: bytes, passphrase: "fuzz-pass", origin: "<fuzz>")
    } catch {
        _ = String(describing: error)
    }
    return 0
}

/// The entry point SwiftPM's `--defsym main=FuzzPKCS12_main` points at; libFuzzer's driver does the rest.
@_cdecl("FuzzPKCS12_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}
