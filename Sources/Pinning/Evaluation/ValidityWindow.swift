import Foundation
import X509

/// The span of time in which every certificate on the paths behind a verdict is valid.
struct ValidityWindow: Hashable, Sendable {
    var notBefore: Date
    var notAfter: Date

    init(notBefore: Date, notAfter: Date) {
        self.notBefore = notBefore
        self.notAfter = notAfter
    }

    /// The window of a path; nil for an empty one.
    init?(path: some Sequence<Certificate>) {
        var notBefore: Date?
        var notAfter: Date?
        for certificate in path {
            notBefore = max(notBefore ?? certificate.notValidBefore, certificate.notValidBefore)
            notAfter = min(notAfter ?? certificate.notValidAfter, certificate.notValidAfter)
        }
        guard let notBefore, let notAfter else { return nil }
        self.init(notBefore: notBefore, notAfter: notAfter)
    }

    /// Both windows at once.
    func intersection(_ other: ValidityWindow?) -> ValidityWindow {
        guard let other else { return self }
        return ValidityWindow(notBefore: max(self.notBefore, other.notBefore), notAfter: min(self.notAfter, other.notAfter))
    }

    /// Strictly inside: a hit exactly at a boundary is re-evaluated rather than trusted from the cache.
    func contains(_ time: Date) -> Bool {
        self.notBefore < time && time < self.notAfter
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        let parts = self.components
        return TimeInterval(parts.seconds) + TimeInterval(parts.attoseconds) / 1e18
    }
}
