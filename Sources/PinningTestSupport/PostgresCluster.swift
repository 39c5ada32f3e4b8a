import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A throwaway PostgreSQL cluster on 127.0.0.1 (Debian's server, which `.ci/run` installs): `initdb` into a
/// temporary directory, trust authentication for user `pinning`, stopped by ``stop()``. As root (CI), the server
/// runs as Debian's `postgres` user through `setpriv`, which execs, so the process stopped is the postmaster.
///
/// Used by the collector's tests and the proxy's psql test.
public final class PostgresCluster: Sendable {
    /// The newest installed server's bin directory (`/usr/lib/postgresql/N/bin`), if any.
    public static let bin: String? = {
        let base = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []).compactMap(Int.init).sorted()
        for version in versions.reversed() {
            let bin = "\(base)/\(version)/bin"
            if FileManager.default.isExecutableFile(atPath: bin + "/postgres") && FileManager.default.isExecutableFile(atPath: bin + "/initdb") {
                return bin
            }
        }
        return nil
    }()

    private static let user: (uid: uid_t, gid: gid_t)? = {
        guard geteuid() == 0, let entry = getpwnam("postgres") else { return nil }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }()

    /// Whether a cluster can be started here (the server installed, and a non-root user to run it as).
    public static let available = PostgresCluster.bin != nil && (geteuid() != 0 || (PostgresCluster.user != nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))

    public let directory: TemporaryDirectory
    public let server: ServerProcess
    /// The servers ``startServer()`` started after ``stopServer()``, the running one last.
    private let restarted = Mutex<[ServerProcess]>([])
    /// How the server is started (the executable and its arguments), for ``startServer()``.
    private let command: (executable: String, arguments: [String])
    public let port: Int
    /// `postgres://pinning@127.0.0.1:PORT/postgres`.
    public var url: String { "postgres://pinning@127.0.0.1:\(self.port)/postgres" }

    public convenience init() async throws {
        try await self.init(ports: Self.unusedLoopbackPort)
    }

    /// How many ports a start tries before it gives up: each is free when chosen, but another test may take it
    /// before the server binds it (PostgreSQL cannot be told to choose one itself: `-p 0` is refused).
    public static let portAttempts = 5

    /// A cluster on the first port from `ports` the server could bind: a start that fails because the port was
    /// taken meanwhile ("Address already in use") is tried again on the next, up to ``portAttempts`` times.
    public init(ports: () throws -> Int) async throws {
        guard let bin = Self.bin else { throw ServerProcess.StartError(description: "no PostgreSQL server installed (apt-get install postgresql)") }
        let directory = try TemporaryDirectory(prefix: "pinning-pg")
        self.directory = directory
        // A cluster that fails to start is nobody's to stop: its directory goes here.
        var started = false
        defer { if !started { directory.remove() } }
        var prefix: [String] = []
        if let user = Self.user {
            guard chown(directory.path, user.uid, user.gid) == 0 else {
                throw ServerProcess.StartError(description: "cannot give \(directory.path) to the postgres user: errno \(errno)")
            }
            prefix = ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", "--"]
        }
        func command(_ tool: String, _ arguments: [String]) -> (String, [String]) {
            prefix.isEmpty ? ("\(bin)/\(tool)", arguments) : ("/usr/bin/setpriv", prefix + ["\(bin)/\(tool)"] + arguments)
        }
        let data = directory.path("data")
        let (initdb, initdbArguments) = command("initdb", ["-D", data, "-U", "pinning", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"])
        let initialised = try await TestTools.run(initdb, initdbArguments, in: directory, timeout: 120)
        guard initialised.status == 0 else { throw ServerProcess.StartError(description: "initdb failed: \(initialised.output)") }
        var attempt = 1
        var running: (server: ServerProcess, port: Int, command: (executable: String, arguments: [String]))?
        while running == nil {
            let port = try ports()
            let (postgres, postgresArguments) = command(
                "postgres",
                ["-D", data, "-k", directory.path, "-p", "\(port)", "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "shared_buffers=32MB"]
            )
            do {
                let server = try await ServerProcess(postgres, postgresArguments, in: directory) { line in
                    line.contains("ready to accept connections") ? port : nil
                }
                running = (server, port, (postgres, postgresArguments))
            } catch let error as ServerProcess.StartError where error.description.contains("Address already in use") && attempt < Self.portAttempts {
                // Another process bound the port between its choice and the server's bind: a clash, not a fault.
                attempt += 1
            }
        }
        guard let running else { throw ServerProcess.StartError(description: "PostgreSQL did not start") }
        (self.server, self.port, self.command) = running
        started = true
    }

    public func stop() {
        for server in self.restarted.withLock({ $0 }) { server.stop() }
        self.server.stop()
        self.directory.remove()
    }

    /// Stops the running server (SIGTERM: a fast shutdown) and keeps the cluster, as a database going away under
    /// its clients; ``startServer()`` starts it again.
    public func stopServer() {
        (self.restarted.withLock { $0.last } ?? self.server).stop()
    }

    /// Starts the server again on the same data and port after ``stopServer()``.
    public func startServer() async throws {
        let port = self.port
        // A fresh output file: the old one already holds a "ready" line.
        let server = try await ServerProcess(self.command.executable, self.command.arguments, in: self.directory) { line in
            line.contains("ready to accept connections") ? port : nil
        }
        self.restarted.withLock { $0.append(server) }
    }

    /// A port that was free a moment ago (PostgreSQL cannot report the port it picked).
    public static func unusedLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ServerProcess.StartError(description: "socket() failed: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw ServerProcess.StartError(description: "bind(127.0.0.1:0) failed: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
