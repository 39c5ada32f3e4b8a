import Foundation
import Pinning
import PinningTestSupport
import Testing

/// The limbo runner's own input: a case whose `validation_time` does not read is the case's fault, said with the
/// reader's words. It once became nil, and the case ran at the current time instead.
@Suite("limbo: a validation_time that does not read")
struct LimboInputCLITests {
    @Test("an impossible validation_time is INPUT-ERROR with its reason, not a run at the current time")
    func impossibleValidationTime() async throws {
        let limbo = try PinningBinary.located.get().deletingLastPathComponent().appendingPathComponent("limbo")
        guard FileManager.default.isExecutableFile(atPath: limbo.path) else {
            Issue.record("no limbo binary beside \(try PinningBinary.located.get().path)")
            return
        }
        let directory = try TemporaryDirectory(prefix: "pinning-limbo-input")
        defer { directory.remove() }
        let root = try TestPKI.root("Limbo Input Root")
        let leaf = try TestPKI.leaf("limbo.test", issuer: root, dnsNames: ["limbo.test"])
        func testCase(_ id: String, _ time: String) -> [String: Any] {
            [
                "id": id, "validation_kind": "SERVER", "trusted_certs": [root.certificatePEM], "untrusted_intermediates": [String](),
                "peer_certificate": leaf.certificatePEM, "validation_time": time, "expected_result": "SUCCESS",
                "expected_peer_name": ["kind": "DNS", "value": "limbo.test"],
            ]
        }
        let now = RFC3339.format(Date())
        let suite: [String: Any] = ["testcases": [testCase("input::impossible", "2030-02-30T00:00:00Z"), testCase("input::now", now)]]
        let path = try directory.write("limbo.json", bytes: Array(try JSONSerialization.data(withJSONObject: suite)))
        let results = directory.path("results.tsv")
        let run = try await TestTools.run(limbo.path, [path, "--results", results], timeout: 120)
        #expect(run.exited, "\(run)")
        let lines = try String(contentsOfFile: results, encoding: .utf8).split(separator: "\n")
        #expect(
            lines.contains("input::impossible\tINPUT-ERROR validation_time \"2030-02-30T00:00:00Z\": day 30 does not exist: February 2030 has 28 days"),
            "\(lines)")
        #expect(lines.contains("input::now\tSUCCESS"), "the same case at a time that reads passes: \(lines)")
    }
}
