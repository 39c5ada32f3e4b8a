import Foundation

/// A `domains` key of a ``PinningConfiguration``, parsed: which hosts it covers.
///
/// - `api.example.com`: exactly that host (or, with `includeSubdomains`, it and every name below it).
/// - `*.example.com`: exactly one more label (`a.example.com`, not `example.com`, not `a.b.example.com`),
///   as OkHttp's `CertificatePinner` reads `*.`.
/// - `**.example.com`: `example.com` itself and every depth below it, as OkHttp's `**.`.
///
/// Names compare case-insensitively, without a trailing dot, and internationalised names by their A-labels
/// (`σkhttp.com` is `xn--khttp-fde.com`).
struct HostPattern: Hashable, Sendable {
    enum Kind: Hashable, Sendable {
        /// One host (a DNS name or an IP address literal).
        case exact(String)
        /// The suffix plus exactly one more label.
        case oneLabel(suffix: String)
        /// The suffix itself and any depth below it.
        case anyDepth(suffix: String)
    }

    let kind: Kind

    /// Whether the key was written without a wildcard (an exact key, possibly with `includeSubdomains`).
    let isExactKey: Bool

    /// How specific the pattern is for `host`, for precedence: an exact key naming the host beats `*.`, which
    /// beats `**.` and `includeSubdomains`; among those the longer suffix wins.
    ///
    /// An exact key with `includeSubdomains` counts as exact for the host it names (it is "an exact key"),
    /// and as `**.` for the names below it.
    func rank(for host: String) -> (tier: Int, length: Int) {
        switch self.kind {
        case .exact(let name): return (0, name.count)
        case .oneLabel(let suffix): return (1, suffix.count)
        case .anyDepth(let suffix): return (self.isExactKey && host == suffix ? 0 : 2, suffix.count)
        }
    }

    /// Lower-cases `host`, converts an internationalised name to its A-labels (``IDNA``), and drops one
    /// trailing dot and IPv6 brackets: the form patterns are compared in. A name with no ASCII form is kept
    /// as it is (lower-cased): it matches no pattern, and the peer-name check refuses it with the reason.
    static func normalize(_ host: String) -> String {
        let name: String
        do {
            name = try IDNA.toASCII(host)
        } catch {
            name = host.lowercased()
        }
        return Self.trimmed(name)
    }

    /// The rest of ``normalize(_:)`` once the name is in ASCII form: one trailing dot and IPv6 brackets dropped.
    private static func trimmed(_ ascii: String) -> String {
        var name = ascii
        if name.hasSuffix(".") { name.removeLast() }
        if name.hasPrefix("[") && name.hasSuffix("]") && name.count > 2 {
            name = String(name.dropFirst().dropLast())
        }
        return name
    }

    /// Parses a key. `includeSubdomains` turns an exact DNS key into an any-depth pattern.
    ///
    /// - Throws: a message saying what is wrong with the key: malformed, a wildcard that is not a whole
    ///   leading label, a suffix of fewer than two labels (`*.com` would pin a whole top-level domain), or
    ///   `includeSubdomains` on an IP address or a wildcard key.
    static func parse(_ key: String, includeSubdomains: Bool) throws(HostPatternError) -> HostPattern {
        // An internationalised key (`σkhttp.com`, `*.bücher.example`) pins the host by its A-labels, which is
        // what certificates carry and what every host is converted to before matching (as OkHttp does).
        let name: String
        do {
            name = Self.trimmed(try IDNA.toASCII(key))
        } catch {
            throw HostPatternError("not a valid internationalised host name: \(error.problem)")
        }
        guard !name.isEmpty else { throw HostPatternError("the host pattern is empty") }
        let body: String
        let wildcard: String?
        if name.hasPrefix("**.") {
            wildcard = "**."
            body = String(name.dropFirst(3))
        } else if name.hasPrefix("*.") {
            wildcard = "*."
            body = String(name.dropFirst(2))
        } else {
            wildcard = nil
            body = name
        }
        if IPAddressText.bytes(body) != nil {
            guard wildcard == nil else {
                throw HostPatternError("a wildcard cannot be applied to an IP address")
            }
            guard !includeSubdomains else {
                throw HostPatternError("includeSubdomains cannot be applied to an IP address")
            }
            return HostPattern(kind: .exact(body), isExactKey: true)
        }
        // Searched as bytes: `String.contains` with a string argument is Foundation's search, bridged through
        // NSString (the body is ASCII here, where the two agree).
        guard !(body.utf8.withContiguousStorageIfAvailable { $0.contains(UInt8(ascii: "*")) } ?? body.utf8.contains(UInt8(ascii: "*"))) else {
            throw HostPatternError("a wildcard must be a whole leading label, \"*.\" or \"**.\"")
        }
        guard DNSNameSyntax.isPlausible(body) else {
            throw HostPatternError(
                "not a DNS name or IP address (letters, digits, '-', '_' and '.', in A-label form, no empty label)"
            )
        }
        // The non-empty labels (as `split(separator: ".").count` counts them), without making them.
        var labels = 0
        var inLabel = false
        for byte in body.utf8 {
            if byte == UInt8(ascii: ".") {
                inLabel = false
            } else if !inLabel {
                inLabel = true
                labels += 1
            }
        }
        switch wildcard {
        case "**."?:
            guard !includeSubdomains else {
                throw HostPatternError("includeSubdomains applies only to an exact key; \"**.\" already covers subdomains")
            }
            guard labels >= 2 else { throw Self.tooBroad(key) }
            return HostPattern(kind: .anyDepth(suffix: body), isExactKey: false)
        case "*."?:
            guard !includeSubdomains else {
                throw HostPatternError("includeSubdomains applies only to an exact key; use \"**.\(body)\" instead")
            }
            guard labels >= 2 else { throw Self.tooBroad(key) }
            return HostPattern(kind: .oneLabel(suffix: body), isExactKey: false)
        default:
            guard includeSubdomains else { return HostPattern(kind: .exact(body), isExactKey: true) }
            guard labels >= 2 else { throw Self.tooBroad(key) }
            return HostPattern(kind: .anyDepth(suffix: body), isExactKey: true)
        }
    }

    private static func tooBroad(_ key: String) -> HostPatternError {
        HostPatternError(
            "too broad: a wildcard or includeSubdomains needs a suffix of at least two labels (\"\(key)\" would cover a whole top-level domain)"
        )
    }

    /// Whether the pattern covers `host` (already ``normalize(_:)``d).
    func matches(_ host: String) -> Bool {
        switch self.kind {
        case .exact(let name):
            return host == name
        case .oneLabel(let suffix):
            guard host.hasSuffix("." + suffix) else { return false }
            let head = host.dropLast(suffix.count + 1)
            return !head.isEmpty && !head.contains(".")
        case .anyDepth(let suffix):
            return host == suffix || host.hasSuffix("." + suffix)
        }
    }
}

/// Why a `domains` key is not a usable pattern.
struct HostPatternError: Error, Sendable {
    var message: String
    init(_ message: String) { self.message = message }
}
