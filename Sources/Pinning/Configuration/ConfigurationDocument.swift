import Foundation

/// A configuration's JSON text read in one pass over its bytes, when it has the shape nearly every configuration
/// has (issue 29: a pin set of 10,000 hosts applied in 100 ms): the top level's fields and each entry's, found by
/// comparing their bytes with the known names (no `String` per key), each host key kept as the one `String` the entry
/// keeps, and pins in their usual form decoded from the bytes where they stand (no `String` per pin, no array of JSON
/// values per list). What is kept for the validator is what the strict reader's tree (``TUFJSON``) would have
/// handed it, field by field, so the same validation runs on either.
///
/// It reads only texts that the strict reader (``ConfigurationJSON/parse(_:)``) reads, to the same value; for any
/// other text ``read(_:)`` gives nil and the caller reads the text with the strict reader, which then refuses it or
/// reads it in its own words. Left to it: any JSON error (so every refusal is said exactly as before, at the same
/// byte), a byte-order mark or UTF-16/32 text, a top-level or entry field that is not one of the known names (byte for
/// byte, after unescaping), a field or host key repeated (byte for byte, after unescaping), a key outside ASCII at
/// any depth (the strict reading compares those in their Unicode forms), `domains` or an entry that is not an object.
/// What it decides itself, and how it stays the strict reader's answer:
/// - a key with escapes (`"ho\u0073ts"`) is unescaped by the strict reader's own string reading, then compared,
///   so `"ho\u0073ts"` and `"hosts"` are the same key, and repeated when both are in one object;
/// - a `pins` list of strings in the usual form (`sha256/` and 44 base64 characters, or the bare 44, no escape), none
///   repeated, is decoded here by ``Pin``'s own decoder of that form (what ``Pin/init(_:)`` tries first, so the pins
///   are the same); any other list is read as a JSON value and left to the validator, which reads and reports it as
///   before;
/// - every value other than those pins is read by the strict reader's value reading at the depth it has in the
///   tree, so nesting limits, number forms, escapes and UTF-8 are checked by the same code.
struct ConfigurationDocument: Sendable {
    /// One `domains` member: its key (as unescaped, ASCII) and its fields.
    struct Domain: Sendable {
        var key: String
        var fields: ConfigurationValidator.EntryFields
    }

    var version: TUFJSON?
    var unlistedHosts: TUFJSON?
    /// The `domains` members in the order of their keys' bytes (the tree's order, and Swift's `String` order for
    /// ASCII keys, which is the order the validator reports in); nil when there is no `domains` field.
    var domains: [Domain]?

    /// The text read in one pass, or nil when it is not in the shape described above (read it with
    /// ``ConfigurationJSON/parse(_:)`` then).
    static func read(_ data: Data) -> ConfigurationDocument? {
        var reader = StrictJSONReader(bytes: Array(data))
        do {
            return try reader.configurationDocument()
        } catch {
            // Not decided here: the strict reader reads the text again, and says what is wrong with it, if anything.
            return nil
        }
    }
}

extension StrictJSONReader {
    /// Thrown to leave the text to the strict reader (its words are never shown: the text is read again).
    private func notHere() -> TUFJSONError {
        TUFJSONError(message: "left to the strict reader", offset: self.position)
    }

    /// An object key as read: a range of the text when it has no escape (and so is printable ASCII), else unescaped.
    private enum Key {
        case plain(Range<Int>)
        case unescaped(String)
    }

    /// At the opening quote of a key: the key, after the `:` that follows it and any whitespace.
    private mutating func key() throws(TUFJSONError) -> Key {
        guard self.position < self.bytes.count, self.bytes[self.position] == UInt8(ascii: "\"") else { throw self.notHere() }
        let start = self.position + 1
        var end = start
        while end < self.bytes.count {
            let byte = self.bytes[end]
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { break }
            end += 1
        }
        let key: Key
        if end < self.bytes.count, self.bytes[end] == UInt8(ascii: "\"") {
            self.position = end + 1
            key = .plain(start..<end)
        } else {
            // Escapes or bytes outside ASCII: the strict reader's string reading (unescaping, UTF-8 and surrogate
            // checks). A key outside ASCII is left to the strict reader, which compares such keys' Unicode forms.
            let text = try self.string()
            guard TUFJSONObject.isASCII(text) else { throw self.notHere() }
            key = .unescaped(text)
        }
        self.skipWhitespace()
        guard self.position < self.bytes.count, self.bytes[self.position] == UInt8(ascii: ":") else { throw self.notHere() }
        self.position += 1
        self.skipWhitespace()
        return key
    }

    private func bytes(of key: Key) -> ArraySlice<UInt8> {
        switch key {
        case .plain(let range): return self.bytes[range]
        case .unescaped(let text): return ArraySlice(text.utf8)
        }
    }

    /// After a member's value: true at the object's `}`, false at a `,` (either consumed).
    private mutating func endOfMember() throws(TUFJSONError) -> Bool {
        self.skipWhitespace()
        guard self.position < self.bytes.count else { throw self.notHere() }
        let byte = self.bytes[self.position]
        self.position += 1
        if byte == UInt8(ascii: "}") { return true }
        guard byte == UInt8(ascii: ",") else { throw self.notHere() }
        self.skipWhitespace()
        return false
    }

    /// At `{`: whether the object is empty (then its `}` is consumed); else at its first key.
    private mutating func openObject() -> Bool {
        self.position += 1
        self.skipWhitespace()
        guard self.position < self.bytes.count, self.bytes[self.position] == UInt8(ascii: "}") else { return false }
        self.position += 1
        return true
    }

    /// The whole text (the tree's depths: the top level 0, `domains` 1, an entry 2, an entry's fields 3).
    mutating func configurationDocument() throws(TUFJSONError) -> ConfigurationDocument {
        self.skipWhitespace()
        guard self.position < self.bytes.count, self.bytes[self.position] == UInt8(ascii: "{") else { throw self.notHere() }
        var document = ConfigurationDocument()
        var seen: (version: Bool, unlistedHosts: Bool, domains: Bool) = (false, false, false)
        if !self.openObject() {
            repeat {
                let key = try self.key()
                let name = self.bytes(of: key)
                if name.elementsEqual("version".utf8), !seen.version {
                    seen.version = true
                    document.version = try self.value(depth: 1)
                } else if name.elementsEqual("unlistedHosts".utf8), !seen.unlistedHosts {
                    seen.unlistedHosts = true
                    document.unlistedHosts = try self.value(depth: 1)
                } else if name.elementsEqual("domains".utf8), !seen.domains {
                    seen.domains = true
                    document.domains = try self.domains()
                } else {
                    // Another field (which the validator reports), or one repeated (which the strict reader refuses).
                    throw self.notHere()
                }
            } while try !self.endOfMember()
        }
        self.skipWhitespace()
        // More after the value, or a key outside ASCII inside a value read whole: the strict reader's to say.
        guard self.atEnd, !self.sawNonASCIIKey else { throw self.notHere() }
        return document
    }

    /// At `domains`' value: its members, sorted by their keys' bytes, each key once.
    private mutating func domains() throws(TUFJSONError) -> [ConfigurationDocument.Domain] {
        guard self.position < self.bytes.count, self.bytes[self.position] == UInt8(ascii: "{") else { throw self.notHere() }
        var domains: [ConfigurationDocument.Domain] = []
        if !self.openObject() {
            repeat {
                let key: String
                switch try self.key() {
                case .plain(let range): key = String(decoding: self.bytes[range], as: UTF8.self)
                case .unescaped(let text): key = text
                }
                guard self.position < self.bytes.count, self.bytes[self.position] == UInt8(ascii: "{") else { throw self.notHere() }
                domains.append(ConfigurationDocument.Domain(key: key, fields: try self.entryFields()))
            } while try !self.endOfMember()
        }
        // The tree's order, by the keys' bytes. Positions are sorted, not the members (each holds every field of an
        // entry); already in order (as a canonical text is) they are only checked.
        var order = Array(domains.indices)
        if !order.dropFirst().allSatisfy({ TUFJSONObject.compare(domains[$0 - 1].key, domains[$0].key) < 0 }) {
            order.sort { TUFJSONObject.compare(domains[$0].key, domains[$1].key) < 0 }
            for position in order.indices.dropFirst() where TUFJSONObject.compare(domains[order[position - 1]].key, domains[order[position]].key) == 0 {
                // A repeated host key: the strict reader refuses the text, and says where.
                throw self.notHere()
            }
            return order.map { domains[$0] }
        }
        return domains
    }

    /// At an entry's `{`: its fields, each a known name once.
    private mutating func entryFields() throws(TUFJSONError) -> ConfigurationValidator.EntryFields {
        var fields = ConfigurationValidator.EntryFields()
        guard !self.openObject() else { return fields }
        var seen: UInt16 = 0  // a bit per field read
        repeat {
            let key = try self.key()
            // An unknown field (which the validator reports), or one repeated (which the strict reader refuses).
            guard let field = ConfigurationValidator.EntryFields.Field(named: self.bytes(of: key)), seen & field.bit == 0 else {
                throw self.notHere()
            }
            seen |= field.bit
            if field == .pins, let pins = self.pinsInUsualForm() {
                fields.readPins = pins
            } else {
                fields.set(field, try self.value(depth: 3))
            }
        } while try !self.endOfMember()
        return fields
    }

    /// At a value: when it is an array of at most ``maximumPinsInOnePass`` strings, each a pin in the usual form with no
    /// escape, none repeated, the pins (the array read); nil otherwise, with nothing read.
    private mutating func pinsInUsualForm() -> [Pin]? {
        let start = self.position
        guard start < self.bytes.count, self.bytes[start] == UInt8(ascii: "[") else { return nil }
        var pins: [Pin] = []
        // Two, as nearly every entry has (a pin and its backup): the list is made once, at its size.
        pins.reserveCapacity(2)
        self.position += 1
        while true {
            self.skipWhitespace()
            guard self.position < self.bytes.count, self.bytes[self.position] == UInt8(ascii: "\"") else { break }
            let textStart = self.position + 1
            var end = textStart
            while end < self.bytes.count, end - textStart <= 51 {
                let byte = self.bytes[end]
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { break }
                end += 1
            }
            guard pins.count < Self.maximumPinsInOnePass, end < self.bytes.count, self.bytes[end] == UInt8(ascii: "\""),
                let pin = self.bytes[textStart..<end].withUnsafeBufferPointer({ Pin(usualFormUTF8: $0) }), !pins.contains(pin)
            else { break }
            pins.append(pin)
            self.position = end + 1
            self.skipWhitespace()
            guard self.position < self.bytes.count else { break }
            let byte = self.bytes[self.position]
            self.position += 1
            if byte == UInt8(ascii: "]") { return pins }
            guard byte == UInt8(ascii: ",") else { break }
        }
        // Empty, another form, a repeat, a longer list, or not JSON: read as a value, and left to the validator (or to
        // the strict reader).
        self.position = start
        return nil
    }

    /// The most pins a list read here may have. Repeats are found by comparing each pin with those before it, which is
    /// quadratic; a longer list (a pin set may be 16 MiB, ~300,000 pins in one entry) goes to the validator, which
    /// finds repeats through a hash table past 16 pins, as it did before this reader.
    static let maximumPinsInOnePass = 16
}
