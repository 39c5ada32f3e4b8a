import Foundation
import PinningTestSupport
import Testing

// Issue 27, item 3: `pinning proxy` printed its start-up lines before it installed its signal handlers, so a
// SIGHUP sent as soon as the `local CA:` line appeared killed it (2 of 20 tries). The handlers are now in place
// (registered with the system) before anything is announced; `serve` likewise for SIGTERM.
//
// The signal is sent from a thread that blocks on the process's stdout pipe, the moment the line arrives: as
// early as any supervisor could.

/// A `pinning` process whose stdout is read by a thread of its own; `signal` is sent the moment a line starting
/// with `trigger` arrives.
final class SignalOnLine: @unchecked Sendable {
    let process = Process()
    let stderrPath: String
    private let lock = NSLock()
    private var seenLine = false
    private var stdoutText = ""

    init(_ arguments: [String], in directory: TemporaryDirectory, trigger: String, signal number: Int32) throws {
        self.stderrPath = directory.path("signal-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: self.stderrPath, contents: nil)
        let pipe = Pipe()
        self.process.executableURL = try PinningBinary.located.get()
        self.process.arguments = arguments
        self.process.currentDirectoryURL = URL(fileURLWithPath: directory.path, isDirectory: true)
        self.process.standardInput = FileHandle.nullDevice
        self.process.standardOutput = pipe
        self.process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: self.stderrPath))
        try self.process.run()
        let reader = pipe.fileHandleForReading
        let process = self.process
        let thread = Thread { [self] in
            var buffer = ""
            while true {
                let data = reader.availableData
                if data.isEmpty { return }
                buffer += String(decoding: data, as: UTF8.self)
                self.lock.withLock { self.stdoutText = buffer }
                if buffer.split(separator: "\n").contains(where: { $0.hasPrefix(trigger) }) {
                    if process.isRunning { kill(process.processIdentifier, number) }
                    self.lock.withLock { self.seenLine = true }
                    // Keep draining, so the process never blocks on a full pipe.
                    while !reader.availableData.isEmpty {}
                    return
                }
            }
        }
        thread.start()
    }

    var signalled: Bool { self.lock.withLock { self.seenLine } }
    var stdout: String { self.lock.withLock { self.stdoutText } }
    var stderr: String { (try? String(contentsOfFile: self.stderrPath, encoding: .utf8)) ?? "" }

    /// Waits up to `seconds` for `condition`.
    func wait(seconds: Double, until condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    func stop() {
        guard self.process.isRunning else { return }
        kill(self.process.processIdentifier, SIGKILL)
        self.process.waitUntilExit()
    }
}

@Suite("serve and proxy: signal handlers are installed before the start-up lines (runs the built binary)")
struct StartupSignalCLITests {
    static let tries = 12

    @Test("proxy: a SIGHUP sent the moment `local CA:` appears reloads the configuration, every time")
    func proxySIGHUPRightAfterStartup() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-startup-signal")
        defer { directory.remove() }
        let pins = ["sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString(), "sha256/" + Data(repeating: 0x42, count: 32).base64EncodedString()]
        let config = try directory.write("pinning.json", #"{"version": 1, "domains": {"api.test": {"pins": ["\#(pins[0])", "\#(pins[1])"]}}}"#)
        for attempt in 1...Self.tries {
            let proxy = try SignalOnLine(
                ["proxy", "--config", config, "--listen", "127.0.0.1:0", "--ca-dir", directory.path("ca")], in: directory, trigger: "local CA: ",
                signal: SIGHUP)
            defer { proxy.stop() }
            #expect(await proxy.wait(seconds: 60) { proxy.signalled || !proxy.process.isRunning }, "attempt \(attempt): no start-up line: \(proxy.stderr)")
            let reloaded = await proxy.wait(seconds: 20) { proxy.stderr.contains("reload succeeded") || !proxy.process.isRunning }
            #expect(reloaded && proxy.process.isRunning, "attempt \(attempt): the SIGHUP must reload, not end the process: stdout \(proxy.stdout) stderr \(proxy.stderr)")
            if !proxy.process.isRunning {
                #expect(
                    proxy.process.terminationReason == .exit,
                    "attempt \(attempt): ended by signal \(proxy.process.terminationStatus)")
                return
            }
        }
    }

    @Test("serve: a SIGTERM sent the moment `listening on` appears is a clean stop (exit 0), every time")
    func serveSIGTERMRightAfterStartup() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-startup-signal")
        defer { directory.remove() }
        let chain = try TestChain(host: "localhost")
        let cert = try directory.write("chain.pem", TestPKI.pemBundle(chain.presented))
        let key = try directory.write("leaf.key", chain.leaf.privateKeyPEM)
        for attempt in 1...Self.tries {
            let serve = try SignalOnLine(
                ["serve", "--cert", cert, "--key", key, "--port", "0"], in: directory, trigger: "listening on https://", signal: SIGTERM)
            defer { serve.stop() }
            let ended = await serve.wait(seconds: 60) { !serve.process.isRunning }
            #expect(ended && serve.signalled, "attempt \(attempt): \(serve.stdout) \(serve.stderr)")
            guard ended else { return }
            serve.process.waitUntilExit()
            #expect(
                serve.process.terminationReason == .exit && serve.process.terminationStatus == 0,
                "attempt \(attempt): ended by \(serve.process.terminationReason == .exit ? "exit" : "signal") \(serve.process.terminationStatus): \(serve.stderr)")
        }
    }
}
