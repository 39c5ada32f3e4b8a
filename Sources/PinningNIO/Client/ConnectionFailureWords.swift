import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning

/// Turns what NIO, NIOSSL and NIOHTTP1 report into words a user can act on, without their internals (BoringSSL's
/// packed error numbers, its source paths, NIO's type dumps). The full error stays in
/// ``PinningConnectionError/underlying`` for `--verbose` and logs.
package enum ConnectionFailureWords {
    /// One BoringSSL error entry's reason, read back from NIOSSL's text (its `description` is
    /// `Error: <decimal> error:<hex>:<library>:OPENSSL_internal:<REASON> at <file>:<line>`), only to choose words
    /// for failures that are not alerts (a version or protocol mismatch seen by our own TLS library). Alerts are never
    /// read from here: ``TLSAlertObserver`` takes them from the records.
    struct BoringSSLEntry: Equatable {
        /// The reason's name, e.g. `WRONG_VERSION_NUMBER`; for NIOSSL's synthetic entries, their text.
        var reason: String

        init(_ entry: BoringSSLInternalError) {
            let text = entry.description
            guard let range = text.range(of: "error:") else {
                // Synthetic ("EOF during handshake"): `Error:  <text>`.
                self.reason = text.replacingOccurrences(of: "Error:", with: "").trimmingCharacters(in: .whitespaces)
                return
            }
            let fields = text[range.upperBound...].split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
            let last = fields.count == 4 ? String(fields[3]) : ""
            self.reason = String(last.components(separatedBy: " at ").first ?? last)
        }
    }

    /// The BoringSSL error stack inside `error`, if it is one of NIOSSL's.
    static func boringSSLEntries(_ error: any Error) -> [BoringSSLEntry]? {
        func stack(_ error: BoringSSLError) -> [BoringSSLEntry]? {
            switch error {
            case .sslError(let stack), .unknownError(let stack), .invalidSNIName(let stack), .failedToSetALPN(let stack):
                return stack.map(BoringSSLEntry.init)
            default:
                return nil
            }
        }
        if let error = error as? NIOSSLError {
            switch error {
            case .handshakeFailed(let inner), .shutdownFailed(let inner):
                return stack(inner)
            default:
                return nil
            }
        }
        if let error = error as? BoringSSLError { return stack(error) }
        return nil
    }

    /// Words for a TLS-level failure, or nil when `error` is not one. `alerts` are those ``TLSAlertObserver`` read
    /// on the connection: the peer's alert, when known, is the words (never BoringSSL's text about it).
    static func tlsProblem(_ error: any Error, alerts: TLSAlertsSeen? = nil) -> String? {
        if let alert = alerts?.receivedFailure {
            return "the server refused the handshake: \(alert)"
        }
        if let error = error as? NIOSSLError {
            switch error {
            case .uncleanShutdown:
                return "the server closed the connection without a TLS close_notify"
            case .handshakeFailed, .shutdownFailed:
                break
            default:
                return "TLS error (\(error))"
            }
        }
        guard let entries = self.boringSSLEntries(error) else { return nil }
        guard let first = entries.first else {
            return "the TLS handshake failed"
        }
        return self.words(forReason: first.reason)
    }

    /// Words for why the TLS handshake with a *client* failed, as a server reports it (the client sent an alert,
    /// presented no certificate, sent a certificate message over BoringSSL's limit, did not speak TLS), or nil
    /// when `error` is not a TLS failure. ``tlsProblem(_:)`` says the same from a client's side.
    /// A ``PinningConnectionError`` is read by its ``PinningConnectionError/receivedAlert`` first, then its
    /// underlying error; another error by `alerts`, what a ``TLSAlertObserver`` read on the connection.
    package static func clientHandshakeProblem(_ error: any Error, alerts: TLSAlertsSeen? = nil) -> String? {
        if let alert = alerts?.receivedFailure ?? (error as? PinningConnectionError)?.receivedAlert {
            return alert.isAboutCertificate
                ? "the client refused this server's certificate: \(alert)" : "the client ended the handshake: \(alert)"
        }
        if let error = error as? PinningConnectionError {
            return error.underlying.flatMap { self.clientHandshakeProblem($0) }
        }
        if let error = error as? NIOSSLError, case .uncleanShutdown = error {
            return "the client closed the connection during the TLS handshake"
        }
        guard let entries = self.boringSSLEntries(error) else { return nil }
        guard let first = entries.first else { return "the TLS handshake failed" }
        if let failure = SharedHandshakeFailure(reason: first.reason) {
            return failure.words(peer: .client)
        }
        switch first.reason {
        case "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            return "the client presented no certificate, and this server requires one"
        case "EXCESSIVE_MESSAGE_SIZE":
            // BoringSSL's SSL_MAX_CERT_LIST_DEFAULT: a Certificate message is read whole, up to 100 KiB.
            return "a handshake message of the client is larger than the TLS library reads (a certificate chain over 100 KiB?)"
        case "BAD_SIGNATURE":
            return "the client's handshake signature does not verify (its key is not its certificate's?)"
        case "BAD_PACKET_LENGTH":
            // Seen from curl, Python and openssl s_client (OpenSSL 3) under TLS 1.3: a client that rejects the
            // server's certificate sends its alert unencrypted, which BoringSSL cannot read as a record.
            return "the client sent a TLS record that cannot be read (what an OpenSSL client sends under TLS 1.3 when it does not trust this server's certificate)"
        default:
            return self.words(forReason: first.reason)
        }
    }

    /// A handshake failure either side meets, by BoringSSL's reason names: one list of the names, worded for the
    /// side that failed with us (``words(forReason:)`` speaks of the server, ``clientHandshakeProblem(_:alerts:)``
    /// of the client).
    enum SharedHandshakeFailure {
        case peerClosed
        case notTLS
        case noCommonVersion
        case noCommonCipher
        case noCommonGroup
        case noCommonSignatureAlgorithm

        /// The side the words speak of.
        enum Peer {
            case server
            case client
        }

        init?(reason: String) {
            switch reason {
            case "EOF during handshake", "EOF during addition certificate chain validation":
                self = .peerClosed
            case "WRONG_VERSION_NUMBER", "HTTP_REQUEST", "HTTPS_PROXY_REQUEST", "UNKNOWN_PROTOCOL", "RECORD_TOO_LARGE",
                "INVALID_OUTER_RECORD_TYPE", "UNEXPECTED_RECORD":
                self = .notTLS
            case "UNSUPPORTED_PROTOCOL", "WRONG_SSL_VERSION", "UNKNOWN_SSL_VERSION":
                self = .noCommonVersion
            case "NO_SHARED_CIPHER", "NO_CIPHER_MATCH", "NO_CIPHERS_AVAILABLE":
                self = .noCommonCipher
            case "NO_SHARED_GROUP", "WRONG_CURVE", "UNSUPPORTED_ELLIPTIC_CURVE":
                self = .noCommonGroup
            case "NO_COMMON_SIGNATURE_ALGORITHMS", "WRONG_SIGNATURE_TYPE":
                self = .noCommonSignatureAlgorithm
            default:
                return nil
            }
        }

        func words(peer: Peer) -> String {
            let (them, us) = peer == .server ? ("server", "client") : ("client", "server")
            switch self {
            case .peerClosed:
                return "the \(them) closed the connection during the TLS handshake"
            case .notTLS where peer == .server:
                return "the server did not answer with TLS (is the port plain HTTP, or another protocol?)"
            case .notTLS:
                return "the client did not speak TLS (plain HTTP to this HTTPS port, or another protocol?)"
            case .noCommonVersion:
                return "no TLS version in common with the \(them) (this \(us) speaks TLS 1.2 and 1.3)"
            case .noCommonCipher:
                return "no cipher suite in common with the \(them)"
            case .noCommonGroup:
                return "no key-exchange group in common with the \(them)"
            case .noCommonSignatureAlgorithm:
                return "no signature algorithm in common with the \(them)"
            }
        }
    }

    /// BoringSSL reason names, in words. Only the reasons a client meets from a server are spelled out; the rest
    /// are shown as the reason's own name in lower case ("TLS error: decode error"), never as a number.
    static func words(forReason reason: String) -> String {
        if let failure = SharedHandshakeFailure(reason: reason) {
            return failure.words(peer: .server)
        }
        switch reason {
        case "WRONG_CIPHER_RETURNED", "UNKNOWN_CIPHER_RETURNED":
            // Only a client meets these: the server chose a cipher suite the client did not offer.
            return SharedHandshakeFailure.noCommonCipher.words(peer: .server)
        case "CERTIFICATE_VERIFY_FAILED":
            return "the certificate was refused"
        case "CANNOT_PARSE_LEAF_CERT", "UNKNOWN_CERTIFICATE_TYPE", "WRONG_CERTIFICATE_TYPE":
            return "the server's certificate uses a key this TLS library cannot handle"
        case "BAD_SIGNATURE":
            return "the server's handshake signature does not verify"
        case "DECRYPTION_FAILED_OR_BAD_RECORD_MAC", "DECRYPTION_FAILED":
            return "a TLS record failed to decrypt (corrupted in transit?)"
        default:
            let spaced = reason.lowercased().replacingOccurrences(of: "_", with: " ")
            return "TLS error: \(spaced)"
        }
    }

    /// Words for a socket error: `strerror`, lower-cased ("connection refused").
    static func socketProblem(_ error: any Error) -> String? {
        guard let error = error as? IOError else { return nil }
        return SystemErrorText.words(error.errnoCode)
    }

    /// `127.0.0.1` / `::1` for an address, no port.
    static func addressText(_ address: SocketAddress) -> String {
        address.ipAddress ?? address.description
    }

    /// Words for why connecting to `host`:`port` failed (refused, unreachable, DNS), or nil.
    package static func connectProblem(_ error: any Error, host: String, port: Int) -> String {
        if let error = error as? NIOConnectionError {
            if error.connectionErrors.isEmpty {
                if error.dnsAError != nil || error.dnsAAAAError != nil {
                    return "cannot resolve host \(host)"
                }
                return "cannot connect to \(host) port \(port): no address"
            }
            // One line per distinct cause, as curl reports the last one; here the first address tried first.
            let failures = error.connectionErrors.map { failure in
                "\(self.addressText(failure.target)): \(self.socketProblem(failure.error) ?? "cannot connect")"
            }
            if failures.count == 1, let only = error.connectionErrors.first {
                return "cannot connect to \(self.target(host, only.target)) port \(port): \(self.socketProblem(only.error) ?? "cannot connect")"
            }
            return "cannot connect to \(host) port \(port) (\(failures.joined(separator: "; ")))"
        }
        if let problem = self.socketProblem(error) {
            return "cannot connect to \(host) port \(port): \(problem)"
        }
        if let error = error as? ChannelError, case .connectTimeout = error {
            return "cannot connect to \(host) port \(port): timed out"
        }
        return "cannot connect to \(host) port \(port)"
    }

    /// `host` alone when it is the address, `host (address)` otherwise.
    static func target(_ host: String, _ address: SocketAddress) -> String {
        let text = self.addressText(address)
        return text == host ? host : "\(host) (\(text))"
    }

    /// Words for an HTTP parsing failure (the reply was not HTTP), or nil.
    static func httpProblem(_ error: any Error) -> String? {
        guard let error = error as? HTTPParserError else { return nil }
        switch error {
        case .invalidEOFState:
            return "the connection closed before the response was complete"
        default:
            let name = "\(error)".replacingOccurrences(of: "([A-Z])", with: " $1", options: .regularExpression).lowercased()
            return "the server did not answer with HTTP (\(name))"
        }
    }

    /// The best words for any error met on a connection.
    package static func words(_ error: any Error) -> String {
        if let error = error as? PinningConnectionError { return error.message }
        if let words = self.tlsProblem(error) ?? self.httpProblem(error) ?? self.socketProblem(error) { return words }
        if let error = error as? ChannelError {
            switch error {
            case .connectTimeout: return "timed out"
            case .ioOnClosedChannel, .alreadyClosed, .eof, .outputClosed, .inputClosed: return "the connection closed"
            default: return "connection error"
            }
        }
        return "connection error"
    }

    /// `"a (b)"` trimmed of NIO's `Error:` noise, for `--verbose` and the debug description.
    static func details(_ error: any Error) -> String {
        String(describing: error)
    }
}
