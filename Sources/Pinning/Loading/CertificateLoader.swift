import Foundation
public import X509

/// Loads X.509 certificates from files, directories and bytes, whatever their encoding.
///
/// The format is detected from the content, never from the file name:
/// - **PEM** when the input contains `-----BEGIN`: every `CERTIFICATE`, `X509 CERTIFICATE` and
///   `TRUSTED CERTIFICATE` block, and the certificates of `PKCS7`/`CMS` blocks, in file order. Text around
///   the blocks, CRLF line endings and other blocks (keys, CRLs) are tolerated.
/// - **DER**: one certificate.
/// - **PKCS#7** (`.p7b`, `.p7c`), DER or BER (indefinite lengths, as some tools write): the certificates of a
///   SignedData bundle, as produced by `openssl crl2pkcs7 -nocrl -certfile chain.pem`.
///
/// Every failure is a ``CertificateLoadingError`` naming the file and what is wrong with it. Loading is
/// all-or-nothing: one bad certificate fails the whole load. Use ``TrustRoots`` to load a trust store that
/// skips (and reports) bad entries instead.
///
/// ```swift
/// let chain = try CertificateLoader.certificates(fromFile: "chain.pem")
/// let anchors = try CertificateLoader.certificates(inDirectory: "certs/")
/// ```
public enum CertificateLoader {
    /// The largest file (or byte buffer) that is read: 16 MiB.
    ///
    /// Larger inputs fail with ``CertificateLoadingError/Code/fileTooLarge`` before anything is read. The
    /// biggest public CA bundles are well under 1 MiB.
    public static let maximumFileSize: Int = 16 * 1024 * 1024

    /// The file name extensions read by ``certificates(inDirectory:)``, compared case-insensitively.
    static let directoryExtensions: Set<String> = ["cer", "crt", "der", "pem"]

    /// The certificates in a file (PEM, DER or PKCS#7; detected from the content), in file order.
    ///
    /// - Parameter path: The file to read.
    /// - Returns: At least one certificate.
    /// - Throws: ``CertificateLoadingError`` whose ``CertificateLoadingError/origin`` is `path`: the file is
    ///   missing, unreadable, a directory, too large or empty, holds no certificate, or any certificate in it
    ///   is malformed or has an unsupported key type.
    public static func certificates(fromFile path: String) throws(CertificateLoadingError) -> [Certificate] {
        let bytes = try Self.readFile(atPath: path)
        return try CertificateParser.certificates(from: bytes, origin: path)
    }

    /// The certificates in a byte buffer (PEM, DER or PKCS#7; detected from the content), in order.
    ///
    /// This does not touch the file system, so it is safe to feed untrusted or fuzzed bytes.
    ///
    /// - Parameters:
    ///   - bytes: The encoded certificates; at most ``maximumFileSize`` bytes.
    ///   - origin: What to call the input in errors: a path, a URL or a label such as `"<stdin>"`.
    /// - Returns: At least one certificate.
    /// - Throws: ``CertificateLoadingError`` with ``CertificateLoadingError/origin`` set to `origin`.
    public static func certificates(
        from bytes: [UInt8],
        origin: String
    ) throws(CertificateLoadingError) -> [Certificate] {
        try CertificateParser.certificates(from: bytes, origin: origin)
    }
    /// The certificate files of a directory; a directory without any is an error naming it.
    static func nonEmptyCertificateFiles(inDirectory path: String) throws(CertificateLoadingError) -> [String] {
        let files = try Self.certificateFiles(inDirectory: path)
        guard !files.isEmpty else {
            throw CertificateLoadingError(
                code: .noCertificates,
                origin: path,
                problem: "the directory has no .cer, .crt, .der or .pem files"
            )
        }
        return files
    }

    /// The certificates of every `.cer`, `.crt`, `.der` and `.pem` file in a directory, like
    /// AFSecurityPolicy's `certificatesInBundle:`.
    ///
    /// The directory is not searched recursively; the extensions are matched case-insensitively; files are
    /// read in order of their names (compared by Unicode scalars, independent of the locale) and each file's
    /// certificates keep their order. Other files and subdirectories are ignored.
    ///
    /// - Parameter path: The directory.
    /// - Returns: At least one certificate.
    /// - Throws: ``CertificateLoadingError``: ``CertificateLoadingError/Code/notADirectory`` or
    ///   ``CertificateLoadingError/Code/unreadableFile`` naming the directory,
    ///   ``CertificateLoadingError/Code/noCertificates`` when it has no certificate files, or the error of the
    ///   first bad file, naming that file.
    public static func certificates(inDirectory path: String) throws(CertificateLoadingError) -> [Certificate] {
        let files = try Self.nonEmptyCertificateFiles(inDirectory: path)
        var certificates: [Certificate] = []
        for file in files {
            certificates.append(contentsOf: try Self.certificates(fromFile: file))
        }
        return certificates
    }

    /// The certificates at a path: ``certificates(inDirectory:)`` for a directory,
    /// ``certificates(fromFile:)`` otherwise.
    ///
    /// - Parameter path: A file or a directory.
    /// - Returns: At least one certificate.
    /// - Throws: ``CertificateLoadingError`` naming the file or directory at fault.
    package static func certificates(atPath path: String) throws(CertificateLoadingError) -> [Certificate] {
        if try Self.isDirectory(path) {
            return try Self.certificates(inDirectory: path)
        }
        return try Self.certificates(fromFile: path)
    }

    // MARK: File system

    /// Whether `path` is a directory (following symbolic links); throws if nothing is there.
    static func isDirectory(_ path: String) throws(CertificateLoadingError) -> Bool {
        switch BoundedFileReader.status(atPath: path, followingLinks: true) {
        case .success(let status):
            return status.isDirectory
        case .failure(let failure):
            // The system's words for why (no such file, permission denied, too many levels of symbolic links).
            throw CertificateLoadingError(code: .unreadableFile, origin: path, problem: BoundedFileReader.words(failure.code))
        }
    }

    /// The status of `path` (following symbolic links), or nil when there is none
    /// (``BoundedFileReader/status(atPath:followingLinks:)``).
    static func status(_ path: String) -> BoundedFileReader.FileStatus? {
        guard case .success(let status) = BoundedFileReader.status(atPath: path, followingLinks: true) else { return nil }
        return status
    }

    /// The regular files directly in a directory whose extension is one of ``directoryExtensions``, full paths,
    /// sorted by file name.
    static func certificateFiles(inDirectory path: String) throws(CertificateLoadingError) -> [String] {
        try Self.files(inDirectory: path) { name in
            guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return false }
            return Self.directoryExtensions.contains(name[name.index(after: dot)...].lowercased())
        }
    }

    /// The regular files (symbolic links followed) directly in a directory whose names pass `include`, as full
    /// paths sorted by file name.
    static func files(
        inDirectory path: String,
        include: (String) -> Bool
    ) throws(CertificateLoadingError) -> [String] {
        let listing = try Self.listing(inDirectory: path, include: include)
        // A name this directory's reader would read (its extension, or hash form, says so) whose bytes are not
        // UTF-8 is refused, naming it: not read under another name (FileManager's U+FFFD, "no such file"), nor
        // skipped, since the files of an anchors, roots or CRL directory decide what is trusted and a file
        // left out without a word changes that decision. Reading it by its bytes would take byte paths through
        // every reader and message; a refusal the user fixes with one rename fails closed instead. A name the
        // reader would not read whatever its bytes (another extension) is left alone, as any such name is.
        // (The platform store, which never throws, skips such a name and reports it: TrustRoots.platform.)
        // The same for a UTF-8 name with a control or invisible character: a message naming it would act on the
        // terminal, or read as another name.
        if let unshown = listing.unshownNames.first {
            throw CertificateLoadingError(
                code: .unreadableFile, origin: unshown.origin,
                problem: "\(unshown.reason); rename it (a file of this directory is read under its exact name or refused, never skipped)")
        }
        return listing.files
    }

    /// What ``files(inDirectory:include:)`` lists, without refusing: the regular files whose names pass `include`
    /// (full paths sorted by file name), and, for each name that passes `include` but is not UTF-8 or holds a
    /// character that does not show (``DirectoryListing/Entry/shown``), the path to name it in a message
    /// (the directory, then the name escaped: ``DirectoryListing/escaped(_:)``) and the reason, in the order the
    /// file system lists them. The caller decides what such a name means (see ``files(inDirectory:include:)``).
    static func listing(
        inDirectory path: String,
        include: (String) -> Bool
    ) throws(CertificateLoadingError) -> (files: [String], unshownNames: [(origin: String, reason: String)]) {
        guard try Self.isDirectory(path) else {
            throw CertificateLoadingError(code: .notADirectory, origin: path, problem: "the path is not a directory")
        }
        let entries: [DirectoryListing.Entry]
        do {
            entries = try DirectoryListing.entries(atPath: path)
        } catch {
            throw CertificateLoadingError(
                code: .unreadableFile,
                origin: path,
                problem: "the directory cannot be listed (\(error.words))"
            )
        }
        var names: [String] = []
        var unshownNames: [(origin: String, reason: String)] = []
        for entry in entries where include(entry.lossyName) {
            switch entry.shown {
            case .success(let name): names.append(name)
            case .failure(let unshown): unshownNames.append(((path.hasSuffix("/") ? path : path + "/") + entry.escaped, unshown.reason))
            }
        }
        var files: [String] = []
        for name in names.sorted(by: { $0.unicodeScalars.lexicographicallyPrecedes($1.unicodeScalars) }) {
            let file = path.hasSuffix("/") ? path + name : path + "/" + name
            // Only regular files (after following symbolic links, as /etc/ssl/certs is made of them): a FIFO
            // or a device named "x.pem" must not block or feed the loader forever.
            guard let status = Self.status(file) else {
                // A dangling symbolic link or a vanished file: reported when it is read, like any unreadable file.
                files.append(file)
                continue
            }
            if status.isRegularFile {
                files.append(file)
            }
        }
        return (files, unshownNames)
    }

    /// Reads a whole file, refusing files over ``maximumFileSize`` before reading them. Pipes, FIFOs and
    /// `/dev/fd/N` (shell process substitution) are read up to the limit, for a bounded time
    /// (``BoundedFileReader``). Every option of the CLI that reads a file (certificates, identities, keys,
    /// passphrase files, configurations) reads it through here.
    package static func readFile(
        atPath path: String,
        maximumSize: Int = CertificateLoader.maximumFileSize
    ) throws(CertificateLoadingError) -> [UInt8] {
        try BoundedFileReader.read(atPath: path, maximumSize: maximumSize)
    }
}
