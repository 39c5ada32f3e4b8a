// Evaluation of a fuzzed chain against the fixed fuzzing root: the input is a sequence of records (2-byte
// big-endian length, then a certificate's DER), the presented chain in order. Anchors only (no platform
// roots), fixed validation time, host "fuzz.example", once without and once with a pin.
import FuzzSupport
import Pinning
import SwiftASN1
import X509

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.exportPKI()
    let pki = FuzzPKI.shared
    FuzzSeeds.write([
        "chain": FuzzPKI.records([pki.leaf, pki.intermediate]),
        "chain-with-root": FuzzPKI.records([pki.leaf, pki.intermediate, pki.root]),
        "leaf-only": FuzzPKI.records([pki.leaf]),
        "reversed": FuzzPKI.records([pki.intermediate, pki.leaf]),
        "repeated": FuzzPKI.records([pki.leaf, pki.intermediate, pki.intermediate, pki.intermediate]),
    ])
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard let start else { return 0 }
    let records = FuzzPKI.splitRecords(UnsafeBufferPointer(start: start.assumingMemoryBound(to: UInt8.self), count: count))
    var certificates: [Certificate] = []
    for record in records {
        do {
            certificates.append(try Certificate(derEncoded: Array(record)))
        } catch {
            continue
        }
    }
    let pki = FuzzPKI.shared
    let trust = ServerTrust(
        certificates: certificates,
        anchors: [pki.root],
        anchorsOnly: true,
        validationTime: FuzzPKI.validationTime
    )
    let root = pki.root
    let presented = certificates
    let pin = Pin(spkiOf: pki.intermediate)
    runBlocking {
        for pins in [nil, PinRequirement.publicKeys([pin])] {
            let evaluation = await trust.evaluate(.ssl(host: FuzzPKI.host), pins: pins)
            guard case .trusted(let chain) = evaluation else { continue }
            // Anything trusted must end at the only anchor and start at the presented leaf.
            precondition(chain.path.last == root, "a chain was trusted that does not end at the anchor")
            precondition(chain.path.first == presented.first, "the trusted path does not start at the leaf")
        }
    }
    return 0
}

/// The entry point SwiftPM's `--defsym main=FuzzEvaluation_main` points at; libFuzzer's driver does the rest.
@_cdecl("FuzzEvaluation_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}
