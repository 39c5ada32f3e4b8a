import Foundation

/// One connection's outcome, logged once when it ends: who, where to, the verdict and the traffic.
public struct ProxyLogRecord: Sendable, Encodable {
    /// `intercept` (a covered host, TLS terminated and re-originated), `passthrough` (an unlisted host tunnelled
    /// as bytes), `tunnel` (a `--tunnel` listener), `local` (the proxy's own paths), `refused` (answered with an
    /// error before any upstream).
    public var kind: String
    /// The client's address.
    public var client: String
    /// The host the client asked for (CONNECT target, tunnel upstream), if any.
    public var host: String?
    /// `HOST:PORT` connected to, if any.
    public var upstream: String?
    /// `trusted`, `untrusted`, `error`, or `-` when no upstream was judged.
    public var verdict: String
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

    /// `text` or `json` line.
    public func line(json: Bool) -> String {
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            if let data = try? encoder.encode(self) {
                return String(decoding: data, as: UTF8.self)
            }
        }
        var parts = ["\(self.kind)", "client=\(self.client)"]
        if let host { parts.append("host=\(host)") }
        if let upstream { parts.append("upstream=\(upstream)") }
        if let entry { parts.append("entry=\(entry)") }
        parts.append("verdict=\(self.verdict)")
        if let failure { parts.append("failure=\(failure)") }
        parts.append("requests=\(self.requests)")
        parts.append("bytes_up=\(self.bytesUp)")
        parts.append("bytes_down=\(self.bytesDown)")
        parts.append("duration_ms=\(self.durationMilliseconds)")
        if let message { parts.append("message=\"\(message.replacingOccurrences(of: "\"", with: "'").replacingOccurrences(of: "\n", with: " "))\"") }
        return parts.joined(separator: " ")
    }
}
