import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

/// The public suffix list is a value the caller hands in: parsing, the typed error when the webPKI profile is
/// asked for without one, and the wildcard rule it decides.
@Suite("Public suffix list and the webPKI profile")
struct PublicSuffixListTests {
    static let listText = """
        // ===BEGIN ICANN DOMAINS===
        uk
        co.uk
        *.ck
        !www.ck
        // ===END ICANN DOMAINS===
        // ===BEGIN PRIVATE DOMAINS===
        s3.amazonaws.com
        // ===END PRIVATE DOMAINS===
        """

    @Test("the profile is named; webpki without a list is a typed error, rfc5280 needs none")
    func profileByName() throws {
        let list = try PublicSuffixList(data: Data(Self.listText.utf8))
        #expect(try ValidationProfile(named: "rfc5280", publicSuffixList: nil) == .rfc5280)
        #expect(try ValidationProfile(named: "WebPKI", publicSuffixList: list) == .webPKI(publicSuffixList: list))
        #expect(try ValidationProfile(named: "webpki", publicSuffixList: list).description == "webPKI")
        let missing = try #require(throws: ValidationProfileError.self) {
            try ValidationProfile(named: "webpki", publicSuffixList: nil)
        }
        #expect(missing.code == .publicSuffixListRequired && missing.description.contains("public suffix list"))
        let unknown = try #require(throws: ValidationProfileError.self) {
            try ValidationProfile(named: "bogus", publicSuffixList: list)
        }
        #expect(unknown.code == .unknownProfile && unknown.description == "unknown profile \"bogus\"; use rfc5280 or webpki")
    }

    @Test("an unreadable list file is a typed error naming the file")
    func unreadableFile() throws {
        let path = "/nonexistent-\(UUID().uuidString)/public_suffix_list.dat"
        let error = try #require(throws: ValidationProfileError.self) {
            try PublicSuffixList(contentsOfFile: path)
        }
        #expect(error.code == .unreadablePublicSuffixList && error.description.hasPrefix(path))
    }

    @Test("webPKI refuses a wildcard spanning a listed suffix; the ICANN section only; an empty list knows single labels")
    func wildcardRule() async throws {
        let list = try PublicSuffixList(data: Data(Self.listText.utf8))
        let root = try TestPKI.root("Suffix Root")
        let intermediate = try TestPKI.intermediate("Suffix Intermediate", issuer: root)
        func verdict(_ pattern: String, host: String, _ profile: ValidationProfile) async throws -> TrustEvaluation {
            let leaf = try TestPKI.leaf(pattern, issuer: intermediate, dnsNames: [pattern])
            let trust = ServerTrust(
                certificates: [leaf.certificate, intermediate.certificate],
                platformRoots: TrustRoots([root.certificate]),
                profile: profile
            )
            return await trust.evaluate(.ssl(host: host))
        }
        let spans = "spans a public suffix"
        // co.uk is listed: *.co.uk spans it.
        let listed = try await verdict("*.co.uk", host: "www.co.uk", .webPKI(publicSuffixList: list))
        #expect(listed.failure?.reason.contains(spans) == true, "\(String(describing: listed.failure))")
        // *.ck: every second-level name under ck is a suffix, except the !www.ck exception.
        let wildcardRule = try await verdict("*.foo.ck", host: "a.foo.ck", .webPKI(publicSuffixList: list))
        #expect(wildcardRule.failure?.reason.contains(spans) == true)
        let exception = try await verdict("*.www.ck", host: "a.www.ck", .webPKI(publicSuffixList: list))
        #expect(exception.failure?.reason.contains(spans) != true)
        // The PRIVATE section is not read.
        let privateSection = try await verdict("*.s3.amazonaws.com", host: "b.s3.amazonaws.com", .webPKI(publicSuffixList: list))
        #expect(privateSection.failure?.reason.contains(spans) != true)
        // Without rules only single labels are suffixes: *.co.uk passes this rule (the warning on .empty).
        let empty = try await verdict("*.co.uk", host: "www.co.uk", .webPKI(publicSuffixList: .empty))
        #expect(empty.failure?.reason.contains(spans) != true)
        // The rfc5280 profile does not apply the rule at all.
        let rfc5280 = try await verdict("*.co.uk", host: "www.co.uk", .rfc5280)
        #expect(rfc5280.failure?.reason.contains(spans) != true)
    }

    @Test("copies of a list are equal and hash alike; lists with other rules differ")
    func equality() throws {
        let list = try PublicSuffixList(data: Data(Self.listText.utf8))
        let again = try PublicSuffixList(data: Data(Self.listText.utf8))
        #expect(list == again && list.hashValue == again.hashValue)
        #expect(list != .empty)
        #expect(ValidationProfile.webPKI(publicSuffixList: list) != .webPKI(publicSuffixList: .empty))
    }
}
