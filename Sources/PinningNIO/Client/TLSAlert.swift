/// A TLS alert (RFC 8446 §6, RFC 5246 §7.2) as it crossed the wire: a server refusing our client certificate, a
/// version or cipher it does not accept, or any other handshake refusal. ``TLSAlertObserver`` reads it from the
/// records themselves (decrypting TLS 1.3's encrypted ones), never from a TLS library's error text.
public struct TLSAlert: Sendable, Hashable, CustomStringConvertible {
    /// The alert's level byte.
    public enum Level: Int, Sendable, Hashable {
        /// `warning` (1). TLS 1.3 treats every alert but `close_notify` and `user_canceled` as fatal whatever the
        /// level says (RFC 8446 §6).
        case warning = 1
        /// `fatal` (2).
        case fatal = 2
    }

    /// The alert's number, e.g. 116.
    public var code: Int
    /// The alert's name as the RFCs spell it, e.g. `certificate_required`; `alert N` when unknown.
    public var name: String
    /// The level the sender gave it.
    public var level: Level

    /// An alert by number, named from the RFCs' registry.
    public init(code: Int, level: Level = .fatal) {
        self.code = code
        self.level = level
        self.name = Self.names[code] ?? "alert \(code)"
    }

    /// `TLS alert certificate_required (116)`.
    public var description: String { "TLS alert \(self.name) (\(self.code))" }

    /// Whether the alert is the peer's verdict on a certificate (ours, when a server sends it).
    public var isAboutCertificate: Bool { [41, 42, 43, 44, 45, 46, 48, 49, 116].contains(self.code) }

    /// Whether the alert ends a connection in the ordinary way (`close_notify`, `user_canceled`) rather than
    /// reporting a failure.
    public var isClosure: Bool { self.code == 0 || self.code == 90 }

    /// The TLS Alert registry (IANA "TLS Alerts"), the values a peer sends.
    static let names: [Int: String] = [
        0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 21: "decryption_failed",
        22: "record_overflow", 30: "decompression_failure", 40: "handshake_failure", 41: "no_certificate",
        42: "bad_certificate", 43: "unsupported_certificate", 44: "certificate_revoked", 45: "certificate_expired",
        46: "certificate_unknown", 47: "illegal_parameter", 48: "unknown_ca", 49: "access_denied",
        50: "decode_error", 51: "decrypt_error", 60: "export_restriction", 70: "protocol_version",
        71: "insufficient_security", 80: "internal_error", 86: "inappropriate_fallback", 90: "user_canceled",
        100: "no_renegotiation", 109: "missing_extension", 110: "unsupported_extension",
        111: "certificate_unobtainable", 112: "unrecognized_name", 113: "bad_certificate_status_response",
        114: "bad_certificate_hash_value", 115: "unknown_psk_identity", 116: "certificate_required",
        120: "no_application_protocol", 121: "ech_required",
    ]
}

/// The alerts seen on one connection's handshake, each direction apart.
public struct TLSAlertsSeen: Sendable, Hashable {
    /// The alerts the peer sent, in order (at most a few: a connection ends at its first fatal alert).
    public var received: [TLSAlert] = []
    /// The alerts this side sent, in order.
    public var sent: [TLSAlert] = []

    /// Nothing seen.
    public init() {}

    /// The alert that ended the connection from the peer's side: its first one that is not an ordinary closure.
    public var receivedFailure: TLSAlert? { self.received.first { !$0.isClosure } }
    /// The alert that ended the connection from this side: its first one that is not an ordinary closure.
    public var sentFailure: TLSAlert? { self.sent.first { !$0.isClosure } }
}
