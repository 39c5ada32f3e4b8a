import Foundation
import Pinning
import PinningTestSupport
import Testing

// Issue 27, item 13: for a host an `excludeSubdomainFromParentPolicy` entry exempts, TrustKit answers "domain not
// pinned" (its configuration has no key for the host). `evaluate --config` reported the exclusion entry itself as
// `matchedEntry`; now `matchedEntry` is null and `excludedBy` names the exclusion.

@Suite("excludeSubdomainFromParentPolicy: no matched entry for an excluded host, the exclusion named apart")
struct ExcludedHostCLITests {
    @Test("evaluate --config: the excluded host has matchedEntry null and excludedBy; its sibling matches the parent")
    func excludedHostHasNoMatchedEntry() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-excluded-host")
        defer { directory.remove() }
        let root = try TestPKI.root("Exclusion Test Root")
        let leaf = try TestPKI.leaf("unsecured.good.test", issuer: root, dnsNames: ["unsecured.good.test", "www.good.test"])
        let chain = try directory.write("chain.pem", leaf.certificatePEM)
        let roots = try directory.write("roots.pem", root.certificatePEM)
        let unrelated = ["sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString(), "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString()]
        let config = try directory.write(
            "pinning.json",
            """
            {"version": 1, "domains": {
              "good.test": {"pins": ["\(unrelated[0])", "\(unrelated[1])"], "includeSubdomains": true},
              "unsecured.good.test": {"excludeSubdomainFromParentPolicy": true}
            }}
            """)
        func evaluate(_ host: String, json: Bool = true) async throws -> CLIRun {
            try await Executable.pinning(
                ["evaluate", "--config", config, "--host", host, "--chain", chain, "--roots", roots] + (json ? ["--json"] : []), in: directory)
        }

        let excluded = try await evaluate("unsecured.good.test")
        #expect(excluded.status == 0, "\(excluded)")
        let object = try jsonObject(excluded)
        #expect(object["matchedEntry"] is NSNull, "TrustKit's domain not pinned: \(excluded.stdout)")
        #expect(object["excludedBy"] as? String == "unsecured.good.test", "\(excluded.stdout)")
        #expect(object["pinsEnforced"] as? Bool == false)

        let text = try await evaluate("unsecured.good.test", json: false)
        #expect(text.status == 0 && text.stdout.contains("entry: none (excluded from its parent's policy by \"unsecured.good.test\""), "\(text)")

        // The sibling stays under the parent: matched, pinned, refused for the unrelated pins; no exclusion.
        let sibling = try await evaluate("www.good.test")
        #expect(sibling.status == 1, "\(sibling)")
        let siblingObject = try jsonObject(sibling)
        #expect(siblingObject["matchedEntry"] as? String == "good.test", "\(sibling.stdout)")
        #expect(siblingObject["excludedBy"] is NSNull, "\(sibling.stdout)")
        #expect(siblingObject["code"] as? String == "pinMismatch", "\(sibling.stdout)")
    }

    @Test("the library: HostEvaluation.matchedEntry nil and excludedBy set, also under unlistedHosts reject")
    func library() async throws {
        let root = try TestPKI.root("Exclusion Library Root")
        let leaf = try TestPKI.leaf("unsecured.good.test", issuer: root, dnsNames: ["unsecured.good.test"])
        for unlisted in ["default", "reject"] {
            let configuration = try PinningConfiguration(
                data: Data(
                    """
                    {"version": 1, "unlistedHosts": "\(unlisted)", "domains": {
                      "good.test": {"pins": ["sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="], "includeSubdomains": true},
                      "unsecured.good.test": {"excludeSubdomainFromParentPolicy": true}
                    }}
                    """.utf8),
                baseDirectory: "/")
            let trust = ServerTrust(certificates: [leaf.certificate], platformRoots: TrustRoots([root.certificate]))
            let result = await configuration.evaluate(trust, forHost: "unsecured.good.test")
            #expect(result.isTrusted, "\(unlisted)")
            #expect(result.matchedEntry == nil, "\(unlisted)")
            #expect(result.excludedBy == "unsecured.good.test", "\(unlisted)")
            let parent = await configuration.evaluate(trust, forHost: "good.test")
            #expect(parent.matchedEntry == "good.test" && parent.excludedBy == nil, "\(unlisted)")
        }
    }
}
