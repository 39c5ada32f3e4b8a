package import Foundation
public import X509

/// What the revocation stage found for one path: the policy's mode and scope and one status per certificate
/// in scope, leaf first. Carried by ``TrustedChain/revocation`` and ``TrustFailure/revocation``.
public struct RevocationReport: Sendable, Hashable {
    /// The mode the statuses were judged in.
    package internal(set) var mode: RevocationPolicy.Mode
    /// The certificates that were in scope.
    package internal(set) var scope: RevocationPolicy.Scope
    /// One status per certificate in scope, leaf first. Empty when the path is only a trust anchor.
    public internal(set) var certificates: [CertificateRevocationStatus]
    /// Where this report holds: every CRL current.
    var window: ValidityWindow?

    /// The first revoked certificate, if any.
    package var firstRevoked: CertificateRevocationStatus? {
        self.certificates.first { $0.status == .revoked }
    }

    /// The certificates whose status is unknown.
    package var unknown: [CertificateRevocationStatus] {
        self.certificates.filter { $0.status == .unknown }
    }
}

/// The revocation status of one certificate of a path.
public struct CertificateRevocationStatus: Sendable, Hashable {
    /// The verdict for one certificate.
    public enum Status: String, Sendable, Hashable {
        /// A usable CRL from its issuer does not list it.
        case good
        /// A usable CRL from its issuer lists it.
        case revoked
        /// No usable CRL from its issuer was available (why is in the ``TrustFailure/reason`` of a hard-mode
        /// refusal, or in ``TrustedChain/warnings`` in soft mode).
        case unknown
    }

    /// Position on the path (0 is the leaf).
    package internal(set) var index: Int
    /// The certificate.
    public internal(set) var certificate: Certificate
    /// The certificate's subject, e.g. `CN=device-7`.
    package var subject: String { self.certificate.subject.description }
    /// The serial number in hex, as `pinning inspect` prints it.
    package var serialNumber: String { CertificateInfo.serialHex(self.certificate.serialNumber.bytes) }
    /// The status.
    public internal(set) var status: Status
    /// For ``Status/revoked``: the CRL entry's reason code, nil when the entry has none.
    package internal(set) var revocationReason: CertificateRevocationList.Reason?
    /// For ``Status/revoked``: when the CRL says it was revoked.
    package internal(set) var revocationDate: Date?
    /// For ``Status/unknown``: why no CRL could decide, in words (every candidate's problem).
    package internal(set) var unknownReason: String?
    /// The CRL that decided (``Status/good`` or ``Status/revoked``).
    public internal(set) var crl: CertificateRevocationList?

    /// The CRL that decided, as a person reads it: its issuer and CRL number.
    package var crlDescription: String? {
        self.crl.map(Self.describe)
    }

    /// `CN=Fleet CA, CRL number 4`: the number in decimal when it fits 64 bits (as `openssl crl -text` prints
    /// small ones), else in hex with `0x`.
    static func describe(_ crl: CertificateRevocationList) -> String {
        guard let bytes = crl.crlNumber else { return "\(crl.issuer), CRL number none" }
        let significant = bytes.drop { $0 == 0 }
        let number: String
        if significant.count <= 8 {
            number = String(significant.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        } else {
            number = "0x" + CertificateInfo.serialHex(bytes[...])
        }
        return "\(crl.issuer), CRL number \(number)"
    }

    /// For ``Status/revoked``: the reason code's name (`keyCompromise`), `unspecified` when the entry has none;
    /// for ``Status/unknown``: why. Nil for ``Status/good``.
    package var reason: String? {
        switch self.status {
        case .good: return nil
        case .revoked: return Self.reasonName(self.revocationReason)
        case .unknown: return self.unknownReason
        }
    }

    static func reasonName(_ reason: CertificateRevocationList.Reason?) -> String {
        reason?.name ?? "unspecified"
    }

    /// One line: `certificate 0 (CN=device-7, serial 1a2b): revoked on … (keyCompromise) by CN=Fleet CA, CRL number 4`.
    package var summary: String {
        let who = "certificate \(self.index) (\(self.subject), serial \(self.serialNumber))"
        switch self.status {
        case .good:
            return "\(who): not revoked according to \(self.crlDescription ?? "?")"
        case .revoked:
            let when = self.revocationDate.map { " on \(RFC3339.format($0))" } ?? ""
            return "\(who): revoked\(when) (\(self.reason ?? "unspecified")) according to \(self.crlDescription ?? "?")"
        case .unknown:
            return "\(who): revocation status unknown: \(self.unknownReason ?? "no usable CRL")"
        }
    }
}
