import Foundation
public import Pinning

/// Reads CRLs from files and directories a caller names, for ``RevocationSource`` and the command line.
///
/// A path is a CRL file (PEM `X509 CRL` blocks or one DER CRL) or a directory, of which the files named
/// `*.crl` and `*.crl.pem` are read (what `pinning pki crl` writes; other files, such as certificates, keys and
/// the PKI's `revocations.json`, are left alone, so a PKI directory can be named as it is). The same CRL found
/// twice (the PEM and DER copies `pki crl` writes) counts once.
public enum CRLFiles {
    /// Why a CRL path could not be read, naming the file.
    public struct LoadError: Error, Sendable, CustomStringConvertible {
        /// `crlFileUnusable`: the error's stable code (for logs, metrics and JSON; the words may change).
        public var code: String { "crlFileUnusable" }

        /// The file or directory.
        public let path: String
        /// What is wrong with it, in words.
        public let problem: String

        public var description: String { "\(self.path): \(self.problem)" }
    }

    /// Every CRL under `paths`, in order, without duplicates.
    ///
    /// - Throws: ``LoadError`` for a missing or unreadable path, a directory without CRL files, or a file that
    ///   is not a CRL at all. A CRL that reads but must not be used (no CRL number, delta, stale) is returned:
    ///   the revocation stage reports it as the reason a status is unknown.
    public static func load(_ paths: [String]) throws(LoadError) -> [CertificateRevocationList] {
        var lists: [CertificateRevocationList] = []
        for path in paths {
            for list in try Self.load(path) where !lists.contains(list) {
                lists.append(list)
            }
        }
        return lists
    }

    /// The files `paths` stands for (each file itself; each directory's `*.crl` and `*.crl.pem`), sorted.
    public static func files(_ paths: [String]) throws(LoadError) -> [String] {
        var files: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw LoadError(path: path, problem: "no such file or directory")
            }
            guard isDirectory.boolValue else {
                files.append(path)
                continue
            }
            let entries: [DirectoryListing.Entry]
            do {
                entries = try DirectoryListing.entries(atPath: path)
            } catch {
                throw LoadError(path: path, problem: "the directory cannot be read (\(error.words))")
            }
            var found: [String] = []
            for entry in entries where Self.isCRLName(entry.lossyName) {
                // A CRL file whose name is not UTF-8 is refused, naming it: skipped, the certificates it revokes
                // would pass; read under FileManager's U+FFFD name, it would fail as "no such file" under a name
                // nobody wrote. So is a name with a control or invisible character: a message naming it would act
                // on the terminal, or read as another name.
                let name: String
                switch entry.shown {
                case .success(let shown): name = shown
                case .failure(let unshown):
                    throw LoadError(
                        path: (path.hasSuffix("/") ? path : path + "/") + entry.escaped,
                        problem: "\(unshown.reason); rename it (a CRL of this directory is read under its exact name or refused, never skipped)")
                }
                found.append(name)
            }
            found.sort()
            guard !found.isEmpty else {
                throw LoadError(path: path, problem: "the directory holds no *.crl or *.crl.pem file")
            }
            files += found.map { (path as NSString).appendingPathComponent($0) }
        }
        return files
    }

    /// The names a CRL directory's reader reads: `*.crl` and `*.crl.pem`.
    static func isCRLName(_ name: String) -> Bool {
        name.hasSuffix(".crl") || name.hasSuffix(".crl.pem")
    }

    private static func load(_ path: String) throws(LoadError) -> [CertificateRevocationList] {
        var lists: [CertificateRevocationList] = []
        for file in try Self.files([path]) {
            lists += try Self.read(file)
        }
        return lists
    }

    private static func read(_ path: String) throws(LoadError) -> [CertificateRevocationList] {
        let size: Int
        do {
            size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
        } catch {
            throw LoadError(path: path, problem: "the file cannot be read")
        }
        // Refused before an enormous file is read into memory.
        guard size <= CertificateRevocationList.maximumSize else {
            throw LoadError(path: path, problem: "\(size) bytes is more than the limit of \(CertificateRevocationList.maximumSize)")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw LoadError(path: path, problem: "the file cannot be read")
        }
        do {
            return try CertificateRevocationList.read(Array(data))
        } catch {
            throw LoadError(path: path, problem: "not a usable CRL file: \(error.message)")
        }
    }
}
