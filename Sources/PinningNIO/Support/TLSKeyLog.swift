public import Foundation
import NIOConcurrencyHelpers
import NIOCore
public import NIOSSL
import Pinning

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A TLS key log: the session secrets of every handshake, one line each, in the NSS key log format
/// (`SSLKEYLOGFILE`, RFC 9850), so Wireshark or tshark can decrypt a capture of the connections.
///
/// Whoever reads the file can decrypt every connection logged in it. So, as in curl and Go:
/// - nothing logs unless a program hands a `TLSKeyLog` to a client or server (`PinnedTLSClient`,
///   `PinnedHTTPClientConfiguration.keyLog`, `MutualTLSServer`, the proxy's settings); the environment variable
///   is read only by ``fromEnvironment(_:)``, which a program calls only when its user opted in
///   (`--keylog-from-env`);
/// - the file is created with mode 0600 and opened for appending (lines of several programs or runs do not
///   overwrite each other; `O_APPEND` writes of one line are not interleaved);
/// - an existing regular file that other users may read is refused instead of being appended to (curl appends
///   whatever the mode; we fail closed, since the secrets outlive the debugging session).
///
/// <!-- snippet: given(policy: SecurityPolicy, settings: TrustSettings)
/// import Pinning
/// -->
/// ```swift
/// let keyLog = try TLSKeyLog(path: "/tmp/keys.log")
/// let client = try PinnedTLSClient(evaluator: policy, settings: settings, keyLog: keyLog)
/// ```
public final class TLSKeyLog: Sendable, Hashable {
    /// The file's path, as given.
    public let path: String
    private let descriptor: CInt
    private let failure = LockedFailure()

    /// Opens (creating with mode 0600) `path` for appending.
    ///
    /// - Throws: ``TLSKeyLogError`` naming the file when it cannot be created or opened, is not a regular file
    ///   or a character device (`/dev/stderr`), or is a regular file other users may read or write.
    public init(path: String) throws(TLSKeyLogError) {
        guard !path.isEmpty else { throw TLSKeyLogError(path: path, reason: "the path is empty") }
        // Opened non-blocking: a plain open(2) of a FIFO with no reader waits for one forever. A FIFO is given
        // a bounded time for its reader to come (`BoundedFileReader.waitSeconds`, the bound of every input file),
        // then refused; writes are blocking again once it is open, as for any other key log.
        var descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0o600)
        var code = descriptor < 0 ? errno : 0
        let wait = BoundedFileReader.waitSeconds
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(wait * 1_000_000_000)
        // Only a FIFO's ENXIO means "no reader yet"; a socket or a device without its driver says ENXIO at once.
        let isFIFO = (try? BoundedFileReader.fileType(atPath: path, followingLinks: true).get()) == UInt32(S_IFIFO)
        while isFIFO && descriptor < 0 && code == ENXIO && DispatchTime.now().uptimeNanoseconds < deadline {
            usleep(50_000)
            descriptor = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK)
            code = descriptor < 0 ? errno : 0
        }
        guard descriptor >= 0 else {
            if isFIFO && code == ENXIO {
                let seconds = wait == wait.rounded() ? "\(Int(wait)) s" : "\(wait) s"
                throw TLSKeyLogError(path: path, reason: "no process opened this FIFO for reading within \(seconds)")
            }
            throw TLSKeyLogError(path: path, reason: BoundedFileReader.words(code))
        }
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0, fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) == 0 else {
            let code = errno
            close(descriptor)
            throw TLSKeyLogError(path: path, reason: BoundedFileReader.words(code))
        }
        // What was opened: a regular file (then private to its owner), or a character device or pipe
        // (`/dev/stderr`, `<(…)`). Read through the path just opened; the descriptor is ours either way.
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            close(descriptor)
            throw TLSKeyLogError(path: path, reason: "cannot read its attributes")
        }
        let kind = attributes[.type] as? FileAttributeType
        if kind == .typeRegular {
            let mode = (attributes[.posixPermissions] as? Int) ?? 0o777
            guard mode & 0o077 == 0 else {
                close(descriptor)
                throw TLSKeyLogError(
                    path: path,
                    reason: String(format: "other users may read it (mode %03o): session keys must stay private; chmod 600 it or choose a new file", mode)
                )
            }
        } else if kind != .typeCharacterSpecial && kind != .typeUnknown {
            close(descriptor)
            throw TLSKeyLogError(path: path, reason: "not a regular file")
        }
        self.path = path
        self.descriptor = descriptor
    }

    /// Key logs are equal when they are the same object (the same open file).
    public static func == (lhs: TLSKeyLog, rhs: TLSKeyLog) -> Bool { lhs === rhs }

    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    deinit {
        close(self.descriptor)
    }

    /// The key log `SSLKEYLOGFILE` names in `environment`, or nil when it is unset or empty. Call it only when
    /// the user asked for it (curl reads the variable always; Go never does; we follow Go and let the program
    /// opt in).
    ///
    /// - Throws: ``TLSKeyLogError`` as ``init(path:)``.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws(TLSKeyLogError) -> TLSKeyLog? {
        guard let path = environment["SSLKEYLOGFILE"], !path.isEmpty else { return nil }
        return try TLSKeyLog(path: path)
    }

    /// The first write that failed, in words (nil while every line was written). A failed line is not retried:
    /// the connection goes on, only its keys are missing from the file.
    public var writeFailure: String? { self.failure.value }

    /// The callback NIOSSL calls with each line (NSS format, newline-terminated).
    public var callback: NIOSSLKeyLogCallback {
        { [self] line in
            line.withUnsafeReadableBytes { bytes in
                self.append(bytes)
            }
        }
    }

    /// `configuration` with this key log.
    public func applied(to configuration: TLSConfiguration) -> TLSConfiguration {
        var configuration = configuration
        configuration.keyLogCallback = self.callback
        return configuration
    }

    private func append(_ bytes: UnsafeRawBufferPointer) {
        if let code = DescriptorWriter.writeAll(bytes, to: self.descriptor) {
            self.failure.record(BoundedFileReader.words(code))
        }
    }
}

/// Why a key log file cannot be used, naming the file.
public struct TLSKeyLogError: Error, Sendable, CustomStringConvertible {
    /// `keyLogUnusable`: the error's stable code (for logs, metrics and JSON; the words may change).
    public var code: String { "keyLogUnusable" }

    /// The path as given.
    public let path: String
    /// What is wrong, in words.
    public let reason: String

    /// An error for `path`.
    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "cannot use the key log \(self.path): \(self.reason)" }
}

/// The first write failure, kept under a lock (NIOSSL calls the callback on any event loop).
private final class LockedFailure: Sendable {
    private let first = NIOLockedValueBox<String?>(nil)

    var value: String? { self.first.withLockedValue { $0 } }

    func record(_ words: String) {
        self.first.withLockedValue { first in
            if first == nil { first = words }
        }
    }
}
