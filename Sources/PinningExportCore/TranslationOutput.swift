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
/// standard error, one line each, then its text to `--out PATH` or standard output (also for `--out -`). Shared by the `pinning`
/// executable (export) and `pinning-config-import` (import), so both print the same lines and treat a path alike.
///
/// How a path is written depends on what is there, as `curl -o` and `openssl … -out` do it for special files:
/// - nothing, or a regular file: replaced atomically (a new file beside it, renamed over it), so a reader never
///   sees half a file and a failed write leaves the old one whole;
/// - a FIFO or a character device (a pipe another program reads, `/dev/full`): written in place, never replaced;
///   renaming over it would swap the device node or FIFO for a regular file (as root, that replaced `/dev/full`
///   itself). A FIFO gets the bound every input file gets for its reader to come (``BoundedFileReader/waitSeconds``),
///   then the write is refused; a write error (ENOSPC on `/dev/full`) is one line naming the option, exit 2;
/// - a symbolic link (`/dev/stdout`, which links to /proc/self/fd/1): written through, in place;
/// - a block device (a disk), a directory or a socket: refused.
package enum TranslationOutput {
    /// The output could not be written; `message` names `--out` and its path.
    package struct Failure: Error {
        package var message: String
    }

    /// `pinning: config COMMAND: warning: …` and `… note: …` lines on standard error, then the text.
    package static func write(_ translation: Translation, command: String, to path: String?) throws(Failure) {
        // Standard error's own failures are not reported anywhere else, so they are let go; FileHandle's `write`
        // would trap on them instead.
        for warning in translation.warnings {
            _ = DescriptorWriter.writeAll(Array("pinning: config \(command): warning: \(warning.description)\n".utf8), to: STDERR_FILENO)
        }
        for note in translation.notes {
            _ = DescriptorWriter.writeAll(Array("pinning: config \(command): note: \(note)\n".utf8), to: STDERR_FILENO)
        }
        try self.write(translation.text, to: path)
    }

    /// `text` to `path` as above, or to standard output without one (a full disk or a closed descriptor there is
    /// a one-line failure too, never a trap).
    package static func write(_ text: String, to path: String?, option: String = "--out") throws(Failure) {
        let bytes = Array(text.utf8)
        // `-` is standard output, as for `curl -o -` and `openssl … -out -` (it made a file named `-`; NU3). A file
        // of that name is still reached as `./-`.
        guard let path, path != "-" else {
            if let code = DescriptorWriter.writeAll(bytes, to: STDOUT_FILENO) {
                throw Failure(message: "standard output: cannot write it (\(BoundedFileReader.words(code)))")
            }
            return
        }
        func failure(_ words: String) -> Failure { Failure(message: "\(option) \(path): \(words)") }
        // A symbolic link is written through, in place, as curl -o and openssl -out do: `/dev/stdout` is a link to
        // /proc/self/fd/1, and replacing the path would put a regular file where the link was (as root, in /dev).
        let isLink = (try? BoundedFileReader.fileType(atPath: path, followingLinks: false).get()) == UInt32(S_IFLNK)
        switch BoundedFileReader.fileType(atPath: path, followingLinks: true) {
        case .success(let bits):
            let type = mode_t(bits)
            switch type {
            case S_IFREG where isLink:
                try self.writeInPlace(path, bytes, regular: true, fifo: false, failure: failure)
            case S_IFREG:
                // The replacement keeps the permission bits, never setuid, setgid or sticky.
                try self.replace(path, with: bytes, mode: Self.permissions(path), failure: failure)
            case S_IFDIR:
                throw failure("the path is a directory, not a file")
            case S_IFIFO, S_IFCHR:
                try self.writeInPlace(path, bytes, regular: false, fifo: type == S_IFIFO, failure: failure)
            case S_IFBLK:
                throw failure("the path is a block device (a disk), which is never written")
            default:
                throw failure("the path is a socket or another special file, which cannot be written")
            }
        case .failure(let error) where error.code == ENOENT:
            if isLink {
                // A link to a file that does not exist yet: created through the link, as curl -o does.
                try self.writeInPlace(path, bytes, regular: true, fifo: false, failure: failure)
            } else {
                try self.replace(path, with: bytes, mode: nil, failure: failure)
            }
        case .failure(let error):
            throw failure(BoundedFileReader.words(error.code))
        }
    }

    /// The permission bits (0o777, never setuid, setgid or sticky) of the file at `path`, or nil.
    private static func permissions(_ path: String) -> mode_t? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let number = attributes[.posixPermissions] as? NSNumber
        else { return nil }
        return mode_t(number.uint16Value) & 0o777
    }

    /// Writes `bytes` to a new file beside `path` and renames it over `path`; the new file keeps `mode` (the
    /// replaced file's permissions) or, for a new path, the umask's.
    private static func replace(_ path: String, with bytes: [UInt8], mode: mode_t?, failure: (String) -> Failure) throws(Failure) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[...$0]) } ?? ""
        var temporary = ""
        var descriptor: CInt = -1
        for _ in 0..<16 {
            // Short, whatever the name's length (a name near 255 bytes plus a suffix would not fit).
            temporary = directory + ".pinning-out-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
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
        if let code = DescriptorWriter.writeAll(bytes, to: descriptor) { throw abandon(code) }
        // On the disk before the rename, so a crash after it never leaves an empty or partial file (Foundation's
        // atomic write, which this replaced, did the same).
        if fsync(descriptor) != 0 { throw abandon(errno) }
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

    /// Writes `bytes` into what `path` names without replacing it: a FIFO or character device as it is, a regular
    /// file behind a symbolic link truncated (`regular`, created through the link when missing).
    private static func writeInPlace(_ path: String, _ bytes: [UInt8], regular: Bool, fifo: Bool, failure: (String) -> Failure) throws(Failure) {
        // Non-blocking first: a FIFO with no reader would block open(2) forever (ENXIO instead).
        let flags = O_WRONLY | O_NONBLOCK | O_CLOEXEC | (regular ? O_CREAT | O_TRUNC : 0)
        var descriptor = open(path, flags, 0o666)
        var code = descriptor < 0 ? errno : 0
        let wait = BoundedFileReader.waitSeconds
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(wait * 1_000_000_000)
        // Only a FIFO's ENXIO means "no reader yet"; a device without its driver, or a socket, says ENXIO at once.
        while fifo && descriptor < 0 && code == ENXIO && DispatchTime.now().uptimeNanoseconds < deadline {
            usleep(50_000)
            descriptor = open(path, flags, 0o666)
            code = descriptor < 0 ? errno : 0
        }
        guard descriptor >= 0 else {
            if fifo && code == ENXIO {
                let seconds = wait == wait.rounded() ? "\(Int(wait)) s" : "\(wait) s"
                throw failure("no process opened this FIFO for reading within \(seconds)")
            }
            throw failure("cannot open it for writing (\(BoundedFileReader.words(code)))")
        }
        defer { close(descriptor) }
        let current = fcntl(descriptor, F_GETFL)
        guard current >= 0, fcntl(descriptor, F_SETFL, current & ~O_NONBLOCK) == 0 else {
            throw failure("cannot write it (\(BoundedFileReader.words(errno)))")
        }
        if let code = DescriptorWriter.writeAll(bytes, to: descriptor) {
            throw failure("cannot write it (\(BoundedFileReader.words(code)))")
        }
    }
}
