import Foundation
import Pinning
import X509

/// What `pinning evaluate` prints: the verdict, the reason, the presented chain with pins and the path.
struct EvaluationReport: TextReport {
    /// One certificate of a chain or path: the facts the report prints, each computed on its own (not through
    /// ``CertificateInfo``, which also checks a self-signature, hashes with SHA-1 and reads every extension, none
    /// of which the report shows). Its text and JSON are the ones ``CertificateInfo``'s fields gave
    /// (`EvaluationReportTests` compares them over generated chains).
    struct CertificateLine: Encodable {
        var index: Int
        var subject: String
        var issuer: String
        var notValidBefore: Date
        var notValidAfter: Date
        var spkiPin: String
        var onValidatedPath: Bool?
        /// The certificate, for `sha256Fingerprint`, which only `--json` prints: hashed while encoding.
        var certificate: Certificate

        init(index: Int, certificate: Certificate, onValidatedPath: Bool?) {
            self.index = index
            self.subject = Self.name(certificate.subject)
            self.issuer = Self.name(certificate.issuer)
            self.notValidBefore = certificate.notValidBefore
            self.notValidAfter = certificate.notValidAfter
            self.spkiPin = Pin(spkiOf: certificate).description
            self.onValidatedPath = onValidatedPath
            self.certificate = certificate
        }

        /// `name` as swift-certificates describes it (`String(describing:)`, which ``CertificateInfo`` uses): the
        /// relative names from the last to the first, joined by `,`, each one's attributes by `+`. Written as plain
        /// loops over each attribute's own `description`: `String(describing:)` first asks the runtime whether each
        /// type is `TextOutputStreamable` (a scan of every protocol conformance record of the binary, per type, on
        /// first use), and swift-certificates' `reversed().lazy.map(…).joined(…)` instantiates generic types at run
        /// time; both were ~3% of a one-chain `pinning evaluate` (issue 31).
        static func name(_ name: DistinguishedName) -> String {
            let relativeNames = Array(name)
            var text = ""
            var index = relativeNames.count - 1
            while index >= 0 {
                if index < relativeNames.count - 1 { text += "," }
                var first = true
                for attribute in relativeNames[index] {
                    if !first { text += "+" }
                    text += attribute.description
                    first = false
                }
                index -= 1
            }
            return text
        }

        /// SHA-256 of the DER certificate, uppercase hex with colons (``CertificateInfo/sha256Fingerprint``).
        var sha256Fingerprint: String {
            CertificateInfo.sha256Fingerprint(of: self.certificate)
        }

        enum CodingKeys: String, CodingKey {
            case index, subject, issuer, notValidBefore, notValidAfter, spkiPin, sha256Fingerprint, onValidatedPath
        }

        /// The keys and values the synthesized encoding of these fields and `sha256Fingerprint` gave
        /// (`onValidatedPath` absent when nil).
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(self.index, forKey: .index)
            try container.encode(self.subject, forKey: .subject)
            try container.encode(self.issuer, forKey: .issuer)
            try container.encode(self.notValidBefore, forKey: .notValidBefore)
            try container.encode(self.notValidAfter, forKey: .notValidAfter)
            try container.encode(self.spkiPin, forKey: .spkiPin)
            try container.encode(self.sha256Fingerprint, forKey: .sha256Fingerprint)
            try container.encodeIfPresent(self.onValidatedPath, forKey: .onValidatedPath)
        }
    }

    /// `revocation` in --json (issue 14): whether CRLs were checked, how, and each certificate's status.
    struct RevocationSummary: Encodable {
        struct Line: Encodable {
            var subject: String
            var serial: String
            var status: String
            var reason: String?
            var revocationDate: Date?
            var crl: String?
        }

        var checked: Bool
        var mode: String?
        var scope: String?
        var certificates: [Line]

        static let notChecked = RevocationSummary(checked: false, certificates: [])

        /// From the policy in force and the statuses the verdict carries (none when the path failed before
        /// the revocation stage).
        init(policy: RevocationPolicy?, report: RevocationReport?) {
            guard let policy else {
                self.init(checked: false, certificates: [])
                return
            }
            self.init(
                checked: true,
                mode: (report?.mode ?? policy.mode).rawValue,
                scope: (report?.scope ?? policy.scope).rawValue,
                certificates: (report?.certificates ?? []).map { status in
                    Line(
                        subject: status.subject,
                        serial: status.serialNumber,
                        status: status.status.rawValue,
                        reason: status.reason,
                        revocationDate: status.revocationDate,
                        crl: status.crlDescription
                    )
                }
            )
        }

        private init(checked: Bool, mode: String? = nil, scope: String? = nil, certificates: [Line]) {
            self.checked = checked
            self.mode = mode
            self.scope = scope
            self.certificates = certificates
        }
    }

    var trusted: Bool
    var reason: String
    var code: String?
    var host: String?
    var mode: String
    var allowInvalidCertificates: Bool
    var validatesDomainName: Bool
    var validationTime: Date
    var basis: String?
    var warnings: [String]
    var details: [String]
    var leafNames: [String]
    var expectedPins: [String]
    var presentedChain: [CertificateLine]
    var validatedPath: [CertificateLine]
    var failedPath: [CertificateLine]
    var failedCertificateIndex: Int?
    var revocation: RevocationSummary = .notChecked

    /// Not encoded: the failure's own multi-line text.
    private var failureText: String?

    enum CodingKeys: String, CodingKey {
        case trusted, reason, code, host, mode, allowInvalidCertificates, validatesDomainName, validationTime, basis,
            warnings, details, leafNames, expectedPins, presentedChain, validatedPath, failedPath, failedCertificateIndex,
            revocation
    }

    init(verdict: TrustEvaluation, trust: ServerTrust, policy: SecurityPolicy, host: String?) {
        self.init(
            verdict: verdict,
            trust: trust,
            mode: Self.modeName(policy.pinningMode),
            allowInvalidCertificates: policy.allowInvalidCertificates,
            validatesDomainName: policy.validatesDomainName,
            expectedPins: policy.pinningMode == .none ? [] : policy.acceptedPins,
            host: host
        )
    }

    /// For `--config`: mode `configuration`, never allowing invalid certificates, always checking the name.
    init(verdict: TrustEvaluation, trust: ServerTrust, mode: String, expectedPins: [Pin], host: String?) {
        self.init(
            verdict: verdict,
            trust: trust,
            mode: mode,
            allowInvalidCertificates: false,
            validatesDomainName: true,
            expectedPins: expectedPins,
            host: host
        )
    }

    private init(
        verdict: TrustEvaluation,
        trust: ServerTrust,
        mode: String,
        allowInvalidCertificates: Bool,
        validatesDomainName: Bool,
        expectedPins: [Pin],
        host: String?
    ) {
        self.host = host
        self.mode = mode
        self.allowInvalidCertificates = allowInvalidCertificates
        self.validatesDomainName = validatesDomainName
        self.expectedPins = expectedPins.map(\.description)
        switch verdict {
        case .trusted(let chain):
            let path = chain.path
            let onPath = Set(path.map(\.derBytes))
            self.trusted = true
            self.reason = ""
            self.basis = chain.basis.description
            self.warnings = chain.warnings
            self.details = []
            self.leafNames = []
            self.validationTime = trust.validationTime ?? Date()
            self.presentedChain = Self.lines(trust.certificates, onPath: chain.validatedChain == nil ? nil : onPath)
            self.validatedPath = Self.lines(path, onPath: nil)
            self.failedPath = []
            self.revocation = RevocationSummary(policy: trust.revocation, report: chain.revocation)
        case .untrusted(let failure):
            let onPath = failure.validatedPath.map { Set($0.map(\.derBytes)) } ?? []
            self.trusted = false
            self.reason = failure.reason
            self.code = failure.code.description
            self.warnings = []
            self.details = failure.details
            self.leafNames = failure.leafNames
            self.validationTime = failure.validationTime
            self.presentedChain = Self.lines(trust.certificates, onPath: onPath)
            self.validatedPath = Self.lines(failure.validatedPath ?? [], onPath: nil)
            self.failedPath = failure.validatedPath == nil ? Self.lines(failure.failedPath ?? [], onPath: nil) : []
            self.failedCertificateIndex = failure.failedCertificateIndex
            self.failureText = failure.multilineDescription
            self.revocation = RevocationSummary(policy: trust.revocation, report: failure.revocation)
        }
    }

    /// The mode as the `--mode` flag spells it.
    static func modeName(_ mode: SecurityPolicy.PinningMode) -> String {
        switch mode {
        case .none: return "none"
        case .publicKey: return "public-key"
        case .certificate: return "certificate"
        }
    }

    private static func lines(_ certificates: [Certificate], onPath: Set<[UInt8]>?) -> [CertificateLine] {
        var lines: [CertificateLine] = []
        lines.reserveCapacity(certificates.count)
        for (index, certificate) in certificates.enumerated() {
            lines.append(CertificateLine(index: index, certificate: certificate, onValidatedPath: onPath.map { $0.contains(certificate.derBytes) }))
        }
        return lines
    }

    var humanReadable: String {
        var out: [String] = []
        let policyLine =
            "mode \(self.mode)"
            + (self.allowInvalidCertificates ? ", allowInvalidCertificates" : "")
            + (self.validatesDomainName ? "" : ", no domain-name validation")
        if self.trusted {
            out.append("TRUSTED: \(self.host ?? "(no host checked)") (\(policyLine); basis \(self.basis ?? "?"))")
            for warning in self.warnings { out.append("  warning: \(warning)") }
        } else {
            out.append("NOT TRUSTED: \(self.host ?? "(no host checked)") (\(policyLine))")
            out.append("  reason: [\(self.code ?? "?")] \(self.reason)")
            for detail in self.details { out.append("  \(detail)") }
            if !self.leafNames.isEmpty { out.append("  leaf names: \(self.leafNames.joined(separator: ", "))") }
            if !self.expectedPins.isEmpty {
                out.append("  expected pins:")
                for pin in self.expectedPins { out.append("    \(pin)") }
            }
        }
        out.append("validated at \(ReportDate.format(self.validationTime))")
        if self.revocation.checked {
            out.append("revocation: mode \(self.revocation.mode ?? "?"), scope \(self.revocation.scope ?? "?")")
            for line in self.revocation.certificates {
                var text = "  \(line.status): \(line.subject) (serial \(line.serial))"
                if let date = line.revocationDate { text += " revoked \(ReportDate.format(date))" }
                if let reason = line.reason { text += " [\(reason)]" }
                if let crl = line.crl { text += " by \(crl)" }
                out.append(text)
            }
        }
        out.append("presented chain:")
        for line in self.presentedChain {
            let marker = line.onValidatedPath == true ? "  (on validated path)" : ""
            out.append("  [\(line.index)] \(line.subject)\(marker)")
            out.append("      issuer  \(line.issuer)")
            out.append("      valid   \(ReportDate.format(line.notValidBefore)) to \(ReportDate.format(line.notValidAfter))")
            out.append("      pin     \(line.spkiPin)")
        }
        if !self.validatedPath.isEmpty {
            out.append(self.trusted && self.basis != "validatedPath" ? "signature-linked path:" : "validated path:")
            for line in self.validatedPath { out.append("  [\(line.index)] \(line.subject)  \(line.spkiPin)") }
        } else if !self.failedPath.isEmpty {
            out.append("refused path (leaf to anchor; every check before the failing one passed):")
            for line in self.failedPath {
                let marker = line.index == self.failedCertificateIndex ? "  <- fails here" : ""
                out.append("  [\(line.index)] \(line.subject)  \(line.spkiPin)\(marker)")
            }
        } else {
            out.append("validated path: none")
        }
        // Names, reasons and warnings quote the certificates, which a server (or whoever wrote the file) chose: each
        // line is escaped (VisibleText: control, format and bidi characters as `\u{…}`, and a backslash
        // only where it would read as an escape or end the line), so none
        // reaches the terminal raw and no name can forge a line.
        return out.map(VisibleText.escaped).joined(separator: "\n")
    }
}
