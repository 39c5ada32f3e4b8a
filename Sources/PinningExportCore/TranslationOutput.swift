import Foundation
import Pinning

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// How `pinning config export` and `pinning config import` write a ``Translation``: its warnings and notes on
/// standard error, one line each, then its text to `--out PATH` or standard output. Shared by the `pinning`
/// executable (export) and `pinning-config-import` (import), so both print the same lines and treat a path alike.
///
/// How a path is written depends on what is there, as `curl -o` and `openssl … -out` do it for special files:
/// - nothing, or a regular file: replaced atomically (a new file beside it, renamed over it), so a reader never
///   sees half a file and a failed write leaves the old one whole;
/// - a FIFO or a character or block device (`/dev/stdout`, a pipe another program reads, `/dev/full`): written in
///   place, never replaced; renaming over it would swap the device node or FIFO for a regular file (as root, that
///   replaced `/dev/full` itself). A FIFO gets the bound every input file gets for its reader to come
///   (``BoundedFileReader/waitSeconds``), then the write is refused; a write error (ENOSPC on `/dev/full`) is one
///   line naming the option, exit 2;
/// - a directory or a socket: refused.
package enum TranslationOutput {
    /// The output could not be written; `message` names `--out` and its path.
    package struct Failure: Error {
        package var message: String
    }

    /// `pinning: config COMMAND: warning: …` and `… note: …` lines on standard error, then the text.
    package static func write(_ translation: Translation, command: String, to path: String?) throws(Failure) {
        for warning in translation.warnings {
            FileHandle.standardError.write(Data("pinning: config \(command): warning: \(warning.description)\n".utf8))
        }
        for note in translation.notes {
            FileHandle.standardError.write(Data("pinning: config \(command): note: \(note)\n".utf8))
        }
        try self.write(translation.text, to: path)
    }

    /// `text` to `path` as above, or to standard output without one.
    package static func write(_ text: String, to path: String?, option: String = "--out") throws(Failure) {
        guard let path else {
            FileHandle.standardOutput.write(Data(text.utf8))
            return
        }
        func failure(_ words: String) -> Failure { Failure(message: "\(option) \(path): \(words)") }
        let bytes = Array(text.utf8)
        var info = stat()
        if stat(path, &info) == 0 {
            switch info.st_mode & S_IFMT {
            case S_IFREG:
                try self.replace(path, with: bytes, mode: info.st_mode & 0o7777, failure: failure)
            case S_IFDIR:
                throw failure("the path is a directory, not a file")
            case S_IFIFO, S_IFCHR, S_IFBLK:
                try self.writeInPlace(path, bytes, failure: failure)
            default:
                throw failure("the path is a socket or another special file, which cannot be written")
            }
        } else if errno == ENOENT {
            try self.replace(path, with: bytes, mode: nil, failure: failure)
        } else {
            throw failure(BoundedFileReader.words(errno))
        }
    }

    /// Writes `bytes` to a new file beside `path` and renames it over `path`; the new file keeps `mode` (the
    /// replaced file's permissions) or, for a new path, the umask's.
    private static func replace(_ path: String, with bytes: [UInt8], mode: mode_t?, failure: (String) -> Failure) throws(Failure) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        var temporary = ""
        var descriptor: CInt = -1
        for _ in 0..<16 {
            temporary = directory + ".\(name).tmp-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
            descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
            if descriptor >= 0 || errno != EEXIST { break }
        }
        guard descriptor >= 0 else { throw failure("cannot create a file beside it (\(BoundedFileReader.words(errno)))") }
        func abandon(_ code: CInt) -> Failure {
            close(descriptor)
            unlink(temporary)
            return failure("cannot write it (\(BoundedFileReader.words(code)))")
        }
        if let mode, fchmod(descriptor, mode) != 0 { throw abandon(errno) }
        if let code = Self.writeAll(bytes, to: descriptor) { throw abandon(code) }
        guard close(descriptor) == 0 else {
            let code = errno
            unlink(temporary)
            throw failure("cannot write it (\(BoundedFileReader.words(code)))")
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw failure("cannot write it (\(BoundedFileReader.words(code)))")
        }
    }

    /// Writes `bytes` into an existing FIFO or device without creating, truncating or replacing it.
    private static func writeInPlace(_ path: String, _ bytes: [UInt8], failure: (String) -> Failure) throws(Failure) {
        // Non-blocking first: a FIFO with no reader would block open(2) forever (ENXIO instead).
        var descriptor = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        var code = descriptor < 0 ? errno : 0
        let wait = BoundedFileReader.waitSeconds
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(wait * 1_000_000_000)
        while descriptor < 0 && code == ENXIO && DispatchTime.now().uptimeNanoseconds < deadline {
            usleep(50_000)
            descriptor = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            code = descriptor < 0 ? errno : 0
        }
        guard descriptor >= 0 else {
            if code == ENXIO {
                let seconds = wait == wait.rounded() ? "\(Int(wait)) s" : "\(wait) s"
                throw failure("no process opened this FIFO for reading within \(seconds)")
            }
            throw failure("cannot open it for writing (\(BoundedFileReader.words(code)))")
        }
        defer { close(descriptor) }
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0, fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) == 0 else {
            throw failure("cannot write it (\(BoundedFileReader.words(errno)))")
        }
        if let code = Self.writeAll(bytes, to: descriptor) {
            throw failure("cannot write it (\(BoundedFileReader.words(code)))")
        }
    }

    /// Writes every byte; the `errno` of the first failure, or nil.
    private static func writeAll(_ bytes: [UInt8], to descriptor: CInt) -> CInt? {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { buffer in
                posixWrite(descriptor, buffer.baseAddress, buffer.count)
            }
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += written
        }
        return nil
    }
}

/// write(2), named apart from ``TranslationOutput``'s own `write` methods.
private func posixWrite(_ descriptor: CInt, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    write(descriptor, buffer, count)
}
