import Foundation
import Pinning
import PinningTestSupport
import Testing

/// `pinning bench` and `limbo --cache`, run as built binaries. Tiny iteration counts: these check the output's
/// shape, never timing.
@Suite("pinning bench and limbo --cache (run the built binaries)")
struct BenchCLITests {
    func fixture() async throws -> CLIFixture {
        _ = try PinningBinary.located.get()
        return try await CLITests.fixture.value
    }

    static let evaluationKeys: Set<String> = [
        "evaluationsPerSecond", "cachedEvaluationsPerSecond", "p50Microseconds", "p99Microseconds", "peakRSSBytes",
    ]
    static let pathBuildingKeys: Set<String> = ["signaturesVerified", "linkMemoHits", "budgetRefusals", "linksHeld"]

    /// `pathBuilding`: exactly its four counts, each a whole number at least zero; returns them.
    static func pathBuilding(_ object: [String: Any], _ run: CLIRun) throws -> [String: Int] {
        let counts = try #require(object["pathBuilding"] as? [String: Any], "no pathBuilding object: \(run)")
        #expect(Set(counts.keys) == Self.pathBuildingKeys, "\(run)")
        var numbers: [String: Int] = [:]
        for (key, value) in counts {
            let number = try #require(value as? Int, "\(key): \(run)")
            #expect(number >= 0, "\(key): \(run)")
            numbers[key] = number
        }
        return numbers
    }

    @Test("bench --json takes evaluate's chain and policy flags and emits exactly the five rates and the path-building counts")
    func benchJSON() async throws {
        let f = try await fixture()
        let arguments = [
            "bench", "--chain", f.chainPEM, "--roots", f.rootPEM, "--host", CLIFixture.host, "--at", CLIFixture.at,
            "--mode", "public-key", "--pin-sha256", pin(f.intermediate), "--iterations", "3", "--cached-iterations", "5", "--json",
        ]
        let run = try await f.run(arguments)
        #expect(run.status == 0, "\(run)")
        let object = try jsonObject(run)
        #expect(Set(object.keys) == Self.evaluationKeys.union(["pathBuilding"]), "\(run)")
        // One chain evaluated again and again: its links are verified once, then the memo answers them.
        let counts = try Self.pathBuilding(object, run)
        #expect(counts["signaturesVerified", default: 0] >= 1 && counts["linkMemoHits", default: 0] >= 1, "\(run)")
        #expect(counts["budgetRefusals"] == 0, "\(run)")
        for key in Self.evaluationKeys {
            let value = try #require(object[key] as? Double, "\(key) is not a number: \(run)")
            #expect(value > 0, "\(key): \(run)")
        }
        let p50 = try #require(object["p50Microseconds"] as? Double)
        let p99 = try #require(object["p99Microseconds"] as? Double)
        #expect(p50 <= p99)
    }

    @Test("bench --cold verifies both signatures of every uncached evaluation; without it the memo answers them after the first")
    func benchColdMemos() async throws {
        let f = try await fixture()
        let common = [
            "bench", "--chain", f.chainPEM, "--roots", f.rootPEM, "--host", CLIFixture.host, "--at", CLIFixture.at,
            "--iterations", "3", "--cached-iterations", "1", "--json",
        ]
        // leaf ← intermediate ← root: two links. The untimed first evaluation verifies both in either mode.
        let warm = try await f.run(common)
        #expect(warm.status == 0, "\(warm)")
        let warmCounts = try Self.pathBuilding(try jsonObject(warm), warm)
        #expect(warmCounts["signaturesVerified"] == 2, "\(warm)")
        let cold = try await f.run(common + ["--cold"])
        #expect(cold.status == 0, "\(cold)")
        let coldObject = try jsonObject(cold)
        #expect(Set(coldObject.keys) == Self.evaluationKeys.union(["pathBuilding"]), "\(cold)")
        let coldCounts = try Self.pathBuilding(coldObject, cold)
        #expect(coldCounts["signaturesVerified"] == 2 * (1 + 3), "\(cold)")
    }

    @Test("bench without --at evaluates at now; human output names both figures")
    func benchHuman() async throws {
        let f = try await fixture()
        // The fixture's leaf is valid around 2030, so at now it is not yet valid: the warning says nothing is cached.
        let run = try await f.run(["bench", "evaluations", "--chain", f.chainPEM, "--roots", f.rootPEM, "--iterations", "2", "--cached-iterations", "2"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("uncached"), "\(run)")
        #expect(run.stdout.contains("cached"), "\(run)")
        #expect(run.stdout.contains("peak RSS"), "\(run)")
        #expect(run.stderr.contains("not trusted"), "\(run)")
    }

    @Test("bench shares evaluate's input errors and refuses zero iterations")
    func benchBadInput() async throws {
        let f = try await fixture()
        let badMode = try await f.run(["bench", "--chain", f.chainPEM, "--mode", "sometimes", "--iterations", "1"])
        #expect(badMode.status == 2, "\(badMode)")
        #expect(badMode.stderr.contains("--mode: unknown mode \"sometimes\""), "\(badMode)")
        let zero = try await f.run(["bench", "--chain", f.chainPEM, "--iterations", "0"])
        #expect(zero.status == 2, "\(zero)")
        #expect(zero.stderr.contains("--iterations"), "\(zero)")
    }

    /// The handshake benches' JSON: exactly the three rates, each a positive number, and the path-building counts.
    static func expectThreeRates(_ run: CLIRun) throws {
        let object = try jsonObject(run)
        #expect(Set(object.keys) == ["handshakesPerSecond", "baselineHandshakesPerSecond", "unverifiedHandshakesPerSecond", "pathBuilding"], "\(run)")
        _ = try Self.pathBuilding(object, run)
        for (key, value) in object where key != "pathBuilding" {
            let number = try #require(value as? Double, "\(key): \(run)")
            #expect(number > 0, "\(key): \(run)")
        }
    }

    @Test("bench handshake --json emits exactly the three keys")
    func handshakeJSON() async throws {
        let f = try await fixture()
        let run = try await f.run(["bench", "handshake", "--connections", "4", "--concurrency", "2", "--json"])
        #expect(run.status == 0, "\(run)")
        try Self.expectThreeRates(run)
    }

    @Test("bench handshake --leaves: the server rotates distinct leaves under one intermediate, the same three keys; --leaves 0 is refused")
    func rotatingLeavesJSON() async throws {
        let f = try await fixture()
        let run = try await f.run(["bench", "handshake", "--leaves", "3", "--connections", "6", "--concurrency", "2", "--rounds", "1", "--json"])
        #expect(run.status == 0, "\(run)")
        try Self.expectThreeRates(run)
        let zero = try await f.run(["bench", "handshake", "--leaves", "0"])
        #expect(zero.status == 2 && zero.stderr.contains("--leaves"), "\(zero)")
    }

    @Test("bench handshake --server: three mutual-TLS servers fed by distinct client certificates, the same three keys, with and without --cache; client-bench options are refused")
    func serverHandshakeJSON() async throws {
        let f = try await fixture()
        for cache in [[], ["--cache"]] {
            let run = try await f.run(["bench", "handshake", "--server", "--clients", "5", "--connections", "6", "--concurrency", "2", "--rounds", "1", "--json"] + cache)
            #expect(run.status == 0, "\(run)")
            try Self.expectThreeRates(run)
        }
        let leaves = try await f.run(["bench", "handshake", "--server", "--leaves", "3"])
        #expect(leaves.status == 2 && leaves.stderr.contains("--leaves applies to the client bench"), "\(leaves)")
        let resume = try await f.run(["bench", "handshake", "--resume"])
        #expect(resume.status == 2 && resume.stderr.contains("--resume applies to the mTLS server bench"), "\(resume)")
        let zero = try await f.run(["bench", "handshake", "--server", "--clients", "0"])
        #expect(zero.status == 2 && zero.stderr.contains("--clients"), "\(zero)")
    }

    @Test("bench handshake --server --resume: openssl s_time resumes TLS 1.2 sessions against the three servers, the same three keys", .enabled(if: CLITests.opensslAvailable))
    func resumedServerHandshakeJSON() async throws {
        let f = try await fixture()
        let run = try await f.run(["bench", "handshake", "--server", "--resume", "--cache", "--clients", "1", "--seconds", "1", "--rounds", "1", "--json"])
        #expect(run.status == 0, "\(run)")
        try Self.expectThreeRates(run)
    }

    @Test("bench pinset --json: the apply times, the unchanged refresh's requests (the root probe and timestamp.json), memory figures (shape and request count only, never timing)")
    func pinsetJSON() async throws {
        let f = try await fixture()
        let run = try await f.run(["bench", "pinset", "--hosts", "50", "--applies", "2", "--refreshes", "20", "--json"])
        #expect(run.status == 0, "\(run)")
        let object = try jsonObject(run)
        #expect(Set(object.keys) == ["hosts", "configurationBytes", "apply", "unchanged", "memory", "load", "lookup"], "\(run)")
        #expect(object["hosts"] as? Int == 50)
        let apply = try #require(object["apply"] as? [String: Any], "\(run)")
        #expect((apply["milliseconds"] as? [Double])?.count == 2 && apply["parseMedianMilliseconds"] is Double, "\(apply)")
        let unchanged = try #require(object["unchanged"] as? [String: Any], "\(run)")
        #expect(unchanged["requests"] as? [String] == ["/metadata/2.root.json", "/metadata/timestamp.json"], "\(unchanged)")
        let memory = try #require(object["memory"] as? [String: Any], "\(run)")
        #expect(memory["refreshes"] as? Int == 20 && (memory["rssSamplesBytes"] as? [Int])?.count == 10 && (memory["rssEndBytes"] as? Int ?? 0) > 0, "\(memory)")
        // Two requests per refresh with nothing new, counted by the server; malloc's bytes in use read at each sample.
        #expect(memory["requests"] as? Int == 40, "\(memory)")
        #expect((memory["heapInUseSamplesBytes"] as? [Int])?.count == 10 && (memory["heapInUseEndBytes"] as? Int ?? 0) > 0, "\(memory)")
        // The control that keeps every path requested again: the same run otherwise.
        let control = try await f.run(["bench", "pinset", "--hosts", "5", "--applies", "1", "--refreshes", "10", "--keep-request-paths", "--json"])
        #expect(control.status == 0, "\(control)")
        #expect((try jsonObject(control)["memory"] as? [String: Any])?["requests"] as? Int == 20, "\(control)")
        let zero = try await f.run(["bench", "pinset", "--hosts", "0"])
        #expect(zero.status == 2 && zero.stderr.contains("--hosts"), "\(zero)")
    }

    @Test("bench revocation --json: the CRL size, both evaluation rates, the added time and the reading figures (shape only, never timing)")
    func revocationJSON() async throws {
        let f = try await fixture()
        let run = try await f.run(["bench", "revocation", "--entries", "2000", "--rounds", "1", "--iterations", "20", "--json"])
        #expect(run.status == 0, "\(run)")
        let object = try jsonObject(run)
        #expect(
            Set(object.keys) == [
                "entries", "crlBytes", "evaluationsPerSecond", "evaluationsPerSecondWithCRL", "addedPercent", "parseMilliseconds",
                "opensslCRLMilliseconds", "opensslStartMilliseconds", "rounds",
            ], "\(run)")
        #expect(object["entries"] as? Int == 2000)
        #expect((object["crlBytes"] as? Int ?? 0) > 2000 * 20, "\(run)")
        #expect((object["evaluationsPerSecond"] as? Double ?? 0) > 0 && (object["evaluationsPerSecondWithCRL"] as? Double ?? 0) > 0, "\(run)")
        let zero = try await f.run(["bench", "revocation", "--entries", "0"])
        #expect(zero.status == 2 && zero.stderr.contains("--entries"), "\(zero)")
    }

    @Test("limbo gives identical per-case results with --cache and without")
    func limboCacheEquivalence() async throws {
        let f = try await fixture()
        let limbo = try PinningBinary.located.get().deletingLastPathComponent().appendingPathComponent("limbo")
        let suite = ["/work/shared/x509-limbo/limbo.json", "../shared/x509-limbo/limbo.json"].first {
            FileManager.default.fileExists(atPath: $0)
        }
        guard FileManager.default.isExecutableFile(atPath: limbo.path), let suite else {
            // The suite is not checked in; without it there is nothing to compare.
            return
        }
        // A slice of the suite keeps the debug-build test short; scripts/limbo-cache-check.sh runs it all.
        let filter = ProcessInfo.processInfo.environment["LIMBO_CACHE_FILTER"] ?? "rfc5280::"
        let plain = f.directory.path("limbo-plain.tsv")
        let cached = f.directory.path("limbo-cached.tsv")
        for (output, extra) in [(plain, [String]()), (cached, ["--cache"])] {
            let run = try await TestTools.run(limbo.path, [suite, "--id", filter, "--results", output] + extra, timeout: 600)
            #expect(run.exited, "\(run)")
        }
        let plainLines = try String(contentsOfFile: plain, encoding: .utf8)
        let cachedLines = try String(contentsOfFile: cached, encoding: .utf8)
        #expect(plainLines.split(separator: "\n").count > 10)
        #expect(plainLines == cachedLines)
        #expect(!cachedLines.contains("CACHE-MISMATCH"))
    }

    @Test("bench proxy: the JSON report has every path's figures (shape only, a few hundred requests; never timing)")
    func proxyBench() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-bench-proxy-test")
        defer { directory.remove() }
        let run = try await Executable.pinning(["bench", "proxy", "--requests", "400", "--concurrency", "2", "--rounds", "1", "--json"], in: directory)
        #expect(run.status == 0, "\(run)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run)")
        for key in ["direct", "tunnel", "forwardProxy"] {
            let path = try #require(object[key] as? [String: Any], "\(key): \(run)")
            #expect((path["requestsPerSecond"] as? Double ?? 0) > 0, "\(key): \(run)")
            #expect(path["p50Milliseconds"] is Double && path["p99Milliseconds"] is Double && path["addedP50Milliseconds"] is Double && path["addedP99Milliseconds"] is Double)
        }
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/stunnel4") {
            #expect(object["stunnel"] is [String: Any] && object["tunnelToStunnelThroughput"] is Double, "\(run)")
        }
    }
}
