import Foundation
import Pinning
import PinningPKI
import PinningTestSupport
import Testing

// Issue 27, item 15: `config lint` names the CRL file of every revocation problem (a stale CRL's problem named its
// issuer only), and refuses a CRL signed by an issuer the entry cannot reach (it was only a warning; issue 14 asked
// for "signed by an anchor or intermediate the entry can reach").

@Suite("config lint: revocation problems name the CRL file; a CRL of an issuer the entry cannot reach is refused")
struct ConfigLintRevocationCLITests {
    /// root → issuing CA, and an unrelated CA; CRL files of each, fresh or stale.
    struct Setup {
        let directory: TemporaryDirectory
        let root: TestIdentity
        let issuing: TestIdentity
        let unrelated: TestIdentity

        init() throws {
            let directory = try TemporaryDirectory(prefix: "pinning-lint-crl")
            self.directory = directory
            // Until the fixture is whole no test holds it: a step that throws removes the directory here.
            var ready = false
            defer { if !ready { directory.remove() } }
            self.root = try TestPKI.root("Lint Fleet Root")
            self.issuing = try TestPKI.intermediate("Lint Fleet Issuing CA", issuer: self.root)
            self.unrelated = try TestPKI.root("Lint Unrelated CA")
            _ = try self.directory.write("root.pem", self.root.certificatePEM)
            ready = true
        }

        /// A CRL of `issuer` valid from a day ago for `days` (negative: stale), PEM unless `der`.
        func crl(_ name: String, issuer: TestIdentity, days: Double = 30, beside: [TestIdentity] = [], der: Bool = false) throws -> String {
            let now = Date()
            let crl = try TestCRL(
                issuer: issuer, entries: [], number: 1, thisUpdate: now.addingTimeInterval(-86400 * max(2, -days + 1)),
                nextUpdate: now.addingTimeInterval(86400 * days))
            if der { return try self.directory.write(name, bytes: crl.der) }
            return try self.directory.write(name, beside.map(\.certificatePEM).joined() + crl.pem)
        }

        func config(_ name: String, crls: [String]) throws -> String {
            let pins = [Pin(spkiOf: self.root.certificate).description, "sha256/" + Data(repeating: 0x41, count: 32).base64EncodedString()]
            let list = crls.map { "\"\(($0 as NSString).lastPathComponent)\"" }.joined(separator: ", ")
            return try self.directory.write(
                name,
                """
                {"version": 1, "domains": {"device.fleet.test": {"pins": ["\(pins[0])", "\(pins[1])"], "anchors": ["root.pem"], "anchorsOnly": true,
                  "revocation": {"crls": [\(list)], "mode": "hard"}}}}
                """)
        }

        func lint(_ config: String) async throws -> CLIRun {
            try await Executable.pinning(["config", "lint", config], in: self.directory)
        }
    }

    @Test("a stale CRL's problem names its file (and its position in crls), not only its issuer")
    func staleNamesTheFile() async throws {
        let setup = try Setup()
        defer { setup.directory.remove() }
        let fresh = try setup.crl("root-fresh.crl.pem", issuer: setup.root)
        let stale = try setup.crl("root-stale.crl.pem", issuer: setup.root, days: -3)
        let run = try await setup.lint(try setup.config("stale.json", crls: [fresh, stale]))
        #expect(run.status == 2, "\(run)")
        #expect(
            run.stderr.contains(#"domains["device.fleet.test"].revocation.crls[1]: root-stale.crl.pem: the CRL of CN=Lint Fleet Root is stale: its nextUpdate was"#),
            "\(run)")
        #expect(!run.stderr.contains("root-fresh.crl.pem"), "only the stale file is named: \(run)")
    }

    @Test("a CRL of an issuer the entry cannot reach is refused, naming the file; an anchor's or a shown intermediate's passes")
    func unreachableIssuerRefused() async throws {
        let setup = try Setup()
        defer { setup.directory.remove() }

        // An unrelated CA's CRL: refused (exit 2), the file named. Also when its own certificate sits beside it:
        // no anchor issued that one.
        for (name, beside) in [("unrelated.crl.pem", [TestIdentity]()), ("unrelated-with-ca.crl.pem", [setup.unrelated])] {
            let crl = try setup.crl(name, issuer: setup.unrelated, beside: beside)
            let run = try await setup.lint(try setup.config("\(name).json", crls: [crl]))
            #expect(run.status == 2, "\(name): \(run)")
            #expect(run.stderr.contains("revocation.crls[0]: \(name): the CRL of CN=Lint Unrelated CA is not from a CA the entry can reach"), "\(name): \(run)")
        }

        // The issuing CA's CRL alone (DER): the entry's anchors do not show that it can reach that CA.
        let alone = try setup.crl("issuing.crl", issuer: setup.issuing, der: true)
        let aloneRun = try await setup.lint(try setup.config("alone.json", crls: [alone]))
        #expect(aloneRun.status == 2 && aloneRun.stderr.contains("issuing.crl: the CRL of CN=Lint Fleet Issuing CA is not from a CA the entry can reach"), "\(aloneRun)")

        // With the issuing CA's certificate beside its CRL (PEM): the root issued it, so the entry reaches it.
        let shown = try setup.crl("issuing-shown.crl.pem", issuer: setup.issuing, beside: [setup.issuing])
        let shownRun = try await setup.lint(try setup.config("shown.json", crls: [shown]))
        #expect(shownRun.status == 0, "\(shownRun)")
        #expect(shownRun.stdout.contains("revocation hard/leaf, 1 CRL"), "\(shownRun)")

        // The anchor's own CRL passes as before.
        let rootCRL = try setup.crl("root.crl.pem", issuer: setup.root)
        let rootRun = try await setup.lint(try setup.config("root.json", crls: [rootCRL]))
        #expect(rootRun.status == 0, "\(rootRun)")
        #expect(!rootRun.stdout.contains("warning"), "\(rootRun)")
    }
}
