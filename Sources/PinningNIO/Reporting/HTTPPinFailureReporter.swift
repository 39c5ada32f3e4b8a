public import Foundation
public import NIOCore
import NIOHTTP1
public import NIOPosix
public import Pinning

/// Delivers pin failure reports with an HTTP POST (`Content-Type: application/json`) over NIO, with a
/// bounded timeout per attempt and a bounded number of attempts.
///
/// Reports go through this package's own client path, a ``PinnedHTTPClient`` (one per ``send(_:to:)``, on a TLS
/// context shared with every reporter of equal settings). `https://` collectors are judged by the reporter's own
/// ``evaluator`` and ``settings``: by default ``/Pinning/SecurityPolicy/defaultEvaluation`` against the platform roots,
/// and never the pins whose failure is being reported, so a report about a pin failure is not blocked by that
/// pin. `http://` URIs are posted in the clear, as RFC 7469 collectors sometimes are. Only the status of the
/// answer is read (`Connection: close`; the body is not waited for), and redirects are not followed.
///
/// A 2xx status is a delivery; anything else (or no answer) is retried after ``retryDelay``, doubled each
/// time, until ``maximumAttempts``. Hand the reporter to a ``PinFailureReportQueue`` to rate-limit it and to
/// keep delivery off the verdict's path.
public struct HTTPPinFailureReporter: Sendable {
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
        /// What happened, for logs. Raw: it can quote the collector (a refused certificate's names, a TLS or
        /// connection failure's words), and a collector need not be friendly; ``description`` shows it escaped.
        public var message: String

        /// One line: delivered or not, where, after how many attempts, and why. The URI and ``message`` are escaped
        /// (control, format and bidi characters as `\u{…}`), so a hostile collector's
        /// text cannot move a terminal's cursor, forge a log line or reorder the text around it.
        public var description: String {
            let uri = VisibleText.escaped(self.uri.absoluteString)
            return "\(self.delivered ? "delivered" : "not delivered") to \(uri) after \(self.attempts) attempt\(self.attempts == 1 ? "" : "s"): \(VisibleText.escaped(self.message))"
        }
    }

    /// The time one attempt may take: connecting (with the TLS handshake), then the response's status line.
    /// Default 5 seconds.
    public var timeout: Duration
    /// The most attempts per URI. Default 3.
    public var maximumAttempts: Int
    /// The pause before the first retry, doubled before each further retry. Default 0.5 seconds.
    public var retryDelay: Duration
    /// Judges the collectors of `https://` URIs. Default ``/Pinning/SecurityPolicy/defaultEvaluation``.
    public var evaluator: any ServerTrustEvaluating
    /// Anchors, platform roots and limits for judging the collectors. Default: the platform roots.
    public var settings: TrustSettings
    /// The event loops the deliveries run on. Default NIO's shared singleton.
    public var group: any EventLoopGroup
    /// Called with the outcome for each URI (a diagnostic hook; keep it fast).
    public var onOutcome: (@Sendable (Outcome) -> Void)?
    /// The program sending, put in each report that does not name one (`app-id`), as TrustKit puts the app's
    /// bundle identifier in its reports; nil leaves the reports as they are.
    public var appId: String?
    /// The program's version, put in each report that does not give one (`app-version`).
    public var appVersion: String?
    /// Where the client of each batch takes its TLS context (tests count them).
    package var contexts: ClientTLSContexts = .shared

    /// A reporter with the given bounds.
    ///
    /// - Parameters:
    ///   - timeout: The bound on one attempt.
    ///   - maximumAttempts: The most attempts per URI (at least 1).
    ///   - retryDelay: The first pause between attempts, doubled each time.
    ///   - evaluator: Judges `https://` collectors.
    ///   - settings: How the collectors' chains are judged (default: the platform roots).
    ///   - group: The event loops.
    ///   - onOutcome: Called with the outcome for each URI.
    public init(
        timeout: Duration = .seconds(5),
        maximumAttempts: Int = 3,
        retryDelay: Duration = .milliseconds(500),
        evaluator: any ServerTrustEvaluating = SecurityPolicy.defaultEvaluation,
        settings: TrustSettings = .default,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onOutcome: (@Sendable (Outcome) -> Void)? = nil
    ) {
        self.timeout = timeout
        self.maximumAttempts = max(1, maximumAttempts)
        self.retryDelay = retryDelay
        self.evaluator = evaluator
        self.settings = settings
        self.group = group
        self.onOutcome = onOutcome
    }

    /// A reporter judging collectors with the settings of a ``/Pinning/ServerTrust`` template (its certificates are
    /// ignored); the other parameters as in ``init(timeout:maximumAttempts:retryDelay:evaluator:settings:group:onOutcome:)``.
    ///
    /// - Throws: ``FixedValidationTimeError`` when the template fixes ``/Pinning/ServerTrust/validationTime``.
    @available(*, deprecated, message: "pass settings: TrustSettings; a ServerTrust template can freeze the reporter's clock")
    public init(
        timeout: Duration = .seconds(5),
        maximumAttempts: Int = 3,
        retryDelay: Duration = .milliseconds(500),
        evaluator: any ServerTrustEvaluating = SecurityPolicy.defaultEvaluation,
        trust: ServerTrust,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onOutcome: (@Sendable (Outcome) -> Void)? = nil
    ) throws {
        self.init(
            timeout: timeout, maximumAttempts: maximumAttempts, retryDelay: retryDelay, evaluator: evaluator,
            settings: try TrustSettings.ofTemplate(trust, for: "HTTPPinFailureReporter(trust:)"), group: group, onOutcome: onOutcome)
    }

    /// The settings as an empty ``/Pinning/ServerTrust`` (what the deprecated `trust:` form held).
    @available(*, deprecated, renamed: "settings")
    public var trust: ServerTrust { ServerTrust(certificates: [], settings: self.settings) }

    /// Posts `report` to every URI in `uris` concurrently, each with up to ``maximumAttempts`` attempts, and
    /// returns when every delivery has finished. Never throws: each result is passed to ``onOutcome``.
    ///
    /// - Parameters:
    ///   - report: The failure report, sent as JSON.
    ///   - uris: The collectors, `https://` or `http://`.
    public func send(_ report: PinFailureReport, to uris: [URL]) async {
        var report = report
        if report.appId == nil { report.appId = self.appId }
        if report.appVersion == nil { report.appVersion = self.appVersion }
        let body: [UInt8]
        do {
            body = Array(try report.jsonData())
        } catch {
            for uri in uris {
                self.onOutcome?(Outcome(uri: uri, delivered: false, attempts: 0, status: nil, message: "the report does not encode: \(error)"))
            }
            return
        }
        let client: PinnedHTTPClient
        do {
            client = try self.makeClient()
        } catch {
            for uri in uris {
                self.onOutcome?(Outcome(uri: uri, delivered: false, attempts: 0, status: nil, message: "no TLS context for the report: \(error)"))
            }
            return
        }
        await withTaskGroup(of: Void.self) { group in
            for uri in uris {
                group.addTask { await self.deliver(body, to: uri, with: client) }
            }
        }
        await client.shutdown()
    }

    /// The client of one batch: ``timeout`` for connecting (with the handshake) and for the status, no redirects,
    /// HTTP/1.1, the reporter's own evaluator and settings.
    func makeClient() throws -> PinnedHTTPClient {
        let timeout = Self.timeAmount(self.timeout)
        let configuration = PinnedHTTPClientConfiguration(connectTimeout: timeout, requestTimeout: timeout, maximumRedirects: 0, httpVersions: .http1Only)
        let (evaluator, settings, contexts) = (self.evaluator, self.settings, self.contexts)
        return try PinnedHTTPClient(
            tls: { base in
                try PinnedTLSClient(evaluator: evaluator, settings: settings, identity: nil, configuration: base, keyLog: nil, contexts: contexts)
            }, identity: nil, tlsConfiguration: nil, configuration: configuration, group: self.group)
    }

    private func deliver(_ body: [UInt8], to uri: URL, with client: PinnedHTTPClient) async {
        let scheme = uri.scheme?.lowercased()
        guard scheme == "https" || scheme == "http" else {
            self.onOutcome?(Outcome(uri: uri, delivered: false, attempts: 0, status: nil, message: "not an https:// or http:// URI"))
            return
        }
        guard let host = uri.host, !host.isEmpty else {
            self.onOutcome?(Outcome(uri: uri, delivered: false, attempts: 0, status: nil, message: "the URI has no host"))
            return
        }
        // The properties are public vars: whatever a caller stored, at least one attempt, and a pause that stays
        // within an hour (doubling an extreme Duration would otherwise overflow).
        let maximumAttempts = max(1, self.maximumAttempts)
        let longestDelay = Duration.seconds(3600)
        var delay = min(max(self.retryDelay, .zero), longestDelay)
        var last: (status: Int?, message: String) = (nil, "not attempted")
        var attempts = 0
        for attempt in 1...maximumAttempts {
            attempts = attempt
            last = await Self.post(body, to: uri, with: client)
            if let status = last.status, (200..<300).contains(status) {
                self.onOutcome?(Outcome(uri: uri, delivered: true, attempts: attempt, status: status, message: last.message))
                return
            }
            if attempt < maximumAttempts {
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    break  // Cancelled: give up with what the attempts so far said.
                }
                delay = min(delay * 2, longestDelay)
            }
        }
        self.onOutcome?(
            Outcome(uri: uri, delivered: false, attempts: attempts, status: last.status, message: last.message)
        )
    }

    /// One POST of the report: the status, or why there is none (a refused collector with its trust failure,
    /// "untrusted: …").
    private static func post(_ body: [UInt8], to uri: URL, with client: PinnedHTTPClient) async -> (status: Int?, message: String) {
        let request = PinnedHTTPClient.RequestLine(method: .POST, body: body, statusOnly: true)
        do {
            let (response, _) = try await client.perform(uri, request: request, headers: HTTPHeaders([("content-type", "application/json")]), allowsPlainHTTP: true)
            let status = Int(response.head.status.code)
            return (status, "HTTP \(status)")
        } catch {
            return (nil, error.trustFailure != nil ? error.description : error.message)
        }
    }

    /// `duration` as NIO's nanosecond count, saturating instead of trapping: a negative duration is zero, one
    /// beyond `Int64.max` nanoseconds (about 292 years) is `Int64.max`.
    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, attoseconds >= 0 else { return .zero }
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return .nanoseconds(.max) }
        let (total, overflow2) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return .nanoseconds(overflow2 ? .max : total)
    }
}
