import NIOConcurrencyHelpers
import NIOCore
import SwiftASN1
import X509

/// Certificates of trusted chains, parsed, by their exact DER: the same intermediate arrives on every handshake
/// with a server (or from every device of one CA), and a returning peer presents the same leaf, so each is parsed
/// once rather than on every handshake (BoringSSL shares parsed certificates between connections the same way,
/// with its `CRYPTO_BUFFER` pool).
///
/// Only the parse is remembered, never a verdict: a hit returns the value `Certificate(derEncoded:)` returned for
/// byte-for-byte the same DER (the dictionary compares whole keys), and every handshake still validates what it
/// gets. Only certificates on paths a policy trusted are stored (``remember(_:)``), so a peer cannot fill the
/// memo with certificates of its making (a TLS peer may present up to 100 KB of them at each handshake), whether
/// it is refused or presents extras beside a trusted chain. Bounded: at most ``capacity`` certificates, the
/// oldest forgotten first.
final class ParsedCertificateMemo: Sendable {
    /// The memo every pinned connection of the process shares.
    static let shared = ParsedCertificateMemo(capacity: 2048)

    /// The most certificates remembered.
    let capacity: Int
    // The order is a ring buffer: once full, every new certificate drops the oldest in O(1).
    private let state = NIOLockedValueBox<(parsed: [DER: Certificate], order: CircularBuffer<DER>)>(([:], []))

    /// A certificate's DER as a key, hashed by a sample computed once: its length, its first 64 bytes and its last
    /// 64 (as the core's memos hash a TBSCertificate); equality compares every byte. An array's own hash feeds the
    /// hasher every byte, on each look-up, insert, eviction and growth of the table (issue 31: 1.75 µs of the
    /// look-ups alone per fresh-leaf handshake). Only certificates of trusted paths are stored, and the hasher's
    /// seed is the process's own, so a peer cannot fill a bucket: DER sharing a stored one's sample costs one
    /// comparison with it.
    private struct DER: Hashable {
        let bytes: [UInt8]
        private let sample: Int

        init(_ bytes: [UInt8]) {
            var hasher = Hasher()
            hasher.combine(bytes.count)
            bytes.prefix(64).withUnsafeBytes { hasher.combine(bytes: $0) }
            bytes.suffix(64).withUnsafeBytes { hasher.combine(bytes: $0) }
            self.bytes = bytes
            self.sample = hasher.finalize()
        }

        static func == (lhs: DER, rhs: DER) -> Bool {
            lhs.sample == rhs.sample && lhs.bytes == rhs.bytes
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(self.sample)
        }
    }

    init(capacity: Int) {
        precondition(capacity > 0, "a memo needs room for one certificate")
        self.capacity = capacity
    }

    /// The certificate `der` encodes: remembered from a trusted chain with the same bytes, or parsed now (and not
    /// stored: see ``remember(_:)``).
    func certificate(derEncoded der: [UInt8]) throws -> Certificate {
        try self.remembered(derEncoded: der) ?? Certificate(derEncoded: der)
    }

    /// The certificate remembered for exactly this DER, or nil.
    func remembered(derEncoded der: [UInt8]) -> Certificate? {
        let key = DER(der)
        return self.state.withLockedValue { $0.parsed[key] }
    }

    /// Remembers certificates on a path a policy trusted, each with the DER it was parsed from.
    func remember(_ certificates: [(der: [UInt8], certificate: Certificate)]) {
        let keys = certificates.map { DER($0.der) }
        self.state.withLockedValue { state in
            for (key, (_, certificate)) in zip(keys, certificates) where state.parsed.updateValue(certificate, forKey: key) == nil {
                state.order.append(key)
                if state.order.count > self.capacity {
                    state.parsed[state.order.removeFirst()] = nil
                }
            }
        }
    }

    /// Whether the certificate with exactly this DER is remembered.
    func contains(derEncoded der: [UInt8]) -> Bool {
        let key = DER(der)
        return self.state.withLockedValue { $0.parsed[key] != nil }
    }

    /// How many certificates are remembered now.
    var count: Int { self.state.withLockedValue { $0.parsed.count } }
}
