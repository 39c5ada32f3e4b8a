import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

/// `pinning check --pinset` and `pinning proxy --pinset` (issue 29 item 4), the built binary against a TUF repository
/// generated and served over plain http on 127.0.0.1 by the test, and an upstream whose key the test rotates.
@Suite("pinning check and proxy --pinset: following a pin set", .serialized, .enabled(if: curlAvailable))
struct PinSetFollowCLITests {
    static func eventually(within seconds: Double = 60, _ condition: () async throws -> Bool) async rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return try await condition()
    }

    @Test("usage: --pinset with --config, without its root or directory, a stray --pinset-* option, a bad URL: exit 2 naming the option")
    func usage() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-cli-usage")
        defer { directory.remove() }
        let config = try directory.write("pinning.json", #"{"version": 1, "domains": {}}"#)
        let url = "https://api.test/"
        let base = ["--pinset", "http://127.0.0.1:1/metadata/", "--pinset-root", directory.path("root.json"), "--pinset-dir", directory.path("state")]
        let cases: [([String], String)] = [
            (["check", url, "--config", config] + base, "--pinset cannot be combined with --config"),
            (["check", url, "--pinset", "http://127.0.0.1:1/metadata/", "--pinset-dir", directory.path("s")], "--pinset needs --pinset-root"),
            (["check", url, "--pinset", "http://127.0.0.1:1/metadata/", "--pinset-root", directory.path("r")], "--pinset needs --pinset-dir"),
            (["check", url, "--pinset-root", directory.path("r")], "--pinset-root needs --pinset URL"),
            (["check", url, "--pinset", "ftp://x/metadata/", "--pinset-root", "r", "--pinset-dir", "d"], "--pinset ftp://x/metadata/: not an http or https URL"),
            (["check", url, "--pin-sha256", "sha256/" + Data(count: 32).base64EncodedString()] + base, "--pin-sha256 cannot be combined with --pinset"),
            (["check", url, "--pinset-target", "../x.json"] + base, "--pinset-target ../x.json: not a relative path"),
            (["proxy", "--config", config] + base, "--pinset cannot be combined with --config"),
            (["proxy", "--listen", "127.0.0.1:0"], "give --config FILE, or --pinset URL"),
            (["proxy", "--config", config, "--pinset-refresh", "5"], "--pinset-refresh needs --pinset"),
            (["proxy", "--pinset-refresh", "0"] + base, "--pinset-refresh"),
            (["check", url] + base, "--pinset-root \(directory.path("root.json")): no such file or directory"),
        ]
        for (arguments, words) in cases {
            let run = try await Executable.pinning(arguments, in: directory)
            #expect(run.status == 2, "\(arguments): \(run)")
            #expect(run.stderr.contains(words), "\(arguments): \(run)")
            // A numeric option's range refusal is argument-parser's, with its usage lines, as for every numeric option.
            if !arguments.contains("--pinset-refresh") {
                #expect(run.stderr.split(separator: "\n").count == 1, "one line: \(run)")
            }
        }
    }

    @Test("check --pinset: judged by the pin set (JSON pinset object); the last good set is used when the repository is gone; with none it refuses to connect, exit 3")
    func check() async throws {
        let keys = try PinSetRotationKeys(rootName: "Pin Set CLI Root")
        let directory = try TemporaryDirectory(prefix: "pinset-cli-check")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        try repository.publish(keys.configuration([keys.a, keys.b]), files: ["root.pem": keys.anchor])
        let root = try directory.write("root.json", String(decoding: repository.bootstrapRoot, as: UTF8.self))
        let server = try await RotatingHTTPSServer(identity: try keys.a.tlsIdentity())
        defer { Task { await server.stop() } }
        let url = "https://api.test:\(server.port)/hello"
        let arguments = [
            "check", url, "--resolve", "api.test:\(server.port):127.0.0.1", "--pinset", repository.metadataURL.absoluteString, "--pinset-root", root,
            "--pinset-dir", directory.path("state"), "--json",
        ]
        let run = try await Executable.pinning(arguments, in: directory)
        #expect(run.status == 0, "\(run)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run)")
        let pinset = try #require(object["pinset"] as? [String: Any], "\(run.stdout)")
        #expect(pinset["version"] as? Int == 2 && pinset["targetName"] as? String == "pinning.json" && pinset["stale"] as? Bool == false)
        #expect((pinset["sha256"] as? String)?.count == 64 && pinset["refreshed"] is String, "\(pinset)")
        #expect((object["evaluation"] as? [String: Any])?["trusted"] as? Bool == true, "\(run.stdout)")

        // Pin set 3 withdraws key A: the same server is refused (exit 1), judged by version 3.
        try repository.publish(keys.configuration([keys.b, keys.c]), files: ["root.pem": keys.anchor])
        let refused = try await Executable.pinning(arguments, in: directory)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stdout.contains("\"version\" : 3") || refused.stdout.contains("\"version\":3"), "\(refused.stdout)")

        // The repository gone: the last good set (version 3) still judges, with a warning.
        repository.server.stop()
        let offline = try await Executable.pinning(arguments, in: directory)
        #expect(offline.status == 1, "still refused under the last good pin set: \(offline)")
        #expect(offline.stderr.contains("the pin set was not refreshed; version 3 stays enforced"), "\(offline)")

        // No last good pin set and no repository: no connection at all.
        let fresh = arguments.map { $0 == directory.path("state") ? directory.path("fresh") : $0 }
        let none = try await Executable.pinning(fresh, in: directory)
        #expect(none.status == 3, "\(none)")
        #expect(none.stdout.isEmpty, "\(none)")
        #expect(none.stderr.contains("refusing to connect: no pin set to judge by (none kept in"), "\(none)")

        // The kept pin set edited on this machine: refused at start, and the refusal says so rather than "none kept".
        let kept = FileManager.default.enumerator(atPath: directory.path("state"))?.allObjects.compactMap { $0 as? String }.filter { $0.hasSuffix("/pinning.json") } ?? []
        #expect(!kept.isEmpty, "the kept pin set")
        for edited in kept {
            try Data("{}".utf8).write(to: URL(fileURLWithPath: directory.path("state") + "/" + edited))
        }
        let tampered = try await Executable.pinning(arguments, in: directory)
        #expect(tampered.status == 3, "\(tampered)")
        #expect(tampered.stderr.contains("(the one kept in \(directory.path("state")) is not used: "), "\(tampered)")
        #expect(tampered.stderr.contains("pinning.json is missing or not the file that was verified"), "\(tampered)")
        #expect(!tampered.stderr.contains("none kept"), "\(tampered)")
    }

    @Test(
        "proxy --pinset: the upstream rotated to its backup key and a new pin set published; the proxy follows on its schedule without a restart while a long request completes; /status and /metrics show the pin set"
    )
    func proxyRotation() async throws {
        let keys = try PinSetRotationKeys(rootName: "Pin Set CLI Root")
        let directory = try TemporaryDirectory(prefix: "pinset-cli-proxy")
        defer { directory.remove() }
        let repository = try PinSetTestRepository()
        defer { repository.remove() }
        try repository.publish(keys.configuration([keys.a, keys.b]), files: ["root.pem": keys.anchor])
        let root = try directory.write("root.json", String(decoding: repository.bootstrapRoot, as: UTF8.self))
        let server = try await RotatingHTTPSServer(identity: try keys.a.tlsIdentity())
        defer { Task { await server.stop() } }
        let stale = try await RotatingHTTPSServer(identity: try keys.a.tlsIdentity())
        defer { Task { await stale.stop() } }

        let proxy = try Subprocess(
            [
                "proxy", "--pinset", repository.metadataURL.absoluteString, "--pinset-root", root, "--pinset-dir", directory.path("state"),
                "--pinset-refresh", "0.3", "--listen", "127.0.0.1:0", "--ca-dir", directory.path("ca"),
                "--resolve", "api.test:\(server.port):127.0.0.1", "--resolve", "api.test:\(stale.port):127.0.0.1",
            ],
            in: directory)
        defer { proxy.kill() }
        let lines = try await ProxyFixture.startupLines(proxy, count: 2)
        let port = try #require(Int(lines.first?.split(separator: ":").last ?? ""), "\(lines) \(proxy.stderr)")
        let ca = directory.path("ca/ca.pem")
        @Sendable func viaProxy(_ url: String) async throws -> TestTools.ProcessResult {
            try await TestTools.run(
                curlPath, ["-sS", "--max-time", "120", "-D", "-", "-x", "http://127.0.0.1:\(port)", "--cacert", ca, url], in: directory,
                environment: ["NO_PROXY": "", "no_proxy": ""], timeout: 150)
        }
        @Sendable func status() async throws -> [String: Any] {
            let result = try await TestTools.run(curlPath, ["-sS", "--max-time", "30", "http://127.0.0.1:\(port)/status"], in: directory, timeout: 60)
            return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] ?? [:]
        }

        let before = try await viaProxy("https://api.test:\(server.port)/hello")
        #expect(before.stdout.contains("200") && before.stdout.contains("hello /hello"), "\(before) \(proxy.stderr)")
        let long = Task { try await viaProxy("https://api.test:\(server.port)/long") }
        #expect(await Self.eventually { server.longRequestsStarted == 1 })

        try server.rotate(to: try keys.b.tlsIdentity())
        let timestampOfVersion2 = try #require(repository.read("metadata/timestamp.json"))
        try repository.publish(keys.configuration([keys.b, keys.c]), files: ["root.pem": keys.anchor])
        let followed = try await Self.eventually {
            ((try await status())["pinset"] as? [String: Any])?["version"] as? Int == 3
        }
        #expect(followed, "\(proxy.stderr)")
        #expect(proxy.stderr.contains("reload succeeded: pin set version 3, 1 entry"), "\(proxy.stderr)")

        let rotated = try await viaProxy("https://api.test:\(server.port)/hello")
        #expect(rotated.stdout.contains("200") && rotated.stdout.contains("hello /hello"), "\(rotated)")
        let refused = try await viaProxy("https://api.test:\(stale.port)/hello")
        #expect(refused.stdout.contains("502") && refused.stdout.lowercased().contains("x-pinning-failure: pinmismatch"), "key A is withdrawn: \(refused)")

        server.releaseLongRequests()
        let finished = try await long.value
        #expect(finished.stdout.contains("200") && finished.stdout.contains("done /long"), "the request started before completes: \(finished)")
        #expect(proxy.process.isRunning, "no restart")

        let pinset = try #require((try await status())["pinset"] as? [String: Any])
        #expect(pinset["stale"] as? Bool == false && pinset["lastError"] is NSNull && pinset["secondsStale"] as? Int == 0, "\(pinset)")
        let metrics = try await TestTools.run(curlPath, ["-sS", "--max-time", "30", "http://127.0.0.1:\(port)/metrics"], in: directory, timeout: 60)
        #expect(metrics.stdout.contains("pinning_proxy_pinset_version 3"), "\(metrics.stdout)")
        #expect(metrics.stdout.contains("pinning_proxy_pinset_seconds_stale 0"), "\(metrics.stdout)")

        // A refused update changes nothing and is one line; SIGHUP refreshes at once.
        try repository.overwrite("metadata/timestamp.json", timestampOfVersion2)
        kill(proxy.process.processIdentifier, SIGHUP)
        #expect(await Self.eventually { proxy.stderr.contains("pin set refresh refused, version 3 stays enforced: timestamp: version 2 is older") }, "\(proxy.stderr)")
        let stillRotated = try await viaProxy("https://api.test:\(server.port)/hello")
        #expect(stillRotated.stdout.contains("200"), "\(stillRotated)")
        let failing = try #require((try await status())["pinset"] as? [String: Any])
        #expect((failing["lastError"] as? String)?.contains("older than the trusted version") == true, "\(failing)")
    }
}
