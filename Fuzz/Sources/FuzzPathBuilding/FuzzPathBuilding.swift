// Path building, differentially (issue 31): the input chooses, from a fixed pool of generated certificate
// authorities and leaves (shared names and keys, cross-signatures both ways, every extension present, absent or
// wrong; `RandomChainGenerator`), which certificates the peer presents and in which order, which the client
// anchors and which host it expects. Our `PathBuilder` and swift-certificates' `Verifier` (the reference,
// `PathBuilderReference`) must give the same verdict, and anything trusted must start at the leaf and end at an
// anchor. Input: byte 0 the host, byte 1 the number of anchors, then that many anchor indices, then the presented
// certificates' indices (the first is the leaf), each modulo the pool.
import FuzzSupport
import Pinning
import PinningPKI
import X509

/// The pool: certificates of 48 generated cases (the same every run, keys included; see `RandomChainGenerator`).
let pool: [Certificate] = {
    var generator = RandomChainGenerator(seed: 31)
    var certificates: [Certificate] = []
    for _ in 0..<48 {
        do {
            let testCase = try generator.next()
            for certificate in testCase.presented + testCase.anchors where !certificates.contains(certificate) {
                certificates.append(certificate)
            }
        } catch {
            fatalError("the chain generator failed: \(error)")
        }
    }
    return certificates
}()

let hosts = ["a.example.com", "example.com", "b.other.test", "127.0.0.1", "c.example.com", "x.sub.example.com", "bücher.example.com"]

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    precondition(pool.count > 16, "the pool is too small to fuzz")
    var seeds: [String: [UInt8]] = [:]
    for index in 0..<16 {
        seeds["case-\(index)"] = [UInt8(index % hosts.count), 1, UInt8(index * 7 % pool.count)] + (0..<4).map { UInt8((index * 13 + $0 * 5) % pool.count) }
    }
    FuzzSeeds.write(seeds)
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard let start, count >= 3 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: start.assumingMemoryBound(to: UInt8.self), count: count))
    let host = hosts[Int(bytes[0]) % hosts.count]
    let anchorCount = min(Int(bytes[1]) % 4 + 1, bytes.count - 2)
    let anchors = bytes[2..<(2 + anchorCount)].map { pool[Int($0) % pool.count] }
    // At most the 64 certificates a peer may present (more are refused before path building).
    let presented = bytes[(2 + anchorCount)...].prefix(64).map { pool[Int($0) % pool.count] }
    guard !presented.isEmpty else { return 0 }
    let trust = ServerTrust(certificates: presented, anchors: anchors, anchorsOnly: true, validationTime: RandomChainGenerator.validationTime)
    runBlocking {
        let ours = await trust.evaluate(.ssl(host: host))
        let reference = await PathBuilderReference.$isActive.withValue(true) { await trust.evaluate(.ssl(host: host)) }
        switch (ours, reference) {
        case (.trusted(let chain), .trusted):
            precondition(chain.path.first == presented.first, "the trusted path does not start at the leaf")
            precondition(chain.path.last.map { anchors.contains($0) } ?? false, "a path was trusted that does not end at an anchor")
        case (.untrusted(let mine), .untrusted(let theirs)):
            precondition(mine.code == theirs.code, "the path builders refuse differently: ours \(mine.code) (\(mine.reason)), the Verifier \(theirs.code) (\(theirs.reason))")
        default:
            preconditionFailure("the path builders disagree: ours \(ours.isTrusted ? "trusted" : "refused"), the Verifier \(reference.isTrusted ? "trusted" : "refused")")
        }
    }
    return 0
}

/// The entry point SwiftPM's `--defsym main=FuzzPathBuilding_main` points at; libFuzzer's driver does the rest.
@_cdecl("FuzzPathBuilding_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}
