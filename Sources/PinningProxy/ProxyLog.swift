import Foundation
import Pinning

/// One connection's outcome, logged once when it ends: who, where to, the verdict and the traffic.
public struct ProxyLogRecord: Sendable, Encodable {
    /// What kind of connection it was. Logged (text and JSON) as its raw value.
    public enum Kind: String, Sendable, Encodable {
        /// A covered host: TLS terminated and re-originated.
        case intercept
        /// An unlisted host tunnelled as bytes.
        case passthrough
        /// A `--tunnel` listener's connection.
        case tunnel
        /// The proxy's own paths (`/status`, `/metrics`, the PAC file, the CA).
        case local
        /// Answered with an error before any upstream.
        case refused
        /// A proxy-port connection that ended before it asked for anything.
        case proxy
    }

    /// What was decided about the upstream. Logged (text and JSON) as its raw value.
    public enum Verdict: String, Sendable, Encodable {
        /// The upstream's chain was trusted.
        case trusted
        /// The upstream's chain was refused.
        case untrusted
        /// The connection failed before or after a verdict (see ``ProxyLogRecord/failure``).
        case error
        /// No upstream was judged (`-`).
        case notJudged = "-"
    }

    /// See ``Kind``.
    public var kind: Kind
    /// The client's address.
    public var client: String
    /// The host the client asked for (CONNECT target, tunnel upstream), if any.
    public var host: String?
    /// `HOST:PORT` connected to, if any.
    public var upstream: String?
    /// See ``Verdict``.
    public var verdict: Verdict
    /// What went wrong, and on whose side: the upstream's (its TrustFailure code or connection error code,
    /// `upstreamClosed` for a response it cut short) or the client's (`400`/`431` for a request that does not parse,
    /// `clientTLS`, `clientError`, `handshakeTimeout`, `requestHeadTimeout`, `idleTimeout`, `clientClosed`), or the
    /// proxy's refusal (`hostNotAllowed`, `tooManyConnections`, an HTTP status).
    public var failure: String?
    /// The configuration entry that governed the host.
    public var entry: String?
    /// Bytes from the client to the upstream and back (plaintext for intercepted and tunnelled connections).
    public var bytesUp: Int
    /// Bytes from the upstream back to the client.
    public var bytesDown: Int
    /// HTTP requests relayed (intercepted connections).
    public var requests: Int
    /// From accept to close, in milliseconds.
    public var durationMilliseconds: Int
    /// A short explanation of a refusal or error.
    public var message: String?

    /// `text` or `json` line. The host, the upstream and the message are the peers' text (a client's CONNECT target
    /// or request, an upstream's certificate names in a refusal): in text each field is escaped (control,
    /// format and bidi characters as `\u{…}`, and a backslash where it would read as an escape or
    /// escape the closing quote); in JSON the characters JSONEncoder leaves
    /// raw that act on a terminal are written as `\uXXXX`, the values unchanged.
    public func line(json: Bool) -> String {
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            // Encoding strings and numbers cannot fail; were it to, the text line below says the same.
            if let data = try? encoder.encode(self) {
                return VisibleText.jsonEscaped(String(decoding: data, as: UTF8.self))
            }
        }
        let shown: (String) -> String = VisibleText.escaped
        var parts = [self.kind.rawValue, "client=\(shown(self.client))"]
        if let host { parts.append("host=\(shown(host))") }
        if let upstream { parts.append("upstream=\(shown(upstream))") }
        if let entry { parts.append("entry=\(shown(entry))") }
        parts.append("verdict=\(self.verdict.rawValue)")
        if let failure { parts.append("failure=\(shown(failure))") }
        parts.append("requests=\(self.requests)")
        parts.append("bytes_up=\(self.bytesUp)")
        parts.append("bytes_down=\(self.bytesDown)")
        parts.append("duration_ms=\(self.durationMilliseconds)")
        if let message {
            // Our own multi-line messages keep their old form (a space for each line feed); any other hidden character
            // is escaped.
            parts.append("message=\"\(shown(message.replacingOccurrences(of: "\"", with: "'").replacingOccurrences(of: "\n", with: " ")))\"")
        }
        return parts.joined(separator: " ")
    }
}
