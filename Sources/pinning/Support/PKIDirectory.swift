import Foundation
import Pinning
import PinningPKI
import X509

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The files of a `pinning pki` directory: `NAME.pem` (certificate), `NAME.key` (PKCS#8 key, mode 0600),
/// `NAME-chain.pem` (a leaf and its intermediates). Every failure is an ``InputError`` naming the file.
struct PKIDirectory {
    var path: String

    func certificatePath(_ name: String) -> String { self.file(name + ".pem") }
    func keyPath(_ name: String) -> String { self.file(name + ".key") }
    func chainPath(_ name: String) -> String { self.file(name + "-chain.pem") }
    func file(_ component: String) -> String {
        URL(fileURLWithPath: self.path, isDirectory: true).appendingPathComponent(component).path
    }

    /// Names become file names: letters, digits, `.`, `_`, `-`; not starting with `.` or `-`; no `-chain` suffix.
    static func checkName(_ name: String, option: String) throws(InputError) {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        guard !name.isEmpty, name.count <= 64, name.allSatisfy({ allowed.contains($0) }),
            !name.hasPrefix("."), !name.hasPrefix("-")
        else {
            throw InputError("\(option) \"\(name)\": a name is 1-64 ASCII letters, digits, '.', '_' or '-', not starting with '.' or '-'")
        }
        guard !name.hasSuffix("-chain") else {
            throw InputError("\(option) \"\(name)\": names ending in -chain would collide with chain files")
        }
    }

    /// Creates the directory (and its parents) when missing.
    func create() throws(InputError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: self.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw InputError("\(self.path): exists and is not a directory")
            }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
        } catch {
            throw InputError("\(self.path): cannot create the directory: \(error.localizedDescription)")
        }
    }

    /// Refuses to replace any of `paths` unless `force`; run before writing anything, so a refusal leaves no
    /// half-written set of files.
    static func checkWritable(_ paths: [String], force: Bool) throws(InputError) {
        guard !force else { return }
        for path in paths where FileManager.default.fileExists(atPath: path) {
            throw InputError("\(path): already exists; pass --force to replace it")
        }
    }

    // MARK: - Reading

    /// The certificate in `NAME.pem`.
    func certificate(_ name: String, option: String) throws(InputError) -> Certificate {
        let path = self.certificatePath(name)
        guard FileManager.default.fileExists(atPath: path) else {
            throw InputError("\(option) \(name): \(path) does not exist (create it with `pinning pki init` or `pinning pki issue`)")
        }
        let certificates = try InputLoading.certificates(path, option: option)
        guard let first = certificates.first else {
            throw InputError("\(option) \(name): \(path) holds no certificate")
        }
        return first
    }

    /// The certificate and private key of `NAME`, checked to belong together.
    func identity(_ name: String, option: String) throws(InputError) -> TestIdentity {
        let certificate = try self.certificate(name, option: option)
        let keyPath = self.keyPath(name)
        let text: String
        do {
            text = try String(contentsOfFile: keyPath, encoding: .utf8)
        } catch {
            throw InputError("\(option) \(name): cannot read \(keyPath): \(error.localizedDescription)")
        }
        let key: Certificate.PrivateKey
        do {
            key = try Certificate.PrivateKey(pemEncoded: text)
        } catch {
            throw InputError("\(option) \(name): \(keyPath) is not a PEM private key: \(PKIErrorWords.words(error))")
        }
        do {
            return try TestIdentity(certificate: certificate, privateKey: key)
        } catch {
            guard let error = error as? TestPKIError, error.code == .keyDoesNotMatchCertificate else {
                throw InputError("\(option) \(name): \(keyPath): \(PKIErrorWords.words(error))")
            }
            throw InputError(
                "\(option) \(name): \(keyPath) is not the private key of \(self.certificatePath(name)) (\(certificate.subject)): give the key this certificate was issued for"
            )
        }
    }

    /// The intermediates above `certificate`, nearest first, found among the directory's `*.pem` files by
    /// subject name and signature, stopping at a self-issued certificate (the root, never included).
    func intermediates(above certificate: Certificate) throws(InputError) -> [Certificate] {
        let candidates = self.directoryCertificates()
        var chain: [Certificate] = []
        var current = certificate
        for _ in 0..<16 {
            if current.issuer == current.subject { return chain }
            guard let parent = candidates.first(where: { $0.subject == current.issuer && $0.isIssuer(of: current) }) else {
                throw InputError("\(self.path): no certificate here issued \(current.subject) (its issuer is \(current.issuer))")
            }
            if parent.issuer == parent.subject { return chain }
            chain.append(parent)
            current = parent
        }
        throw InputError("\(self.path): the issuer chain of \(certificate.subject) is longer than 16 certificates")
    }

    /// The name (file stem) of the certificate in the directory that issued `certificate` (by subject name and
    /// signature), or nil.
    func issuerName(of certificate: Certificate) -> String? {
        self.namedCertificates().first { $0.certificate.subject == certificate.issuer && $0.certificate.isIssuer(of: certificate) }?.name
    }

    private func directoryCertificates() -> [Certificate] {
        self.namedCertificates().map(\.certificate)
    }

    private func namedCertificates() -> [(name: String, certificate: Certificate)] {
        let names: [String]
        do {
            // A name that is not UTF-8 is skipped, and that is exact: this looks for the certificates `pinning pki`
            // wrote here, whose names come from arguments that must be UTF-8 (PinningCommand.argumentNotUTF8), so
            // such a file is not one of them. This finds an issuer to write a chain, never decides trust.
            names = try DirectoryListing.entries(atPath: self.path).compactMap(\.name)
        } catch {
            return []
        }
        var certificates: [(name: String, certificate: Certificate)] = []
        for name in names.sorted() where name.hasSuffix(".pem") && !name.hasSuffix("-chain.pem") && !name.hasSuffix(".crl.pem") {
            do {
                if let first = try CertificateLoader.certificates(fromFile: self.file(name)).first {
                    certificates.append((String(name.dropLast(".pem".count)), first))
                }
            } catch {
                // Not one of ours (or unreadable): it cannot be a link of the chain.
                continue
            }
        }
        return certificates
    }

    // MARK: - Writing

    /// Writes `contents` to `path` with `mode`, replacing an existing file (callers checked `--force`).
    /// The file is created with its final mode, so a key is never readable by others, not even briefly.
    /// Only a regular file is replaced: a FIFO, device or socket at `path` is refused, never unlinked (as root,
    /// `--force` once replaced `/dev/full` with a regular file), nor written in place (a key's mode 0600 cannot be
    /// given to a device without changing the device node's permissions).
    static func write(_ contents: [UInt8], to path: String, mode: mode_t) throws(InputError) {
        // What is at `path` itself (a symbolic link is replaced, not followed); nothing there is the usual case.
        if case .success(let bits) = BoundedFileReader.fileType(atPath: path, followingLinks: false) {
            let type = mode_t(bits)
            if type == S_IFDIR {
                throw InputError("\(path): the path is a directory, not a file")
            }
            if type != S_IFREG && type != S_IFLNK {
                throw InputError("\(path): not a regular file (a FIFO, device or socket); keys and certificates are written only to regular files")
            }
        }
        if FileManager.default.fileExists(atPath: path), unlink(path) != 0 {
            throw InputError("\(path): cannot replace: \(systemErrorText())")
        }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            throw InputError("\(path): cannot create: \(systemErrorText())")
        }
        defer { close(descriptor) }
        // The umask may have removed bits from `mode`; a key must not gain any, and a certificate should be
        // exactly what was asked for.
        guard fchmod(descriptor, mode) == 0 else {
            throw InputError("\(path): cannot set mode \(String(mode, radix: 8)): \(systemErrorText())")
        }
        if let code = DescriptorWriter.writeAll(contents, to: descriptor) {
            throw InputError("\(path): write failed: \(systemErrorText(code))")
        }
    }

    /// Writes `identity`'s key (mode 0600) and certificate (mode 0644) as PEM.
    static func write(_ identity: TestIdentity, certificatePath: String, keyPath: String) throws(InputError) {
        try self.write(Array(identity.privateKeyPEM.utf8), to: keyPath, mode: self.keyMode)
        try self.write(Array(identity.certificatePEM.utf8), to: certificatePath, mode: self.certificateMode)
    }

    static let keyMode: mode_t = 0o600
    static let certificateMode: mode_t = 0o644
}

/// The system's words for `code` (by default the current `errno`): ``SystemErrorText/text(_:otherwise:)``.
private func systemErrorText(_ code: CInt = errno) -> String {
    SystemErrorText.text(code)
}

extension Certificate {
    /// Whether `child` carries a valid signature by this certificate's key.
    func isIssuer(of child: Certificate) -> Bool {
        self.publicKey.isValidSignature(child.signature, for: child)
    }
}
