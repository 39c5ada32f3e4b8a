import Crypto
import Foundation
import NIOCore
import PinningTestSupport
import Testing

@testable import PinningNIO

/// The record reading behind ``TLSAlertObserver``, on hand-made records: plaintext alerts, TLS 1.3 alerts encrypted
/// with RFC 8448's traffic secrets (each AEAD), and hostile or malformed streams, which must end in "no alert
/// known" without a crash or unbounded state. The same reading against OpenSSL is in `TLSAlertInteropTests`.
@Suite("TLS alert observation: records in, alerts out")
struct TLSAlertObservationTests {
    static func hex(_ text: String) -> [UInt8] {
        TLSAlertSecrets.hex(Array(text.replacingOccurrences(of: " ", with: "").utf8))!
    }

    // RFC 8448 §3 (Simple 1-RTT Handshake).
    static let serverHandshakeSecret = hex("b6 7b 7d 69 0c c1 6c 4e 75 e5 42 13 cb 2d 37 b4 e9 c9 12 bc de d9 10 5d 42 be fd 59 d3 91 ad 38")
    static let clientHandshakeSecret = hex("b3 ed db 12 6e 06 7f 35 a7 80 b3 ab f4 5e 2d 8f 3b 1a 95 07 38 f5 2e 96 00 74 6a 0e 27 a5 5a 21")

    @Test("HKDF-Expand-Label gives RFC 8448's handshake keys and IVs")
    func keySchedule() throws {
        let server = try #require(TLS13Cipher.aes128GCM.keys(from: Self.serverHandshakeSecret))
        #expect(server.key.withUnsafeBytes { Array($0) } == Self.hex("3f ce 51 60 09 c2 17 27 d0 f2 e4 e8 6e e4 03 bc"))
        #expect(server.iv == Self.hex("5d 31 3e b2 67 12 76 ee 13 00 0b 30"))
        let client = try #require(TLS13Cipher.aes128GCM.keys(from: Self.clientHandshakeSecret))
        #expect(client.key.withUnsafeBytes { Array($0) } == Self.hex("db fa a6 93 d1 76 2c 5b 66 6a f5 d9 50 25 8d 01"))
        #expect(client.iv == Self.hex("5b d3 c7 1b 83 6e 0b 76 bb 73 26 5f"))
        // A secret of the wrong length for the suite's hash is refused, not stretched.
        #expect(TLS13Cipher.aes256GCM.keys(from: Self.serverHandshakeSecret) == nil)
    }

    // MARK: Hand-made records

    static func record(_ type: UInt8, _ body: [UInt8]) -> [UInt8] {
        [type, 3, 3, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
    }

    static let clientRandom = [UInt8](repeating: 0xA5, count: 32)

    static func clientHello() -> [UInt8] {
        let body: [UInt8] = [3, 3] + clientRandom + [0, 0, 2, 0x13, 0x01, 1, 0]
        return record(22, [1, 0, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body)
    }

    static func serverHello(suite: UInt16, tls13: Bool = true) -> [UInt8] {
        let versions: [UInt8] = tls13 ? [0, 43, 0, 2, 3, 4] : []
        let body: [UInt8] =
            [3, 3] + [UInt8](repeating: 0x5A, count: 32) + [0, UInt8(suite >> 8), UInt8(suite & 0xFF), 0]
            + [UInt8(versions.count >> 8), UInt8(versions.count & 0xFF)] + versions
        return record(22, [2, 0, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body)
    }

    /// A TLS 1.3 record sealed as RFC 8446 §5.2 says (written here from the RFC, with swift-crypto's AEADs).
    static func sealed(_ content: [UInt8], type: UInt8, cipher: TLS13Cipher, secret: [UInt8], sequence: UInt64, padding: Int = 0) throws -> [UInt8] {
        let keys = try #require(cipher.keys(from: secret))
        let inner = content + [type] + [UInt8](repeating: 0, count: padding)
        let header: [UInt8] = [23, 3, 3, UInt8((inner.count + 16) >> 8), UInt8((inner.count + 16) & 0xFF)]
        var nonce = keys.iv
        let sequenceBytes = withUnsafeBytes(of: sequence.bigEndian) { Array($0) }
        for index in 0..<8 { nonce[4 + index] ^= sequenceBytes[index] }
        switch cipher {
        case .aes128GCM, .aes256GCM:
            let box = try AES.GCM.seal(inner, using: keys.key, nonce: AES.GCM.Nonce(data: nonce), authenticating: header)
            return header + box.ciphertext + box.tag
        case .chaCha20Poly1305:
            let box = try ChaChaPoly.seal(inner, using: keys.key, nonce: ChaChaPoly.Nonce(data: nonce), authenticating: header)
            return header + box.ciphertext + box.tag
        }
    }

    static func feed(_ observation: inout TLSRecordObservation, _ bytes: [UInt8], _ direction: TLSRecordObservation.Direction, pieces: Int = 1) {
        let size = max(1, bytes.count / pieces)
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + size)
            var buffer = ByteBuffer()
            buffer.writeBytes(bytes[start..<end])
            observation.read(buffer.readableBytesView, direction)
            start = end
        }
    }

    @Test("a plaintext alert in either direction, however the socket splits it", arguments: [1, 2, 3, 7, 1000])
    func plaintextAlerts(pieces: Int) {
        var observation = TLSRecordObservation(role: .client)
        Self.feed(&observation, Self.clientHello(), .outbound, pieces: pieces)
        Self.feed(&observation, Self.record(21, [2, 70]), .inbound, pieces: pieces)
        Self.feed(&observation, Self.record(21, [2, 48]), .outbound, pieces: pieces)
        #expect(observation.clientRandom == Self.clientRandom)
        #expect(observation.alerts.receivedFailure == TLSAlert(code: 70, level: .fatal))
        #expect(observation.alerts.receivedFailure?.name == "protocol_version")
        #expect(observation.alerts.sentFailure == TLSAlert(code: 48, level: .fatal))
        // close_notify is an ordinary end, not the failure.
        var closing = TLSRecordObservation(role: .client)
        Self.feed(&closing, Self.record(21, [1, 0]), .inbound)
        #expect(closing.alerts.received == [TLSAlert(code: 0, level: .warning)])
        #expect(closing.alerts.receivedFailure == nil)
    }

    @Test(
        "a TLS 1.3 alert encrypted under the handshake or application secret, with each AEAD",
        arguments: [(UInt16(0x1301), TLS13Cipher.aes128GCM), (0x1302, .aes256GCM), (0x1303, .chaCha20Poly1305)]
    )
    func encryptedAlerts(suite: UInt16, cipher: TLS13Cipher) throws {
        let hashLength = cipher == .aes256GCM ? 48 : 32
        let handshake = [UInt8](repeating: 0x11, count: hashLength)
        let application = [UInt8](repeating: 0x22, count: hashLength)
        let clientHandshake = [UInt8](repeating: 0x33, count: hashLength)
        // The server's flight: three handshake records (the last one, Finished, small enough to be kept), then its
        // alert as its first record under the application secret, padded.
        var observation = TLSRecordObservation(role: .client)
        Self.feed(&observation, Self.clientHello(), .outbound)
        Self.feed(&observation, Self.serverHello(suite: suite), .inbound)
        Self.feed(&observation, Self.record(20, [1]), .inbound)
        Self.feed(&observation, try Self.sealed([UInt8](repeating: 8, count: 400), type: 22, cipher: cipher, secret: handshake, sequence: 0), .inbound, pieces: 5)
        Self.feed(&observation, try Self.sealed([UInt8](repeating: 11, count: 900), type: 22, cipher: cipher, secret: handshake, sequence: 1), .inbound)
        Self.feed(&observation, try Self.sealed([20, 0, 0, 32] + [UInt8](repeating: 0, count: 32), type: 22, cipher: cipher, secret: handshake, sequence: 2), .inbound)
        // Our alert, under our handshake secret (our first encrypted record).
        Self.feed(&observation, try Self.sealed([2, 42], type: 21, cipher: cipher, secret: clientHandshake, sequence: 0), .outbound, pieces: 3)
        Self.feed(&observation, try Self.sealed([2, 116], type: 21, cipher: cipher, secret: application, sequence: 0, padding: 20), .inbound, pieces: 4)
        #expect(observation.isTLS13 && observation.cipherSuite == suite)
        #expect(observation.alerts.received.isEmpty, "nothing is decrypted before the secrets are known")

        // Only the server's handshake secret: the alert under the application secret stays unread, kept.
        var partial = TLS13Secrets()
        partial.serverHandshake = handshake
        observation.resolve(secrets: partial)
        #expect(observation.alerts.received.isEmpty)
        #expect(observation.hasPendingCandidates)

        var secrets = partial
        secrets.serverApplication = application
        secrets.clientHandshake = clientHandshake
        observation.resolve(secrets: secrets)
        #expect(observation.alerts.receivedFailure == TLSAlert(code: 116, level: .fatal))
        #expect(observation.alerts.receivedFailure?.name == "certificate_required")
        #expect(observation.alerts.sentFailure == TLSAlert(code: 42, level: .fatal))
        #expect(!observation.hasPendingCandidates)
    }

    @Test("once our handshake completed, the records kept before are dropped unread; the peer's next record is opened under its application keys alone")
    func afterCompletion() throws {
        let handshake = [UInt8](repeating: 0x11, count: 32)
        let application = [UInt8](repeating: 0x22, count: 32)
        var observation = TLSRecordObservation(role: .client)
        Self.feed(&observation, Self.clientHello(), .outbound)
        Self.feed(&observation, Self.serverHello(suite: 0x1301), .inbound)
        // The server's handshake records, one of them small enough to be kept.
        Self.feed(&observation, try Self.sealed([UInt8](repeating: 8, count: 40), type: 22, cipher: .aes128GCM, secret: handshake, sequence: 0), .inbound)
        Self.feed(&observation, try Self.sealed([20, 0, 0, 32] + [UInt8](repeating: 0, count: 32), type: 22, cipher: .aes128GCM, secret: handshake, sequence: 1), .inbound)
        #expect(observation.hasPendingCandidates)
        observation.handshakeCompleted()
        #expect(!observation.hasPendingCandidates, "a completed handshake's records are not alerts: nothing to decrypt")

        // The server refuses our certificate: its first record under its application secret.
        Self.feed(&observation, try Self.sealed([2, 116], type: 21, cipher: .aes128GCM, secret: application, sequence: 0), .inbound)
        var secrets = TLS13Secrets()
        secrets.serverApplication = application
        observation.resolve(secrets: secrets)
        #expect(observation.alerts.receivedFailure == TLSAlert(code: 116, level: .fatal))
        #expect(!observation.hasPendingCandidates, "without the handshake secret, nothing is kept waiting for it")

        // A record after completion that the application keys do not open is dropped, not held for handshake keys.
        var other = TLSRecordObservation(role: .client)
        Self.feed(&other, Self.clientHello(), .outbound)
        Self.feed(&other, Self.serverHello(suite: 0x1301), .inbound)
        other.handshakeCompleted()
        Self.feed(&other, try Self.sealed([2, 116], type: 21, cipher: .aes128GCM, secret: handshake, sequence: 0), .inbound)
        other.resolve(secrets: secrets)
        #expect(other.alerts.received.isEmpty)
        #expect(!other.hasPendingCandidates)
    }

    @Test("a forged or wrongly keyed encrypted record is not an alert, and TLS 1.2 records are never decrypted")
    func forgedRecords() throws {
        let secret = [UInt8](repeating: 0x44, count: 32)
        var alert = try Self.sealed([2, 40], type: 21, cipher: .aes128GCM, secret: secret, sequence: 0)
        alert[alert.count - 1] ^= 1
        var observation = TLSRecordObservation(role: .client)
        Self.feed(&observation, Self.clientHello(), .outbound)
        Self.feed(&observation, Self.serverHello(suite: 0x1301), .inbound)
        Self.feed(&observation, alert, .inbound)
        var secrets = TLS13Secrets()
        secrets.serverHandshake = secret
        secrets.serverApplication = secret
        observation.resolve(secrets: secrets)
        #expect(observation.alerts.received.isEmpty)
        #expect(!observation.hasPendingCandidates, "a record no key opens is dropped once every key is known")

        var tls12 = TLSRecordObservation(role: .client)
        Self.feed(&tls12, Self.serverHello(suite: 0x1301, tls13: false), .inbound)
        Self.feed(&tls12, try Self.sealed([2, 40], type: 21, cipher: .aes128GCM, secret: secret, sequence: 0), .inbound)
        tls12.resolve(secrets: secrets)
        #expect(tls12.alerts.received.isEmpty)
    }

    @Test("hostile streams: garbage, huge lengths, truncated hellos, floods of records: bounded, no alert invented")
    func hostileStreams() {
        // Not TLS: the first header ends the reading of that direction.
        var http = TLSRecordObservation(role: .client)
        Self.feed(&http, Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8), .inbound)
        Self.feed(&http, Self.record(21, [2, 40]), .inbound)
        #expect(http.alerts.received.isEmpty)

        // A length over the RFC's bound.
        var huge = TLSRecordObservation(role: .client)
        Self.feed(&huge, [23, 3, 3, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 100), .inbound)
        Self.feed(&huge, Self.record(21, [2, 40]), .inbound)
        #expect(huge.alerts.received.isEmpty)

        // Truncated hellos (every prefix), an alert of a level that does not exist, a 3-byte alert record.
        for cut in 0..<Self.serverHello(suite: 0x1301).count {
            var truncated = TLSRecordObservation(role: .client)
            let hello = Array(Self.serverHello(suite: 0x1301)[5...])
            Self.feed(&truncated, Self.record(22, Array(hello.prefix(cut))), .inbound)
            #expect(truncated.cipherSuite == nil || cut >= 41)
        }
        var odd = TLSRecordObservation(role: .client)
        Self.feed(&odd, Self.record(21, [7, 40]), .inbound)
        Self.feed(&odd, Self.record(21, [2, 40, 0]), .inbound)
        #expect(odd.alerts.received.isEmpty)

        // A flood of alerts: at most four are kept; after 64 records the direction is passed over.
        var flood = TLSRecordObservation(role: .client)
        for _ in 0..<1000 { Self.feed(&flood, Self.record(21, [2, 10]), .inbound) }
        #expect(flood.alerts.received.count == 4)
        for _ in 0..<100 { Self.feed(&flood, Self.record(23, [UInt8](repeating: 1, count: 40)), .outbound) }
        #expect(flood.isFinished)

        // Random bytes in random pieces, many seeds: never a crash, never more than the bounds.
        var generator = SplitMix64(seed: 0x5EED)
        for _ in 0..<300 {
            var random = TLSRecordObservation(role: .server)
            for _ in 0..<20 {
                let length = Int.random(in: 0..<400, using: &generator)
                var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                // Half the pieces start with a plausible header, so the reading goes deeper than the first byte.
                if Bool.random(using: &generator), bytes.count > 5 {
                    bytes[0] = UInt8.random(in: 20...24, using: &generator)
                    bytes[1] = 3
                }
                Self.feed(&random, bytes, Bool.random(using: &generator) ? .inbound : .outbound, pieces: Int.random(in: 1...5, using: &generator))
            }
            var secrets = TLS13Secrets()
            secrets.clientHandshake = [UInt8](repeating: 1, count: 32)
            random.resolve(secrets: secrets)
            #expect(random.alerts.received.count <= 4 && random.alerts.sent.count <= 4)
        }
    }

    @Test("the key log registry keeps only registered connections' secrets, drops malformed lines, wipes on unregister")
    func registry() {
        let registry = TLSAlertSecrets(capacity: 2)
        let random = Self.clientRandom
        let randomHex = random.map { String(format: "%02x", $0) }.joined()
        let secretHex = String(repeating: "ab", count: 32)
        func line(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }
        let callback = registry.keyLogCallback(forwardingTo: nil)

        callback(line("SERVER_TRAFFIC_SECRET_0 \(randomHex) \(secretHex)\n"))
        #expect(registry.count == 0, "an unregistered connection's line is dropped")

        #expect(registry.register(random))
        #expect(!registry.register(random), "a second connection with the same random gets nothing")
        for malformed in [
            "SERVER_TRAFFIC_SECRET_0 \(randomHex)\n", "SERVER_TRAFFIC_SECRET_0 \(randomHex) zz\n", "SERVER_TRAFFIC_SECRET_0 abc \(secretHex)\n", "", "\n",
            String(repeating: "A ", count: 5000),
        ] {
            callback(line(malformed))
        }
        var seen: TLS13Secrets?
        registry.withSecrets(of: random) { seen = $0 }
        #expect(seen?.serverApplication == nil)

        callback(line("SERVER_TRAFFIC_SECRET_0 \(randomHex) \(secretHex)\n"))
        callback(line("CLIENT_HANDSHAKE_TRAFFIC_SECRET \(randomHex.uppercased()) \(secretHex)\r\n"))
        registry.withSecrets(of: random) { seen = $0 }
        #expect(seen?.serverApplication == [UInt8](repeating: 0xAB, count: 32))
        #expect(seen?.clientHandshake == [UInt8](repeating: 0xAB, count: 32))

        registry.unregister(random)
        #expect(registry.count == 0)
        // Full: a third connection is refused (no alert known for it), never an unbounded table.
        #expect(registry.register([UInt8](repeating: 1, count: 32)))
        #expect(registry.register([UInt8](repeating: 2, count: 32)))
        #expect(!registry.register([UInt8](repeating: 3, count: 32)))
    }
}
