import Foundation
import X509

/// The revocation stage of path validation: ``RevocationPolicy`` applied to one candidate path at one instant.
/// The rules are listed on ``RevocationPolicy``; this type applies them, top to bottom.
struct RevocationCheck: Sendable {
    var policy: RevocationPolicy
    var time: Date

    /// The status of each certificate of `path` (leaf first, ending at the trust anchor) that the scope covers.
    func report(for path: [Certificate]) -> RevocationReport {
        // The anchor (the last certificate) is never checked: it is trusted as configured, and a one-certificate
        // path (a pinned or self-signed leaf that is itself the anchor) has nothing to check.
        let inScope: Range<Int>
        switch self.policy.scope {
        case .leaf: inScope = 0..<min(1, path.count - 1)
        case .chain: inScope = 0..<max(0, path.count - 1)
        }
        let statuses = inScope.map { self.status(of: path[$0], index: $0, issuer: path[$0 + 1]) }
        return RevocationReport(mode: self.policy.mode, scope: self.policy.scope, certificates: statuses, window: self.policy.index.window)
    }

    /// The candidate failure for `path`: a revoked certificate in any mode, an unknown status in hard mode; nil
    /// when the path passes.
    func failure(for path: [Certificate]) -> CandidateFailure? {
        let report = self.report(for: path)
        if let revoked = report.firstRevoked {
            return CandidateFailure(
                stage: .revocation,
                path: path,
                certificateIndex: revoked.index,
                problem: revoked.summary,
                revocation: report
            )
        }
        if self.policy.mode == .hard, let unknown = report.unknown.first {
            return CandidateFailure(
                stage: .revocation,
                path: path,
                certificateIndex: unknown.index,
                problem: unknown.summary + " (revocation mode hard)",
                revocation: report
            )
        }
        return nil
    }

    private func status(of certificate: Certificate, index: Int, issuer: Certificate) -> CertificateRevocationStatus {
        let prepared = self.policy.index
        var problems: [String] = []
        var usable: [CertificateRevocationList] = []
        for position in prepared.crls(issuedBy: certificate.issuer) {
            let crl = prepared.crls[position]
            // Described only when something is wrong: formatting a distinguished name costs more than the look-up.
            var name: String { CertificateRevocationStatus.describe(crl) }
            if let unusable = crl.unusable {
                problems.append("\(name) cannot be used: \(unusable)")
                continue
            }
            // Signed by the issuer on this path, not merely by someone with the same name.
            if let problem = prepared.signatureProblem(crl: position, issuer: issuer) {
                problems.append("\(name) is not signed by the issuer on the path: \(problem)")
                continue
            }
            // One-second granularity, as certificate validity (ChainPolicy.validityFailure).
            let now = Date(timeIntervalSince1970: self.time.timeIntervalSince1970.rounded(.down))
            if now < crl.thisUpdate {
                problems.append("\(name) is not valid before its thisUpdate \(RFC3339.format(crl.thisUpdate))")
                continue
            }
            // `unusable` already refuses a CRL without nextUpdate.
            if let next = crl.nextUpdate, now > next {
                problems.append("\(name) is stale: its nextUpdate was \(RFC3339.format(next))")
                continue
            }
            usable.append(crl)
        }

        var status = CertificateRevocationStatus(index: index, certificate: certificate, status: .unknown)
        for crl in usable {
            guard let entry = crl.entry(for: certificate) else { continue }
            if entry.reason == .removeFromCRL {
                // RFC 5280 §5.3.1: removeFromCRL belongs in delta CRLs only (which are refused). In a complete CRL
                // it is a contradiction, so this CRL answers nothing for this certificate (fail closed: unknown,
                // which hard mode refuses), rather than reading it as either "revoked" or "not revoked".
                problems.append("\(CertificateRevocationStatus.describe(crl)) lists it with reason removeFromCRL, which a complete CRL must not use")
                usable.removeAll { $0 == crl }
                continue
            }
            status.status = .revoked
            status.revocationReason = entry.reason
            status.revocationDate = entry.revocationDate
            status.crl = crl
            return status
        }
        if let newest = usable.max(by: { $0.thisUpdate < $1.thisUpdate }) {
            status.status = .good
            status.crl = newest
            return status
        }
        if problems.isEmpty {
            if self.policy.fetch && self.policy.fetched && certificate.crlDistributionPointURLs.isEmpty {
                // Fetching was asked for and done, and this certificate gave nothing to fetch: that is why there is
                // no CRL, not that none "was given" (which reads as the user's omission).
                problems.append(
                    "it names no CRL distribution point (http or https), so no CRL could be fetched, and none from \(certificate.issuer) was given")
            } else {
                problems.append("no CRL from \(certificate.issuer) was given")
            }
        }
        if self.policy.fetch && !self.policy.fetched {
            problems.append(
                "its CRL distribution points were to be fetched, but this evaluator does not fetch (PinningNIO's RevocationFetchingEvaluator does)"
            )
        }
        problems += self.policy.unavailable
        status.unknownReason = problems.joined(separator: "; ")
        return status
    }
}
