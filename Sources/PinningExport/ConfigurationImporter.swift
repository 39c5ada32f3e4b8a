import Foundation
import Pinning
public import PinningExportCore

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Reads an Android Network Security Config or a TrustKit configuration and writes the equivalent host pinning
/// configuration (JSON), so a team can start from what its apps already ship.
///
/// The reverse of ``/PinningExportCore/ConfigurationExporter``: importing what it exported gives back the same entries (coverage,
/// pins, enforcement, expiry at midnight UTC, report URIs, exclusions, anchors when the resource directory is
/// given). What the source says and a pinning configuration cannot (Android's `user` trust store, `overridePins`,
/// a `base-config` with its own anchors, a domain with anchors but no pins) is a ``/PinningExportCore/TranslationProblem``: an error,
/// or with `lossy` a warning saying what was dropped. The result is validated as a configuration before it is
/// returned, so it loads as it is written.
public struct ConfigurationImporter: Sendable {
    /// The source format (``/PinningExportCore/PlatformFormat/androidNSC`` or ``/PinningExportCore/PlatformFormat/trustKit``).
    public let format: PlatformFormat
    /// Drop what cannot be expressed, with a warning each, instead of failing.
    public let lossy: Bool
    /// Android's `res` directory, where `@raw/name` anchors are found (`res/raw/name.*`); nil: anchors cannot be
    /// resolved.
    public let resourceDirectory: String?

    /// The formats that can be imported.
    public static let importable: [PlatformFormat] = [.androidNSC, .trustKit]

    public init(format: PlatformFormat, lossy: Bool = false, resourceDirectory: String? = nil) {
        self.format = format
        self.lossy = lossy
        self.resourceDirectory = resourceDirectory
    }

    /// One entry as it will be written.
    struct Entry {
        var pins: [String] = []
        var includeSubdomains = false
        var enforce = true
        var expires: String?
        var anchors: [String] = []
        var anchorsOnly = false
        var reportURIs: [String] = []
        var excluded = false
    }

    /// The configuration JSON for `bytes` in ``format``.
    ///
    /// - Parameters:
    ///   - bytes: The file in ``format``, as read.
    ///   - baseDirectory: Where the JSON will be written: anchor paths are made relative to it, and the
    ///     result is validated against it.
    /// - Throws: ``/PinningExportCore/TranslationError``: the input does not read, or (unless ``lossy``) a feature cannot be
    ///   expressed, or the result is not a valid configuration.
    public func importConfiguration(_ bytes: [UInt8], baseDirectory: String) throws(TranslationError) -> Translation {
        // Said as it is: an XML parser reports an empty file as "line 0, column 0: not well-formed XML".
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) {
            throw TranslationError(input: bytes.isEmpty ? "the file is empty" : "the file holds only white space")
        }
        var log = ProblemLog(format: self.format, lossy: self.lossy)
        var notes: [String] = []
        let entries: [(String, Entry)]
        switch self.format {
        case .androidNSC: entries = try self.androidNSC(bytes, log: &log, notes: &notes)
        case .trustKit: entries = try self.trustKit(bytes, log: &log, notes: &notes)
        case .ats, .okHttp:
            throw TranslationError(input: "\(self.format.rawValue) cannot be imported; import reads android-nsc and trustkit")
        }
        let warnings = try log.finish()
        let text = Self.json(entries, baseDirectory: baseDirectory)
        do {
            _ = try PinningConfiguration(data: Data(text.utf8), baseDirectory: baseDirectory, origin: "the imported configuration")
        } catch {
            throw TranslationError(input: "the imported configuration is not valid: \(error.description)")
        }
        return Translation(text: text, warnings: warnings, notes: notes)
    }

    // MARK: - Android Network Security Config

    private func androidNSC(_ bytes: [UInt8], log: inout ProblemLog, notes: inout [String]) throws(TranslationError) -> [(String, Entry)] {
        let root = try XMLTree.parse(bytes)
        guard root.name == "network-security-config" else {
            throw TranslationError(input: "not a Network Security Config: the root element is <\(root.name)>, not <network-security-config>")
        }
        var result: [(String, Entry)] = []
        var seen: Set<String> = []
        for child in root.children {
            switch child.name {
            case "base-config":
                if child.children.contains(where: { $0.name == "trust-anchors" }) {
                    log.add(nil, "<base-config> trust anchors apply to every host and cannot be expressed; dropped")
                }
            case "debug-overrides":
                notes.append("<debug-overrides> applies to debuggable builds only; not imported")
            case "domain-config":
                try self.domainConfig(child, inherited: Inherited(), log: &log, result: &result, seen: &seen)
            default:
                throw TranslationError(input: "unknown element <\(child.name)> in <network-security-config>")
            }
        }
        // A domain without pins inside a pinned parent is Android's way to leave a host unpinned: an exclusion.
        var final: [(String, Entry)] = []
        for (name, entry) in result {
            guard entry.pins.isEmpty else {
                final.append((name, entry))
                continue
            }
            let parent = result.first { other in
                other.0 != name && !other.1.pins.isEmpty && other.1.includeSubdomains && name.hasSuffix("." + other.0)
            }
            if parent != nil && !entry.includeSubdomains && entry.anchors.isEmpty {
                var excluded = Entry()
                excluded.excluded = true
                final.append((name, excluded))
            } else if !entry.anchors.isEmpty || entry.anchorsOnly {
                log.add(name, "has trust anchors but no pins; a pinning configuration entry needs pins; dropped")
            } else {
                notes.append("domains[\"\(name)\"]: no pins, nothing to import")
            }
        }
        return final
    }

    /// What a nested `domain-config` inherits from its parent.
    private struct Inherited {
        var pinSet: XMLTree?
        var trustAnchors: XMLTree?
    }

    private func domainConfig(
        _ node: XMLTree, inherited: Inherited, log: inout ProblemLog, result: inout [(String, Entry)], seen: inout Set<String>
    ) throws(TranslationError) {
        var own = inherited
        for child in node.children {
            switch child.name {
            case "pin-set": own.pinSet = child
            case "trust-anchors": own.trustAnchors = child
            case "domain", "domain-config": break
            default: throw TranslationError(input: "unknown element <\(child.name)> in <domain-config>")
            }
        }
        var template = Entry()
        if let pinSet = own.pinSet {
            if let expiration = pinSet.attributes["expiration"] {
                guard let instant = DayFormat.instant(expiration) else {
                    throw TranslationError(input: "<pin-set expiration=\"\(expiration)\">: not a yyyy-MM-dd date")
                }
                template.expires = instant
            }
            for pin in pinSet.children {
                guard pin.name == "pin" else { throw TranslationError(input: "unknown element <\(pin.name)> in <pin-set>") }
                guard pin.attributes["digest"] == "SHA-256" else {
                    throw TranslationError(input: "<pin digest=\"\(pin.attributes["digest"] ?? "")\">: only SHA-256 pins exist on Android")
                }
                let text = pin.text.trimmingCharacters(in: .whitespacesAndNewlines)
                let parsed: Pin
                do {
                    parsed = try Pin("sha256/" + text)
                } catch {
                    throw TranslationError(input: "<pin>\(text)</pin>: \(error.description)")
                }
                if !template.pins.contains(parsed.description) { template.pins.append(parsed.description) }
            }
        }
        var domains: [(String, Bool)] = []
        for child in node.children where child.name == "domain" {
            let name = child.text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
            domains.append((name, child.attributes["includeSubdomains"] == "true"))
        }
        for (name, subdomains) in domains {
            var entry = template
            entry.includeSubdomains = subdomains
            if let anchors = own.trustAnchors {
                var system = false
                for certificates in anchors.children {
                    guard certificates.name == "certificates" else {
                        throw TranslationError(input: "unknown element <\(certificates.name)> in <trust-anchors>")
                    }
                    if certificates.attributes["overridePins"] == "true" {
                        log.add(name, "overridePins (a trust anchor that bypasses the pins) cannot be expressed; dropped")
                    }
                    let source = certificates.attributes["src"] ?? ""
                    if source == "system" {
                        system = true
                    } else if source == "user" {
                        log.add(name, "the user-installed trust store cannot be expressed; dropped")
                    } else if source.hasPrefix("@raw/") {
                        let resource = String(source.dropFirst(5))
                        if let file = self.rawFile(resource) {
                            entry.anchors.append(file)
                        } else if self.resourceDirectory == nil {
                            log.add(name, "anchor \(source) needs the app's res directory (--res DIR) to be found; dropped")
                        } else {
                            log.add(name, "anchor \(source): no file res/raw/\(resource).* in \(self.resourceDirectory!); dropped")
                        }
                    } else {
                        throw TranslationError(input: "<certificates src=\"\(source)\">: not system, user or @raw/NAME")
                    }
                }
                entry.anchorsOnly = !system && !entry.anchors.isEmpty
            }
            guard seen.insert(name).inserted else {
                throw TranslationError(input: "<domain>\(name)</domain> appears in two domain-configs (Android refuses that too)")
            }
            result.append((name, entry))
        }
        for child in node.children where child.name == "domain-config" {
            try self.domainConfig(child, inherited: own, log: &log, result: &result, seen: &seen)
        }
    }

    /// `res/raw/<resource>.*`, the first in name order.
    private func rawFile(_ resource: String) -> String? {
        guard let directory = self.resourceDirectory else { return nil }
        let raw = URL(fileURLWithPath: directory).appendingPathComponent("raw").path
        let names: [String]
        do {
            // A name that is not UTF-8 is skipped, and that is exact: it cannot be `<resource>.*` for a resource
            // named in the XML, which is text (FileManager would list it as U+FFFD, which could match one).
            names = try DirectoryListing.entries(atPath: raw).compactMap(\.name)
        } catch {
            return nil
        }
        guard let found = names.sorted().first(where: { ($0 as NSString).deletingPathExtension == resource }) else { return nil }
        return URL(fileURLWithPath: raw).appendingPathComponent(found).path
    }

    // MARK: - TrustKit

    private func trustKit(_ bytes: [UInt8], log: inout ProblemLog, notes: inout [String]) throws(TranslationError) -> [(String, Entry)] {
        let object: Any
        do {
            object = try PropertyListSerialization.propertyList(from: Data(bytes), options: [], format: nil)
        } catch {
            // Foundation's words ("The operation could not be completed. The data is not in the correct format.")
            // say nothing a reader can use: ours name what was expected, and the likely mix-up.
            let text = String(decoding: bytes.prefix(4096), as: UTF8.self)
            let hint = text.contains("<network-security-config") ? "; it looks like an Android Network Security Config: use --format android-nsc" : ""
            throw TranslationError(input: "not a property list (XML, binary or OpenStep) that reads\(hint)")
        }
        guard var configuration = object as? [String: Any] else {
            throw TranslationError(input: "the property list's root is not a dictionary")
        }
        // An Info.plist (or our export) holds the configuration under TSKConfiguration.
        if let inner = configuration["TSKConfiguration"] {
            guard let dictionary = inner as? [String: Any] else { throw TranslationError(input: "TSKConfiguration is not a dictionary") }
            configuration = dictionary
        }
        guard let domains = configuration["TSKPinnedDomains"] as? [String: Any] else {
            throw TranslationError(input: "no TSKPinnedDomains dictionary (neither at the root nor under TSKConfiguration)")
        }
        for key in configuration.keys.sorted() where key != "TSKPinnedDomains" {
            notes.append("\(key) is a TrustKit-wide setting; not imported")
        }
        var result: [(String, Entry)] = []
        for name in domains.keys.sorted() {
            guard let policy = domains[name] as? [String: Any] else {
                throw TranslationError(input: "TSKPinnedDomains[\"\(name)\"] is not a dictionary")
            }
            func flag(_ key: String) throws(TranslationError) -> Bool? {
                guard let value = policy[key] else { return nil }
                guard let flag = value as? Bool else { throw TranslationError(input: "TSKPinnedDomains[\"\(name)\"].\(key) is not a boolean") }
                return flag
            }
            var entry = Entry()
            let host = name.lowercased()
            if try flag("TSKExcludeSubdomainFromParentPolicy") == true {
                entry.excluded = true
                result.append((host, entry))
                continue
            }
            guard let hashes = policy["TSKPublicKeyHashes"] as? [Any] else {
                throw TranslationError(input: "TSKPinnedDomains[\"\(name)\"].TSKPublicKeyHashes is missing or not an array")
            }
            for hash in hashes {
                guard let text = hash as? String else { throw TranslationError(input: "TSKPinnedDomains[\"\(name)\"]: a pin is not a string") }
                do {
                    let pin = try Pin("sha256/" + text)
                    if !entry.pins.contains(pin.description) { entry.pins.append(pin.description) }
                } catch {
                    throw TranslationError(input: "TSKPinnedDomains[\"\(name)\"]: \(text): \(error.description)")
                }
            }
            entry.includeSubdomains = try flag("TSKIncludeSubdomains") ?? false
            entry.enforce = try flag("TSKEnforcePinning") ?? true
            if let reports = policy["TSKReportUris"] {
                guard let list = reports as? [String] else { throw TranslationError(input: "TSKPinnedDomains[\"\(name)\"].TSKReportUris is not a list of strings") }
                entry.reportURIs = list
            }
            if let expiration = policy["TSKExpirationDate"] {
                guard let text = expiration as? String, let instant = DayFormat.instant(text) else {
                    throw TranslationError(input: "TSKPinnedDomains[\"\(name)\"].TSKExpirationDate is not a yyyy-MM-dd date")
                }
                entry.expires = instant
            }
            if try flag("TSKDisableDefaultReportUri") == false {
                notes.append("domains[\"\(name)\"]: TrustKit's default report URI (its maintainers' server) is not carried over; list it in reportURIs if wanted")
            }
            let known: Set<String> = [
                "TSKPublicKeyHashes", "TSKIncludeSubdomains", "TSKEnforcePinning", "TSKReportUris", "TSKExpirationDate",
                "TSKDisableDefaultReportUri", "TSKExcludeSubdomainFromParentPolicy", "TSKPublicKeyAlgorithms",
            ]
            for key in policy.keys.sorted() where !known.contains(key) {
                log.add(host, "\(key) is not a setting this importer knows; dropped")
            }
            result.append((host, entry))
        }
        return result
    }

    // MARK: - Output

    /// The configuration JSON, keys sorted, two-space indentation.
    static func json(_ entries: [(String, Entry)], baseDirectory: String) -> String {
        func quoted(_ text: String) -> String {
            let data: Data
            do {
                data = try JSONEncoder().encode(text)
            } catch {
                // Encoding a String cannot fail; an empty string keeps the output valid JSON if it ever did.
                return "\"\""
            }
            return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\\/", with: "/")
        }
        func list(_ items: [String]) -> String { "[" + items.map(quoted).joined(separator: ", ") + "]" }
        let base = URL(fileURLWithPath: baseDirectory).standardizedFileURL.path
        var lines: [String] = []
        for (name, entry) in entries.sorted(by: { $0.0 < $1.0 }) {
            var fields: [String] = []
            if entry.excluded {
                fields.append("\"excludeSubdomainFromParentPolicy\": true")
            } else {
                fields.append("\"pins\": \(list(entry.pins))")
                if entry.includeSubdomains { fields.append("\"includeSubdomains\": true") }
                if !entry.enforce { fields.append("\"enforce\": false") }
                if let expires = entry.expires { fields.append("\"expires\": \(quoted(expires))") }
                if !entry.anchors.isEmpty {
                    let paths = entry.anchors.map { path -> String in
                        let full = URL(fileURLWithPath: path).standardizedFileURL.path
                        return full.hasPrefix(base + "/") ? String(full.dropFirst(base.count + 1)) : full
                    }
                    fields.append("\"anchors\": \(list(paths))")
                    if entry.anchorsOnly { fields.append("\"anchorsOnly\": true") }
                }
                if !entry.reportURIs.isEmpty { fields.append("\"reportURIs\": \(list(entry.reportURIs))") }
            }
            lines.append("    \(quoted(name)): { " + fields.joined(separator: ", ") + " }")
        }
        return "{\n  \"version\": 1,\n  \"domains\": {\n" + lines.joined(separator: ",\n") + "\n  }\n}\n"
    }
}

/// A minimal element tree from Foundation's XML parser: names, attributes, text, children. Comments and
/// processing instructions are skipped; a DTD or an external entity is refused (nothing is ever fetched).
final class XMLTree {
    let name: String
    let attributes: [String: String]
    var children: [XMLTree] = []
    var text = ""

    init(name: String, attributes: [String: String]) {
        self.name = name
        self.attributes = attributes
    }

    static func parse(_ bytes: [UInt8]) throws(TranslationError) -> XMLTree {
        // A Network Security Config has no DTD; one could declare entities (expansion bombs, external files), so
        // any is refused before parsing rather than trusting each parser's entity settings.
        if bytes.count >= 9, String(decoding: bytes, as: UTF8.self).contains("<!DOCTYPE") {
            throw TranslationError(input: "a DTD (<!DOCTYPE …>) is not accepted: entities are not accepted in a Network Security Config")
        }
        let builder = Builder()
        let parser = XMLParser(data: Data(bytes))
        parser.shouldResolveExternalEntities = false
        parser.delegate = builder
        // An element still open at the end is not well-formed, whatever the parser says.
        guard parser.parse(), let root = builder.root, builder.stack.isEmpty else {
            // The parser's own error is a libxml2 number; the position is what a reader can use.
            let message = builder.refusal ?? "not well-formed XML"
            throw TranslationError(input: "line \(parser.lineNumber), column \(parser.columnNumber): \(message)")
        }
        return root
    }

    private final class Builder: NSObject, XMLParserDelegate {
        var root: XMLTree?
        var stack: [XMLTree] = []
        var refusal: String?

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            let node = XMLTree(name: elementName, attributes: attributes)
            if let parent = self.stack.last {
                parent.children.append(node)
            } else if self.root == nil {
                self.root = node
            }
            self.stack.append(node)
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
            _ = self.stack.popLast()
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            self.stack.last?.text += string
        }

        func parser(_ parser: XMLParser, foundInternalEntityDeclarationWithName name: String, value: String?) {
            self.refusal = "entity declarations are not accepted"
            parser.abortParsing()
        }

        func parser(_ parser: XMLParser, foundExternalEntityDeclarationWithName name: String, publicID: String?, systemID: String?) {
            self.refusal = "external entities are not accepted"
            parser.abortParsing()
        }
    }
}
