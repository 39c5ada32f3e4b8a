import Crypto
import Foundation
import X509

/// Whether and how certificates on a validated path are checked against certificate revocation lists.
///
/// The CRLs are values the caller hands over (read from files, fetched by `PinningNIO`, or made in memory); the
/// core never fetches or reads anything itself. Put a policy in ``TrustSettings/revocation``; nil (the default)
/// checks nothing, as a client without CRLs does.
///
/// <!-- snippet: given(crlURL: URL, fleetRoot: Certificate)
/// import Foundation
/// import X509
/// -->
/// ```swift
/// let crls = try CertificateRevocationList.read(Array(Data(contentsOf: crlURL)))
/// var settings = TrustSettings(anchors: [fleetRoot], anchorsOnly: true, purpose: .clientAuthentication)
/// settings.revocation = RevocationPolicy(crls: crls, mode: .hard, scope: .leaf)
/// ```
///
/// What is checked, top to bottom, for each certificate in scope (RFC 5280 §6.3, with the limits below):
/// 1. Only CRLs whose issuer name is the certificate's issuer name are candidates: a CRL from another issuer
///    never revokes and never vouches (x509-limbo `certificate-serial-on-crl-different-issuer`).
/// 2. A candidate is usable only if it passes `CertificateRevocationList.unusable` (CRL number present, no
///    unknown critical extension, not delta, not indirect or scoped), is signed by the certificate's issuer *on
///    the validated path* (`CertificateRevocationList.verifySignature(issuer:)`, which also requires
///    `cRLSign` when the issuer has keyUsage), and is current: `thisUpdate ≤ time ≤ nextUpdate`.
/// 3. A certificate listed on any usable CRL is revoked. Listed means revoked whatever the revocation date
///    says relative to the validation time, as OpenSSL and browsers do: a CRL lists what is revoked now.
///    `certificateHold` counts as revoked while it is listed.
/// 4. Not listed on a usable CRL: good. No usable CRL at all: unknown, with the reasons each candidate failed.
///
/// Mode ``Mode/hard`` refuses a path with an unknown status; ``Mode/soft`` accepts it with a warning. A revoked
/// certificate is refused in both modes: soft mode waives only the missing answer, never a "revoked".
public struct RevocationPolicy: Sendable, Hashable {
    /// What an unknown status does.
    public enum Mode: String, Sendable, Hashable, CaseIterable {
        /// No usable CRL for a certificate in scope refuses the path (``TrustFailure/Code/revocationUnknown``).
        case hard
        /// No usable CRL for a certificate in scope is a warning on the trusted verdict.
        case soft
    }

    /// Which certificates of the validated path are checked.
    public enum Scope: String, Sendable, Hashable, CaseIterable {
        /// The leaf only (as `openssl verify -crl_check`).
        case leaf
        /// Every certificate but the trust anchor (as `openssl verify -crl_check_all`). Anchors are trusted as
        /// configured: to stop trusting one, remove it.
        case chain
    }

    /// The CRLs to check against, in the order given.
    package var crls: [CertificateRevocationList] {
        get { self.index.crls }
        set { self.index = CRLIndex(newValue) }
    }
    /// What an unknown status does; default ``Mode/hard``.
    package var mode: Mode
    /// Which certificates are checked; default ``Scope/leaf``.
    package var scope: Scope
    /// Why CRLs that were looked for could not be had (a download that failed), in words. Added to the reason
    /// of an unknown status; it changes no verdict and is not part of equality.
    package var unavailable: [String] = []
    /// CRLs are also wanted from the CRL distribution points of the certificates in scope (RFC 5280
    /// §4.2.1.13), in addition to ``crls``. The core never downloads anything: `PinningNIO`'s
    /// `RevocationFetchingEvaluator`, which every `PinnedTLSClient` puts in front of its evaluator, fetches them,
    /// adds them to ``crls`` and sets ``fetched``. An evaluator that does not fetch leaves a certificate with no
    /// CRL among ``crls`` unknown, and says why in the reason; it never treats "not fetched" as "not revoked".
    package var fetch: Bool
    /// Set by the evaluator that fetched for this policy (whether or not every download succeeded; the failures
    /// are in ``unavailable``).
    package var fetched: Bool = false

    /// The CRLs grouped by issuer, their digest and a memo of verified signatures; rebuilt when ``crls`` is set.
    private(set) var index: CRLIndex

    /// A policy checking `scope` against `crls` in `mode`.
    public init(crls: [CertificateRevocationList], mode: Mode = .hard, scope: Scope = .leaf, fetch: Bool = false) {
        self.index = CRLIndex(crls)
        self.mode = mode
        self.scope = scope
        self.fetch = fetch
    }

    /// Two policies are equal when they have the same mode, scope, fetching state and CRLs (compared by SHA-256
    /// of each CRL, in order), so the verified-result cache does not hash megabytes of CRL per look-up.
    public static func == (lhs: RevocationPolicy, rhs: RevocationPolicy) -> Bool {
        lhs.mode == rhs.mode && lhs.scope == rhs.scope && lhs.fetch == rhs.fetch && lhs.fetched == rhs.fetched
            && (lhs.index === rhs.index || lhs.index.digest == rhs.index.digest)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.mode)
        hasher.combine(self.scope)
        hasher.combine(self.fetch)
        hasher.combine(self.fetched)
        hasher.combine(self.index.digest)
    }
}

/// The CRLs of one ``RevocationPolicy``, prepared once: grouped by issuer name (a look-up per certificate, not a
/// scan), a digest that identifies the set, the window in which every CRL is current, and a bounded memo of
/// signature checks so that a large CRL is hashed and verified once per issuer certificate, not per handshake.
final class CRLIndex: Sendable {
    let crls: [CertificateRevocationList]
    let byIssuer: [DistinguishedName: [Int]]
    /// SHA-256 over the SHA-256 of each CRL, in order.
    let digest: [UInt8]
    /// Where the verdicts that depend on these CRLs may be reused: after the latest thisUpdate and before the
    /// earliest nextUpdate (at any instant inside, each CRL is either current throughout or never was).
    let window: ValidityWindow?
    private let signatureMemo = LockedValueBox<[SignatureMemoKey: String?]>([:])

    /// The CRL's position and the issuer certificate's signed bytes (which hold its name, key and keyUsage:
    /// everything ``CertificateRevocationList/verifySignature(issuer:)`` reads). Hashing those is a fraction of
    /// hashing a parsed `Certificate`, on a path every evaluation takes.
    private struct SignatureMemoKey: Hashable {
        var crl: Int
        var issuer: ArraySlice<UInt8>
    }

    /// At most this many remembered signature checks; the memo is emptied when full (a peer sending many
    /// distinct issuers can cost us verifications, never memory).
    private static let memoLimit = 4096

    init(_ crls: [CertificateRevocationList]) {
        self.crls = crls
        var byIssuer: [DistinguishedName: [Int]] = [:]
        var outer = SHA256()
        var notBefore: Date?
        var notAfter: Date?
        for (position, crl) in crls.enumerated() {
            byIssuer[crl.issuer, default: []].append(position)
            outer.update(data: Array(SHA256.hash(data: crl.der)))
            notBefore = max(notBefore ?? crl.thisUpdate, crl.thisUpdate)
            if let next = crl.nextUpdate { notAfter = min(notAfter ?? next, next) }
        }
        self.byIssuer = byIssuer
        self.digest = Array(outer.finalize())
        if let notBefore {
            // A CRL without nextUpdate is never usable, so it does not depend on the clock.
            self.window = ValidityWindow(notBefore: notBefore, notAfter: notAfter ?? .distantFuture)
        } else {
            self.window = nil
        }
    }

    /// The positions of the CRLs issued under `name`.
    func crls(issuedBy name: DistinguishedName) -> [Int] {
        self.byIssuer[name] ?? []
    }

    /// Nil when `issuer` signed CRL number `position` (name, cRLSign, signature); else why not, in words.
    func signatureProblem(crl position: Int, issuer: Certificate) -> String? {
        let key = SignatureMemoKey(crl: position, issuer: issuer.tbsCertificateBytes)
        if let known = self.signatureMemo.withLockedValue({ $0[key] }) {
            return known
        }
        let problem: String?
        do {
            try self.crls[position].verifySignature(issuer: issuer)
            problem = nil
        } catch {
            problem = error.message
        }
        self.signatureMemo.withLockedValue { memo in
            if memo.count >= Self.memoLimit { memo.removeAll() }
            memo[key] = problem
        }
        return problem
    }
}

/// A small, bounded memo of policies made from two others (an entry's and a trust's CRLs, combined): making one
/// indexes and digests every CRL in it, which must not happen per handshake.
final class RevocationPolicyMemo: Sendable {
    private struct Key: Hashable {
        var first: RevocationPolicy
        var second: RevocationPolicy
    }

    /// Emptied when full: a caller cycling through many CRL sets costs re-indexing, never memory.
    private static let limit = 64
    private let table = LockedValueBox<[Key: RevocationPolicy]>([:])

    init() {}

    func combination(_ first: RevocationPolicy, _ second: RevocationPolicy, make: () -> RevocationPolicy) -> RevocationPolicy {
        let key = Key(first: first, second: second)
        if let known = self.table.withLockedValue({ $0[key] }) { return known }
        let made = make()
        self.table.withLockedValue { table in
            if table.count >= Self.limit { table.removeAll() }
            table[key] = made
        }
        return made
    }
}
