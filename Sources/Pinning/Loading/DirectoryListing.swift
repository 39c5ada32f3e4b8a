import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The names in a directory as the file system holds them: bytes, with the UTF-8 text when they are UTF-8.
///
/// FileManager's `contentsOfDirectory` decodes each name as UTF-8 and replaces bytes that are not with U+FFFD: a
/// file `b\xFF.pem` is listed as `b\u{FFFD}.pem`, a name that does not exist, so a reader either fails on a name
/// nobody wrote ("no such file") or skips the file without a word. Each caller of this listing decides instead,
/// with its reason beside the call, whether a name that is not UTF-8 is refused (naming the directory and the
/// name, escaped: ``escaped(_:)``) or cannot be one it reads.
package enum DirectoryListing {
    /// One name in a directory.
    package struct Entry {
        /// The name's bytes.
        package var bytes: [UInt8]
        /// The name, or nil when its bytes are not UTF-8.
        package var name: String?
        /// The name as text whatever its bytes: UTF-8 decoded, bytes that are not replaced (U+FFFD). For tests of
        /// its form (an extension) only, never to open the file.
        package var lossyName: String { String(decoding: self.bytes, as: UTF8.self) }
        /// The name for a message: ``DirectoryListing/escaped(_:)``.
        package var escaped: String { DirectoryListing.escaped(self.bytes) }
        /// The name as a person sees it, or why it cannot be read so: its bytes are not UTF-8, or it holds a
        /// character that does not show (``VisibleText/isHidden(_:)``: a control, format or other invisible
        /// character), so a message naming it could not be read as the name (ESC in a name would act on the
        /// terminal) and two names could look the same.
        package var shown: Result<String, Unshown> {
            guard let name else { return .failure(Unshown(reason: "the file name is not UTF-8")) }
            guard !name.unicodeScalars.contains(where: VisibleText.isHidden) else {
                return .failure(Unshown(reason: "the file name has a control or invisible character"))
            }
            return .success(name)
        }
    }

    /// Why a name cannot be shown as it is (``Entry/shown``), in words for a message.
    package struct Unshown: Error {
        package var reason: String
    }

    /// Why a directory could not be listed: the errno of `opendir(3)` or `readdir(3)`.
    package struct Failure: Error {
        package var code: CInt
        /// The errno in words ("permission denied").
        package var words: String { BoundedFileReader.words(self.code) }
    }

    /// Every name in `path` but `.` and `..`, in the order the file system gives them.
    package static func entries(atPath path: String) throws(Failure) -> [Entry] {
        guard let directory = opendir(path) else {
            let code = errno  // Copied at once, as each errno here.
            throw Failure(code: code)
        }
        defer { closedir(directory) }
        var entries: [Entry] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                let code = errno
                if code != 0 { throw Failure(code: code) }
                return entries
            }
            let bytes = withUnsafeBytes(of: &entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if bytes == [0x2E] || bytes == [0x2E, 0x2E] { continue }
            entries.append(Entry(bytes: bytes, name: String(validating: bytes, as: UTF8.self)))
        }
    }

    /// `bytes` for a message: each UTF-8 character by ``VisibleText``'s rules (`é` kept, ESC as `\u{1b}`, a
    /// backslash before `u`, `x`, `"` or the end as `\u{5c}`), each byte that is not UTF-8 as `\xNN` (`b\xFF.pem`), so a name that is not UTF-8, or
    /// carries control characters, is shown without reaching a terminal raw.
    package static func escaped(_ bytes: some Sequence<UInt8>) -> String {
        VisibleText.escaped(bytes: bytes)
    }
}
