extension PinningConfiguration.Entry {
    /// Which host names an entry covers, in the normalized form it compares names in (lower case, A-labels, no
    /// trailing dot): what a proxy's PAC file and its local CA's name constraints are written from.
    public enum Coverage: Sendable, Hashable {
        /// Exactly this host (a DNS name or an IP address).
        case exact(String)
        /// The suffix plus exactly one more label (a `*.` key).
        case oneLabel(suffix: String)
        /// The suffix itself and every name below it (a `**.` key, or an exact key with `includeSubdomains`).
        case anyDepth(suffix: String)
    }

    /// Which host names this entry covers.
    package var coverage: Coverage {
        switch self.pattern.kind {
        case .exact(let name): return .exact(name)
        case .oneLabel(let suffix): return .oneLabel(suffix: suffix)
        case .anyDepth(let suffix): return .anyDepth(suffix: suffix)
        }
    }
}
