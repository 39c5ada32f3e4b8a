import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
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
///
/// A server that hands the validated path to NIOSSL as its verification metadata (``NIOSSLPathHandover``) also
/// keeps each remembered certificate in NIOSSL's form, the object NIOSSL made from the same DER at the handshake
/// that stored it: the metadata then holds that shared object for the connection's life, and the objects NIOSSL
/// makes for each handshake are released when the callback returns, as they are without a handover. (Issue 31:
/// each connection holding its own BoringSSL certificate objects until it closed showed in perf as allocator time
/// at the close: `OPENSSL_free`, `ASN1_OBJECT_free`, `_int_malloc`, `malloc_consolidate`.) A client hands nothing
/// over and keeps no NIOSSL form.
final class ParsedCertificateMemo: Sendable {
    /// The memo every pinned connection of the process shares.
    static let shared = ParsedCertificateMemo(capacity: 2048)

    /// The most certificates remembered.
    let capacity: Int
    // The order is a ring buffer: once full, every new certificate drops the oldest in O(1).
    private let state = NIOLockedValueBox<(parsed: [DER: Entry], order: CircularBuffer<DER>)>(([:], []))

    /// What is remembered for one DER: the parse, and NIOSSL's form once a server handed it over.
    struct Entry: Sendable {
        let certificate: Certificate
        var nio: NIOSSLCertificate?
    }

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
        self.entry(derEncoded: der)?.certificate
    }

    /// The certificate remembered for exactly this DER, with NIOSSL's form when one was remembered, or nil.
    func entry(derEncoded der: [UInt8]) -> Entry? {
        let key = DER(der)
        return self.state.withLockedValue { $0.parsed[key] }
    }

    /// Remembers certificates on a path a policy trusted, each with the DER it was parsed from.
    func remember(_ certificates: [(der: [UInt8], certificate: Certificate)]) {
        self.remember(certificates.map { (der: $0.der, certificate: $0.certificate, nio: nil) })
    }

    /// Remembers certificates on a path a policy trusted, each with the DER it was parsed from and, for a server
    /// that hands the path over, the object NIOSSL made from that DER. A certificate remembered already keeps its
    /// parse and gains NIOSSL's form if it had none.
    func remember(_ certificates: [(der: [UInt8], certificate: Certificate, nio: NIOSSLCertificate?)]) {
        let keys = certificates.map { DER($0.der) }
        self.state.withLockedValue { state in
            for (key, (_, certificate, nio)) in zip(keys, certificates) {
                if state.parsed[key] != nil {
                    if let nio, state.parsed[key]?.nio == nil { state.parsed[key]?.nio = nio }
                    continue
                }
                state.parsed[key] = Entry(certificate: certificate, nio: nio)
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
