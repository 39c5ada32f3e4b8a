import Foundation
import Pinning
import PinningTestSupport
import SwiftASN1
import Testing
import X509

/// `pinning evaluate`'s report is built without `CertificateInfo` and prints its dates without Foundation's
/// formatter (issue 31's cold path). These tests hold the new pieces to what they replaced, byte for byte: every
/// date the report can print, and every certificate line (text fields and JSON) over generated chains, names
/// outside ASCII and validity dates at the ends of what a certificate can carry.
@Suite struct EvaluationReportCLITests {
    /// Instants on either side of each edge of the range `ReportDate` writes itself (1583-01-01 to 9999-12-31;
    /// outside it Foundation's formatter answers, Julian calendar before 1582-10-15 included), 1970, 2001, 2038,
    /// the UTCTime/GeneralizedTime change at 2050, leap days, and fractions of a second on both sides of zero.
    @Test func datesAtTheEdgesPrintAsFoundationPrintsThem() {
        let edges: [Double] = [
            -62_135_596_800, -12_219_292_801, -12_219_292_800, -12_212_553_601, -12_212_553_600, -12_212_553_599,
            -11_676_096_000, -2_208_988_800, -1, -0.5, -0.000_001, 0, 0.000_001, 0.5, 0.999_999, 1, 86_399.999,
            86_400, 951_782_400, 951_868_800, 978_307_200, 978_307_199.75, 2_147_483_647, 2_147_483_648,
            2_524_608_000, 2_524_607_999, 4_107_542_400, 4_107_456_000, 253_370_764_800, 253_402_300_799,
            253_402_300_799.999, 253_402_300_800, 253_402_300_801, 1e12,
        ]
        var dates = edges.map { Date(timeIntervalSince1970: $0) }
        // Every day of February and March in leap and common years of each century's kind.
        for year in [1600, 1700, 1900, 2000, 2024, 2100, 2400, 9996, 9999] {
            var components = DateComponents()
            components.calendar = Calendar(identifier: .gregorian)
            components.timeZone = TimeZone(identifier: "UTC")
            components.year = year
            components.month = 2
            components.day = 1
            guard let first = components.date else { continue }
            for day in 0..<60 { dates.append(first.addingTimeInterval(Double(day) * 86_400 + 43_210.25)) }
        }
        for pair in InProcessCLI.reportDates(dates) {
            #expect(pair.ours == pair.foundation)
        }
    }

    /// 20,000 instants drawn from 1500 to 10100, with fractions: the same text both ways.
    @Test func randomDatesPrintAsFoundationPrintsThem() {
        var random = SplitMix64(seed: 31_42)
        let low = -14_831_769_600.0  // 1500-01-01
        let high = 256_558_809_600.0  // 10100-01-01
        var dates: [Date] = []
        for _ in 0..<20_000 {
            let unit = Double(random.next() >> 11) / Double(1 << 53)
            dates.append(Date(timeIntervalSince1970: low + unit * (high - low)))
        }
        var differences = 0
        for pair in InProcessCLI.reportDates(dates) where pair.ours != pair.foundation {
            differences += 1
            if differences <= 5 { Issue.record("\(pair.ours) is \(pair.foundation) in Foundation's words") }
        }
        #expect(differences == 0)
    }

    /// Certificate lines for generated chains (random names, some outside ASCII, random validity windows and
    /// extensions) and for certificates minted with names in several scripts and validity dates at the ends of
    /// what a certificate holds: the same subject, issuer, dates, pin and JSON as `CertificateInfo` gave.
    @Test func certificateLinesAreWhatTheyWere() throws {
        var certificates: [Certificate] = []
        var generator = RandomChainGenerator(seed: 31_4)
        for _ in 0..<60 {
            let chain = try generator.next()
            certificates += chain.presented + chain.anchors
        }
        let utc = TimeZone(identifier: "UTC")!
        func instant(_ year: Int, _ month: Int, _ day: Int, _ hour: Int = 0, _ minute: Int = 0, _ second: Int = 0) -> Date {
            var components = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
            components.calendar = Calendar(identifier: .gregorian)
            components.timeZone = utc
            return components.date!
        }
        let windows: [(Date, Date)] = [
            (instant(1950, 1, 1), instant(2049, 12, 31, 23, 59, 59)),
            (instant(1949, 12, 31, 23, 59, 59), instant(2050, 1, 1)),
            (instant(1600, 2, 29, 12, 30, 45), instant(9999, 12, 31, 23, 59, 59)),
            (instant(2000, 2, 29), instant(2100, 3, 1)),
        ]
        let names = ["Zürich Ω Root", "東京 中間 CA", "Ünïcödé \"quoted\", +plus; <angle> #hash", "Δ leaf.example"]
        for (index, window) in windows.enumerated() {
            let root = try TestPKI.root(names[index % names.count], notValidBefore: window.0, notValidAfter: window.1)
            let intermediate = try TestPKI.intermediate(
                names[(index + 1) % names.count], issuer: root, notValidBefore: window.0, notValidAfter: window.1)
            let leaf = try TestPKI.leaf(
                names[(index + 3) % names.count], issuer: intermediate, dnsNames: ["leaf.example"], notValidBefore: window.0,
                notValidAfter: window.1)
            certificates += [leaf.certificate, intermediate.certificate, root.certificate]
        }
        let lines = try InProcessCLI.reportLines(certificates)
        #expect(lines.count == certificates.count)
        #expect(lines.count > 200)
        for line in lines {
            #expect(line.ours == line.before)
        }
    }

    /// Names of every shape: empty, one attribute, several relative names, several attributes in one relative name
    /// (joined by `+`), the attribute types swift-certificates names and one it does not (a dotted OID), values in
    /// each string type, outside ASCII, with the characters RFC 4514 escapes, and a value that is not a string.
    @Test func namesAreWhatSwiftCertificatesWrites() throws {
        typealias Attribute = RelativeDistinguishedName.Attribute
        let values = ["bench.example", "Zürich Ω", "東京", "a,b+c=d\\e\"f<g>h;i#j", " leading and trailing ", ""]
        let types: [ASN1ObjectIdentifier] = [
            .RDNAttributeType.commonName, .RDNAttributeType.countryName, .RDNAttributeType.organizationName,
            .RDNAttributeType.organizationalUnitName, .RDNAttributeType.localityName, .RDNAttributeType.stateOrProvinceName,
            .RDNAttributeType.streetAddress, .RDNAttributeType.domainComponent, .RDNAttributeType.emailAddress,
            [2, 5, 4, 5], [1, 2, 3, 4, 5, 6],
        ]
        var attributes: [Attribute] = []
        for (index, type) in types.enumerated() {
            let value = values[index % values.count]
            attributes.append(Attribute(type: type, utf8String: value))
            attributes.append(try Attribute(type: type, printableString: "Printable \(index)"))
            attributes.append(try Attribute(type: type, ia5String: "ia5-\(index)@example.com"))
        }
        // A value that is no string at all: an INTEGER.
        attributes.append(Attribute(type: .RDNAttributeType.commonName, value: .init(asn1Any: try ASN1Any(erasing: 4_242))))
        var names: [DistinguishedName] = [DistinguishedName(), DistinguishedName([RelativeDistinguishedName()])]
        for (index, attribute) in attributes.enumerated() {
            names.append(DistinguishedName([RelativeDistinguishedName(attribute)]))
            let next = attributes[(index + 1) % attributes.count]
            let third = attributes[(index + 5) % attributes.count]
            names.append(DistinguishedName([RelativeDistinguishedName([attribute, next]), RelativeDistinguishedName(third)]))
            names.append(
                DistinguishedName([
                    RelativeDistinguishedName(third), RelativeDistinguishedName(attribute), RelativeDistinguishedName([next, third, attribute]),
                ]))
        }
        #expect(names.count > 100)
        for pair in InProcessCLI.reportNames(names) {
            #expect(pair.ours == pair.x509)
        }
    }
}
