import Foundation
import Pinning
import PinningTestSupport
import Testing

/// Issue 11, item 1, through `pinning evaluate` with an OpenSSL-made PKI: OpenSSL signs whatever it is asked
/// to, so it can make the attacker's chain (a leaf signed by an ordinary certificate under the pinned CA).
/// With `--allow-invalid-certificates` that chain must still be refused, in public-key and certificate mode.
@Suite("allow-invalid-certificates keeps the issuer rules (OpenSSL-made chains)", .enabled(if: CLITests.opensslAvailable))
struct AllowInvalidCLITests {
    static func makePKI() async throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory(prefix: "pinning-allow-invalid")
        // The caller removes it once it has it; until then (a step failing) it goes here.
        var made = false
        defer { if !made { directory.remove() } }
        func write(_ name: String, _ text: String) throws {
            try text.write(toFile: directory.path(name), atomically: true, encoding: .utf8)
        }
        func openssl(_ arguments: [String]) async throws {
            let run = try await Executable.openssl(arguments, in: directory)
            try #require(run.status == 0, "\(run)")
        }
        func key(_ name: String) async throws {
            try await openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "\(name).key"])
        }
        func issue(_ name: String, subject: String, issuer: String, extensions: String) async throws {
            try await key(name)
            try write("\(name).ext", extensions)
            try await openssl(["req", "-new", "-key", "\(name).key", "-subj", subject, "-out", "\(name).csr"])
            try await openssl([
                "x509", "-req", "-in", "\(name).csr", "-CA", "\(issuer).pem", "-CAkey", "\(issuer).key", "-set_serial", "\(UInt32.random(in: 1...UInt32.max))",
                "-days", "30", "-extfile", "\(name).ext", "-out", "\(name).pem",
            ])
        }
        for root in ["root", "other-root"] {
            try await key(root)
            try await openssl([
                "req", "-x509", "-key", "\(root).key", "-subj", "/CN=\(root)", "-days", "30", "-out", "\(root).pem",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ])
        }
        try await issue(
            "pinned-ca", subject: "/CN=Pinned CA", issuer: "root",
            extensions: "basicConstraints=critical,CA:TRUE,pathlen:1\nkeyUsage=critical,keyCertSign,cRLSign\n")
        // An ordinary device certificate under the pinned CA: not a CA.
        try await issue(
            "device", subject: "/CN=device-7", issuer: "pinned-ca",
            extensions: "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nsubjectAltName=DNS:device-7.example\n")
        // The attacker signs a leaf for the victim with the device key.
        let leafExtensions = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:victim.example\n"
        try await issue("forged", subject: "/CN=victim.example", issuer: "device", extensions: leafExtensions)
        try await issue("genuine", subject: "/CN=victim.example", issuer: "pinned-ca", extensions: leafExtensions)
        let pem = { (name: String) in try String(contentsOfFile: directory.path("\(name).pem"), encoding: .utf8) }
        try write("forged-chain.pem", try pem("forged") + pem("device") + pem("pinned-ca") + pem("root"))
        try write("genuine-chain.pem", try pem("genuine") + pem("pinned-ca") + pem("root"))
        made = true
        return directory
    }

    @Test("public-key and certificate pinning refuse the forged chain and trust the genuine one")
    func forgedChainRefused() async throws {
        let directory = try await Self.makePKI()
        defer { directory.remove() }
        // The client knows another root only: the pinned CA's chain does not validate, as with a private PKI.
        let common = ["--host", "victim.example", "--roots", "other-root.pem", "--allow-invalid-certificates", "--json"]
        for mode in [["--mode", "public-key", "--pin", "pinned-ca.pem"], ["--mode", "certificate", "--pin", "pinned-ca.pem"]] {
            let forged = try await Executable.pinning(["evaluate", "--chain", "forged-chain.pem"] + mode + common, in: directory)
            #expect(forged.status == 1, "\(forged)")
            #expect(forged.stdout.contains("\"constraintViolation\""), "\(forged)")
            #expect(forged.stdout.contains("is not a CA"), "\(forged)")

            let genuine = try await Executable.pinning(["evaluate", "--chain", "genuine-chain.pem"] + mode + common, in: directory)
            #expect(genuine.status == 0, "\(genuine)")
        }
    }
}
