import Foundation
import X509

/// The outcome of judging one connection with a ``PinningConfiguration``: the verdict and how the
/// configuration reached it.
public struct HostEvaluation: Sendable {
    /// Trusted or untrusted, with the path or the reason.
    public internal(set) var verdict: TrustEvaluation
    /// The host that was judged, as given.
    package internal(set) var host: String
    /// The port, as given (it appears in failure reports).
    package internal(set) var port: Int
    /// The key of the entry that governed the host, or nil when the host is unlisted or excluded from its
    /// parent's policy (see ``excludedBy``).
    public internal(set) var matchedEntry: String?
    /// The key of the `excludeSubdomainFromParentPolicy` entry that exempted the host from its parent's pins, or
    /// nil. Such a host is not pinned: TrustKit answers "domain not pinned" for it (its configuration has no
    /// entry for it), so ``matchedEntry`` is nil, as for an unlisted host, and this says which exclusion applied.
    public internal(set) var excludedBy: String? = nil
    /// Whether a pin mismatch would make (or made) the host untrusted: false when the host is unlisted, the
    /// entry is report-only, or its pins have expired.
    public internal(set) var pinsEnforced: Bool
    /// Whether the validated path matched none of the entry's pins and the host was trusted anyway (the
    /// entry is report-only, or its pins have expired).
    public internal(set) var pinMismatch: Bool
    /// Things a reader should know: a mismatch let through, expired pins.
    public internal(set) var warnings: [String]
    /// The failure report built for a pin mismatch of a pinned (not expired) entry, whether or not it was sent.
    public internal(set) var failureReport: PinFailureReport?
    /// Whether the configuration's ``PinningConfiguration/reportQueue`` accepted ``failureReport`` (false
    /// without a queue, without `reportURIs`, or when the reporter dropped it: `PinFailureReportQueue` drops
    /// the same report within 24 hours).
    public internal(set) var reportSubmitted: Bool

    /// Whether the peer is trusted.
    public var isTrusted: Bool { self.verdict.isTrusted }
}

extension PinningConfiguration: ServerTrustEvaluating {
    /// ``ServerTrustEvaluating`` conformance: ``evaluate(_:forHost:port:)`` on the trust's
    /// ``ServerTrust/port``, the port the connection was made to (443 when the caller did not say).
    ///
    /// A configuration judges hosts, so without a host (`domain` nil) the peer is untrusted
    /// (``TrustFailure/Code/hostNotAllowed``): it is never waved through unpinned.
    public func evaluate(_ trust: ServerTrust, forDomain domain: String?) async -> TrustEvaluation {
        guard let domain else {
            return .hostNotAllowed(trust, host: nil, reason: "a pinning configuration judges a host, and no host was given")
        }
        return await self.evaluate(trust, forHost: domain, port: trust.port ?? 443).verdict
    }

    /// The entry's revocation policy combined with the trust's, as ``evaluate(_:forHost:port:)`` applies it.
    public func revocationPolicy(for trust: ServerTrust, forDomain domain: String?) -> RevocationPolicy? {
        guard let domain, let entry = self.entry(forHost: domain), !entry.excludesSubdomainFromParentPolicy else {
            return trust.revocation
        }
        return self.revocation(of: entry, combinedWith: trust.revocation)
    }

    /// How an entry's revocation policy and the one the caller's trust carries combine.
    ///
    /// - The entry's mode and scope win: the entry is the more specific statement.
    /// - CRLs are added together, never dropped. Every CRL still has to be signed by the certificate's issuer on
    ///   the validated path and be current to count, so another list can only answer a status, never forge one.
    ///   (This is also how CRLs fetched for the entry, which arrive in the trust, reach the check.)
    /// - Fetching is asked for when either asks; what was fetched, and what could not be, is the trust's.
    ///
    /// Combining CRLs re-indexes them (a digest over every CRL), so a combination is remembered by both policies'
    /// digests and made once, not per handshake.
    func revocation(of entry: Entry, combinedWith given: RevocationPolicy?) -> RevocationPolicy? {
        guard let own = entry.revocation else { return given }
        guard let given else { return own }
        var policy = own
        if !given.crls.isEmpty {
            policy = self.combinedRevocation.combination(own, given) {
                var combined = own
                combined.crls = own.crls + given.crls.filter { !own.crls.contains($0) }
                return combined
            }
        }
        policy.fetch = own.fetch || given.fetch
        policy.fetched = given.fetched
        policy.unavailable = given.unavailable
        return policy
    }

    /// Judges a peer's chain for `host` with the entry that governs it.
    ///
    /// - A matched host's chain must validate against the platform roots plus the entry's anchors (or only
    ///   them, with `anchorsOnly`), and the leaf must be valid for `host`, always: even when the entry is
    ///   report-only or its pins have expired.
    /// - Pins are matched by the core during path building, on the validated path only
    ///   (``ServerTrust/evaluate(_:pins:)``). An enforced mismatch is untrusted
    ///   (``TrustFailure/Code/pinMismatch``). A report-only mismatch is trusted, flagged
    ///   (``HostEvaluation/pinMismatch``) and reported. After `expires` a mismatch is trusted with a warning
    ///   and not reported (the pins are no longer known).
    /// - An unlisted host gets the core's normal validation (`unlistedHosts: default`), or is untrusted
    ///   (`reject`).
    ///
    /// Reports go to the ``reportQueue`` in the background; the verdict never waits for them.
    ///
    /// - Parameters:
    ///   - trust: The presented chain, the platform roots and the validation instant (nil: now).
    ///   - host: The DNS name or IP address connected to.
    ///   - port: The port connected to (for reports).
    public func evaluate(_ trust: ServerTrust, forHost host: String, port: Int = 443) async -> HostEvaluation {
        var trust = trust
        // One instant for every evaluation and the report.
        let time = trust.validationTime ?? Date()
        trust.validationTime = time
        var evaluation = await self.evaluateEntry(trust, forHost: host, port: port, time: time)
        // Verdicts made here without an evaluation (an unlisted host refused) record the trust as given; the
        // others recorded the settings their entry applied.
        evaluation.verdict = evaluation.verdict.judged(under: trust.settings, at: time)
        return evaluation
    }

    /// The body of ``evaluate(_:forHost:port:)``, with `trust`'s instant fixed at `time`.
    private func evaluateEntry(_ trust: ServerTrust, forHost host: String, port: Int, time: Date) async -> HostEvaluation {
        var trust = trust

        guard let entry = self.entry(forHost: host) else {
            return await self.evaluateUnlisted(trust, host: host, port: port, time: time)
        }
        if entry.excludesSubdomainFromParentPolicy {
            // Exempt from the parent's policy (TrustKit's "domain not pinned"): the chain and the host name are
            // validated with the trust as given, no pins, whatever unlistedHosts says (the host is listed).
            // No entry matched in TrustKit's sense: matchedEntry stays nil and the exclusion is named apart.
            return HostEvaluation(
                verdict: await trust.evaluate(.ssl(host: host)),
                host: host,
                port: port,
                matchedEntry: nil,
                excludedBy: entry.key,
                pinsEnforced: false,
                pinMismatch: false,
                warnings: [],
                failureReport: nil,
                reportSubmitted: false
            )
        }

        if entry.anchorsOnly {
            trust.anchors = entry.anchors
            trust.anchorsOnly = true
        } else {
            trust.anchors += entry.anchors
        }
        trust.revocation = self.revocation(of: entry, combinedWith: trust.revocation)
        let expired = entry.pinsExpired(at: time)
        let enforced = entry.enforce && !expired
        var result = HostEvaluation(
            verdict: .untrusted(
                TrustFailure(code: .pinMismatch, reason: "not evaluated", host: host, validationTime: time, presentedChain: [])
            ),
            host: host,
            port: port,
            matchedEntry: entry.key,
            pinsEnforced: enforced,
            pinMismatch: false,
            warnings: [],
            failureReport: nil,
            reportSubmitted: false
        )
        if expired, let expires = entry.expires {
            result.warnings.append(
                "pins of \"\(entry.key)\" expired at \(RFC3339.format(expires)); they are not enforced (the chain and host name still are)"
            )
        }

        let pinned = await trust.evaluate(.ssl(host: host), pins: .publicKeys(entry.pins))
        guard case .untrusted(let failure) = pinned, failure.code == .pinMismatch else {
            // Trusted with a pin on the validated path, or refused before pins (chain, name, usage…): either
            // way the core's verdict stands, whatever the entry's mode.
            result.verdict = Self.adding(result.warnings, to: pinned)
            return result
        }

        if !expired {
            let report = Self.report(failure, entry: entry, host: host, port: port, time: time, pinsetVersion: self.pinsetVersion)
            result.failureReport = report
            if let queue = self.reportQueue, !entry.reportURIs.isEmpty {
                result.reportSubmitted = await queue.submit(report, to: entry.reportURIs)
            }
        }
        if enforced {
            result.verdict = pinned
            return result
        }

        // Report-only or expired: the mismatch is let through, but only if the chain and the host name still
        // validate. pinMismatch means some path validated fully, so this normally trusts; if it does not, its
        // refusal stands (fail closed).
        let unpinned = await trust.evaluate(.ssl(host: host))
        guard unpinned.isTrusted else {
            result.verdict = unpinned
            return result
        }
        result.pinMismatch = true
        let why = expired ? "its pins have expired" : "the entry is report-only (\"enforce\": false)"
        result.warnings.append(
            "pin mismatch for \(host) let through because \(why): the validated path matched none of the \(entry.pins.count) pin\(entry.pins.count == 1 ? "" : "s") of \"\(entry.key)\""
        )
        result.verdict = Self.adding(result.warnings, to: unpinned)
        return result
    }

    private func evaluateUnlisted(_ trust: ServerTrust, host: String, port: Int, time: Date) async -> HostEvaluation {
        let verdict: TrustEvaluation
        switch self.unlistedHosts {
        case .default:
            verdict = await trust.evaluate(.ssl(host: host))
        case .reject:
            verdict = .untrusted(
                TrustFailure(
                    code: .hostNotAllowed,
                    reason: "no entry of the pinning configuration matches \(host), and unlisted hosts are rejected (\"unlistedHosts\": \"reject\")",
                    host: host,
                    validationTime: time,
                    presentedChain: trust.certificates
                )
            )
        }
        return HostEvaluation(
            verdict: verdict,
            host: host,
            port: port,
            matchedEntry: nil,
            pinsEnforced: false,
            pinMismatch: false,
            warnings: [],
            failureReport: nil,
            reportSubmitted: false
        )
    }

    private static func adding(_ warnings: [String], to verdict: TrustEvaluation) -> TrustEvaluation {
        guard case .trusted(var chain) = verdict, !warnings.isEmpty else { return verdict }
        chain.warnings += warnings
        return .trusted(chain)
    }

    static func report(_ failure: TrustFailure, entry: Entry, host: String, port: Int, time: Date, pinsetVersion: Int? = nil) -> PinFailureReport {
        PinFailureReport(
            dateTime: time,
            hostname: host,
            port: port,
            effectiveExpirationDate: entry.expires,
            includeSubdomains: entry.includeSubdomains,
            notedHostname: entry.key,
            servedCertificateChain: failure.presentedChain.map(PinFailureReport.pem),
            validatedCertificateChain: (failure.validatedPath ?? []).map(PinFailureReport.pem),
            knownPins: entry.pins.map(PinFailureReport.knownPin),
            validationResult: failure.code.description,
            pinsetVersion: pinsetVersion,
            enforcePinning: entry.enforce,
            libraryVersion: SwiftPinning.reportLibraryVersion
        )
    }
}
