import Crypto
public import Foundation
import Pinning
import X509

/// One certificate of a reported chain: its PEM as sent and the SPKI pin computed here (never taken from the
/// report), with its names for the dashboard.
public struct ReportedCertificate: Sendable, Hashable, Codable {
    /// The SHA-256 SPKI pin, base64.
    public var pin: String
    /// The subject distinguished name (RFC 4514 text).
    public var subject: String
    /// The issuer distinguished name.
    public var issuer: String
    /// The certificate, PEM, as the report carried it.
    public var pem: String
}

/// A failure report after parsing: every format's keys mapped onto one set of columns.
public struct NormalizedReport: Sendable, Hashable {
    /// The shape the report came in.
    public enum Format: String, Sendable, Hashable {
        /// RFC 7469 §3 (HPKP), as browsers sent it: no `validation-result`, no app keys.
        case rfc7469
        /// TrustKit (`TSKPinFailureReport`): app keys, `trustkit-version`, an integer `validation-result`.
        case trustkit
        /// swift-pinning's `PinFailureReport`: RFC 7469's keys plus a `validation-result` name.
        case pinning
    }

    public var format: Format
    /// `date-time`: when the client saw the failure (the client's clock).
    public var dateTime: Date?
    public var host: String
    public var port: Int?
    public var notedHost: String?
    public var includeSubdomains: Bool?
    /// True when the client blocked the connection, false for report-only, nil when the report does not say.
    public var enforced: Bool?
    public var result: String
    public var appId: String?
    public var appVersion: String?
    public var platform: String?
    public var platformVersion: String?
    public var libraryVersion: String?
    public var pinsetVersion: String?
    /// `effective-expiration-date` or TrustKit's `known-pins-expiration-date`, as sent.
    public var pinsExpiration: String?
    /// SHA-256 of TrustKit's `app-vendor-id` (a per-device identifier, never stored in clear).
    public var deviceHash: String?
    public var servedChain: [ReportedCertificate]
    public var validatedChain: [ReportedCertificate]
    /// The known pins, base64 (the `pin-sha256="…"` wrapper removed).
    public var knownPins: [String]
    /// The report's JSON text exactly as the client sent it (its bytes inside the body, without the whitespace
    /// around it and, for an array, without the commas between reports).
    public var raw: String

    /// The served chain's pins, leaf first.
    public var servedPins: [String] { self.servedChain.map(\.pin) }
    /// The validated chain's pins, leaf first.
    public var validatedPins: [String] { self.validatedChain.map(\.pin) }

    /// What makes two reports "identical" for de-duplication: every normalised field except the client's
    /// `date-time` (TrustKit's own limiter compares the noted host, host, port, chain, pins and result the
    /// same way), plus the source, so that the same failure seen by two devices stays two rows and the
    /// dashboard can count distinct sources.
    public func fingerprint(source: String) -> String {
        var hasher = SHA256()
        func add(_ text: String?) {
            // Length-prefixed, so that no two different field lists hash the same bytes.
            let bytes = Array((text ?? "\u{1}<nil>").utf8)
            var length = UInt32(bytes.count).bigEndian
            withUnsafeBytes(of: &length) { hasher.update(bufferPointer: $0) }
            hasher.update(data: bytes)
        }
        add(source)
        add(self.format.rawValue)
        add(self.host)
        add(self.port.map(String.init))
        add(self.notedHost)
        add(self.includeSubdomains.map { $0 ? "1" : "0" })
        add(self.enforced.map { $0 ? "1" : "0" })
        add(self.result)
        for value in [self.appId, self.appVersion, self.platform, self.platformVersion, self.libraryVersion, self.pinsetVersion, self.pinsExpiration, self.deviceHash] {
            add(value)
        }
        add(self.servedPins.joined(separator: ","))
        add(self.validatedPins.joined(separator: ","))
        add(self.knownPins.joined(separator: ","))
        return Data(hasher.finalize()).base64EncodedString()
    }
}

/// Why a report was refused: one line, naming the key (a `400` answer's body).
public struct ReportRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var description: String { self.message }
    init(_ message: String) { self.message = message }
}

/// Reads `POST /reports` bodies: one report object or an array of them, in RFC 7469 §3's, TrustKit's or
/// swift-pinning's shape.
///
/// Every value is attacker-controlled. The body's size is capped before this runs (``CollectorLimits``); here each
/// string, chain and array has a cap of its own, every certificate is parsed by swift-certificates (through the
/// core's `CertificateLoader`) and its pin computed here, and a key of the wrong type is refused with its name.
/// Keys this parser does not know are kept in `raw` only (and not decoded: ``ReportBody``).
public struct ReportParser: Sendable {
    /// The most reports one body may carry.
    public var maximumReportsPerBody = 1000
    /// The most certificates a chain may have (the core's own cap on presented chains is of the same order).
    public var maximumChainLength = 16
    /// The most known pins a report may list.
    public var maximumKnownPins = 64
    /// The longest text field, in UTF-8 bytes (a PEM certificate is a chain element, not a text field).
    public var maximumFieldBytes = 1024
    /// The longest PEM certificate, in UTF-8 bytes.
    public var maximumCertificateBytes = 16 * 1024

    public init() {}

    /// Parses a body.
    ///
    /// - Throws: ``ReportRefusal`` naming the first problem (and the report's index when the body is an array).
    public func parse(_ body: [UInt8]) throws(ReportRefusal) -> [NormalizedReport] {
        // RFC 8259 §8.1: JSON between systems is UTF-8, where a NUL byte cannot occur (a string writes it
        // `\u0000`). Foundation's decoder would also read UTF-16 and UTF-32, whose text has NULs beside every ASCII
        // character; `raw` keeps the bytes as sent and the tables hold UTF-8, so such a body is refused here.
        if body.contains(0) {
            throw ReportRefusal("the body is not UTF-8 JSON: it contains a NUL byte (UTF-16 or UTF-32 are not accepted)")
        }
        let document: ReportBody
        do {
            document = try JSONDecoder().decode(ReportBody.self, from: Data(body))
        } catch {
            throw ReportRefusal(Self.shapeProblem(body) ?? Self.jsonProblem(error))
        }
        switch document {
        case .object(let element):
            return [try self.report(element, label: "the report", raw: try Self.texts(of: body, count: 1)[0])]
        case .array(let elements):
            guard !elements.isEmpty else { throw ReportRefusal("the body is an empty array: send one report or an array of reports") }
            guard elements.count <= self.maximumReportsPerBody else {
                throw ReportRefusal("the body has \(elements.count) reports; at most \(self.maximumReportsPerBody) are accepted in one request")
            }
            let texts = try Self.texts(of: body, count: elements.count)
            var reports: [NormalizedReport] = []
            reports.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() {
                reports.append(try self.report(element, label: "report [\(index)]", raw: texts[index]))
            }
            return reports
        case .other(let value):
            throw ReportRefusal("the body is \(value.typeName), not a report object or an array of them")
        }
    }

    /// Each report's JSON text exactly as sent (``ReportText``), `count` of them, as the decoder found.
    private static func texts(of body: [UInt8], count: Int) throws(ReportRefusal) -> [String] {
        guard let ranges = ReportText.ranges(in: body), ranges.count == count else {
            // Not reached for a UTF-8 body the decoder accepted (the NUL check before it turns away UTF-16 and
            // UTF-32); if the two ever disagree, the body is refused rather than stored with the wrong text.
            throw ReportRefusal("the body's reports could not be delimited; send UTF-8 JSON")
        }
        // The decoder has validated the bytes as UTF-8, so decoding them repairs nothing.
        return ranges.map { String(decoding: body[$0], as: UTF8.self) }
    }

    /// Why Foundation's decoder refused `body`, in our words, where its own are generic ("The given data was not
    /// valid JSON." for an empty body, for bytes that are not UTF-8 and for deep nesting): nil when none of these is
    /// the reason. Run only after the decoder refused, so a body it accepts costs no second pass.
    static func shapeProblem(_ body: [UInt8]) -> String? {
        guard body.contains(where: { !Self.isJSONWhitespace($0) }) else {
            return body.isEmpty ? "the body is empty: send one report object or an array of them" : "the body is only whitespace: send one report object or an array of them"
        }
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = body.makeIterator()
        var offset = 0
        var depth = 0
        var deepest = 0
        var strings = JSONStrings()
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                if encoded.count == 1, let byte = encoded.first, strings.outside(byte) {
                    if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") {
                        depth += 1
                        deepest = max(deepest, depth)
                    } else if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") {
                        depth -= 1
                    }
                }
                offset += encoded.count
            case .error:
                return "the body is not UTF-8: the byte at offset \(offset) does not begin a UTF-8 character (RFC 8259 §8.1: JSON between systems is UTF-8)"
            case .emptyInput:
                // A report is three levels deep (an array of objects holding arrays); Foundation stops at 512.
                if deepest > Self.nestingReported {
                    return "the body nests arrays and objects \(deepest) deep; a report is three levels deep"
                }
                if strings.inside {
                    return "the body is not valid JSON: it ends inside a string (cut short?)"
                }
                if depth > 0 {
                    return "the body is not valid JSON: it ends with \(depth) \(depth == 1 ? "array or object" : "arrays or objects") not closed (cut short?)"
                }
                return nil
            }
        }
    }

    /// Nesting beyond which a refused body is said to be refused for its depth (Foundation's decoder stops at 512;
    /// any body nesting this deep is far from a report, whatever else is wrong with it).
    static let nestingReported = 256

    private static func isJSONWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func jsonProblem(_ error: any Error) -> String {
        // DecodingError's context names Foundation's reason ("Unexpected character … around line 1, column 3",
        // "Invalid UTF-8 …"); its debug text stays out of the answer, the reason in words does not.
        if case DecodingError.dataCorrupted(let context) = error {
            let reason = (context.underlyingError as? NSError)?.userInfo[NSDebugDescriptionErrorKey] as? String ?? context.debugDescription
            // Foundation's generic sentence says nothing the first words do not.
            guard reason != "The given data was not valid JSON." else { return "the body is not valid JSON" }
            return "the body is not valid JSON: " + Self.oneLine(reason, limit: 160)
        }
        return "the body is not valid JSON"
    }

    static func oneLine(_ text: String, limit: Int) -> String {
        let flat = String(text.unicodeScalars.map { CharacterSet.controlCharacters.contains($0) ? " " : Character($0) })
        return flat.count > limit ? String(flat.prefix(limit)) + "…" : flat
    }

    private func report(_ element: ReportFields, label: String, raw: String) throws(ReportRefusal) -> NormalizedReport {
        let fields: [String: JSONValue]
        switch element {
        case .object(let known): fields = known
        case .other(let value): throw ReportRefusal("\(label) is \(value.typeName), not an object")
        }
        let reader = FieldReader(fields: fields, label: label, maximumFieldBytes: self.maximumFieldBytes)

        let isTrustKit =
            fields["trustkit-version"] != nil || fields["app-bundle-id"] != nil
            || {
                if case .integer = fields["validation-result"] { return true }
                return false
            }()
        let format: NormalizedReport.Format = isTrustKit ? .trustkit : (fields["validation-result"] != nil ? .pinning : .rfc7469)

        guard let hostText = try reader.string("hostname"), !hostText.isEmpty else {
            throw ReportRefusal("\(label) has no `hostname`")
        }
        let host = try Self.hostName(hostText, key: "hostname", label: label)
        var port: Int?
        if fields["port"]?.isIntegerOutOfRange == true {
            throw ReportRefusal("\(label): `port` is an integer out of range, not a TCP port (0-65535)")
        }
        if let number = try reader.integer("port") {
            guard (0...65535).contains(number) else { throw ReportRefusal("\(label): `port` \(number) is not a TCP port (0-65535)") }
            port = Int(number)
        }
        var dateTime: Date?
        if let text = try reader.string("date-time") {
            do {
                dateTime = try RFC3339.read(text)
            } catch {
                throw ReportRefusal("\(label): `date-time` is not an RFC 3339 date-time: \(error.description)")
            }
        }

        let result: String
        switch fields["validation-result"] {
        case nil, .null?:
            // RFC 7469 §3: a report is sent on a pin validation failure, so an HPKP report is a pin mismatch.
            result = "pinMismatch"
        case .integer(let code)?:
            result = Self.trustKitResult(code)
        case let value? where value.isIntegerOutOfRange:
            throw ReportRefusal("\(label): `validation-result` is an integer out of range, not a TrustKit result code")
        case .string?:
            result = try reader.string("validation-result") ?? "pinMismatch"
        case let other?:
            throw ReportRefusal("\(label): `validation-result` is \(other.typeName), not a string or an integer")
        }

        var enforced = try reader.bool("enforce-pinning")
        if enforced == nil, let reportOnly = try reader.bool("report-only") {
            enforced = !reportOnly
        }

        let vendor = try reader.string("app-vendor-id")
        let deviceHash = vendor.map { Data(SHA256.hash(data: Array($0.utf8))).base64EncodedString() }

        // An empty `noted-hostname` is kept as sent (it names no host to normalise).
        var notedHost = try reader.string("noted-hostname")
        if let text = notedHost, !text.isEmpty {
            notedHost = try Self.notedHostName(text, label: label)
        }

        var libraryVersion = try reader.string("library-version")
        if let version = try reader.string("trustkit-version") { libraryVersion = "TrustKit " + version }

        return NormalizedReport(
            format: format,
            dateTime: dateTime,
            host: host,
            port: port,
            notedHost: notedHost,
            includeSubdomains: try reader.bool("include-subdomains"),
            enforced: enforced,
            result: result,
            appId: try reader.firstString("app-bundle-id", "app-id"),
            appVersion: try reader.string("app-version"),
            platform: try reader.string("app-platform"),
            platformVersion: try reader.string("app-platform-version"),
            libraryVersion: libraryVersion,
            pinsetVersion: try reader.versionText("pinset-version"),
            pinsExpiration: try reader.firstString("effective-expiration-date", "known-pins-expiration-date"),
            deviceHash: deviceHash,
            servedChain: try self.chain(reader, "served-certificate-chain"),
            validatedChain: try self.chain(reader, "validated-certificate-chain"),
            knownPins: try self.knownPins(reader),
            raw: raw
        )
    }

    /// `text` in the one form every host is stored and looked up in (``/Pinning/PeerName/canonical``, the form
    /// `pinning check` and certificates use): lower-case, A-labels for an internationalised name, no trailing dot, an
    /// IP address in its canonical text. So `例え.テスト` and `xn--r8jz45g.xn--zckzah`, `EXAMPLE.com.` and
    /// `example.com` are one host on the dashboard and in `?host=`.
    ///
    /// A text that is not a host name (markup, spaces, a bidi or other format control, a label IDNA cannot encode)
    /// is refused naming the key. The rules are the core's for a host to connect to, so a report any client of this
    /// package can send is accepted: `_` and a label starting with `-` pass there too (names people connect to).
    static func hostName(_ text: String, key: String, label: String) throws(ReportRefusal) -> String {
        do {
            return try PeerName(text).canonical
        } catch {
            throw ReportRefusal("\(label): `\(key)` is not a host name (\(Self.oneLine(error.problem, limit: 200)))")
        }
    }

    /// `noted-hostname` in the form ``hostName(_:key:label:)`` stores hosts in, a leading `*.` or `**.` kept.
    ///
    /// RFC 7469 §3 says `noted-hostname` is the host the pins were noted for; our own ``/Pinning/PinFailureReport``
    /// sends the configuration key that matched, which for a wildcard entry is `*.cdn.example.com` or
    /// `**.example.com` (TrustKit's `noted-hostname` is its domain key, without a wildcard). So the wildcard prefix
    /// is put back on the normalised rest. Anything else that is not a host name is refused, as for `hostname`: a
    /// `*` elsewhere, a wildcard on nothing, and a wildcard over an IP address (no configuration key is one).
    static func notedHostName(_ text: String, label: String) throws(ReportRefusal) -> String {
        let prefix: String
        if text.utf8.starts(with: "**.".utf8) {
            prefix = "**."
        } else if text.utf8.starts(with: "*.".utf8) {
            prefix = "*."
        } else {
            return try Self.hostName(text, key: "noted-hostname", label: label)
        }
        let rest = String(decoding: text.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
        let name: PeerName
        do {
            name = try PeerName(rest)
        } catch {
            throw ReportRefusal(
                "\(label): `noted-hostname` is not a host name or a \"*.\" or \"**.\" pattern (\(Self.oneLine(error.problem, limit: 200)))"
            )
        }
        guard !name.isIPAddress else {
            throw ReportRefusal("\(label): `noted-hostname` applies a wildcard (\(prefix)) to an IP address")
        }
        return prefix + name.canonical
    }

    /// TrustKit's `TSKTrustEvaluationResult` (TSKTrustDecision.h), by position, named as the core names its
    /// failures where one matches (`pinMismatch`).
    static func trustKitResult(_ code: Int64) -> String {
        switch code {
        case 0: return "success"
        case 1: return "pinMismatch"
        case 2: return "invalidCertificateChain"
        case 3: return "invalidParameters"
        case 4: return "userDefinedTrustAnchor"
        case 5: return "couldNotGenerateSpkiHash"
        default: return "trustkit-\(code)"
        }
    }

    private func chain(_ reader: FieldReader, _ key: String) throws(ReportRefusal) -> [ReportedCertificate] {
        guard let elements = try reader.array(key) else { return [] }
        guard elements.count <= self.maximumChainLength else {
            throw ReportRefusal("\(reader.label): `\(key)` has \(elements.count) certificates; at most \(self.maximumChainLength) are accepted")
        }
        var certificates: [ReportedCertificate] = []
        for (index, element) in elements.enumerated() {
            guard case .string(let pem) = element else {
                throw ReportRefusal("\(reader.label): `\(key)`[\(index)] is \(element.typeName), not a PEM certificate")
            }
            guard pem.utf8.count <= self.maximumCertificateBytes else {
                throw ReportRefusal("\(reader.label): `\(key)`[\(index)] is longer than \(self.maximumCertificateBytes) bytes")
            }
            guard !pem.utf8.contains(0) else { throw ReportRefusal("\(reader.label): `\(key)`[\(index)] contains a NUL character") }
            let parsed: [Certificate]
            do {
                parsed = try CertificateLoader.certificates(from: Array(pem.utf8), origin: key)
            } catch {
                // The loader's words (what the bytes are, which block is broken), without its origin label.
                throw ReportRefusal("\(reader.label): `\(key)`[\(index)] is not a readable PEM certificate (\(error.code): \(Self.oneLine(error.problem, limit: 200)))")
            }
            guard parsed.count == 1, let certificate = parsed.first else {
                throw ReportRefusal("\(reader.label): `\(key)`[\(index)] holds \(parsed.count) certificates, not one")
            }
            certificates.append(
                ReportedCertificate(
                    pin: Pin(spkiOf: certificate).base64,
                    subject: String(describing: certificate.subject),
                    issuer: String(describing: certificate.issuer),
                    pem: pem
                )
            )
        }
        return certificates
    }

    private func knownPins(_ reader: FieldReader) throws(ReportRefusal) -> [String] {
        guard let elements = try reader.array("known-pins") else { return [] }
        guard elements.count <= self.maximumKnownPins else {
            throw ReportRefusal("\(reader.label): `known-pins` has \(elements.count) pins; at most \(self.maximumKnownPins) are accepted")
        }
        var pins: [String] = []
        for (index, element) in elements.enumerated() {
            guard case .string(let text) = element else {
                throw ReportRefusal("\(reader.label): `known-pins`[\(index)] is \(element.typeName), not a pin")
            }
            // RFC 7469 §2.1: `pin-sha256="BASE64"` (the directive's form, as HPKP and TrustKit send it); the
            // core's `sha256/BASE64` and bare base64 are accepted too.
            var candidate = Self.trimmingWhitespace(text)
            if candidate.lowercased().hasPrefix("pin-sha256=") {
                candidate = String(candidate.dropFirst("pin-sha256=".count))
                if candidate.count >= 2, candidate.hasPrefix("\""), candidate.hasSuffix("\"") {
                    candidate = String(candidate.dropFirst().dropLast())
                }
            } else if Self.isOtherPinDirective(candidate) {
                // RFC 7469 §2.1.1: a pin directive of a hash algorithm the reader does not know (`pin-sha1="…"`, a
                // future `pin-sha512`) is ignored, not an error; the report is kept with the pins it can use (the
                // directive stays in `raw`).
                continue
            }
            let pin: Pin
            do {
                pin = try Pin(candidate)
            } catch {
                throw ReportRefusal("\(reader.label): `known-pins`[\(index)] is not a SHA-256 pin (pin-sha256=\"BASE64\" of 32 bytes)")
            }
            pins.append(pin.base64)
        }
        return pins
    }
}

extension ReportParser {
    /// Whether `text` is an RFC 7469 pin directive (`pin-` token `=` …) naming an algorithm other than `sha256`.
    static func isOtherPinDirective(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count > 4, String(decoding: bytes[0..<4], as: UTF8.self).lowercased() == "pin-", let equals = bytes.firstIndex(of: UInt8(ascii: "=")) else {
            return false
        }
        let algorithm = bytes[4..<equals]
        // RFC 9110 §5.6.2's token characters.
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        guard !algorithm.isEmpty, algorithm.allSatisfy(tchar.contains) else { return false }
        return String(decoding: algorithm, as: UTF8.self).lowercased() != "sha256"
    }

    /// `text.trimmingCharacters(in: .whitespaces)`, without building a new string when neither end is whitespace
    /// (a known pin never is, and the trimming was a tenth of the known pins' cost). Foundation trims Unicode
    /// scalars from both ends, so a text whose first and last scalars are not in the set is returned whole by it.
    static func trimmingWhitespace(_ text: String) -> String {
        guard let first = text.unicodeScalars.first, let last = text.unicodeScalars.last else { return text }
        if CharacterSet.whitespaces.contains(first) || CharacterSet.whitespaces.contains(last) {
            return text.trimmingCharacters(in: .whitespaces)
        }
        return text
    }
}

/// Typed access to a report's keys, refusing a wrong type or an over-long text with the key's name.
private struct FieldReader {
    var fields: [String: JSONValue]
    var label: String
    var maximumFieldBytes: Int

    func string(_ key: String) throws(ReportRefusal) -> String? {
        switch self.fields[key] {
        case nil, .null?: return nil
        case .string(let text)?:
            guard text.utf8.count <= self.maximumFieldBytes else {
                throw ReportRefusal("\(self.label): `\(key)` is longer than \(self.maximumFieldBytes) bytes")
            }
            // PostgreSQL's text cannot hold U+0000, and no report field has a use for it: refused on both
            // databases alike rather than accepted by one and failing in the other.
            guard !text.utf8.contains(0) else { throw ReportRefusal("\(self.label): `\(key)` contains a NUL character") }
            return text
        case let other?: throw ReportRefusal("\(self.label): `\(key)` is \(other.typeName), not a string")
        }
    }

    /// The first of `keys` that is present.
    func firstString(_ keys: String...) throws(ReportRefusal) -> String? {
        for key in keys {
            if let value = try self.string(key) { return value }
        }
        return nil
    }

    /// A version may be sent as a string or an integer (the pin-set version is a number in signed pin sets).
    func versionText(_ key: String) throws(ReportRefusal) -> String? {
        if case .integer(let number)? = self.fields[key] { return String(number) }
        return try self.string(key)
    }

    func integer(_ key: String) throws(ReportRefusal) -> Int64? {
        switch self.fields[key] {
        case nil, .null?: return nil
        case .integer(let number)?: return number
        case let other?: throw ReportRefusal("\(self.label): `\(key)` is \(other.typeName), not an integer")
        }
    }

    func bool(_ key: String) throws(ReportRefusal) -> Bool? {
        switch self.fields[key] {
        case nil, .null?: return nil
        case .bool(let value)?: return value
        case let other?: throw ReportRefusal("\(self.label): `\(key)` is \(other.typeName), not a boolean")
        }
    }

    func array(_ key: String) throws(ReportRefusal) -> [JSONValue]? {
        switch self.fields[key] {
        case nil, .null?: return nil
        case .array(let values)?: return values
        case let other?: throw ReportRefusal("\(self.label): `\(key)` is \(other.typeName), not an array")
        }
    }
}
