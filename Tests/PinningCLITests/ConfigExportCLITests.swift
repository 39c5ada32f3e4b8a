import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

/// `pinning config export` and `config import` (issue 15): one pin file, every platform. The outputs are
/// checked by software we did not write: Python's `plistlib` reads the property lists, Python's XML parser and
/// the Network Security Config schema rules check the Android file, and OkHttp itself (Debian's
/// `libokhttp-java`, driven by a Java program compiled here) enforces the exported pins.
@Suite("config export and import", .serialized)
struct ConfigExportCLITests {
    static let python = "/usr/bin/python3"
    static let javac = "/usr/bin/javac"
    static let java = "/usr/bin/java"
    static let okhttpJars = ["/usr/share/java/okhttp.jar", "/usr/share/java/okio.jar"]
    static let javaAvailable =
        FileManager.default.isExecutableFile(atPath: javac) && FileManager.default.isExecutableFile(atPath: java)
        && okhttpJars.allSatisfy { FileManager.default.fileExists(atPath: $0) }

    static func pin(_ identity: TestIdentity) -> String { Pin(spkiOf: identity.certificate).description }

    /// A configuration using every feature, and the PKI behind its pins.
    struct Fixture {
        let directory: TemporaryDirectory
        let chain: TestChain
        let configPath: String

        init(_ domains: (TestChain) -> String) throws {
            let directory = try TemporaryDirectory(prefix: "pinning-export")
            self.directory = directory
            // Until the fixture is whole no test holds it: a step that throws removes the directory here.
            var ready = false
            defer { if !ready { directory.remove() } }
            self.chain = try TestChain()
            _ = try self.directory.write("root.pem", self.chain.root.certificatePEM)
            _ = try self.directory.write("intermediate.pem", self.chain.intermediate.certificatePEM)
            _ = try self.directory.write("leaf.pem", self.chain.leaf.certificatePEM)
            self.configPath = try self.directory.write("pins.json", #"{"version": 1, "domains": {"# + domains(self.chain) + "}}")
            ready = true
        }

        func pinning(_ arguments: [String]) async throws -> CLIRun {
            try await Executable.pinning(arguments, in: self.directory)
        }
    }

    /// Every feature: an exact entry with an expiry, a `**.` entry with anchors only, an exclusion under it, a
    /// report-only entry with report URIs, a one-label wildcard.
    static func everything(_ chain: TestChain) -> String {
        let pins = "[\"\(Self.pin(chain.intermediate))\", \"\(Self.pin(chain.root))\"]"
        return """
            "api.example.com": {"pins": \(pins), "expires": "2027-06-01T00:00:00Z"},
            "**.fleet.example.com": {"pins": \(pins), "anchors": ["root.pem"], "anchorsOnly": true},
            "open.fleet.example.com": {"excludeSubdomainFromParentPolicy": true},
            "shop.example.com": {"pins": ["\(Self.pin(chain.leaf))", "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="], "enforce": false,
                                 "reportURIs": ["https://reports.example.com/pins"]},
            "*.cdn.example.com": {"pins": \(pins)}
            """
    }

    @Test(
        "a feature the platform cannot express is an error naming the entry and the platform (exit 2); --lossy drops it with one warning each",
        arguments: [
            ("android-nsc", ["*.cdn.example.com\"]: android-nsc: a one-label wildcard", "shop.example.com\"]: android-nsc: report-only pins"]),
            ("trustkit", ["**.fleet.example.com\"]: trustkit: trust anchors", "*.cdn.example.com\"]: trustkit: a one-label wildcard"]),
            (
                "ats",
                [
                    "api.example.com\"]: ats: pin expiry", "open.fleet.example.com\"]: ats: an exclusion", "shop.example.com\"]: ats: report-only",
                    "**.fleet.example.com\"]: ats: trust anchors", "*.cdn.example.com\"]: ats: a one-label wildcard",
                ]
            ),
            (
                "okhttp",
                [
                    "api.example.com\"]: okhttp: pin expiry", "open.fleet.example.com\"]: okhttp: an exclusion",
                    "shop.example.com\"]: okhttp: report-only", "**.fleet.example.com\"]: okhttp: trust anchors",
                ]
            ),
        ]
    )
    func strictAndLossy(_ format: String, _ expected: [String]) async throws {
        let fixture = try Fixture(Self.everything)
        defer { fixture.directory.remove() }
        let certificates = ["--certificates", fixture.directory.path("intermediate.pem"), "--certificates", fixture.directory.path("root.pem")]
        let strict = try await fixture.pinning(["config", "export", fixture.configPath, "--format", format] + certificates)
        #expect(strict.status == 2 && strict.stdout.isEmpty, "\(strict)")
        // The problems' words say what --lossy does ("dropped"): the header says nothing was written.
        #expect(strict.stderr.contains("cannot be expressed; nothing was written (add --lossy"), "\(strict.stderr)")
        for message in expected {
            #expect(strict.stderr.contains("domains[\"" + message), "\(message): \(strict.stderr)")
        }
        let lossy = try await fixture.pinning(["config", "export", fixture.configPath, "--format", format, "--lossy"] + certificates)
        #expect(lossy.status == 0 && !lossy.stdout.isEmpty, "\(lossy)")
        let warnings = lossy.stderr.split(separator: "\n").filter { $0.hasPrefix("pinning: config export: warning: ") }
        #expect(warnings.count == expected.count, "one warning per dropped feature: \(lossy.stderr)")
        for message in expected {
            #expect(lossy.stderr.contains("warning: domains[\"" + message), "\(message): \(lossy.stderr)")
        }
    }

    @Test("trustkit and ats: Python's plistlib reads them, with exactly TrustKit's and ATS's key strings")
    func plists() async throws {
        let fixture = try Fixture(Self.everything)
        defer { fixture.directory.remove() }
        let trustKit = try await fixture.pinning(["config", "export", fixture.configPath, "--format", "trustkit", "--lossy", "--out", fixture.directory.path("tk.plist")])
        #expect(trustKit.status == 0, "\(trustKit)")
        let tk = try await Self.plist(fixture.directory.path("tk.plist"))
        let configuration = try #require(tk["TSKConfiguration"] as? [String: Any])
        #expect(configuration["TSKSwizzleNetworkDelegates"] as? Bool == false)
        let domains = try #require(configuration["TSKPinnedDomains"] as? [String: Any])
        #expect(Set(domains.keys) == ["api.example.com", "fleet.example.com", "open.fleet.example.com", "shop.example.com"])
        let api = try #require(domains["api.example.com"] as? [String: Any])
        #expect(
            Set(api.keys) == ["TSKPublicKeyHashes", "TSKIncludeSubdomains", "TSKEnforcePinning", "TSKDisableDefaultReportUri", "TSKExpirationDate"])
        #expect(api["TSKExpirationDate"] as? String == "2027-06-01")
        #expect((api["TSKPublicKeyHashes"] as? [String])?.map { "sha256/" + $0 } == [Self.pin(fixture.chain.intermediate), Self.pin(fixture.chain.root)])
        let fleet = try #require(domains["fleet.example.com"] as? [String: Any])
        #expect(fleet["TSKIncludeSubdomains"] as? Bool == true)
        let open = try #require(domains["open.fleet.example.com"] as? [String: Any])
        #expect(Set(open.keys) == ["TSKExcludeSubdomainFromParentPolicy"] && open["TSKExcludeSubdomainFromParentPolicy"] as? Bool == true)
        let shop = try #require(domains["shop.example.com"] as? [String: Any])
        #expect(shop["TSKEnforcePinning"] as? Bool == false)
        #expect(shop["TSKReportUris"] as? [String] == ["https://reports.example.com/pins"])

        // ATS: the intermediate and the root are CAs (from --certificates and the entry's anchors), the leaf a leaf.
        let ats = try await fixture.pinning(
            [
                "config", "export", fixture.configPath, "--format", "ats", "--lossy", "--out", fixture.directory.path("ats.plist"),
                "--certificates", fixture.directory.path("intermediate.pem"), "--certificates", fixture.directory.path("root.pem"),
            ])
        #expect(ats.status == 0, "\(ats)")
        let plist = try await Self.plist(fixture.directory.path("ats.plist"))
        let pinned = try #require((plist["NSAppTransportSecurity"] as? [String: Any])?["NSPinnedDomains"] as? [String: Any])
        #expect(Set(pinned.keys) == ["api.example.com", "fleet.example.com"])
        let apiATS = try #require(pinned["api.example.com"] as? [String: Any])
        #expect(Set(apiATS.keys) == ["NSIncludesSubdomains", "NSPinnedCAIdentities"])
        let identities = try #require(apiATS["NSPinnedCAIdentities"] as? [[String: Any]])
        #expect(identities.map { Set($0.keys) } == [["SPKI-SHA256-BASE64"], ["SPKI-SHA256-BASE64"]])
        #expect(identities.compactMap { $0["SPKI-SHA256-BASE64"] as? String }.map { "sha256/" + $0 } == [Self.pin(fixture.chain.intermediate), Self.pin(fixture.chain.root)])
        #expect((pinned["fleet.example.com"] as? [String: Any])?["NSIncludesSubdomains"] as? Bool == true)

        // A leaf pin is a leaf identity.
        let leafOnly = try Fixture { chain in
            #""leaf.example.com": {"pins": ["\#(Self.pin(chain.leaf))", "\#(Self.pin(chain.intermediate))"]}"#
        }
        defer { leafOnly.directory.remove() }
        let mixed = try await leafOnly.pinning(
            [
                "config", "export", leafOnly.configPath, "--format", "ats", "--certificates", leafOnly.directory.path("leaf.pem"),
                "--certificates", leafOnly.directory.path("intermediate.pem"),
            ])
        #expect(mixed.status == 2 && mixed.stderr.contains("has leaf and CA pins"), "\(mixed)")
        let unknown = try await leafOnly.pinning(["config", "export", leafOnly.configPath, "--format", "ats"])
        #expect(unknown.status == 2 && unknown.stderr.contains("belongs to no certificate given"), "\(unknown)")
    }

    /// The property list as Python's plistlib reads it, handed back as JSON.
    static func plist(_ path: String) async throws -> [String: Any] {
        let script = "import json, plistlib, sys\nprint(json.dumps(plistlib.load(open(sys.argv[1], 'rb'))))"
        let run = try await TestTools.run(Self.python, ["-c", script, path])
        #expect(run.status == 0, "\(run)")
        return try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
    }

    /// The Network Security Config schema rules (elements, where they may appear, their attributes and values,
    /// the date format, pins of 32 bytes), checked by Python's XML parser; prints a summary of the domains.
    static let nscRules = #"""
        import base64, datetime, json, re, sys, xml.etree.ElementTree as ET
        root = ET.parse(sys.argv[1]).getroot()
        problems = []
        allowed = {
            "network-security-config": ({"base-config", "domain-config", "debug-overrides"}, set()),
            "base-config": ({"trust-anchors"}, {"cleartextTrafficPermitted"}),
            "debug-overrides": ({"trust-anchors"}, set()),
            "domain-config": ({"domain", "domain-config", "pin-set", "trust-anchors"}, {"cleartextTrafficPermitted"}),
            "domain": (set(), {"includeSubdomains"}),
            "pin-set": ({"pin"}, {"expiration"}),
            "pin": (set(), {"digest"}),
            "trust-anchors": ({"certificates"}, set()),
            "certificates": (set(), {"src", "overridePins"}),
        }
        booleans = {"cleartextTrafficPermitted", "includeSubdomains", "overridePins"}
        host = re.compile(r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$")
        summary = {}
        def walk(element, parent):
            children, attributes = allowed.get(element.tag, (None, None))
            if children is None:
                problems.append("unknown element " + element.tag); return
            for name, value in element.attrib.items():
                if name not in attributes: problems.append(element.tag + ": unknown attribute " + name)
                if name in booleans and value not in ("true", "false"): problems.append(name + "=" + value)
            for child in element:
                if child.tag not in children: problems.append(child.tag + " inside " + element.tag)
                walk(child, element)
            if element.tag == "domain-config":
                domains = [c for c in element if c.tag == "domain"]
                if not domains: problems.append("domain-config without domain")
                for tag in ("pin-set", "trust-anchors"):
                    if len([c for c in element if c.tag == tag]) > 1: problems.append("two " + tag)
                pins = [c for c in element if c.tag == "pin-set"]
                anchors = [c for c in element if c.tag == "trust-anchors"]
                for d in domains:
                    if not host.match(d.text or ""): problems.append("bad domain " + repr(d.text))
                    summary[d.text] = {
                        "includeSubdomains": d.get("includeSubdomains") == "true",
                        "pins": [p.text for p in pins[0]] if pins else [],
                        "expiration": pins[0].get("expiration") if pins else None,
                        "anchors": [c.get("src") for c in anchors[0]] if anchors else [],
                        "cleartext": element.get("cleartextTrafficPermitted"),
                    }
            if element.tag == "pin-set":
                if not list(element): problems.append("empty pin-set")
                if element.get("expiration") is not None:
                    try: datetime.datetime.strptime(element.get("expiration"), "%Y-%m-%d")
                    except ValueError: problems.append("expiration " + element.get("expiration"))
                    if not re.match(r"^\d{4}-\d{2}-\d{2}$", element.get("expiration")): problems.append("expiration format")
            if element.tag == "pin":
                if element.get("digest") != "SHA-256": problems.append("digest " + str(element.get("digest")))
                try:
                    if len(base64.b64decode(element.text, validate=True)) != 32: problems.append("pin length")
                except Exception: problems.append("pin base64 " + repr(element.text))
            if element.tag == "certificates":
                src = element.get("src") or ""
                if not (src in ("system", "user") or re.match(r"^@raw/[a-z0-9_]+$", src)): problems.append("src " + src)
        if root.tag != "network-security-config": problems.append("root " + root.tag)
        walk(root, None)
        print(json.dumps({"problems": problems, "domains": summary}))
        """#

    @Test("android-nsc: well-formed, within the Network Security Config schema rules, cleartext off, anchors as @raw resources")
    func androidSchema() async throws {
        let fixture = try Fixture(Self.everything)
        defer { fixture.directory.remove() }
        let export = try await fixture.pinning(["config", "export", fixture.configPath, "--format", "android-nsc", "--lossy", "--out", fixture.directory.path("nsc.xml")])
        #expect(export.status == 0, "\(export)")
        #expect(export.stderr.contains("note: copy root.pem into res/raw/ as root.pem"), "\(export.stderr)")
        let run = try await TestTools.run(Self.python, ["-c", Self.nscRules, fixture.directory.path("nsc.xml")])
        #expect(run.status == 0, "\(run)")
        let result = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        #expect((result["problems"] as? [String]) == [], "\(run.stdout)")
        let domains = try #require(result["domains"] as? [String: [String: Any]])
        #expect(Set(domains.keys) == ["api.example.com", "fleet.example.com", "open.fleet.example.com"])
        let pins = [fixture.chain.intermediate, fixture.chain.root].map { String(Self.pin($0).dropFirst("sha256/".count)) }
        #expect(domains["api.example.com"]?["expiration"] as? String == "2027-06-01")
        #expect(domains["api.example.com"]?["pins"] as? [String] == pins)
        #expect(domains["api.example.com"]?["includeSubdomains"] as? Bool == false)
        #expect(domains["fleet.example.com"]?["includeSubdomains"] as? Bool == true)
        #expect(domains["fleet.example.com"]?["anchors"] as? [String] == ["@raw/root"])
        #expect((domains["open.fleet.example.com"]?["pins"] as? [String])?.isEmpty == true)
        #expect(domains.values.allSatisfy { $0["cleartext"] as? String == "false" })

        // An expiry that is not midnight UTC is a difference of meaning: refused, or written as that date with --lossy.
        let late = try Fixture { chain in
            #""api.example.com": {"pins": ["\#(Self.pin(chain.intermediate))", "\#(Self.pin(chain.root))"], "expires": "2027-06-01T12:00:00Z"}"#
        }
        defer { late.directory.remove() }
        let refused = try await late.pinning(["config", "export", late.configPath, "--format", "android-nsc"])
        #expect(refused.status == 2 && refused.stderr.contains("is not midnight UTC"), "\(refused)")
    }

    @Test("round trip: import of an export gives back the same entries (android-nsc with --res, trustkit)")
    func roundTrip() async throws {
        let fixture = try Fixture { chain in
            let pins = "[\"\(Self.pin(chain.intermediate))\", \"\(Self.pin(chain.root))\"]"
            return """
                "api.example.com": {"pins": \(pins), "expires": "2027-06-01T00:00:00Z"},
                "**.fleet.example.com": {"pins": \(pins), "anchors": ["root.pem"], "anchorsOnly": true},
                "open.fleet.example.com": {"excludeSubdomainFromParentPolicy": true},
                "mixed.example.com": {"pins": \(pins), "includeSubdomains": true, "anchors": ["root.pem"]},
                "shop.example.com": {"pins": \(pins), "enforce": false, "reportURIs": ["https://reports.example.com/pins"]}
                """
        }
        defer { fixture.directory.remove() }
        let original = try PinningConfiguration(contentsOfFile: fixture.configPath)

        // Android: everything but the report-only entry (which Android cannot express), anchors through res/raw.
        let android = try await fixture.pinning(
            ["config", "export", fixture.configPath, "--format", "android-nsc", "--lossy", "--out", fixture.directory.path("nsc.xml")])
        #expect(android.status == 0, "\(android)")
        try FileManager.default.createDirectory(atPath: fixture.directory.path("res/raw"), withIntermediateDirectories: true)
        _ = try fixture.directory.write("res/raw/root.pem", fixture.chain.root.certificatePEM)
        let imported = try await fixture.pinning(
            ["config", "import", fixture.directory.path("nsc.xml"), "--format", "android-nsc", "--res", fixture.directory.path("res"), "--out", fixture.directory.path("from-nsc.json")])
        #expect(imported.status == 0, "\(imported)")
        let fromAndroid = try PinningConfiguration(contentsOfFile: fixture.directory.path("from-nsc.json"))
        #expect(Self.comparable(fromAndroid) == Self.comparable(original).filter { $0.enforce || $0.excluded }, "\(fromAndroid.entries.map(\.key))")

        // Without --res the anchors cannot be found: an error naming the entry, or dropped with --lossy.
        let noRes = try await fixture.pinning(["config", "import", fixture.directory.path("nsc.xml"), "--format", "android-nsc"])
        #expect(noRes.status == 2 && noRes.stderr.contains("needs the app's res directory (--res DIR)"), "\(noRes)")

        // TrustKit: everything but anchors (which TrustKit cannot express per entry).
        let trustKit = try await fixture.pinning(
            ["config", "export", fixture.configPath, "--format", "trustkit", "--lossy", "--out", fixture.directory.path("tk.plist")])
        #expect(trustKit.status == 0, "\(trustKit)")
        let importedTK = try await fixture.pinning(
            ["config", "import", fixture.directory.path("tk.plist"), "--format", "trustkit", "--out", fixture.directory.path("from-tk.json")])
        #expect(importedTK.status == 0, "\(importedTK)")
        let fromTrustKit = try PinningConfiguration(contentsOfFile: fixture.directory.path("from-tk.json"))
        let withoutAnchors = Self.comparable(original).map { entry -> Summary in
            var entry = entry
            entry.anchors = []
            entry.anchorsOnly = false
            return entry
        }
        #expect(Self.comparable(fromTrustKit) == withoutAnchors)
    }

    @Test("an internationalised host key (bücher.example, straße.example) is exported in its A-label form to every platform, and comes back as the same entry")
    func internationalisedHosts() async throws {
        let fixture = try Fixture { chain in
            let pins = "[\"\(Self.pin(chain.intermediate))\", \"\(Self.pin(chain.root))\"]"
            return """
                "bücher.example": {"pins": \(pins)},
                "straße.example": {"pins": \(pins), "includeSubdomains": true}
                """
        }
        defer { fixture.directory.remove() }
        let original = try PinningConfiguration(contentsOfFile: fixture.configPath)
        // Keys stay as written (messages name them so); the platforms get the core's A-labels (UTS #46
        // non-transitional, as browsers and OkHttp: ß is kept, not mapped to ss).
        #expect(Set(original.entries.map(\.key)) == ["bücher.example", "straße.example"])
        for format in ["android-nsc", "trustkit", "ats", "okhttp"] {
            let out = fixture.directory.path("idn.\(format)")
            // ATS places a pin as a leaf or CA identity by the certificate it hashes.
            let certificates = format == "ats" ? ["--certificates", "intermediate.pem", "--certificates", "root.pem"] : []
            let run = try await fixture.pinning(["config", "export", fixture.configPath, "--format", format, "--out", out] + certificates)
            #expect(run.status == 0, "\(format): \(run)")
            let text = try String(contentsOfFile: out, encoding: .utf8)
            #expect(text.contains("xn--bcher-kva.example") && text.contains("xn--strae-oqa.example"), "\(format): \(text)")
            #expect(!text.contains("bücher") && !text.contains("straße"), "\(format): only A-labels reach the platform: \(text)")
        }
        for format in ["android-nsc", "trustkit"] {
            let back = fixture.directory.path("idn-back-\(format).json")
            let run = try await fixture.pinning(["config", "import", fixture.directory.path("idn.\(format)"), "--format", format, "--out", back])
            #expect(run.status == 0, "\(format): \(run)")
            let imported = try PinningConfiguration(contentsOfFile: back)
            #expect(Self.comparable(imported) == Self.comparable(original), "\(format): \(imported.entries.map(\.key))")
        }
    }

    @Test("import refuses what is not a Network Security Config or a TrustKit property list, in words (exit 2)")
    func importBadInput() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-import")
        defer { directory.remove() }
        let cases: [(String, String, String, String)] = [
            ("garbage.xml", "android-nsc", "<network-security-config><domain-config>", "not well-formed XML"),
            ("other.xml", "android-nsc", "<manifest/>", "the root element is <manifest>"),
            (
                "sha1.xml", "android-nsc",
                #"<network-security-config><domain-config><domain>a.example.com</domain><pin-set><pin digest="SHA-1">AAAA</pin></pin-set></domain-config></network-security-config>"#,
                "only SHA-256 pins"
            ),
            (
                "one.xml", "android-nsc",
                #"<network-security-config><domain-config><domain>a.example.com</domain><pin-set><pin digest="SHA-256">AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=</pin></pin-set></domain-config></network-security-config>"#,
                "needs at least two distinct pins"
            ),
            ("entity.xml", "android-nsc", #"<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><network-security-config/>"#, "entities are not accepted"),
            ("text.plist", "trustkit", "hello", "the property list's root is not a dictionary"),
            ("broken.plist", "trustkit", #"<?xml version="1.0"?><plist version="1.0"><dict><key>a</key>"#, "not a property list"),
            ("empty.plist", "trustkit", #"<?xml version="1.0"?><plist version="1.0"><dict/></plist>"#, "no TSKPinnedDomains"),
            (
                "nsc.xml", "trustkit", "<network-security-config><base-config/></network-security-config>",
                "not a property list (XML, binary or OpenStep) that reads; it looks like an Android Network Security Config: use --format android-nsc"
            ),
            ("blank.xml", "android-nsc", "", "the file is empty"),
            ("blank.plist", "trustkit", "", "the file is empty"),
            ("spaces.xml", "android-nsc", " \n", "the file holds only white space"),
        ]
        for (name, format, content, message) in cases {
            let path = try directory.write(name, content)
            let run = try await Executable.pinning(["config", "import", path, "--format", format], in: directory)
            #expect(run.status == 2 && run.stderr.contains(message) && run.stdout.isEmpty, "\(name): \(run)")
            #expect(!run.stderr.contains("NSXMLParserErrorDomain") && !run.stderr.contains("Error Domain"), "\(name): \(run.stderr)")
            #expect(!run.stderr.contains("could not be completed") && !run.stderr.contains("line 0, column 0"), "Foundation's words: \(name): \(run.stderr)")
        }
        let missing = try await Executable.pinning(["config", "import", directory.path("nope.xml"), "--format", "android-nsc"], in: directory)
        #expect(missing.status == 2 && missing.stderr.contains("nope.xml"), "\(missing)")
        let format = try await Executable.pinning(["config", "import", directory.path("nope.xml"), "--format", "ats"], in: directory)
        #expect(format.status == 2 && format.stderr.contains("--format: unknown format \"ats\"; use android-nsc or trustkit"), "\(format)")
    }

    /// What both sides of a round trip must agree on: coverage, pins, enforcement, expiry, reports, exclusion, anchors.
    struct Summary: Hashable {
        var coverage: PinningConfiguration.Entry.Coverage
        var pins: Set<Pin>
        var enforce: Bool
        var expires: Date?
        var reportURIs: [URL]
        var excluded: Bool
        var anchors: Set<[UInt8]>
        var anchorsOnly: Bool
    }

    static func comparable(_ configuration: PinningConfiguration) -> [Summary] {
        configuration.entries.map { entry in
            Summary(
                coverage: entry.coverage, pins: Set(entry.pins), enforce: entry.enforce, expires: entry.expires, reportURIs: entry.reportURIs,
                excluded: entry.excludesSubdomainFromParentPolicy, anchors: Set(entry.anchors.map { Array($0.derBytes) }), anchorsOnly: entry.anchorsOnly
            )
        }.sorted { "\($0.coverage)" < "\($1.coverage)" }
    }

    @Test("okhttp: OkHttp's own CertificatePinner, built from the exported pins, accepts the genuine server and refuses an intercepting one", .enabled(if: javaAvailable))
    func okHttpEnforces() async throws {
        let fixture = try Fixture { chain in
            #""localhost": {"pins": ["\#(Self.pin(chain.intermediate))", "\#(Self.pin(chain.root))"]}"#
        }
        defer { fixture.directory.remove() }
        let export = try await fixture.pinning(["config", "export", fixture.configPath, "--format", "okhttp", "--out", fixture.directory.path("Pins.kt")])
        #expect(export.status == 0, "\(export)")
        let kotlin = try String(contentsOfFile: fixture.directory.path("Pins.kt"), encoding: .utf8)
        #expect(kotlin.contains(#".add("localhost", "\#(Self.pin(fixture.chain.intermediate))")"#), "\(kotlin)")

        // The genuine server, and an intercepting one with a certificate from another CA the client also trusts:
        // only the pins can tell them apart.
        let interceptor = try TestChain()
        _ = try fixture.directory.write("genuine.pem", TestPKI.pemBundle([fixture.chain.leaf.certificate, fixture.chain.intermediate.certificate]))
        _ = try fixture.directory.write("genuine.key", fixture.chain.leaf.privateKeyPEM)
        _ = try fixture.directory.write("mitm.pem", TestPKI.pemBundle([interceptor.leaf.certificate, interceptor.intermediate.certificate]))
        _ = try fixture.directory.write("mitm.key", interceptor.leaf.privateKeyPEM)
        _ = try fixture.directory.write("mitm-root.pem", interceptor.root.certificatePEM)
        let genuine = try await ServeProcess(["--cert", fixture.directory.path("genuine.pem"), "--key", fixture.directory.path("genuine.key")], in: fixture.directory)
        defer { genuine.stop() }
        let mitm = try await ServeProcess(["--cert", fixture.directory.path("mitm.pem"), "--key", fixture.directory.path("mitm.key")], in: fixture.directory)
        defer { mitm.stop() }

        _ = try fixture.directory.write("PinCheck.java", Self.javaProgram)
        let classpath = Self.okhttpJars.joined(separator: ":")
        let compile = try await TestTools.run(Self.javac, ["-cp", classpath, "-d", fixture.directory.path("classes"), fixture.directory.path("PinCheck.java")], timeout: 180)
        #expect(compile.status == 0, "\(compile)")
        func connect(_ port: Int) async throws -> TestTools.ProcessResult {
            try await TestTools.run(
                Self.java,
                [
                    "-cp", classpath + ":" + fixture.directory.path("classes"), "PinCheck", fixture.directory.path("Pins.kt"), "https://localhost:\(port)/",
                    fixture.directory.path("root.pem"), fixture.directory.path("mitm-root.pem"),
                ], timeout: 180)
        }
        let accepted = try await connect(genuine.port)
        #expect(accepted.status == 0 && accepted.stdout.contains("OK 200"), "\(accepted)")
        let refused = try await connect(mitm.port)
        #expect(refused.status == 1 && refused.stdout.contains("Certificate pinning failure!"), "\(refused)")
    }

    /// Reads the `.add("host", "sha256/…")` calls of the exported Kotlin into OkHttp's own builder, trusts the given
    /// roots, resolves every host to 127.0.0.1, and fetches the URL.
    static let javaProgram = #"""
        import java.io.FileInputStream;
        import java.io.InputStream;
        import java.net.InetAddress;
        import java.nio.charset.StandardCharsets;
        import java.nio.file.Files;
        import java.nio.file.Paths;
        import java.security.KeyStore;
        import java.security.cert.CertificateFactory;
        import java.util.Collections;
        import java.util.regex.Matcher;
        import java.util.regex.Pattern;
        import javax.net.ssl.SSLContext;
        import javax.net.ssl.SSLPeerUnverifiedException;
        import javax.net.ssl.TrustManager;
        import javax.net.ssl.TrustManagerFactory;
        import javax.net.ssl.X509TrustManager;
        import okhttp3.CertificatePinner;
        import okhttp3.OkHttpClient;
        import okhttp3.Protocol;
        import okhttp3.Request;
        import okhttp3.Response;

        public class PinCheck {
            public static void main(String[] args) throws Exception {
                String kotlin = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8);
                CertificatePinner.Builder pins = new CertificatePinner.Builder();
                Matcher add = Pattern.compile("\\.add\\(\"([^\"]+)\", \"([^\"]+)\"\\)").matcher(kotlin);
                int count = 0;
                while (add.find()) { pins.add(add.group(1), add.group(2)); count++; }
                if (count == 0) { System.out.println("NO PINS"); System.exit(3); }
                KeyStore roots = KeyStore.getInstance(KeyStore.getDefaultType());
                roots.load(null, null);
                CertificateFactory factory = CertificateFactory.getInstance("X.509");
                for (int i = 2; i < args.length; i++) {
                    try (InputStream in = new FileInputStream(args[i])) { roots.setCertificateEntry("root" + i, factory.generateCertificate(in)); }
                }
                TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
                trust.init(roots);
                X509TrustManager manager = (X509TrustManager) trust.getTrustManagers()[0];
                SSLContext context = SSLContext.getInstance("TLS");
                context.init(null, new TrustManager[] { manager }, null);
                OkHttpClient client = new OkHttpClient.Builder()
                    .sslSocketFactory(context.getSocketFactory(), manager)
                    .certificatePinner(pins.build())
                    .dns(host -> Collections.singletonList(InetAddress.getByName("127.0.0.1")))
                    .protocols(Collections.singletonList(Protocol.HTTP_1_1))
                    .build();
                try (Response response = client.newCall(new Request.Builder().url(args[1]).build()).execute()) {
                    System.out.println("OK " + response.code());
                } catch (SSLPeerUnverifiedException refused) {
                    System.out.println("REFUSED " + refused.getMessage());
                    System.exit(1);
                }
            }
        }
        """#
}
