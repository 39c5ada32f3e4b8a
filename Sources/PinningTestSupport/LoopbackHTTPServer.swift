public import Foundation
import Pinning

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 for report delivery tests: it records every request and answers each
/// with a fixed status. One connection at a time, one request per connection, every read bounded.
public final class LoopbackHTTPServer: Sendable {
    /// One request as received.
    public struct Request: Sendable, Hashable {
        /// `POST /reports HTTP/1.1`.
        public var requestLine: String
        /// Header names lower-cased.
        public var headers: [String: String]
        /// The request body as received.
        public var body: [UInt8]
    }

    /// The port the server listens on (127.0.0.1).
    public let port: Int
    private let listener: Int32
    /// What the serving thread and the test share.
    private struct State {
        var received: [Request] = []
        var statuses: [Int]
        var stopped = false
        var body: [UInt8] = []
        var served: [String: [UInt8]]?
        var servedDirectory: String?
    }
    private let state: LockedValueBox<State>

    /// What a 200 answer carries (CRL downloads); other answers carry nothing. Empty by default.
    public var responseBody: [UInt8] {
        get { self.state.withLockedValue { $0.body } }
        set { self.state.withLockedValue { $0.body = newValue } }
    }

    /// When set, the server is a static file server instead: `GET /PATH` answers 200 with `files["PATH"]`
    /// (without the leading slash), or 404 when there is none; `statuses` and `responseBody` are not used.
    public var files: [String: [UInt8]]? {
        get { self.state.withLockedValue { $0.served } }
        set { self.state.withLockedValue { $0.served = newValue } }
    }

    /// When set (and ``files`` is not), the server serves this directory as a static file server does: `GET /PATH`
    /// answers 200 with the file `DIRECTORY/PATH` as it is on disk at that moment, or 404 when there is none or
    /// `PATH` has an empty, `.` or `..` part. What `pinning pinset` writes is served this way, unchanged.
    public var directory: String? {
        get { self.state.withLockedValue { $0.servedDirectory } }
        set { self.state.withLockedValue { $0.servedDirectory = newValue } }
    }

    /// Starts listening on an ephemeral port of 127.0.0.1.
    ///
    /// - Parameter statuses: The statuses to answer with, in order; the last one repeats (`[500, 204]` fails
    ///   the first request, then accepts).
    public init(statuses: [Int] = [204]) throws {
        self.state = LockedValueBox(State(statuses: statuses.isEmpty ? [204] : statuses))
        #if canImport(Darwin)
            let fd = socket(AF_INET, SOCK_STREAM, 0)
        #else
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard fd >= 0 else { throw LoopbackServerError(description: "socket failed") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(0).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw LoopbackServerError(description: "bind/listen on 127.0.0.1 failed")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        self.listener = fd
        let thread = Thread { [self] in self.serve() }
        thread.start()
    }

    /// `http://127.0.0.1:PORT/path`.
    public func url(_ path: String = "/reports") -> URL {
        Self.url(port: self.port, path: path)
    }

    private static func url(port: Int, path: String) -> URL {
        var components = URLComponents()
        components.scheme = "http"
        components.host = "127.0.0.1"
        components.port = port
        components.path = path
        return components.url ?? URL(fileURLWithPath: "/")
    }

    /// Every request received so far.
    public var requests: [Request] {
        self.state.withLockedValue { $0.received }
    }

    /// Waits (polling, bounded) until at least `count` requests have arrived.
    public func waitForRequests(_ count: Int, timeout: TimeInterval = 10) async -> [Request] {
        let deadline = Date().addingTimeInterval(timeout)
        while self.requests.count < count && Date() < deadline {
            do {
                try await Task.sleep(for: .milliseconds(10))
            } catch {
                break
            }
        }
        return self.requests
    }

    /// Stops accepting connections.
    ///
    /// The listening socket is shut down here, which wakes the serving thread, and closed by that thread once it
    /// has left its loop, never here. Closed here, its number could be given at once to the next test's listener
    /// while this server's thread was still inside `poll` or `accept` on it: that thread then answered the other
    /// server's client with this server's body (a CI run's CRL test downloaded another test's CRL that way).
    public func stop() {
        let wasStopped = self.state.withLockedValue { state in
            defer { state.stopped = true }
            return state.stopped
        }
        if !wasStopped {
            shutdown(self.listener, Int32(SHUT_RDWR))
        }
    }

    deinit { self.stop() }

    private var isStopped: Bool {
        self.state.withLockedValue { $0.stopped }
    }

    private func nextStatus() -> Int {
        self.state.withLockedValue { state in
            let status = state.statuses[0]
            if state.statuses.count > 1 { state.statuses.removeFirst() }
            return status
        }
    }

    private func serve() {
        // The only close of the listening socket: after the last `poll` and `accept` on it (see stop()).
        defer { close(self.listener) }
        while !self.isStopped {
            var descriptor = pollfd(fd: self.listener, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 100)
            if ready <= 0 { continue }
            let connection = accept(self.listener, nil, nil)
            if connection < 0 { continue }
            self.handle(connection)
            close(connection)
        }
    }

    private func handle(_ connection: Int32) {
        // Generous: the client sends its request in a task after connecting, and on a loaded 2-core machine running
        // the whole suite that task can wait seconds for a thread (a 5 s bound dropped a retry's request once).
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        _ = setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var headerEnd: Int?
        var contentLength = 0
        while data.count < 1 << 20 {
            if let end = headerEnd, data.count >= end + contentLength { break }
            let count = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return }
            data += chunk[0..<count]
            if headerEnd == nil, let range = Self.find([13, 10, 13, 10], in: data) {
                headerEnd = range + 4
                let head = String(decoding: data[..<range], as: UTF8.self)
                for line in head.split(separator: "\r\n").dropFirst() {
                    let parts = line.split(separator: ":", maxSplits: 1)
                    if parts.count == 2, parts[0].lowercased() == "content-length" {
                        contentLength = Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0
                    }
                }
            }
        }
        guard let end = headerEnd else { return }
        let head = String(decoding: data[..<(end - 4)], as: UTF8.self)
        let lines = head.split(separator: "\r\n").map(String.init)
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 {
                headers[parts[0].lowercased()] = parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        let body = Array(data[end..<min(data.count, end + contentLength)])
        let requestLine = lines.first ?? ""
        var status: Int
        var payload: [UInt8]
        let target = requestLine.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
        let path = String(target.drop { $0 == "/" }.prefix { $0 != "?" })
        if let files = self.files {
            payload = files[path] ?? []
            status = files[path] == nil ? 404 : 200
        } else if let directory = self.directory {
            let decoded = path.removingPercentEncoding ?? ""
            let parts = decoded.split(separator: "/", omittingEmptySubsequences: false)
            let inside = !decoded.isEmpty && parts.allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
            let contents = inside ? FileManager.default.contents(atPath: directory + "/" + decoded) : nil
            payload = contents.map { Array($0) } ?? []
            status = contents == nil ? 404 : 200
        } else {
            status = self.nextStatus()
            payload = status == 200 ? self.responseBody : []
        }
        self.state.withLockedValue { $0.received.append(Request(requestLine: requestLine, headers: headers, body: body)) }
        let response = Array("HTTP/1.1 \(status) Test\r\nContent-Length: \(payload.count)\r\nConnection: close\r\n\r\n".utf8) + payload
        var sent = 0
        while sent < response.count {
            let count = response[sent...].withUnsafeBytes { send(connection, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return }
            sent += count
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where Array(haystack[start..<start + needle.count]) == needle {
            return start
        }
        return nil
    }
}

/// The loopback server could not be started.
public struct LoopbackServerError: Error, CustomStringConvertible {
    /// What failed.
    public var description: String
}
