import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The smallest HTTP/1.1 client that can POST a report over plain TCP: one request per connection, every
/// step bounded by one deadline, run on a dedicated thread.
enum PlainHTTPClient {
    struct Response: Sendable {
        /// The status code, when a status line was read.
        var status: Int?
        var message: String
    }

    /// The most response bytes read: the status line is all that matters.
    static let maximumResponseBytes = 16 * 1024

    /// POSTs `body` as JSON to `host:port` `path`, within `timeout` seconds, on a thread of its own.
    static func post(host: String, port: Int, path: String, body: [UInt8], timeout: Double) async -> Response {
        await withCheckedContinuation { (continuation: CheckedContinuation<Response, Never>) in
            let thread = Thread {
                continuation.resume(returning: Self.postBlocking(host: host, port: port, path: path, body: body, timeout: timeout))
            }
            thread.name = "pinning-report"
            thread.start()
        }
    }

    static func postBlocking(host: String, port: Int, path: String, body: [UInt8], timeout: Double) -> Response {
        let deadline = Date().addingTimeInterval(timeout)
        let connectHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let hostHeader = (port == 80 ? host : "\(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host):\(port)")
        var request = Array(
            ("POST \(path) HTTP/1.1\r\n" + "Host: \(hostHeader)\r\n" + "Content-Type: application/json\r\n"
                + "Content-Length: \(body.count)\r\n" + "User-Agent: swift-pinning\r\n" + "Connection: close\r\n\r\n").utf8
        )
        request += body

        let socket: Int32
        switch Self.connect(host: connectHost, port: port, deadline: deadline) {
        case .success(let fd): socket = fd
        case .failure(let message): return Response(status: nil, message: message)
        }
        defer { _ = systemClose(socket) }

        var sent = 0
        while sent < request.count {
            guard Self.wait(socket, for: Int16(POLLOUT), until: deadline) else {
                return Response(status: nil, message: "timed out sending the report")
            }
            let written = request[sent...].withUnsafeBytes { buffer in
                systemSend(socket, buffer.baseAddress, buffer.count)
            }
            if written < 0 {
                if errno == EAGAIN || errno == EINTR || errno == EWOULDBLOCK { continue }
                return Response(status: nil, message: "send failed: \(String(cString: strerror(errno)))")
            }
            sent += written
        }

        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while response.count < Self.maximumResponseBytes {
            if let status = Self.statusCode(response) {
                return Response(status: status, message: "HTTP \(status)")
            }
            guard Self.wait(socket, for: Int16(POLLIN), until: deadline) else {
                return Response(status: nil, message: "timed out waiting for the collector's response")
            }
            let count = chunk.withUnsafeMutableBytes { buffer in
                recv(socket, buffer.baseAddress, buffer.count, 0)
            }
            if count < 0 {
                if errno == EAGAIN || errno == EINTR || errno == EWOULDBLOCK { continue }
                return Response(status: nil, message: "receive failed: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            response += chunk[0..<count]
        }
        if let status = Self.statusCode(response) {
            return Response(status: status, message: "HTTP \(status)")
        }
        return Response(status: nil, message: "the collector closed the connection without an HTTP status line")
    }

    /// The status code of a complete status line (`HTTP/1.1 204 No Content\r\n`), or nil.
    static func statusCode(_ bytes: [UInt8]) -> Int? {
        guard let end = bytes.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        let line = String(decoding: bytes[..<end], as: UTF8.self)
        let parts = line.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let status = Int(parts[1]) else {
            return nil
        }
        return status
    }

    enum Connection {
        case success(Int32)
        case failure(String)
    }

    private static func connect(host: String, port: Int, deadline: Date) -> Connection {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Darwin)
        hints.ai_socktype = SOCK_STREAM
        #else
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            return .failure("cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address for \(host)"
        var current: UnsafeMutablePointer<addrinfo>? = first
        while let info = current {
            current = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            guard fd >= 0 else {
                lastError = "socket failed: \(String(cString: strerror(errno)))"
                continue
            }
            #if canImport(Darwin)
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            let flags = fcntl(fd, F_GETFL, 0)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            let result = systemConnect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen)
            if result == 0 {
                return .success(fd)
            }
            guard errno == EINPROGRESS || errno == EINTR else {
                lastError = "cannot connect to \(host):\(port): \(String(cString: strerror(errno)))"
                _ = systemClose(fd)
                continue
            }
            guard Self.wait(fd, for: Int16(POLLOUT), until: deadline) else {
                lastError = "timed out connecting to \(host):\(port)"
                _ = systemClose(fd)
                continue
            }
            var socketError: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &socketError, &length)
            if socketError == 0 {
                return .success(fd)
            }
            lastError = "cannot connect to \(host):\(port): \(String(cString: strerror(socketError)))"
            _ = systemClose(fd)
        }
        return .failure(lastError)
    }

    /// Waits until `socket` is ready for `events`, or the deadline passes (false).
    private static func wait(_ socket: Int32, for events: Int16, until deadline: Date) -> Bool {
        while true {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { return false }
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let milliseconds = Int32(min(remaining * 1000, 60_000).rounded(.up))
            let ready = poll(&descriptor, 1, milliseconds)
            if ready > 0 { return true }
            if ready < 0 && errno != EINTR { return false }
        }
    }
}

// The C functions under names that do not collide with members and locals called `socket`, `close`, `send`.
private func systemClose(_ fd: Int32) -> Int32 {
    close(fd)
}

private func systemSend(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    #if canImport(Darwin)
    return send(fd, buffer, count, 0)
    #else
    return send(fd, buffer, count, Int32(MSG_NOSIGNAL))
    #endif
}

private func systemConnect(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}
