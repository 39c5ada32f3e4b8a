import ArgumentParser
import Crypto
import Foundation
import Pinning
import PinningPKI
import SwiftASN1
import X509
import _CryptoExtras

extension PinningCommand.Bench {
    /// `pinning bench hostile [--iterations N] [--unbounded] [--write DIR] [--json]` (issue 27): the CPU one
    /// evaluation of a hostile chain costs, for the worst chains we can build, and what one signature check costs
    /// by key type (the weights of the signature-check budget).
    struct Hostile: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "hostile",
            abstract: "Measure the CPU one evaluation of a hostile same-subject chain costs, and signature checks by key type.",
            discussion: """
                Builds same-subject meshes (every CA certificate has one name and carries one key signed by \
                another): 8 keys in full (56 cross-signed certificates and the leaf), and samples of 16- and \
                64-key meshes filling the 64-certificate limit, P-256, plus an 8-key P-384 mesh. Each is evaluated \
                unanchored (the anchor is unrelated) and anchored (the anchor is one of the mesh's keys and the \
                host name refuses every complete path), and the process CPU time of each evaluation is measured. \
                --unbounded lifts the signature-check and candidate bounds (the look-up limit stays), which is how \
                evaluation behaved before issue 27. --write DIR also writes each mesh as PEM files (chain, anchor, \
                unrelated anchor) for `pinning evaluate` and `openssl verify`.

                JSON keys: meshes (name, keys, presented, anchored, code, reason, cpuMillisecondsMax, \
                cpuMillisecondsMedian), signatureChecks (key, microseconds, units).
                """
        )

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Evaluations per mesh, 1 to 1,000 (default 5).", valueName: "n"), transform: NumericOption.integer(1...1000))
        var iterations: Int = 5

        @Flag(name: .long, help: "Lift the signature-check and per-look-up bounds (the behaviour before issue 27; slow).")
        var unbounded = false

        @Option(name: .long, help: ArgumentHelp("Also write each mesh as PEM files into this directory.", valueName: "dir"))
        var write: String?

        @Flag(name: .long, help: "Print the result as JSON.")
        var json = false

        struct MeshReport: Encodable {
            var name: String
            var keys: Int
            var presented: Int
            var anchored: Bool
            var code: String
            var reason: String
            var cpuMillisecondsMax: Double
            var cpuMillisecondsMedian: Double
        }

        struct CheckReport: Encodable {
            var key: String
            var microseconds: Double
            var units: Int
        }

        struct Report: Encodable {
            var meshes: [MeshReport]
            var signatureChecks: [CheckReport]
        }

        func run() async throws {
            // Before anything is made: an interrupted bench removes what it made and stops its children.
            await BenchCleanup.installHandler()
            var limits = TrustLimits.default
            if self.unbounded {
                limits.maximumSignatureChecks = Int.max
                limits.maximumIssuerCandidates = Int.max
            }
            let unrelated = try TestPKI.root("Unrelated Root CA")
            let shapes: [(name: String, keys: Int, presenting: Int?, key: TestKeyType)] = [
                ("8 keys, full", 8, nil, .p256),
                ("16 keys, 63 sampled", 16, 63, .p256),
                ("64 keys, 63 sampled", 64, 63, .p256),
                ("8 keys P-384, 40 sampled", 8, 40, .p384),
            ]
            var meshes: [MeshReport] = []
            for shape in shapes {
                let mesh = try SameSubjectMesh(keys: shape.keys, presenting: shape.presenting, key: shape.key)
                if let directory = self.write {
                    do {
                        try Self.write(mesh, unrelated: unrelated, named: "mesh-\(shape.keys)-\(shape.key)", into: directory)
                    } catch {
                        let reason = (error as NSError).localizedDescription
                        throw InputError("--write \(directory): cannot write the mesh's PEM files there (\(reason))")
                    }
                }
                for anchored in [false, true] {
                    let anchors = anchored ? [mesh.keys[shape.keys - 1].certificate] : [unrelated.certificate]
                    let host = anchored ? "other.example" : "mesh.example"
                    let trust = ServerTrust(certificates: mesh.presented, anchors: anchors, anchorsOnly: true, limits: limits)
                    var times: [Double] = []
                    var verdict: TrustEvaluation?
                    for _ in 0..<self.iterations {
                        let start = Self.processCPUNanoseconds()
                        verdict = await trust.evaluate(.ssl(host: host))
                        times.append(Double(Self.processCPUNanoseconds() - start) / 1e6)
                    }
                    let failure = verdict?.failure
                    meshes.append(
                        MeshReport(
                            name: shape.name,
                            keys: shape.keys,
                            presented: mesh.presented.count,
                            anchored: anchored,
                            code: failure.map { "\($0.code)" } ?? "trusted",
                            reason: failure?.reason ?? "",
                            cpuMillisecondsMax: (times.max() ?? 0).rounded(places: 2),
                            cpuMillisecondsMedian: times.median.rounded(places: 2)
                        )
                    )
                }
            }
            let report = Report(meshes: meshes, signatureChecks: try Self.signatureCosts())
            if self.json {
                try JSONOutput.print(report)
                return
            }
            print("Hostile same-subject chains, \(self.iterations) evaluations each\(self.unbounded ? " (unbounded: as before issue 27)" : ""); CPU per evaluation")
            for mesh in report.meshes {
                print(
                    "  \(mesh.name.padding(toLength: 26, withPad: " ", startingAt: 0)) \(mesh.anchored ? "anchored  " : "unanchored")  max \(mesh.cpuMillisecondsMax) ms, median \(mesh.cpuMillisecondsMedian) ms  \(mesh.code)"
                )
            }
            print("One signature check by key type (the budget's weights, in P-256 units)")
            for check in report.signatureChecks {
                print("  \(check.key.padding(toLength: 10, withPad: " ", startingAt: 0)) \(check.microseconds) µs  charged \(check.units)")
            }
        }

        /// CPU time of the whole process (the benchmark runs nothing else), in nanoseconds.
        static func processCPUNanoseconds() -> UInt64 {
            var time = timespec()
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
            return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
        }

        /// Median microseconds of one certificate signature check per key type, beside the units the budget
        /// charges for it.
        static func signatureCosts() throws -> [CheckReport] {
            var keys: [(String, Certificate.PrivateKey, Certificate.SignatureAlgorithm)] = [
                ("P-256", Certificate.PrivateKey(P256.Signing.PrivateKey()), .ecdsaWithSHA256),
                ("Ed25519", Certificate.PrivateKey(Curve25519.Signing.PrivateKey()), .ed25519),
                ("P-384", Certificate.PrivateKey(P384.Signing.PrivateKey()), .ecdsaWithSHA384),
                ("P-521", Certificate.PrivateKey(P521.Signing.PrivateKey()), .ecdsaWithSHA512),
            ]
            for bits in [2048, 3072, 4096] {
                keys.append(("RSA-\(bits)", Certificate.PrivateKey(try _RSA.Signing.PrivateKey(keySize: .init(bitCount: bits))), .sha256WithRSAEncryption))
            }
            var reports: [CheckReport] = []
            for (name, key, algorithm) in keys {
                let subject = try DistinguishedName { CommonName("Signature cost \(name)") }
                let certificate = try Certificate(
                    version: .v3,
                    serialNumber: Certificate.SerialNumber(),
                    publicKey: key.publicKey,
                    notValidBefore: Date(),
                    notValidAfter: Date().addingTimeInterval(3600),
                    issuer: subject,
                    subject: subject,
                    signatureAlgorithm: algorithm,
                    extensions: Certificate.Extensions(),
                    issuerPrivateKey: key
                )
                var samples: [Double] = []
                for _ in 0..<200 {
                    let start = BenchClock.now
                    guard key.publicKey.isValidSignature(certificate.signature, for: certificate) else {
                        throw InputError("a \(name) signature did not verify; nothing would be measured")
                    }
                    samples.append(BenchClock.microseconds(since: start))
                }
                reports.append(CheckReport(key: name, microseconds: samples.median.rounded(places: 2), units: TrustLimits.signatureCheckCost(of: key.publicKey)))
            }
            return reports
        }

        static func write(_ mesh: SameSubjectMesh, unrelated: TestIdentity, named name: String, into directory: String) throws {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            func save(_ file: String, _ certificates: [Certificate]) throws {
                try TestPKI.pemBundle(certificates).write(toFile: (directory as NSString).appendingPathComponent(file), atomically: true, encoding: .utf8)
            }
            try save("\(name)-chain.pem", mesh.presented)
            try save("\(name)-leaf.pem", [mesh.leaf.certificate])
            try save("\(name)-untrusted.pem", mesh.crossSigned)
            try save("\(name)-anchor.pem", [mesh.keys[mesh.keys.count - 1].certificate])
            try save("\(name)-unrelated-anchor.pem", [unrelated.certificate])
        }
    }
}
