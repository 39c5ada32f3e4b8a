import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

// The acceptance sweep's bad-input defects (FIFOs without a writer, special files given to --out, arguments that
// are not UTF-8), through the BUILT binary. Every run is wrapped in coreutils' `timeout -s KILL` (a child of the
// test runner may not act on SIGTERM), so a hang fails the test at once (exit 137) instead of waiting for the
// runner's own limit; FIFOs and odd names are made here, at test time.

@Suite("Bad input from the acceptance sweep: FIFOs, special output files, non-UTF-8 arguments", .serialized)
struct BadInputSweepCLITests {
    /// The bound the binary waits for a FIFO's writer or reader in these tests (`PINNING_INPUT_WAIT`).
    static let wait = ["PINNING_INPUT_WAIT": "1"]

    /// A directory with a PKI, a chain, a configuration exportable to OkHttp, and a FIFO named `fifo` that nobody
    /// writes to.
    struct Fixture {
        let directory: TemporaryDirectory
        let chain: TestChain

        init() throws {
            let directory = try TemporaryDirectory(prefix: "pinning-bad-input")
            self.directory = directory
            // Until the fixture is whole no test holds it: a step that throws removes the directory here.
            var ready = false
            defer { if !ready { directory.remove() } }
            self.chain = try TestChain()
            _ = try self.directory.write("chain.pem", self.chain.leaf.certificatePEM + self.chain.intermediate.certificatePEM)
            _ = try self.directory.write("root.pem", self.chain.root.certificatePEM)
            let pins = [self.chain.intermediate, self.chain.root].map { "\"\(Pin(spkiOf: $0.certificate))\"" }.joined(separator: ", ")
            _ = try self.directory.write("cfg.json", #"{"version": 1, "domains": {"api.example.com": {"pins": [\#(pins)]}}}"#)
            _ = try self.directory.write(
                "anchor-fifo.json", #"{"version": 1, "domains": {"api.example.com": {"pins": [\#(pins)], "anchors": ["fifo"]}}}"#)
            #expect(mkfifo(self.directory.path("fifo"), 0o600) == 0)
            ready = true
        }

        /// Runs `SCRIPT` under bash with `$PINNING` set, the binary's waits bounded to 1 s.
        func script(_ script: String) async throws -> CLIRun {
            try await bash(script, in: self.directory, environment: BadInputSweepCLITests.wait)
        }

        /// The binary under `timeout 20` with `arguments` (quoted for the shell).
        func pinning(_ arguments: [String]) async throws -> CLIRun {
            let quoted = arguments.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
            return try await self.script("timeout -s KILL 20 \"$PINNING\" \(quoted)")
        }

        func isFIFO(_ name: String) -> Bool { Self.type(self.directory.path(name)) == S_IFIFO }

        static func type(_ path: String) -> mode_t? {
            var info = stat()
            guard lstat(path, &info) == 0 else { return nil }
            return info.st_mode & S_IFMT
        }
    }

    /// stderr's lines.
    static func lines(_ run: CLIRun) -> [Substring] {
        run.stderr.split(separator: "\n")
    }

    @Test(
        "a FIFO with no writer is refused within the bound, naming the option and the file, for every way a file is read",
        arguments: [
            (["evaluate", "--chain", "fifo"], "pinning: --chain fifo: unreadable file: nothing was written to this FIFO or pipe within 1 s", Int32(2)),
            (["inspect", "fifo"], "pinning: fifo: unreadable file: nothing was written to this FIFO or pipe within 1 s", 2),
            (["config", "lint", "fifo"], "(file): nothing was written to this FIFO or pipe within 1 s", 2),
            (["config", "lint", "anchor-fifo.json"], "anchors[0]: ", 2),
            (["evaluate", "--chain", "chain.pem", "--config", "anchor-fifo.json", "--host", "api.example.com"], "anchors[0]: ", 2),
            // tuf-conformance's command line: any failure is exit 1 (its contract, kept).
            (["tuf", "--metadata-dir", "md", "init", "fifo"], "pinning tuf: init: root: cannot read fifo: nothing was written to this FIFO or pipe within 1 s", 1),
            (["check", "https://127.0.0.1:1/", "--keylog", "fifo"], "pinning: --keylog: cannot use the key log fifo: no process opened this FIFO for reading within 1 s", 2),
        ])
    func fifoWithoutWriter(arguments: [String], expected: String, status: Int32) async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        try FileManager.default.createDirectory(atPath: f.directory.path("md"), withIntermediateDirectories: true)
        let run = try await f.pinning(arguments)
        #expect(run.status == status, "\(run)")
        #expect(run.stderr.contains(expected), "\(run)")
        #expect(run.stderr.contains("fifo"), "\(run)")
        #expect(!run.stderr.contains("Error Domain"), "\(run)")
    }

    @Test("a FIFO whose writer comes is still read (a certificate and a configuration)")
    func fifoWithWriter() async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        let inspect = try await f.script(#"timeout -s KILL 20 cat chain.pem > fifo & timeout -s KILL 20 "$PINNING" inspect fifo"#)
        #expect(inspect.status == 0, "\(inspect)")
        #expect(inspect.stdout.contains("subject"), "\(inspect)")
        let lint = try await f.script(#"timeout -s KILL 20 cat cfg.json > fifo & timeout -s KILL 20 "$PINNING" config lint fifo"#)
        #expect(lint.status == 0, "\(lint)")
    }

    @Test("--out onto a FIFO writes into it and leaves it a FIFO; with no reader it is refused within the bound")
    func outIntoFIFO() async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        let written = try await f.script(
            #"timeout -s KILL 20 cat fifo > got.txt & reader=$!; timeout -s KILL 20 "$PINNING" config export cfg.json --format okhttp --out fifo; status=$?; wait $reader; exit $status"#)
        #expect(written.status == 0, "\(written)")
        #expect(f.isFIFO("fifo"), "the FIFO was replaced")
        let got = try String(contentsOfFile: f.directory.path("got.txt"), encoding: .utf8)
        #expect(got.contains("api.example.com"), "\(got)")

        let alone = try await f.pinning(["config", "export", "cfg.json", "--format", "okhttp", "--out", "fifo"])
        #expect(alone.status == 2, "\(alone)")
        #expect(Self.lines(alone) == ["pinning: --out fifo: no process opened this FIFO for reading within 1 s"], "\(alone)")
        #expect(f.isFIFO("fifo"), "the FIFO was replaced")
    }

    @Test(
        "--out onto a device node is written in place: /dev/full's twin gives one line, exit 2, and stays a device",
        .enabled(if: getuid() == 0, "mknod needs root"))
    func outIntoFullDevice() async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        let node = f.directory.path("full")
        // Major 1, minor 7: /dev/full's twin, made here so that the real device is never at stake (Linux's encoding
        // of a small major and minor: major << 8 | minor; Glibc's makedev is a macro Swift does not import).
        #expect(mknod(node, S_IFCHR | 0o666, dev_t(1 << 8 | 7)) == 0)
        let run = try await f.pinning(["config", "export", "cfg.json", "--format", "okhttp", "--out", "full"])
        #expect(run.status == 2, "\(run)")
        #expect(Self.lines(run) == ["pinning: --out full: cannot write it (no space left on device)"], "\(run)")
        #expect(Fixture.type(node) == S_IFCHR, "the device node was replaced")
    }

    @Test("--out onto a directory is one line in words; onto a regular file it is replaced whole")
    func outDirectoryAndRegular() async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        try FileManager.default.createDirectory(atPath: f.directory.path("emptydir"), withIntermediateDirectories: true)
        let directory = try await f.pinning(["config", "export", "cfg.json", "--format", "okhttp", "--out", "emptydir"])
        #expect(directory.status == 2, "\(directory)")
        #expect(Self.lines(directory) == ["pinning: --out emptydir: the path is a directory, not a file"], "\(directory)")
        _ = try f.directory.write("old.kt", "old contents\n")
        let regular = try await f.pinning(["config", "export", "cfg.json", "--format", "okhttp", "--out", "old.kt"])
        #expect(regular.status == 0, "\(regular)")
        #expect(try String(contentsOfFile: f.directory.path("old.kt"), encoding: .utf8).contains("api.example.com"))
        #expect(Fixture.type(f.directory.path("old.kt")) == S_IFREG)
    }

    @Test("pki export --force never unlinks a FIFO to put the PKCS#12 file in its place")
    func pkiExportOntoFIFO() async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        let run = try await f.script(
            #"timeout -s KILL 20 "$PINNING" pki init pki > /dev/null && timeout -s KILL 20 "$PINNING" pki issue pki --client cli > /dev/null && P12=secret timeout -s KILL 20 "$PINNING" pki export pki cli --p12 fifo --passphrase-env P12 --force"#
        )
        #expect(run.status == 2, "\(run)")
        #expect(run.stderr.contains("fifo: not a regular file"), "\(run)")
        #expect(f.isFIFO("fifo"), "the FIFO was replaced")
    }

    @Test("an argument that is not UTF-8 is refused naming it with the bad byte escaped; nothing is read or written under another name")
    func nonUTF8Arguments() async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        let chain = try await f.script(#"cp chain.pem $'a\xff.pem' && timeout -s KILL 20 "$PINNING" evaluate --chain $'a\xff.pem'"#)
        #expect(chain.status == 2, "\(chain)")
        #expect(
            Self.lines(chain) == [
                #"pinning: argument 3, a\xFF.pem (after --chain), is not valid UTF-8; file names and other arguments must be UTF-8 (the name would otherwise be changed, and another file read or written)"#
            ], "\(chain)")

        let keyLog = try await f.script(#"timeout -s KILL 20 "$PINNING" check https://127.0.0.1:1/ --keylog $'k\xff.log'"#)
        #expect(keyLog.status == 2, "\(keyLog)")
        #expect(keyLog.stderr.contains(#"k\xFF.log (after --keylog)"#), "\(keyLog)")
        let names = try FileManager.default.contentsOfDirectory(atPath: f.directory.path("."))
        #expect(!names.contains { $0.hasPrefix("k") && $0.hasSuffix(".log") }, "a key log was created: \(names)")
    }

    @Test(
        "a directory given as a configuration is one line in the reader's words, never Foundation's, for every command that reads one",
        arguments: [
            ["config", "lint", "emptydir"],
            ["evaluate", "--chain", "chain.pem", "--config", "emptydir", "--host", "api.example.com"],
            ["check", "https://127.0.0.1:1/", "--config", "emptydir"],
            ["proxy", "--config", "emptydir", "--listen", "127.0.0.1:0"],
            ["config", "export", "emptydir", "--format", "okhttp"],
            ["config", "import", "emptydir", "--format", "trustkit"],
        ])
    func directoryAsConfiguration(arguments: [String]) async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        try FileManager.default.createDirectory(atPath: f.directory.path("emptydir"), withIntermediateDirectories: true)
        let run = try await f.pinning(arguments)
        #expect(run.status == 2, "\(run)")
        #expect(run.stderr.contains("emptydir"), "\(run)")
        #expect(run.stderr.contains("the path is a directory, not a file"), "\(run)")
        for leak in ["NSCocoaErrorDomain", "Error Domain", "(null)", "UserInfo"] {
            #expect(!run.stderr.contains(leak), "\(run)")
        }
    }

    @Test("a regular file where a directory is expected: --pinset-dir and pinset init name it in words, exit 2")
    func fileWhereDirectoryExpected() async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        _ = try f.directory.write("garbage.bin", "not a directory\n")
        try await Self.makePinSetKeys(f)
        let initRun = try await Self.pinsetInit(f, "garbage.bin")
        #expect(initRun.status == 2, "\(initRun)")
        #expect(initRun.stderr.contains("garbage.bin: not a directory"), "\(initRun)")
        #expect(!initRun.stderr.contains("NSCocoaErrorDomain"), "\(initRun)")

        let check = try await Self.checkWithPinSetDirectory(f, "garbage.bin")
        #expect(check.status == 2, "\(check)")
        #expect(Self.lines(check).count == 1, "\(check)")
        #expect(check.stderr.contains("--pinset-dir garbage.bin: not a directory"), "\(check)")
        #expect(!check.stderr.contains("NSCocoaErrorDomain"), "\(check)")
    }

    /// root.key, targets.key, snapshot.key and timestamp.key in the fixture's directory, then the shell commands `then`.
    static func makePinSetKeys(_ f: Fixture, then: String = "true") async throws {
        let keys = try await f.script(
            #"for k in root targets snapshot timestamp; do timeout -s KILL 20 "$PINNING" pinset keygen --type ed25519 --out $k.key > /dev/null || exit 9; done; "# + then)
        #expect(keys.status == 0, "\(keys)")
    }

    /// `pinning pinset init REPOSITORY` with the keys ``makePinSetKeys(_:then:)`` made.
    static func pinsetInit(_ f: Fixture, _ repository: String) async throws -> CLIRun {
        try await f.pinning([
            "pinset", "init", repository, "--root-key", "root.key", "--targets-key", "targets.key", "--snapshot-key", "snapshot.key",
            "--timestamp-key", "timestamp.key",
        ])
    }

    /// `pinning check` following a pin set from nowhere with its state in `directory`, after making the repository
    /// `repo` whose root it starts from (the keys ``makePinSetKeys(_:then:)`` made).
    static func checkWithPinSetDirectory(_ f: Fixture, _ directory: String) async throws -> CLIRun {
        let repo = try await Self.pinsetInit(f, "repo")
        #expect(repo.status == 0, "\(repo)")
        return try await f.pinning([
            "check", "https://127.0.0.1:1/", "--pinset", "http://127.0.0.1:1/metadata/", "--pinset-root", "repo/metadata/1.root.json",
            "--pinset-dir", directory,
        ])
    }

    @Test("a FIFO where pinset init or --pinset-dir needs a directory (the repository, its metadata/ or targets/, a parent) is bad input naming it")
    func fifoWhereDirectoryExpected() async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        try await Self.makePinSetKeys(f, then: "mkdir -p r1 r2 sd && mkfifo r1/metadata r2/targets sd/pinsets")
        let cases: [(String, String)] = [
            ("fifo", "pinning: pinset init: fifo: not a directory; a pin-set repository is a directory (created when missing)"),
            ("r1", "pinning: pinset init: r1: cannot hold a pin-set repository: r1/metadata is a FIFO, not a directory"),
            ("r2", "pinning: pinset init: r2: cannot hold a pin-set repository: r2/targets is a FIFO, not a directory"),
            ("fifo/repo", "pinning: pinset init: fifo/repo: cannot hold a pin-set repository: fifo is a FIFO, not a directory"),
        ]
        for (repository, expected) in cases {
            let run = try await Self.pinsetInit(f, repository)
            #expect(run.status == 2, "\(run)")
            #expect(Self.lines(run) == [Substring(expected)], "\(run)")
        }
        #expect(f.isFIFO("r1/metadata") && f.isFIFO("r2/targets"), "a FIFO was replaced")
        let check = try await Self.checkWithPinSetDirectory(f, "sd")
        #expect(check.status == 2, "\(check)")
        #expect(Self.lines(check) == ["pinning: --pinset-dir sd: cannot create the state directory: sd/pinsets is a FIFO, not a directory"], "\(check)")
    }

    @Test("--pinset-root that is not a TUF root is the option's fault: exit 2 naming it, before any connection")
    func pinsetRootNotARoot() async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        _ = try f.directory.write("garbage.bin", "not json\n")
        let run = try await f.pinning([
            "check", "https://127.0.0.1:1/", "--pinset", "http://127.0.0.1:1/metadata/", "--pinset-root", "garbage.bin", "--pinset-dir", "psd",
        ])
        #expect(run.status == 2, "\(run)")
        #expect(Self.lines(run).count == 1, "\(run)")
        #expect(run.stderr.hasPrefix("pinning: --pinset-root garbage.bin: not a usable TUF root metadata file"), "\(run)")
    }

    @Test(
        "serve --bind: the short IPv4 forms the resolver always took (127.1) still listen, on the address they stand for",
        arguments: [("127.1", "listening on https://127.0.0.1:"), ("0x7f.0.0.1", "listening on https://127.0.0.1:")])
    func serveBindShortForms(bind: String, expected: String) async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        _ = try f.directory.write("key.pem", f.chain.leaf.privateKeyPEM)
        let run = try await f.script(
            #""$PINNING" serve --cert chain.pem --key key.pem --port 0 --bind '\#(bind)' < /dev/null > out.txt 2> err.txt & pid=$!; for i in $(seq 50); do grep -q listening out.txt && break; sleep 0.2; done; kill -KILL $pid; wait $pid; cat out.txt err.txt"#
        )
        #expect(run.stdout.contains(expected), "\(run)")
    }

    @Test(
        "serve --bind: a bracketed IPv4 address, an impossible dotted address, an address of no interface are --bind's fault, exit 2",
        arguments: [
            ("[127.0.0.1]", "pinning: --bind [127.0.0.1]: not an IPv6 address; brackets are for IPv6 (write an IPv4 address without them)"),
            ("999.1.1.1", "pinning: --bind 999.1.1.1: not an IPv4 address (four numbers from 0 to 255) nor a host name"),
            ("256.256.256.256", "pinning: --bind 256.256.256.256: not an IPv4 address (four numbers from 0 to 255) nor a host name"),
            ("192.0.2.1", "pinning: --bind 192.0.2.1: not an address of this machine (no interface has it)"),
        ])
    func serveBind(bind: String, expected: String) async throws {
        let f = try Fixture()
        defer { f.directory.remove() }
        let chain = f.chain
        _ = try f.directory.write("key.pem", chain.leaf.privateKeyPEM)
        let run = try await f.script(
            #"timeout -s KILL 20 "$PINNING" serve --cert chain.pem --key key.pem --port 0 --bind '\#(bind)' < /dev/null & pid=$!; sleep 5; if kill -0 $pid 2>/dev/null; then kill $pid; echo STILL-LISTENING; fi; wait $pid"#
        )
        #expect(run.status == 2, "\(run)")
        #expect(!run.stdout.contains("listening"), "\(run)")
        #expect(Self.lines(run) == [Substring(expected)], "\(run)")
    }
}
