import SwiftASN1
package import X509

/// Anything that decides whether a peer's chain is trusted for a host: a ``SecurityPolicy``, a host pinning
/// configuration, or your own composition. Connection adapters take one of these and never validate chains
/// themselves.
public protocol ServerTrustEvaluating: Sendable {
    /// Decides whether to trust `trust` for `domain` (nil: no name is checked).
    func evaluate(_ trust: ServerTrust, forDomain domain: String?) async -> TrustEvaluation

    /// A verdict available at once, without suspending, or nil when ``evaluate(_:forDomain:)`` must run.
    ///
    /// Connection adapters ask this first, on the event loop, so that a handshake whose chain was already
    /// trusted costs no task switch. Answer only with what ``evaluate(_:forDomain:)`` would answer for the same
    /// arguments at this moment (``CachingTrustEvaluator`` answers with a cache hit). The default is nil.
    func immediateEvaluation(_ trust: ServerTrust, forDomain domain: String?) -> TrustEvaluation?

    /// The revocation policy ``evaluate(_:forDomain:)`` would apply to `trust` for `domain`: the trust's own by
    /// default; a ``PinningConfiguration`` answers with its entry's policy combined with the trust's.
    ///
    /// `PinningNIO` reads it before an evaluation to learn whether, and for which certificates, CRLs are to be
    /// fetched from their distribution points (the `fetch` argument of ``RevocationPolicy/init(crls:mode:scope:fetch:)``).
    func revocationPolicy(for trust: ServerTrust, forDomain domain: String?) -> RevocationPolicy?

    /// Whether this evaluator may trust a chain that no path validated to an anchor (a ``SecurityPolicy`` with
    /// ``SecurityPolicy/allowInvalidCertificates``). A mutual-TLS server refuses such an evaluator when it is made,
    /// and refuses such a verdict at every handshake whatever this says. False by default.
    var acceptsChainsWithoutValidatedPath: Bool { get }
}

extension ServerTrustEvaluating {
    /// No immediate answer: every evaluation runs ``evaluate(_:forDomain:)``.
    public func immediateEvaluation(_ trust: ServerTrust, forDomain domain: String?) -> TrustEvaluation? {
        nil
    }

    /// The trust's own revocation policy.
    public func revocationPolicy(for trust: ServerTrust, forDomain domain: String?) -> RevocationPolicy? {
        trust.revocation
    }

    /// False: an evaluator trusts only chains validated to an anchor unless it says otherwise.
    public var acceptsChainsWithoutValidatedPath: Bool { false }
}

extension SecurityPolicy: ServerTrustEvaluating {
    /// ``allowInvalidCertificates``.
    public var acceptsChainsWithoutValidatedPath: Bool { self.allowInvalidCertificates }
}

/// An evaluator of this package whose verdict needs nothing to wait for (issue 31): ``SecurityPolicy``,
/// ``CachingTrustEvaluator``, and `PinningNIO`'s CRL fetcher when there is nothing to fetch. Path building waits
/// for nothing and its work is bounded by the evaluation's budget (``TrustLimits``), so a connection adapter may
/// run the whole evaluation on the event loop that asked, without a task: that loop waits exactly as long as it
/// did for the task, which ran there too without suspending.
///
/// A `package` protocol, so that the public meaning of ``ServerTrustEvaluating/immediateEvaluation(_:forDomain:)``
/// (a remembered verdict, never an evaluation) stays as documented, and a user's own evaluator keeps its task
/// unless it answers there.
package protocol EvaluatingWithoutWaiting: ServerTrustEvaluating {
    /// What ``ServerTrustEvaluating/evaluate(_:forDomain:)`` answers for the same arguments at this moment,
    /// computed without suspending; nil when it must wait for something (then it runs in a task).
    func evaluateWithoutWaiting(_ trust: ServerTrust, forDomain domain: String?) -> TrustEvaluation?
}

extension ServerTrustEvaluating {
    /// The verdict a connection adapter may give on the event loop, without a task: a built-in evaluator's whole
    /// evaluation (``EvaluatingWithoutWaiting``), else the evaluator's ``immediateEvaluation(_:forDomain:)``; nil
    /// when the evaluation must run in a task.
    package func evaluationWithoutTask(_ trust: ServerTrust, forDomain domain: String?) -> TrustEvaluation? {
        if let builtIn = self as? any EvaluatingWithoutWaiting {
            return builtIn.evaluateWithoutWaiting(trust, forDomain: domain)
        }
        return self.immediateEvaluation(trust, forDomain: domain)
    }
}

extension SecurityPolicy: EvaluatingWithoutWaiting {
    /// The policy's whole evaluation: what ``evaluate(_:forDomain:)`` answers.
    package func evaluateWithoutWaiting(_ trust: ServerTrust, forDomain domain: String?) -> TrustEvaluation? {
        self.evaluateSynchronously(trust, forDomain: domain)
    }
}

extension ServerTrust {
    /// Parses a chain as it arrives in a TLS handshake (DER, leaf first).
    ///
    /// The leaf must parse. An intermediate that swift-certificates cannot parse (an unsupported key or
    /// signature algorithm) is dropped: a certificate we cannot read can never be on a path we build, so
    /// dropping it can only remove paths, never add one.
    ///
    /// - Throws: ``CertificateLoadingError`` when there is no certificate or the leaf does not parse.
    package static func presentedCertificates(fromDER chain: [[UInt8]]) throws(CertificateLoadingError) -> [Certificate] {
        try Self.presentedCertificates(fromDER: chain) { der in try Certificate(derEncoded: der) }
    }

    /// ``presentedCertificates(fromDER:)`` with each certificate parsed by `parse`, which must return what
    /// `Certificate(derEncoded:)` returns for the same bytes or throw: a memo of certificates already parsed
    /// (connection adapters keep one, since the same intermediates arrive on every handshake). `parse` is called
    /// once for each certificate of `chain`, in order (none after a leaf that does not parse, which throws).
    package static func presentedCertificates(
        fromDER chain: [[UInt8]],
        parse: ([UInt8]) throws -> Certificate
    ) throws(CertificateLoadingError) -> [Certificate] {
        guard let leafBytes = chain.first else {
            throw CertificateLoadingError(code: .noCertificates, origin: "peer", problem: "the peer presented no certificate")
        }
        var certificates: [Certificate] = []
        do {
            certificates.append(try parse(leafBytes))
        } catch {
            throw CertificateLoadingError(code: .malformedDER, origin: "peer", problem: "the peer's leaf certificate does not parse: \(error)")
        }
        for der in chain.dropFirst() {
            do {
                certificates.append(try parse(der))
            } catch {
                continue
            }
        }
        return certificates
    }
}
