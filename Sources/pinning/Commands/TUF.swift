import ArgumentParser
import Foundation
import NIOCore
import Pinning
import PinningNIO

extension PinningCommand {
    /// `pinning tuf`: a TUF client with the command line tuf-conformance drives (its CLIENT-CLI.md), on the library's
    /// `TUFUpdater`.
    struct TUF: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "tuf",
            abstract: "A TUF client (specification 1.0) with tuf-conformance's command line: init, refresh, download.",
            discussion: """
                pinning tuf --metadata-dir DIR init TRUSTED_ROOT
                    Store TRUSTED_ROOT as DIR/root.json, the root to start from (no request is made; DIR is created \
                when missing). TRUSTED_ROOT must be TUF root metadata signed by a threshold of its own root keys; \
                anything else is refused (exit 2) and DIR is left as it was. Over an initialized DIR, a valid root \
                replaces DIR/root.json: a deliberate re-bootstrap, outside TUF's update chain, so give only a root \
                obtained out of band; the other metadata in DIR is kept and used only if it verifies under the new root.
                pinning tuf --metadata-dir DIR --metadata-url URL refresh
                    Update the top-level metadata in DIR from the repository (root version by version, timestamp, \
                snapshot, targets), each file checked before it is stored.
                pinning tuf --metadata-dir DIR --metadata-url URL --target-name PATH… --target-base-url URL --target-dir DIR download
                    Refresh, then find each target (in order, through delegations), download it unless DIR holds it \
                with the trusted length and hashes, check it, and store it as DIR/quote(PATH).

                Metadata and targets are fetched over https (the platform's roots, together with --roots when given) or plain http: TUF's signatures, \
                versions, expiries and hashes protect them either way. Redirects are followed (at most 5, never from \
                https to http, and one read over plain http only on the same host: http at the same port, or https, unless \
                --pinset-redirect-anywhere); \
                the size limit and the time allowed cover the whole chain.
                Exit status: 0 success, 1 the command failed (a refusal, an unreachable repository, a missing target, \
                a TRUSTED_ROOT that cannot be read: tuf-conformance's CLIENT-CLI.md has init exit 1 on failure), 2 bad \
                usage or input (a TRUSTED_ROOT that reads but is not a usable root).
                """
        )

        @Option(name: .customLong("metadata-dir"), help: ArgumentHelp("The directory of the client's trusted metadata.", valueName: "dir"))
        var metadataDirectory: String

        @Option(name: .customLong("metadata-url"), help: ArgumentHelp("The repository's metadata URL (http or https).", valueName: "url"))
        var metadataURL: String?

        @Option(name: .customLong("target-name"), help: ArgumentHelp("A target path to download (repeat for several, handled in order).", valueName: "path"))
        var targetNames: [String] = []

        @Option(name: .customLong("target-base-url"), help: ArgumentHelp("The repository's targets URL.", valueName: "url"))
        var targetBaseURL: String?

        @Option(name: .customLong("target-dir"), help: ArgumentHelp("Where downloaded targets are stored.", valueName: "dir"))
        var targetDirectory: String?

        @Option(
            name: .long,
            help: ArgumentHelp(
                "Trust roots for the repository's https server (PEM file or directory), together with the system's, as --roots is for check --pinset and proxy --pinset; read once.",
                valueName: "file|dir"))
        var roots: String?

        @Flag(name: .customLong("pinset-redirect-anywhere"), help: ArgumentHelp(RepositoryClient.redirectAnywhereHelp))
        var redirectAnywhere = false

        @Flag(name: .shortAndLong, help: "Say what the client trusted, fetched and skipped, on stderr.")
        var verbose = false

        @Argument(help: ArgumentHelp("init TRUSTED_ROOT, refresh or download.", valueName: "command"))
        var command: [String] = []

        /// The command, once the words are checked.
        enum Action {
            case initialize(trustedRoot: String)
            case refresh(URL)
            case download(URL, targetBase: URL, targetDirectory: String, names: [String])
        }

        func action() throws(InputError) -> Action {
            guard let word = self.command.first else { throw InputError("tuf: name a command: init TRUSTED_ROOT, refresh or download") }
            // `init` creates a missing --metadata-dir (after the root is checked); the others need what init made.
            try Self.checkDirectory(self.metadataDirectory, option: "--metadata-dir", missing: word == "init" ? nil : "run `pinning tuf --metadata-dir DIR init TRUSTED_ROOT` first")
            switch word {
            case "init":
                guard self.command.count == 2 else { throw InputError("tuf: init takes one argument, the trusted root file") }
                return .initialize(trustedRoot: self.command[1])
            case "refresh":
                guard self.command.count == 1 else { throw InputError("tuf: refresh takes no arguments") }
                return .refresh(try Self.url(self.metadataURL, option: "--metadata-url"))
            case "download":
                guard self.command.count == 1 else { throw InputError("tuf: download takes no arguments (name targets with --target-name)") }
                guard !self.targetNames.isEmpty else { throw InputError("tuf: download needs at least one --target-name") }
                guard let directory = self.targetDirectory else { throw InputError("tuf: download needs --target-dir") }
                try Self.checkDirectory(directory, option: "--target-dir", missing: "create it first")
                return .download(
                    try Self.url(self.metadataURL, option: "--metadata-url"), targetBase: try Self.url(self.targetBaseURL, option: "--target-base-url"),
                    targetDirectory: directory, names: self.targetNames)
            default:
                throw InputError("tuf: unknown command \"\(word)\" (init, refresh or download)")
            }
        }

        /// Refuses `path` when it is something other than a directory, or, with `missing` (what to do about it),
        /// when nothing is there.
        static func checkDirectory(_ path: String, option: String, missing: String?) throws(InputError) {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
                guard isDirectory.boolValue else { throw InputError("tuf: \(option) \(path): not a directory") }
            } else if let missing {
                throw InputError("tuf: \(option) \(path): does not exist; \(missing)")
            } else {
                // To be created (init): the nearest part of the path that exists must be a directory, or the
                // creation fails as the user's input, not as the command (`--metadata-dir FILE/sub`).
                var parent = path
                while let slash = parent.lastIndex(of: "/"), slash != parent.startIndex {
                    parent = String(parent[..<slash])
                    if FileManager.default.fileExists(atPath: parent, isDirectory: &isDirectory) {
                        guard isDirectory.boolValue else { throw InputError("tuf: \(option) \(path): \(parent) is not a directory") }
                        return
                    }
                }
            }
        }

        static func url(_ text: String?, option: String) throws(InputError) -> URL {
            guard let text else { throw InputError("tuf: this command needs \(option)") }
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
                throw InputError("tuf: \(option) \(text): not an http or https URL")
            }
            return url
        }

        func validate() throws {
            _ = try self.action()
        }

        func run() async throws {
            let action = try self.action()
            let log: (@Sendable (String) -> Void)? = self.verbose ? Self.logLine : nil
            switch action {
            case .initialize(let rootPath):
                let limits = TUFLimits()
                // Typed: only a TUFError (display text) is printed as it is by fail. A file that cannot be read
                // stays a failure of the command (exit 1), as tuf-conformance's command line has it (CLIENT-CLI.md:
                // init exits 0 or 1); the help says so.
                let bytes: [UInt8]
                do throws(TUFError) {
                    bytes = try TUFUpdater.readTrustedRoot(rootPath, limits: limits)
                } catch {
                    Self.fail("init: \(error)")
                }
                // Checked before anything is written: a file that is not a root (a certificate, `{}`, an empty
                // file) once replaced a working root.json and exited 0, and only the next refresh failed.
                if let refusal = TrustedRootCheck.refusal(bytes, limits: limits) {
                    throw InputError("tuf: init \(rootPath): \(refusal)")
                }
                do throws(TUFError) {
                    try TUFUpdater.initialize(metadataDirectory: self.metadataDirectory, trustedRoot: bytes, limits: limits)
                } catch {
                    Self.fail("init: \(error)")
                }
                print("pinning tuf: initialized \(self.metadataDirectory) with the trusted root from \(rootPath)")
            case .refresh(let metadataURL):
                let client = try Self.client(roots: self.roots)
                let fetcher = RepositoryClient.fetcher(client, redirectAnywhere: self.redirectAnywhere)
                var updater = TUFUpdater(metadataDirectory: self.metadataDirectory, metadataURL: metadataURL, fetcher: fetcher, log: log)
                do throws(TUFError) {
                    let trusted = try await updater.refresh()
                    await client.shutdown()
                    print("pinning tuf: refreshed: \(Self.versions(trusted))")
                } catch {
                    await client.shutdown()
                    Self.fail("refresh failed: \(error)")
                }
            case .download(let metadataURL, let targetBase, let directory, let names):
                let client = try Self.client(roots: self.roots)
                let fetcher = RepositoryClient.fetcher(client, redirectAnywhere: self.redirectAnywhere)
                var updater = TUFUpdater(metadataDirectory: self.metadataDirectory, metadataURL: metadataURL, fetcher: fetcher, log: log)
                do throws(TUFError) {
                    let trusted = try await updater.refresh()
                    log?("refreshed: \(Self.versions(trusted))")
                    for name in names {
                        let target = try await updater.targetInfo(name)
                        if let path = updater.cachedTarget(target, in: directory) {
                            print("pinning tuf: \(name): already stored with the trusted length and hashes at \(path)")
                            continue
                        }
                        let path = try await updater.download(target, from: targetBase, into: directory)
                        print("pinning tuf: \(name): downloaded and verified (\(target.length) bytes) to \(path)")
                    }
                    await client.shutdown()
                } catch {
                    await client.shutdown()
                    Self.fail("download failed: \(error)")
                }
            }
        }

        /// One of the updater's lines on stderr, as it is: it is display text already (the repository's and its
        /// server's text in it escaped once by VisibleText, where the line was made), so escaping it again would
        /// show each escape as the sender's literal text.
        @Sendable static func logLine(_ line: String) {
            FileHandle.standardError.write(Data("pinning tuf: \(line)\n".utf8))
        }

        static func versions(_ trusted: TUFTrustedSet) -> String {
            "root v\(trusted.root.version), timestamp v\(trusted.timestamp?.version ?? 0), snapshot v\(trusted.snapshot?.version ?? 0), targets v\(trusted.targets?.version ?? 0)"
        }

        /// The HTTP client: https judged with no pins by the platform's roots together with `--roots` (read once,
        /// here), as `check --pinset` and `proxy --pinset` judge their repository: TUF's own signatures are what
        /// protect the metadata. Plain http is allowed for repositories served that way.
        static func client(roots path: String?) throws -> PinnedHTTPClient {
            let roots: TrustRoots?
            do {
                roots = try InputLoading.roots(path)
            } catch {
                throw InputError("tuf: \(error.message)")
            }
            do {
                return try RepositoryClient.make(roots: roots)
            } catch {
                throw InputError("tuf: cannot build the TLS configuration: \(ConnectionFailureWords.words(error))")
            }
        }

        /// One line on stderr, exit 1. `message` is display text: a ``TUFError``'s description (the repository's and
        /// its server's text already escaped by VisibleText) after this command's own words, printed as it is.
        static func fail(_ message: String) -> Never {
            FileHandle.standardError.write(Data("pinning tuf: \(message)\n".utf8))
            Foundation.exit(1)
        }
    }
}
