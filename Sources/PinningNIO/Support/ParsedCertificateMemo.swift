import NIOConcurrencyHelpers
import NIOCore
import SwiftASN1
import X509

/// Certificates already parsed, by their exact DER: the same intermediate arrives on every handshake with a
/// server (or from every device of one CA), and a returning peer presents the same leaf, so each is parsed once
/// rather than on every handshake (BoringSSL shares parsed certificates between connections the same way, with
/// its `CRYPTO_BUFFER` pool).
///
/// Only the parse is remembered, never a verdict: a hit returns the value `Certificate(derEncoded:)` returned for
/// byte-for-byte the same DER (the dictionary compares whole keys), and every handshake still validates what it
/// gets. Bounded: at most ``capacity`` certificates, the oldest forgotten first. A DER that does not parse is not
/// remembered (it throws again, as it would).
final class ParsedCertificateMemo: Sendable {
    /// The memo every pinned connection of the process shares.
    static let shared = ParsedCertificateMemo(capacity: 2048)

    /// The most certificates remembered.
    let capacity: Int
    // The order is a ring buffer: once full, every new certificate drops the oldest in O(1).
    private let state = NIOLockedValueBox<(parsed: [[UInt8]: Certificate], order: CircularBuffer<[UInt8]>)>(([:], []))

    init(capacity: Int) {
        precondition(capacity > 0, "a memo needs room for one certificate")
        self.capacity = capacity
    }

    /// The certificate `der` encodes, parsed now or remembered from an earlier parse of the same bytes.
    func certificate(derEncoded der: [UInt8]) throws -> Certificate {
        if let parsed = self.state.withLockedValue({ $0.parsed[der] }) {
            return parsed
        }
        // Parsed outside the lock: another thread parsing the same bytes meanwhile stores an equal value.
        let certificate = try Certificate(derEncoded: der)
        self.state.withLockedValue { state in
            if state.parsed.updateValue(certificate, forKey: der) == nil {
                state.order.append(der)
            }
            if state.order.count > self.capacity {
                state.parsed[state.order.removeFirst()] = nil
            }
        }
        return certificate
    }

    /// How many certificates are remembered now.
    var count: Int { self.state.withLockedValue { $0.parsed.count } }
}
