import Foundation
import NIOSSL
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// Passphrases outside ASCII once killed the process (SIGILL: swift-nio-ssl's passphrase callback converts each
/// byte to a signed CChar). Every file here is made by OpenSSL 3 or by us and opened by the other, for
/// passphrases in several scripts, outside the Basic Multilingual Plane, empty and long.
@Suite("Passphrases: any Unicode text, encoded as OpenSSL 3 encodes it, both ways")
struct PassphraseInteropTests {
    /// The passphrases every format is tried with. The long one is 540 UTF-8 bytes: under OpenSSL's 1,023-byte
    /// limit for `-passin file:` and for traditional PEM keys.
    static let passphrases: [String] = [
        "wörd", "café", "x€", "пароль", "密码", "كلمة", "पासवर्ड", "😀", "a😀b𝄞c", "e\u{301}", "correct horse",
        String(repeating: "wörd😀", count: 60),
    ]

    struct Files {
        let directory: TemporaryDirectory
        let chain: TestChain

        init(key: TestKeyType = .p256) throws {
            let directory = try TemporaryDirectory(prefix: "pinning-passphrase")
            self.directory = directory
            // Until the fixture is whole no test holds it: a step that throws removes the directory here.
            var ready = false
            defer { if !ready { directory.remove() } }
            self.chain = try TestChain(host: "client-7", ipAddresses: [], key: key, leafUsage: .clientAuth)
            try self.directory.write("leaf.pem", self.chain.leaf.certificatePEM)
            try self.directory.write("leaf.key", self.chain.leaf.privateKeyPEM)
            try self.directory.write("cas.pem", TestPKI.pemBundle([self.chain.intermediate.certificate]))
            ready = true
        }

        func path(_ name: String) -> String { self.directory.path(name) }

        /// `-passin`/`-passout` argument: `file:` (its first line is the passphrase, as for our
        /// --passphrase-file), or `pass:` for the empty passphrase.
        func passArgument(_ passphrase: String) throws -> String {
            guard !passphrase.isEmpty else { return "pass:" }
            return "file:" + (try self.directory.write("pass-\(UUID().uuidString).txt", passphrase + "\n"))
        }

        func run(_ arguments: [String]) async throws -> String {
            let result = try await openssl(arguments)
            #expect(result.status == 0, "openssl \(arguments.joined(separator: " ")) failed: \(result.output)")
            return result.output
        }
    }

    @Test(
        "OpenSSL 3's pkcs12 -export (AES-256 and -legacy) opens in TLSIdentity; a wrong passphrase is a typed error",
        .enabled(if: opensslAvailable), arguments: Self.passphrases + [""])
    func opensslPKCS12OpensHere(passphrase: String) async throws {
        let files = try Files()
        defer { files.directory.remove() }
        for legacy in [false, true] {
            let out = files.path(legacy ? "legacy.p12" : "modern.p12")
            _ = try await files.run(
                [
                    "pkcs12", "-export", "-in", files.path("leaf.pem"), "-inkey", files.path("leaf.key"),
                    "-certfile", files.path("cas.pem"), "-out", out, "-passout", try files.passArgument(passphrase),
                ]
                    + (legacy ? ["-legacy"] : [])
            )
            let identity = try TLSIdentity.pkcs12(file: out, passphrase: passphrase)
            #expect(identity.certificateChain == files.chain.presented)
            let error = #expect(throws: TLSIdentityError.self) {
                try TLSIdentity.pkcs12(file: out, passphrase: passphrase + "x")
            }
            #expect(error?.code == .wrongPassphrase)
            #expect(error?.description.hasPrefix("\(out): wrong passphrase:") == true)
        }
    }

    @Test("our PKCS#12 (AES-256 and legacy 3DES) opens in openssl pkcs12 and here", .enabled(if: opensslAvailable), arguments: Self.passphrases)
    func ourPKCS12OpensInOpenSSL(passphrase: String) async throws {
        let files = try Files()
        defer { files.directory.remove() }
        for encryption in [PKCS12Encryption.aes256, .legacy3DES] {
            let bytes = try PKCS12Writer.serialize(
                certificateChain: files.chain.presented,
                privateKeyPEM: files.chain.leaf.privateKeyPEM,
                passphrase: passphrase,
                friendlyName: "client-7",
                encryption: encryption
            )
            let path = try files.directory.write("ours-\(encryption).p12", bytes: bytes)
            let pem = files.path("ours-\(encryption)-out.pem")
            _ = try await files.run(["pkcs12", "-in", path, "-passin", try files.passArgument(passphrase), "-nodes", "-out", pem])
            let text = try String(contentsOfFile: pem, encoding: .utf8)
            #expect(text.components(separatedBy: "BEGIN CERTIFICATE").count - 1 == 2, "\(text)")
            #expect(text.contains("BEGIN PRIVATE KEY"))
            #expect(text.contains(files.chain.leaf.certificatePEM.split(separator: "\n")[1]), "the leaf comes out")
            let wrong = try await openssl(["pkcs12", "-in", path, "-passin", try files.passArgument(passphrase + "x"), "-nodes", "-noout"])
            #expect(wrong.status != 0)
            let identity = try TLSIdentity.pkcs12(bytes: bytes, passphrase: passphrase, origin: path)
            #expect(identity.certificateChain == files.chain.presented)
        }
    }

    @Test(
        "encrypted PEM keys made by OpenSSL 3 (PKCS#8 PBES2, PKCS#8 PKCS#12-PBE, genpkey -aes256, traditional) load",
        .enabled(if: opensslAvailable), arguments: Self.passphrases)
    func opensslEncryptedKeys(passphrase: String) async throws {
        let files = try Files()
        defer { files.directory.remove() }
        let pass = try files.passArgument(passphrase)
        let key = files.path("leaf.key")
        var made: [(String, String)] = []
        for (name, arguments) in [
            ("pkcs8-aes", ["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", key]),
            ("pkcs8-3des-pbe", ["pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-in", key]),
            ("pkcs8-der", ["pkcs8", "-topk8", "-v2", "aes-128-cbc", "-outform", "DER", "-in", key]),
            ("traditional", ["ec", "-aes256", "-in", key]),
        ] {
            let out = files.path("\(name).key")
            _ = try await files.run(arguments + ["-out", out, "-passout", pass])
            made.append((name, out))
        }
        // A key OpenSSL generated itself, and its certificate.
        let generated = files.path("genpkey.key")
        _ = try await files.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-aes256", "-pass", pass, "-out", generated])
        let generatedCert = files.path("genpkey.pem")
        _ = try await files.run(["req", "-new", "-x509", "-key", generated, "-passin", pass, "-subj", "/CN=genpkey", "-days", "2", "-out", generatedCert])

        let traditional = try String(contentsOfFile: files.path("traditional.key"), encoding: .utf8)
        #expect(traditional.contains("Proc-Type: 4,ENCRYPTED"), "openssl ec -aes256 wrote \(traditional)")
        for (name, path) in made {
            let identity = try TLSIdentity.pem(certificateChainFile: files.path("leaf.pem"), privateKeyFile: path, passphrase: passphrase)
            #expect(identity.leaf == files.chain.leaf.certificate, "\(name)")
            let error = #expect(throws: TLSIdentityError.self, "\(name)") {
                try TLSIdentity.pem(certificateChainFile: files.path("leaf.pem"), privateKeyFile: path, passphrase: passphrase + "x")
            }
            #expect(error?.code == .wrongPassphrase, "\(name): \(String(describing: error))")
            #expect(error?.origin == path)
            let missing = #expect(throws: TLSIdentityError.self, "\(name)") {
                try TLSIdentity.pem(certificateChainFile: files.path("leaf.pem"), privateKeyFile: path, passphrase: nil)
            }
            #expect(missing?.code == .wrongPassphrase)
        }
        let identity = try TLSIdentity.pem(certificateChainFile: generatedCert, privateKeyFile: generated, passphrase: passphrase)
        #expect(identity.leaf.subject.description == "CN=genpkey")
    }

    @Test("an RSA identity round-trips with a passphrase outside the BMP", .enabled(if: opensslAvailable))
    func rsaRoundTrip() async throws {
        let files = try Files(key: .rsa2048)
        defer { files.directory.remove() }
        let passphrase = "🔑 ключ"
        let bytes = try PKCS12Writer.serialize(
            certificateChain: files.chain.presented, privateKeyPEM: files.chain.leaf.privateKeyPEM,
            passphrase: passphrase, friendlyName: "rsa", encryption: .aes256
        )
        let path = try files.directory.write("rsa.p12", bytes: bytes)
        _ = try await files.run(["pkcs12", "-in", path, "-passin", try files.passArgument(passphrase), "-nodes", "-noout"])
        #expect(try TLSIdentity.pkcs12(file: path, passphrase: passphrase).certificateChain == files.chain.presented)
    }

    @Test("the PKCS#12 password encoding is OpenSSL 3's: UTF-16BE, surrogate pairs beyond the BMP, two-byte NUL")
    func encoding() {
        #expect(PKCS12Passphrase("").bmp == [0, 0])
        #expect(PKCS12Passphrase("aé€").bmp == [0x00, 0x61, 0x00, 0xE9, 0x20, 0xAC, 0, 0])
        // U+1F600 → D83D DE00 (OPENSSL_utf82uni).
        #expect(PKCS12Passphrase("😀").bmp == [0xD8, 0x3D, 0xDE, 0x00, 0, 0])
    }

    @Test(
        "a traditional encrypted PEM key with a passphrase longer than OpenSSL's 1,023-byte buffer: a message, not a crash",
        .enabled(if: opensslAvailable))
    func longTraditionalPassphrase() async throws {
        let files = try Files()
        defer { files.directory.remove() }
        let out = files.path("traditional.key")
        _ = try await files.run(["ec", "-aes256", "-in", files.path("leaf.key"), "-out", out, "-passout", "pass:short"])
        let error = #expect(throws: TLSIdentityError.self) {
            try TLSIdentity.pem(certificateChainFile: files.path("leaf.pem"), privateKeyFile: out, passphrase: String(repeating: "ö", count: 600))
        }
        #expect(error?.code == .wrongPassphrase)
        #expect(error?.problem.contains("1,023") == true)
    }
}
