import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Pinning
import PinningCollector
import PinningTestSupport
import Testing
import X509

/// Reports in the three shapes the collector reads, built from a PKI made at test time.
struct ReportFixtures: Sendable {
    let genuine: TestChain
    /// A chain from a root no configuration knows: what an intercepting proxy serves.
    let intercepting: TestChain

    init(host: String = "api.example.test") throws {
        self.genuine = try TestChain(host: host, rootName: "Genuine Root", intermediateName: "Genuine Issuing CA")
        self.intercepting = try TestChain(host: host, rootName: "Intercepting Proxy Root", intermediateName: "Intercepting Proxy CA")
    }

    static func pem(_ certificate: Certificate) -> String {
        TestPKI.pemBundle([certificate])
    }

    /// TrustKit's report: every key `TSKPinFailureReport -json` writes (TrustKit/Reporting/TSKPinFailureReport.m),
    /// in the shape of its docs/sample_report.json: PEM lines ending in CRLF inside each certificate (as iOS's
    /// base64 writes them), `validation-result` an integer (TSKTrustEvaluationResult), the expiration a date only.
    func trustKit(host: String = "api.example.test", vendor: String = "599F9C00-92DC-4B5C-9464-7971F01F8370", enforce: Bool = true) -> [String: Any] {
        func crlf(_ pem: String) -> String {
            // "-----BEGIN…-----\nLINE\r\nLINE\r\n…\n-----END…-----"
            var lines = pem.split(separator: "\n").map(String.init)
            guard lines.count > 2 else { return pem }
            let body = lines[1..<(lines.count - 1)].joined(separator: "\r\n")
            lines = [lines[0], body, lines[lines.count - 1]]
            return lines.joined(separator: "\n")
        }
        return [
            "app-bundle-id": "com.example.bank",
            "app-version": "4.2",
            "app-platform": "IOS",
            "app-platform-version": "17.5.1",
            "app-vendor-id": vendor,
            "trustkit-version": "3.0.4",
            "date-time": "2026-11-20T08:30:00Z",
            "hostname": host,
            "port": 443,
            "noted-hostname": host,
            "include-subdomains": false,
            "enforce-pinning": enforce,
            "validated-certificate-chain": self.intercepting.all.map { crlf(Self.pem($0)) },
            "known-pins": [
                "pin-sha256=\"\(Pin(spkiOf: self.genuine.intermediate.certificate).base64)\"",
                "pin-sha256=\"\(Pin(spkiOf: self.genuine.root.certificate).base64)\"",
            ],
            "validation-result": 1,
            "known-pins-expiration-date": "2027-06-01",
        ]
    }

    /// An RFC 7469 §3 report as a browser sent it.
    func rfc7469(host: String = "api.example.test") -> [String: Any] {
        [
            "date-time": "2026-11-20T08:30:00Z",
            "hostname": host,
            "port": 443,
            "effective-expiration-date": "2027-06-01T00:00:00Z",
            "include-subdomains": true,
            "noted-hostname": "example.test",
            "served-certificate-chain": self.intercepting.presented.map(Self.pem),
            "validated-certificate-chain": self.intercepting.all.map(Self.pem),
            "known-pins": ["pin-sha256=\"\(Pin(spkiOf: self.genuine.root.certificate).base64)\""],
        ]
    }

    /// Our own report, made by the core's `PinFailureReport` and encoded by its `jsonData()`.
    func pinning(host: String = "api.example.test", served: [Certificate]? = nil) throws -> Data {
        let report = PinFailureReport(
            dateTime: Date(timeIntervalSince1970: 1_795_000_000),
            hostname: host,
            port: 8443,
            effectiveExpirationDate: nil,
            includeSubdomains: false,
            notedHostname: host,
            servedCertificateChain: (served ?? self.intercepting.presented).map(Self.pem),
            validatedCertificateChain: (served ?? self.intercepting.all).map(Self.pem),
            knownPins: ["pin-sha256=\"\(Pin(spkiOf: self.genuine.intermediate.certificate).base64)\""],
            validationResult: "pinMismatch"
        )
        return try report.jsonData()
    }

    static func json(_ object: Any) throws -> Data {
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }
}

/// A collector in this process on a real SQLite file (or PostgreSQL, or a database the test opened and closes),
/// on 127.0.0.1:0, stopped by ``stop()``.
final class CollectorHarness: @unchecked Sendable {
    let directory: TemporaryDirectory
    let port: Int
    let token = "test-token-0123456789abcdef"
    let client: HTTPClient
    let scheme: String
    private let task: Task<Void, any Error>

    init(
        database: DatabaseURL? = nil,
        opened: (any SQLDatabase)? = nil,
        configure: (inout CollectorSettings) -> Void = { _ in },
        anchors: [Certificate] = [],
        tlsIdentity: String? = nil,
        clientConfiguration: HTTPClient.Configuration? = nil,
        legacy: [NormalizedReport] = []
    ) async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-collector")
        self.directory = directory
        // ``stop()`` removes it, but most tests can only start their stop from a defer (`Task { await stop() }`),
        // which the end of the run may overtake: the process removes what is left at exit.
        directory.removeAtExit()
        // Until the fixture is whole no test holds it: a step that throws removes the directory here.
        var ready = false
        defer { if !ready { directory.remove() } }
        if !legacy.isEmpty {
            try await Self.seed(legacy, at: directory.path("reports.db"))
        }
        var settings = CollectorSettings(token: self.token)
        // The full suite loads two cores twenty times over, where a first PostgreSQL connection took more than the
        // 3 s a statement waits for one: the tests that are not about that wait give it a minute.
        settings.databaseConnectionWait = .seconds(60)
        configure(&settings)
        var logger = Logger(label: "collector-test")
        logger.logLevel = .critical
        var collector = Collector(listen: ListenAddress(host: "127.0.0.1", port: 0), database: database ?? .sqlite(path: directory.path("reports.db")), settings: settings, logger: logger)
        collector.anchors = anchors
        collector.tlsIdentity = tlsIdentity
        self.scheme = tlsIdentity == nil ? "http" : "https"
        let ports = AsyncStream<Int>.makeStream()
        self.task = Task {
            defer { ports.continuation.finish() }
            let started: @Sendable (String, Int) -> Void = { _, port in
                ports.continuation.yield(port)
                ports.continuation.finish()
            }
            if let opened {
                try await collector.run(on: opened, signals: [], started: started)
            } else {
                try await collector.run(signals: [], started: started)
            }
        }
        var port = 0
        for await value in ports.stream {
            port = value
        }
        guard port != 0 else {
            // The run ended before listening: its error says why.
            try await self.task.value
            throw CollectorTestError("the collector stopped before it listened")
        }
        self.port = port
        var configuration = clientConfiguration ?? HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(30), read: .seconds(60))
        configuration.redirectConfiguration = .disallow
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        ready = true
    }

    /// Writes `reports` straight into the SQLite file at `path`, as rows a collector stored before hosts were
    /// normalised on ingest (a host with controls or markup, `EXAMPLE.com.`): the store keeps any text it is given.
    static func seed(_ reports: [NormalizedReport], at path: String) async throws {
        let database = try await SQLiteReportDatabase(path: path, logger: Logger(label: "seed"))
        let store = ReportStore(database: database, deduplicationWindowMilliseconds: 86_400_000)
        let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
        do {
            try await store.migrate(now: now)
            _ = try await store.ingest(reports.map { IngestItem(report: $0, receivedAt: now, sourceHash: "legacy-source") })
        } catch {
            await database.close()
            throw error
        }
        await database.close()
    }

    /// A report with `fields` (and a placeholder host) parsed as today, then given `host` as an older collector
    /// stored it.
    static func legacyReport(host: String, _ fields: [String: Any] = [:]) throws -> NormalizedReport {
        var object = fields
        object["hostname"] = "legacy.example.test"
        var report = try #require(try ReportParser().parse(Array(try ReportFixtures.json(object))).first)
        report.host = host
        return report
    }

    func stop() async {
        try? await self.client.shutdown()
        self.task.cancel()
        _ = try? await self.task.value
        self.directory.remove()
    }

    struct Reply: Sendable {
        var status: Int
        var headers: [(String, String)]
        var body: String
        func header(_ name: String) -> String? { self.headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    }

    func request(_ method: HTTPMethod, _ path: String, body: Data? = nil, headers: [(String, String)] = [], authorized: Bool = false) async throws -> Reply {
        var request = HTTPClientRequest(url: "\(self.scheme)://127.0.0.1:\(self.port)\(path)")
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if authorized { request.headers.add(name: "Authorization", value: "Bearer \(self.token)") }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await self.client.execute(request, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 64 * 1024 * 1024)
        return Reply(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) }, body: String(buffer: bytes))
    }

    func post(_ body: Data) async throws -> Reply {
        try await self.request(.POST, "/reports", body: body, headers: [("Content-Type", "application/json")])
    }

    func json(_ path: String) async throws -> [String: Any] {
        let reply = try await self.request(.GET, path, authorized: true)
        guard reply.status == 200, let object = try JSONSerialization.jsonObject(with: Data(reply.body.utf8)) as? [String: Any] else {
            throw CollectorTestError("GET \(path): \(reply.status) \(reply.body)")
        }
        return object
    }
}

struct CollectorTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
