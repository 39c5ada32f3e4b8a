import Foundation
import Pinning
import PinningPKI
import SwiftASN1
import X509

/// Runs the SERVER cases of an x509-limbo file through the package's evaluator and prints per-namespace
/// pass/fail/skip, then `N passed, N failed, N skipped`.
///
/// Usage: `limbo [PATH] [--failures] [--id SUBSTRING] [--timeout SECONDS] [--summary FILE] [--cache] [--results FILE]
/// [--differential] [--generated N [--seed S]]`
///
/// `--cache` evaluates every case twice through one shared `EvaluationCache` (the second time answered from it
/// when the first was trusted) and reports the second verdict; a case whose two verdicts differ fails as
/// CACHE-MISMATCH. `--results FILE` writes one `id<TAB>outcome` line per case, so runs with and without
/// `--cache` can be compared line for line.
///
/// `--differential` (issue 31) evaluates every case once more, with swift-certificates' `Verifier` and its
/// `RFC5280Policy`, the reference our path builder replaced (`PathBuilderReference`), and compares with our
/// verdict: a case whose verdicts (trusted, or the refusal's code) differ is listed, and any difference exits 1.
/// `--generated N [--seed S]` compares the two on N generated chains instead of limbo's (`RandomChainGenerator`).
@main
struct LimboRunner {
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        var path: String?
        var showFailures = false
        var filter: String?
        var timeout = 5.0
        var summaryPath: String?
        var requiredPasses: Int?
        var allowedFailures: Int?
        var cache: EvaluationCache?
        var resultsPath: String?
        var differential = false
        var generated: Int?
        var seed: UInt64 = 1
        while !arguments.isEmpty {
            let argument = arguments.removeFirst()
            switch argument {
            case "--failures": showFailures = true
            case "--id": filter = arguments.isEmpty ? nil : arguments.removeFirst()
            case "--timeout": timeout = arguments.isEmpty ? timeout : Double(arguments.removeFirst()) ?? timeout
            case "--summary": summaryPath = arguments.isEmpty ? nil : arguments.removeFirst()
            case "--require-passes": requiredPasses = arguments.isEmpty ? nil : Int(arguments.removeFirst())
            case "--max-failures": allowedFailures = arguments.isEmpty ? nil : Int(arguments.removeFirst())
            case "--cache": cache = EvaluationCache(maximumEntries: 4096)
            case "--results": resultsPath = arguments.isEmpty ? nil : arguments.removeFirst()
            case "--differential": differential = true
            case "--generated": generated = arguments.isEmpty ? nil : Int(arguments.removeFirst())
            case "--seed": seed = arguments.isEmpty ? seed : UInt64(arguments.removeFirst()) ?? seed
            case "-h", "--help":
                print(
                    "usage: limbo [PATH-TO-limbo.json] [--failures] [--id SUBSTRING] [--timeout SECONDS] [--summary FILE] [--require-passes N] [--max-failures N] [--cache] [--results FILE] [--differential] [--generated N [--seed S]]"
                )
                return
            default:
                if argument.hasPrefix("-") {
                    FileHandle.standardError.write(Data("limbo: unknown option \(argument)\n".utf8))
                    exit(2)
                }
                path = argument
            }
        }
        if let generated {
            exit(await Self.generatedDifferential(count: generated, seed: seed) ? 0 : 1)
        }
        let file = path ?? Self.defaultPath()
        let suite: LimboSuite
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: file))
            suite = try JSONDecoder().decode(LimboSuite.self, from: data)
        } catch {
            FileHandle.standardError.write(Data("limbo: cannot read \(file): \(error)\n".utf8))
            exit(2)
        }

        let cases = suite.testcases.filter { testCase in
            testCase.validationKind == "SERVER" && (filter.map { testCase.id.contains($0) } ?? true)
        }
        var tally: [String: (pass: Int, fail: Int, skip: Int)] = [:]
        var skipReasons: [String: Int] = [:]
        var failures: [(id: String, expected: String, got: String, detail: String)] = []
        let started = Date()
        var slowest: (id: String, seconds: Double) = ("", 0)
        var results: [String] = []
        var differences: [(id: String, ours: String, reference: String)] = []
        for testCase in cases {
            let namespace = String(testCase.id.split(separator: ":").first ?? "")
            var counts = tally[namespace] ?? (0, 0, 0)
            if let reason = testCase.unsupportedReason {
                counts.skip += 1
                skipReasons[reason, default: 0] += 1
                tally[namespace] = counts
                results.append("\(testCase.id)\tSKIP")
                continue
            }
            let caseStart = Date()
            var outcome = await Self.run(testCase, timeout: timeout, cache: cache)
            if cache != nil {
                let again = await Self.run(testCase, timeout: timeout, cache: cache)
                if again.line != outcome.line {
                    outcome = .invalidInput("CACHE-MISMATCH: first \(outcome.line), then \(again.line)")
                } else {
                    outcome = again
                }
            }
            if differential {
                // The verdict above is ours (with --cache, the first run's); the reference runs once more.
                let ours = cache == nil ? outcome : await Self.run(testCase, timeout: timeout, cache: nil)
                let reference = await PathBuilderReference.$isActive.withValue(true) { await Self.run(testCase, timeout: timeout, cache: nil) }
                if ours.verdict != reference.verdict { differences.append((testCase.id, ours.line, reference.line)) }
            }
            results.append("\(testCase.id)\t\(outcome.line)")
            let seconds = Date().timeIntervalSince(caseStart)
            if seconds > slowest.seconds { slowest = (testCase.id, seconds) }
            let expectedSuccess = testCase.expectedResult == "SUCCESS"
            switch outcome {
            case .accepted where expectedSuccess, .rejected where !expectedSuccess:
                counts.pass += 1
            default:
                counts.fail += 1
                let (got, why) = outcome.explained(timeout: timeout)
                failures.append((testCase.id, testCase.expectedResult, got, why))
            }
            tally[namespace] = counts
        }
        let elapsed = Date().timeIntervalSince(started)

        print("x509-limbo SERVER cases from \(file)")
        print(String(repeating: "-", count: 52))
        print("namespace".padding(toLength: 22, withPad: " ", startingAt: 0) + "  pass   fail   skip")
        for namespace in tally.keys.sorted() {
            let c = tally[namespace] ?? (0, 0, 0)
            print(
                namespace.padding(toLength: 22, withPad: " ", startingAt: 0)
                    + String(format: " %5d  %5d  %5d", c.pass, c.fail, c.skip)
            )
        }
        print(String(repeating: "-", count: 52))
        if !skipReasons.isEmpty {
            print("skipped (features this evaluator does not implement):")
            for (reason, count) in skipReasons.sorted(by: { $0.key < $1.key }) {
                print("  \(count)  \(reason)")
            }
        }
        if showFailures || filter != nil {
            print("failures:")
            for failure in failures {
                print("  \(failure.id): expected \(failure.expected), got \(failure.got) \(failure.detail)")
            }
        }
        print(String(format: "wall time %.1f s; slowest case %@ (%.3f s)", elapsed, slowest.id, slowest.seconds))
        if let resultsPath {
            do {
                try (results.joined(separator: "\n") + "\n").write(toFile: resultsPath, atomically: true, encoding: .utf8)
            } catch {
                FileHandle.standardError.write(Data("limbo: cannot write \(resultsPath): \(error)\n".utf8))
            }
        }
        if let summaryPath {
            let lines = failures.map { "\($0.id)\texpected \($0.expected)\tgot \($0.got)\t\($0.detail)" }
            do {
                try (lines.joined(separator: "\n") + "\n").write(toFile: summaryPath, atomically: true, encoding: .utf8)
            } catch {
                FileHandle.standardError.write(Data("limbo: cannot write \(summaryPath): \(error)\n".utf8))
            }
        }
        if differential {
            print("differential: \(cases.count - skipReasons.values.reduce(0, +)) cases evaluated by both path builders, \(differences.count) with different verdicts")
            for difference in differences {
                print("  \(difference.id): ours \(difference.ours); swift-certificates' Verifier \(difference.reference)")
            }
        }
        let passed = tally.values.reduce(0) { $0 + $1.pass }
        let failed = tally.values.reduce(0) { $0 + $1.fail }
        let skipped = tally.values.reduce(0) { $0 + $1.skip }
        print("\(passed) passed, \(failed) failed, \(skipped) skipped")
        // Regression gate for CI: fewer passes or more failures than recorded is an error.
        if let requiredPasses, passed < requiredPasses {
            FileHandle.standardError.write(Data("limbo: \(passed) passed, fewer than the required \(requiredPasses)\n".utf8))
            exit(1)
        }
        if let allowedFailures, failed > allowedFailures {
            FileHandle.standardError.write(Data("limbo: \(failed) failed, more than the allowed \(allowedFailures)\n".utf8))
            exit(1)
        }
        if !differences.isEmpty {
            FileHandle.standardError.write(Data("limbo: \(differences.count) cases differ between the path builders\n".utf8))
            exit(1)
        }
    }

    /// Compares our path builder with swift-certificates' `Verifier` on `count` generated chains; true when every
    /// verdict agrees. Prints the tally of verdicts, so a run that trusted nothing (a generator gone wrong) shows.
    static func generatedDifferential(count: Int, seed: UInt64) async -> Bool {
        var generator = RandomChainGenerator(seed: seed)
        var verdicts: [String: Int] = [:]
        var differences = 0
        let started = Date()
        for _ in 0..<max(0, count) {
            let testCase: RandomChainCase
            do {
                testCase = try generator.next()
            } catch {
                FileHandle.standardError.write(Data("limbo: the generator failed: \(error)\n".utf8))
                return false
            }
            let trust = ServerTrust(certificates: testCase.presented, anchors: testCase.anchors, anchorsOnly: true, validationTime: testCase.validationTime)
            let ours = Self.verdict(await trust.evaluate(.ssl(host: testCase.host)))
            let reference = Self.verdict(await PathBuilderReference.$isActive.withValue(true) { await trust.evaluate(.ssl(host: testCase.host)) })
            verdicts[ours, default: 0] += 1
            if ours != reference {
                differences += 1
                print("  \(testCase.label): ours \(ours); swift-certificates' Verifier \(reference)")
            }
        }
        print("generated chains (seed \(seed)): \(count) compared in \(String(format: "%.1f", Date().timeIntervalSince(started))) s, \(differences) with different verdicts")
        for (verdict, number) in verdicts.sorted(by: { $0.value > $1.value }) { print(String(format: "%8d  %@", number, verdict)) }
        return differences == 0
    }

    /// A verdict as the differential compares it: trusted with its path's length, or the refusal's code.
    static func verdict(_ evaluation: TrustEvaluation) -> String {
        switch evaluation {
        case .trusted(let trusted): return "trusted (path of \(trusted.path.count))"
        case .untrusted(let failure): return "\(failure.code)"
        }
    }

    static func defaultPath() -> String {
        let candidates = ["../shared/x509-limbo/limbo.json", "shared/x509-limbo/limbo.json", "/work/shared/x509-limbo/limbo.json"]
        return candidates.first { FileManager.default.fileExists(atPath: $0) } ?? candidates[0]
    }

    enum Outcome: Sendable {
        case accepted
        case rejected(String)
        case timedOut
        case invalidInput(String)

        /// The verdict alone: SUCCESS, or FAILURE with the refusal's code (the words may differ between builders).
        var verdict: String {
            switch self {
            case .rejected(let why): return "FAILURE \(why.prefix { $0 != ":" })"
            default: return self.line
            }
        }

        /// The outcome's name (SUCCESS, FAILURE, TIMEOUT, INPUT-ERROR) and what explains it ("" for SUCCESS), for
        /// the list of failed cases; `timeout` is the bound a timed-out case did not meet.
        func explained(timeout: Double) -> (name: String, why: String) {
            switch self {
            case .accepted: return ("SUCCESS", "")
            case .rejected(let why): return ("FAILURE", why)
            case .timedOut: return ("TIMEOUT", "no verdict within \(timeout) s")
            case .invalidInput(let why): return ("INPUT-ERROR", why)
            }
        }

        /// The outcome on one line, for `--results`.
        var line: String {
            switch self {
            case .accepted: return "SUCCESS"
            case .rejected(let why): return "FAILURE \(why)"
            case .timedOut: return "TIMEOUT"
            case .invalidInput(let why): return "INPUT-ERROR \(why)"
            }
        }
    }

    /// Evaluates one case; a case that gives no verdict within `timeout` counts as failed.
    static func run(_ testCase: LimboCase, timeout: Double, cache: EvaluationCache?) async -> Outcome {
        let evaluation = Task { await Self.evaluate(testCase, cache: cache) }
        let timer = Task {
            try await Task.sleep(nanoseconds: UInt64(timeout * 1_000_000_000))
        }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let once = Once(continuation)
            Task {
                let outcome = await evaluation.value
                timer.cancel()
                once.resume(outcome)
            }
            Task {
                do {
                    try await timer.value
                    once.resume(.timedOut)
                } catch {
                    // Cancelled: the evaluation finished first.
                }
            }
        }
    }

    /// The system's public suffix list, read once; without one only single-label suffixes count, as the
    /// runner always did.
    static let publicSuffixList: PublicSuffixList = {
        do {
            return try PublicSuffixList(contentsOfFile: PublicSuffixList.systemPath)
        } catch {
            return .empty
        }
    }()

    static func evaluate(_ testCase: LimboCase, cache: EvaluationCache?) async -> Outcome {
        do {
            let trusted = try testCase.trustedCerts.map { try Certificate(pemEncoded: $0) }
            // An intermediate swift-certificates cannot parse (say, signed with ecdsa-with-SHA1) cannot be on a
            // path we build; dropping it can only remove paths, never add one. The leaf must parse.
            var intermediates: [Certificate] = []
            for pem in testCase.untrustedIntermediates {
                do {
                    intermediates.append(try Certificate(pemEncoded: pem))
                } catch {
                    continue
                }
            }
            let leaf = try Certificate(pemEncoded: testCase.peerCertificate)
            var limits = TrustLimits.default
            if let depth = testCase.maxChainDepth {
                limits.maximumIntermediates = depth
            }
            // A validation time that does not read is the case's input at fault, said with the reader's words
            // ("day 30 does not exist: …"): it once became nil here, and the case ran at the current time instead.
            var validationTime: Date?
            if let text = testCase.validationTime {
                do {
                    validationTime = try RFC3339.read(text)
                } catch {
                    return .invalidInput("validation_time \"\(text)\": \(error.description)")
                }
            }
            var trust = ServerTrust(
                certificates: [leaf] + intermediates,
                anchors: trusted,
                anchorsOnly: true,
                validationTime: validationTime,
                profile: .webPKI(publicSuffixList: Self.publicSuffixList),
                limits: limits
            )
            // limbo's CRL cases are about the leaf, with the CRLs a relying party was handed: hard mode (an
            // unusable CRL leaves the status unknown, which refuses), leaf scope (as `openssl verify -crl_check`).
            if let crls = testCase.crls, !crls.isEmpty {
                var lists: [CertificateRevocationList] = []
                for pem in crls {
                    do {
                        lists += try CertificateRevocationList.read(Array(pem.utf8))
                    } catch {
                        return .rejected("unreadable CRL: \(error)")
                    }
                }
                trust.revocation = RevocationPolicy(crls: lists, mode: .hard, scope: .leaf)
            }
            let namePolicy: TrustNamePolicy = testCase.expectedPeerName.map { .ssl(host: $0.value) } ?? .basicX509
            let verdict: TrustEvaluation
            if let cache {
                verdict = await trust.evaluate(namePolicy, cache: cache)
            } else {
                verdict = await trust.evaluate(namePolicy)
            }
            switch verdict {
            case .trusted:
                return .accepted
            case .untrusted(let failure):
                return .rejected("\(failure.code): \(failure.reason)")
            }
        } catch {
            // swift-certificates refuses to parse some certificates (unsupported keys, malformed fields);
            // a certificate we cannot read can never be trusted, so that is a rejection, reported as such.
            return .rejected("unparseable certificate: \(error)")
        }
    }
}

final class Once: Sendable {
    private let continuation: LockedValueBox<CheckedContinuation<LimboRunner.Outcome, Never>?>

    init(_ continuation: CheckedContinuation<LimboRunner.Outcome, Never>) { self.continuation = LockedValueBox(continuation) }

    func resume(_ outcome: LimboRunner.Outcome) {
        let continuation = self.continuation.withLockedValue { stored in
            defer { stored = nil }
            return stored
        }
        continuation?.resume(returning: outcome)
    }
}

struct LimboSuite: Decodable {
    var testcases: [LimboCase]
}

struct LimboCase: Decodable, Sendable {
    struct PeerName: Decodable, Sendable {
        var kind: String
        var value: String
    }

    var id: String
    var features: [String]?
    var validationKind: String
    var trustedCerts: [String]
    var untrustedIntermediates: [String]
    var peerCertificate: String
    var validationTime: String?
    var signatureAlgorithms: [String]?
    var keyUsage: [String]?
    var extendedKeyUsage: [String]?
    var expectedResult: String
    var expectedPeerName: PeerName?
    var maxChainDepth: Int?
    var crls: [String]?

    enum CodingKeys: String, CodingKey {
        case id, features, crls
        case validationKind = "validation_kind"
        case trustedCerts = "trusted_certs"
        case untrustedIntermediates = "untrusted_intermediates"
        case peerCertificate = "peer_certificate"
        case validationTime = "validation_time"
        case signatureAlgorithms = "signature_algorithms"
        case keyUsage = "key_usage"
        case extendedKeyUsage = "extended_key_usage"
        case expectedResult = "expected_result"
        case expectedPeerName = "expected_peer_name"
        case maxChainDepth = "max_chain_depth"
    }

    /// Why this case cannot be expressed with this evaluator, or nil. Only real gaps: a failure is never
    /// turned into a skip.
    var unsupportedReason: String? {
        if let signatureAlgorithms, !signatureAlgorithms.isEmpty { return "a custom signature-algorithm set" }
        if let keyUsage, !keyUsage.isEmpty { return "caller-required keyUsage bits (\(keyUsage.joined(separator: ",")))" }
        if let extendedKeyUsage, !extendedKeyUsage.isEmpty, extendedKeyUsage != ["serverAuth"] {
            return "caller-required extendedKeyUsage other than serverAuth"
        }
        if features?.contains("name-constraint-dn") == true {
            return "directoryName name constraints (swift-certificates does not implement them; such paths are refused)"
        }
        if features?.contains("rfc5280-incompatible-with-webpki") == true {
            return "RFC 5280 behaviour that contradicts the webPKI profile this runner uses"
        }
        if let name = expectedPeerName, name.kind != "DNS", name.kind != "IP" {
            return "peer names of kind \(name.kind)"
        }
        return nil
    }
}
