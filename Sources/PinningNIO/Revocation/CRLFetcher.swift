public import Foundation
import NIOConcurrencyHelpers
public import NIOCore
import NIOHTTP1
public import NIOPosix
public import Pinning
public import X509

/// Downloads CRLs from certificates' distribution points (RFC 5280 §4.2.1.13) and keeps them until their
/// nextUpdate. Off unless a caller makes one: `check --fetch-crls`, or a ``RevocationFetchingEvaluator``.
///
/// - Downloads go through this package's own client path, a ``PinnedHTTPClient`` (its one HTTP/1.1 exchange, on a
///   TLS context shared with every client of equal TLS settings). `http://` is fetched in the clear (RFC 5280 CRLs
///   are signed, and that is how CAs publish them); `https://` over a pinned connection judged by the platform
///   roots, so a CRL is never blocked by the pins it serves.
/// - Each download is bounded: ``timeout`` for connecting and for the whole response, ``maximumSize`` bytes,
///   a 200 answer only, no redirects.
/// - A downloaded CRL is kept until its nextUpdate. Within ``refreshMargin`` of it, the cached CRL is still
///   answered and a new one is fetched in the background, so a busy client never waits on a refresh. A failed
///   download is remembered for ``failureBackoff`` (no hammering of a dead distribution point) and the
///   certificate's status is then unknown: hard mode refuses, soft mode warns.
/// - The CRLs are only handed over; whether they count (issuer, signature, dates) is decided by the revocation
///   stage, as for CRLs read from files.
public final class CRLFetcher: Sendable {
    /// Why a download failed, in words.
    public struct FetchError: Error, Sendable, CustomStringConvertible {
        /// `crlFetchFailed`: the error's stable code (for logs, metrics and JSON; the words may change).
        public var code: String { "crlFetchFailed" }

        public let url: URL
        public let message: String
        public var description: String { "\(self.url.absoluteString): \(self.message)" }
    }

    /// Bound on connecting and on the whole response, each.
    public let timeout: TimeAmount
    /// The largest CRL downloaded; a larger answer is cut off and refused.
    public let maximumSize: Int
    /// How long before a CRL's nextUpdate it is fetched again (in the background).
    public let refreshMargin: TimeInterval
    /// How long a failed download is remembered before it is tried again.
    public let failureBackoff: TimeInterval

    private let group: any EventLoopGroup
    /// Where the client of each download takes its TLS context.
    private let contexts: ClientTLSContexts
    private let clock: @Sendable () -> Date
    private let state = NIOLockedValueBox(State())

    private struct State {
        var entries: [URL: Entry] = [:]
        var refreshing: Set<URL> = []
        var downloads = 0
    }

    private enum Entry {
        /// `generation` numbers each successful download, so that callers can tell "the same CRLs as last time"
        /// without comparing megabytes (``RevocationFetchingEvaluator`` reuses its prepared policy then).
        case fetched([CertificateRevocationList], until: Date, generation: Int)
        case failed(FetchError, retryAfter: Date)
    }

    /// What ``crls(for:)`` found.
    public struct Fetched: Sendable {
        /// The CRLs, without duplicates.
        public var crls: [CertificateRevocationList]
        /// The distribution points that could not be had, and why.
        public var failures: [FetchError]
        /// One number per download behind ``crls``; equal lists mean the same CRLs.
        public var generations: [Int]
    }

    /// A fetcher.
    ///
    /// - Parameters:
    ///   - timeout: For connecting and for the response, each; default 5 seconds.
    ///   - maximumSize: Default 16 MiB (a 100,000-entry CRL is about 5 MiB).
    ///   - refreshMargin: Default one hour.
    ///   - failureBackoff: Default 30 seconds.
    ///   - group: The event loops the downloads run on; default the shared `MultiThreadedEventLoopGroup`.
    public convenience init(
        timeout: TimeAmount = .seconds(5),
        maximumSize: Int = 16 * 1024 * 1024,
        refreshMargin: TimeInterval = 3600,
        failureBackoff: TimeInterval = 30,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.init(timeout: timeout, maximumSize: maximumSize, refreshMargin: refreshMargin, failureBackoff: failureBackoff, group: group, contexts: .shared)
    }

    /// As ``init(timeout:maximumSize:refreshMargin:failureBackoff:group:)``, `https` downloads taking their TLS
    /// context from `contexts`.
    package init(
        timeout: TimeAmount = .seconds(5),
        maximumSize: Int = 16 * 1024 * 1024,
        refreshMargin: TimeInterval = 3600,
        failureBackoff: TimeInterval = 30,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        contexts: ClientTLSContexts
    ) {
        self.timeout = timeout
        self.maximumSize = min(max(maximumSize, 1), CertificateRevocationList.maximumSize)
        self.refreshMargin = refreshMargin
        self.failureBackoff = failureBackoff
        self.group = group
        self.contexts = contexts
        self.clock = { Date() }
    }

    /// The fetcher every ``PinnedTLSClient`` uses unless given another: one cache of downloaded CRLs per process.
    public static let shared = CRLFetcher()

    /// How many downloads were started since the fetcher was made (cache hits start none).
    public var downloadCount: Int {
        self.state.withLockedValue { $0.downloads }
    }

    /// The CRLs for the distribution points of `certificates`, from the cache or downloaded now, and the
    /// failures of those that could not be had.
    public func crls(for certificates: [Certificate]) async -> Fetched {
        var urls: [URL] = []
        for certificate in certificates {
            for url in certificate.crlDistributionPointURLs where !urls.contains(url) {
                urls.append(url)
            }
        }
        var fetched = Fetched(crls: [], failures: [], generations: [])
        for url in urls {
            switch await self.crls(at: url) {
            case .success(let found):
                for crl in found.crls where !fetched.crls.contains(crl) { fetched.crls.append(crl) }
                fetched.generations.append(found.generation)
            case .failure(let error):
                fetched.failures.append(error)
            }
        }
        return fetched
    }

    /// The CRLs at `url`: cached until their nextUpdate (refreshed in the background near it), else downloaded.
    public func crls(at url: URL) async -> Result<(crls: [CertificateRevocationList], generation: Int), FetchError> {
        let now = self.clock()
        let cached = self.state.withLockedValue { $0.entries[url] }
        switch cached {
        case .fetched(let lists, let until, let generation)? where now < until:
            if until.timeIntervalSince(now) <= self.refreshMargin {
                self.refreshInBackground(url)
            }
            return .success((lists, generation))
        case .failed(let error, let retryAfter)? where now < retryAfter:
            return .failure(error)
        default:
            return await self.download(url)
        }
    }

    private func refreshInBackground(_ url: URL) {
        let start = self.state.withLockedValue { $0.refreshing.insert(url).inserted }
        guard start else { return }
        Task.detached { [self] in
            _ = await self.download(url)
            self.state.withLockedValue { _ = $0.refreshing.remove(url) }
        }
    }

    private func download(_ url: URL) async -> Result<(crls: [CertificateRevocationList], generation: Int), FetchError> {
        let generation = self.state.withLockedValue { state -> Int in
            state.downloads += 1
            return state.downloads
        }
        let result: Result<[CertificateRevocationList], FetchError>
        do {
            let bytes = try await self.get(url)
            do {
                result = .success(try CertificateRevocationList.read(bytes))
            } catch {
                result = .failure(FetchError(url: url, message: "not a CRL: \(error.message)"))
            }
        } catch {
            result = .failure(error)
        }
        let now = self.clock()
        self.state.withLockedValue { state in
            switch result {
            case .success(let lists):
                // Kept until the earliest nextUpdate among them; one without nextUpdate is unusable anyway, so
                // it is kept only for the back-off, not forever.
                let until = lists.compactMap(\.nextUpdate).min() ?? now.addingTimeInterval(self.failureBackoff)
                state.entries[url] = .fetched(lists, until: until, generation: generation)
            case .failure(let error):
                // A refresh that fails keeps the CRL it was refreshing while that is still current.
                if case .fetched(_, let until, _)? = state.entries[url], now < until { return }
                state.entries[url] = .failed(error, retryAfter: now.addingTimeInterval(self.failureBackoff))
            }
        }
        return result.map { ($0, generation) }
    }

    // MARK: - HTTP

    /// `url`'s body, through the module's client path: `http` in the clear (RFC 5280's distribution points publish
    /// signed CRLs over plain HTTP, and the signature is what counts), `https` over a pinned connection judged by
    /// the platform roots and the host name, no pins (a CRL is never blocked by the policy of the connection it is
    /// about). A 200 answer only, no redirects, at most ``maximumSize`` bytes.
    private func get(_ url: URL) async throws(FetchError) -> [UInt8] {
        let scheme = url.scheme?.lowercased()
        guard scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty else {
            throw FetchError(url: url, message: "not an http:// or https:// URL")
        }
        let configuration = PinnedHTTPClientConfiguration(
            connectTimeout: self.timeout, requestTimeout: self.timeout, maximumRedirects: 0, maximumBodySize: self.maximumSize, httpVersions: .http1Only)
        let client: PinnedHTTPClient
        do {
            let contexts = self.contexts
            client = try PinnedHTTPClient(
                tls: { base in
                    try PinnedTLSClient(evaluator: SecurityPolicy.defaultEvaluation, settings: TrustSettings(), identity: nil, configuration: base, keyLog: nil, contexts: contexts)
                }, identity: nil, tlsConfiguration: nil, configuration: configuration, group: self.group)
        } catch {
            throw FetchError(url: url, message: "no TLS context for the download: \(ConnectionFailureWords.words(error))")
        }
        let result: Result<CollectedResponse, PinningConnectionError>
        do {
            let accept = HTTPHeaders([("accept", "application/pkix-crl, application/x-pkcs7-crl, */*")])
            result = .success(try await client.perform(url, request: .init(method: .GET, body: nil), headers: accept, allowsPlainHTTP: true).response)
        } catch {
            result = .failure(error)
        }
        await client.shutdown()
        switch result {
        case .success(let response) where response.head.status == .ok:
            return response.body
        case .success(let response):
            throw FetchError(url: url, message: "the server answered HTTP \(response.head.status.code) \(response.head.status.reasonPhrase)")
        case .failure(let error):
            if let limit = error.exceededBodyLimit {
                throw FetchError(url: url, message: "the CRL is larger than \(limit) bytes")
            }
            throw FetchError(url: url, message: error.message)
        }
    }
}

/// An evaluator that first fetches the CRLs of the presented chain's distribution points, then lets `base`
/// decide with them added to the trust's revocation policy.
///
/// It fetches only when the policy `base` would apply asks for it (the `fetch` of ``/Pinning/RevocationPolicy/init(crls:mode:scope:fetch:)``: set by
/// `check --fetch-crls`, by a configuration entry's `"fetch": true`, or by your own settings), and then for the
/// certificates that policy's scope names: the leaf's distribution points, or (scope chain) every presented
/// certificate's. Otherwise it passes the evaluation through untouched. Fetching never relaxes anything: a CRL
/// that cannot be had leaves the status unknown, with the download's failure in the reason.
///
/// Every ``PinnedTLSClient`` puts one in front of its evaluator (sharing ``CRLFetcher/shared``), so a policy that
/// asks for fetching is honoured by every client, proxy and adapter built on it.
public struct RevocationFetchingEvaluator: ServerTrustEvaluating {
    /// The evaluator that decides.
    public let base: any ServerTrustEvaluating
    /// Where CRLs come from.
    public let fetcher: CRLFetcher
    /// Prepared policies by (the trust's own policy, the downloads behind the fetched CRLs): a policy indexes its
    /// CRLs and remembers their verified signatures, so rebuilding it per handshake would hash and verify a
    /// large CRL every time.
    private let prepared = PreparedPolicies()

    /// Fetching in front of `base`.
    public init(_ base: any ServerTrustEvaluating, fetcher: CRLFetcher = .shared) {
        self.base = base
        self.fetcher = fetcher
    }

    /// `evaluator`, with fetching in front of it unless it already has some.
    static func wrapping(_ evaluator: any ServerTrustEvaluating) -> any ServerTrustEvaluating {
        evaluator is RevocationFetchingEvaluator ? evaluator : RevocationFetchingEvaluator(evaluator)
    }

    public func evaluate(_ trust: ServerTrust, forDomain domain: String?) async -> TrustEvaluation {
        guard let wanted = self.base.revocationPolicy(for: trust, forDomain: domain), wanted.fetch, !wanted.fetched else {
            return await self.base.evaluate(trust, forDomain: domain)
        }
        var trust = trust
        let certificates = wanted.scope == .leaf ? Array(trust.certificates.prefix(1)) : trust.certificates
        let fetched = await self.fetcher.crls(for: certificates)
        // The CRLs are added to the trust's own policy (or to a new one with the wanted mode and scope); a
        // configuration then combines that with its entry's, as it does with any CRLs a caller hands over.
        let own = trust.revocation ?? RevocationPolicy(crls: [], mode: wanted.mode, scope: wanted.scope, fetch: true)
        var policy = self.prepared.policy(own: own, generations: fetched.generations) {
            var combined = own
            combined.crls = own.crls + fetched.crls.filter { !own.crls.contains($0) }
            return combined
        }
        policy.fetch = true
        policy.fetched = true
        // Why a distribution point gave nothing: added to the reason of an unknown status.
        policy.unavailable = fetched.failures.map { "fetching \($0.description)" }
        trust.revocation = policy
        return await self.base.evaluate(trust, forDomain: domain)
    }

    /// The base's immediate answer when nothing is to be fetched; nil (evaluate) when something is, since the
    /// CRLs decide the verdict.
    public func immediateEvaluation(_ trust: ServerTrust, forDomain domain: String?) -> TrustEvaluation? {
        if let wanted = self.base.revocationPolicy(for: trust, forDomain: domain), wanted.fetch, !wanted.fetched {
            return nil
        }
        return self.base.immediateEvaluation(trust, forDomain: domain)
    }

    public func revocationPolicy(for trust: ServerTrust, forDomain domain: String?) -> RevocationPolicy? {
        self.base.revocationPolicy(for: trust, forDomain: domain)
    }
}

extension RevocationFetchingEvaluator: EvaluatingWithoutWaiting {
    /// The base's evaluation without a task when nothing is to be fetched; nil (a task: fetch, then evaluate) when
    /// something is.
    package func evaluateWithoutWaiting(_ trust: ServerTrust, forDomain domain: String?) -> TrustEvaluation? {
        if let wanted = self.base.revocationPolicy(for: trust, forDomain: domain), wanted.fetch, !wanted.fetched {
            return nil
        }
        return self.base.evaluationWithoutTask(trust, forDomain: domain)
    }
}

/// A small, bounded memo of combined policies.
final class PreparedPolicies: Sendable {
    private struct Key: Hashable {
        var own: RevocationPolicy
        var generations: [Int]
    }

    private let table = NIOLockedValueBox<[Key: RevocationPolicy]>([:])

    func policy(own: RevocationPolicy, generations: [Int], make: () -> RevocationPolicy) -> RevocationPolicy {
        let key = Key(own: own, generations: generations)
        if let known = self.table.withLockedValue({ $0[key] }) { return known }
        let made = make()
        self.table.withLockedValue { table in
            if table.count >= 64 { table.removeAll() }
            table[key] = made
        }
        return made
    }
}
