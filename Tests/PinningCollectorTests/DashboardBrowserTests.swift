import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Pinning
import PinningTestSupport
import Testing

let chromiumPath = "/usr/bin/chromium"
let browserAvailable = FileManager.default.isExecutableFile(atPath: chromiumPath) && TestTools.python3Available && CollectorBinaries.collector != nil

/// Where the browser test leaves its screenshot: `PINNING_TEST_OUTPUT`, or .build/test-output/collector.
let testOutputDirectory: String = {
    if let explicit = ProcessInfo.processInfo.environment["PINNING_TEST_OUTPUT"], !explicit.isEmpty { return explicit + "/collector" }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return root.appendingPathComponent(".build/test-output/collector").path
}()

/// A header-adding reverse proxy in Python's standard library: Chromium's command line cannot send
/// `Authorization`, so the browser loads the dashboard through this, as it would behind an authenticating proxy.
/// Every response header (the Content-Security-Policy among them) is passed through unchanged.
let authorizingProxyScript = """
    import http.server, sys, urllib.request, urllib.error
    upstream, token = sys.argv[1], sys.argv[2]
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            request = urllib.request.Request(upstream + self.path, headers={"Authorization": "Bearer " + token})
            try:
                response = urllib.request.urlopen(request)
            except urllib.error.HTTPError as error:
                response = error
            body = response.read()
            self.send_response(response.status)
            for name, value in response.headers.items():
                if name.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *arguments):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print("proxy on 127.0.0.1:%d" % server.server_address[1], flush=True)
    server.serve_forever()
    """

@Suite("The dashboard in headless Chromium", .serialized, .enabled(if: browserAvailable, "needs Debian's chromium and python3, and the built pinning-collector"))
struct DashboardBrowserTests {
    @Test("the page loads under its CSP: host rows and the chart in the DOM, a <script> hostname shown as text and never run; a screenshot is kept")
    func chromium() async throws {
        let binary = try #require(CollectorBinaries.collector)
        let directory = try TemporaryDirectory(prefix: "pinning-collector-browser")
        defer { directory.remove() }
        let token = "browser-token-0123456789abcdef"
        let tokenFile = try directory.write("token", token)
        let collector = try await CollectorProcess(binary, ["--listen", "127.0.0.1:0", "--database", "sqlite:" + directory.path("r.db"), "--token-file", tokenFile], in: directory)
        defer { collector.server.stop() }

        let fixtures = try ReportFixtures()
        let client = try await CollectorHarnessClient(port: collector.port)
        defer { client.shutdown() }
        let hostile = "<script>document.title='pwned'</script>"
        // Markup in a field the dashboard shows (a host name with markup is refused on ingest).
        #expect(try await client.post(try ReportFixtures.json(["hostname": "markup.example.test", "app-bundle-id": hostile, "validation-result": "pinMismatch"])) == 204)
        #expect(try await client.post(try ReportFixtures.json(fixtures.trustKit())) == 204)
        #expect(try await client.post(try ReportFixtures.json(fixtures.rfc7469(host: "www.example.test"))) == 204)

        let script = try directory.write("proxy.py", authorizingProxyScript)
        let proxy = try await ServerProcess("/usr/bin/python3", [script, "http://127.0.0.1:\(collector.port)", token], in: directory) { line in
            line.hasPrefix("proxy on 127.0.0.1:") ? Int(line.split(separator: ":").last ?? "") : nil
        }
        defer { proxy.stop() }
        let url = "http://127.0.0.1:\(proxy.port)/"
        let home = directory.path("home")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let common = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + directory.path("chromium-profile")]
        let dom = try await TestTools.run(chromiumPath, common + ["--dump-dom", url], in: directory, environment: ["HOME": home], timeout: 120)
        #expect(dom.status == 0, "\(dom)")
        let html = dom.stdout
        #expect(html.contains("<table id=\"hosts\">"), "\(html.prefix(2000))")
        #expect(html.components(separatedBy: "class=\"host-row\"").count - 1 == 3)
        #expect(html.contains("<svg class=\"chart\""))
        #expect(html.contains("<rect "))
        // Shown as text: the DOM serialises the text node escaped, there is no script element, and it did not run.
        #expect(html.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;"))
        #expect(!html.contains("<script"))
        #expect(!html.contains("<title>pwned</title>"))
        #expect(html.contains("<title>pinning collector</title>"))

        try FileManager.default.createDirectory(atPath: testOutputDirectory, withIntermediateDirectories: true)
        let screenshot = testOutputDirectory + "/dashboard.png"
        try? FileManager.default.removeItem(atPath: screenshot)
        let shot = try await TestTools.run(
            chromiumPath, common + ["--screenshot=" + screenshot, "--window-size=1280,2200", "--hide-scrollbars", url], in: directory, environment: ["HOME": home], timeout: 120)
        #expect(shot.status == 0, "\(shot)")
        let size = (try? FileManager.default.attributesOfItem(atPath: screenshot)[.size] as? Int) ?? 0
        #expect(size > 10_000, "screenshot at \(screenshot): \(size) bytes")
        print("dashboard screenshot: \(screenshot)")
    }
}

/// A small client for a collector started as a process.
final class CollectorHarnessClient: @unchecked Sendable {
    let port: Int
    let client: HTTPClient

    init(port: Int) async throws {
        self.port = port
        self.client = HTTPClient(eventLoopGroupProvider: .singleton)
    }

    func post(_ body: Data) async throws -> Int {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(self.port)/reports")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))
        return Int(try await self.client.execute(request, timeout: .seconds(60)).status.code)
    }

    func shutdown() {
        _ = self.client.shutdown()
    }
}
