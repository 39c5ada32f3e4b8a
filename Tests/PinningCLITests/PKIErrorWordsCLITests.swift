import Foundation
import PinningTestSupport
import Testing

// Issue 27, item 14: every `pinning pki` subcommand refuses bad input in words. `pki export` with a key that is
// not the certificate's printed `TestPKIError.keyDoesNotMatchCertificate: … (PinningPKI/TestIdentity.swift:23)`.

@Suite("pinning pki: errors in words, no Swift type names or source locations (runs the built binary)")
struct PKIErrorWordsCLITests {
    /// What must never reach a user outside --verbose/--json: a Swift error type with its code, a source location,
    /// Foundation's bridged `(… error N.)` tail.
    static func internals(in text: String) -> [String] {
        let patterns = [#"[A-Za-z0-9]+Error\.[A-Za-z]+"#, #"\.swift:\d+"#, #"[A-Za-z]+Error error -?\d+"#, "NSCocoaErrorDomain"]
        return patterns.compactMap { pattern in
            text.range(of: pattern, options: .regularExpression).map { String(text[$0]) }
        }
    }

    /// Exit 2, one `pinning:` line mentioning `words`, nothing internal.
    static func expectRefusal(_ run: CLIRun, mentions words: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(run.status == 2, "\(run)", sourceLocation: sourceLocation)
        #expect(run.stderr.hasPrefix("pinning: "), "\(run)", sourceLocation: sourceLocation)
        for word in words {
            #expect(run.stderr.contains(word), "\(word) in \(run)", sourceLocation: sourceLocation)
        }
        #expect(Self.internals(in: run.stderr).isEmpty, "internals \(Self.internals(in: run.stderr)) in \(run)", sourceLocation: sourceLocation)
    }

    @Test("the matcher itself finds what the old messages carried")
    func matcherFindsInternals() {
        #expect(!Self.internals(in: "TestPKIError.keyDoesNotMatchCertificate: the private key does not belong to CN=x (PinningPKI/TestIdentity.swift:23)").isEmpty)
        #expect(!Self.internals(in: "CertificateError.unsupportedPrivateKey: no key X509/Certificate.swift:9").isEmpty)
        #expect(!Self.internals(in: "not a record (The operation could not be completed. (Swift.DecodingError error 1.))").isEmpty)
        #expect(Self.internals(in: "NAME srv: pki/srv.key is not the private key of pki/srv.pem (CN=api.test)").isEmpty)
    }

    @Test("a key that is not the certificate's, in export, issue and crl; a file that is no key; a broken revocation record")
    func refusalsInWords() async throws {
        let fixture = try await PKIFixture.make()
        defer { fixture.directory.remove() }
        let pki = fixture.pki

        // export: srv.key replaced by cli's key.
        try FileManager.default.removeItem(atPath: fixture.file("srv.key"))
        try FileManager.default.copyItem(atPath: fixture.file("cli.key"), toPath: fixture.file("srv.key"))
        let export = try await Executable.pinning(
            ["pki", "export", pki, "srv", "--p12", fixture.directory.path("srv.p12"), "--passphrase-file", fixture.directory.path("pass.txt")],
            in: fixture.directory)
        Self.expectRefusal(export, mentions: ["srv.key is not the private key of", "srv.pem"])
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.path("srv.p12")), "nothing written on a refusal")

        // issue and crl: the intermediate's key replaced by the root's.
        try FileManager.default.removeItem(atPath: fixture.file("int.key"))
        try FileManager.default.copyItem(atPath: fixture.file("root.key"), toPath: fixture.file("int.key"))
        let issue = try await Executable.pinning(["pki", "issue", pki, "--client", "cli2", "--issuer", "int"], in: fixture.directory)
        Self.expectRefusal(issue, mentions: ["--issuer int", "int.key is not the private key of"])
        let crl = try await Executable.pinning(["pki", "crl", pki, "--issuer", "int"], in: fixture.directory)
        Self.expectRefusal(crl, mentions: ["--issuer int", "int.key is not the private key of"])

        // A key file that holds no key.
        try "not a key\n".write(toFile: fixture.file("int.key"), atomically: true, encoding: .utf8)
        let garbage = try await Executable.pinning(["pki", "issue", pki, "--client", "cli3", "--issuer", "int"], in: fixture.directory)
        Self.expectRefusal(garbage, mentions: ["int.key is not a PEM private key"])

        // A revocation record that is not one (revoke and crl read it).
        try "{\"crlNumber\": \"seven\"}".write(toFile: fixture.file("int.revocations.json"), atomically: true, encoding: .utf8)
        let revoke = try await Executable.pinning(["pki", "revoke", pki, "cli"], in: fixture.directory)
        Self.expectRefusal(revoke, mentions: ["int.revocations.json: not a revocation record"])

        // init over a file.
        let file = try fixture.directory.write("plain-file", "x")
        let initOverFile = try await Executable.pinning(["pki", "init", file], in: fixture.directory)
        Self.expectRefusal(initOverFile, mentions: ["exists and is not a directory"])
    }
}
