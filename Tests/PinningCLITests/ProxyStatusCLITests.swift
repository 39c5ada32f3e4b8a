import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

// Issue 27, item 16: `pinning proxy`'s /status gave only a count of entries, and an entry with a clientIdentity
// could not be found in it. `entryList` lists every configured entry with its pins' expiry and its identity's.

@Suite("pinning proxy /status: every configured entry, with its pins' and identity's expiry", .enabled(if: curlAvailable))
struct ProxyStatusCLITests {
    @Test("an entry with pins and expires, one with a client identity, a parent and its exclusion, one before 1583: all five listed")
    func everyEntryListed() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-proxy-status")
        defer { directory.remove() }
        let root = try TestPKI.root("Status Device Root")
        let expiry = Date().addingTimeInterval(200 * 86400)
        let device = try TestPKI.leaf("device-9", issuer: root, usage: .clientAuth, notValidAfter: expiry, includeSAN: false)
        try directory.write("device.pem", device.certificatePEM)
        try directory.write("device.key", device.privateKeyPEM)
        let pins = ["sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString(), "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString()]
        let pinList = "[\"\(pins[0])\", \"\(pins[1])\"]"
        let config = try directory.write(
            "pinning.json",
            """
            {"version": 1, "domains": {
              "api.test": {"pins": \(pinList), "expires": "2031-01-01T00:00:00Z"},
              "device.test": {"pins": \(pinList), "clientIdentity": {"certificate": "device.pem", "key": "device.key"}},
              "good.test": {"pins": \(pinList), "includeSubdomains": true, "enforce": false},
              "plain.good.test": {"excludeSubdomainFromParentPolicy": true},
              "old.test": {"pins": \(pinList), "expires": "1500-03-01T00:00:00Z"}
            }}
            """)
        let proxy = try Subprocess(["proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", directory.path("ca")], in: directory)
        defer { proxy.kill() }
        let lines = try await ProxyFixture.startupLines(proxy, count: 2)
        let port = try #require(Int(lines.first?.split(separator: ":").last ?? ""), "\(lines) \(proxy.stderr)")

        let result = try await TestTools.run(curlPath, ["-sS", "--max-time", "30", "http://127.0.0.1:\(port)/status"], in: directory, timeout: 60)
        #expect(result.status == 0, "\(result)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
        #expect(object["entries"] as? Int == 5, "the count stays: \(result.stdout)")
        let list = try #require(object["entryList"] as? [[String: Any]], "\(result.stdout)")
        let byKey = Dictionary(uniqueKeysWithValues: list.compactMap { item in (item["entry"] as? String).map { ($0, item) } })
        #expect(Set(byKey.keys) == ["api.test", "device.test", "good.test", "plain.good.test", "old.test"], "\(result.stdout)")
        // Dates are proleptic Gregorian, as RFC3339.read reads them and every other date is printed
        // (ISO8601DateFormatter wrote the Julian 1500-02-20 for this instant).
        #expect(byKey["old.test"]?["pinsExpire"] as? String == "1500-03-01T00:00:00Z", "\(result.stdout)")
        _ = try RFC3339.read(try #require(object["localCAExpires"] as? String, "\(result.stdout)"))

        let api = try #require(byKey["api.test"])
        #expect(api["pinsExpire"] as? String == "2031-01-01T00:00:00Z" && api["pins"] as? Int == 2 && api["enforce"] as? Bool == true)
        #expect(api["clientIdentity"] as? Bool == false && api["identityExpires"] is NSNull)

        let withIdentity = try #require(byKey["device.test"])
        #expect(withIdentity["clientIdentity"] as? Bool == true, "\(withIdentity)")
        let identityExpires = try #require(withIdentity["identityExpires"] as? String, "\(withIdentity)")
        let formatter = ISO8601DateFormatter()
        let parsed = try #require(formatter.date(from: identityExpires))
        #expect(abs(parsed.timeIntervalSince(device.certificate.notValidAfter)) < 1, "\(identityExpires) vs \(device.certificate.notValidAfter)")
        #expect((withIdentity["identitySubject"] as? String)?.contains("CN=device-9") == true, "\(withIdentity)")
        #expect(withIdentity["pinsExpire"] is NSNull, "no expires: null, not absent: \(withIdentity)")

        #expect(byKey["good.test"]?["enforce"] as? Bool == false)
        #expect(byKey["plain.good.test"]?["excludedFromParentPolicy"] as? Bool == true)
        #expect(byKey["plain.good.test"]?["pins"] as? Int == 0)
    }
}
