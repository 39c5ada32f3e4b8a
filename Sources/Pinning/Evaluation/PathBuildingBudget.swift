import Crypto
import X509
import _CryptoExtras

/// The work one evaluation may do, whatever the peer presents (issue 27).
///
/// Path building is a search, and a peer chooses its input: 57 certificates with one subject name, each signed
/// by each of 8 keys, made swift-certificates' `Verifier` check tens of thousands of signatures (seconds of CPU)
/// before a limit on issuer look-ups stopped it, because every look-up handed back every certificate with that
/// name and each was signature-checked. So the budget bounds the work itself, as rustls/webpki does (100
/// signature checks):
///
/// - **signature checks**: every candidate issuer handed to the verifier may cost one signature check, so a
///   candidate is charged when it is handed out, before the check (an upper bound: a candidate skipped as a loop
///   costs nothing but is still charged). The explanation of a refusal and the profile's self-signed test draw on
///   the same budget. A check is charged by its cost relative to a P-256 verification (see ``cost(of:)``),
///   so the bound holds in CPU time for every key type, not only in count; no weight is below one, so no more
///   than ``TrustLimits/maximumSignatureChecks`` checks are ever made.
/// - **candidates per look-up**: at most ``TrustLimits/maximumIssuerCandidates`` certificates of one name are
///   offered for one issuer look-up, in the order they were presented or configured. Real chains present one
///   or two certificates per name; a search that needed more is refused with this bound named.
/// - **issuer look-ups**: as before (``TrustLimits/maximumIssuerLookups``).
/// - **abandonment**: once the task running the evaluation is cancelled (a server whose client has gone),
///   every further look-up and check is refused, and so is the evaluation. This applies to decisions that run
///   in a task (a user's evaluator, a CRL fetch, a `clientCheck`); the built-in evaluators decide inside NIOSSL's
///   callback (issue 31), where there is no task to cancel and the other bounds hold.
///
/// The verdict of an exhausted search is `pathBuildingLimitExceeded`, naming the bound that was reached; a
/// path found before the budget ran out is judged as usual.
final class PathBuildingBudget: Sendable {
    /// Which bound stopped the search.
    enum Bound: Sendable, Equatable {
        case issuerLookups(limit: Int)
        case signatureChecks(limit: Int)
        case candidatesPerLookup(limit: Int, subject: DistinguishedName, count: Int)
        case abandoned

        var description: String {
            switch self {
            case .issuerLookups(let limit):
                return "path building gave up after \(limit) issuer look-ups"
            case .signatureChecks(let limit):
                return "path building gave up at its bound of \(limit) signature checks (weighted by key type; rustls/webpki's figure)"
            case .candidatesPerLookup(let limit, let subject, let count):
                return "path building gave up: \(count) certificates are named \(subject), and at most \(limit) are tried as the issuer of one certificate"
            case .abandoned:
                return "path building was abandoned: the evaluation was cancelled (the peer has gone)"
            }
        }
    }

    private struct State {
        var lookupsLeft: Int
        var checkUnitsLeft: Int
        var checksCharged = 0
        var unitsCharged = 0
        /// The first bound reached; the candidates-per-look-up bound only counts when the search then fails.
        var exhausted: Bound?
        var truncated: Bound?
        /// Signatures path building verified, and links the verified-link memo answered instead.
        var signaturesVerified = 0
        var signaturesRemembered = 0
    }

    let limits: TrustLimits
    private let state: LockedValueBox<State>

    init(limits: TrustLimits) {
        self.limits = limits
        self.state = LockedValueBox(
            State(lookupsLeft: max(0, limits.maximumIssuerLookups), checkUnitsLeft: max(0, limits.maximumSignatureChecks))
        )
    }

    /// Takes one issuer look-up; false once the look-ups are spent or the evaluation was cancelled.
    func takeLookup() -> Bool {
        let cancelled = Task.isCancelled
        return self.state.withLockedValue { state in
            if cancelled { state.exhausted = state.exhausted ?? .abandoned }
            guard state.exhausted == nil else { return false }
            guard state.lookupsLeft > 0 else {
                state.exhausted = .issuerLookups(limit: self.limits.maximumIssuerLookups)
                return false
            }
            state.lookupsLeft -= 1
            return true
        }
    }

    /// Charges one signature check by `key`; false (and nothing charged) once the budget cannot pay for it.
    func takeSignatureCheck(by key: Certificate.PublicKey) -> Bool {
        let cost = Self.cost(of: key)
        let cancelled = Task.isCancelled
        return self.state.withLockedValue { state in
            if cancelled { state.exhausted = state.exhausted ?? .abandoned }
            guard state.exhausted == nil else { return false }
            guard state.checkUnitsLeft >= cost else {
                state.exhausted = .signatureChecks(limit: self.limits.maximumSignatureChecks)
                return false
            }
            state.checkUnitsLeft -= cost
            state.checksCharged += 1
            state.unitsCharged += cost
            return true
        }
    }

    /// The candidates path building may try as issuers named `subject`: at most the per-look-up bound, each
    /// charged as a signature check by its key; none once the budget is spent.
    func candidates(_ all: [Certificate], named subject: DistinguishedName) -> [Certificate] {
        let cap = max(0, self.limits.maximumIssuerCandidates)
        if all.count > cap {
            self.state.withLockedValue { state in
                state.truncated = state.truncated ?? .candidatesPerLookup(limit: cap, subject: subject, count: all.count)
            }
        }
        // Charged in order, by index; when every certificate is offered (the usual case) the answer is `all`
        // itself, sharing its storage, rather than a new array of copied certificates.
        var offered = 0
        for index in all.indices.prefix(cap) {
            guard self.takeSignatureCheck(by: all[index].publicKey) else { break }
            offered += 1
        }
        return offered == all.count ? all : Array(all.prefix(offered))
    }

    /// Counts one link path building needed: a signature it verified, or one the verified-link memo answered
    /// (``VerifiedLinkMemo``). Bookkeeping only: the charge was made when the candidate was offered.
    func countSignature(remembered: Bool) {
        PathBuildingCounters.countSignature(remembered: remembered)
        self.state.withLockedValue { state in
            if remembered { state.signaturesRemembered += 1 } else { state.signaturesVerified += 1 }
        }
    }

    /// Signatures path building verified, and links the memo answered, so far.
    var signatures: (verified: Int, remembered: Int) {
        self.state.withLockedValue { ($0.signaturesVerified, $0.signaturesRemembered) }
    }

    /// The bound that stopped the search: a spent budget, or else a look-up that offered fewer candidates than
    /// there were (which may have hidden the path). Nil when the search ran within every bound.
    var boundReached: Bound? {
        self.state.withLockedValue { $0.exhausted ?? $0.truncated }
    }

    /// True once a budget is spent (look-ups, signature checks) or the evaluation was abandoned.
    var isExhausted: Bool {
        self.state.withLockedValue { $0.exhausted != nil }
    }

    /// How many signature checks were charged, and their weighted cost.
    var charged: (checks: Int, units: Int) {
        self.state.withLockedValue { ($0.checksCharged, $0.unitsCharged) }
    }

    /// What one signature check by `key` costs, in P-256 verifications (measured with swift-crypto's BoringSSL
    /// on x86_64, release build, 2026-11-26: P-256 58 µs, Ed25519 78 µs, P-384 566 µs, P-521 1,378 µs, RSA-2048
    /// 21 µs, RSA-3072 43 µs, RSA-4096 74 µs; `pinning bench hostile` prints them). Rounded up, never below one.
    /// RSA verification grows with the square of the modulus (the public exponent is small); P-384 and P-521
    /// lack the hand-tuned code P-256 has.
    static func cost(of key: Certificate.PublicKey) -> Int {
        if P256.Signing.PublicKey(key) != nil { return 1 }
        if Curve25519.Signing.PublicKey(key) != nil { return 2 }
        if P384.Signing.PublicKey(key) != nil { return 10 }
        if P521.Signing.PublicKey(key) != nil { return 24 }
        if let rsa = _RSA.Signing.PublicKey(key) {
            switch rsa.keySizeInBits {
            case ...2048: return 1
            case ...3072: return 2
            case ...4096: return 3
            case ...8192: return 10
            default: return 40
            }
        }
        // A key swift-certificates cannot verify with fails its check at once; charge it as the cheapest.
        return 1
    }
}

/// Certificates by subject, offered to swift-certificates' `Verifier` (the reference path builder, see
/// ``PathBuilderReference``) through a ``PathBuildingBudget``: the presented
/// intermediates, or the anchors. Each look-up takes one issuer look-up from the budget and offers at most the
/// per-look-up bound of candidates, each charged as a signature check.
struct BudgetedCertificateStore: CustomCertificateStore {
    private var bySubject: [DistinguishedName: [Certificate]]
    private let budget: PathBuildingBudget

    init(bySubject: [DistinguishedName: [Certificate]], budget: PathBuildingBudget) {
        self.bySubject = bySubject
        self.budget = budget
    }

    init(certificates: [Certificate], budget: PathBuildingBudget) {
        self.init(bySubject: Dictionary(grouping: certificates, by: \.subject), budget: budget)
    }

    subscript(subject: DistinguishedName) -> [Certificate]? {
        get async {
            guard let named = self.bySubject[subject] else { return nil }
            guard self.budget.takeLookup() else { return nil }
            let offered = self.budget.candidates(named, named: subject)
            return offered.isEmpty ? nil : offered
        }
    }

    func contains(_ certificate: Certificate) async -> Bool {
        self.bySubject[certificate.subject]?.contains(certificate) ?? false
    }

    mutating func append(contentsOf certificates: some Sequence<Certificate>) {
        // The store is fixed for one validation; Verifier never appends to it.
        for certificate in certificates { self.bySubject[certificate.subject, default: []].append(certificate) }
    }

    static func == (lhs: BudgetedCertificateStore, rhs: BudgetedCertificateStore) -> Bool {
        lhs.bySubject == rhs.bySubject && lhs.budget === rhs.budget
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self.budget))
    }
}
