import Foundation

// `stat(2)` and its struct: with the Swift runtime linked statically, the struct's members are reached through
// CoreFoundation's module rather than Glibc's, so both are imported where they exist.
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
#if canImport(CoreFoundation)
    import CoreFoundation
#endif

/// The one reader of input files: every option of the CLI that reads a file (certificates, configurations, pin set
/// roots, TUF metadata, identities, keys, passphrase files) comes through here, so each says the same words for the
/// same fault.
///
/// Regular files are read up to a size limit, refused from their size before reading when over it. Anything else
/// that is not a directory (a FIFO, the pipe behind `/dev/fd/N` and `<(…)`, a terminal, a device) is read too, as
/// the README promises, but never waited for without bound. The choice, and why:
/// - The file is opened non-blocking: a blocking `open(2)` of a FIFO with no writer waits for one forever, before
///   any deadline could run.
/// - Before each read of a file that is not regular, `poll(2)` waits for bytes or the writer's end, at most until
///   one deadline for the whole file, ``waitSeconds`` (30 s unless the program set another, from `PINNING_INPUT_WAIT`) from the
///   open. Linux reports a FIFO's end (`POLLHUP`) only once a writer has come and gone, so a FIFO nobody ever
///   writes to is told apart from an empty one: it runs into the deadline, which is an error naming the file, not
///   an empty input.
/// - 30 s is long enough for a shell pipeline or `<(curl …)` to produce a certificate or configuration, and short
///   enough that a script with a forgotten writer fails within a CI step's patience. curl and openssl wait forever
///   (they read with blocking calls); a tool whose verdicts guard connections should not.
package enum BoundedFileReader {
    /// The environment variable that sets ``waitSeconds`` (seconds, 0.1 to 3600; anything else keeps 30). Read by
    /// the executables (`pinning`, `pinning-collector`, `pinning-config-import`) once at start, never here: the core
    /// reads no environment (Docs/Architecture.md), so a program that links it gets 30 s unless it says otherwise
    /// through ``setWaitSeconds(fromVariable:)``.
    package static let waitVariable = "PINNING_INPUT_WAIT"

    /// The default bound on reading a FIFO, pipe or device, in seconds.
    package static let defaultWaitSeconds: Double = 30

    /// How long a file that is not a regular file may take to deliver all its bytes, in seconds: 30 unless the
    /// program set another bound (``setWaitSeconds(fromVariable:)``).
    package static var waitSeconds: Double { Self.wait.withLockedValue { $0 } }

    /// Sets ``waitSeconds`` from the text of ``waitVariable`` (nil when it is not set), which the executable read
    /// from its environment before reading any file: seconds from 0.1 to 3600; anything else, or nil, is 30.
    package static func setWaitSeconds(fromVariable text: String?) {
        let seconds = Self.waitSeconds(fromVariable: text)
        Self.wait.withLockedValue { $0 = seconds }
    }

    /// The bound the text of ``waitVariable`` means: seconds from 0.1 to 3600; anything else, or nil, is 30.
    package static func waitSeconds(fromVariable text: String?) -> Double {
        guard let text, let seconds = Double(text), seconds.isFinite, (0.1...3600).contains(seconds) else {
            return Self.defaultWaitSeconds
        }
        return seconds
    }

    /// ``waitSeconds``, set once by the program and read by every reader and writer of a FIFO.
    private static let wait = LockedValueBox(Self.defaultWaitSeconds)

    /// The whole of `path`, at most `maximumSize` bytes.
    ///
    /// - Throws: ``CertificateLoadingError`` with origin `path`: ``CertificateLoadingError/Code/fileTooLarge`` over
    ///   the limit, ``CertificateLoadingError/Code/unreadableFile`` for a missing path, a directory, a permission,
    ///   an I/O error, or a FIFO, pipe or device that did not deliver its bytes within ``waitSeconds``.
    ///
    /// `waitSeconds` is for the tests, which must not change the bound the whole process shares.
    package static func read(atPath path: String, maximumSize: Int, waitSeconds: Double? = nil) throws(CertificateLoadingError) -> [UInt8] {
        guard let bytes = try Self.read(atPath: path, maximumSize: maximumSize, absentIsNil: false, waitSeconds: waitSeconds) else {
            // Not reached: without `absentIsNil` a missing file is thrown as any other unreadable one.
            throw CertificateLoadingError(code: .unreadableFile, origin: path, problem: Self.words(ENOENT))
        }
        return bytes
    }

    /// The whole of `path`, at most `maximumSize` bytes, or nil when nothing is at `path` (`open(2)` answered
    /// `ENOENT`), for callers to whom a missing file is a state (a TUF client's metadata before its first update),
    /// not an error. Anything else is thrown as ``read(atPath:maximumSize:)`` throws it.
    ///
    /// "Missing" is the answer of the one `open(2)` whose descriptor is then read, not of an earlier `stat(2)`: a
    /// file created or replaced between a check and the open could otherwise be judged absent, or judged as one
    /// file and read as another.
    package static func readIfPresent(atPath path: String, maximumSize: Int) throws(CertificateLoadingError) -> [UInt8]? {
        try Self.read(atPath: path, maximumSize: maximumSize, absentIsNil: true, waitSeconds: nil)
    }

    private static func read(atPath path: String, maximumSize: Int, absentIsNil: Bool, waitSeconds: Double?) throws(CertificateLoadingError) -> [UInt8]? {
        func unreadable(_ problem: String) -> CertificateLoadingError {
            CertificateLoadingError(code: .unreadableFile, origin: path, problem: problem)
        }
        // A negative or huge limit (the public pin-set options are plain Ints) must not overflow below.
        let limit = min(max(0, maximumSize), Int.max - 1)
        // Open first, then judge what was opened (`fstat`): a check of the path followed by an open could check one
        // file and read another, swapped in between (a directory, a FIFO, a file over the limit). The open is
        // non-blocking, since a blocking `open(2)` of a FIFO with no writer waits for one forever, before any
        // deadline could run; a directory opens read-only and is refused below, before any read.
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT && absentIsNil { return nil }
            throw unreadable(Self.words(code))
        }
        defer { close(descriptor) }
        var info = stat()
        // Each errno is copied the moment its call fails, before any other code runs (building a message, even the
        // deferred close(2), can change it), and only the copy is read.
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            throw unreadable(Self.words(code))
        }
        let type = info.st_mode & S_IFMT
        if type == S_IFDIR {
            throw unreadable("the path is a directory, not a file")
        }
        // The size limit before any byte is read.
        if type == S_IFREG && info.st_size > Int64(limit) {
            throw Self.tooLarge(path, size: "\(info.st_size) bytes", maximumSize: limit)
        }
        // Regular files are read without waiting; but a file that says it is regular and still answers EAGAIN
        // (trace_pipe, /proc/kmsg, some FUSE files) is then waited for like a pipe, under the same deadline,
        // never read again in a busy loop.
        var isRegular = type == S_IFREG
        let wait = waitSeconds ?? Self.waitSeconds
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(wait * 1_000_000_000)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            if !isRegular {
                let now = DispatchTime.now().uptimeNanoseconds
                let remaining = now < deadline ? Int32(clamping: (deadline - now + 999_999) / 1_000_000) : 0
                var request = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let ready = remaining > 0 ? poll(&request, 1, remaining) : 0
                if ready < 0 {
                    let code = errno
                    if code == EINTR { continue }
                    throw unreadable("the file cannot be read (\(Self.words(code)))")
                }
                if ready == 0 {
                    throw unreadable(Self.timedOut(type: type, bytesRead: bytes.count, wait: wait))
                }
            }
            // Never more than one byte over the limit: that byte tells "exactly the limit" from "too large".
            let wanted = min(chunk.count, limit + 1 - bytes.count)
            // The errno of read(2) is copied inside the closure, right after the call.
            let (count, code) = chunk.withUnsafeMutableBytes { buffer in
                let count = Self.systemRead(descriptor, buffer.baseAddress, wanted)
                return (count, count < 0 ? errno : 0)
            }
            if count < 0 {
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK {
                    isRegular = false
                    continue
                }
                throw unreadable("the file cannot be read (\(Self.words(code)))")
            }
            if count == 0 { return bytes }
            bytes += chunk[0..<count]
            if bytes.count > limit {
                throw Self.tooLarge(path, size: "more than \(limit) bytes", maximumSize: limit)
            }
        }
    }

    static func tooLarge(_ path: String, size: String, maximumSize: Int) -> CertificateLoadingError {
        CertificateLoadingError(code: .fileTooLarge, origin: path, problem: "the file is \(size); the limit is \(maximumSize) bytes")
    }

    private static func timedOut(type: mode_t, bytesRead: Int, wait: Double) -> String {
        let kind =
            switch type {
            case S_IFIFO: "FIFO or pipe"
            case S_IFCHR: "device"
            default: "file"
            }
        let seconds = wait == wait.rounded() ? "\(Int(wait)) s" : "\(wait) s"
        if bytesRead == 0 {
            return "nothing was written to this \(kind) within \(seconds); is its writer missing? (\(Self.waitVariable) sets another bound)"
        }
        return "this \(kind) gave \(bytesRead) bytes but did not end within \(seconds) (\(Self.waitVariable) sets another bound)"
    }

    /// `read(2)`, named apart from the `read` methods in scope.
    private static func systemRead(_ descriptor: CInt, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
        #if canImport(Glibc)
            return Glibc.read(descriptor, buffer, count)
        #elseif canImport(Musl)
            return Musl.read(descriptor, buffer, count)
        #else
            return Darwin.read(descriptor, buffer, count)
        #endif
    }

    /// What `stat(2)` (or `lstat(2)`) says of a path: the fields the package reads, so that no other file reads
    /// `stat`'s struct itself.
    ///
    /// `stat` rather than Foundation's `attributesOfItem`: on Linux that also looks up the owner's and group's
    /// names (reading `/etc/passwd` and `/etc/group`) for every call, and a platform store of ~280 entries made it
    /// most of `pinning evaluate`'s start-up.
    package struct FileStatus: Hashable {
        /// The file's identity: two paths with the same device and inode are the same file.
        package struct Identity: Hashable {
            var device: UInt64
            var inode: UInt64
        }
        package var identity: Identity
        /// The file type bits (`S_IFMT`).
        package var type: UInt32
        package var size: Int64

        package var isDirectory: Bool { mode_t(self.type) == S_IFDIR }
        package var isRegularFile: Bool { mode_t(self.type) == S_IFREG }
    }

    /// The status of what `path` names, following a symbolic link or not, or the errno of the failure.
    package static func status(atPath path: String, followingLinks: Bool) -> Result<FileStatus, FileTypeError> {
        var info = stat()
        let status = followingLinks ? stat(path, &info) : lstat(path, &info)
        guard status == 0 else {
            let code = errno
            return .failure(FileTypeError(code: code))
        }
        return .success(
            FileStatus(
                identity: .init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)),
                type: UInt32(info.st_mode & S_IFMT),
                size: Int64(info.st_size)
            ))
    }

    /// The file type bits (`S_IFMT`) of what `path` names, following a symbolic link or not, or the errno of the
    /// failure (``status(atPath:followingLinks:)``'s type).
    package static func fileType(atPath path: String, followingLinks: Bool) -> Result<UInt32, FileTypeError> {
        Self.status(atPath: path, followingLinks: followingLinks).map(\.type)
    }

    /// A failed `stat` or `lstat`, with its errno.
    package struct FileTypeError: Error {
        package var code: Int32
    }

    /// `code` in words, lower case, as the loader's other problems are written: "no such file or directory".
    package static func words(_ code: CInt) -> String {
        SystemErrorText.words(code)
    }
}
