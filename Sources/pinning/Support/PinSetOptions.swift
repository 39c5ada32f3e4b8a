import ArgumentParser
import Foundation
import NIOCore
import Pinning
import PinningNIO

/// `--pinset URL --pinset-root ROOT.json --pinset-dir DIR [--pinset-target NAME] [--pinset-targets URL]`: the
/// configuration is a pin set followed in a TUF repository (``PinSetUpdater``) instead of a `--config` file.
struct PinSetOptions: ParsableArguments {
    @Option(
        name: .customLong("pinset"),
        help: ArgumentHelp(
            "Follow a pin set: the TUF repository's metadata URL (http or https; redirects followed, never https to http, and from plain http only on the same host: http at the same port, or https, unless --pinset-redirect-anywhere), in place of --config. --resolve applies to it, and its https server is judged by the system's roots together with --roots.",
            valueName: "url"))
    var metadataURL: String?

    @Option(
        name: .customLong("pinset-root"),
        help: ArgumentHelp("The repository's root.json shipped with the client (trusted at the first refresh only).", valueName: "file"))
    var root: String?

    @Option(
        name: .customLong("pinset-dir"),
        help: ArgumentHelp(
            "Where the verified metadata and the last good pin set are kept (created when missing). Clients may share one: each refresh holds DIR/.pinset.lock.",
            valueName: "dir"))
    var directory: String?

    @Option(name: .customLong("pinset-target"), help: ArgumentHelp("The target holding the configuration (default pinning.json).", valueName: "name"))
    var target: String?

    @Option(
        name: .customLong("pinset-targets"),
        help: ArgumentHelp("Where targets are downloaded (default: targets/ beside the metadata URL's last path segment).", valueName: "url"))
    var targetsURL: String?

    @Flag(
        name: .customLong("pinset-redirect-anywhere"),
        help: ArgumentHelp(RepositoryClient.redirectAnywhereHelp))
    var redirectAnywhere = false

    var isGiven: Bool { self.metadataURL != nil }

    /// Refuses incomplete or malformed options, naming the option.
    func check() throws(InputError) {
        guard let text = self.metadataURL else {
            let stray = [(self.root, "--pinset-root"), (self.directory, "--pinset-dir"), (self.target, "--pinset-target"), (self.targetsURL, "--pinset-targets")]
                .filter { $0.0 != nil }.map(\.1)
            if let first = stray.first ?? (self.redirectAnywhere ? "--pinset-redirect-anywhere" : nil) {
                throw InputError("\(first) needs --pinset URL")
            }
            return
        }
        _ = try Self.url(text, option: "--pinset")
        if let targets = self.targetsURL { _ = try Self.url(targets, option: "--pinset-targets") }
        guard self.root != nil else { throw InputError("--pinset needs --pinset-root ROOT.json (the repository's root, shipped with the client)") }
        guard self.directory != nil else { throw InputError("--pinset needs --pinset-dir DIR (where the last good pin set is kept)") }
        if let target = self.target {
            do {
                try PinSetUpdater.validateTargetName(target)
            } catch {
                throw InputError("--pinset-target \(target): not a relative path inside the repository's targets")
            }
        }
    }

    static func url(_ text: String, option: String) throws(InputError) -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty else {
            throw InputError("\(option) \(text): not an http or https URL")
        }
        return url
    }

    /// The updater, with the last good pin set (if any) already loaded from `--pinset-dir`.
    ///
    /// - Parameters:
    ///   - roots: The command's `--roots`: the repository's https server is judged by the platform's roots together
    ///     with them (nil: the platform's alone); a fleet serving its repository under a private CA needs them.
    ///   - resolve: The command's `--resolve`, applied to the repository's hosts (redirect targets included) too.
    func makeUpdater(
        roots: TrustRoots? = nil, resolve: [ResolveKey: SocketAddress] = [:], refreshInterval: Double? = nil, reportQueue: (any PinFailureReporting)? = nil,
        log: @escaping @Sendable (String) -> Void
    ) throws(InputError) -> PinSetUpdater {
        try self.check()
        guard let text = self.metadataURL, let rootPath = self.root, let directory = self.directory else {
            throw InputError("--pinset needs --pinset-root and --pinset-dir")
        }
        let metadataURL = try Self.url(text, option: "--pinset")
        let limits = TUFLimits()
        let bytes: [UInt8]
        do {
            bytes = try CertificateLoader.readFile(atPath: rootPath, maximumSize: limits.rootMaxLength)
        } catch {
            if error.code == .fileTooLarge {
                throw InputError("--pinset-root \(rootPath): larger than \(limits.rootMaxLength) bytes")
            }
            throw InputError("--pinset-root \(rootPath): \(error.problem)")
        }
        // A file that is not a root is this option's fault, whatever the server says.
        if let refusal = TrustedRootCheck.refusal(bytes, limits: limits) {
            throw InputError("--pinset-root \(rootPath): \(refusal)")
        }
        var options = PinSetUpdater.Options(targetName: self.target ?? "pinning.json", limits: limits)
        if let targets = self.targetsURL { options.targetsURL = try Self.url(targets, option: "--pinset-targets") }
        options.reportQueue = reportQueue
        if let refreshInterval { options.refreshInterval = .milliseconds(Int64((refreshInterval * 1000).rounded())) }
        let client: PinnedHTTPClient
        do {
            client = try RepositoryClient.make(roots: roots)
        } catch {
            throw InputError("--pinset: cannot build the TLS configuration: \(ConnectionFailureWords.words(error))")
        }
        do {
            return try PinSetUpdater(
                bootstrapRoot: Array(bytes), directory: directory, metadataURL: metadataURL, options: options,
                fetcher: RepositoryClient.fetcher(client, redirectAnywhere: self.redirectAnywhere, resolve: resolve), log: log)
        } catch {
            throw InputError("--pinset-dir \(error.message)")
        }
    }
}

/// The HTTP client that fetches a TUF repository (`check --pinset`, `proxy --pinset`, `pinning tuf`): one code
/// path, so `--roots` means the same for each.
enum RepositoryClient {
    /// The roots a repository's https server is judged by: the platform's (SSL_CERT_FILE and SSL_CERT_DIR as OpenSSL
    /// reads them) together with the command's `--roots`, read once by the caller (nil: the platform's alone).
    ///
    /// Together, not instead (as `--roots` is for the server `check` and `proxy` judge): before `--roots` reached the
    /// repository, the platform's roots alone judged it, and a command whose `--roots` names a private CA while its
    /// repository sits behind a public one must keep working; a repository served under the fleet's CA needs no
    /// SSL_CERT_FILE.
    static func roots(_ roots: TrustRoots?) -> TrustRoots? {
        roots.map { TrustRoots(TrustRoots.platform.certificates + $0.certificates) }
    }

    /// The client: https judged with no pins by ``roots(_:)`` (TUF's signatures, versions, expiries and hashes are
    /// what protect the metadata and targets), redirects followed (at most 5, never https to http). Plain http is
    /// allowed by the callers' fetchers for repositories served that way: an attacker on the path can withhold
    /// updates (reported as staleness once the metadata expires) but cannot change them.
    static func make(roots: TrustRoots?) throws -> PinnedHTTPClient {
        try PinnedHTTPClient(
            evaluator: SecurityPolicy.defaultEvaluation, settings: TrustSettings(platformRoots: Self.roots(roots)),
            configuration: PinnedHTTPClientConfiguration(connectTimeout: .seconds(10), requestTimeout: .seconds(30), maximumRedirects: 5))
    }

    /// The help of `--pinset-redirect-anywhere` (`check`, `proxy`, `tuf`): one text, as the flag means one thing.
    static let redirectAnywhereHelp =
        "Follow a redirect read over plain http to another host or port too (without it: only on the same host, http at the same port or https). Anyone on the path can write a plain response: give it only for a network you trust."

    /// The fetcher over `client`: plain http allowed (see ``make(roots:)``), a redirect read over plain http followed
    /// to another host or port only with `redirectAnywhere` (`--pinset-redirect-anywhere`), and `resolve` (the
    /// command's `--resolve`; `pinning tuf` has none) applied to every host of the chain.
    static func fetcher(_ client: PinnedHTTPClient, redirectAnywhere: Bool, resolve: [ResolveKey: SocketAddress] = [:]) -> TUFHTTPFetcher {
        TUFHTTPFetcher(client: client, allowsPlainHTTP: true, followsPlainRedirectsToOtherHosts: redirectAnywhere) { host, port in
            resolve[ResolveKey(host: host.lowercased(), port: port)]
        }
    }
}

extension PinSetOptions {
    /// What was kept in `--pinset-dir`, for the line that says no pin set is enforced: "none kept in DIR", or, when
    /// one was kept but refused at start (a file edited or removed), that and why (display text, escaped already).
    static func keptWords(_ updater: PinSetUpdater, directory: String) -> String {
        guard let why = updater.storedRejection else { return "none kept in \(directory)" }
        return "the one kept in \(directory) is not used: \(why)"
    }
}

/// The `pinset` object of `pinning check --json`.
struct PinSetReport: Encodable {
    var version: Int?
    var targetName: String
    var sha256: String?
    var refreshed: String?
    var stale: Bool

    init(_ status: PinSetStatus) {
        self.version = status.version
        self.targetName = status.targetName
        self.sha256 = status.sha256
        self.refreshed = status.refreshed.map { RFC3339.format($0) }
        self.stale = status.stale
    }

    var humanReadable: String {
        var line = "pin set: version \(self.version.map(String.init) ?? "none") (\(self.targetName)"
        if let sha256 { line += ", sha256 \(sha256.prefix(16))…" }
        line += ")"
        if let refreshed { line += ", refreshed \(refreshed)" }
        if self.stale { line += ", STALE" }
        return line
    }
}
