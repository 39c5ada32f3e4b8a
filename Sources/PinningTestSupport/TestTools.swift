public import Foundation

/// The programs we did not write that the tests drive (cross-checks against OpenSSL and Python), found once, and
/// one way to run them.
public enum TestTools {
    /// Where Debian's `openssl` lives; `.ci/run` installs it.
    public static let opensslPath = "/usr/bin/openssl"
    /// Whether `openssl` is installed; suites that need it are skipped (never passed) without it.
    public static let opensslAvailable = FileManager.default.isExecutableFile(atPath: opensslPath)
    /// Whether `python3` is installed (the unclean-shutdown servers are Python `ssl` servers).
    public static let python3Available = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")

    /// How a program ended and what it printed.
    public struct ProcessResult: Sendable, CustomStringConvertible {
        /// The command, for messages.
        public var command: [String]
        /// The exit status (the signal number when it was killed).
        public var status: Int32
        /// Whether it exited by itself (false: killed by a signal, or by the timeout).
        public var exited: Bool
        /// What it printed on stdout, as bytes (DER, say).
        public var stdoutData: Data
        /// What it printed on stdout, as UTF-8 text.
        public var stdout: String { String(decoding: self.stdoutData, as: UTF8.self) }
        /// What it printed on stderr, as UTF-8 text.
        public var stderr: String
        /// stdout and stderr together.
        public var output: String { self.stdout + self.stderr }

        public var description: String {
            "\(self.command.joined(separator: " ")) → \(self.exited ? "exit" : "signal") \(self.status)\n--- stdout\n\(self.stdout)--- stderr\n\(self.stderr)"
        }
    }

    /// Runs `executable arguments` to its end without blocking a thread while it runs: the suites run in parallel
    /// on a cooperative pool with one thread per core, and a thread blocked in `waitUntilExit()` is one the
    /// tests' own servers cannot use. Output goes to files (a pipe that fills up would stall the program).
    ///
    /// - Parameters:
    ///   - input: Written to its stdin, which is then closed (stdin is empty when nil).
    ///   - directory: Its working directory, and where its output files go (the system's temporary directory when nil).
    ///   - environment: Added to this process's environment.
    ///   - timeout: After this many seconds it is killed (`exited` is then false).
    public static func run(
        _ executable: String,
        _ arguments: [String],
        input: Data? = nil,
        in directory: TemporaryDirectory? = nil,
        environment: [String: String] = [:],
        timeout: Double = 120
    ) async throws -> ProcessResult {
        let id = UUID().uuidString
        let base = directory?.path("run-\(id)") ?? (NSTemporaryDirectory() + "pinning-run-\(id)")
        let stdoutPath = base + ".out"
        let stderrPath = base + ".err"
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        defer {
            if directory == nil {
                try? FileManager.default.removeItem(atPath: stdoutPath)
                try? FileManager.default.removeItem(atPath: stderrPath)
            }
        }
        let stdoutHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        let stderrHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        if let directory {
            process.currentDirectoryURL = URL(fileURLWithPath: directory.path, isDirectory: true)
        }
        process.standardOutput = stdoutHandle
        process.standardError = stderrHandle
        let stdin = input.map { _ in Pipe() }
        process.standardInput = stdin ?? FileHandle.nullDevice
        let ended = AsyncStream<Void>.makeStream()
        process.terminationHandler = { _ in
            ended.continuation.yield()
            ended.continuation.finish()
        }
        try process.run()
        try? stdoutHandle.close()
        try? stderrHandle.close()
        if let stdin, let input {
            // Small inputs only (passphrases, requests): the pipe's buffer holds them without a reader.
            stdin.fileHandleForWriting.write(input)
            try? stdin.fileHandleForWriting.close()
        }
        let killer = Task {
            try await Task.sleep(for: .seconds(timeout))
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        for await _ in ended.stream {}
        killer.cancel()
        let stdout = (try? Data(contentsOf: URL(fileURLWithPath: stdoutPath))) ?? Data()
        let stderr = String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: stderrPath))) ?? Data(), as: UTF8.self)
        return ProcessResult(
            command: [executable] + arguments,
            status: process.terminationStatus,
            exited: process.terminationReason == .exit,
            stdoutData: stdout,
            stderr: stderr
        )
    }

    /// Runs `openssl arguments`; see ``run(_:_:input:in:environment:timeout:)``.
    public static func openssl(
        _ arguments: [String],
        input: String? = nil,
        in directory: TemporaryDirectory? = nil,
        timeout: Double = 120
    ) async throws -> ProcessResult {
        try await self.run(self.opensslPath, arguments, input: input.map { Data($0.utf8) }, in: directory, timeout: timeout)
    }
}
