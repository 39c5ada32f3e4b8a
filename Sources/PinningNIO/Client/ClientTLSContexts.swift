import NIOConcurrencyHelpers
package import NIOSSL

/// The one place this module makes client `NIOSSLContext`s: every ``PinnedTLSClient`` (and so every
/// ``PinnedHTTPClient``, report batch, CRL download over https and challenge connection) gets its context here, and
/// clients with equal settings share one.
///
/// - The key is everything the context is built from: the TLS configuration without its private key as NIOSSL
///   compares it (`bestEffortEquals`: versions, ciphers, groups, signature algorithms, verification mode, trust
///   roots, the identity's certificate chain, ALPN, renegotiation, shutdown timeout and NIOSSL's callbacks), the
///   private key as the object it is (see ``Key``), plus the ``TLSKeyLog`` by identity (its callback is made anew
///   each time, so it is compared as the object it writes to). `bestEffortEquals` may call equal configurations
///   different (a closure made twice), never different ones equal: the worst case is a second context, never a
///   wrong one.
/// - A configuration that names a file (certificate chain, private key or trust roots read from a path) is not
///   cached: the file may change between two clients, and the second must read it again, as it always did.
/// - Bounded: at most ``capacity`` contexts; the least recently used is dropped first (a client that holds it keeps
///   it alive).
///
/// Sharing a context cannot let a resumed session skip our verification, so the evaluator is deliberately not part
/// of the key:
/// - NIOSSL gives client connections no session to resume: it never calls `SSL_set_session` nor installs a client
///   session cache callback, so every client handshake is a full one and BoringSSL asks the verification callback.
/// - The callback (the evaluator, the settings, the host) belongs to each connection (`NIOSSLClientHandler`), not to
///   the context, so clients with different evaluators judge their own handshakes on a shared context.
/// - Should NIOSSL ever resume a client session, ``PinningHandshakeHandler`` refuses any handshake that completes
///   without the callback having trusted that very connection (``PinningConnectionError/Code/notEvaluated``): a
///   shared context could then cost a refused connection, never an unevaluated trusted one. The test
///   `ClientTLSContextsTests` checks both on one shared context against a server that issues tickets.
package final class ClientTLSContexts: Sendable {
    /// The process's contexts, used unless a caller (a test) hands its own.
    package static let shared = ClientTLSContexts(capacity: 32)

    /// The most contexts kept.
    package let capacity: Int

    /// A context's key. The private key is kept out of the configuration NIOSSL hashes and is keyed by the object
    /// that holds it, because NIOSSL's own hash of a key (`NIOSSLPrivateKey.hash(into:)`, reached through
    /// `TLSConfiguration.bestEffortHash`) DER-encodes it with a `try!`, and BoringSSL cannot encode an Ed25519 key
    /// that way: every client with an Ed25519 identity crashed the process there. Keyed by object identity:
    /// - two different identities never share a context: each loaded identity (``TLSIdentity``) holds its own key
    ///   object, and the key holds that object (``privateKey``), so its identifier cannot be
    ///   reused by another key while the entry exists;
    /// - the clients made from one identity (the usual case: one device identity, many connections, report batches,
    ///   challenge connections) share its context, as before;
    /// - the same key loaded twice (two `TLSIdentity.pem(…)` calls) makes two contexts: a second context, never a
    ///   wrong one. No key encoding or comparison is needed, so it holds for every key type NIOSSL can load (RSA,
    ///   P-256, P-384, P-521, Ed25519) and for custom keys.
    private struct Key: Hashable {
        /// The configuration, its private key removed (hashed and compared by NIOSSL without encoding a key).
        let configuration: TLSConfiguration
        /// The configuration's private key object, nil for none.
        let privateKey: NIOSSLPrivateKey?
        let keyLog: TLSKeyLog?

        init(configuration: TLSConfiguration, keyLog: TLSKeyLog?) {
            var withoutKey = configuration
            if case .privateKey(let key)? = configuration.privateKey {
                self.privateKey = key
            } else {
                // Only in-memory keys are cached (``ClientTLSContexts/readsFiles(_:)``), so this is "no key".
                self.privateKey = nil
            }
            withoutKey.privateKey = nil
            self.configuration = withoutKey
            self.keyLog = keyLog
        }

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.keyLog == rhs.keyLog && lhs.privateKey === rhs.privateKey && lhs.configuration.bestEffortEquals(rhs.configuration)
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(self.keyLog)
            hasher.combine(self.privateKey.map(ObjectIdentifier.init))
            self.configuration.bestEffortHash(into: &hasher)
        }
    }

    private struct Entry {
        var context: NIOSSLContext
        var configuration: TLSConfiguration
        var lastUse: UInt64
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        var uses: UInt64 = 0
        var made = 0
    }

    private let state = NIOLockedValueBox(State())

    /// A cache of at most `capacity` contexts (at least 1).
    package init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// How many contexts this cache has made (hits make none).
    package var contextsMade: Int { self.state.withLockedValue { $0.made } }

    /// How many contexts are kept now.
    package var count: Int { self.state.withLockedValue { $0.entries.count } }

    /// The context for `configuration` with `keyLog` applied (a kept one when the settings are equal), and the
    /// configuration it was made from.
    ///
    /// - Throws: what NIOSSL throws when it cannot build the context (an unusable key, say).
    package func context(for configuration: TLSConfiguration, keyLog: TLSKeyLog?) throws -> (context: NIOSSLContext, configuration: TLSConfiguration) {
        var keyed = configuration
        if keyLog != nil {
            // The key log's callback replaces the configuration's own; the key log itself is the key.
            keyed.keyLogCallback = nil
        }
        var applied = keyLog.map { $0.applied(to: keyed) } ?? keyed
        // Every context feeds the alert observers' secrets (``TLSAlertObserver``), then the key log as before; not
        // part of the key (the registry is the process's one).
        applied.keyLogCallback = TLSAlertSecrets.shared.keyLogCallback(forwardingTo: applied.keyLogCallback)
        guard !Self.readsFiles(keyed) else {
            self.state.withLockedValue { $0.made += 1 }
            return (try NIOSSLContext(configuration: applied), applied)
        }
        let key = Key(configuration: keyed, keyLog: keyLog)
        let kept = self.state.withLockedValue { state -> Entry? in
            guard var entry = state.entries[key] else { return nil }
            state.uses += 1
            entry.lastUse = state.uses
            state.entries[key] = entry
            return entry
        }
        if let kept { return (kept.context, kept.configuration) }
        // Made outside the lock (it parses keys and certificates); two callers racing for one key may both make
        // one, and both then use the one kept first.
        let made = try NIOSSLContext(configuration: applied)
        let entry = self.state.withLockedValue { state -> Entry in
            state.made += 1
            state.uses += 1
            if var existing = state.entries[key] {
                existing.lastUse = state.uses
                state.entries[key] = existing
                return existing
            }
            if state.entries.count >= self.capacity, let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key {
                state.entries.removeValue(forKey: oldest)
            }
            let entry = Entry(context: made, configuration: applied, lastUse: state.uses)
            state.entries[key] = entry
            return entry
        }
        return (entry.context, entry.configuration)
    }

    /// Whether NIOSSL reads any part of `configuration` from a file when the context is made. (Told by the cases
    /// that are not files: NIOSSL's `.file` cases of certificate and key sources are deprecated.)
    private static func readsFiles(_ configuration: TLSConfiguration) -> Bool {
        let chainFromFile = configuration.certificateChain.contains { source in
            if case .certificate = source { return false }
            return true
        }
        var keyFromFile = false
        if let key = configuration.privateKey {
            if case .privateKey = key {} else { keyFromFile = true }
        }
        var rootsFromFile = false
        if case .file? = configuration.trustRoots { rootsFromFile = true }
        let additionalFromFile = configuration.additionalTrustRoots.contains { roots in
            if case .file = roots { return true }
            return false
        }
        return chainFromFile || keyFromFile || rootsFromFile || additionalFromFile
    }
}
