// Pin strings ("sha256/BASE64", bare BASE64, and everything else a user may type).
import FuzzSupport
import Pinning

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.exportPKI()
    let pin = Pin(spkiOf: FuzzPKI.shared.leaf)
    FuzzSeeds.write([
        "prefixed": Array(pin.description.utf8),
        "bare": Array(pin.base64.utf8),
        "spaced": Array("  \(pin.description) ".utf8),
        "sha1": Array("sha1/2jmj7l5rSw0yVb/vlWAYkK/YBwk=".utf8),
        "upper": Array(("SHA256/" + pin.base64).utf8),
        "unpadded": Array(String(pin.base64.dropLast()).utf8),
    ])
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
    let text = String(decoding: bytes, as: UTF8.self)
    do {
        let pin = try Pin(text)
        precondition(pin.sha256.count == 32, "a pin that is not 32 bytes was accepted")
        // Round trip: the canonical text of a pin parses back to the same pin.
        do {
            let again = try Pin(pin.description)
            precondition(again == pin, "\(pin) does not round-trip")
        } catch {
            preconditionFailure("\(pin) does not round-trip: \(error)")
        }
    } catch {
        _ = String(describing: error)
    }
    return 0
}

/// The entry point SwiftPM's `--defsym main=FuzzPin_main` points at; libFuzzer's driver does the rest.
@_cdecl("FuzzPin_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}
