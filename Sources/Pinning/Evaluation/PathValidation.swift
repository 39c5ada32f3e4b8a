import Foundation
import SwiftASN1
import X509

/// One run of path building and validation on swift-certificates' `Verifier`, turned into a verdict with
/// evidence. Every evaluation in the package goes through here: the security policy, the host configuration
/// and the connection adapters never validate chains themselves.
struct PathValidation {
    var trust: ServerTrust
    var validationTime: Date

    init(trust: ServerTrust, validationTime: Date) {
        self.trust = trust
        self.validationTime = validationTime
    }

    /// Validates ``ServerTrust/certificates`` against `anchors` (and only those).
    ///
    /// - Parameters:
    ///   - additionalIssuers: Certificates path building may use as intermediates besides the presented ones
    ///     (the client's own anchors, when a pinned key rather than an anchor ends the path).
    ///   - checksValidity: False only for `allowInvalidCertificates` (see ``ChainPolicy/checksValidity``).
    func validate(
        anchors: AnchorSet,
        namePolicy: TrustNamePolicy,
        pins: PinRequirement?,
        expectedPins: [Pin],
        additionalIssuers: [Certificate] = [],
        checksValidity: Bool = true
    ) async -> Result<X509.ValidatedCertificateChain, TrustFailure> {
        let presented = self.trust.certificates
        var host: String?
        var peerName: PeerName?
        if case .ssl(let name) = namePolicy {
            host = name
            do {
                peerName = try PeerName(name)
            } catch {
                return .failure(self.failure(.invalidHost, error.description, host: name))
            }
        }
        guard let leaf = presented.first else {
            return .failure(self.failure(.noPeerCertificates, "the peer presented no certificate", host: host))
        }
        let limits = self.trust.limits
        guard presented.count <= limits.maximumPresentedCertificates else {
            return .failure(
                self.failure(
                    .tooManyCertificates,
                    "the peer presented \(presented.count) certificates; at most \(limits.maximumPresentedCertificates) are accepted",
                    host: host
                )
            )
        }

        let log = CandidateLog()
        let lookups = IssuerLookupBudget(limit: limits.maximumIssuerLookups)
        var intermediates: [Certificate] = []
        for certificate in presented.dropFirst() + additionalIssuers
        where certificate != leaf && !intermediates.contains(certificate) {
            intermediates.append(certificate)
        }
        let policy = ChainPolicy(
            validationTime: self.validationTime,
            purpose: self.trust.purpose,
            peerName: peerName,
            pins: pins,
            profile: self.trust.profile,
            maximumIntermediates: limits.maximumIntermediates,
            log: log,
            checksValidity: checksValidity,
            revocation: self.revocationCheck
        )
        if let chain = await Self.buildPath(leaf: leaf, anchors: anchors.store, intermediates: intermediates, policy: policy, budget: lookups) {
            return .success(chain)
        }

        // Path building ends a path at the first trust anchor it reaches. When some path met every rule but
        // carried no pin, and an anchor it ended at is not a root (a CA certificate the client added as an
        // anchor, issued by a root it also trusts), the pin may sit on the root above it: OkHttp's chain
        // cleaner and Android's pin check follow the chain past such an anchor to the self-signed root. So
        // build once more with the non-root anchors as candidate intermediates. Every path found this way
        // still ends at an anchor and meets every rule; it is only longer.
        if pins != nil, log.furthest?.stage == .pins, !lookups.isExhausted {
            let nonRoots = anchors.certificates.filter { $0.subject != $0.issuer }
            if !nonRoots.isEmpty {
                let roots = anchors.certificates.filter { $0.subject == $0.issuer }
                var beyond = intermediates
                for certificate in nonRoots where certificate != leaf && !beyond.contains(certificate) {
                    beyond.append(certificate)
                }
                // Not from the shared anchor-set cache: built only when a pin was missed, and it would evict
                // the sets every other evaluation uses.
                if let chain = await Self.buildPath(
                    leaf: leaf,
                    anchors: CertificateStore(roots),
                    intermediates: beyond,
                    policy: policy,
                    budget: IssuerLookupBudget(limit: limits.maximumIssuerLookups)
                ) {
                    return .success(chain)
                }
            }
        }

        if lookups.isExhausted {
            return .failure(
                self.failure(
                    .pathBuildingLimitExceeded,
                    "path building gave up after \(limits.maximumIssuerLookups) issuer look-ups",
                    host: host,
                    expectedPins: expectedPins
                )
            )
        }
        if let candidate = log.furthest {
            return .failure(self.failure(for: candidate, host: host, expectedPins: expectedPins))
        }
        let explanation = MissingPathExplanation(
            presented: presented,
            anchors: anchors.certificates,
            handledCriticalExtensions: ChainPolicy.handledCriticalExtensions
        )
        return .failure(
            self.failure(
                .noPathToAnchor,
                explanation.reason,
                host: host,
                expectedPins: expectedPins,
                details: explanation.details
            )
        )
    }

    /// One run of swift-certificates' path building with our policy, bounded by `budget`.
    private static func buildPath(
        leaf: Certificate,
        anchors: CertificateStore,
        intermediates: [Certificate],
        policy: ChainPolicy,
        budget: IssuerLookupBudget
    ) async -> X509.ValidatedCertificateChain? {
        var verifier = Verifier(rootCertificates: anchors) { policy }
        let result = await verifier.validate(
            leaf: leaf,
            intermediates: CertificateStore(custom: BudgetedIssuerStore(certificates: intermediates, budget: budget))
        )
        switch result {
        case .validCertificate(let chain):
            return chain
        case .couldNotValidate:
            return nil
        }
    }

    private func failure(for candidate: CandidateFailure, host: String?, expectedPins: [Pin]) -> TrustFailure {
        let code: TrustFailure.Code
        switch candidate.stage {
        case .depth:
            code = .pathTooLong
        case .validity:
            let index = candidate.certificateIndex ?? 0
            let certificate = candidate.path[index]
            code = self.validationTime < certificate.notValidBefore ? .certificateNotYetValid : .certificateExpired
        case .constraints:
            code = .constraintViolation
        case .keyUsage:
            code = .keyUsage
        case .extendedKeyUsage:
            code = .extendedKeyUsage
        case .hostname:
            code = .hostnameMismatch
        case .pins:
            code = .pinMismatch
        case .revocation:
            code = candidate.revocation?.firstRevoked != nil ? .revoked : .revocationUnknown
        }
        var details: [String] = []
        if let report = candidate.revocation {
            details += report.certificates.map(\.summary)
        }
        if code == .certificateExpired || code == .certificateNotYetValid, let index = candidate.certificateIndex {
            let certificate = candidate.path[index]
            details.append(
                "certificate \(certificate.subject) is valid from \(RFC3339.format(certificate.notValidBefore)) to \(RFC3339.format(certificate.notValidAfter)); validation time \(RFC3339.format(self.validationTime))"
            )
        }
        // Only a pin failure comes after a path met every other rule: that path is the validated one.
        let validated = candidate.stage == .pins ? candidate.path : nil
        return TrustFailure(
            code: code,
            reason: candidate.problem,
            host: host,
            validationTime: self.validationTime,
            presentedChain: self.trust.certificates,
            validatedPath: validated,
            failedPath: candidate.path,
            failedCertificateIndex: candidate.certificateIndex,
            leafNames: candidate.presentedNames,
            expectedPins: expectedPins,
            details: details,
            revocation: candidate.revocation
        )
    }

    /// The revocation stage of these settings at this instant, if they check revocation.
    var revocationCheck: RevocationCheck? {
        self.trust.settings.revocation.map { RevocationCheck(policy: $0, time: self.validationTime) }
    }

    /// The statuses of a path that was trusted (nil when the settings check no revocation), for the verdict
    /// to carry: the same check the revocation stage made on it, answered again from the memoized signatures.
    func revocationReport(for path: [Certificate]) -> RevocationReport? {
        self.revocationCheck?.report(for: path)
    }

    func failure(
        _ code: TrustFailure.Code,
        _ reason: String,
        host: String?,
        expectedPins: [Pin] = [],
        details: [String] = [],
        file: String = #fileID,
        line: Int = #line
    ) -> TrustFailure {
        TrustFailure(
            code: code,
            reason: reason,
            host: host,
            validationTime: self.validationTime,
            presentedChain: self.trust.certificates,
            expectedPins: expectedPins,
            details: details,
            file: file,
            line: line
        )
    }
}

extension ChainPolicy {
    static let handledCriticalExtensions: [ASN1ObjectIdentifier] = [
        .X509ExtensionID.basicConstraints,
        .X509ExtensionID.nameConstraints,
        .X509ExtensionID.keyUsage,
        .X509ExtensionID.extendedKeyUsage,
        .X509ExtensionID.subjectAlternativeName,
    ]
}

/// Counts issuer look-ups across one path-building run.
final class IssuerLookupBudget: Sendable {
    private struct State {
        var remaining: Int
        var exhausted = false
    }

    private let state: LockedValueBox<State>

    init(limit: Int) { self.state = LockedValueBox(State(remaining: limit)) }

    /// Takes one look-up; false once the budget is spent.
    func take() -> Bool {
        self.state.withLockedValue { state in
            guard state.remaining > 0 else {
                state.exhausted = true
                return false
            }
            state.remaining -= 1
            return true
        }
    }

    var isExhausted: Bool {
        self.state.withLockedValue { $0.exhausted }
    }
}

/// The presented intermediates as a certificate store that stops answering once the look-up budget is spent,
/// which bounds the depth-first path search of `Verifier` (it looks up issuers once per partial path).
struct BudgetedIssuerStore: CustomCertificateStore {
    private var bySubject: [DistinguishedName: [Certificate]]
    private let budget: IssuerLookupBudget

    init(certificates: [Certificate], budget: IssuerLookupBudget) {
        self.bySubject = Dictionary(grouping: certificates, by: \.subject)
        self.budget = budget
    }

    subscript(subject: DistinguishedName) -> [Certificate]? {
        get async {
            guard self.budget.take() else { return nil }
            return self.bySubject[subject]
        }
    }

    func contains(_ certificate: Certificate) async -> Bool {
        self.bySubject[certificate.subject]?.contains(certificate) ?? false
    }

    mutating func append(contentsOf certificates: some Sequence<Certificate>) {
        // The store is fixed for one validation; Verifier never appends to it.
        var grouped = self.bySubject
        for certificate in certificates { grouped[certificate.subject, default: []].append(certificate) }
        self.bySubject = grouped
    }

    static func == (lhs: BudgetedIssuerStore, rhs: BudgetedIssuerStore) -> Bool {
        lhs.bySubject == rhs.bySubject && lhs.budget === rhs.budget
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self.budget))
    }
}
