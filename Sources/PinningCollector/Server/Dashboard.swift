import Foundation
import Mustache
import Pinning
public import X509

/// The CAs a team knows (`--anchors FILE`): a new key that chains to one of them looks like a rotation, one that
/// does not, like an interception.
public struct KnownAuthorities: Sendable {
    /// SPKI pins (base64) of the known CAs.
    public var pins: Set<String> = []
    /// Their subject names (RFC 4514 text), to recognise a certificate they issued.
    public var subjects: [String: String] = [:]

    public init() {}

    public init(certificates: [Certificate]) {
        for certificate in certificates {
            self.pins.insert(Pin(spkiOf: certificate).base64)
            let name = String(describing: certificate.subject)
            self.subjects[name] = name
        }
    }
}

/// The dashboard: server-rendered HTML through swift-mustache templates, whose `{{…}}` HTML-escapes every value
/// (`<`, `>`, `&`, `"`, `'`), so no report text is ever markup; report text shown on the page is first made
/// visible (``VisibleText``: ESC, CR, LF, C1 and bidi controls such as U+202E as `\u{…}`), so none of it reaches the
/// page raw to hide or reorder what is around it. The link and the hidden `host` input keep the exact host (the
/// link percent-encoded, the input's value by ``attributeValue(_:)``), since they send it back as the filter. No script; the chart is inline SVG whose numbers
/// are computed here; the stylesheet is served by the collector itself (the CSP allows nothing else).
struct Dashboard: Sendable {
    let anchors: KnownAuthorities
    let library: MustacheLibrary

    init(anchors: KnownAuthorities) {
        self.anchors = anchors
        var library = MustacheLibrary()
        do {
            try library.register(Self.layoutTemplate, named: "page")
            try library.register(Self.loginTemplate, named: "login")
        } catch {
            // The templates are this file's constants: a parse error is a programming error caught by every test.
            preconditionFailure("dashboard template: \(error)")
        }
        self.library = library
    }

    func loginPage(message: String?) -> String {
        var context: [String: Any] = [:]
        if let message { context["message"] = message }
        return self.library.render(context, withTemplate: "login") ?? ""
    }

    /// The page for everything since `since` (default: the last 7 days), or one host.
    func page(store: ReportStore, since: Int64?, host: String?, now: Date) async throws -> String {
        let nowMilliseconds = Int64((now.timeIntervalSince1970 * 1000).rounded())
        let from = since ?? (nowMilliseconds - 7 * 86_400_000)
        let summary = try await store.summary(since: from)
        let selectedHost = host.flatMap { $0.isEmpty ? nil : $0 }
        let hosts = try await store.hosts(since: from, limit: selectedHost == nil ? 50 : 1, host: selectedHost)
        var hostRows: [[String: Any]] = []
        for summary in hosts {
            hostRows.append([
                "host": VisibleText.escaped(summary.host),
                "link": "?host=" + Self.queryEscape(summary.host) + (since.map { "&since=" + Self.queryEscape(ReportStore.time($0)) } ?? ""),
                "reports": summary.reports,
                "occurrences": summary.occurrences,
                "lastSeen": summary.lastSeen,
                "enforced": summary.enforced,
                "reportOnly": summary.reportOnly,
                "results": summary.results.sorted { $0.value > $1.value }.map { "\(VisibleText.escaped($0.key)) \($0.value)" }.joined(separator: ", "),
            ])
        }
        // Details for the first few hosts (or the one asked for): chart, keys, apps, suggestion.
        var details: [[String: Any]] = []
        for summary in hosts.prefix(selectedHost == nil ? 5 : 1) {
            details.append(try await self.detail(summary, store: store, from: from, now: nowMilliseconds))
        }
        var context: [String: Any] = [
            "since": ReportStore.time(from),
            "summary": [
                "reports": summary.reports, "occurrences": summary.occurrences, "hosts": summary.hosts, "sources": summary.sources,
                "reportsNoun": Self.noun(summary.reports, "report"), "hostsNoun": Self.noun(summary.hosts, "host"),
                "sourcesNoun": Self.noun(summary.sources, "source"),
            ],
            "hosts": hostRows,
            "noHosts": hostRows.isEmpty,
            "details": details,
        ]
        // Only when a host was asked for: the template's section is rendered for any value present.
        if let selectedHost { context["selectedHost"] = ["host": Self.attributeValue(selectedHost)] }
        return self.library.render(context, withTemplate: "page") ?? ""
    }

    private func detail(_ summary: HostSummary, store: ReportStore, from: Int64, now: Int64) async throws -> [String: Any] {
        // Hourly bars up to three days, daily beyond; at most 120 bars.
        let span = max(1, now - from)
        let bucket: Int64 = span <= 3 * 86_400_000 ? 3_600_000 : 86_400_000
        let firstBucket = from / bucket
        let lastBucket = now / bucket
        let buckets = max(1, min(120, Int(lastBucket - firstBucket + 1)))
        let start = lastBucket - Int64(buckets) + 1
        let series = try await store.series(host: summary.host, since: start * bucket, bucket: bucket)
        let peak = max(1, series.values.max() ?? 1)
        let width = 720.0
        let height = 160.0
        let barWidth = width / Double(buckets)
        var bars: [[String: Any]] = []
        for index in 0..<buckets {
            let key = start + Int64(index)
            let value = series[key] ?? 0
            let barHeight = (Double(value) / Double(peak)) * (height - 20)
            bars.append([
                "x": Self.number(Double(index) * barWidth),
                "y": Self.number(height - barHeight),
                "width": Self.number(max(1, barWidth - 1)),
                "height": Self.number(barHeight),
                "label": "\(ReportStore.time(key * bucket)): \(value)",
            ])
        }

        var keys: [[String: Any]] = []
        var suggestions: [String] = []
        let known = Set(summary.knownPins)
        for served in summary.servedPins.prefix(20) {
            var judgement = "pinned"
            if !served.known {
                judgement = try await self.judge(pin: served.pin, report: served.exampleReport, known: known, store: store)
                if served.position == 0 || judgement.hasPrefix("rotation") {
                    if judgement.hasPrefix("rotation") {
                        suggestions.append("add sha256/\(served.pin) (served at position \(served.position) by \(served.sources) \(Self.noun(served.sources, "source"))): \(judgement)")
                    } else {
                        suggestions.append("do not add sha256/\(served.pin): \(judgement)")
                    }
                }
            }
            keys.append([
                "pin": "sha256/" + served.pin,
                "position": served.position,
                "sources": served.sources,
                "occurrences": served.occurrences,
                "known": served.known,
                "judgement": judgement,
            ])
        }
        let apps = try await store.apps(host: summary.host, since: from).map { app -> [String: Any] in
            [
                "app": app.app.isEmpty ? "(not given)" : VisibleText.escaped(app.app), "version": VisibleText.escaped(app.version),
                "platform": VisibleText.escaped(app.platform), "library": VisibleText.escaped(app.library), "occurrences": app.occurrences,
            ]
        }
        return [
            "host": VisibleText.escaped(summary.host),
            "bucket": bucket == 3_600_000 ? "hour" : "day",
            "bars": bars,
            "peak": peak,
            "chartWidth": Self.number(width),
            "chartHeight": Self.number(height),
            "keys": keys,
            "knownPins": summary.knownPins.map { "sha256/" + $0 },
            "apps": apps,
            "enforced": summary.enforced,
            "reportOnly": summary.reportOnly,
            "suggestions": suggestions,
            "noSuggestion": suggestions.isEmpty,
        ]
    }

    /// Rotation or interception, judged from the newest report that served the key: a pinned key or a known CA
    /// on its chains means the new key was issued by someone the configuration trusts (a rotation); otherwise its
    /// issuer is unknown (an interception until shown otherwise).
    private func judge(pin: String, report: Int64, known: Set<String>, store: ReportStore) async throws -> String {
        guard let chains = try await store.chains(reportID: report) else { return "unknown (report expired)" }
        let certificates = chains.served + chains.validated
        if certificates.contains(where: { $0.pin != pin && known.contains($0.pin) }) {
            return "rotation: a pinned key is on the same chain"
        }
        if let authority = certificates.first(where: { self.anchors.pins.contains($0.pin) || self.anchors.subjects[$0.issuer] != nil }) {
            let name = self.anchors.pins.contains(authority.pin) ? authority.subject : authority.issuer
            return "rotation: chains to a known CA (\(VisibleText.escaped(name)))"
        }
        let issuer = certificates.first { $0.pin == pin }?.issuer ?? certificates.first?.issuer ?? "not given"
        return "unknown issuer (\(VisibleText.escaped(issuer))): possible interception"
    }

    /// `word`, with an `s` unless `count` is 1 ("1 source", "2 sources").
    static func noun(_ count: some BinaryInteger, _ word: String) -> String {
        count == 1 ? word : word + "s"
    }

    /// The text as a quoted attribute's value, written here rather than by the template (`{{{…}}}`): the template's
    /// escaping (`&`, `<`, `>`, `"`, `'` as references), and each C0 control and DEL as a numeric reference, so none
    /// is raw on the page. C1 and bidi controls stay raw: a reference to U+0080–U+009F is read as another character
    /// (HTML's windows-1252 table), and a value is never displayed. For the hidden `host` input, which sends the host
    /// back as the filter. Not exact for a host with a lone CR or LF: a browser submitting the form writes every line
    /// break as CRLF (HTML's form encoding), so such a host is reached by its `?host=` link, which is percent-encoded.
    static func attributeValue(_ text: String) -> String {
        text.unicodeScalars.map { scalar in
            if let reference = Self.attributeReferences[scalar] { return reference }
            let control = scalar.value < 0x20 || scalar.value == 0x7F
            return control ? "&#x\(String(scalar.value, radix: 16, uppercase: true));" : String(scalar)
        }.joined()
    }

    private static let attributeReferences: [Unicode.Scalar: String] = ["&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"]

    static func number(_ value: Double) -> String {
        String(format: "%.1f", value)
    }

    /// A query value, percent-encoded by Foundation (then HTML-escaped by the template, like every value).
    static func queryEscape(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    static let loginTemplate = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>pinning collector: sign in</title>
        <link rel="stylesheet" href="/dashboard.css"></head>
        <body><main class="login">
        <h1>pinning collector</h1>
        {{#message}}<p class="error">{{message}}</p>{{/message}}
        <form method="post" action="/login">
        <label for="token">Token</label>
        <input id="token" name="token" type="password" autocomplete="current-password" required>
        <button type="submit">Sign in</button>
        </form>
        </main></body></html>
        """

    static let layoutTemplate = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>pinning collector</title>
        <link rel="stylesheet" href="/dashboard.css"></head>
        <body>
        <header><h1>Pin failure reports</h1>
        <form method="get" action="/"><label for="since">Since</label> <input id="since" name="since" value="{{since}}">
        {{#selectedHost}}<input type="hidden" name="host" value="{{{host}}}">{{/selectedHost}}
        <button type="submit">Show</button></form>
        <form method="post" action="/logout"><button type="submit">Sign out</button></form>
        </header>
        <section id="summary">{{#summary}}
        <p><strong>{{reports}}</strong> {{reportsNoun}} stored, <strong>{{occurrences}}</strong> received in all,
        <strong>{{hosts}}</strong> {{hostsNoun}}, <strong>{{sources}}</strong> {{sourcesNoun}} since {{since}}.</p>{{/summary}}
        </section>
        <section><h2>Hosts</h2>
        {{#noHosts}}<p>No reports in this period.</p>{{/noHosts}}
        <table id="hosts"><thead><tr><th>Host</th><th>Reports</th><th>Occurrences</th><th>Enforced</th><th>Report-only</th><th>Results</th><th>Last seen</th></tr></thead>
        <tbody>
        {{#hosts}}<tr class="host-row"><td><a href="{{link}}">{{host}}</a></td><td>{{reports}}</td><td>{{occurrences}}</td><td>{{enforced}}</td><td>{{reportOnly}}</td><td>{{results}}</td><td>{{lastSeen}}</td></tr>
        {{/hosts}}
        </tbody></table></section>
        {{#details}}
        <section class="host-detail"><h2>{{host}}</h2>
        <h3>Failures per {{bucket}} (peak {{peak}})</h3>
        <svg class="chart" role="img" aria-label="failures per {{bucket}} for {{host}}" width="{{chartWidth}}" height="{{chartHeight}}" viewBox="0 0 {{chartWidth}} {{chartHeight}}" xmlns="http://www.w3.org/2000/svg">
        <line x1="0" y1="{{chartHeight}}" x2="{{chartWidth}}" y2="{{chartHeight}}" stroke="#888"/>
        {{#bars}}<rect x="{{x}}" y="{{y}}" width="{{width}}" height="{{height}}" fill="#c0392b"><title>{{label}}</title></rect>{{/bars}}
        </svg>
        <p>Enforced: {{enforced}}, report-only: {{reportOnly}} (occurrences; the rest did not say).</p>
        <h3>Served keys against the known pins</h3>
        <table class="keys"><thead><tr><th>Served key</th><th>Position</th><th>Sources</th><th>Occurrences</th><th>Judgement</th></tr></thead><tbody>
        {{#keys}}<tr><td><code>{{pin}}</code></td><td>{{position}}</td><td>{{sources}}</td><td>{{occurrences}}</td><td>{{judgement}}</td></tr>
        {{/keys}}</tbody></table>
        <p>Known pins: {{#knownPins}}<code>{{.}}</code> {{/knownPins}}</p>
        <h3>Apps and versions</h3>
        <table class="apps"><thead><tr><th>App</th><th>Version</th><th>Platform</th><th>Library</th><th>Occurrences</th></tr></thead><tbody>
        {{#apps}}<tr><td>{{app}}</td><td>{{version}}</td><td>{{platform}}</td><td>{{library}}</td><td>{{occurrences}}</td></tr>
        {{/apps}}</tbody></table>
        <h3>Suggested pin-set change</h3>
        {{#noSuggestion}}<p>None: every served key is pinned, or no new leaf key was seen.</p>{{/noSuggestion}}
        <ul>{{#suggestions}}<li>{{.}}</li>{{/suggestions}}</ul>
        </section>
        {{/details}}
        </body></html>
        """

    static let stylesheet = """
        body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }
        header { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; }
        table { border-collapse: collapse; margin: 0.5rem 0 1rem; }
        th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
        code { font-size: 0.85em; word-break: break-all; }
        .chart { border: 1px solid #ddd; background: #fafafa; }
        .error { color: #b00; }
        .login { max-width: 24rem; margin: 4rem auto; display: grid; gap: 0.5rem; }
        """
}
