import Crypto
public import Foundation
import NIOConcurrencyHelpers
public import NIOSSL
public import Pinning
import PinningNIO
import SwiftASN1
public import X509

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The proxy's local certificate authority: it issues the certificates the proxy presents to its clients for the
/// hosts it intercepts.
///
/// It lives in a directory (`ca.pem`, `ca.key` with mode 0600). The key is created once and never overwritten.
/// The certificate is **name-constrained**: its permitted DNS subtrees are the names the configuration covers,
/// and every IPv4 and IPv6 address is excluded, so a client that installs it lets it vouch for those names only
/// (RFC 5280 §4.2.1.10; browsers and OpenSSL enforce constraints on a root they were given). A dNSName
/// subtree covers the name and every name below it, so an exact entry `api.example.com` permits its
/// subdomains too: the constraint is as tight as X.509 can say, and never wider than the configuration's names.
/// When the covered names change (or the certificate is within 30 days of expiry), the certificate is issued
/// again with the same key and subject: the SPKI pin stays, and clients that imported the old certificate must
/// import the new one to reach newly covered names.
///
/// Leaf certificates are minted per host on first use and cached for the life of the value.
public final class ProxyCertificateAuthority: Sendable {
    /// The directory holding `ca.pem` and `ca.key`.
    public let directory: String
    /// The certificate file clients import (`curl --cacert`, an NSS database, a trust store).
    public let certificatePath: String
    /// The private key file (mode 0600).
    public let keyPath: String
    /// The CA certificate.
    public let certificate: Certificate
    /// The DNS subtrees the certificate permits.
    public let permittedDNSDomains: [String]
    /// What happened on loading: created, issued again (and why), or loaded as it was.
    public let event: Event

    private let key: P256.Signing.PrivateKey
    /// One key for every leaf this process mints (a fresh one per process).
    private let leafKey = P256.Signing.PrivateKey()
    private let contexts = NIOLockedValueBox<[String: NIOSSLContext]>([:])

    /// What loading the directory did.
    public enum Event: Sendable, Hashable {
        /// A new key and certificate were written.
        case created
        /// The certificate was issued again with the existing key; the reason says why.
        case reissued(String)
        /// The files were used as they were.
        case loaded
    }

    /// The CA certificate's SPKI pin (`sha256/…`), printed at start-up.
    public var pin: Pin { Pin(spkiOf: self.certificate) }

    /// Loads the CA in `directory`, creating it (key and certificate) on first use, and issuing the certificate
    /// again when its name constraints differ from `coverage` or it expires within 30 days.
    ///
    /// - Parameters:
    ///   - directory: Created (mode 0700) when missing.
    ///   - coverage: The names the configuration covers; IP-address entries add no DNS subtree (they are never
    ///     intercepted: the certificate excludes every IP address).
    ///   - now: The current time.
    /// - Throws: ``ProxyError`` naming the file when the directory or a file cannot be read or written, or the
    ///   key does not belong to the certificate.
    public static func load(
        directory: String,
        coverage: [PinningConfiguration.Entry.Coverage],
        now: Date = Date()
    ) throws(ProxyError) -> ProxyCertificateAuthority {
        let permitted = Self.permittedDNSDomains(coverage)
        guard !permitted.isEmpty else {
            throw ProxyError("the configuration covers no DNS name, so the local CA could vouch for nothing; add a domain entry")
        }
        if let refusal = Self.tooManySubtrees(coverage) {
            throw ProxyError(refusal)
        }
        try Self.createDirectory(directory)
        let certificatePath = URL(fileURLWithPath: directory).appendingPathComponent("ca.pem").path
        let keyPath = URL(fileURLWithPath: directory).appendingPathComponent("ca.key").path
        let key: P256.Signing.PrivateKey
        var event: Event
        if FileManager.default.fileExists(atPath: keyPath) {
            key = try Self.readKey(keyPath)
            event = .loaded
        } else {
            key = P256.Signing.PrivateKey()
            try Self.writeNew(keyPath, contents: key.pemRepresentation + "\n", mode: 0o600)
            event = .created
        }
        var certificate: Certificate?
        if event == .loaded, FileManager.default.fileExists(atPath: certificatePath) {
            let existing = try Self.readCertificate(certificatePath)
            guard existing.publicKey == Certificate.PublicKey(key.publicKey) else {
                throw ProxyError("\(keyPath) does not belong to \(certificatePath); move both away to create a new local CA")
            }
            if Self.permittedDNSDomains(of: existing) != permitted {
                event = .reissued("the configuration covers other names than the certificate permitted")
            } else if existing.notValidAfter.timeIntervalSince(now) < 30 * 86400 {
                event = .reissued("the certificate expires within 30 days")
            } else {
                certificate = existing
            }
        } else if event == .loaded {
            event = .reissued("\(certificatePath) was missing")
        }
        if certificate == nil {
            let issued = try Self.issueCertificate(key: key, permitted: permitted, now: now)
            try Self.replace(certificatePath, contents: issued.pem)
            certificate = issued.certificate
        }
        return ProxyCertificateAuthority(
            directory: directory, certificatePath: certificatePath, keyPath: keyPath, certificate: certificate!, key: key,
            permittedDNSDomains: permitted, event: event
        )
    }

    private init(
        directory: String, certificatePath: String, keyPath: String, certificate: Certificate, key: P256.Signing.PrivateKey,
        permittedDNSDomains: [String], event: Event
    ) {
        self.directory = directory
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        self.certificate = certificate
        self.key = key
        self.permittedDNSDomains = permittedDNSDomains
        self.event = event
    }

    /// The most DNS subtrees the local CA's name constraints list: 10,000.
    ///
    /// Every subtree is carried by the CA certificate each client imports and is checked against every leaf it
    /// verifies. Measured on 2026-11-28 (2-core machine under load, debug build of the proxy; curl and openssl 3.0
    /// with OpenSSL, headless Chromium with its own verifier and an NSS database): all three accept a CA of
    /// 100,000 subtrees. At 10,000 the certificate is 0.39 MB; at 100,000 it is 3.9 MB, `openssl verify` takes
    /// 0.53 s to load it (each curl run loads it again) and 15 ms more per chain verification than at 1,000
    /// (OpenSSL compares every name of the leaf with every subtree; 0.9 ms more at 10,000), and issuing it takes the
    /// proxy's start-up about 23 s. BoringSSL (`NAME_CONSTRAINTS_check`, as NIOSSL carries it) refuses a chain
    /// outright when the leaf's names × the CA's subtrees exceed 2^20, as OpenSSL does. A configuration over the bound is refused
    /// (the proxy does not start, a pin set is not applied) rather than constrained more widely: the constraints
    /// are what keeps an imported local CA from vouching for other sites. Wildcard entries (`*.fleet.example`)
    /// are one subtree each, and the names below them add none (``permittedDNSDomains(_:)``).
    public static let maximumPermittedDNSDomains = 10_000

    /// The DNS subtrees for `coverage`: the exact name, or the suffix of a wildcard, lower-cased and sorted,
    /// without a name that lies in another subtree of the list (`host-1.fleet.example` when `*.fleet.example` gives
    /// `fleet.example`): a dNSName subtree permits every name below it (RFC 5280 §4.2.1.10), so the CA permits
    /// exactly the same names without it. Nothing is widened: every subtree is a name the configuration covers.
    public static func permittedDNSDomains(_ coverage: [PinningConfiguration.Entry.Coverage]) -> [String] {
        var names = Set<String>()
        for item in coverage {
            switch item {
            case .exact(let name):
                if IPAddressText.bytes(name) == nil { names.insert(name) }
            case .oneLabel(let suffix), .anyDepth(let suffix):
                names.insert(suffix)
            }
        }
        // A name is dropped when one of its proper suffixes at a label boundary is itself in the list: linear in
        // the names' total length.
        let kept = names.filter { name in
            var rest = Substring(name)
            while let dot = rest.firstIndex(of: ".") {
                rest = rest[rest.index(after: dot)...]
                if names.contains(String(rest)) { return false }
            }
            return true
        }
        return kept.sorted()
    }

    /// The refusal for `coverage` when it needs more subtrees than ``maximumPermittedDNSDomains``, else nil: how many
    /// it needs, the bound, and the wildcard entry that would cover the most of them.
    public static func tooManySubtrees(_ coverage: [PinningConfiguration.Entry.Coverage]) -> String? {
        let permitted = Self.permittedDNSDomains(coverage)
        guard permitted.count > Self.maximumPermittedDNSDomains else { return nil }
        var parents: [Substring: Int] = [:]
        for name in permitted {
            if let dot = name.firstIndex(of: "."), name[name.index(after: dot)...].contains(".") {
                parents[name[name.index(after: dot)...], default: 0] += 1
            }
        }
        let example = parents.max { $0.value != $1.value ? $0.value < $1.value : $0.key > $1.key }
        let hint =
            example.map { "e.g. an entry \"*.\($0.key)\" (or \"**.\($0.key)\") is one subtree for the \($0.value) names below it" }
            ?? "e.g. an entry \"*.fleet.example\" is one subtree for every name below fleet.example"
        return "the local CA would need \(permitted.count) name-constraint subtrees (one per DNS name covered), more than the \(Self.maximumPermittedDNSDomains) it lists "
            + "(a larger CA certificate is megabytes for every client to import and slows every handshake); cover the names with wildcard entries, \(hint)"
    }

    static func permittedDNSDomains(of certificate: Certificate) -> [String] {
        do {
            guard let constraints = try certificate.extensions.nameConstraints else { return [] }
            return constraints.permittedDNSDomains.map { $0 }.sorted()
        } catch {
            return []
        }
    }

    // MARK: - Leaves

    /// The TLS context presenting a certificate for `host` issued by this CA (minted on first use).
    ///
    /// - Throws: ``ProxyError`` when `host` is outside the permitted subtrees (the CA must not be asked to vouch
    ///   for a name it does not cover) or NIOSSL cannot use the certificate.
    public func serverContext(for host: String) throws(ProxyError) -> NIOSSLContext {
        let name = host.lowercased()
        if let context = self.contexts.withLockedValue({ $0[name] }) { return context }
        guard self.permits(name) else {
            // At most five subtrees named: the list may hold thousands.
            let named = self.permittedDNSDomains.prefix(5).joined(separator: ", ")
            let more = self.permittedDNSDomains.count > 5 ? " and \(self.permittedDNSDomains.count - 5) more" : ""
            throw ProxyError("\(host) is outside the local CA's name constraints (\(named)\(more))")
        }
        let context: NIOSSLContext
        do {
            let leaf = try self.issueLeaf(for: name, now: Date())
            let nioLeaf = try NIOSSLCertificate(bytes: try leaf.serializeAsPEM().derBytes, format: .der)
            let nioKey = try NIOSSLPrivateKey(bytes: Array(self.leafKey.derRepresentation), format: .der)
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(nioLeaf)], privateKey: .privateKey(nioKey))
            configuration.minimumTLSVersion = .tlsv12
            // The TLS 1.3 secrets for the alert observer on the client's side (ProxyFrontHandler), nothing else.
            configuration.keyLogCallback = TLSAlertSecrets.shared.keyLogCallback(forwardingTo: nil)
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw ProxyError("cannot mint a certificate for \(host): the local CA could not sign it, or TLS could not use it (\(ConnectionFailureWords.words(error)))")
        }
        return self.contexts.withLockedValue { contexts in
            if let existing = contexts[name] { return existing }
            // Bounded: a client cannot make the proxy keep a context for every name it tries.
            if contexts.count >= 4096 { contexts.removeAll() }
            contexts[name] = context
            return context
        }
    }

    /// Whether `name` (lower case) lies in a permitted subtree.
    func permits(_ name: String) -> Bool {
        guard IPAddressText.bytes(name) == nil else { return false }
        return self.permittedDNSDomains.contains { name == $0 || name.hasSuffix("." + $0) }
    }

    private func issueLeaf(for host: String, now: Date) throws -> Certificate {
        let caKey = Certificate.PrivateKey(self.key)
        let leafPublicKey = Certificate.PublicKey(self.leafKey.publicKey)
        let notAfter = min(now.addingTimeInterval(30 * 86400), self.certificate.notValidAfter)
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            try ExtendedKeyUsage([.serverAuth])
            SubjectAlternativeNames([.dnsName(host)])
            SubjectKeyIdentifier(hash: leafPublicKey)
            if let identifier = try self.certificate.extensions.subjectKeyIdentifier?.keyIdentifier {
                AuthorityKeyIdentifier(keyIdentifier: identifier)
            }
        }
        return try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: leafPublicKey,
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: notAfter,
            issuer: self.certificate.subject,
            subject: try DistinguishedName { CommonName(host) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: caKey
        )
    }

    // MARK: - The CA certificate

    private static func issueCertificate(
        key: P256.Signing.PrivateKey,
        permitted: [String],
        now: Date
    ) throws(ProxyError) -> (certificate: Certificate, pem: String) {
        do {
            let publicKey = Certificate.PublicKey(key.publicKey)
            let name = try DistinguishedName {
                OrganizationName("swift-pinning")
                CommonName("pinning proxy local CA")
            }
            // Every IPv4 and IPv6 address excluded: without an iPAddress constraint a name-constrained CA could
            // still vouch for any IP address.
            let everyIPv4 = ASN1OctetString(contentBytes: [0, 0, 0, 0, 0, 0, 0, 0])
            let everyIPv6 = ASN1OctetString(contentBytes: ArraySlice(repeating: 0, count: 32))
            let extensions = try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                Critical(NameConstraints(permittedDNSDomains: permitted, excludedIPRanges: [everyIPv4, everyIPv6]))
                SubjectKeyIdentifier(hash: publicKey)
            }
            let certificate = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: publicKey,
                notValidBefore: now.addingTimeInterval(-3600),
                notValidAfter: now.addingTimeInterval(2 * 365 * 86400),
                issuer: name,
                subject: name,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: extensions,
                issuerPrivateKey: Certificate.PrivateKey(key)
            )
            // PEMText writes PEM in time linear in the size; swift-asn1's `pemString` is quadratic (it counts the
            // characters left before cutting each line): a CA of 20,000 subtrees (1 MB) took 52 s to encode, and
            // one of 100,000 never finished (new-user trial 3, defect 2).
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return (certificate, PEMText.encode(label: "CERTIFICATE", der: serializer.serializedBytes))
        } catch {
            throw ProxyError("cannot issue the local CA certificate: its key could not sign it")
        }
    }

    // MARK: - Files

    private static func createDirectory(_ path: String) throws(ProxyError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw ProxyError("\(path): exists and is not a directory") }
            return
        }
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ProxyError("\(path): cannot create the directory: \(error.localizedDescription)")
        }
    }

    private static func readKey(_ path: String) throws(ProxyError) -> P256.Signing.PrivateKey {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ProxyError("\(path): cannot read the local CA key: \(error.localizedDescription)")
        }
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: text)
        } catch {
            throw ProxyError("\(path): not a P-256 private key in PEM (the local CA key this proxy writes)")
        }
    }

    private static func readCertificate(_ path: String) throws(ProxyError) -> Certificate {
        do {
            let text = try String(contentsOfFile: path, encoding: .utf8)
            return try Certificate(pemEncoded: text)
        } catch {
            throw ProxyError("\(path): not a PEM certificate (the local CA certificate this proxy writes)")
        }
    }

    /// Creates `path` with `mode`, failing if it exists: the key is never overwritten.
    private static func writeNew(_ path: String, contents: String, mode: mode_t) throws(ProxyError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, mode)
        guard descriptor >= 0 else {
            throw ProxyError("\(path): cannot create the local CA key: \(SystemErrorText.text(errno))")
        }
        defer { close(descriptor) }
        let bytes = Array(contents.utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count else {
            throw ProxyError("\(path): cannot write the local CA key: \(SystemErrorText.text(errno))")
        }
    }

    /// Writes the certificate through a temporary file and a rename, so a reader never sees half of it.
    private static func replace(_ path: String, contents: String) throws(ProxyError) {
        do {
            try Data(contents.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw ProxyError("\(path): cannot write the local CA certificate: \(error.localizedDescription)")
        }
    }
}

/// Why the proxy cannot start or reload: one message in words, naming the file or option.
public struct ProxyError: Error, Sendable, CustomStringConvertible {
    /// `proxySetupFailed`: the error's stable code (for logs, metrics and JSON; the words may change). Every
    /// ProxyError is a proxy that cannot start or reload (its CA, its listener, its configuration); connection
    /// failures are ``/PinningNIO/PinningConnectionError``s with their own codes.
    public var code: String { "proxySetupFailed" }

    /// The message.
    public var message: String

    /// An error with `message`.
    public init(_ message: String) {
        self.message = message
    }

    /// The message.
    public var description: String { self.message }
}
