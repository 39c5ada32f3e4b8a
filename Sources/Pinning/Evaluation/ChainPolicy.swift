import Foundation
import SwiftASN1
@_spi(DisableValidityCheck) import X509

/// The stages a candidate path goes through, in the order they are checked. A later stage means the path got
/// further, so when every candidate fails, the failure of the candidate that got furthest explains the verdict.
enum Stage: Int, Comparable, Sendable {
    case depth = 0
    case validity
    case constraints
    case keyUsage
    case extendedKeyUsage
    case hostname
    case pins
    /// Last: revocation is checked only on a path that met every other rule (issue 14: "applied to the validated
    /// path only"), and a revoked path makes path building look for another one, as a missing pin does.
    case revocation

    static func < (lhs: Stage, rhs: Stage) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Why one candidate path was refused.
struct CandidateFailure: Sendable {
    var stage: Stage
    /// The candidate path, leaf first, ending at a trust anchor.
    var path: [Certificate]
    /// Which certificate of `path` failed, when one did.
    var certificateIndex: Int?
    var problem: String
    /// For hostname failures: the names the leaf carries.
    var presentedNames: [String] = []
    /// For revocation failures: every status on the path.
    var revocation: RevocationReport? = nil
}

/// Collects candidate failures during one path-building run. Path building calls the policy serially, but the
/// policy must be `Sendable`, so the log is a locked reference shared by the policy's copies.
final class CandidateLog: Sendable {
    private let failures = LockedValueBox<[CandidateFailure]>([])

    func record(_ failure: CandidateFailure) {
        self.failures.withLockedValue { failures in
            // Bounded: a hostile chain cannot make us keep an unbounded list of explanations.
            if failures.count < 64 { failures.append(failure) }
        }
    }

    /// The failure of the candidate that got furthest; the first such one on ties.
    var furthest: CandidateFailure? {
        var best: CandidateFailure?
        for failure in self.failures.withLockedValue({ $0 }) where best.map({ failure.stage > $0.stage }) ?? true {
            best = failure
        }
        return best
    }

    var isEmpty: Bool {
        self.failures.withLockedValue { $0.isEmpty }
    }
}

/// The one policy every candidate path must meet, checked top to bottom, returning at the first failure:
/// depth, validity, RFC 5280 constraints, key usage, extended key usage, the peer name, pins, then revocation.
///
/// Pins are a stage of path building, not a check after it: a pin can only ever match a certificate of a path
/// that met every other rule, and path building keeps looking (for example through a cross-signed
/// intermediate) until some valid path carries a pin. A peer that appends a pinned certificate its leaf does
/// not chain through gains nothing.
struct ChainPolicy: VerifierPolicy {
    var verifyingCriticalExtensions: [ASN1ObjectIdentifier] { Self.handledCriticalExtensions }

    var validationTime: Date
    var purpose: TrustPurpose
    var peerName: PeerName?
    var pins: PinRequirement?
    var profile: ValidationProfile
    var maximumIntermediates: Int
    var log: CandidateLog
    /// False only for the path that `allowInvalidCertificates` lets a pinned key anchor (see
    /// ``SecurityPolicy``): that relaxation waives the dates and the trust anchor, and nothing else. Every other
    /// stage, in particular the rules that make an issuer an issuer (cA, keyCertSign, pathLen, name
    /// constraints), is checked the same either way.
    var checksValidity = true
    /// The revocation stage, when the settings carry a ``RevocationPolicy``. It applies to the signature-linked
    /// path of `allowInvalidCertificates` too: that relaxation waives the dates and the anchor, not revocation.
    var revocation: RevocationCheck? = nil
    /// The evaluation's work budget (``PathBuildingBudget``), for the signature check the profile makes.
    var budget: PathBuildingBudget? = nil
    /// Each certificate's decoded extensions and other facts, decoded once for the whole evaluation (and for the
    /// process, once a trusted path carried the certificate): every stage below reads them from here.
    var facts = CertificateFactsTable()

    /// Whose RFC 5280 version and name-constraint rules apply: ours (``RFC5280Structure``), or, as the reference
    /// the differential test compares our path builder with, swift-certificates' `RFC5280Policy` (which can only
    /// judge a chain its own `Verifier` built; see ``PathBuilder``).
    var structureRules: StructureRules = .ours

    enum StructureRules: Sendable {
        case ours
        case swiftCertificatesReference
    }

    /// swift-certificates' RFC 5280 version, basicConstraints/pathLen and name-constraint rules, for
    /// ``StructureRules/swiftCertificatesReference`` only. Validity is our own stage so that an expired
    /// certificate is reported with its dates.
    private let rfc5280 = RFC5280Policy.withValidityCheckDisabled()

    /// The policy as swift-certificates' `Verifier` asks it (the reference path builder).
    mutating func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        if let failure = self.firstFailure(Array(chain), chain: chain) {
            self.log.record(failure)
            let problem = failure.problem
            return .failsToMeetPolicy(reason: problem)
        }
        return .meetsPolicy
    }

    /// The policy as our ``PathBuilder`` asks it: true when `path` (leaf first, ending at a trust anchor) meets
    /// every stage; a refusal is recorded in ``log``.
    func accepts(_ path: [Certificate]) -> Bool {
        if let failure = self.firstFailure(path, chain: nil) {
            self.log.record(failure)
            return false
        }
        return true
    }

    /// `chain` is the same path as swift-certificates' type, when its `Verifier` built it.
    private func firstFailure(_ path: [Certificate], chain: UnverifiedCertificateChain?) -> CandidateFailure? {
        let facts = path.map { self.facts.facts(of: $0) }
        // Intermediates are the certificates between the leaf and the anchor; self-issued ones do not count.
        let intermediates = facts.dropFirst().dropLast().reduce(0) { $1.isSelfIssued ? $0 : $0 + 1 }
        if intermediates > self.maximumIntermediates {
            return CandidateFailure(
                stage: .depth,
                path: path,
                problem: "the path has \(intermediates) intermediate CAs, more than the limit of \(self.maximumIntermediates)"
            )
        }
        if self.checksValidity, let failure = self.validityFailure(path, facts: facts) { return failure }
        if let problem = ProfileChecks.nameConstraintProblem(in: path, facts: facts) {
            return CandidateFailure(stage: .constraints, path: path, problem: problem)
        }
        if let failure = self.basicConstraintsFailure(path, facts: facts) { return failure }
        // A leaf that is itself a trust anchor (certificate pinning of a self-signed device, or of a pinned
        // leaf) is trusted as configured: RFC 5280 path processing has no issuer to check, and
        // swift-certificates would insist that a one-certificate path be a CA, which a server certificate
        // never is. Its validity, usages, name and pins are still checked.
        if path.count > 1, let failure = self.structureFailure(path, facts: facts, chain: chain) { return failure }
        if let (index, problem) = ProfileChecks(profile: self.profile, purpose: self.purpose, budget: self.budget).firstProblem(
            in: path,
            facts: facts
        ) {
            return CandidateFailure(stage: .constraints, path: path, certificateIndex: index, problem: problem)
        }
        if let failure = self.keyUsageFailure(path, facts: facts) { return failure }
        if let failure = self.extendedKeyUsageFailure(path, facts: facts) { return failure }
        if let peerName, let mismatch = HostnameCheck.check(facts[0].subjectAlternativeNames, against: peerName) {
            return CandidateFailure(
                stage: .hostname,
                path: path,
                certificateIndex: 0,
                problem: mismatch.problem,
                presentedNames: mismatch.presentedNames
            )
        }
        if let pins, pins.firstMatch(in: facts) == nil {
            return CandidateFailure(
                stage: .pins,
                path: path,
                problem: "no certificate on the validated path matches a pin"
            )
        }
        if let revocation, let failure = revocation.failure(for: path) {
            return failure
        }
        return nil
    }

    /// RFC 5280's version rule and name constraints (and, for the reference, swift-certificates' basicConstraints,
    /// which ``basicConstraintsFailure(_:facts:)`` has already checked at least as strictly).
    private func structureFailure(_ path: [Certificate], facts: [CertificateFacts], chain: UnverifiedCertificateChain?) -> CandidateFailure? {
        switch self.structureRules {
        case .ours:
            if let (index, problem) = RFC5280Structure.versionProblem(in: path) ?? RFC5280Structure.nameConstraintProblem(in: path, facts: facts) {
                return CandidateFailure(stage: .constraints, path: path, certificateIndex: index, problem: problem)
            }
            return nil
        case .swiftCertificatesReference:
            guard let chain else {
                // Only swift-certificates' Verifier can hand this policy a chain its RFC5280Policy accepts.
                return CandidateFailure(stage: .constraints, path: path, problem: "the reference RFC 5280 rules judge only chains swift-certificates built")
            }
            if case .failsToMeetPolicy(let reason) = self.rfc5280.chainMeetsPolicyRequirements(chain: chain) {
                return CandidateFailure(stage: .constraints, path: path, problem: reason.description)
            }
            return nil
        }
    }

    /// RFC 5280 §4.1.2.5: valid from notBefore through notAfter, both inclusive.
    /// RFC 5280 §4.2.1.9 for each issuer, reported with the certificate's subject rather than
    /// swift-certificates' full dump: an issuer must be a CA, and its pathLenConstraint bounds the number of
    /// non-self-issued intermediates below it. (RFC5280Policy checks the same again afterwards.)
    private func basicConstraintsFailure(_ path: [Certificate], facts: [CertificateFacts]) -> CandidateFailure? {
        guard path.count > 1 else { return nil }
        for index in 1..<path.count {
            let issuer = path[index]
            let constraints: BasicConstraints?
            do {
                constraints = try facts[index].basicConstraints.get()
            } catch {
                return CandidateFailure(
                    stage: .constraints, path: path, certificateIndex: index,
                    problem: "issuer \(index) (\(issuer.subject)) has a malformed basicConstraints extension"
                )
            }
            guard case .isCertificateAuthority(let maxPathLength) = constraints else {
                return CandidateFailure(
                    stage: .constraints, path: path, certificateIndex: index,
                    problem: "issuer \(index) (\(issuer.subject)) is not a CA (basicConstraints cA is not asserted)"
                )
            }
            if let maxPathLength {
                let below = facts[1..<index].reduce(0) { $1.isSelfIssued ? $0 : $0 + 1 }
                if below > maxPathLength {
                    return CandidateFailure(
                        stage: .constraints, path: path, certificateIndex: index,
                        problem: "issuer \(index) (\(issuer.subject)) allows \(maxPathLength) intermediates below it (pathLenConstraint), the path has \(below)"
                    )
                }
            }
        }
        return nil
    }

    /// Validity has one-second granularity (UTCTime and GeneralizedTime without fractions), so the
    /// validation instant is compared at that granularity: a certificate is still valid during the second
    /// its notAfter names.
    private func validityFailure(_ path: [Certificate], facts: [CertificateFacts]) -> CandidateFailure? {
        let now = Date(timeIntervalSince1970: self.validationTime.timeIntervalSince1970.rounded(.down))
        for (index, certificate) in facts.enumerated() {
            if now > certificate.notValidAfter {
                return CandidateFailure(
                    stage: .validity,
                    path: path,
                    certificateIndex: index,
                    problem: "certificate \(index) (\(path[index].subject)) expired at \(RFC3339.format(certificate.notValidAfter))"
                )
            }
            if now < certificate.notValidBefore {
                return CandidateFailure(
                    stage: .validity,
                    path: path,
                    certificateIndex: index,
                    problem: "certificate \(index) (\(path[index].subject)) is not valid before \(RFC3339.format(certificate.notValidBefore))"
                )
            }
        }
        return nil
    }

    /// RFC 5280 §4.2.1.3: an issuing certificate that carries keyUsage must assert keyCertSign.
    /// Deliberate choice: unlike swift-certificates' RFC5280Policy, which lists keyUsage as handled but does not
    /// check it, we police it, as every browser and OpenSSL do.
    private func keyUsageFailure(_ path: [Certificate], facts: [CertificateFacts]) -> CandidateFailure? {
        for index in facts.indices {
            let usage: KeyUsage?
            do {
                // Strict DER first; BER-tolerant for the padding quirks real roots carry (see LenientKeyUsage).
                usage = try facts[index].keyUsage.get()
            } catch {
                return CandidateFailure(
                    stage: .keyUsage, path: path, certificateIndex: index,
                    problem: "certificate \(index) (\(path[index].subject)) has a malformed keyUsage extension: \(error.problem)"
                )
            }
            guard let usage else { continue }
            if index > 0 && !usage.keyCertSign {
                return CandidateFailure(
                    stage: .keyUsage, path: path, certificateIndex: index,
                    problem: "issuer \(index) (\(path[index].subject)) has keyUsage without keyCertSign"
                )
            }
        }
        return nil
    }

    /// The leaf must be usable for the purpose: when it carries extendedKeyUsage, that must list serverAuth
    /// (clientAuth for client validation). Issuers that carry extendedKeyUsage constrain the path the same way
    /// (or list anyExtendedKeyUsage), as Chrome, Firefox, Apple and OpenSSL all enforce.
    private func extendedKeyUsageFailure(_ path: [Certificate], facts: [CertificateFacts]) -> CandidateFailure? {
        let required = self.purpose.usage
        for index in facts.indices {
            let usage: ExtendedKeyUsage?
            do {
                usage = try facts[index].extendedKeyUsage.get()
            } catch {
                return CandidateFailure(
                    stage: .extendedKeyUsage, path: path, certificateIndex: index,
                    problem: "certificate \(index) (\(path[index].subject)) has a malformed extendedKeyUsage extension"
                )
            }
            guard let usage else { continue }
            let allowed = usage.contains(required) || (index > 0 && usage.contains(.any))
            if !allowed {
                let listed = usage.map { "\($0)" }.joined(separator: ", ")
                return CandidateFailure(
                    stage: .extendedKeyUsage, path: path, certificateIndex: index,
                    problem: "certificate \(index) (\(path[index].subject)) is not valid for \(self.purpose): its extendedKeyUsage lists \(listed)"
                )
            }
        }
        return nil
    }
}
