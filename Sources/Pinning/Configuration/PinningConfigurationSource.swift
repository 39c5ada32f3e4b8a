import Foundation

/// A configuration as a source handed it out: the value, and a number that changes whenever the value does.
public struct CurrentConfiguration: Sendable {
    /// The configuration a connection starting now is judged by.
    public let configuration: PinningConfiguration
    /// Changes whenever the source publishes another configuration (for a pin set, its version). A client
    /// compares it with the generation a pooled connection was trusted under, so that a connection judged by an
    /// older configuration is not reused for a new request.
    package let generation: Int

    public init(configuration: PinningConfiguration, generation: Int) {
        self.configuration = configuration
        self.generation = generation
    }
}

/// Where a client finds the configuration that judges its next connection, when that configuration can change
/// while the client runs (`PinningNIO`'s `PinSetUpdater` follows a signed pin set).
///
/// The core reads the value only: a source does its I/O elsewhere. Each handshake asks once and is judged by
/// that one answer, so a connection is never judged half by one configuration and half by the next.
public protocol PinningConfigurationSource: Sendable {
    /// The configuration now, or nil when the source has none (every connection is then refused).
    func currentConfiguration() -> CurrentConfiguration?
}

/// Judges each handshake with the configuration its source holds at that moment.
///
/// Without a configuration (a pin set never verified yet) every peer is untrusted
/// (``TrustFailure/Code/hostNotAllowed``, saying why): following a pin set never fails open.
package struct SourcedConfigurationEvaluator: ServerTrustEvaluating {
    /// Where the configuration comes from.
    package let source: any PinningConfigurationSource

    package init(source: any PinningConfigurationSource) {
        self.source = source
    }

    package func evaluate(_ trust: ServerTrust, forDomain domain: String?) async -> TrustEvaluation {
        guard let current = self.source.currentConfiguration() else {
            return .hostNotAllowed(
                trust, host: domain, reason: "no pin set has been verified yet, so no host is trusted (connections are refused until one is)")
        }
        return await current.configuration.evaluate(trust, forDomain: domain)
    }

    /// The policy of the configuration current now (the CRL fetcher asks before the evaluation; should the
    /// configuration change in between, the evaluation applies its own entry's policy, which may then refuse for
    /// want of a CRL: never trust more).
    package func revocationPolicy(for trust: ServerTrust, forDomain domain: String?) -> RevocationPolicy? {
        guard let current = self.source.currentConfiguration() else { return trust.revocation }
        return current.configuration.revocationPolicy(for: trust, forDomain: domain)
    }
}
