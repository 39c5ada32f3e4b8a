import Foundation
import SwiftASN1
import X509

/// RFC 5280's structural rules that a path must meet besides ours: the version rule and name constraints
/// (issue 31). They are our own code since path building became ours (``PathBuilder``): swift-certificates'
/// `RFC5280Policy` can only be run on a chain its `Verifier` built (`UnverifiedCertificateChain` has no public
/// initialiser), and the other rules of that policy (validity, basicConstraints and pathLenConstraint) are our
/// stages already (``ChainPolicy``).
///
/// The semantics are swift-certificates' `RFC5280Policy`'s (1.21), deliberately, so that our path builder gives
/// the verdict the `Verifier` it replaced gave; the differential test (`limbo --differential`, and the generated
/// chains of `PathBuilderDifferentialTests`) compares the two. Where that policy deviates from RFC 5280 it does so
/// by refusing, and so do we:
///
/// - **Version** (§4.1.2.9): a version 1 certificate carries no extensions.
/// - **Name constraints** (§4.2.1.10): each issuer's constraints apply to every certificate below it on the path,
///   to its subject (as a directoryName) and to each subjectAltName.
///   - dNSName: a name satisfies a constraint when it is the constraint with zero or more labels added on the
///     left; a constraint that starts with a period needs at least one. Names and constraints must be valid
///     host names (letters, digits, hyphens, underscores; labels of 1–63 bytes; at most 253 bytes; a last label
///     not all digits; a wildcard only as a whole first label, with two labels after it), compared without case.
///   - iPAddress: an address of 4 (16) bytes against a constraint of 8 (32) bytes, a subnet and a mask; a mask
///     that is not a CIDR prefix matches nothing.
///   - uniformResourceIdentifier: the URI's host, matched as a dNSName; a URI without a host, or whose host is an
///     IP address, matches no constraint (the RFC says such a certificate MUST be rejected, and a permitted
///     subtree that matches nothing refuses it).
///   - **directoryName constraints are not evaluated, and refuse**: the RFC's MUST needs its full
///     distinguished-name comparison, which neither swift-certificates nor we implement; every certificate has
///     a subject, so any directoryName constraint refuses the certificates below it. Fails closed.
///   - **Any other form** (rfc822Name, otherName, x400Address, ediPartyName, registeredID) refuses: RFC 5280
///     lets an implementation that cannot process a form reject the certificate, and a constraint that is
///     ignored would widen what the CA may issue. Fails closed.
///
/// Like swift-certificates, a self-issued intermediate's names are constrained too (RFC 5280 §6.1.3 (b) exempts
/// self-issued certificates that are not the last; constraining them only refuses more).
enum RFC5280Structure {
    /// The first certificate of `path` that breaks the version rule, with the problem in words.
    static func versionProblem(in path: [Certificate]) -> (index: Int, problem: String)? {
        // By index: `enumerated()` copied every certificate (some twenty reference-counted buffers) to read two fields.
        for index in path.indices where path[index].version == .v1 && !path[index].extensions.isEmpty {
            return (index, "certificate \(index) (\(path[index].subject)) is a version 1 certificate but carries extensions")
        }
        return nil
    }

    /// The first name on `path` that an issuer above it does not permit, or excludes, with the problem in words.
    /// Issuers are taken from the anchor down, each applied to every certificate below it, leaf first.
    static func nameConstraintProblem(in path: [Certificate], facts: [CertificateFacts]) -> (index: Int, problem: String)? {
        precondition(path.count == facts.count, "one facts entry per certificate")
        guard path.count > 1 else { return nil }
        for issuerIndex in stride(from: path.count - 1, through: 1, by: -1) {
            let issuer = path[issuerIndex]
            let constraints: NameConstraints?
            do {
                constraints = try facts[issuerIndex].nameConstraints.get()
            } catch {
                return (issuerIndex, "issuer \(issuerIndex) (\(issuer.subject)) has a malformed nameConstraints extension")
            }
            guard let constraints else { continue }
            for index in 0..<issuerIndex {
                let alternativeNames: SubjectAlternativeNames?
                do {
                    alternativeNames = try facts[index].subjectAlternativeNames.get()
                } catch {
                    return (index, "certificate \(index) (\(path[index].subject)) has a malformed subjectAltName extension")
                }
                let names = [GeneralName.directoryName(path[index].subject)] + Array(alternativeNames ?? SubjectAlternativeNames())
                for name in names {
                    if let problem = Self.permittedProblem(constraints.permittedSubtrees, name)
                        ?? Self.excludedProblem(constraints.excludedSubtrees, name)
                    {
                        return (index, "certificate \(index) (\(path[index].subject)): \(problem) (name constraints of issuer \(issuerIndex), \(issuer.subject))")
                    }
                }
            }
        }
        return nil
    }

    // MARK: - Subtrees

    /// How one constraint relates to one name.
    private enum Relation {
        /// The constraint is of the name's form and covers it.
        case matches
        /// The constraint is of the name's form and does not cover it.
        case doesNotMatch
        /// The constraint is of a form we evaluate, but not the name's form.
        case otherForm
        /// The constraint cannot be evaluated against this name: it refuses.
        case unsupported(String)
    }

    private static func relation(of constraint: GeneralName, to name: GeneralName) -> Relation {
        switch constraint {
        case .directoryName:
            if case .directoryName = name { return .unsupported("directoryName name constraints are not evaluated") }
            return .otherForm
        case .dnsName(let constrained):
            guard case .dnsName(let presented) = name else { return .otherForm }
            return DNSNameConstraint.matches(name: presented, constraint: constrained) ? .matches : .doesNotMatch
        case .ipAddress(let constrained):
            guard case .ipAddress(let presented) = name else { return .otherForm }
            return IPAddressConstraint.matches(address: presented.bytes, constraint: constrained.bytes) ? .matches : .doesNotMatch
        case .uniformResourceIdentifier(let constrained):
            guard case .uniformResourceIdentifier(let presented) = name else { return .otherForm }
            return URIConstraint.matches(uri: presented, constraint: constrained) ? .matches : .doesNotMatch
        case .otherName, .rfc822Name, .x400Address, .ediPartyName, .registeredID:
            return .unsupported("a name constraint of a form that is not evaluated (\(constraint)) is present")
        }
    }

    /// Permitted subtrees: when at least one constraint of the name's form is present, one of them must cover the
    /// name. Constraints are taken in order and the first that covers the name settles it.
    private static func permittedProblem(_ subtrees: [GeneralName], _ name: GeneralName) -> String? {
        var constrained = false
        for subtree in subtrees {
            switch Self.relation(of: subtree, to: name) {
            case .matches:
                return nil
            case .doesNotMatch:
                constrained = true
            case .otherForm:
                continue
            case .unsupported(let problem):
                return problem
            }
        }
        return constrained ? "\(Self.describe(name)) is outside every permitted subtree" : nil
    }

    /// Excluded subtrees: no constraint may cover the name.
    private static func excludedProblem(_ subtrees: [GeneralName], _ name: GeneralName) -> String? {
        for subtree in subtrees {
            switch Self.relation(of: subtree, to: name) {
            case .matches:
                return "\(Self.describe(name)) is in an excluded subtree (\(Self.describe(subtree)))"
            case .doesNotMatch, .otherForm:
                continue
            case .unsupported(let problem):
                return problem
            }
        }
        return nil
    }

    private static func describe(_ name: GeneralName) -> String {
        switch name {
        case .dnsName(let value): return "dNSName \(value)"
        case .uniformResourceIdentifier(let value): return "URI \(value)"
        case .ipAddress(let value): return "iPAddress \(value.bytes.map { String($0) }.joined(separator: "."))"
        case .directoryName(let value): return "directoryName \(value)"
        default: return "\(name)"
        }
    }
}

/// dNSName constraints (RFC 5280 §4.2.1.10), with the host-name syntax swift-certificates requires of both sides.
enum DNSNameConstraint {
    /// Whether `name` is `constraint` with zero or more labels added on the left (at least one when the
    /// constraint starts with a period). The empty constraint covers every valid name.
    static func matches(name: String, constraint: String) -> Bool {
        let name = Array(name.utf8)
        var constraint = Array(constraint.utf8)
        guard Self.isValid(name, isConstraint: false), Self.isValid(constraint, isConstraint: true) else { return false }
        if constraint.isEmpty { return true }
        if constraint.last == UInt8(ascii: ".") { constraint.removeLast() }

        // Compare labels from the right. An empty name label (a trailing period, or two in a row) never matches;
        // an empty constraint label is allowed only as its leftmost one (a leading period), and then covers
        // whatever the name has left, provided it has at least one more label.
        var nameLabels = Array(Self.labels(name).reversed())[...]
        var constraintLabels = Array(Self.labels(constraint).reversed())[...]
        while true {
            switch (nameLabels.popFirst(), constraintLabels.popFirst()) {
            case (.none, .none), (.some, .none):
                return true
            case (.none, .some):
                return false
            case (.some(let label), .some) where label.isEmpty:
                return false
            case (.some, .some(let constrained)) where constrained.isEmpty:
                return constraintLabels.isEmpty
            case (.some(let label), .some(let constrained)):
                guard Self.equalIgnoringASCIICase(label, constrained) else { return false }
            }
        }
    }

    /// The labels of `bytes` between periods, empty ones included ("a..b." has four).
    private static func labels(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
    }

    private static func equalIgnoringASCIICase(_ left: ArraySlice<UInt8>, _ right: ArraySlice<UInt8>) -> Bool {
        left.count == right.count && zip(left, right).allSatisfy { Self.lowercased($0) == Self.lowercased($1) }
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    /// Host-name syntax, read left to right: at most 253 bytes; an optional wildcard `*.` first, after which at
    /// least two labels must follow; labels of letters, digits, hyphens and underscores, 63 bytes at most, not
    /// starting or ending with a hyphen, and not empty, except a constraint's first label (a leading period). The
    /// label after the last period is read only when that period is not the last byte, so a name's trailing
    /// period passes here and fails when matched. The last label read may not be all digits.
    static func isValid(_ bytes: [UInt8], isConstraint: Bool) -> Bool {
        guard bytes.count <= 253 else { return false }
        var rest = bytes[...]
        var labelCount = 0
        var isWildcard = false
        if rest.first == UInt8(ascii: "*") {
            rest = rest.dropFirst()
            guard rest.popFirst() == UInt8(ascii: ".") else { return false }
            labelCount += 1
            isWildcard = true
        }
        while !rest.isEmpty {
            let label: ArraySlice<UInt8>
            if let period = rest.firstIndex(of: UInt8(ascii: ".")) {
                label = rest[..<period]
                rest = rest[(period + 1)...]
            } else {
                label = rest
                rest = rest[rest.endIndex...]
            }
            labelCount += 1
            if label.isEmpty && !(labelCount == 1 && isConstraint) { return false }
            if label.first == UInt8(ascii: "-") || label.last == UInt8(ascii: "-") { return false }
            if label.count > 63 { return false }
            var letters = 0
            for byte in label {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"):
                    continue
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                    letters += 1
                default:
                    return false
                }
            }
            if letters == 0 && rest.isEmpty { return false }
        }
        return !isWildcard || labelCount >= 3
    }
}

/// iPAddress constraints (RFC 5280 §4.2.1.10): a subnet and a CIDR mask.
enum IPAddressConstraint {
    static func matches(address: ArraySlice<UInt8>, constraint: ArraySlice<UInt8>) -> Bool {
        guard (address.count == 4 && constraint.count == 8) || (address.count == 16 && constraint.count == 32) else {
            return false
        }
        let address = Array(address)
        let subnet = Array(constraint.prefix(address.count))
        let mask = Array(constraint.suffix(address.count))
        guard Self.isCIDRPrefix(mask) else { return false }
        return address.indices.allSatisfy { (address[$0] & mask[$0]) == (subnet[$0] & mask[$0]) }
    }

    /// Ones then zeros, in bit order: /0 (all zeros, as the CA/Browser Forum's "no IP addresses" exclusion
    /// writes it) through all ones.
    static func isCIDRPrefix(_ mask: [UInt8]) -> Bool {
        var seenZero = false
        for byte in mask {
            for bit in (0..<8).reversed() {
                let set = (byte >> bit) & 1 == 1
                if set && seenZero { return false }
                if !set { seenZero = true }
            }
        }
        return true
    }
}

/// uniformResourceIdentifier constraints (RFC 5280 §4.2.1.10): the URI's host, as a dNSName.
enum URIConstraint {
    static func matches(uri: String, constraint: String) -> Bool {
        // The same test as swift-certificates' (inet_pton for IPv4, then IPv6), through the core's one IP parser.
        guard let host = URL(string: uri)?.host, IPAddressText.bytes(host) == nil else { return false }
        return DNSNameConstraint.matches(name: host, constraint: constraint)
    }
}
