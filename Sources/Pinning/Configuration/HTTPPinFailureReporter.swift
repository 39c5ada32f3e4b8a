public import Foundation

/// Delivers pin failure reports with an HTTP POST (`Content-Type: application/json`), with a bounded timeout
/// per attempt and a bounded number of attempts.
///
/// The core has no TLS client of its own (no NIO, no libcurl), so this reporter speaks plain `http://` over
/// a socket. For `https://` report URIs it hands the report to ``secureReporter`` (for example one built on
/// your HTTPS client or URLSession); without one, `https://` URIs are given up on with an outcome saying so.
///
/// Each attempt runs on its own thread, never on the Swift concurrency pool, so a slow collector cannot
/// starve other work. A 2xx status is a delivery; anything else (or no answer) is retried after
/// ``retryDelay``, doubled each time, until ``maximumAttempts``.
public struct HTTPPinFailureReporter: PinFailureReporting {
    /// What happened to one report sent to one URI.
    public struct Outcome: Sendable, Hashable, CustomStringConvertible {
        /// The report URI.
        public var uri: URL
        /// Whether the collector accepted the report (a 2xx status).
        public var delivered: Bool
        /// How many attempts were made.
        public var attempts: Int
        /// The last HTTP status received, if any.
        public var status: Int?
        /// What happened, for logs.
        public var message: String

        /// One line: delivered or not, where, after how many attempts, and why.
        public var description: String {
            "\(self.delivered ? "delivered" : "not delivered") to \(self.uri.absoluteString) after \(self.attempts) attempt\(self.attempts == 1 ? "" : "s"): \(self.message)"
        }
    }

    /// The time one attempt may take, connection to response. Default 5 seconds.
    public var timeout: Duration
    /// The most attempts per URI. Default 3.
    public var maximumAttempts: Int
    /// The pause before the first retry, doubled before each further retry. Default 0.5 seconds.
    public var retryDelay: Duration
    /// Delivers to `https://` URIs, which this reporter cannot send itself.
    public var secureReporter: (any PinFailureReporting)?
    /// Called with the outcome for each URI (a diagnostic hook; keep it fast).
    public var onOutcome: (@Sendable (Outcome) -> Void)?

    /// A reporter with the given bounds.
    public init(
        timeout: Duration = .seconds(5),
        maximumAttempts: Int = 3,
        retryDelay: Duration = .milliseconds(500),
        secureReporter: (any PinFailureReporting)? = nil,
        onOutcome: (@Sendable (Outcome) -> Void)? = nil
    ) {
        self.timeout = timeout
        self.maximumAttempts = max(1, maximumAttempts)
        self.retryDelay = retryDelay
        self.secureReporter = secureReporter
        self.onOutcome = onOutcome
    }

    /// Posts `report` to every `http://` URI in `uris` concurrently, each with up to ``maximumAttempts``
    /// attempts, and hands the `https://` URIs to ``secureReporter``. Returns when every delivery has finished.
    /// Never throws: each `http://` result (and each `https://` URI given up on for want of a
    /// ``secureReporter``) is passed to ``onOutcome``.
    ///
    /// - Parameters:
    ///   - report: The failure report, sent as JSON.
    ///   - uris: The collectors.
    public func send(_ report: PinFailureReport, to uris: [URL]) async {
        let body: [UInt8]
        do {
            body = Array(try report.jsonData())
        } catch {
            for uri in uris {
                self.onOutcome?(Outcome(uri: uri, delivered: false, attempts: 0, status: nil, message: "the report does not encode: \(error)"))
            }
            return
        }
        var secure: [URL] = []
        await withTaskGroup(of: Void.self) { group in
            for uri in uris {
                if uri.scheme?.lowercased() == "https" {
                    secure.append(uri)
                    continue
                }
                group.addTask { await self.deliver(body, to: uri) }
            }
        }
        guard !secure.isEmpty else { return }
        if let secureReporter = self.secureReporter {
            await secureReporter.send(report, to: secure)
        } else {
            for uri in secure {
                self.onOutcome?(
                    Outcome(
                        uri: uri,
                        delivered: false,
                        attempts: 0,
                        status: nil,
                        message: "https:// report URIs need a secureReporter (the core has no TLS client)"
                    )
                )
            }
        }
    }

    private func deliver(_ body: [UInt8], to uri: URL) async {
        guard uri.scheme?.lowercased() == "http", let host = uri.host, !host.isEmpty else {
            self.onOutcome?(Outcome(uri: uri, delivered: false, attempts: 0, status: nil, message: "not an http:// URI"))
            return
        }
        let port = uri.port ?? 80
        var path = uri.path.isEmpty ? "/" : uri.path
        if let query = uri.query { path += "?" + query }
        let seconds = Double(self.timeout.components.seconds) + Double(self.timeout.components.attoseconds) / 1e18
        var delay = self.retryDelay
        var last = PlainHTTPClient.Response(status: nil, message: "not attempted")
        for attempt in 1...self.maximumAttempts {
            last = await PlainHTTPClient.post(host: host, port: port, path: path, body: body, timeout: seconds)
            if let status = last.status, (200..<300).contains(status) {
                self.onOutcome?(Outcome(uri: uri, delivered: true, attempts: attempt, status: status, message: last.message))
                return
            }
            if attempt < self.maximumAttempts {
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    break
                }
                delay = delay * 2
            }
        }
        self.onOutcome?(
            Outcome(uri: uri, delivered: false, attempts: self.maximumAttempts, status: last.status, message: last.message)
        )
    }
}
