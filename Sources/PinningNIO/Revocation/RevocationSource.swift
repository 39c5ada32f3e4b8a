import Foundation
import NIOConcurrencyHelpers
public import Pinning

/// The revocation policy a long-running server or client applies, kept current: fixed, or re-read from CRL
/// files whenever they change, so that revoking a device (`pinning pki revoke`, `pinning pki crl`, copy the CRL
/// into place) takes effect on its next handshake with no restart.
///
/// <!-- snippet: given(identity: TLSIdentity, fleetCA: Certificate)
/// import Pinning
/// import X509
/// -->
/// ```swift
/// let revocation = try RevocationSource.watching(["/etc/fleet/crl"], mode: .hard, scope: .leaf)
/// var configuration = MutualTLSServer.Configuration(identity: identity, clientCertificateAuthorities: [fleetCA])
/// configuration.revocation = revocation
/// let server = try MutualTLSServer(configuration: configuration)
/// ```
///
/// Watching polls the files' size, modification time and inode every `interval` (a file replaced by `mv` is
/// noticed as well as one rewritten in place). When a change reads cleanly, the new CRLs replace the old ones
/// at once. When it does not (a half-copied file, a file that is not a CRL), the last good CRLs stay in force
/// and ``onReload`` hears the error: a broken update never turns revocation off. The last good CRLs still go
/// stale at their nextUpdate, after which hard mode refuses, so a CRL that is never fixed fails closed.
public final class RevocationSource: Sendable {
    /// What one reload attempt did.
    public enum ReloadOutcome: Sendable {
        /// The files changed and were read: this many CRLs are now in force.
        case reloaded(crls: Int)
        /// The files changed but could not be read; the previous CRLs stay in force.
        case failed(CRLFiles.LoadError)
    }

    private struct State {
        var policy: RevocationPolicy
        var fingerprint: [FileFingerprint]
        var reloads = 0
    }

    private struct FileFingerprint: Hashable {
        var path: String
        var size: Int
        var modified: Date
        var inode: Int
    }

    private let state: NIOLockedValueBox<State>
    private let paths: [String]
    private let task: NIOLockedValueBox<Task<Void, Never>?> = NIOLockedValueBox(nil)
    /// Called after every reload attempt that found a change.
    public let onReload: (@Sendable (ReloadOutcome) -> Void)?

    /// A fixed policy (CRLs the caller refreshes itself by making a new source).
    public init(policy: RevocationPolicy) {
        self.state = NIOLockedValueBox(State(policy: policy, fingerprint: []))
        self.paths = []
        self.onReload = nil
    }

    private init(policy: RevocationPolicy, paths: [String], fingerprint: [FileFingerprint], onReload: (@Sendable (ReloadOutcome) -> Void)?) {
        self.state = NIOLockedValueBox(State(policy: policy, fingerprint: fingerprint))
        self.paths = paths
        self.onReload = onReload
    }

    /// Reads the CRLs under `paths` now (files, or directories of `*.crl`/`*.crl.pem`, see ``CRLFiles``) and
    /// re-reads them whenever they change, checking every `interval`.
    ///
    /// - Throws: ``CRLFiles/LoadError`` when the first read fails: a server must not start without the CRLs it
    ///   was told to enforce.
    public static func watching(
        _ paths: [String],
        mode: RevocationPolicy.Mode = .hard,
        scope: RevocationPolicy.Scope = .leaf,
        interval: Duration = .seconds(5),
        onReload: (@Sendable (ReloadOutcome) -> Void)? = nil
    ) throws(CRLFiles.LoadError) -> RevocationSource {
        let fingerprint = Self.fingerprint(of: paths)
        let crls = try CRLFiles.load(paths)
        let source = RevocationSource(
            policy: RevocationPolicy(crls: crls, mode: mode, scope: scope),
            paths: paths,
            fingerprint: fingerprint,
            onReload: onReload
        )
        // The task holds the source weakly: dropping the last reference to the source ends the polling.
        let task = Task.detached { [weak source] in
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return  // cancelled
                }
                guard let source else { return }
                source.reloadIfChanged()
            }
        }
        source.task.withLockedValue { $0 = task }
        return source
    }

    deinit {
        self.task.withLockedValue { $0?.cancel() }
    }

    /// The policy in force now.
    public var current: RevocationPolicy {
        self.state.withLockedValue { $0.policy }
    }

    /// How many times changed files were read successfully since the source was made.
    public var reloadCount: Int {
        self.state.withLockedValue { $0.reloads }
    }

    /// Stops watching; the current CRLs stay in force.
    public func stop() {
        self.task.withLockedValue { $0?.cancel() }
    }

    /// Re-reads the files now if they changed since the last read (what the polling does every interval).
    @discardableResult
    public func reloadIfChanged() -> ReloadOutcome? {
        guard !self.paths.isEmpty else { return nil }
        let fingerprint = Self.fingerprint(of: self.paths)
        let (unchanged, mode, scope) = self.state.withLockedValue { state in
            (state.fingerprint == fingerprint, state.policy.mode, state.policy.scope)
        }
        guard !unchanged else { return nil }
        let outcome: ReloadOutcome
        do {
            let crls = try CRLFiles.load(self.paths)
            self.state.withLockedValue { state in
                state.policy = RevocationPolicy(crls: crls, mode: mode, scope: scope)
                state.fingerprint = fingerprint
                state.reloads += 1
            }
            outcome = .reloaded(crls: crls.count)
        } catch {
            // The previous CRLs stay in force. The fingerprint is remembered too, so a broken file is reported
            // once, not every interval; the next change to it is read again.
            self.state.withLockedValue { $0.fingerprint = fingerprint }
            outcome = .failed(error)
        }
        self.onReload?(outcome)
        return outcome
    }

    /// Size, modification time and inode of every file the paths stand for (directories listed afresh, so a
    /// new CRL file dropped into a directory counts as a change).
    private static func fingerprint(of paths: [String]) -> [FileFingerprint] {
        var files: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue,
                let entries = try? DirectoryListing.entries(atPath: path)
            {
                // A listing that fails yields no files here; the load that follows the change reports why. A name
                // that is not UTF-8 is fingerprinted by its escaped form (a change all the same), and the load
                // refuses it (CRLFiles.files).
                files += entries.filter { CRLFiles.isCRLName($0.lossyName) }.map { $0.name ?? $0.escaped }.sorted().map {
                    (path as NSString).appendingPathComponent($0)
                }
            } else {
                files.append(path)
            }
        }
        return files.map { file in
            let attributes = (try? FileManager.default.attributesOfItem(atPath: file)) ?? [:]
            return FileFingerprint(
                path: file,
                size: (attributes[.size] as? NSNumber)?.intValue ?? -1,
                modified: (attributes[.modificationDate] as? Date) ?? .distantPast,
                inode: (attributes[.systemFileNumber] as? NSNumber)?.intValue ?? -1
            )
        }
    }
}
