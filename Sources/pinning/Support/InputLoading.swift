import Foundation
import Pinning
import X509

/// Turns command-line input into library values; every failure is an ``InputError`` naming the file or option.
enum InputLoading {
    static func certificates(_ path: String, option: String) throws(InputError) -> [Certificate] {
        do {
            return try CertificateLoader.certificates(atPath: path)
        } catch {
            throw InputError(option.isEmpty ? error.description : "\(option) \(error.description)")
        }
    }

    /// Every certificate at `path` for listing (`inspect`, `pins`), supported for verification or not.
    static func listing(_ path: String) throws(InputError) -> CertificateListing {
        do {
            return try CertificateLoader.inspect(atPath: path)
        } catch {
            throw InputError(error.description)
        }
    }

    /// The bytes of one file, through the reader every file option uses (bounded in size and, for a FIFO or pipe,
    /// in time).
    static func bytes(_ path: String, maximumSize: Int) throws(InputError) -> [UInt8] {
        do {
            return try CertificateLoader.readFile(atPath: path, maximumSize: maximumSize)
        } catch {
            throw InputError(error.description)
        }
    }

    /// ``listing(_:)`` for a file already read: over the certificate size limit, or without a single
    /// certificate, it is refused as ``listing(_:)`` refuses the file.
    static func listing(_ bytes: [UInt8], origin: String) throws(InputError) -> CertificateListing {
        guard bytes.count <= CertificateLoader.maximumFileSize else {
            throw InputError(
                "\(origin): file too large: the file is \(bytes.count) bytes; the limit is \(CertificateLoader.maximumFileSize) bytes")
        }
        let listing = CertificateLoader.inspect(from: bytes, origin: origin)
        guard !listing.certificates.isEmpty else {
            throw InputError(listing.failures.first?.description ?? "\(origin): no certificates: no certificate found")
        }
        return listing
    }

    /// What `inspect` and `pins` could not list: files that cannot be read or hold no certificate, and entries
    /// that are not certificates. Gathered while every other file is listed and reported after them (``report()``),
    /// each on its own `pinning:` line, then exit status 2.
    struct Refusals {
        private var lines: [String] = []

        mutating func add(_ error: InputError) {
            self.lines.append(error.message)
        }

        mutating func add(_ failures: [CertificateLoadingError]) {
            self.lines += failures.map(\.description)
        }

        func report() throws(InputError) {
            guard !self.lines.isEmpty else { return }
            throw InputError(self.lines.joined(separator: "\npinning: "))
        }
    }

    /// `--pin-sha256` values. Each may also be curl's `--pinnedpubkey` list, `sha256//A;sha256//B` (base64
    /// never contains ";", so the split is unambiguous); every item is one pin.
    static func pins(_ texts: [String]) throws(InputError) -> [Pin] {
        var pins: [Pin] = []
        for text in texts {
            let items = text.contains(";") ? text.split(separator: ";", omittingEmptySubsequences: false).map(String.init) : [text]
            for item in items {
                do {
                    pins.append(try Pin(item))
                } catch {
                    throw InputError("--pin-sha256: \(error.description)")
                }
            }
        }
        return pins
    }

    static func instant(_ text: String?) throws(InputError) -> Date? {
        guard let text else { return nil }
        do {
            return try RFC3339.read(text)
        } catch {
            throw InputError("--at: \"\(VisibleText.escaped(text))\" is not an RFC 3339 instant such as 2030-06-01T00:00:00Z: \(error.description)")
        }
    }

    static func roots(_ path: String?) throws(InputError) -> TrustRoots? {
        guard let path else { return nil }
        do {
            return try TrustRoots.load(atPath: path)
        } catch {
            throw InputError("--roots \(error.description)")
        }
    }
}

/// JSON output: pretty, sorted keys, `sha256/…` pins left unescaped.
enum JSONOutput {
    static func print(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ReportDate.format(date))
        }
        let data = try encoder.encode(value)
        // Values quote peers (certificate names, a server's status line and body): the characters JSONEncoder
        // leaves raw that act on a terminal (DEL, C1, bidi and other format characters) as \uXXXX, values unchanged.
        Swift.print(VisibleText.jsonEscaped(String(decoding: data, as: UTF8.self)))
    }

    /// Prints `report` as JSON when `json` is set (`--json`), otherwise its text for people.
    static func print(_ report: some TextReport, json: Bool) throws {
        if json {
            try self.print(report)
        } else {
            // The reports that quote a peer (EvaluationReport, CheckReport) escape its text in their lines.
            Swift.print(report.humanReadable)
        }
    }
}

/// A command's result that prints either as JSON or as text for people.
protocol TextReport: Encodable {
    /// The result in lines for people (what is printed without `--json`).
    var humanReadable: String { get }
}
