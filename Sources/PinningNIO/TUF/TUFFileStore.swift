import Foundation
import Pinning

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

/// Files of a TUF client: bounded reads, and writes that are atomic and durable.
///
/// A write goes to a new temporary file in the same directory (named `.tmp-…`, so it never looks like metadata,
/// `*.json`, nor like a downloaded target to a listing that skips dot files), is flushed to disk (`fsync`), then
/// renamed over the destination, and the directory is flushed so the rename itself survives a crash. At any instant
/// the destination holds either the whole old file or the whole new one: a crash can never leave a truncated
/// `timestamp.json` that a later run would fail to read and so skip as the reference for rollback checks.
///
/// A caller that replaces several files of one directory in a row may leave the directory's flush to one
/// ``syncDirectory(_:role:)`` after the last rename (`syncDirectory: false`): each file's contents are still on disk
/// before its rename, so whichever renames a crash loses, every name holds a whole file, the old one or the new one.
/// The caller says why losing some of those renames is safe for what it stores.
///
/// Every message of the errors thrown here is display text, as a ``TUFError``'s always is: the paths and the system's
/// words in it are escaped by VisibleText (a path may hold any character but NUL, a role's file name among them).
enum TUFFiles {
    /// The contents of `path`, or nil when it does not exist. A file longer than `maximumLength` is an error, read
    /// no further than the cap.
    static func readFile(_ path: String, maximumLength: Int, role: String) throws(TUFError) -> [UInt8]? {
        // The reader of every input file: a FIFO or pipe (`tuf init <(…)`) is read for a bounded time, never waited
        // for forever. "Missing" is what its one `open(2)` answered, and the type and size it checks are those of the
        // descriptor it then reads: no `stat` of the path before, whose file could be swapped before the open.
        do {
            return try BoundedFileReader.readIfPresent(atPath: path, maximumSize: maximumLength)
        } catch {
            if error.code == .fileTooLarge {
                throw TUFError(role: role, rule: .tooLarge, "\(VisibleText.escaped(path)) is over its cap of \(maximumLength) bytes")
            }
            throw TUFError(role: role, rule: .unavailable, "cannot read \(VisibleText.escaped(path)): \(VisibleText.escaped(error.problem))")
        }
    }

    /// Replaces `name` in `directory` with `bytes`, atomically and durably (see the type's comment).
    ///
    /// With `onlyIfAbsent`, a file already at `name` is left as it is (and `false` returned): the whole file is put
    /// there with `link(2)`, which never replaces a name, instead of `rename(2)`, so two writers racing for a name
    /// that is missing leave one whole file, never a replaced or partial one.
    @discardableResult
    static func writeFileAtomically(
        _ bytes: [UInt8], directory: String, name: String, role: String, syncDirectory: Bool = true, onlyIfAbsent: Bool = false
    ) throws(TUFError) -> Bool {
        let destination = directory + "/" + name
        var temporary = ""
        var descriptor: Int32 = -1
        for _ in 0..<16 {
            temporary = directory + "/.tmp-" + TUFFiles.randomSuffix()
            descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if descriptor >= 0 || errno != EEXIST { break }
        }
        guard descriptor >= 0 else {
            throw TUFError(role: role, rule: .unavailable, "cannot create a file in \(VisibleText.escaped(directory)): \(Self.words(errno))")
        }
        func fail(_ what: String, code: CInt) -> TUFError {
            let reason = Self.words(code)
            close(descriptor)
            unlink(temporary)
            return TUFError(role: role, rule: .unavailable, "cannot write \(VisibleText.escaped(destination)): \(what): \(reason)")
        }
        if let code = DescriptorWriter.writeAll(bytes, to: descriptor) { throw fail("write", code: code) }
        guard fsync(descriptor) == 0 else { throw fail("fsync", code: errno) }
        guard close(descriptor) == 0 else {
            let reason = Self.words(errno)
            unlink(temporary)
            throw TUFError(role: role, rule: .unavailable, "cannot write \(VisibleText.escaped(destination)): close: \(reason)")
        }
        if onlyIfAbsent {
            let linked = link(temporary, destination) == 0
            let code = errno
            unlink(temporary)
            if !linked && code == EEXIST { return false }
            guard linked else { throw TUFError(role: role, rule: .unavailable, "cannot write \(VisibleText.escaped(destination)): link: \(Self.words(code))") }
        } else {
            guard rename(temporary, destination) == 0 else {
                let reason = Self.words(errno)
                unlink(temporary)
                throw TUFError(role: role, rule: .unavailable, "cannot write \(VisibleText.escaped(destination)): rename: \(reason)")
            }
        }
        // The rename (or link) is durable only once the directory is.
        if syncDirectory {
            try Self.syncDirectory(directory, role: role)
        }
        return true
    }

    /// Flushes `directory` (`fsync`), so the names created, renamed or removed in it so far survive a crash.
    static func syncDirectory(_ directory: String, role: String) throws(TUFError) {
        let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryDescriptor >= 0 else {
            throw TUFError(role: role, rule: .unavailable, "cannot flush \(VisibleText.escaped(directory)): \(Self.words(errno))")
        }
        defer { close(directoryDescriptor) }
        guard fsync(directoryDescriptor) == 0 else {
            throw TUFError(role: role, rule: .unavailable, "cannot flush \(VisibleText.escaped(directory)): \(Self.words(errno))")
        }
    }

    /// Creates `path` (it must not exist) holding `bytes`, not flushed: a later ``syncFile(_:role:)`` makes it
    /// durable. For files that nothing refers to until that flush and the commit after it (a pin set's staging
    /// directory).
    static func createFile(_ bytes: [UInt8], path: String, role: String) throws(TUFError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw TUFError(role: role, rule: .unavailable, "cannot create \(VisibleText.escaped(path)): \(Self.words(errno))")
        }
        if let code = DescriptorWriter.writeAll(bytes, to: descriptor) {
            let reason = Self.words(code)
            close(descriptor)
            throw TUFError(role: role, rule: .unavailable, "cannot write \(VisibleText.escaped(path)): \(reason)")
        }
        guard close(descriptor) == 0 else {
            throw TUFError(role: role, rule: .unavailable, "cannot write \(VisibleText.escaped(path)): close: \(Self.words(errno))")
        }
    }

    /// Flushes the contents of the file at `path` to disk (`fsync`).
    static func syncFile(_ path: String, role: String) throws(TUFError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw TUFError(role: role, rule: .unavailable, "cannot flush \(VisibleText.escaped(path)): \(Self.words(errno))")
        }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw TUFError(role: role, rule: .unavailable, "cannot flush \(VisibleText.escaped(path)): \(Self.words(errno))")
        }
    }

    /// Why ``makeDirectories(_:)`` failed: `path`, the part of the path at fault, exists and is not a directory
    /// (`kind` says what it is: "a FIFO", "a regular file"), or `mkdir(2)` failed with `code`.
    struct DirectoryFailure: Error {
        var path: String
        var kind: String?
        var code: CInt

        /// The fault in words, naming the part of the path: `repo/metadata is a FIFO, not a directory`, or
        /// `repo: permission denied`. Never Foundation's text.
        var description: String {
            if let kind { return "\(VisibleText.escaped(self.path)) is \(kind), not a directory" }
            return "\(VisibleText.escaped(self.path)): \(VisibleText.escaped(BoundedFileReader.words(self.code)))"
        }
    }

    /// Creates the directory `path` and any missing parents (`mkdir -p`), with `mkdir(2)` and `stat(2)` so that a
    /// part of the path that exists as something else (a FIFO, a file, a device) is named with what it is, which
    /// FileManager reports only as "file exists" or an unrelated Cocoa error. A part that is a symbolic link to a
    /// directory is followed.
    static func makeDirectories(_ path: String) throws(DirectoryFailure) {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/") {
            prefix += (prefix.isEmpty || prefix.hasSuffix("/") ? "" : "/") + part
            // 0o777 less the process's umask, as FileManager and `mkdir -p` make directories.
            if mkdir(prefix, 0o777) == 0 { continue }
            let code = errno
            var info = stat()
            guard code == EEXIST || code == ENOTDIR || code == EACCES || code == EROFS, stat(prefix, &info) == 0 else {
                // A symbolic link whose target does not exist: mkdir says it exists, stat that nothing is there.
                var link = stat()
                if code == EEXIST, lstat(prefix, &link) == 0, link.st_mode & S_IFMT == S_IFLNK {
                    throw DirectoryFailure(path: prefix, kind: "a symbolic link to nothing", code: code)
                }
                throw DirectoryFailure(path: prefix, kind: nil, code: code)
            }
            let type = info.st_mode & S_IFMT
            if type == S_IFDIR { continue }
            let kind =
                switch type {
                case S_IFIFO: "a FIFO"
                case S_IFREG: "a regular file"
                case S_IFCHR, S_IFBLK: "a device"
                case S_IFSOCK: "a socket"
                default: "not a directory"
                }
            throw DirectoryFailure(path: prefix, kind: kind, code: code)
        }
    }

    /// `strerror(code)`, escaped as every other piece of a message here is (VisibleText): the system's words.
    static func words(_ code: CInt) -> String {
        VisibleText.escaped(SystemErrorText.text(code))
    }

    static func randomSuffix() -> String {
        var generator = SystemRandomNumberGenerator()
        return String(generator.next() as UInt64, radix: 36)
    }
}
