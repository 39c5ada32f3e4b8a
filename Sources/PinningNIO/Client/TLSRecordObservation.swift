import Crypto
package import NIOCore

import struct Foundation.Data

/// What ``TLSAlertObserver`` reads from the two record streams of one TLS connection: the hellos' random and cipher
/// suite, the plaintext alerts, and a bounded handful of small encrypted records that may be TLS 1.3 alerts. Pure:
/// bytes in, alerts out; no I/O, no clock, no locks (the observer owns one per connection, on its event loop).
///
/// Bounds, whatever the peer sends:
/// - Only the first ``recordLimit`` records of each direction are read; after that the direction is passed over
///   unread (``isFinished``). A handshake and the few records after it fit well inside (a server refusing our client
///   certificate under TLS 1.3 writes its alert as its first record after its Finished).
/// - Of a record, at most ``helloPrefixLimit`` bytes are kept (a ServerHello's prefix; of a ClientHello only the
///   ``clientHelloPrefix`` up to its random; once per direction), 2 bytes of a plaintext alert, and the whole of an
///   encrypted record only when it is at most ``candidateLimit`` bytes (an encrypted alert is 19 bytes unpadded); at
///   most ``candidatesPerDirection`` such records are kept, the latest.
/// - A record header that is not TLS (unknown content type, major version not 3, a length over RFC 8446's 2^14 + 256
///   and RFC 5246's 2^14 + 2048) ends the reading of that direction: "no alert known" is always a valid answer.
package struct TLSRecordObservation {
    package enum Direction: Int, CaseIterable {
        /// Bytes this side wrote.
        case outbound = 0
        /// Bytes the peer wrote.
        case inbound = 1
    }

    /// Which side of the handshake this is: who writes the ClientHello.
    package enum Role {
        case client
        case server
    }

    static let recordLimit = 64
    static let helloPrefixLimit = 4096
    /// A ClientHello up to the end of its random: type, length, legacy_version, random (RFC 8446 §4.1.2).
    static let clientHelloPrefix = 1 + 3 + 2 + 32
    static let candidateLimit = 300
    static let candidatesPerDirection = 8
    static let maximumRecordLength = (1 << 14) + 2048

    /// A small encrypted record kept for a TLS 1.3 alert: its header (the AEAD's additional data), its body, and its
    /// index among the encrypted records of its direction (the sequence number, once the key epoch is known).
    struct Candidate {
        var index: Int
        /// The 5 header bytes, big-endian in the low 40 bits.
        var header: UInt64
        var body: [UInt8]

        /// The header as the AEAD's additional data.
        var additionalData: [UInt8] { (0..<5).map { UInt8(truncatingIfNeeded: self.header >> (32 - 8 * UInt64($0))) } }
    }

    private struct Stream {
        /// The bytes of a record header read so far (`headerCount` of 5), big-endian in the low bits.
        var header: UInt64 = 0
        var headerCount = 0
        /// The record being read: its content type, the bytes still to come, and what is kept of it.
        var type: UInt8 = 0
        var remaining = 0
        var keep = 0
        var kept: [UInt8] = []
        var recordsRead = 0
        var encryptedRecords = 0
        var helloRead = false
        var failed = false
        var candidates: [Candidate] = []

        var isFinished: Bool { self.failed || self.recordsRead >= TLSRecordObservation.recordLimit && self.remaining == 0 }
    }

    let role: Role
    private var streams = [Stream(), Stream()]
    /// The ClientHello's random (32 bytes), which names the connection's secrets in the NSS key log.
    private(set) var clientRandom: [UInt8]?
    /// The ServerHello's cipher suite, and whether it chose TLS 1.3 (its supported_versions extension).
    private(set) var cipherSuite: UInt16?
    private(set) var isTLS13 = false
    /// The alerts read so far (plaintext ones as they arrive, decrypted ones once ``resolve(secrets:)`` found them).
    package private(set) var alerts = TLSAlertsSeen()
    /// How many encrypted records the peer had written when our side's handshake completed (nil before).
    private var peerRecordsAtCompletion: Int?
    /// How many traffic keys ``resolve(secrets:)`` derived (tests check that a successful connection derives none).
    private(set) var keysDerived = 0

    package init(role: Role) {
        self.role = role
    }

    /// How many whole records of `direction` were read.
    func recordsRead(_ direction: Direction) -> Int { self.streams[direction.rawValue].recordsRead }

    /// Whether neither direction will be read any further.
    package var isFinished: Bool { self.streams.allSatisfy(\.isFinished) }

    /// Whether encrypted records are kept that ``resolve(secrets:)`` has not read yet.
    var hasPendingCandidates: Bool { self.streams.contains { !$0.candidates.isEmpty } }

    /// Reads `bytes`, the next bytes of `direction`, in whatever pieces the socket delivered them.
    package mutating func read(_ bytes: ByteBufferView, _ direction: Direction) {
        bytes.withUnsafeBytes { self.read($0, direction) }
    }

    private mutating func read(_ bytes: UnsafeRawBufferPointer, _ direction: Direction) {
        // The stream is moved out while it is read, not copied: a copy would share its arrays' storage with the one
        // left behind, and every append would copy them.
        var stream = Stream()
        swap(&stream, &self.streams[direction.rawValue])
        defer { swap(&stream, &self.streams[direction.rawValue]) }
        var index = 0
        while index < bytes.count, !stream.isFinished {
            if stream.remaining == 0 && stream.headerCount < 5 {
                while stream.headerCount < 5, index < bytes.count {
                    stream.header = stream.header << 8 | UInt64(bytes[index])
                    stream.headerCount += 1
                    index += 1
                }
                guard stream.headerCount == 5 else { break }
                guard self.begin(&stream, direction) else {
                    stream.failed = true
                    break
                }
                if stream.remaining > 0 { continue }
            } else {
                let take = min(stream.remaining, bytes.count - index)
                let room = max(0, stream.keep - stream.kept.count)
                if room > 0 { stream.kept.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + min(room, take))])) }
                stream.remaining -= take
                index += take
                guard stream.remaining == 0 else { continue }
            }
            self.end(&stream, direction)
        }
    }

    /// The content type and length of the record header `stream` read.
    private static func typeAndLength(_ stream: Stream) -> (type: UInt8, length: Int) {
        (UInt8(truncatingIfNeeded: stream.header >> 32), Int(stream.header & 0xFFFF))
    }

    /// Starts a record from its 5-byte header; false when the header is not TLS.
    private func begin(_ stream: inout Stream, _ direction: Direction) -> Bool {
        let (type, length) = Self.typeAndLength(stream)
        let major = UInt8(truncatingIfNeeded: stream.header >> 24)
        guard (20...24).contains(type), major == 3, length <= Self.maximumRecordLength else { return false }
        stream.type = type
        stream.remaining = length
        stream.kept = []
        switch type {
        case 22 where !stream.helloRead:
            // Of a ClientHello only its random is read; of a ServerHello, the suite and supported_versions.
            let writtenByClient = (direction == .outbound) == (self.role == .client)
            stream.keep = min(length, writtenByClient ? Self.clientHelloPrefix : Self.helloPrefixLimit)
        case 21: stream.keep = min(length, 2)
        case 23 where length <= Self.candidateLimit: stream.keep = length
        default: stream.keep = 0
        }
        if stream.keep > 0 { stream.kept.reserveCapacity(stream.keep) }
        return true
    }

    /// Ends the record whose header and kept bytes `stream` holds.
    private mutating func end(_ stream: inout Stream, _ direction: Direction) {
        let header = stream.header
        let length = Self.typeAndLength(stream).length
        stream.recordsRead += 1
        stream.header = 0
        stream.headerCount = 0
        switch stream.type {
        case 21 where length == 2:
            // A plaintext alert: TLS 1.2 before ChangeCipherSpec, or TLS 1.3 before the sender has handshake keys
            // (an encrypted alert is never 2 bytes: TLS 1.3's outer type is 23, and TLS 1.2's AEAD or MAC adds more).
            if let alert = Self.alert(stream.kept) { self.record(alert, direction) }
        case 22 where !stream.helloRead:
            stream.helloRead = true
            self.readHello(stream.kept)
        case 23:
            if length <= Self.candidateLimit {
                stream.candidates.append(Candidate(index: stream.encryptedRecords, header: header, body: stream.kept))
                if stream.candidates.count > Self.candidatesPerDirection { stream.candidates.removeFirst() }
            }
            stream.encryptedRecords += 1
        default:
            break
        }
        stream.kept = []
    }

    private mutating func record(_ alert: TLSAlert, _ direction: Direction) {
        // A connection ends at its first fatal alert; a few are plenty, and a hostile stream cannot grow the list.
        switch direction {
        case .inbound where self.alerts.received.count < 4: self.alerts.received.append(alert)
        case .outbound where self.alerts.sent.count < 4: self.alerts.sent.append(alert)
        default: break
        }
    }

    /// An alert's two bytes (level, description), when the level is one RFC 8446 §6 defines.
    static func alert(_ bytes: [UInt8]) -> TLSAlert? {
        guard bytes.count == 2, let level = TLSAlert.Level(rawValue: Int(bytes[0])) else { return nil }
        return TLSAlert(code: Int(bytes[1]), level: level)
    }

    /// Reads the first handshake message of a record: a ClientHello's random, or a ServerHello's cipher suite and
    /// version (RFC 8446 §4.1.2-4.1.3). Anything else, or a truncated message, is left unread.
    private mutating func readHello(_ bytes: [UInt8]) {
        var reader = Reader(bytes)
        guard let type = reader.byte(), reader.skip(3), reader.skip(2), let random = reader.bytes(32) else { return }
        switch type {
        case 1:
            if self.clientRandom == nil { self.clientRandom = random }
        case 2:
            guard let sessionIDLength = reader.byte(), reader.skip(Int(sessionIDLength)), let suite = reader.uint16(), reader.skip(1)
            else { return }
            self.cipherSuite = suite
            guard let extensionsLength = reader.uint16(), var extensions = reader.sub(Int(extensionsLength)) else { return }
            while let extensionType = extensions.uint16(), let length = extensions.uint16(), var body = extensions.sub(Int(length)) {
                // supported_versions (43) in a ServerHello is the one selected version.
                if extensionType == 43, body.uint16() == 0x0304 { self.isTLS13 = true }
            }
        default:
            return
        }
    }

    /// Decrypts the kept encrypted records with the connection's TLS 1.3 traffic secrets, records the alerts among
    /// them, and drops every record it could read (alert or not). Records that no key opens stay only while a
    /// secret they may need is still missing.
    package mutating func resolve(secrets: TLS13Secrets) {
        guard self.isTLS13, let suite = self.cipherSuite.flatMap(TLS13Cipher.init(suite:)) else {
            for index in self.streams.indices { self.streams[index].candidates = [] }
            return
        }
        for direction in Direction.allCases where !self.streams[direction.rawValue].candidates.isEmpty {
            let writtenByClient = (direction == .outbound) == (self.role == .client)
            // After our handshake completed, the peer writes under its application keys only (see
            // handshakeCompleted()): its handshake keys are not derived for those records.
            let afterPeerHandshake = direction == .inbound && self.peerRecordsAtCompletion != nil
            let handshakeKeys =
                afterPeerHandshake ? nil : (writtenByClient ? secrets.clientHandshake : secrets.serverHandshake).flatMap { suite.keys(from: $0) }
            let applicationKeys = (writtenByClient ? secrets.clientApplication : secrets.serverApplication).flatMap { suite.keys(from: $0) }
            self.keysDerived += (handshakeKeys == nil ? 0 : 1) + (applicationKeys == nil ? 0 : 1)
            var kept: [Candidate] = []
            for candidate in self.streams[direction.rawValue].candidates {
                if let inner = Self.open(candidate, suite: suite, handshake: handshakeKeys, application: applicationKeys) {
                    if inner.type == 21, let alert = Self.alert(inner.content) { self.record(alert, direction) }
                } else if (handshakeKeys == nil && !afterPeerHandshake) || applicationKeys == nil {
                    kept.append(candidate)
                }
            }
            self.streams[direction.rawValue].candidates = kept
        }
    }

    /// Forgets every kept record (when the secrets are gone, nothing can read them).
    mutating func dropCandidates() {
        for index in self.streams.indices { self.streams[index].candidates = [] }
    }

    /// Our side's handshake completed. No record kept until now can be an alert, so they are dropped unread: had
    /// either side sent an alert, the handshake would have failed (RFC 8446 §6.2: every error alert is fatal; a
    /// close_notify before the handshake ends it too). Only user_canceled, a warning, can be sent without ending
    /// the handshake, and it is not what refused a connection. This spares every successful connection the key
    /// derivation and the decryption of its handshake records; only what the peer writes afterwards is opened, and
    /// only under its application keys, since the peer's handshake records (its Finished included) all came before
    /// our side could complete.
    package mutating func handshakeCompleted() {
        self.dropCandidates()
        self.peerRecordsAtCompletion = self.streams[Direction.inbound.rawValue].encryptedRecords
    }

    /// A record opened under the handshake keys at its index, or under the application keys at any sequence number
    /// the index allows (the epoch changes after the sender's Finished, at a record this observer did not keep):
    /// the AEAD's tag decides, so a wrong guess never reads as an alert. At most index + 2 tries, on records of at
    /// most ``candidateLimit`` bytes. The application sequence numbers are tried from 0 up: the records that matter
    /// (a refusal written right after the peer's Finished) are the first of their epoch.
    static func open(_ candidate: Candidate, suite: TLS13Cipher, handshake: TLS13Cipher.Keys?, application: TLS13Cipher.Keys?) -> (type: UInt8, content: [UInt8])? {
        let header = candidate.additionalData
        if let handshake, let inner = suite.open(candidate.body, header: header, sequence: UInt64(candidate.index), keys: handshake) {
            return inner
        }
        if let application {
            for sequence in 0...candidate.index {
                if let inner = suite.open(candidate.body, header: header, sequence: UInt64(sequence), keys: application) {
                    return inner
                }
            }
        }
        return nil
    }

    /// A bounds-checked reader over a hello's bytes.
    struct Reader {
        private var bytes: ArraySlice<UInt8>

        init(_ bytes: [UInt8]) { self.bytes = bytes[...] }
        init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

        mutating func byte() -> UInt8? { self.bytes.popFirst() }

        mutating func uint16() -> UInt16? {
            guard let high = self.byte(), let low = self.byte() else { return nil }
            return UInt16(high) << 8 | UInt16(low)
        }

        mutating func bytes(_ count: Int) -> [UInt8]? { self.sub(count).map { Array($0.bytes) } }

        mutating func skip(_ count: Int) -> Bool { self.sub(count) != nil }

        mutating func sub(_ count: Int) -> Reader? {
            guard count >= 0, self.bytes.count >= count else { return nil }
            let taken = self.bytes.prefix(count)
            self.bytes = self.bytes.dropFirst(count)
            return Reader(taken)
        }
    }
}

/// A connection's TLS 1.3 traffic secrets, as the NSS key log names them. Held by ``TLSAlertObserver`` only until
/// its observation ends, then overwritten.
package struct TLS13Secrets {
    var clientHandshake: [UInt8]?
    var serverHandshake: [UInt8]?
    var clientApplication: [UInt8]?
    var serverApplication: [UInt8]?

    package init() {}

    /// The key log labels of the four traffic secrets (the NSS key log format); other labels are not kept.
    package enum Label: CaseIterable {
        case clientHandshake
        case serverHandshake
        case clientApplication
        case serverApplication

        /// The label a key log line starts with; nil for any other (early data, exporter, TLS 1.2's master secret).
        init?<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
            // The lengths tell the pairs apart before a byte is compared.
            switch bytes.count {
            case 31 where bytes.elementsEqual("CLIENT_HANDSHAKE_TRAFFIC_SECRET".utf8): self = .clientHandshake
            case 31 where bytes.elementsEqual("SERVER_HANDSHAKE_TRAFFIC_SECRET".utf8): self = .serverHandshake
            case 23 where bytes.elementsEqual("CLIENT_TRAFFIC_SECRET_0".utf8): self = .clientApplication
            case 23 where bytes.elementsEqual("SERVER_TRAFFIC_SECRET_0".utf8): self = .serverApplication
            default: return nil
            }
        }
    }

    /// Records one key log line's secret under its label.
    package mutating func set(_ label: Label, secret: [UInt8]) {
        switch label {
        case .clientHandshake: self.clientHandshake = secret
        case .serverHandshake: self.serverHandshake = secret
        case .clientApplication: self.clientApplication = secret
        case .serverApplication: self.serverApplication = secret
        }
    }

    /// Overwrites every stored secret in place, then forgets it. In place: copying the array out first (`if var
    /// secret = …`) would zero a copy and free the original untouched. Best effort, as anything in Swift: the key
    /// log line NIOSSL handed over and the derived AEAD keys (swift-crypto's `SymmetricKey`, which zeroes its own
    /// storage) are not this type's to overwrite.
    mutating func wipe() {
        Self.zero(&self.clientHandshake)
        Self.zero(&self.serverHandshake)
        Self.zero(&self.clientApplication)
        Self.zero(&self.serverApplication)
    }

    private static func zero(_ secret: inout [UInt8]?) {
        guard secret != nil else { return }
        secret!.withUnsafeMutableBytes { bytes in
            for index in bytes.indices { bytes[index] = 0 }
        }
        secret = nil
    }
}

/// The three AEADs of TLS 1.3's cipher suites (RFC 8446 §B.4), with the record layer's key schedule (§7.3) and
/// record protection (§5.2), on swift-crypto. Only opens; never seals.
enum TLS13Cipher {
    case aes128GCM
    case aes256GCM
    case chaCha20Poly1305

    struct Keys {
        var key: SymmetricKey
        var iv: [UInt8]
    }

    init?(suite: UInt16) {
        switch suite {
        case 0x1301: self = .aes128GCM
        case 0x1302: self = .aes256GCM
        case 0x1303: self = .chaCha20Poly1305
        default: return nil
        }
    }

    /// `[sender]_write_key` and `[sender]_write_iv` from a traffic secret (RFC 8446 §7.3).
    func keys(from secret: [UInt8]) -> Keys? {
        let keyLength = self == .aes128GCM ? 16 : 32
        let hashLength = self == .aes256GCM ? 48 : 32
        guard secret.count == hashLength else { return nil }
        let key = self.expandLabel(secret, "key", length: keyLength)
        let iv = self.expandLabel(secret, "iv", length: 12)
        return Keys(key: SymmetricKey(data: key), iv: iv)
    }

    /// HKDF-Expand-Label(Secret, Label, "", Length) (RFC 8446 §7.1), with the suite's hash.
    func expandLabel(_ secret: [UInt8], _ label: String, length: Int) -> [UInt8] {
        let fullLabel = Array("tls13 \(label)".utf8)
        var info: [UInt8] = [UInt8(length >> 8), UInt8(length & 0xFF), UInt8(fullLabel.count)]
        info += fullLabel
        info.append(0)  // an empty context
        let prk = SymmetricKey(data: secret)
        let output: SymmetricKey
        if self == .aes256GCM {
            output = HKDF<SHA384>.expand(pseudoRandomKey: prk, info: info, outputByteCount: length)
        } else {
            output = HKDF<SHA256>.expand(pseudoRandomKey: prk, info: info, outputByteCount: length)
        }
        return output.withUnsafeBytes { Array($0) }
    }

    /// The inner plaintext of a TLSCiphertext (RFC 8446 §5.2): its real content type (the last non-zero byte) and
    /// content; nil when the tag does not verify or the plaintext is all padding.
    func open(_ body: [UInt8], header: [UInt8], sequence: UInt64, keys: Keys) -> (type: UInt8, content: [UInt8])? {
        guard body.count >= 17 else { return nil }
        var nonce = keys.iv
        for index in 0..<8 { nonce[4 + index] ^= UInt8(truncatingIfNeeded: sequence >> (56 - 8 * UInt64(index))) }
        let ciphertext = body.dropLast(16)
        let tag = body.suffix(16)
        let plaintext: Data
        do {
            switch self {
            case .aes128GCM, .aes256GCM:
                let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: nonce), ciphertext: ciphertext, tag: tag)
                plaintext = try AES.GCM.open(box, using: keys.key, authenticating: header)
            case .chaCha20Poly1305:
                let box = try ChaChaPoly.SealedBox(nonce: ChaChaPoly.Nonce(data: nonce), ciphertext: ciphertext, tag: tag)
                plaintext = try ChaChaPoly.open(box, using: keys.key, authenticating: header)
            }
        } catch {
            // A tag that does not verify: not this key or sequence number (or a forged record). Not an alert.
            return nil
        }
        var bytes = Array(plaintext)
        while let last = bytes.last, last == 0 { bytes.removeLast() }
        guard let type = bytes.popLast() else { return nil }
        return (type, bytes)
    }
}
