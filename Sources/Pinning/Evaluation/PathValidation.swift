import Foundation
import SwiftASN1
import X509

/// One run of path building and validation (``PathBuilder`` with ``ChainPolicy``), turned into a verdict with
/// evidence. Every evaluation in the package goes through here: the security policy, the host configuration
/// and the connection adapters never validate chains themselves.
struct PathValidation {
    var trust: ServerTrust
    var validationTime: Date
    /// The work every step of this evaluation draws on: both path-building runs, the second validation of
    /// `allowInvalidCertificates`, and the explanation of a refusal (issue 27).
    let budget: PathBuildingBudget

    init(trust: ServerTrust, validationTime: Date) {
        self.trust = trust
        self.validationTime = validationTime
        self.budget = PathBuildingBudget(limits: trust.limits)
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
    ) -> Result<X509.ValidatedCertificateChain, TrustFailure> {
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
        let facts = CertificateFactsTable()
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
            revocation: self.revocationCheck,
            budget: self.budget,
            facts: facts
        )
        if let chain = Self.buildPath(leaf: leaf, anchors: anchors, intermediates: intermediates, policy: policy, budget: self.budget) {
            if checksValidity { Self.remember(chain, facts: facts) }
            return .success(chain)
        }

        // Path building ends a path at the first trust anchor it reaches. When some path met every rule but
        // carried no pin, and an anchor it ended at is not a root (a CA certificate the client added as an
        // anchor, issued by a root it also trusts), the pin may sit on the root above it: OkHttp's chain
        // cleaner and Android's pin check follow the chain past such an anchor to the self-signed root. So
        // build once more with the non-root anchors as candidate intermediates. Every path found this way
        // still ends at an anchor and meets every rule; it is only longer.
        if pins != nil, log.furthest?.stage == .pins, !self.budget.isExhausted {
            let nonRoots = anchors.certificates.filter { $0.subject != $0.issuer }
            if !nonRoots.isEmpty {
                let roots = anchors.certificates.filter { $0.subject == $0.issuer }
                var beyond = intermediates
                for certificate in nonRoots where certificate != leaf && !beyond.contains(certificate) {
                    beyond.append(certificate)
                }
                // Not from the shared anchor-set cache: built only when a pin was missed, and it would evict
                // the sets every other evaluation uses.
                if let chain = Self.buildPath(
                    leaf: leaf,
                    anchors: AnchorSet(roots),
                    intermediates: beyond,
                    policy: policy,
                    budget: self.budget
                ) {
                    if checksValidity { Self.remember(chain, facts: facts) }
                    return .success(chain)
                }
            }
        }

        // A spent budget explains the refusal first: whatever else went wrong, the search did not finish. So does a
        // look-up that offered fewer candidates than there were, unless a candidate path got as far as the pins
        // (then the pins, not the search, refused it).
        if let bound = self.budget.boundReached, self.budget.isExhausted || log.furthest.map({ $0.stage < .pins }) ?? true {
            return .failure(self.limitFailure(bound, host: host, expectedPins: expectedPins))
        }
        if let candidate = log.furthest {
            return .failure(self.failure(for: candidate, host: host, expectedPins: expectedPins))
        }
        let explanation = MissingPathExplanation(
            presented: presented,
            anchors: anchors.certificates,
            handledCriticalExtensions: ChainPolicy.handledCriticalExtensions,
            budget: self.budget
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

    /// One run of path building with our policy, within `budget`: ours (``PathBuilder``), or swift-certificates'
    /// `Verifier` when the differential test asks for the reference (``PathBuilderReference``). The reference is
    /// what ``PathBuilder`` is compared with; no evaluation outside the differential test takes that way. Both of
    /// its stores offer their certificates through the budget, so every candidate the verifier checks was paid for.
    ///
    /// Synchronous (issue 31): our builder never waits for anything, so an evaluation can answer on the event loop
    /// that asked for it, without a task.
    private static func buildPath(
        leaf: Certificate,
        anchors: AnchorSet,
        intermediates: [Certificate],
        policy: ChainPolicy,
        budget: PathBuildingBudget
    ) -> X509.ValidatedCertificateChain? {
        if PathBuilderReference.isActive {
            return PathBuilderReference.buildPath(leaf: leaf, anchors: anchors, intermediates: intermediates, policy: policy, budget: budget)
        }
        let builder = PathBuilder(
            anchors: anchors.bySubject,
            intermediates: Dictionary(grouping: intermediates, by: \.subject),
            budget: budget,
            handledCriticalExtensions: ChainPolicy.handledCriticalExtensions,
            facts: policy.facts,
            links: .shared
        )
        return builder.build(leaf: leaf, policy: policy).map { X509.ValidatedCertificateChain(uncheckedCertificateChain: $0) }
    }

    /// Hands what this evaluation learnt about a path that met every rule to the process's memos: each
    /// certificate's facts, and each link's verified signature (never under the reference builder, which does
    /// not consult the memo either).
    private static func remember(_ chain: X509.ValidatedCertificateChain, facts: CertificateFactsTable) {
        facts.remember(chain)
        if !PathBuilderReference.isActive {
            // The chain itself: `Array(chain)` copied each certificate (some twenty reference-counted buffers).
            VerifiedLinkMemo.shared.remember(trustedPath: chain)
        }
    }

    /// The refusal of a search stopped by `bound`, with the work it did.
    private func limitFailure(_ bound: PathBuildingBudget.Bound, host: String?, expectedPins: [Pin]) -> TrustFailure {
        PathBuildingCounters.countBudgetRefusal()
        let charged = self.budget.charged
        return self.failure(
            .pathBuildingLimitExceeded,
            bound.description,
            host: host,
            expectedPins: expectedPins,
            details: ["\(charged.checks) signature checks were paid for (\(charged.units) of \(self.trust.limits.maximumSignatureChecks) P-256 units)"]
        )
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
    ///
    /// `path` is an autoclosure: without revocation settings (most evaluations) the path is never copied into an
    /// array only to be dropped.
    func revocationReport(for path: @autoclosure () -> [Certificate]) -> RevocationReport? {
        guard let check = self.revocationCheck else { return nil }
        return check.report(for: path())
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

/// Which path builder evaluations in this task use: ours (``PathBuilder``), or, for the differential test only,
/// swift-certificates' `Verifier` with its `RFC5280Policy`, the reference ours must agree with (`limbo
/// --differential`, `PathBuilderDifferentialTests`). A task-local value, so a test or tool sets it for the work it
/// runs and nothing else in the process changes.
package enum PathBuilderReference {
    @TaskLocal package static var isActive = false

    /// One run of swift-certificates' `Verifier` with `policy` (as the reference: its `RFC5280Policy` rules),
    /// its stores offering their certificates through `budget`.
    ///
    /// The verifier's interface is `async`, but nothing it awaits here suspends: its stores
    /// (``BudgetedCertificateStore``) and our ``ChainPolicy`` answer at once. So it runs in a task started on this
    /// thread (`Task.immediate`, which runs until its first suspension before returning), which has finished when
    /// `Task.immediate` returns, and evaluation stays synchronous for the one flow every evaluation takes. This is
    /// the core's only task, for the differential test alone; a verifier that did suspend would be a change in
    /// swift-certificates that the test must not silently absorb, so it stops the test (never reached by an
    /// evaluation outside it, which never activates the reference).
    static func buildPath(
        leaf: Certificate,
        anchors: AnchorSet,
        intermediates: [Certificate],
        policy: ChainPolicy,
        budget: PathBuildingBudget
    ) -> X509.ValidatedCertificateChain? {
        var reference = policy
        reference.structureRules = .swiftCertificatesReference
        let roots = CertificateStore(custom: BudgetedCertificateStore(bySubject: anchors.bySubject, budget: budget))
        let presented = CertificateStore(custom: BudgetedCertificateStore(certificates: intermediates, budget: budget))
        let outcome = LockedValueBox<CertificateValidationResult?>(nil)
        // `Task.immediate` is Swift 6.2's (the package's tools version is 6.1): an older compiler or runtime
        // cannot run the reference, which only the differential test and `limbo --differential` ask for.
        #if compiler(>=6.2)
            guard #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, *) else {
                preconditionFailure("the reference path builder (differential test only) needs Task.immediate (Swift 6.2's runtime)")
            }
            // Unstructured, so the caller's cancellation does not reach it; the budget's own checks end it.
            Task.immediate {
                var verifier = Verifier(rootCertificates: roots) { reference }
                let result = await verifier.validate(leaf: leaf, intermediates: presented)
                outcome.withLockedValue { $0 = result }
            }
        #else
            preconditionFailure("the reference path builder (differential test only) needs Task.immediate (Swift 6.2)")
        #endif
        switch outcome.withLockedValue({ $0 }) {
        case .validCertificate(let chain)?:
            return chain
        case .couldNotValidate?:
            return nil
        case nil:
            preconditionFailure("the reference path builder (differential test only) suspended: swift-certificates' Verifier must finish synchronously")
        }
    }
}
