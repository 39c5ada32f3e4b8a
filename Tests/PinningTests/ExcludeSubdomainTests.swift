import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

/// Issue 11, item 15: TrustKit's `kTSKExcludeSubdomainFromParentPolicy`, translated from TrustKit's
/// configuration and pinning-validator tests.
@Suite("excludeSubdomainFromParentPolicy")
struct ExcludeSubdomainTests {
    static let pinA = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    static let pinB = "sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E="
    static let pinned = "{\"pins\": [\"\(pinA)\", \"\(pinB)\"], \"includeSubdomains\": true}"

    static func load(_ domains: String, unlisted: String = "default") throws -> PinningConfiguration {
        try PinningConfiguration(
            data: Data("{\"version\": 1, \"unlistedHosts\": \"\(unlisted)\", \"domains\": {\(domains)}}".utf8),
            baseDirectory: "/"
        )
    }

    static func problems(_ domains: String) -> String {
        do {
            _ = try Self.load(domains)
            return ""
        } catch {
            return String(describing: error)
        }
    }

    @Test("the excluded host is not pinned; its siblings and its own subdomains keep the parent's pins", arguments: ["unlisted default", "unlisted reject"])
    func exclusion(_ variant: String) async throws {
        let configuration = try Self.load(
            "\"good.com\": \(Self.pinned), \"unsecured.good.com\": {\"excludeSubdomainFromParentPolicy\": true}",
            unlisted: variant.hasSuffix("reject") ? "reject" : "default"
        )
        #expect(configuration.entry(forHost: "unsecured.good.com")?.excludesSubdomainFromParentPolicy == true)
        #expect(configuration.entry(forHost: "www.good.com")?.key == "good.com")
        #expect(configuration.entry(forHost: "a.unsecured.good.com")?.key == "good.com")

        // Chains from a CA the platform trusts, none of whose keys is pinned.
        let root = try TestPKI.root("Public Root")
        func chain(_ host: String) throws -> ServerTrust {
            let leaf = try TestPKI.leaf(host, issuer: root, dnsNames: [host])
            return ServerTrust(certificates: [leaf.certificate], platformRoots: TrustRoots([root.certificate]))
        }
        let excluded = await configuration.evaluate(try chain("unsecured.good.com"), forHost: "unsecured.good.com")
        #expect(excluded.isTrusted, "\(String(describing: excluded.verdict.failure))")
        #expect(excluded.matchedEntry == nil && excluded.excludedBy == "unsecured.good.com")
        #expect(!excluded.pinsEnforced)
        #expect(excluded.failureReport == nil)

        for sibling in ["www.good.com", "a.unsecured.good.com", "good.com"] {
            let result = await configuration.evaluate(try chain(sibling), forHost: sibling)
            #expect(result.verdict.failure?.code == .pinMismatch, "\(sibling)")
        }
    }

    @Test("the exclusion waives the pins only: the chain and the name are still validated")
    func chainStillValidated() async throws {
        let configuration = try Self.load("\"good.com\": \(Self.pinned), \"unsecured.good.com\": {\"excludeSubdomainFromParentPolicy\": true}")
        let untrustedRoot = try TestPKI.root("Unknown Root")
        let leaf = try TestPKI.leaf("unsecured.good.com", issuer: untrustedRoot, dnsNames: ["unsecured.good.com"])
        let trust = ServerTrust(certificates: [leaf.certificate], platformRoots: TrustRoots([]))
        #expect(await configuration.evaluate(trust, forHost: "unsecured.good.com").verdict.failure?.code == .noPathToAnchor)

        let wrongName = try TestPKI.leaf("other.example", issuer: untrustedRoot, dnsNames: ["other.example"])
        let named = ServerTrust(certificates: [wrongName.certificate], platformRoots: TrustRoots([untrustedRoot.certificate]))
        #expect(await configuration.evaluate(named, forHost: "unsecured.good.com").verdict.failure?.code == .hostnameMismatch)
    }

    @Test("every parent form works: includeSubdomains, *. and **.")
    func parents() throws {
        for parent in ["\"good.com\": \(Self.pinned)", "\"*.good.com\": {\"pins\": [\"\(Self.pinA)\", \"\(Self.pinB)\"]}", "\"**.good.com\": {\"pins\": [\"\(Self.pinA)\", \"\(Self.pinB)\"]}"] {
            #expect(Self.problems("\(parent), \"unsecured.good.com\": {\"excludeSubdomainFromParentPolicy\": true}").isEmpty, "\(parent)")
        }
    }

    @Test(
        "misuse is a configuration error, as in TrustKit",
        arguments: [
            // No parent: good.com does not include subdomains (TrustKit's testDisablePinningForSubdomainWithoutParentAndNoPublicKey).
            ("\"good.com\": {\"pins\": [\"\(pinA)\", \"\(pinB)\"]}, \"unsecured.good.com\": {\"excludeSubdomainFromParentPolicy\": true}", "no entry covers this host from above"),
            ("\"unsecured.good.com\": {\"excludeSubdomainFromParentPolicy\": true}", "no entry covers this host from above"),
            // Pins beside the exclusion (TrustKit's testDisablePinningForSubdomainAdditionalDomainKeys).
            ("\"good.com\": \(pinned), \"unsecured.good.com\": {\"excludeSubdomainFromParentPolicy\": true, \"pins\": [\"\(pinA)\", \"\(pinB)\"]}", "cannot be combined"),
            ("\"good.com\": \(pinned), \"unsecured.good.com\": {\"excludeSubdomainFromParentPolicy\": true, \"includeSubdomains\": true}", "cannot be combined"),
            ("\"good.com\": \(pinned), \"*.unsecured.good.com\": {\"excludeSubdomainFromParentPolicy\": true}", "not a wildcard"),
            ("\"good.com\": \(pinned), \"unsecured.good.com\": {\"excludeSubdomainFromParentPolicy\": \"yes\"}", "must be true or false"),
        ]
    )
    func misuse(_ domains: String, _ fragment: String) {
        let problems = Self.problems(domains)
        #expect(problems.contains(fragment), "\(problems)")
        #expect(problems.contains("unsecured.good.com"), "the problem names the entry: \(problems)")
    }

    @Test("false is an ordinary pinned entry (TrustKit's testExplicitNotDisablePinningForSubdomainAdditionalDomainKeys)")
    func explicitFalse() throws {
        let configuration = try Self.load(
            "\"good.com\": \(Self.pinned), \"unsecured.good.com\": {\"excludeSubdomainFromParentPolicy\": false, \"pins\": [\"\(Self.pinA)\", \"\(Self.pinB)\"]}"
        )
        let entry = try #require(configuration.entry(forHost: "unsecured.good.com"))
        #expect(!entry.excludesSubdomainFromParentPolicy)
        #expect(entry.pins.count == 2)
    }

    @Test("encoding round-trips the exclusion")
    func roundTrip() throws {
        let configuration = try Self.load("\"good.com\": \(Self.pinned), \"unsecured.good.com\": {\"excludeSubdomainFromParentPolicy\": true}")
        let data = try JSONEncoder().encode(configuration)
        let again = try PinningConfiguration(data: data, baseDirectory: "/")
        #expect(again.entries == configuration.entries)
    }
}
