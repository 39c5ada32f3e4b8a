import Foundation
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

/// A Python with python-tuf (PyPI `tuf`) and securesystemslib with its crypto extra: `PINNING_TUF_PYTHON`, the
/// virtual environment scripts/tuf-conformance.sh makes, or the system's python3 (where `.ci/run` installs them).
enum PythonTUF {
    static let required = ProcessInfo.processInfo.environment["PINNING_REQUIRE_PYTHON_TUF"] == "1"

    static let path: String? = {
        var candidates: [String] = []
        if let given = ProcessInfo.processInfo.environment["PINNING_TUF_PYTHON"] { candidates.append(given) }
        // $HOME, as scripts/tuf-conformance.sh reads it.
        candidates.append((ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory()) + "/.cache/swift-pinning/tuf-conformance-venv/bin/python")
        candidates.append("/usr/bin/python3")
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: candidate)
            process.arguments = ["-c", "import tuf.ngclient, tuf.api.metadata, securesystemslib.signer, cryptography"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            // Once per test run, before any test of the suite starts.
            guard (try? process.run()) != nil else { continue }
            process.waitUntilExit()
            if process.terminationStatus == 0 { return candidate }
        }
        return nil
    }()

    /// Run the interop tests when python-tuf is installed, and always when CI requires them (they then fail
    /// without it rather than skip).
    static let enabled = path != nil || required

    static let skipReason: Comment = "python-tuf is not installed: pip install tuf 'securesystemslib[crypto]' (or set PINNING_TUF_PYTHON to a python that has it)"

    static func python() throws -> String {
        try #require(Self.path, "PINNING_REQUIRE_PYTHON_TUF=1 but no python with tuf and securesystemslib was found")
    }

    /// python-tuf's ngclient.Updater, against the repository directory served by Python's http.server on
    /// 127.0.0.1: refresh, find the target, download it, compare it with the expected bytes. The client's metadata
    /// directory persists between runs (the first run bootstraps from the repository's 1.root.json).
    static let ngclientScript = #"""
        import functools, http.server, json, os, sys, threading
        from tuf.ngclient import Updater

        repo, metadata_dir, target_dir, target, expected = sys.argv[1:6]

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=repo))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = "http://127.0.0.1:%d" % server.server_address[1]
        bootstrap = None
        if not os.path.exists(os.path.join(metadata_dir, "root.json")):
            with open(os.path.join(repo, "metadata", "1.root.json"), "rb") as f:
                bootstrap = f.read()
        updater = Updater(metadata_dir=metadata_dir, metadata_base_url=base + "/metadata/", target_dir=target_dir,
                          target_base_url=base + "/targets/", bootstrap=bootstrap)
        updater.refresh()
        info = updater.get_targetinfo(target)
        if info is None:
            sys.exit("ngclient: %s not found" % target)
        path = updater.download_target(info)
        with open(path, "rb") as f, open(expected, "rb") as g:
            identical = f.read() == g.read()
        trusted = updater._trusted_set
        print(json.dumps({"root": trusted.root.version, "timestamp": trusted.timestamp.version, "snapshot": trusted.snapshot.version,
                          "targets": trusted.targets.version, "identical": identical, "custom": info.custom}))
        server.shutdown()
        """#

    /// A repository made with python-tuf's Metadata API (the way its repository examples build one): consistent
    /// snapshots, root ed25519, targets ECDSA P-256, snapshot RSA-PSS, timestamp ed25519, one target, then a root
    /// rotation to a new ECDSA root key signed by the old and the new.
    static let repositoryScript = #"""
        import hashlib, os, sys
        from datetime import datetime, timedelta, timezone
        from securesystemslib.signer import CryptoSigner
        from tuf.api.metadata import Metadata, MetaFile, Root, Snapshot, TargetFile, Targets, Timestamp
        from tuf.api.serialization.json import JSONSerializer

        out, target_name, target_file = sys.argv[1:4]
        os.makedirs(os.path.join(out, "metadata"))
        os.makedirs(os.path.join(out, "targets"))
        signers = {"root": CryptoSigner.generate_ed25519(), "targets": CryptoSigner.generate_ecdsa(),
                   "snapshot": CryptoSigner.generate_rsa(), "timestamp": CryptoSigner.generate_ed25519()}
        expires = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(days=7)

        def write(metadata, name, signers):
            metadata.signatures.clear()
            for signer in signers:
                metadata.sign(signer, append=True)
            data = metadata.to_bytes(JSONSerializer(compact=False))
            with open(os.path.join(out, "metadata", name), "wb") as f:
                f.write(data)
            return data

        def meta(version, data):
            return MetaFile(version=version, length=len(data), hashes={"sha256": hashlib.sha256(data).hexdigest()})

        root = Metadata(Root(expires=expires, consistent_snapshot=True))
        for role, signer in signers.items():
            root.signed.add_key(signer.public_key, role)
        write(root, "1.root.json", [signers["root"]])

        with open(target_file, "rb") as f:
            content = f.read()
        info = TargetFile.from_data(target_name, content, ["sha256"])
        with open(os.path.join(out, "targets", info.hashes["sha256"] + "." + target_name), "wb") as f:
            f.write(content)
        targets = Metadata(Targets(expires=expires))
        targets.signed.targets[target_name] = info
        targets_bytes = write(targets, "1.targets.json", [signers["targets"]])
        snapshot = Metadata(Snapshot(expires=expires))
        snapshot.signed.meta["targets.json"] = meta(1, targets_bytes)
        snapshot_bytes = write(snapshot, "1.snapshot.json", [signers["snapshot"]])
        timestamp = Metadata(Timestamp(expires=expires))
        timestamp.signed.snapshot_meta = meta(1, snapshot_bytes)
        write(timestamp, "timestamp.json", [signers["timestamp"]])

        new_root = CryptoSigner.generate_ecdsa()
        root.signed.revoke_key(signers["root"].public_key.keyid, "root")
        root.signed.add_key(new_root.public_key, "root")
        root.signed.version = 2
        write(root, "2.root.json", [signers["root"], new_root])
        print(new_root.public_key.keyid)
        """#
}

@Suite("TUF interop with python-tuf", .enabled(if: PythonTUF.enabled, PythonTUF.skipReason))
struct TUFPythonInteropTests {
    static func run(_ python: String, _ script: String, _ arguments: [String], in directory: TemporaryDirectory) async throws -> TestTools.ProcessResult {
        let path = try directory.write("script-\(UUID().uuidString).py", script)
        return try await TestTools.run(python, [path] + arguments, in: directory, timeout: 120)
    }

    @Test("python-tuf's ngclient updates from a repository we published (every key type) and downloads the pin set byte for byte, then follows a new version and a root rotation")
    func ngclientReadsOurRepository() async throws {
        let python = try PythonTUF.python()
        let directory = try TemporaryDirectory(prefix: "pinset-interop")
        defer { directory.remove() }
        func key(_ type: TUFSigningKey.KeyType, _ name: String) throws -> TUFSigningKey {
            try TUFSigningKey.generate(type).write(toNewFile: directory.path(name))
            return try TUFSigningKey.load(file: directory.path(name))
        }
        let root = try key(.ed25519, "root.pem")
        let targetsKey = try key(.ecdsaP256, "targets.pem")
        let snapshotKey = try key(.rsa, "snapshot.pem")
        let timestampKey = try key(.ed25519, "timestamp.pem")
        let repo = directory.path("repo")
        let writer = try TUFRepositoryWriter.initialize(directory: repo, rootKeys: [root], targetsKey: targetsKey, snapshotKey: snapshotKey, timestampKey: timestampKey)
        let first = try directory.write(
            "pinning-1.json",
            #"{"version": 1, "domains": {"api.example.com": {"pins": ["sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "sha256/BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA="]}}}"#)
        try writer.publishPinSet(
            Array(FileManager.default.contents(atPath: first)!), name: "pinning.json", files: [:], targetsKey: targetsKey, snapshotKey: snapshotKey, timestampKey: timestampKey)
        let metadata = directory.path("client-metadata")
        let targets = directory.path("client-targets")
        try FileManager.default.createDirectory(atPath: metadata, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: targets, withIntermediateDirectories: true)

        var run = try await Self.run(python, PythonTUF.ngclientScript, [repo, metadata, targets, "pinning.json", first], in: directory)
        try #require(run.status == 0, "\(run)")
        var report = try #require(try TUFJSON.parse(Array(run.stdoutData)).objectValue, "\(run)")
        #expect(report["identical"] == .bool(true), "\(run)")
        #expect(report["root"]?.intValue == 1 && report["targets"]?.intValue == 2 && report["timestamp"]?.intValue == 2, "\(run)")
        #expect(report["custom"]?.objectValue?["pinset"] != nil, "\(run)")

        // A new pin set and a new root (threshold 2 of an RSA and a P-256 key): the same client follows both.
        let second = try directory.write("pinning-2.json", #"{"version": 1, "unlistedHosts": "reject", "domains": {}}"#)
        try writer.publishPinSet(
            Array(FileManager.default.contents(atPath: second)!), name: "pinning.json", files: [:], targetsKey: targetsKey, snapshotKey: snapshotKey, timestampKey: timestampKey)
        try writer.rotateRoot(oldKeys: [root], newKeys: [try key(.rsa, "root2.pem"), try key(.ecdsaP256, "root3.pem")], threshold: 2)
        run = try await Self.run(python, PythonTUF.ngclientScript, [repo, metadata, targets, "pinning.json", second], in: directory)
        try #require(run.status == 0, "\(run)")
        report = try #require(try TUFJSON.parse(Array(run.stdoutData)).objectValue, "\(run)")
        #expect(report["identical"] == .bool(true), "\(run)")
        #expect(report["root"]?.intValue == 2 && report["targets"]?.intValue == 3 && report["timestamp"]?.intValue == 3, "\(run)")
    }

    @Test("our TUFUpdater reads a repository python-tuf's Metadata API made (ed25519, ECDSA, RSA-PSS keys), walks its root rotation and downloads the target")
    func ourClientReadsPythonRepository() async throws {
        let python = try PythonTUF.python()
        let directory = try TemporaryDirectory(prefix: "pinset-interop")
        defer { directory.remove() }
        let content = #"{"version": 1, "domains": {}}"# + "\n"
        let source = try directory.write("pinning.json", content)
        let repo = directory.path("python-repo")
        let run = try await Self.run(python, PythonTUF.repositoryScript, [repo, "pinning.json", source], in: directory)
        try #require(run.status == 0, "\(run)")
        let newRootKeyID = run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let rootBytes = try #require(FileManager.default.contents(atPath: repo + "/metadata/1.root.json"))
        let client = try DirectoryClient(repository: repo, trustedRoot: Array(rootBytes))
        defer { client.remove() }
        let (trusted, bytes) = try await client.update("pinning.json")
        #expect(bytes == Array(content.utf8))
        #expect(trusted.root.version == 2)
        #expect(trusted.root.roleKeys("root")?.keyIDs == [newRootKeyID])
        #expect(Set(trusted.root.keys.values.map(\.keyType)) == ["ed25519", "ecdsa", "rsa"])
        // Our writer's status reads the python-made repository too.
        let status = try TUFRepositoryWriter(directory: repo).status()
        #expect(status.clientRefusal == nil, "\(status.clientRefusal ?? "")")
        #expect(status.roles.allSatisfy { $0.meetsThreshold })
    }
}
