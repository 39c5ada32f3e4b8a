// The TLS record reader every connection runs on the socket's side of NIOSSL (issue 28: alerts as values,
// `TLSRecordObservation`): the peer chooses these bytes. The input is cut into chunks, each sent in one direction
// in one read; byte 0 chooses the role, each chunk starts with a byte giving its direction and length. Then the
// kept encrypted records are opened with secrets taken from the input. Nothing may crash or grow without bound: at
// most 64 records per direction are read, so at most 128 alerts can ever be recorded.
import FuzzSupport
import NIOCore
import PinningNIO

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    // A client's view: a plaintext alert from the server, then a TLS 1.3-shaped ServerHello and an encrypted record.
    let alert: [UInt8] = [21, 3, 3, 0, 2, 2, 48]
    let serverHello: [UInt8] = [22, 3, 3, 0, 46, 2, 0, 0, 42, 3, 3] + [UInt8](repeating: 7, count: 32) + [0, 0x13, 0x01, 0, 0, 2, 0, 0]
    let encrypted: [UInt8] = [23, 3, 3, 0, 19] + [UInt8](repeating: 9, count: 19)
    FuzzSeeds.write([
        "alert": [0, 0x80 | UInt8(alert.count)] + alert,
        "hello-then-encrypted": [0, 0x80 | UInt8(serverHello.count)] + serverHello + [0x80 | UInt8(encrypted.count)] + encrypted,
        "server-side": [1, UInt8(alert.count)] + alert,
    ])
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard let start, count > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: start.assumingMemoryBound(to: UInt8.self), count: count))
    var observation = TLSRecordObservation(role: bytes[0] & 1 == 0 ? .client : .server)
    var index = 1
    while index < bytes.count {
        let control = bytes[index]
        index += 1
        let length = min(Int(control & 0x7F), bytes.count - index)
        let buffer = ByteBuffer(bytes: bytes[index..<(index + length)])
        observation.read(buffer.readableBytesView, control & 0x80 != 0 ? .inbound : .outbound)
        index += length
    }
    var secrets = TLS13Secrets()
    let secret = Array(bytes.suffix(48))
    for label in TLS13Secrets.Label.allCases {
        secrets.set(label, secret: secret)
    }
    observation.resolve(secrets: secrets)
    let alerts = observation.alerts
    precondition(alerts.received.count + alerts.sent.count <= 128, "more alerts than records read")
    return 0
}

/// The entry point SwiftPM's `--defsym main=FuzzTLSRecords_main` points at; libFuzzer's driver does the rest.
@_cdecl("FuzzTLSRecords_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}
