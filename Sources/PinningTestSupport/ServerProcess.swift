public import Foundation

/// A server process we did not write (`openssl s_server`, a Python `ssl` server) listening on loopback, up once it
/// printed its port. Killed by ``stop()``; every wait is bounded, and no wait blocks a thread of the cooperative
/// pool for long (the tests' own servers decide handshakes in tasks).
public final class ServerProcess: Sendable {
    /// Why a server did not start: what it printed, and whether it exited or stayed silent.
    public struct StartError: Error, CustomStringConvertible {
        public var description: String

        public init(description: String) {
            self.description = description
        }
    }

    /// The process.
    public let process = Process()
    /// Where its stdout and stderr go.
    public let outputPath: String
    /// Whether ``outputPath`` is ours to remove: true when no directory was given and it lies in the system's
    /// temporary directory, where nobody else would remove it.
    private let ownsOutput: Bool
    /// The port it printed.
    public let port: Int

    /// Starts `executable arguments` in `directory` (the current directory when nil); `portLine` finds the port in
    /// one line of its output. Its stdin is a pipe that stays open and silent (`s_server` reads commands from it).
    public init(
        _ executable: String,
        _ arguments: [String],
        in directory: TemporaryDirectory? = nil,
        portLine: @escaping (Substring) -> Int?
    ) async throws {
        let name = "pinning-server-\(UUID().uuidString).out"
        self.outputPath = directory?.path(name) ?? (NSTemporaryDirectory() + name)
        self.ownsOutput = directory == nil
        _ = FileManager.default.createFile(atPath: self.outputPath, contents: nil)
        do {
            let output = try FileHandle(forWritingTo: URL(fileURLWithPath: self.outputPath))
            self.process.executableURL = URL(fileURLWithPath: executable)
            self.process.arguments = arguments
            if let directory {
                self.process.currentDirectoryURL = URL(fileURLWithPath: directory.path, isDirectory: true)
            }
            self.process.standardOutput = output
            self.process.standardError = output
            self.process.standardInput = Pipe()
            try self.process.run()
            try? output.close()
        } catch {
            // Not fully initialised, so deinit will not run: the file is removed here.
            if directory == nil { Self.remove(self.outputPath) }
            throw error
        }
        // Generous: on a loaded 2-core CI machine a process can take many seconds to be scheduled; the wait ends
        // as soon as the port is printed.
        let outputPath = self.outputPath
        let printedPort = { ((try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "").split(separator: "\n").lazy.compactMap(portLine).first }
        let deadline = Date().addingTimeInterval(60)
        var port: Int?
        while port == nil && Date() < deadline && self.process.isRunning {
            port = printedPort()
            if port == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        // Once more after the deadline: a task starved past it (the whole suite shares the cooperative pool) must
        // not fail a server that did print its port meanwhile.
        self.port = port ?? printedPort() ?? 0
        if self.port != 0 { return }
        let reason = self.process.isRunning ? "no port printed within 60 s" : "exited with status \(self.process.terminationStatus)"
        let printed = self.output
        self.stop()
        throw StartError(description: "\(executable) did not start (\(reason)): \(printed)")
    }

    /// Everything it printed so far.
    public var output: String { (try? String(contentsOfFile: self.outputPath, encoding: .utf8)) ?? "" }

    /// The output file, when it is ours, goes with the last reference (a failed start included: the error carries
    /// what it printed).
    deinit {
        if self.ownsOutput { Self.remove(self.outputPath) }
    }

    private static func remove(_ path: String) {
        do {
            try FileManager.default.removeItem(atPath: path)
        } catch {
            // Already gone, or not removable: nothing a test can do about it.
        }
    }

    /// SIGTERM, then SIGKILL after 2 s if it is still there. The output file stays for the caller's assertions
    /// (it lives in the caller's temporary directory, or, without one, until this object goes).
    public func stop() {
        guard self.process.isRunning else { return }
        self.process.terminate()
        let deadline = Date().addingTimeInterval(2)
        while self.process.isRunning && Date() < deadline { usleep(20_000) }
        if self.process.isRunning { kill(self.process.processIdentifier, SIGKILL) }
        self.process.waitUntilExit()
    }

    /// `openssl s_server -accept 127.0.0.1:0 -naccept 1000 ARGS`.
    public static func opensslServer(_ arguments: [String], in directory: TemporaryDirectory? = nil) async throws -> ServerProcess {
        try await ServerProcess(TestTools.opensslPath, ["s_server", "-accept", "127.0.0.1:0", "-naccept", "1000"] + arguments, in: directory) { line in
            guard line.hasPrefix("ACCEPT ") else { return nil }
            return Int(line.split(separator: ":").last ?? "")
        }
    }
}
