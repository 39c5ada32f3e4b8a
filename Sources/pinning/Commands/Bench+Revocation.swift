import ArgumentParser
import Foundation
import Pinning
import PinningPKI
import X509

extension PinningCommand.Bench {
    /// `pinning bench revocation [--entries N] [--rounds N] [--iterations N] [--json]` (issue 14's performance
    /// figure): what checking a large CRL adds to an uncached evaluation, and what reading it costs beside
    /// `openssl crl -noout`.
    struct Revocation: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revocation",
            abstract: "Measure what a large CRL adds to an uncached evaluation, and reading it beside openssl crl.",
            discussion: """
                Makes a test PKI (root, intermediate, leaf; P-256) and a CRL from the intermediate with --entries \
                revoked serials (not the leaf's). Then, in alternating rounds in one process, times uncached \
                evaluations of the chain without revocation checking and with the CRL (hard mode, leaf scope); \
                the CRL's signature is verified once and remembered, so each evaluation pays a look-up by serial. \
                Reading: CertificateRevocationList(derEncoded:) in this process, beside `openssl crl -inform DER \
                -noout` as a whole process (and openssl's start-up alone, on a one-entry CRL), medians of the rounds.

                JSON keys: entries, crlBytes, evaluationsPerSecond, evaluationsPerSecondWithCRL, addedPercent \
                (median of the rounds' ratios), parseMilliseconds, opensslCRLMilliseconds, opensslStartMilliseconds \
                (absent without openssl), rounds.
                """
        )

        @Option(
            name: .long, parsing: .unconditional, help: ArgumentHelp("Revoked entries on the CRL, 1 to 2,000,000 (default 100,000).", valueName: "n"), transform: NumericOption.integer(1...2_000_000))
        var entries: Int = 100_000

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Alternating rounds, 1 to 100 (default 5).", valueName: "n"), transform: NumericOption.integer(1...100))
        var rounds: Int = 5

        @Option(
            name: .long, parsing: .unconditional, help: ArgumentHelp("Uncached evaluations per round and side, 1 to 1,000,000 (default 500).", valueName: "n"),
            transform: NumericOption.integer(1...1_000_000))
        var iterations: Int = 500

        @Flag(name: .long, help: "Print the result as JSON.")
        var json = false

        struct Report: Encodable {
            var entries: Int
            var crlBytes: Int
            var evaluationsPerSecond: Double
            var evaluationsPerSecondWithCRL: Double
            var addedPercent: Double
            var parseMilliseconds: Double
            var opensslCRLMilliseconds: Double?
            var opensslStartMilliseconds: Double?
            var rounds: Int
        }

        func run() async throws {
            // Before anything is made: an interrupted bench removes what it made and stops its children.
            await BenchCleanup.installHandler()
            let chain = try TestChain(host: "bench.revocation.test")
            let now = Date()
            var serials = Set<[UInt8]>()
            var entries: [TestCRL.Entry] = []
            entries.reserveCapacity(self.entries)
            var generator = SystemRandomNumberGenerator()
            while entries.count < self.entries {
                // 16-byte positive serials, as CAs issue them; never the leaf's.
                var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
                bytes[0] &= 0x7F
                bytes[0] |= 0x01
                guard serials.insert(bytes).inserted, bytes != Array(chain.leaf.certificate.serialNumber.bytes) else { continue }
                entries.append(.init(serialNumber: Certificate.SerialNumber(bytes: bytes), revocationDate: now.addingTimeInterval(-60), reason: .keyCompromise))
            }
            let made = try TestCRL(issuer: chain.intermediate, entries: entries, number: 1, thisUpdate: now.addingTimeInterval(-60), nextUpdate: now.addingTimeInterval(86400))
            let small = try TestCRL(issuer: chain.intermediate, entries: Array(entries.prefix(1)), number: 2, thisUpdate: now.addingTimeInterval(-60), nextUpdate: now.addingTimeInterval(86400))
            let crl = try CertificateRevocationList(derEncoded: made.der)

            var plain = ServerTrust(certificates: chain.presented, anchors: [chain.root.certificate], anchorsOnly: true)
            plain.validationTime = nil
            var checked = plain
            checked.revocation = RevocationPolicy(crls: [crl])
            guard await checked.evaluate(.ssl(host: "bench.revocation.test")).isTrusted,
                await plain.evaluate(.ssl(host: "bench.revocation.test")).isTrusted
            else {
                throw InputError("the benchmark chain is not trusted; nothing would be measured")
            }

            let directory = try BenchCleanup.temporaryDirectory(prefix: "pinning-bench-crl")
            defer { BenchCleanup.remove(directory) }
            let bigFile = try directory.write("big.crl", bytes: made.der)
            let smallFile = try directory.write("small.crl", bytes: small.der)

            var plainRates: [Double] = []
            var checkedRates: [Double] = []
            var ratios: [Double] = []
            var parses: [Double] = []
            var opensslBig: [Double] = []
            var opensslSmall: [Double] = []
            for _ in 0..<self.rounds {
                let a = await Self.rate(plain, iterations: self.iterations)
                let b = await Self.rate(checked, iterations: self.iterations)
                plainRates.append(a)
                checkedRates.append(b)
                ratios.append(a / b)
                let start = BenchClock.now
                _ = try CertificateRevocationList(derEncoded: made.der)
                parses.append(BenchClock.milliseconds(since: start))
                if let big = Self.timeOpenSSL(bigFile), let start = Self.timeOpenSSL(smallFile) {
                    opensslBig.append(big)
                    opensslSmall.append(start)
                }
            }
            let report = Report(
                entries: self.entries,
                crlBytes: made.der.count,
                evaluationsPerSecond: plainRates.median.rounded(),
                evaluationsPerSecondWithCRL: checkedRates.median.rounded(),
                addedPercent: ((ratios.median - 1) * 1000).rounded() / 10,
                parseMilliseconds: parses.median.rounded(places: 1),
                opensslCRLMilliseconds: opensslBig.isEmpty ? nil : opensslBig.median.rounded(places: 1),
                opensslStartMilliseconds: opensslSmall.isEmpty ? nil : opensslSmall.median.rounded(places: 1),
                rounds: self.rounds
            )
            if self.json {
                try JSONOutput.print(report)
            } else {
                print("CRL with \(report.entries) entries (\(report.crlBytes) bytes), \(self.rounds) alternating rounds of \(self.iterations) uncached evaluations")
                print("  evaluations/s without revocation  \(report.evaluationsPerSecond)")
                print("  evaluations/s with the CRL        \(report.evaluationsPerSecondWithCRL)  (+\(report.addedPercent)% time per evaluation)")
                print("  reading the CRL                   \(report.parseMilliseconds) ms in-process")
                if let big = report.opensslCRLMilliseconds, let start = report.opensslStartMilliseconds {
                    print("  openssl crl -inform DER -noout    \(big) ms whole process (\(start) ms on a one-entry CRL)")
                }
            }
        }

        /// Uncached evaluations per second of `trust`.
        static func rate(_ trust: ServerTrust, iterations: Int) async -> Double {
            let start = BenchClock.now
            for _ in 0..<iterations {
                _ = await trust.evaluate(.ssl(host: "bench.revocation.test"))
            }
            let seconds = BenchClock.seconds(since: start)
            return Double(iterations) / max(seconds, 1e-9)
        }

        /// Wall milliseconds of `openssl crl -inform DER -noout -in file`, nil when openssl is missing or fails.
        static func timeOpenSSL(_ file: String) -> Double? {
            guard FileManager.default.isExecutableFile(atPath: ChildProcess.openssl) else { return nil }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ChildProcess.openssl)
            process.arguments = ["crl", "-inform", "DER", "-noout", "-in", file]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            let start = BenchClock.now
            do {
                try process.run()
            } catch {
                return nil
            }
            BenchCleanup.started(process)
            ChildProcess.waitForExit(process)
            BenchCleanup.ended(process)
            guard process.terminationStatus == 0 else { return nil }
            return BenchClock.milliseconds(since: start)
        }
    }
}
