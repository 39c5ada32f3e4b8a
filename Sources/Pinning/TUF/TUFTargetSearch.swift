/// The search for one target path through the trusted targets metadata and its delegations (TUF specification
/// §5.6.7): a pre-order depth-first walk in the delegators' order, skipping roles already visited, stopping at a
/// terminating delegation that covers the path, visiting at most ``TUFLimits/maximumDelegations`` roles.
///
/// The walk is pure: ``next()`` says which role's metadata it needs (``Step/needs(_:)``), the caller fetches or
/// reads candidate bytes and hands them to ``provide(_:)``, which checks them against the snapshot and against the
/// delegation that led here: its keys and threshold, every time. A role reached through two delegators (a
/// "diamond") is verified under each path separately: metadata trusted through one delegator never lends its
/// authority to another. (python-tuf and go-tuf keep a delegated role by name once loaded, which
/// tuf-conformance's `test_cached_role_is_verified_against_current_delegator` shows is unsafe.)
package struct TUFTargetSearch: Sendable {
    /// One step of the search.
    package enum Step: Sendable {
        /// The target, and the role that listed it.
        case found(TUFTargetFile, role: String)
        /// No role the search may reach lists the target; the reason in words.
        case notFound(String)
        /// The search needs this role's metadata: hand candidate bytes to ``TUFTargetSearch/provide(_:)``.
        case needs(TUFRoleRequest)
    }

    package let targetPath: String
    /// The roles whose metadata the search took in, in order (the top-level `targets` first).
    package private(set) var visitedRoles: [String] = []

    private struct Visit: Sendable {
        var role: String
        var delegatorName: String
        var delegation: TUFDelegatedRole
        var delegatorKeys: [String: TUFKey]
    }

    private let snapshot: TUFSnapshot
    private let root: TUFRoot
    private let limits: TUFLimits
    private let referenceTime: Double
    private var stack: [Visit] = []
    private var pending: (visit: Visit, request: TUFRoleRequest)?
    private var result: Step?

    init(targetPath: String, targets: TUFTargets, snapshot: TUFSnapshot, root: TUFRoot, limits: TUFLimits, referenceTime: Double) throws(TUFError) {
        self.targetPath = targetPath
        self.snapshot = snapshot
        self.root = root
        self.limits = limits
        self.referenceTime = referenceTime
        try self.take(targets, role: TUFRoleName.targets)
    }

    /// What the search needs next, or its result.
    ///
    /// - Throws: ``TUFError/Rule/notInSnapshot`` when the next role to visit is not in the snapshot (a
    ///   mix-and-match of files is never searched).
    package mutating func next() throws(TUFError) -> Step {
        if let result = self.result { return result }
        if let pending = self.pending { return .needs(pending.request) }
        while let visit = self.stack.popLast() {
            if self.visitedRoles.contains(where: { $0.utf8.elementsEqual(visit.role.utf8) }) { continue }
            guard self.visitedRoles.count < self.limits.maximumDelegations else {
                let result = Step.notFound("the search stopped after visiting \(self.limits.maximumDelegations) roles, the most one search may visit")
                self.result = result
                return result
            }
            let request = try TUFRoleRequest(role: visit.role, delegator: visit.delegatorName, snapshot: self.snapshot, root: self.root, limits: self.limits)
            self.pending = (visit, request)
            return .needs(request)
        }
        let result = Step.notFound("no role the search reached (\(self.visitedRoles.map(TUFError.printable).joined(separator: ", "))) lists it")
        self.result = result
        return result
    }

    /// Takes in candidate metadata for the role ``next()`` asked for: within the snapshot's length and hashes, of
    /// the snapshot's version, signed by a threshold of the keys the delegation that led here names, not expired.
    /// A refused candidate leaves the search waiting for the same role (the caller may offer the repository's copy
    /// after its own cached one).
    ///
    /// - Throws: the candidate's refusal; ``TUFError/Rule/delegation`` when the accepted role does not list the
    ///   target and delegates with succinct hash-bin roles (TAP 15), which this client does not follow.
    package mutating func provide(_ bytes: [UInt8]) throws(TUFError) {
        guard let pending = self.pending else {
            throw TUFError(role: self.targetPath, rule: .outOfOrder, "no role's metadata was asked for")
        }
        let (visit, request) = (pending.visit, pending.request)
        let targets = try request.verify(
            bytes, keys: visit.delegatorKeys, roleKeys: visit.delegation.keys, signer: "\(TUFError.printable(visit.delegatorName))'s delegation",
            referenceTime: self.referenceTime)
        self.pending = nil
        try self.take(targets, role: visit.role)
    }

    /// Visits a role's verified metadata: the target if it lists it, else its delegations that cover the path.
    private mutating func take(_ targets: TUFTargets, role: String) throws(TUFError) {
        self.visitedRoles.append(role)
        if let target = targets.target(self.targetPath) {
            self.result = .found(target, role: role)
            return
        }
        guard let delegations = targets.delegations else { return }
        if delegations.usesSuccinctRoles {
            // TAP 15 hash bins are not part of specification 1.0; refusing is safe, skipping would not be (a
            // target found later in the walk could be one the bins were meant to decide).
            throw TUFError(role: role, rule: .delegation, "delegates with succinct hash-bin roles (TAP 15), which this client does not follow")
        }
        var children: [Visit] = []
        for delegation in delegations.roles(for: self.targetPath) {
            children.append(Visit(role: delegation.name, delegatorName: role, delegation: delegation, delegatorKeys: delegations.keys))
            if delegation.terminating {
                // A terminating delegation that covers the path ends the search below it: nothing else pending is
                // consulted (§5.6.7.2.1).
                self.stack.removeAll()
                break
            }
        }
        self.stack.append(contentsOf: children.reversed())
    }
}
