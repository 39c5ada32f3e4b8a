import Foundation
import Pinning
import PinningTestSupport
import Testing

/// The whole story with the real tools only (issue 29): keys made by `pinning pinset keygen`, a repository made by
/// `init` and published to by `publish` (a configuration with an anchor in a subdirectory), served as static files
/// on 127.0.0.1; `pinning serve` as the upstream; `pinning check --pinset` and `pinning proxy --pinset` following.
/// The upstream's key is then replaced by its backup pin's, the root key rotated, a new set published, and the
/// running proxy follows without a restart.
@Suite("pinning pinset end to end: keygen, init, publish, serve; check and proxy follow (runs the built binary)", .serialized, .enabled(if: curlAvailable))
struct PinSetEndToEndCLITests {
    @Test("publish → check trusted (JSON pinset version); server key rotated to its backup, root key rotated, new set published → the proxy follows")
    func wholeStory() async throws {
        let directory = try TemporaryDirectory(prefix: "pinset-e2e")
        defer { directory.remove() }
        func pinning(_ arguments: [String]) async throws -> CLIRun {
            try await Executable.pinning(arguments, in: directory)
        }

        // Keys, one per role, and a second root key for the rotation.
        try FileManager.default.createDirectory(atPath: directory.path("keys"), withIntermediateDirectories: true)
        let types = [("root", "ed25519"), ("root2", "ecdsa-p256"), ("targets", "ecdsa-p256"), ("snapshot", "ed25519"), ("timestamp", "ed25519")]
        for (role, type) in types {
            let made = try await pinning(["pinset", "keygen", "--type", type, "--out", directory.path("keys/\(role).pem")])
            try #require(made.status == 0, "\(made)")
        }
        let online = [
            "--targets-key", directory.path("keys/targets.pem"), "--snapshot-key", directory.path("keys/snapshot.pem"), "--timestamp-key",
            directory.path("keys/timestamp.pem"),
        ]
        let repo = directory.path("repo")
        let initialized = try await pinning(["pinset", "init", repo, "--root-key", directory.path("keys/root.pem")] + online)
        try #require(initialized.status == 0, "\(initialized)")

        // The upstream's identities: A in service, B its backup, C the next backup, under one private root.
        let ca = try TestPKI.root("Pin Set E2E Root")
        let a = try TestPKI.leaf("api.test", issuer: ca, dnsNames: ["api.test"])
        let b = try TestPKI.leaf("api.test", issuer: ca, dnsNames: ["api.test"])
        let c = try TestPKI.leaf("api.test", issuer: ca, dnsNames: ["api.test"])
        try directory.write("conf/anchors/fleet-root.pem", ca.certificatePEM)
        func writeConfiguration(_ pins: [TestIdentity]) throws -> String {
            let list = pins.map { "\"\(Pin(spkiOf: $0.certificate).description)\"" }.joined(separator: ", ")
            return try directory.write(
                "conf/pinning.json", #"{"version": 1, "domains": {"api.test": {"pins": [\#(list)], "anchors": ["anchors/fleet-root.pem"], "anchorsOnly": true}}}"#)
        }
        let published = try await pinning(["pinset", "publish", repo, try writeConfiguration([a, b])] + online)
        try #require(published.status == 0, "\(published)")
        #expect(published.stdout.contains("with 1 referenced file (anchors/fleet-root.pem)") && published.stdout.contains("targets v2"), "\(published)")

        let files = try LoopbackHTTPServer(statuses: [404])
        defer { files.stop() }
        files.directory = repo
        let metadataURL = files.url("/metadata/").absoluteString

        func serve(_ identity: TestIdentity, _ name: String) async throws -> ServeProcess {
            let cert = try directory.write("\(name).pem", identity.certificatePEM)
            let key = try directory.write("\(name).key", identity.privateKeyPEM)
            return try await ServeProcess(["--cert", cert, "--key", key, "--bind", "127.0.0.1"], in: directory)
        }
        let serverA = try await serve(a, "server-a")
        defer { serverA.stop() }
        // B's deployment, ready before the switch (the proxy is told where both are).
        let serverB = try await serve(b, "server-b")
        defer { serverB.stop() }

        // check --pinset: refreshes once, judges by version 2, reports it.
        let bootstrap = repo + "/metadata/root.json"
        let shipped = try directory.write("shipped-root.json", String(decoding: FileManager.default.contents(atPath: bootstrap) ?? Data(), as: UTF8.self))
        func check(_ port: Int) async throws -> CLIRun {
            try await pinning([
                "check", "https://api.test:\(port)/", "--resolve", "api.test:\(port):127.0.0.1", "--pinset", metadataURL, "--pinset-root", shipped,
                "--pinset-dir", directory.path("check-state"), "--json",
            ])
        }
        let checked = try await check(serverA.port)
        #expect(checked.status == 0, "\(checked)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(checked.stdout.utf8)) as? [String: Any], "\(checked)")
        let pinset = try #require(report["pinset"] as? [String: Any], "\(checked.stdout)")
        #expect(pinset["version"] as? Int == 2 && pinset["targetName"] as? String == "pinning.json" && pinset["stale"] as? Bool == false, "\(pinset)")
        #expect((report["evaluation"] as? [String: Any])?["trusted"] as? Bool == true, "\(checked.stdout)")
        #expect(
            FileManager.default.fileExists(atPath: directory.path("check-state/current.json")),
            "the verified set is kept for the next run")

        // The proxy follows the same repository every half second.
        let proxy = try Subprocess(
            [
                "proxy", "--pinset", metadataURL, "--pinset-root", shipped, "--pinset-dir", directory.path("proxy-state"), "--pinset-refresh", "0.5",
                "--listen", "127.0.0.1:0", "--ca-dir", directory.path("proxy-ca"), "--resolve", "api.test:\(serverA.port):127.0.0.1",
                "--resolve", "api.test:\(serverB.port):127.0.0.1",
            ],
            in: directory)
        defer { proxy.kill() }
        let lines = try await ProxyFixture.startupLines(proxy, count: 2)
        let port = try #require(Int(lines.first?.split(separator: ":").last ?? ""), "\(lines) \(proxy.stderr)")
        func viaProxy(_ url: String) async throws -> TestTools.ProcessResult {
            try await TestTools.run(
                curlPath, ["-sS", "--max-time", "60", "-D", "-", "-x", "http://127.0.0.1:\(port)", "--cacert", directory.path("proxy-ca/ca.pem"), url],
                in: directory, environment: ["NO_PROXY": "", "no_proxy": ""], timeout: 90)
        }
        func proxyVersion() async throws -> Int? {
            let result = try await TestTools.run(curlPath, ["-sS", "--max-time", "30", "http://127.0.0.1:\(port)/status"], in: directory, timeout: 60)
            let status = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            return (status?["pinset"] as? [String: Any])?["version"] as? Int
        }
        #expect(try await proxyVersion() == 2, "\(proxy.stderr)")
        let before = try await viaProxy("https://api.test:\(serverA.port)/before")
        #expect(before.stdout.contains("200") && before.stdout.contains("/before"), "\(before) \(proxy.stderr)")
        let backup = try await viaProxy("https://api.test:\(serverB.port)/backup")
        #expect(backup.stdout.contains("200"), "B is the backup pin of version 2: \(backup)")

        // The service moves to key B (its backup pin); the root key is rotated offline; the set [B, C] published.
        let rotated = try await pinning([
            "pinset", "rotate-root", repo, "--old-key", directory.path("keys/root.pem"), "--new-key", directory.path("keys/root2.pem"),
        ])
        #expect(rotated.status == 0, "\(rotated)")
        let republished = try await pinning(["pinset", "publish", repo, try writeConfiguration([b, c])] + online)
        try #require(republished.status == 0, "\(republished)")
        #expect(republished.stdout.contains("root v2, targets v3"), "\(republished)")

        let followed = try await PinSetFollowCLITests.eventually { try await proxyVersion() == 3 }
        #expect(followed, "\(proxy.stderr)")
        #expect(proxy.stderr.contains("reload succeeded: pin set version 3, 1 entry"), "\(proxy.stderr)")
        #expect(proxy.process.isRunning, "no restart")
        let afterB = try await viaProxy("https://api.test:\(serverB.port)/after")
        #expect(afterB.stdout.contains("200") && afterB.stdout.contains("/after"), "\(afterB)")
        let refusedA = try await viaProxy("https://api.test:\(serverA.port)/after")
        #expect(refusedA.stdout.contains("502") && refusedA.stdout.lowercased().contains("x-pinning-failure: pinmismatch"), "key A is withdrawn: \(refusedA)")

        // check follows too (the root walked from the shipped version 1 to 2): B trusted, A refused, under version 3.
        func version(_ run: CLIRun) -> Int? {
            let object = try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
            return (object?["pinset"] as? [String: Any])?["version"] as? Int
        }
        let checkedB = try await check(serverB.port)
        #expect(checkedB.status == 0 && version(checkedB) == 3, "\(checkedB)")
        let checkedA = try await check(serverA.port)
        #expect(checkedA.status == 1 && version(checkedA) == 3, "\(checkedA)")
    }
}
