import Foundation
import Pinning
import PinningNIO
import PinningTestSupport
import Testing

/// The identity-file rows of Docs/BadInput.md (PKCS#12 and PEM identities for mutual TLS), compared in full.
@Suite("Bad-input catalogue: identities (Docs/BadInput.md)")
struct BadInputCatalogueNIOTests {
    static func pkcs12Error(_ bytes: [UInt8], passphrase: String = "pw") throws -> TLSIdentityError {
        try #require(throws: TLSIdentityError.self) { try TLSIdentity.pkcs12(bytes: bytes, passphrase: passphrase, origin: "in") }
    }

    @Test("p12.empty")
    func empty() throws {
        #expect(try Self.pkcs12Error([]).description == "in: corrupt file: the file is empty")
    }

    @Test("p12.tooLarge: the size limit is checked before anything is parsed")
    func tooLarge() throws {
        let error = try Self.pkcs12Error([UInt8](repeating: 0x30, count: TLSIdentity.maximumFileSize + 1))
        #expect(error.description == "in: file too large: 16777217 bytes, more than 16777216")
    }

    @Test("p12.notPKCS12: a PEM certificate given as a .p12")
    func notPKCS12() throws {
        let error = try Self.pkcs12Error(Array("-----BEGIN CERTIFICATE-----\nnope\n".utf8))
        #expect(error.description == "in: corrupt file: not a PKCS#12 (PFX) file: truncated, damaged, or another kind of file (PEM, text)")
        // swift-asn1's own error (with its source line) is kept apart, for --verbose.
        #expect(error.underlyingError?.isEmpty == false)
    }

    /// A PFX whose MAC asks for 10,000,001 PBKDF iterations: refused before any iteration is computed.
    static let hostileMACIterations: [UInt8] =
        [0x30, 0x5b, 0x02, 0x01, 0x03]
        // authSafe: ContentInfo { id-data, [0] OCTET STRING { SEQUENCE {} } }
        + [0x30, 0x11, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01, 0xa0, 0x04, 0x04, 0x02, 0x30, 0x00]
        // MacData { DigestInfo { sha256, 32 zero bytes }, salt (8 bytes), iterations 10,000,001 }
        + [0x30, 0x43, 0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00]
        + [0x04, 0x20] + [UInt8](repeating: 0, count: 32)
        + [0x04, 0x08] + [UInt8](repeating: 7, count: 8)
        + [0x02, 0x04, 0x00, 0x98, 0x96, 0x81]

    @Test("p12.macIterations: a work factor beyond the cap is refused, not computed")
    func macIterations() throws {
        let start = Date()
        let error = try Self.pkcs12Error(Self.hostileMACIterations)
        #expect(error.description == "in: unsupported format: MAC iteration count 10000001 (accepted: 1 to 10,000,000)")
        #expect(Date().timeIntervalSince(start) < 1)
    }

    @Test("p12.noMAC, p12.wrongPassphrase, p12.noKey: openssl-made files", .enabled(if: opensslAvailable))
    func opensslRows() async throws {
        let files = try PKCS12Files()
        defer { files.directory.remove() }
        let pem = ["-in", files.directory.path("client.pem"), "-inkey", files.directory.path("client.key")]
        let noMAC = try await files.export("nomac.p12", pem + ["-nomac"])
        let noKey = try await files.export("nokey.p12", ["-in", files.directory.path("client.pem"), "-nokeys"])
        let full = try await files.full("full.p12")
        func error(_ path: String, _ passphrase: String) throws -> String {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            return try #require(throws: TLSIdentityError.self) {
                try TLSIdentity.pkcs12(bytes: bytes, passphrase: passphrase, origin: "in")
            }.description
        }
        #expect(try error(noMAC, files.passphrase) == "in: unsupported format: the file has no integrity MAC (exported with -nomac?)")
        let wrong = try error(full, "wrong")
        #expect(wrong == "in: wrong passphrase: the passphrase does not unlock this PKCS#12 file (its integrity check fails)")
        let keyless = try error(noKey, files.passphrase)
        #expect(keyless == "in: no private key: the file holds 1 certificate(s) but no private key (exported with -nokeys?)")
    }
}
