import Foundation
import PinningTestSupport
import Testing

/// `pinning bench` interrupted (SIGINT, as Ctrl-C sends it, or SIGTERM) while its children run: it once died by
/// the signal's default action, leaving `pinning-bench-proxy-*` in the temporary directory and the child proxy and
/// stunnel running. Now it stops them, removes its directory and exits 130 or 143.
@Suite("pinning bench: interrupted, it leaves no child and no directory", .serialized)
struct BenchInterruptCLITests {
    /// The live (not zombie) processes whose parent is `pid`, from /proc.
    static func children(of pid: Int32) -> [Int32] {
        let entries: [String]
        do {
            entries = try FileManager.default.contentsOfDirectory(atPath: "/proc")
        } catch {
            return []
        }
        return entries.compactMap(Int32.init).filter { candidate in
            guard let (parent, state) = Self.status(candidate) else { return false }
            return parent == pid && state != "Z"
        }
    }

    /// A process's parent and state letter, nil when it is gone. /proc/PID/stat: `pid (comm) state ppid …`, the
    /// command name possibly holding spaces and parentheses, so the fields are read after the last `)`.
    static func status(_ pid: Int32) -> (parent: Int32, state: String)? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/stat") else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 2, let parent = Int32(fields[1]) else { return nil }
        return (parent, String(fields[0]))
    }

    static func alive(_ pid: Int32) -> Bool {
        guard let (_, state) = Self.status(pid) else { return false }
        return state != "Z"
    }

    @Test("bench proxy: SIGINT exits 130, SIGTERM 143; its directory removed, the proxy and stunnel stopped", arguments: [SIGINT, SIGTERM])
    func interrupted(signal: Int32) async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-bench-interrupt")
        defer { directory.remove() }
        // The bench's own temporary directory, to see what it leaves.
        let scratch = directory.path("tmp")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        let bench = try Subprocess(
            ["bench", "proxy", "--requests", "10000000", "--concurrency", "2", "--rounds", "1"], in: directory, environment: ["TMPDIR": scratch + "/"])
        var seen: Set<Int32> = []
        defer {
            bench.kill()
            // On the old code the children outlive the bench: stop them here, they are this test's.
            for pid in seen where Self.alive(pid) { kill(pid, SIGKILL) }
        }
        func benchDirectories() -> [String] {
            // No listing (the directory is gone): nothing left in it.
            ((try? FileManager.default.contentsOfDirectory(atPath: scratch)) ?? []).filter { $0.hasPrefix("pinning-bench-proxy-") }
        }
        // Up once the proxy wrote its CA into the bench's directory and every child runs (stunnel too when there).
        let expected = FileManager.default.isExecutableFile(atPath: "/usr/bin/stunnel4") ? 2 : 1
        // Generous: under the whole suite on 2 cores (load 20-30) the bench's set-up once took over 120 s.
        let deadline = Date().addingTimeInterval(400)
        var ready = false
        var children: [Int32] = []
        var made: [String] = []
        while !ready && Date() < deadline && bench.process.isRunning {
            children = Self.children(of: bench.process.processIdentifier)
            seen.formUnion(children)
            made = benchDirectories()
            ready = children.count >= expected && made.count == 1 && FileManager.default.fileExists(atPath: scratch + "/" + made[0] + "/ca/ca.pem")
            if !ready { try await Task.sleep(for: .milliseconds(50)) }
        }
        try #require(
            ready,
            "the bench did not start its children: running \(bench.process.isRunning), children \(children), directories \(made), stderr \(bench.stderr)")
        // Measuring, with requests in flight.
        try await Task.sleep(for: .milliseconds(300))
        seen.formUnion(Self.children(of: bench.process.processIdentifier))
        #expect(seen.count >= expected, "\(seen)")

        kill(bench.process.processIdentifier, signal)
        let status = await bench.wait(seconds: 30)
        #expect(status == 128 + signal, "status \(status.map(String.init) ?? "none (killed)"), reason \(bench.process.terminationReason.rawValue): \(bench.stderr)")
        #expect(bench.process.terminationReason == .exit, "ended by its handler, not by the signal")
        #expect(bench.stderr.contains("interrupted"), "\(bench.stderr)")
        #expect(benchDirectories().isEmpty, "left: \(benchDirectories())")
        // A child killed as the bench exits may take a moment to be reaped by init.
        let reaped = Date().addingTimeInterval(5)
        while seen.contains(where: Self.alive) && Date() < reaped { try await Task.sleep(for: .milliseconds(20)) }
        #expect(seen.filter(Self.alive).isEmpty, "children still running: \(seen.filter(Self.alive))")
    }
}
