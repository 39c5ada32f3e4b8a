package import Foundation
public import Pinning

/// A pinned connection failed: refused by the trust policy (with the full ``/Pinning/TrustFailure``), or a connection,
/// TLS or timeout problem.
///
/// NIOSSL reports a refused certificate as a bare `CERTIFICATE_VERIFY_FAILED`; the handlers of this module
/// record why the policy refused and raise this error instead, so the reason reaches the caller.
public struct PinningConnectionError: Error, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong. A struct over a private enum so kinds can be added; keep a default case.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: String, Hashable, Sendable {
            case untrusted
            case unreadablePeerCertificate
            case notEvaluated
            case handshakeFailed
            case connectionClosed
            case connectFailed
            case timedOut
            case invalidRequest
            case httpFailed
            case tooManyRedirects
            case challengeCancelled
            case protectionSpaceRejected
            case invalidCredential
            case refusedByCheck
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// The trust policy refused the peer's chain; ``PinningConnectionError/trustFailure`` says why.
        public static let untrusted = Code(.untrusted)
        /// The peer sent no certificate, or its leaf certificate cannot be parsed.
        public static let unreadablePeerCertificate = Code(.unreadablePeerCertificate)
        /// The handshake completed without the policy being applied on this connection (for example a resumed
        /// session); refused, because trust is never granted without an evaluation.
        public static let notEvaluated = Code(.notEvaluated)
        /// The TLS handshake failed for another reason (protocol, the peer refused our certificate or wanted one).
        public static let handshakeFailed = Code(.handshakeFailed)
        /// The connection closed before the handshake completed.
        public static let connectionClosed = Code(.connectionClosed)
        /// The TCP connection could not be established.
        public static let connectFailed = Code(.connectFailed)
        /// Connecting or the handshake took longer than allowed.
        public static let timedOut = Code(.timedOut)
        /// The request cannot be sent: not an `https` URL, no host, or the client was shut down.
        public static let invalidRequest = Code(.invalidRequest)
        /// The HTTP exchange failed after a trusted handshake: a malformed or oversized response, or the
        /// connection closed mid-response (a server refusing our client certificate under TLS 1.3 does this).
        public static let httpFailed = Code(.httpFailed)
        /// More redirects than allowed, or a redirect to a URL that is not `https`.
        public static let tooManyRedirects = Code(.tooManyRedirects)
        /// An authentication challenge handler answered ``AuthenticationChallengeDisposition/cancelAuthenticationChallenge``.
        public static let challengeCancelled = Code(.challengeCancelled)
        /// An authentication challenge handler answered ``AuthenticationChallengeDisposition/rejectProtectionSpace``
        /// for a server-trust challenge (there is no other protection space to try).
        public static let protectionSpaceRejected = Code(.protectionSpaceRejected)
        /// A challenge handler answered with a credential of the wrong kind for the challenge.
        public static let invalidCredential = Code(.invalidCredential)
        /// A check after validation refused the peer (``MutualTLSServer/ClientCheck``, at a full handshake or on a
        /// resumed session).
        public static let refusedByCheck = Code(.refusedByCheck)

        /// The code's name.
        public var description: String { self.kind.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// The host the connection was for (the name the policy checked), if any.
    public var host: String?
    /// For ``Code/untrusted``: why the policy refused.
    public var trustFailure: TrustFailure?
    /// What happened, in one sentence of words: what a user is shown. It never quotes library internals
    /// (BoringSSL error numbers, source paths, NIO type dumps); those are in ``underlying``.
    public var message: String
    /// The error NIO or NIOSSL reported, when there was one.
    public var underlying: (any Error)?
    /// When the failure came after a trusted handshake (an HTTP error, or a server that refused our client
    /// certificate once the handshake had completed, as TLS 1.3 servers do): that handshake.
    public var handshake: PinnedHandshake?
    /// When the failure is a response body longer than the request's cap: that cap (a CRL download says so in
    /// its own words).
    var exceededBodyLimit: Int?
    /// For a failure of ``PinnedHTTPClient/get(_:headers:maximumBodySize:resolve:)``: the URL it was requesting
    /// when it failed, which after a redirect is not the URL it was given (`pinning check` names it, and the host
    /// judged, instead of the first URL's). Nil for failures of any other call.
    package var url: URL?

    /// Creates an error.
    public init(code: Code, host: String?, message: String, trustFailure: TrustFailure? = nil, underlying: (any Error)? = nil) {
        self.code = code
        self.host = host
        self.message = message
        self.trustFailure = trustFailure
        self.underlying = underlying
    }

    /// This error with the alerts seen on its connection (those already set stay).
    func with(_ alerts: TLSAlertsSeen?) -> PinningConnectionError {
        var error = self
        error.receivedAlert = error.receivedAlert ?? alerts?.receivedFailure
        error.sentAlert = error.sentAlert ?? alerts?.sentFailure
        return error
    }

    /// The policy refused the peer.
    public static func untrusted(_ failure: TrustFailure, host: String?) -> PinningConnectionError {
        PinningConnectionError(code: .untrusted, host: host, message: failure.description, trustFailure: failure)
    }

    /// The TLS alert the peer sent, when the failure is one (a server refusing our client certificate sends
    /// `certificate_required` or `unknown_ca`, a server refusing our TLS versions `protocol_version`): read from the
    /// connection's records by ``TLSAlertObserver``, never from a library's error text. Nil when no alert is known
    /// (none was sent, or it could not be read: a TLS 1.2 alert after ChangeCipherSpec).
    public var receivedAlert: TLSAlert?
    /// The TLS alert this side sent (our TLS library refusing the peer: `bad_certificate` when the policy refused
    /// its chain, `protocol_version`, `decode_error`…), when one is known.
    public var sentAlert: TLSAlert?

    /// `"untrusted: <the TrustFailure's one-line description>"`, or `"CODE: host: message"`: words only.
    public var description: String {
        if let trustFailure { return "\(self.code): \(trustFailure.description)" }
        var text = "\(self.code): "
        if let host { text += "\(host): " }
        text += self.message
        return text
    }

    /// ``description`` followed by the error NIO or NIOSSL reported, as they print it (for logs and `--verbose`).
    public var debugDescription: String {
        guard let underlying else { return self.description }
        return "\(self.description) [\(String(reflecting: underlying))]"
    }
}
