import Crypto
import Foundation
public import Hummingbird
import Logging
import NIOCore
import Pinning
import Prometheus

/// What the collector was started with (the command line, parsed).
public struct CollectorSettings: Sendable {
    /// The API and dashboard token.
    public var token: String
    /// Reports whose last occurrence is older than this are deleted (hourly).
    public var retentionDays: Int = 90
    /// The largest `POST /reports` body, checked before any of it is parsed.
    public var maxReportBytes: Int = 65536
    /// Reports accepted per source per minute.
    public var ratePerMinute: Int = 600
    /// Identical reports within this many seconds share a row.
    public var deduplicationSeconds: Int = 86400
    /// Whether the dashboard is served over HTTPS (its cookie is then `Secure`).
    public var secure: Bool = false
    /// The most reports the ingest writer commits in one transaction, gathered from the requests waiting (group
    /// commit); a request is never split, so 1 commits each request alone.
    public var commitBatch: Int = 512
    /// PostgreSQL: how many of the ingest writer's transactions may be in flight at once (SQLite: always 1). One by
    /// default: two were not reliably faster here, and they split the waiting requests into smaller commits.
    public var writerTransactions: Int = 1
    /// `--handshake-timeout`: over HTTPS, seconds a client has to complete its TLS handshake (as `pinning serve`).
    public var handshakeTimeout: Double = 10
    /// `--request-head-timeout`: seconds a request head has to arrive whole, from the connection being ready or
    /// the end of the previous request (as `pinning serve`; 408 when part of it came).
    public var requestHeadTimeout: Double = 30
    /// PostgreSQL: how long a statement waits for a connection before the database counts as unreachable (503).
    /// Not an option; the tests that are not about it give it more on a machine loaded far beyond its cores.
    public var databaseConnectionWait: Duration = .seconds(3)

    public init(token: String) { self.token = token }
}

/// The routes: ingest, the token-protected API and dashboard, `/status` and `/metrics`.
public struct CollectorRoutes: Sendable {
    public let settings: CollectorSettings
    public let store: ReportStore
    public let writer: IngestWriter
    public let metrics: CollectorMetrics
    public let limiter: RateLimiter
    let parser = ReportParser()
    let dashboard: Dashboard
    /// Whether the database answers, for `/status`.
    let databaseProbe: DatabaseProbe
    /// Salt of the source-address hash, kept in the database so that counts survive restarts.
    let sourceSalt: [UInt8]
    let started = ContinuousClock.now
    /// The cookie the login sets: an HMAC of a fixed label under the token, so the cookie is not the token.
    let sessionValue: String

    public init(settings: CollectorSettings, store: ReportStore, writer: IngestWriter, metrics: CollectorMetrics, sourceSalt: [UInt8], anchors: KnownAuthorities = KnownAuthorities()) {
        self.settings = settings
        self.store = store
        self.writer = writer
        self.metrics = metrics
        self.limiter = RateLimiter(perMinute: settings.ratePerMinute)
        self.sourceSalt = sourceSalt
        let mac = HMAC<SHA256>.authenticationCode(for: Array("pinning-collector dashboard session".utf8), using: SymmetricKey(data: Array(settings.token.utf8)))
        self.sessionValue = Data(mac).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        self.dashboard = Dashboard(anchors: anchors)
        self.databaseProbe = DatabaseProbe(database: store.database)
    }

    static let cookieName = "pinning_collector_session"

    /// The router with every route.
    public func router() -> Router<CollectorContext> {
        let router = Router(context: CollectorContext.self)
        router.post("/reports") { request, context in try await self.ingest(request, context) }
        router.get("/status") { _, _ in try await self.status() }
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: self.metrics.render())))
        }
        router.get("/api/summary") { request, context in
            try await self.authorized(request) { try await self.reading(context) { try await self.apiSummary(request) } }
        }
        router.get("/api/hosts") { request, context in
            try await self.authorized(request) { try await self.reading(context) { try await self.apiHosts(request) } }
        }
        router.get("/api/reports") { request, context in
            try await self.authorized(request) { try await self.reading(context) { try await self.apiReports(request, csv: false) } }
        }
        router.get("/api/reports.csv") { request, context in
            try await self.authorized(request) { try await self.reading(context) { try await self.apiReports(request, csv: true) } }
        }
        router.get("/") { request, context in try await self.reading(context) { try await self.dashboardPage(request) } }
        router.get("/dashboard.css") { _, _ in
            Response(status: .ok, headers: Self.pageHeaders(contentType: "text/css; charset=utf-8"), body: .init(byteBuffer: ByteBuffer(string: Dashboard.stylesheet)))
        }
        router.post("/login") { request, _ in try await self.login(request) }
        // The POST-only paths answer any other method with 405 and the method they take (RFC 9110 §15.5.6), not 404.
        for path in ["/reports", "/login", "/logout"] {
            for method in [HTTPRequest.Method.get, .head, .put, .delete, .patch, .options] {
                router.on(RouterPath(path), method: method) { _, _ in
                    var response = Self.text(.methodNotAllowed, "\(path) takes POST only")
                    response.headers[.allow] = "POST"
                    return response
                }
            }
        }
        router.post("/logout") { _, _ in
            var response = Response(status: .seeOther, headers: Self.pageHeaders(contentType: "text/plain; charset=utf-8"))
            response.headers[.location] = "/"
            response.setCookie(Cookie(name: Self.cookieName, value: "", maxAge: 0, path: "/", secure: self.settings.secure, httpOnly: true, sameSite: .strict))
            return response
        }
        return router
    }

    // MARK: Ingest

    func ingest(_ request: Request, _ context: CollectorContext) async throws -> Response {
        let limit = self.settings.maxReportBytes
        // The declared length is refused before a byte of the body is read; a body without one (chunked) is read
        // only up to the cap.
        if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > limit {
            self.metrics.refuse(.tooLarge)
            return Self.text(.contentTooLarge, "the body is \(declared) bytes; at most \(limit) are accepted")
        }
        let source = self.sourceHash(context.remoteAddress)
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            self.metrics.refuse(.tooLarge)
            return Self.text(.contentTooLarge, "the body is larger than \(limit) bytes")
        } catch {
            // The client stopped sending (or broke the framing) part-way: its doing, so a 400, not a 500.
            self.metrics.refuse(.malformed)
            return Self.text(.badRequest, "the body could not be read whole")
        }
        let reports: [NormalizedReport]
        do {
            reports = try self.parser.parse(Array(buffer: body))
        } catch {
            self.metrics.refuse(.malformed)
            return Self.text(.badRequest, error.message)
        }
        // More reports than the rate lets one source send in a minute can never be accepted, however long the client
        // waits: a 429 with Retry-After would have it retry the same request forever. 413 tells it to send less.
        if reports.count > self.settings.ratePerMinute {
            // Counted as too large: the remedy is the one for a body over the size cap, a smaller request.
            self.metrics.refuse(.tooLarge)
            return Self.text(
                .contentTooLarge,
                "the body has \(reports.count) reports, more than this collector accepts from one source in a minute (--rate \(self.settings.ratePerMinute)/min), "
                    + "so it can never be accepted whole; send at most \(self.settings.ratePerMinute) reports per request")
        }
        let now = Date()
        if let wait = self.limiter.take(reports.count, source: source, now: now.timeIntervalSince1970) {
            self.metrics.refuse(.rateLimited)
            var response = Self.text(.tooManyRequests, "more than \(self.settings.ratePerMinute) reports a minute from this source; retry later")
            response.headers[.retryAfter] = String(Int(wait.rounded(.up)) + 1)
            return response
        }
        self.metrics.received.increment(by: Int64(reports.count))
        let receivedAt = Int64((now.timeIntervalSince1970 * 1000).rounded())
        let items = reports.map { IngestItem(report: $0, receivedAt: receivedAt, sourceHash: source) }
        let outcomes: [IngestOutcome]
        do {
            outcomes = try await self.writer.submit(items)
        } catch let refusal as IngestWriter.Refusal {
            self.metrics.refuse(.busy)
            var response = Self.text(.serviceUnavailable, refusal == .busy ? "the collector is busy; retry later" : "the collector is stopping; retry later")
            response.headers[.retryAfter] = "5"
            return response
        } catch let unavailable as DatabaseUnavailable {
            // Said once per batch by the writer, in words (the driver's text at the info level).
            _ = unavailable
            self.metrics.refuse(.storageFailed)
            var response = Self.text(.serviceUnavailable, "the reports could not be stored; retry later")
            response.headers[.retryAfter] = "30"
            return response
        } catch {
            // The database refused or is unreachable: the server's problem, never the sender's, so 503 (retry)
            // rather than 500 or 400; the log has the database's words.
            self.metrics.refuse(.storageFailed)
            context.logger.error("could not store \(items.count) reports: \(error)")
            var response = Self.text(.serviceUnavailable, "the reports could not be stored; retry later")
            response.headers[.retryAfter] = "30"
            return response
        }
        for outcome in outcomes {
            switch outcome {
            case .stored: self.metrics.stored.increment()
            case .deduplicated: self.metrics.deduplicated.increment()
            }
        }
        return Response(status: .noContent)
    }

    func sourceHash(_ address: SocketAddress?) -> String {
        var hasher = SHA256()
        hasher.update(data: self.sourceSalt)
        hasher.update(data: Array((address?.ipAddress ?? "unknown").utf8))
        return Data(hasher.finalize()).base64EncodedString()
    }

    /// A read (the API, the dashboard) whose database is out of reach: 503 with one line and Retry-After, not an
    /// empty 500. The log says it in words; the driver's text only at the info level (`--verbose`).
    func reading(_ context: CollectorContext, _ body: () async throws -> Response) async throws -> Response {
        do {
            return try await body()
        } catch let unavailable as DatabaseUnavailable {
            context.logger.warning("a read was answered 503: \(unavailable.description)")
            if let detail = unavailable.detail { context.logger.info("the database driver said: \(detail)") }
            var response = Self.text(.serviceUnavailable, "the database is unreachable; retry later")
            response.headers[.retryAfter] = "5"
            return response
        }
    }

    // MARK: Status

    /// `{"database":"postgres","databaseState":"reachable","status":"ok","uptime":…}` (200), or with the database
    /// out of reach `"databaseState":"unreachable"`, `"status":"unavailable"` and `"problem"` in words (503), so a
    /// health check sees what the collector can do: it cannot store a report without its database.
    func status() async throws -> Response {
        let uptime = ContinuousClock.now - self.started
        let seconds = Double(uptime.components.seconds) + Double(uptime.components.attoseconds) / 1e18
        let problem = await self.databaseProbe.problem()
        var body: [String: JSONOut] = [
            "status": .string(problem == nil ? "ok" : "unavailable"), "database": .string(self.store.database.kind.rawValue),
            "databaseState": .string(problem == nil ? "reachable" : "unreachable"), "uptime": .number((seconds * 1000).rounded() / 1000),
        ]
        if let problem { body["problem"] = .string(problem) }
        var response = try Self.json(body)
        if problem != nil { response.status = .serviceUnavailable }
        return response
    }

    // MARK: Authorisation

    /// Whether the request carries the token (`Authorization: Bearer`) or the dashboard's session cookie.
    func isAuthorized(_ request: Request) -> Bool {
        if let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") {
            return Self.constantTimeEqual(String(header.dropFirst("bearer ".count)).trimmingCharacters(in: .whitespaces), self.settings.token)
        }
        if let cookie = request.cookies[Self.cookieName] {
            return Self.constantTimeEqual(cookie.value, self.sessionValue)
        }
        return false
    }

    func authorized(_ request: Request, _ body: () async throws -> Response) async throws -> Response {
        guard self.isAuthorized(request) else {
            var response = Self.text(.unauthorized, "a token is required: Authorization: Bearer TOKEN")
            response.headers[.wwwAuthenticate] = "Bearer realm=\"pinning-collector\""
            return response
        }
        return try await body()
    }

    /// Compares digests, so the time taken does not depend on where the texts differ.
    static func constantTimeEqual(_ given: String, _ expected: String) -> Bool {
        let left = SHA256.hash(data: Array(given.utf8))
        let right = SHA256.hash(data: Array(expected.utf8))
        var difference: UInt8 = 0
        for (a, b) in zip(left, right) { difference |= a ^ b }
        return difference == 0
    }

    func login(_ request: Request) async throws -> Response {
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: 4096)
        } catch is NIOTooManyBytesError {
            return Self.text(.contentTooLarge, "the login form is larger than 4096 bytes")
        }
        // application/x-www-form-urlencoded, read by our own strict decoder (``FormBody``): a body the sign-in form
        // cannot have sent is a 400 in words, never a trap.
        let form: FormBody
        do {
            form = try FormBody(parsing: Array(buffer: body))
        } catch {
            return Self.text(.badRequest, "the login form is not application/x-www-form-urlencoded: \(error.description)")
        }
        let tokens = form.values("token")
        guard tokens.count <= 1 else {
            return Self.text(.badRequest, "the login form has \(tokens.count) token fields; send one")
        }
        guard let token = tokens.first else {
            return Self.text(.badRequest, "the login form has no token field (token=…)")
        }
        guard Self.constantTimeEqual(token, self.settings.token) else {
            let page = self.dashboard.loginPage(message: "That token is not the collector's.")
            return Response(status: .unauthorized, headers: Self.pageHeaders(contentType: "text/html; charset=utf-8"), body: .init(byteBuffer: ByteBuffer(string: page)))
        }
        var response = Response(status: .seeOther, headers: Self.pageHeaders(contentType: "text/plain; charset=utf-8"))
        response.headers[.location] = "/"
        response.setCookie(Cookie(name: Self.cookieName, value: self.sessionValue, path: "/", secure: self.settings.secure, httpOnly: true, sameSite: .strict))
        return response
    }

    // MARK: API

    struct QueryProblem: Error {
        var message: String
    }

    static func since(_ request: Request) throws(QueryProblem) -> Int64? {
        guard let text = request.uri.queryParameters["since"].map(String.init), !text.isEmpty else { return nil }
        let date: Date
        do {
            date = try RFC3339.read(text)
        } catch {
            // The reader's words say what is wrong ("day 30 does not exist: …"), as `--at`'s refusal does.
            throw QueryProblem(message: "since: not an RFC 3339 date-time (2030-06-01T00:00:00Z): \(error.description)")
        }
        return Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    static func limit(_ request: Request, default value: Int, maximum: Int) throws(QueryProblem) -> Int {
        guard let text = request.uri.queryParameters["limit"].map(String.init), !text.isEmpty else { return value }
        guard let number = Int(text), (1...maximum).contains(number) else { throw QueryProblem(message: "limit: a number from 1 to \(maximum)") }
        return number
    }

    /// `?host=` in the form reports' hosts are stored in (``ReportParser/hostName(_:key:label:)``), so `EXAMPLE.com.`
    /// and `例え.テスト` find the rows of `example.com` and `xn--r8jz45g.xn--zckzah`; nil when absent or empty.
    ///
    /// Rows stored before hosts were normalised are rewritten to this form when the store opens
    /// (``ReportStore/normaliseStoredHosts()``), except those whose host is not a host name: a query that is not
    /// one is therefore matched as written, since only such an old row can have it, and the dashboard's link to
    /// that row must still find it.
    static func hostQuery(_ request: Request) throws(QueryProblem) -> String? {
        guard let text = try Self.textParameter(request, "host") else { return nil }
        do {
            return try PeerName(text).canonical
        } catch {
            return text
        }
    }

    /// A text parameter that goes into a statement (`host`, `app`, `result`); nil when absent or empty.
    ///
    /// A NUL (`%00`) is refused, naming the parameter, as ingest refuses it in a report field: PostgreSQL cannot
    /// hold NUL in text and refused the statement (an empty 500), where SQLite simply found nothing; no stored
    /// text has one, so the refusal loses no answer and both storages now say the same. Bytes that are not UTF-8
    /// need no check here: Hummingbird decodes the query as UTF-8 with U+FFFD in their place, text either
    /// database stores and compares.
    static func textParameter(_ request: Request, _ name: String) throws(QueryProblem) -> String? {
        guard let text = request.uri.queryParameters[name[...]].map(String.init), !text.isEmpty else { return nil }
        guard !text.utf8.contains(0) else {
            throw QueryProblem(message: "\(name): contains a NUL character (%00), which no stored text has")
        }
        return text
    }

    func apiSummary(_ request: Request) async throws -> Response {
        let since: Int64?
        do {
            since = try Self.since(request)
        } catch {
            return Self.text(.badRequest, error.message)
        }
        let summary = try await self.store.summary(since: since)
        return try Self.json(summary)
    }

    func apiHosts(_ request: Request) async throws -> Response {
        let since: Int64?
        let limit: Int
        let host: String?
        do {
            since = try Self.since(request)
            limit = try Self.limit(request, default: 100, maximum: 1000)
            host = try Self.hostQuery(request)
        } catch {
            return Self.text(.badRequest, error.message)
        }
        let hosts = try await self.store.hosts(since: since, limit: limit, host: host)
        return try Self.json(["hosts": hosts])
    }

    func apiReports(_ request: Request, csv: Bool) async throws -> Response {
        var query = ReportQuery()
        do {
            query.since = try Self.since(request)
            query.limit = try Self.limit(request, default: csv ? 10000 : 100, maximum: csv ? 100_000 : 1000)
            query.host = try Self.hostQuery(request)
            query.result = try Self.textParameter(request, "result")
            query.app = try Self.textParameter(request, "app")
        } catch {
            return Self.text(.badRequest, error.message)
        }
        let parameters = request.uri.queryParameters
        if let cursor = parameters["cursor"].map(String.init), !cursor.isEmpty {
            guard let value = Int64(cursor), value > 0 else { return Self.text(.badRequest, "cursor: the `next` value of the previous page") }
            query.before = value
        }
        let page = try await self.store.reports(query)
        if csv {
            var headers = Self.pageHeaders(contentType: "text/csv; charset=utf-8")
            headers[.contentDisposition] = "attachment; filename=\"reports.csv\""
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: CSV.render(page.reports))))
        }
        struct Page: Encodable {
            var reports: [StoredReport]
            var next: String?
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(self.reports, forKey: .reports)
                try container.encode(self.next, forKey: .next)
            }
            enum CodingKeys: String, CodingKey { case reports, next }
        }
        return try Self.json(Page(reports: page.reports, next: page.next.map(String.init)))
    }

    // MARK: Dashboard

    func dashboardPage(_ request: Request) async throws -> Response {
        guard self.isAuthorized(request) else {
            return Response(status: .ok, headers: Self.pageHeaders(contentType: "text/html; charset=utf-8"), body: .init(byteBuffer: ByteBuffer(string: self.dashboard.loginPage(message: nil))))
        }
        let since: Int64?
        let host: String?
        do {
            since = try Self.since(request)
            host = try Self.hostQuery(request)
        } catch {
            return Self.text(.badRequest, error.message)
        }
        let page = try await self.dashboard.page(store: self.store, since: since, host: host, now: Date())
        return Response(status: .ok, headers: Self.pageHeaders(contentType: "text/html; charset=utf-8"), body: .init(byteBuffer: ByteBuffer(string: page)))
    }

    // MARK: Responses

    /// Every page: nothing from outside the collector, no script at all, no framing, no caching.
    static func pageHeaders(contentType: String) -> HTTPFields {
        var headers: HTTPFields = [:]
        headers[.contentType] = contentType
        headers[.contentSecurityPolicy] = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        headers[.xContentTypeOptions] = "nosniff"
        headers[.cacheControl] = "no-store"
        headers[.init("Referrer-Policy")!] = "no-referrer"
        return headers
    }

    static func text(_ status: HTTPResponse.Status, _ line: String) -> Response {
        Response(status: status, headers: Self.pageHeaders(contentType: "text/plain; charset=utf-8"), body: .init(byteBuffer: ByteBuffer(string: line + "\n")))
    }

    static func json(_ value: some Encodable) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        return Response(status: .ok, headers: Self.pageHeaders(contentType: "application/json"), body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// A JSON value the collector writes (Foundation encodes it).
enum JSONOut: Encodable {
    case string(String)
    case number(Double)
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let text): try container.encode(text)
        case .number(let value): try container.encode(value)
        }
    }
}

/// Asks the database `SELECT 1` for `/status`, at most once a second whatever the polling rate (a flood of health
/// checks must not become a flood of statements), all callers of that second sharing the answer.
actor DatabaseProbe {
    private let database: any SQLDatabase
    private var last: (at: ContinuousClock.Instant, problem: String?)?
    private var running: Task<String?, Never>?

    init(database: any SQLDatabase) {
        self.database = database
    }

    /// nil when the database answered; else what is wrong, in words.
    func problem() async -> String? {
        if let last = self.last, ContinuousClock.now - last.at < .seconds(1) { return last.problem }
        if let running = self.running { return await running.value }
        let database = self.database
        let task = Task<String?, Never> {
            do {
                _ = try await database.query("SELECT 1", [])
                return nil
            } catch let unavailable as DatabaseUnavailable {
                return unavailable.description
            } catch {
                return "the database did not answer SELECT 1: \(Collector.words(error))"
            }
        }
        self.running = task
        let problem = await task.value
        self.running = nil
        self.last = (ContinuousClock.now, problem)
        return problem
    }
}
