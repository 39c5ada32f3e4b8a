import Crypto
import Foundation
import PinningTestSupport
import Testing

/// Issue 11, items 5 and 6 through the built binary: `inspect` and `pins` list every well-formed certificate
/// (OpenSSL-made RSASSA-PSS, MD5, RSA-1024, negative-serial ones among ordinary ones), say what is unsupported for
/// verification, and show the Trustwave roots of the system store without problems.
@Suite("inspect and pins: unsupported certificates (runs the built binary)", .enabled(if: CLI.hasOpenSSL, "needs /usr/bin/openssl"))
struct InspectUnsupportedCLITests {
    /// Makes one self-signed certificate with `openssl req -x509 EXTRA` and returns its PEM path.
    static func make(_ name: String, _ extra: [String], in directory: TemporaryDirectory) async throws -> String {
        let key = directory.path("\(name).key")
        let certificate = directory.path("\(name).pem")
        let status = try await CLI.openssl(
            ["req", "-x509", "-subj", "/CN=\(name)", "-days", "2", "-nodes", "-keyout", key, "-out", certificate] + extra
        )
        #expect(status == 0, "openssl req \(extra) failed")
        return certificate
    }

    /// `openssl x509 -pubkey | openssl pkey -pubin -outform der | sha256 | base64`.
    static func opensslPin(_ path: String, in directory: TemporaryDirectory) async throws -> String {
        let publicKey = directory.path(UUID().uuidString + ".pub")
        let der = publicKey + ".der"
        #expect(try await CLI.openssl(["x509", "-in", path, "-pubkey", "-noout"], stdoutPath: publicKey) == 0)
        #expect(try await CLI.openssl(["pkey", "-pubin", "-in", publicKey, "-outform", "DER", "-out", der]) == 0)
        return "sha256/" + Data(SHA256.hash(data: try Data(contentsOf: URL(fileURLWithPath: der)))).base64EncodedString()
    }

    struct Made {
        var directory: TemporaryDirectory
        var bundle: String
        var names: [String]
        var pins: [String]
    }

    /// An ordinary certificate, then PSS, MD5, RSA-1024 and negative-serial ones, in one PEM file.
    static func bundle() async throws -> Made {
        let directory = try TemporaryDirectory(prefix: "pinning-inspect-unsupported")
        // Until the fixture is whole no test holds it: a step that throws removes the directory here.
        var ready = false
        defer { if !ready { directory.remove() } }
        let variants: [(String, [String])] = [
            ("ordinary", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]),
            ("pss", ["-newkey", "rsa:2048", "-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest"]),
            ("md5", ["-newkey", "rsa:2048", "-md5"]),
            ("rsa1024", ["-newkey", "rsa:1024"]),
            ("negative", ["-newkey", "rsa:2048", "-set_serial", "-5"]),
            ("ordinary2", ["-newkey", "rsa:2048"]),
        ]
        var text = ""
        var pins: [String] = []
        for (name, extra) in variants {
            let path = try await Self.make(name, extra, in: directory)
            text += try String(contentsOfFile: path, encoding: .utf8)
            pins.append(try await Self.opensslPin(path, in: directory))
        }
        let bundle = directory.path("bundle.pem")
        try Data(text.utf8).write(to: URL(fileURLWithPath: bundle))
        ready = true
        return Made(directory: directory, bundle: bundle, names: variants.map(\.0), pins: pins)
    }

    @Test("pins prints every certificate's pin, equal to openssl's, and notes the unsupported ones on stderr")
    func pins() async throws {
        let made = try await Self.bundle()
        defer { made.directory.remove() }
        let run = try await CLI.run(["pins", made.bundle], in: made.directory)
        #expect(run.status == 0, "\(run)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.map { String($0.split(separator: " ").first ?? "") } == made.pins, "\(run)")
        #expect(lines.map { String($0.split(separator: " ").last ?? "") } == made.names.map { "CN=\($0)" }, "\(run)")
        #expect(run.stderr.contains("rsassaPss (SHA-256, MGF1 with SHA-256, salt 32 bytes)"), "\(run)")
        #expect(run.stderr.contains("md5WithRSAEncryption"), "\(run)")
        #expect(run.stderr.contains("RSA key of 1024 bits"), "\(run)")
        #expect(run.stderr.contains("serial number is negative (-05)"), "\(run)")
        #expect(!run.output.contains("malformed DER"), "\(run)")

        let entry = try await CLI.run(["pins", made.bundle, "--config-entry", "api.example.com"], in: made.directory)
        #expect(entry.status == 0, "\(entry)")
        for pin in made.pins { #expect(entry.stdout.contains(pin), "\(entry)") }
    }

    @Test("inspect shows every certificate, what is unsupported for verification, and JSON says the same")
    func inspect() async throws {
        let made = try await Self.bundle()
        defer { made.directory.remove() }
        let run = try await CLI.run(["inspect", made.bundle], in: made.directory)
        #expect(run.status == 0, "\(run)")
        for (name, pin) in zip(made.names, made.pins) {
            #expect(run.stdout.contains("subject      CN=\(name)"), "\(name): \(run)")
            #expect(run.stdout.contains("pin          \(pin)"), "\(name): \(run)")
        }
        #expect(run.stdout.contains("unsupported  signature algorithm rsassaPss"), "\(run)")
        #expect(run.stdout.contains("serial       -05"), "\(run)")
        #expect(run.stdout.contains("key          RSA 1024 bits"), "\(run)")
        #expect(run.stdout.components(separatedBy: "unsupported  ").count - 1 == 4, "\(run)")

        let json = try await CLI.run(["inspect", made.bundle, "--json"], in: made.directory)
        #expect(json.status == 0, "\(json)")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == made.names.count)
        let unsupported = array.map { (($0["certificate"] as? [String: Any])?["unsupportedForVerification"] as? [String])?.isEmpty }
        #expect(unsupported == [true, false, false, false, false, true], "\(json)")
    }

    @Test("a broken block does not hide the certificates around it: all are shown, then the error, exit 2")
    func inspectListsEveryCertificate() async throws {
        let made = try await Self.bundle()
        defer { made.directory.remove() }
        var text = try String(contentsOfFile: made.bundle, encoding: .utf8)
        text = "-----BEGIN CERTIFICATE-----\nMIIBAA==\n-----END CERTIFICATE-----\n" + text
        let path = made.directory.path("broken.pem")
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        for command in ["inspect", "pins"] {
            let run = try await CLI.run([command, path], in: made.directory)
            #expect(run.status == 2, "\(run)")
            for pin in made.pins { #expect(run.stdout.contains(pin), "\(command): \(run)") }
            #expect(run.stderr.contains("broken.pem: malformed DER: block 1 (CERTIFICATE) is not a valid certificate"), "\(run)")
        }
    }

    @Test(
        "the Trustwave ECC roots of the system store: keyUsage shown, no problem, the quirk noted",
        .enabled(if: FileManager.default.fileExists(atPath: "/usr/share/ca-certificates/mozilla/Trustwave_Global_ECC_P256_Certification_Authority.crt"))
    )
    func trustwave() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-trustwave")
        defer { directory.remove() }
        for curve in ["P256", "P384"] {
            let path = "/usr/share/ca-certificates/mozilla/Trustwave_Global_ECC_\(curve)_Certification_Authority.crt"
            let run = try await CLI.run(["inspect", path], in: directory)
            #expect(run.status == 0, "\(run)")
            #expect(run.stdout.contains("key usage    keyCertSign, cRLSign"), "\(run)")
            #expect(!run.stdout.contains("problem"), "\(run)")
            #expect(run.stdout.contains("note         keyUsage: it is not minimally encoded (03 03 07 06 00"), "\(run)")
        }
    }
}
