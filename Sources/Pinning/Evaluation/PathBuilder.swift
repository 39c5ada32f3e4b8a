import SwiftASN1
import X509

/// Path building of our own (issue 31): from the leaf up through the presented intermediates to a trust anchor,
/// every candidate path judged by ``ChainPolicy``, within the evaluation's ``PathBuildingBudget``.
///
/// It replaces swift-certificates' `Verifier`, whose search it follows step for step so that verdicts stay the
/// same (the differential test runs both on every x509-limbo case and on generated chains), for two reasons:
///
/// - **A verified-link memo** (``VerifiedLinkMemo``): the signature of a link already verified, for exactly these
///   bytes of issuer and subject, on a path a policy trusted, is not verified again. `Verifier` checks every
///   link's signature itself, with no hook, so the intermediate → root signature of every first-seen leaf was
///   verified again on each handshake (issue 12 ended blocked on that). The memo holds signature results only,
///   never a verdict: every candidate path still meets every stage of the policy.
/// - **The work budget is charged inside the search**, where the work is done, rather than through a certificate
///   store the search happens to consult.
///
/// The search, as `Verifier`'s (swift-certificates 1.21):
/// 1. A leaf with a critical extension the policy does not handle is refused.
/// 2. A leaf that is itself a trust anchor (the same bytes) is judged as a path of its own first.
/// 3. Depth first, from the leaf: for the certificate at the tip, the anchors named as its issuer are tried
///    first (each, with the tip's signature verified, completes a candidate path the policy judges; the first
///    path the policy accepts is the answer), then the intermediates named as its issuer are pushed, so the most
///    suitable is extended next. Suitability: an issuer whose subjectKeyIdentifier equals the tip's
///    authorityKeyIdentifier first, one without a subjectKeyIdentifier next, a mismatching one last; presented
///    order within each.
/// 4. A candidate issuer is skipped when it has an unhandled critical extension, when the partial path already
///    holds a certificate with its subject, key and subjectAltName (RFC 4158 §5.2 loop detection, which also
///    stops mutual cross-signatures), or when it did not sign the tip.
///
/// Budget, unchanged from issue 27: each look-up of a name that exists takes one issuer look-up; each candidate
/// offered is charged as a signature check by its key when it is offered, whether or not the memo then saves
/// the check, so a memo never lets a search do more work than the budget allows without it.
struct PathBuilder {
    let anchors: [DistinguishedName: [Certificate]]
    let intermediates: [DistinguishedName: [Certificate]]
    let budget: PathBuildingBudget
    let handledCriticalExtensions: [ASN1ObjectIdentifier]
    let facts: CertificateFactsTable
    let links: VerifiedLinkMemo

    /// The first path from `leaf` to an anchor that `policy` accepts, or nil.
    func build(leaf: Certificate, policy: ChainPolicy) -> [Certificate]? {
        if self.hasUnhandledCriticalExtension(leaf) { return nil }
        if self.anchors[leaf.subject]?.contains(leaf) == true, policy.accepts([leaf]) {
            return [leaf]
        }

        var partialPaths: [[Certificate]] = [[leaf]]
        while let partial = partialPaths.popLast() {
            let anchors = self.candidates(in: self.anchors, issuing: partial[partial.count - 1])
            for index in anchors.indices where self.canExtend(partial, with: anchors[index]) {
                let path = Self.extending(partial, with: anchors[index])
                if policy.accepts(path) { return path }
            }
            let issuers = self.candidates(in: self.intermediates, issuing: partial[partial.count - 1])
            for index in issuers.indices.reversed() where self.canExtend(partial, with: issuers[index]) {
                partialPaths.append(Self.extending(partial, with: issuers[index]))
            }
        }
        return nil
    }

    /// `partial` with `issuer` appended, in one allocation (`partial + [issuer]` allocated a one-element array
    /// too, and the loops copied each certificate before appending it).
    private static func extending(_ partial: [Certificate], with issuer: Certificate) -> [Certificate] {
        var path: [Certificate] = []
        path.reserveCapacity(partial.count + 1)
        path.append(contentsOf: partial)
        path.append(issuer)
        return path
    }

    /// The certificates of `store` named as `tip`'s issuer, most suitable first, as far as the budget pays.
    private func candidates(in store: [DistinguishedName: [Certificate]], issuing tip: Certificate) -> [Certificate] {
        guard let named = store[tip.issuer], self.budget.takeLookup() else { return [] }
        let offered = self.budget.candidates(named, named: tip.issuer)
        // One candidate (the usual case: one intermediate, one root) has no order to choose; sorting it would
        // only copy the certificate (some twenty reference-counted buffers) three times.
        guard offered.count > 1, case .success(let authorityKeyIdentifier?) = self.facts.facts(of: tip).authorityKeyIdentifier else {
            return offered
        }
        // A stable sort: presented order is kept within each preference.
        return offered.enumerated()
            .map { (preference: self.preference(of: $0.element, for: authorityKeyIdentifier), index: $0.offset, certificate: $0.element) }
            .sorted { ($0.preference, -$0.index) > ($1.preference, -$1.index) }
            .map(\.certificate)
    }

    private func preference(of issuer: Certificate, for authorityKeyIdentifier: AuthorityKeyIdentifier) -> Int {
        guard case .success(let subjectKeyIdentifier?) = self.facts.facts(of: issuer).subjectKeyIdentifier else { return 0 }
        return authorityKeyIdentifier.keyIdentifier == subjectKeyIdentifier.keyIdentifier ? 1 : -1
    }

    /// Whether `issuer` may extend `partial`: no unhandled critical extension, no loop, and its signature on the
    /// tip verifies (or was verified on a trusted path before, for exactly these bytes).
    private func canExtend(_ partial: [Certificate], with issuer: Certificate) -> Bool {
        if self.hasUnhandledCriticalExtension(issuer) { return false }
        for index in partial.indices where Self.sameEntity(partial[index], issuer) { return false }
        if self.links.isVerified(issuer: issuer, subject: partial[partial.count - 1]) {
            self.budget.countSignature(remembered: true)
            return true
        }
        self.budget.countSignature(remembered: false)
        return issuer.publicKey.isValidSignature(partial[partial.count - 1].signature, for: partial[partial.count - 1])
    }

    /// RFC 4158 §5.2: the same subject, public key and subjectAltName (bytes, or both absent).
    private static func sameEntity(_ left: Certificate, _ right: Certificate) -> Bool {
        left.subject == right.subject && left.publicKey == right.publicKey
            && left.extensions[oid: .X509ExtensionID.subjectAlternativeName]?.value == right.extensions[oid: .X509ExtensionID.subjectAlternativeName]?.value
    }

    private func hasUnhandledCriticalExtension(_ certificate: Certificate) -> Bool {
        certificate.extensions.contains { $0.critical && !self.handledCriticalExtensions.contains($0.oid) }
    }
}

/// Signatures verified on paths a policy trusted, by the exact bytes of issuer and subject (issue 31).
///
/// A signature's validity depends on nothing but the issuer's public key and the subject's signed bytes,
/// signature algorithm and signature, all of which are inside the two certificates; so for byte-for-byte the
/// same pair, a verified signature stays verified. Filled only with the links of a path the whole evaluation
/// trusted (``PathValidation``), so a peer cannot fill it with pairs of its making, and it holds results of
/// signature checks only, never a verdict: every path is still judged in full. Bounded: at most ``capacity``
/// links, the oldest forgotten first. Process-wide: the intermediate → root link of a server or of a fleet of
/// devices is the same for every leaf.
final class VerifiedLinkMemo: Sendable {
    static let shared = VerifiedLinkMemo(capacity: 4096)

    /// A pair hashed by samples of both certificates' bytes (as ``CertificateFactsMemo`` hashes one); equality
    /// compares every byte of both. Held by reference, the samples hashed once (``SampledKey``).
    private struct Pair: Equatable, Sendable {
        let issuer: Certificate
        let subject: Certificate

        static func == (lhs: Pair, rhs: Pair) -> Bool { lhs.subject == rhs.subject && lhs.issuer == rhs.issuer }
    }
    private typealias Link = SampledKey<Pair>

    private static func link(issuer: Certificate, subject: Certificate) -> Link {
        Link(Pair(issuer: issuer, subject: subject)) { pair, hasher in
            pair.issuer.combineSample(into: &hasher)
            pair.subject.combineSample(into: &hasher)
        }
    }

    /// The most links remembered.
    let capacity: Int
    private let memo: LockedValueBox<BoundedMemo<Link, Void>>

    init(capacity: Int) {
        self.capacity = capacity
        self.memo = LockedValueBox(BoundedMemo(capacity: capacity))
    }

    /// Whether `issuer`'s signature on `subject` was verified on a trusted path (these exact bytes).
    func isVerified(issuer: Certificate, subject: Certificate) -> Bool {
        let link = Self.link(issuer: issuer, subject: subject)
        return self.memo.withLockedValue { $0[link] != nil }
    }

    /// Remembers the links of `path` (leaf first), a path a policy trusted and whose every link path building
    /// verified. The anchor's own signature is never part of it.
    func remember<Path: RandomAccessCollection<Certificate>>(trustedPath path: Path) where Path.Index == Int {
        guard path.count > 1 else { return }
        self.memo.withLockedValue { memo in
            for index in path.startIndex..<(path.endIndex - 1) {
                memo.remember((), for: Self.link(issuer: path[index + 1], subject: path[index]))
            }
        }
    }

    /// How many links are remembered now.
    var count: Int { self.memo.withLockedValue { $0.count } }

    /// Forgets every link (a benchmark's first sighting; never needed for correctness).
    func forgetAll() {
        self.memo.withLockedValue { $0.removeAll() }
    }
}

/// Process-wide counts of path building's work, for `pinning bench` and `bench handshake` (issue 31): signatures
/// verified, links the verified-link memo answered instead, and evaluations refused because the work budget ran
/// out. Counts only; nothing reads them to decide anything.
package enum PathBuildingCounters {
    package struct Snapshot: Sendable, Equatable {
        package var signaturesVerified = 0
        package var signaturesRemembered = 0
        package var budgetRefusals = 0
        /// Links the memo holds now.
        package var linksHeld = 0

        /// The counts since `earlier` (the links held are those of now).
        package func since(_ earlier: Snapshot) -> Snapshot {
            Snapshot(
                signaturesVerified: self.signaturesVerified - earlier.signaturesVerified,
                signaturesRemembered: self.signaturesRemembered - earlier.signaturesRemembered,
                budgetRefusals: self.budgetRefusals - earlier.budgetRefusals,
                linksHeld: self.linksHeld
            )
        }
    }

    private static let counts = LockedValueBox(Snapshot())

    /// The counts so far in this process.
    package static var snapshot: Snapshot {
        var snapshot = Self.counts.withLockedValue { $0 }
        snapshot.linksHeld = VerifiedLinkMemo.shared.count
        return snapshot
    }

    static func countSignature(remembered: Bool) {
        Self.counts.withLockedValue { counts in
            if remembered { counts.signaturesRemembered += 1 } else { counts.signaturesVerified += 1 }
        }
    }

    static func countBudgetRefusal() {
        Self.counts.withLockedValue { $0.budgetRefusals += 1 }
    }
}
