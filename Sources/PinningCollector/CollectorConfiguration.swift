public import Foundation
import Pinning

/// `--database`: `sqlite:PATH` or `postgres://USER[:PASSWORD]@HOST:PORT/DB[?sslmode=require]` (`verify-full`
/// is the same as `require`, which verifies the server's certificate and name: see ``parse(_:environment:)``).
public enum DatabaseURL: Sendable, Equatable {
    case sqlite(path: String)
    case postgres(Postgres)

    public struct Postgres: Sendable, Equatable {
        public var user: String
        public var password: String?
        public var host: String
        public var port: Int
        public var database: String
        public var requireTLS: Bool
    }

    /// Parses the option's text.
    ///
    /// - Throws: ``CollectorOptionError`` saying what is wrong, in words.
    public static func parse(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(CollectorOptionError) -> DatabaseURL {
        if text.hasPrefix("sqlite:") {
            var path = String(text.dropFirst("sqlite:".count))
            if path.hasPrefix("//") { path = String(path.dropFirst(2)) }
            guard !path.isEmpty else { throw CollectorOptionError("--database \(text): no file after sqlite:") }
            return .sqlite(path: path)
        }
        guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") else {
            throw CollectorOptionError("--database: expected sqlite:PATH or postgres://USER@HOST:PORT/DB")
        }
        guard let components = URLComponents(string: text), let host = components.host, !host.isEmpty else {
            throw CollectorOptionError("--database: not a postgres://USER@HOST:PORT/DB address")
        }
        guard let user = components.user, !user.isEmpty else {
            throw CollectorOptionError("--database: no user (postgres://USER@HOST:PORT/DB)")
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        guard !database.isEmpty, !database.contains("/") else {
            throw CollectorOptionError("--database: no database name (postgres://USER@HOST:PORT/DB)")
        }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw CollectorOptionError("--database: port \(port) is not a TCP port") }
        var requireTLS = false
        for item in components.queryItems ?? [] {
            switch (item.name, item.value) {
            // `require` here is what libpq calls `verify-full` with the system's roots (`sslrootcert=system`): TLS
            // is required, the server's chain must verify against the system's trust roots, and its certificate
            // must name the host of the URL (SNI and name check; for an IP address, swift-nio-ssl checks the
            // certificate's IP addresses against the address connected to). libpq's own `require` checks
            // nothing; failing closed is the deliberate difference. So `verify-full` is accepted as the same.
            case ("sslmode", "require"?), ("sslmode", "verify-full"?): requireTLS = true
            case ("sslmode", "disable"?): requireTLS = false
            case ("sslmode", let mode?) where ["verify-ca", "prefer", "allow"].contains(mode):
                throw CollectorOptionError(
                    "--database: sslmode=\(mode) is not supported: use sslmode=require (the same as verify-full: the server's certificate is verified against the system's trust roots and must name the host) or sslmode=disable"
                )
            case ("sslrootcert", _):
                throw CollectorOptionError(
                    "--database: sslrootcert is not supported: the server's certificate is verified against the system's trust roots; add its CA there")
            default:
                throw CollectorOptionError(
                    "--database: unknown parameter \(item.name)\(item.value.map { "=" + $0 } ?? "") (only sslmode=require, sslmode=verify-full or sslmode=disable)")
            }
        }
        return .postgres(
            Postgres(
                user: user,
                password: components.password ?? environment["PGPASSWORD"],
                host: host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host,
                port: port,
                database: database,
                requireTLS: requireTLS
            )
        )
    }

    public var kind: DatabaseKind {
        switch self {
        case .sqlite: return .sqlite
        case .postgres: return .postgres
        }
    }
}

/// `--listen HOST:PORT` (`[::1]:8090` for IPv6; port 0 picks one).
public struct ListenAddress: Sendable, Equatable {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public static func parse(_ text: String) throws(CollectorOptionError) -> ListenAddress {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw CollectorOptionError("--listen \(text): expected HOST:PORT, [IPv6]:PORT")
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else {
                throw CollectorOptionError("--listen \(text): expected HOST:PORT, [IPv6]:PORT")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { throw CollectorOptionError("--listen \(text): no host") }
        guard let port = Int(portText), (0...65535).contains(port) else {
            throw CollectorOptionError("--listen \(text): the port must be a number from 0 to 65535")
        }
        return ListenAddress(host: String(host), port: port)
    }
}

/// `--rate N/min`: reports accepted per source per minute.
public struct RateOption: Sendable, Equatable {
    public var perMinute: Int

    public static func parse(_ text: String) throws(CollectorOptionError) -> RateOption {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let count = Int(parts[0]), ["min", "m", "minute"].contains(parts[1]) else {
            throw CollectorOptionError("--rate \(text): expected N/min, e.g. 600/min")
        }
        guard (1...1_000_000).contains(count) else { throw CollectorOptionError("--rate \(text): N must be from 1 to 1,000,000") }
        return RateOption(perMinute: count)
    }
}

/// The API token, from `--token-file`.
public enum TokenFile {
    /// The shortest token accepted: a shorter one is within reach of guessing over the network.
    public static let minimumLength = 16

    /// Reads the token: the file's first line, surrounding whitespace removed.
    ///
    /// Read by the CLI's one file reader (`BoundedFileReader`), so a missing file, a directory or a permission is
    /// said in the words every other option uses, and a FIFO or `<(…)` is waited for with the same bound rather
    /// than forever.
    public static func read(_ path: String) throws(CollectorOptionError) -> String {
        let bytes: [UInt8]
        do {
            bytes = try BoundedFileReader.read(atPath: path, maximumSize: 4096)
        } catch {
            if error.code == .fileTooLarge {
                throw CollectorOptionError("--token-file \(path): the file is larger than 4 KiB; it should hold one token")
            }
            throw CollectorOptionError("--token-file \(path): \(error.problem)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw CollectorOptionError("--token-file \(path): not UTF-8 text") }
        let token = (text.split(whereSeparator: \.isNewline).first.map(String.init) ?? "").trimmingCharacters(in: .whitespaces)
        guard token.count >= Self.minimumLength else {
            throw CollectorOptionError("--token-file \(path): the token must be at least \(Self.minimumLength) characters (e.g. `openssl rand -hex 32`)")
        }
        guard token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw CollectorOptionError("--token-file \(path): the token must be printable ASCII without spaces (it is sent in a header and a cookie)")
        }
        return token
    }
}

/// A bad option, in one line naming it.
public struct CollectorOptionError: Error, Sendable, CustomStringConvertible, Equatable {
    public var message: String
    public var description: String { self.message }
    public init(_ message: String) { self.message = message }
}
