import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Pinning
import PostgresNIO

/// One direct connection to the database before the pool starts, so that a server that refuses the collector
/// is reported at once and in words.
///
/// PostgresNIO's pool (`PostgresClient`) keeps retrying a connection that fails and surfaces nothing until a
/// query gives up, so a wrong port, password, user or database name showed only as "the database did not
/// answer within 60 s", a minute later and with the reason lost. libpq (`psql`) says the server's own words
/// at once; so does this.
package enum PostgresStartupCheck {
    /// Why the first connection failed, in words; nil when it succeeded (the connection is closed again).
    /// ``problem(connectingTo:logger:)`` with the driver's log silenced, for the collector bench (`pinning-collector
    /// bench`), which checks its `--postgres` the same way before it starts (an unreachable one hung it, NU3).
    package static func problem(connectingTo url: DatabaseURL.Postgres) async -> String? {
        var logger = Logger(label: "postgres-check")
        logger.logLevel = .critical
        return await Self.problem(connectingTo: url, logger: logger)
    }

    static func problem(connectingTo url: DatabaseURL.Postgres, logger: Logger) async -> String? {
        let tls: PostgresConnection.Configuration.TLS
        if url.requireTLS {
            do {
                tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            } catch {
                return "cannot set up TLS for sslmode=require (the system's trust roots could not be loaded)"
            }
        } else {
            tls = .disable
        }
        var configuration = PostgresConnection.Configuration(
            host: url.host, port: url.port, username: url.user, password: url.password, database: url.database, tls: tls)
        configuration.options.connectTimeout = .seconds(10)
        do {
            let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
            do {
                try await connection.close()
            } catch {
                // Only the probe's own connection failed to close; the pool opens its own.
                logger.debug("closing the start-up check's connection: \(error)")
            }
            return nil
        } catch {
            return Self.words(error, url: url)
        }
    }

    static func words(_ error: any Error, url: DatabaseURL.Postgres) -> String {
        let target = url.host.contains(":") ? "[\(url.host)]:\(url.port)" : "\(url.host):\(url.port)"
        guard let error = error as? PSQLError else {
            return "cannot connect to \(target): \(SocketErrorWords.describe(error) ?? "the connection failed")"
        }
        switch error.code {
        case .server:
            // The server's own message (for example `database "x" does not exist`, `password authentication failed
            // for user "y"`) and its SQLSTATE, as psql prints them.
            let message = Self.printable(error.serverInfo?[.message] ?? "the server refused the connection")
            let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \(Self.printable($0)))" } ?? ""
            return "\(target) refused the connection: \(message)\(state)"
        case .sslUnsupported:
            return "\(target) does not offer TLS, and the URL asks for it (sslmode=require)"
        case .authMechanismRequiresPassword:
            return "\(target) asks for a password: give it in the URL or in PGPASSWORD"
        case .unsupportedAuthMechanism:
            return "\(target) asks for an authentication method the collector's driver does not support (use scram-sha-256, md5 or password)"
        case .connectionError:
            let reason = error.underlying.flatMap(SocketErrorWords.describe) ?? "the connection failed"
            return "cannot connect to \(target): \(reason)"
        default:
            return "cannot connect to \(target): the connection ended before PostgreSQL accepted it"
        }
    }
}

extension PostgresStartupCheck {
    /// A server's text as one line: control characters (a newline, an escape sequence that would forge lines in a
    /// terminal or a log) and bidi controls shown as `\u{…}` (``VisibleText``), and at most 300 characters. The server at the URL need not be friendly.
    static func printable(_ text: String) -> String {
        VisibleText.escaped(text, limit: 300)
    }
}

/// A socket error in words (the system's own text for its errno), without NIO's function names.
enum SocketErrorWords {
    static func describe(_ error: any Error) -> String? {
        if let error = error as? IOError {
            return Self.words(errno: error.errnoCode)
        }
        if let error = error as? NIOConnectionError {
            // Every address of the name failed; the first one's reason stands for them (a refusal or a timeout).
            if let first = error.connectionErrors.first {
                return Self.describe(first.error) ?? "the connection failed"
            }
            return "the name did not resolve to any address"
        }
        if error is SocketAddressError.UnknownHost {
            return "the name does not resolve to an address"
        }
        if let error = error as? SocketAddressError, case .unknown = error {
            return "the name does not resolve to an address"
        }
        if let error = error as? ChannelError, case .connectTimeout = error {
            return "no answer within 10 s"
        }
        return nil
    }

    static func words(errno code: Int32) -> String {
        switch code {
        case EADDRINUSE: return "the address is already in use (another process listens on it)"
        case EADDRNOTAVAIL: return "the address is not one of this machine's"
        case EACCES: return "permission denied (ports below 1024 need privileges)"
        case ECONNREFUSED: return "connection refused (nothing listens there)"
        default:
            return SystemErrorText.text(code, otherwise: "system error \(code)").lowercased()
        }
    }
}
