// Public because the default argument of platform(environment:) is ProcessInfo.processInfo.environment.
public import Foundation
public import X509

/// A set of trust anchors (root certificates), with a report of how it was loaded.
///
/// Unlike swift-certificates' `CertificateStore.systemTrustRoots`, which silently becomes EMPTY when one
/// certificate of the system bundle fails to parse, loading here is per entry: an unparseable certificate is
/// skipped and listed in ``skipped``, and the others are kept. It also honours `SSL_CERT_FILE` and
/// `SSL_CERT_DIR`, as OpenSSL does.
///
/// <!-- snippet:
/// import X509
/// -->
/// ```swift
/// let roots = TrustRoots.platform            // the OS store, loaded once per process
/// for problem in roots.skipped { print("warning: \(problem)") }
/// let custom = try TrustRoots.load(atPath: "corp-roots.pem")
/// let store = CertificateStore(custom.certificates)
/// ```
public struct TrustRoots: Sendable, Hashable {
    /// The trust anchors, without duplicates (compared by DER encoding), in the order they were first found.
    public var certificates: [Certificate]
    /// The files and directories that were read, in order.
    public var sources: [String]
    /// The entries that could not be used: unreadable files, malformed PEM blocks, certificates the verifier does
    /// not support (key type, signature algorithm, negative serial, …). Each error names its file and block; an
    /// unsupported certificate's error also names its subject and the reason in words.
    public var skipped: [CertificateLoadingError]

    /// Trust anchors given directly; duplicates (same DER) are dropped, order is kept.
    ///
    /// - Parameter certificates: The anchors.
    public init(_ certificates: [Certificate]) {
        self.certificates = []
        self.sources = []
        self.skipped = []
        var seen = Seen()
        self.add(certificates, seen: &seen)
    }

    /// The bundle files OpenSSL-based systems use, in the order they are tried when `SSL_CERT_FILE` is unset:
    /// Debian/Ubuntu/Alpine, then Fedora/RHEL, then macOS/BSD.
    static let defaultBundleFiles = [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/cert.pem",
    ]

    /// The directory used when `SSL_CERT_DIR` is unset.
    static let defaultDirectory = "/etc/ssl/certs"

    /// The operating system's trust store, as OpenSSL would find it in `environment`.
    ///
    /// - The bundle file is `SSL_CERT_FILE` if set, else the first that exists of
    ///   `/etc/ssl/certs/ca-certificates.crt`, `/etc/pki/tls/certs/ca-bundle.crt` and `/etc/ssl/cert.pem`.
    /// - The directories are `SSL_CERT_DIR` (colon-separated) if set, else `/etc/ssl/certs`. In a directory,
    ///   files ending `.pem` or `.crt` and OpenSSL hash links such as `5ad8a5d6.0` are read (not recursively).
    ///
    /// Bundles are read block by block: a bad block is skipped and reported in ``skipped``, the others are
    /// kept. A path named by `SSL_CERT_FILE` or `SSL_CERT_DIR` that does not exist is reported too; missing
    /// default paths are not (they are just not this system's layout). This never throws: a system without
    /// any store yields an empty set of anchors, which trusts nothing.
    ///
    /// - Parameter environment: The environment variables to consult; defaults to the process environment.
    /// - Returns: The anchors and a report of what was read and skipped.
    public static func platform(environment: [String: String] = ProcessInfo.processInfo.environment) -> TrustRoots {
        var roots = TrustRoots([])
        var seen = Seen()

        if let file = environment["SSL_CERT_FILE"], !file.isEmpty {
            roots.read(file: file, seen: &seen)
        } else if let file = Self.defaultBundleFiles.first(where: { FileManager.default.fileExists(atPath: $0) }) {
            roots.read(file: file, seen: &seen)
        }

        if let directories = environment["SSL_CERT_DIR"], !directories.isEmpty {
            for directory in directories.split(separator: ":") where !directory.isEmpty {
                roots.read(directory: String(directory), seen: &seen, include: Self.isPlatformDirectoryEntry)
            }
        } else {
            if CertificateLoader.status(Self.defaultDirectory)?.isDirectory == true {
                roots.read(directory: Self.defaultDirectory, seen: &seen, include: Self.isPlatformDirectoryEntry)
            }
        }
        return roots
    }

    /// The operating system's trust store for this process's environment: ``platform(environment:)``,
    /// computed once per process on first use (thread-safe), then shared.
    ///
    /// Check ``skipped`` once to warn about entries of the store that could not be used.
    public static var platform: TrustRoots { Self.processPlatform }

    // A static let is initialised lazily, exactly once, under a lock (swift_once).
    private static let processPlatform = TrustRoots.platform(environment: ProcessInfo.processInfo.environment)

    /// Trust anchors from a file or a directory, for a `--roots FILE|DIR` option that replaces the platform
    /// store.
    ///
    /// A file may be PEM (a bundle), DER or PKCS#7. In a directory, files ending `.cer`, `.crt`, `.der` or
    /// `.pem` (any case) and OpenSSL hash links such as `5ad8a5d6.0` are read, in name order, not recursively.
    /// Bad entries are skipped and reported in ``skipped``, as for ``platform(environment:)``.
    ///
    /// - Parameter path: A file or a directory.
    /// - Returns: At least one anchor.
    /// - Throws: ``CertificateLoadingError`` when the path cannot be read, or when it yields no certificate at
    ///   all: then a file's first problem is thrown (it names the file), or
    ///   ``CertificateLoadingError/Code/noCertificates`` for a directory.
    public static func load(atPath path: String) throws(CertificateLoadingError) -> TrustRoots {
        var roots = TrustRoots([])
        var seen = Seen()
        if try CertificateLoader.isDirectory(path) {
            let files = try CertificateLoader.files(inDirectory: path, include: Self.isLoadDirectoryEntry)
            roots.sources.append(path)
            for file in files {
                roots.read(entriesOf: file, seen: &seen)
            }
            guard !roots.certificates.isEmpty else {
                let detail = roots.skipped.isEmpty ? "" : "; \(roots.skipped.count) file(s) or block(s) failed, first: \(roots.skipped[0])"
                throw CertificateLoadingError(
                    code: .noCertificates,
                    origin: path,
                    problem: "the directory has no usable certificate (files ending .cer, .crt, .der, .pem or "
                        + "OpenSSL hash names are read)\(detail)"
                )
            }
        } else {
            let bytes = try CertificateLoader.readFile(atPath: path)
            roots.sources.append(path)
            roots.read(bytes: bytes, origin: path, seen: &seen)
            guard !roots.certificates.isEmpty else {
                throw roots.skipped.first
                    ?? CertificateLoadingError(code: .noCertificates, origin: path, problem: "no certificate found")
            }
        }
        return roots
    }

    // MARK: Loading

    /// `5ad8a5d6.0`: OpenSSL's `c_rehash` names (8 hex digits, a dot, a number). `.rN` names are CRLs.
    static func isHashName(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 8, !parts[1].isEmpty, parts[1].count <= 4 else { return false }
        return parts[0].allSatisfy { $0.isHexDigit && $0.isASCII } && parts[1].allSatisfy { $0.isASCII && $0.isNumber }
    }

    private static func hasExtension(_ name: String, in extensions: Set<String>) -> Bool {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return false }
        return extensions.contains(name[name.index(after: dot)...].lowercased())
    }

    static func isPlatformDirectoryEntry(_ name: String) -> Bool {
        Self.isHashName(name) || Self.hasExtension(name, in: ["pem", "crt"])
    }

    static func isLoadDirectoryEntry(_ name: String) -> Bool {
        Self.isHashName(name) || Self.hasExtension(name, in: CertificateLoader.directoryExtensions)
    }

    /// What was read already: certificates by DER, files by device and inode.
    private struct Seen {
        var certificates: Set<[UInt8]> = []
        var files: Set<BoundedFileReader.FileStatus.Identity> = []

        /// False when the file at `path` was read already under another name (Debian's store reaches each root
        /// through a `.pem` link and a hash link to it): reading it again could only find the same certificates.
        mutating func firstVisit(_ path: String) -> Bool {
            guard let identity = CertificateLoader.status(path)?.identity else { return true }
            return self.files.insert(identity).inserted
        }
    }

    private mutating func add(_ certificates: [Certificate], seen: inout Seen) {
        for certificate in certificates where seen.certificates.insert(certificate.derBytes).inserted {
            self.certificates.append(certificate)
        }
    }

    /// Adds the certificates of `bytes`, parsing only those not seen yet.
    ///
    /// A system store holds each root two or three times (Debian: the bundle, the `.pem` link and its hash
    /// link), so certificates are compared by their exact DER before they are parsed, not after: a duplicate
    /// costs a base64 decode, not a parse. A parsed certificate's `derBytes` are the bytes it was parsed from,
    /// so this keeps exactly the set the parse-then-compare order kept.
    private mutating func read(bytes: [UInt8], origin: String, seen: inout Seen) {
        for entry in CertificateParser.rawEntries(from: bytes, origin: origin) {
            switch entry {
            case .failure(let error):
                self.skipped.append(error)
            case .success(let raws):
                // One bad certificate makes its whole entry (a PKCS#7 bundle, say) unusable, as before.
                var certificates: [Certificate] = []
                var failure: CertificateLoadingError?
                for raw in raws where !seen.certificates.contains(raw.der) {
                    switch CertificateParser.certificate(raw, origin: origin) {
                    case .success(let certificate): certificates.append(certificate)
                    case .failure(let error): failure = error
                    }
                    if failure != nil { break }
                }
                if let failure {
                    self.skipped.append(failure)
                } else {
                    self.add(certificates, seen: &seen)
                }
            }
        }
    }

    /// Reads one file of a directory; the directory is the recorded source.
    private mutating func read(entriesOf file: String, seen: inout Seen) {
        guard seen.firstVisit(file) else { return }
        do {
            let bytes = try CertificateLoader.readFile(atPath: file)
            self.read(bytes: bytes, origin: file, seen: &seen)
        } catch {
            self.skipped.append(error)
        }
    }

    private mutating func read(file: String, seen: inout Seen) {
        _ = seen.firstVisit(file)
        do {
            let bytes = try CertificateLoader.readFile(atPath: file)
            self.sources.append(file)
            self.read(bytes: bytes, origin: file, seen: &seen)
        } catch {
            self.skipped.append(error)
        }
    }

    /// Reads a platform directory (`SSL_CERT_DIR`, `/etc/ssl/certs`). A name the directory's reader would read whose
    /// bytes are not UTF-8 is skipped and reported in ``skipped`` (the name escaped), and the rest of the directory
    /// is read, as OpenSSL keeps reading a directory past a file it cannot use. This differs from `--roots DIR` and
    /// the anchors and CRL directories, which refuse such a name (``CertificateLoader/files(inDirectory:include:)``):
    /// the platform store never throws, and dropping the whole directory for one name would lose every other root
    /// in it. Skipping a root can only trust less, never more.
    private mutating func read(directory: String, seen: inout Seen, include: (String) -> Bool) {
        let listing: (files: [String], unshownNames: [(origin: String, reason: String)])
        do {
            listing = try CertificateLoader.listing(inDirectory: directory, include: include)
        } catch {
            self.skipped.append(error)
            return
        }
        self.sources.append(directory)
        for unshown in listing.unshownNames {
            self.skipped.append(
                CertificateLoadingError(
                    code: .unreadableFile, origin: unshown.origin, problem: "\(unshown.reason); skipped (rename it to have it read)"))
        }
        for file in listing.files {
            self.read(entriesOf: file, seen: &seen)
        }
    }
}
