package import Foundation
import SwiftASN1
package import X509

extension Certificate {
    /// The `http://` and `https://` URLs of the certificate's CRL distribution points (RFC 5280 §4.2.1.13), in
    /// the order listed; empty when it has none.
    ///
    /// Only distribution points that name a full URI and carry neither `reasons` nor `cRLIssuer` are listed: a
    /// partitioned or indirect CRL is refused by the revocation stage anyway (see ``RevocationPolicy``), so
    /// fetching one would only cost a download. LDAP and other schemes are skipped. A malformed extension yields
    /// no URL (the status then stays unknown, which hard mode refuses); it is never guessed at.
    package var crlDistributionPointURLs: [URL] {
        guard let value = self.extensions.first(where: { $0.oid == Self.crlDistributionPointsOID })?.value else { return [] }
        do {
            return try Self.distributionPointURLs(Array(value))
        } catch {
            return []
        }
    }

    static let crlDistributionPointsOID: ASN1ObjectIdentifier = [2, 5, 29, 31]

    /// `CRLDistributionPoints ::= SEQUENCE OF DistributionPoint`; `DistributionPoint ::= SEQUENCE {
    /// distributionPoint [0] DistributionPointName OPTIONAL, reasons [1] OPTIONAL, cRLIssuer [2] OPTIONAL }`;
    /// `DistributionPointName ::= CHOICE { fullName [0] GeneralNames, … }`; a URI is GeneralName `[6] IA5String`.
    static func distributionPointURLs(_ der: [UInt8]) throws -> [URL] {
        let root = try DER.parse(der)
        guard root.identifier == .sequence, case .constructed(let points) = root.content else { return [] }
        var urls: [URL] = []
        for point in points {
            guard point.identifier == .sequence, case .constructed(let fields) = point.content else { continue }
            let parts = Array(fields)
            let scoped = parts.contains {
                $0.identifier == ASN1Identifier(tagWithNumber: 1, tagClass: .contextSpecific)
                    || $0.identifier == ASN1Identifier(tagWithNumber: 2, tagClass: .contextSpecific)
            }
            guard !scoped,
                let name = parts.first(where: { $0.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) }),
                case .constructed(let choices) = name.content,
                let fullName = Array(choices).first(where: { $0.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) }),
                case .constructed(let generalNames) = fullName.content
            else { continue }
            for general in generalNames where general.identifier == ASN1Identifier(tagWithNumber: 6, tagClass: .contextSpecific) {
                guard case .primitive(let bytes) = general.content, bytes.allSatisfy({ $0 >= 0x21 && $0 < 0x7F }) else { continue }
                let text = String(decoding: bytes, as: UTF8.self)
                let lower = text.lowercased()
                guard lower.hasPrefix("http://") || lower.hasPrefix("https://"), let url = URL(string: text), url.host != nil else { continue }
                urls.append(url)
            }
        }
        return urls
    }
}
