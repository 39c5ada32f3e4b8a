import Foundation
import Pinning
import PinningPKI
import PinningTestSupport
import Testing
import X509

// Issuing revocation lists (issue 14): `pinning pki revoke` and `pinning pki crl`, judged by OpenSSL, which we did
// not write: `openssl crl -verify` accepts the signature and `openssl verify -crl_check` (and -crl_check_all)
// refuses exactly the revoked certificates.

@Suite("pinning pki revoke and pki crl, checked by openssl", .serialized, .enabled(if: CLI.hasOpenSSL, "needs /usr/bin/openssl"))
struct PKIRevocationCLITests {
    @Test("a revoked device is refused by openssl verify -crl_check, the others pass; CRL numbers increase; EC and RSA CAs", arguments: ["ec", "rsa"])
    func revokeAndPublish(_ key: String) async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-pki-crl")
        defer { directory.remove() }
        let pki = directory.path("pki")
        func pinning(_ arguments: [String]) async throws -> CLIRun {
            try await Executable.pinning(arguments, in: directory)
        }
        for step in [
            ["pki", "init", pki, "--key", key], ["pki", "issue", pki, "--intermediate", "issuing", "--key", key],
            ["pki", "issue", pki, "--client", "device-1", "--issuer", "issuing"], ["pki", "issue", pki, "--client", "device-2", "--issuer", "issuing"],
            ["pki", "issue", pki, "--server", "api.test", "--issuer", "issuing"],
        ] {
            let run = try await pinning(step)
            try #require(run.status == 0, "\(run)")
        }
        let revoked = try await pinning(["pki", "revoke", pki, "device-1", "--reason", "keyCompromise", "--at", "2026-01-02T03:04:05Z"])
        #expect(revoked.status == 0 && revoked.stdout.contains("revoked \"device-1\""), "\(revoked)")
        let first = try await pinning(["pki", "crl", pki, "--issuer", "issuing"])
        #expect(first.status == 0 && first.stdout.contains("number 1, 1 revoked"), "\(first)")
        let rootCRL = try await pinning(["pki", "crl", pki])
        #expect(rootCRL.status == 0 && rootCRL.stdout.contains("CRL of \"root\": number 1, 0 revoked"), "\(rootCRL)")

        let ca = try directory.write(
            "ca.pem",
            try String(contentsOfFile: "\(pki)/root.pem", encoding: .utf8) + String(contentsOfFile: "\(pki)/issuing.pem", encoding: .utf8))
        let signature = try await Executable.openssl(["crl", "-in", "\(pki)/issuing.crl.pem", "-CAfile", "\(pki)/issuing.pem", "-noout", "-verify"], in: directory)
        #expect(signature.status == 0 && (signature.stdout + signature.stderr).contains("verify OK"), "\(signature)")
        let der = try await Executable.openssl(["crl", "-inform", "DER", "-in", "\(pki)/issuing.crl", "-noout", "-text"], in: directory)
        #expect(der.status == 0 && der.stdout.contains("CRL Number:") && der.stdout.contains("Key Compromise"), "\(der)")
        #expect(der.stdout.contains("Revocation Date: Jan  2 03:04:05 2026 GMT"), "\(der.stdout)")

        func verify(_ name: String, all: Bool) async throws -> CLIRun {
            var arguments = ["verify", all ? "-crl_check_all" : "-crl_check", "-CAfile", ca, "-CRLfile", "\(pki)/issuing.crl.pem"]
            if all { arguments += ["-CRLfile", "\(pki)/root.crl.pem"] }
            return try await Executable.openssl(arguments + ["\(pki)/\(name).pem"], in: directory)
        }
        for all in [false, true] {
            let refused = try await verify("device-1", all: all)
            #expect(refused.status != 0 && (refused.stdout + refused.stderr).contains("certificate revoked"), "\(refused)")
            for name in ["device-2", "api.test"] {
                let accepted = try await verify(name, all: all)
                #expect(accepted.status == 0, "\(name): \(accepted)")
            }
        }

        // inspect shows the CRL's facts, from PEM and from DER, and in JSON beside any certificates.
        let shown = try await pinning(["inspect", "\(pki)/issuing.crl.pem", "\(pki)/issuing.crl"])
        #expect(shown.status == 0, "\(shown)")
        #expect(shown.stdout.components(separatedBy: "certificate revocation list").count == 3, "\(shown.stdout)")
        #expect(shown.stdout.contains("  issuer       CN=issuing") && shown.stdout.contains("  CRL number   0x01"), "\(shown.stdout)")
        #expect(shown.stdout.contains("2026-01-02T03:04:05Z  keyCompromise"), "\(shown.stdout)")
        let json = try await pinning(["inspect", "--json", "\(pki)/issuing.crl", "\(pki)/device-1.pem"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json)")
        #expect((object["certificates"] as? [Any])?.count == 1)
        let listed = try #require((object["crls"] as? [[String: Any]])?.first)
        #expect(listed["revokedCount"] as? Int == 1 && listed["crlNumber"] as? String == "01" && listed["unusable"] == nil, "\(listed)")
        let broken = try directory.write("broken.crl.pem", "-----BEGIN X509 CRL-----\nMAMCAQA=\n-----END X509 CRL-----\n")
        let refused = try await pinning(["inspect", broken])
        #expect(refused.status == 2 && refused.stderr.contains("\(broken): not a usable CRL file"), "\(refused)")

        // The next CRL has the next number and still lists device-1, now with device-2.
        _ = try await pinning(["pki", "revoke", pki, "device-2"])
        let second = try await pinning(["pki", "crl", pki, "--issuer", "issuing", "--days", "1"])
        #expect(second.status == 0 && second.stdout.contains("number 2, 2 revoked"), "\(second)")
        let text = try await Executable.openssl(["crl", "-in", "\(pki)/issuing.crl.pem", "-noout", "-text"], in: directory)
        #expect(text.stdout.contains("CRL Number: \n                2") || text.stdout.contains("CRL Number:\n                2"), "\(text.stdout)")
        let both = try await verify("device-2", all: false)
        #expect(both.status != 0 && (both.stdout + both.stderr).contains("certificate revoked"), "\(both)")
    }

    @Test("bad input exits 2 naming what is wrong")
    func badInput() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-pki-crl")
        defer { directory.remove() }
        let pki = directory.path("pki")
        _ = try await Executable.pinning(["pki", "init", pki], in: directory)
        _ = try await Executable.pinning(["pki", "issue", pki, "--client", "device-1"], in: directory)
        _ = try await Executable.pinning(["pki", "revoke", pki, "device-1"], in: directory)
        for (arguments, expected) in [
            (["pki", "revoke", pki, "device-1"], "already revoked on"),
            (["pki", "revoke", pki, "root"], "a self-signed root cannot be revoked"),
            (["pki", "revoke", pki, "nobody"], "does not exist"),
            (
                ["pki", "revoke", pki, "device-1", "--reason", "stolen"],
                "--reason: unknown reason \"stolen\"; use keyCompromise, affiliationChanged, superseded, cessationOfOperation or certificateHold"
            ),
            (["pki", "revoke", pki, "device-1", "--at", "yesterday"], "--at: \"yesterday\" is not an RFC 3339 instant"),
            (["pki", "revoke", pki, "device-1", "--at", "2026-02-30T00:00:00Z"], "day 30 does not exist: February 2026 has 28 days"),
            (["pki", "crl", pki, "--days", "0"], "--days"),
            (["pki", "crl", pki, "--issuer", "device-9"], "--issuer device-9"),
        ] {
            let run = try await Executable.pinning(arguments, in: directory)
            #expect(run.status == 2, "\(run)")
            #expect(run.stderr.contains(expected), "\(run)")
        }
        try directory.write("pki/root.revocations.json", "{not json")
        let broken = try await Executable.pinning(["pki", "crl", pki], in: directory)
        #expect(broken.status == 2 && broken.stderr.contains("root.revocations.json: not a revocation record"), "\(broken)")
        // An impossible revocation date in the record is refused with the reason, as --at refuses it.
        try directory.write("pki/root.revocations.json", #"{"crlNumber": 1, "revoked": [{"name": "device-1", "serial": "0A1B", "revocationDate": "2026-02-30T00:00:00Z"}]}"#)
        let impossible = try await Executable.pinning(["pki", "crl", pki], in: directory)
        #expect(impossible.status == 2, "\(impossible)")
        #expect(
            impossible.stderr.contains(
                "root.revocations.json: the entry for device-1 has a bad serial or date (revocationDate \"2026-02-30T00:00:00Z\": day 30 does not exist: February 2026 has 28 days)"),
            "\(impossible)")
        try directory.write("pki/root.revocations.json", #"{"crlNumber": 1, "revoked": [{"name": "device-1", "serial": "0A1", "revocationDate": "2026-02-01T00:00:00Z"}]}"#)
        let oddSerial = try await Executable.pinning(["pki", "crl", pki], in: directory)
        #expect(oddSerial.status == 2 && oddSerial.stderr.contains("the entry for device-1 has a bad serial or date (serial \"0A1\": "), "\(oddSerial)")
    }

    @Test("TestCRL from every key type the PKI mints (P-256, P-384, RSA, Ed25519) verifies with openssl")
    func everyKeyType() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-testcrl")
        defer { directory.remove() }
        for key in [TestKeyType.p256, .p384, .rsa2048, .ed25519] {
            let root = try TestPKI.root("CRL Root \(key)", key: key)
            let leaf = try TestPKI.leaf("revoked.test", issuer: root, dnsNames: ["revoked.test"])
            let crl = try TestCRL(
                issuer: root, entries: [TestCRL.Entry(serialNumber: leaf.certificate.serialNumber, revocationDate: Date(), reason: .superseded)], number: 7,
                thisUpdate: Date().addingTimeInterval(-60), nextUpdate: Date().addingTimeInterval(3600))
            let crlPath = try directory.write("\(key).crl.pem", crl.pem)
            let rootPath = try directory.write("\(key)-root.pem", root.certificatePEM)
            let leafPath = try directory.write("\(key)-leaf.pem", leaf.certificatePEM)
            let signature = try await Executable.openssl(["crl", "-in", crlPath, "-CAfile", rootPath, "-noout", "-verify"], in: directory)
            #expect(signature.status == 0 && (signature.stdout + signature.stderr).contains("verify OK"), "\(key): \(signature)")
            let refused = try await Executable.openssl(["verify", "-crl_check", "-CAfile", rootPath, "-CRLfile", crlPath, leafPath], in: directory)
            #expect((refused.stdout + refused.stderr).contains("certificate revoked"), "\(key): \(refused)")
        }
    }
}
