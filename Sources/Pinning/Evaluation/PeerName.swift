import Foundation

/// The name a server is expected to prove: a DNS name or an IP address.
///
/// A host string that parses as an IPv4 or IPv6 address (brackets allowed: `[::1]`) is an IP address and is
/// matched only against IP address subjectAltNames; anything else is a DNS name, matched only against DNS
/// subjectAltNames. The common name is never consulted.
package struct PeerName: Hashable, Sendable, CustomStringConvertible {
    enum Kind: Hashable, Sendable {
        /// Lower-cased, trailing dot removed.
        case dns(String)
        /// 4 or 16 bytes, network order.
        case ip([UInt8])
    }

    let kind: Kind
    /// The text the caller gave.
    package let text: String

    /// Interprets `host` as an IP address if it is one, else as a DNS name.
    ///
    /// - Throws: ``PeerNameError`` for an empty name or one that is neither an IP address nor a plausible DNS
    ///   name. An internationalised name (`σkhttp.com`) is converted to its A-labels (`xn--khttp-fde.com`)
    ///   first, as OkHttp and browsers do.
    package init(_ host: String) throws(PeerNameError) {
        self.text = host
        var candidate = host
        if candidate.hasPrefix("[") && candidate.hasSuffix("]") && candidate.count > 2 {
            candidate = String(candidate.dropFirst().dropLast())
        }
        if let bytes = IPAddressText.bytes(candidate) {
            self.kind = .ip(bytes)
            return
        }
        // An internationalised name is checked by its A-labels, the form certificates carry (``IDNA``).
        var name: String
        do {
            name = try IDNA.toASCII(host)
        } catch {
            throw PeerNameError(text: host, problem: "not a valid internationalised host name: \(error.problem)")
        }
        if name.hasSuffix(".") { name.removeLast() }
        guard !name.isEmpty else {
            throw PeerNameError(text: host, problem: "the host name is empty")
        }
        guard DNSNameSyntax.isPlausible(name) else {
            throw PeerNameError(
                text: host,
                problem: "not an IP address and not a DNS name (letters, digits, '-', '_' and '.', in A-label form)"
            )
        }
        self.kind = .dns(name)
    }

    /// The one text for the name, whatever form it was given in: a DNS name lower-cased, in A-labels and without
    /// its trailing dot (`Bücher.Example.` is `xn--bcher-kva.example`); an IP address as a dotted quad or in
    /// RFC 5952 form (`[0:0::1]` is `::1`). Two texts naming the same host have the same canonical text.
    package var canonical: String {
        switch self.kind {
        case .dns(let name): return name
        case .ip(let bytes): return IPAddressText.formatOrHex(bytes)
        }
    }

    /// Whether this is an IP address rather than a DNS name.
    package var isIPAddress: Bool {
        if case .ip = self.kind { return true }
        return false
    }

    /// The name as given (an IPv6 address without brackets).
    package var description: String { self.text }
}

/// A host name that cannot be checked against a certificate.
package struct PeerNameError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `invalidHost`: the error's stable code (for logs, metrics and JSON; the words may change).
    package var code: String { "invalidHost" }

    /// The text that was given.
    package var text: String
    /// What is wrong with it.
    package var problem: String

    /// `invalid host "TEXT": PROBLEM`.
    package var description: String { "invalid host \"\(self.text)\": \(self.problem)" }
}
