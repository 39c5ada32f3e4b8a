import ArgumentParser
import Foundation
import Pinning
import PinningTestSupport
import X509

extension PinningCommand {
    /// `pinning demo`: what pinning protects against, on a throwaway PKI, in one table.
    ///
    /// This increment evaluates the chains in process, through the same evaluator every connection uses; the
    /// live TLS servers (genuine, intercepting proxy, self-signed device, mutual TLS) join it with the
    /// connection module.
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show what pinning protects against: genuine server, intercepting proxy, self-signed device.",
            discussion: "Builds a throwaway PKI in memory. Exit status 0 only when every scenario behaved as expected."
        )

        struct Scenario {
            var client: String
            var server: String
            var expectTrusted: Bool
            var verdict: TrustEvaluation
        }

        func run() async throws {
            let start = Date()
            let genuine = try TestChain(host: "api.example.com", ipAddresses: [], rootName: "Genuine Root CA", intermediateName: "Genuine Issuing CA")
            // The debugging proxy: its root is "installed" on the client, so it is in the platform roots.
            let proxyRoot = try TestPKI.root("Intercepting Proxy Root")
            let proxyLeaf = try TestPKI.leaf("api.example.com", issuer: proxyRoot, dnsNames: ["api.example.com"])
            let device = try TestPKI.selfSigned("device-7.local", dnsNames: ["device-7.local"])
            let impostorDevice = try TestPKI.selfSigned("device-7.local", dnsNames: ["device-7.local"])

            let platformRoots = TrustRoots([genuine.root.certificate, proxyRoot.certificate])
            func trust(_ chain: [Certificate]) -> ServerTrust {
                ServerTrust(certificates: chain, platformRoots: platformRoots)
            }
            let genuineChain = genuine.presented
            let interceptedChain = [proxyLeaf.certificate]
            let appendedChain = [proxyLeaf.certificate] + genuine.presented
            let backupPin = Pin(spkiOf: try TestPKI.root("Offline Backup Key").certificate)

            let unpinned = SecurityPolicy.default
            let pinned = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: genuine.intermediate.certificate), backupPin])
            var devicePolicy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [device.certificate])
            devicePolicy.allowInvalidCertificates = true

            let scenarios = [
                Scenario(client: "unpinned", server: "genuine server", expectTrusted: true,
                         verdict: await unpinned.evaluate(trust(genuineChain), forDomain: "api.example.com")),
                Scenario(client: "unpinned", server: "intercepting proxy", expectTrusted: true,
                         verdict: await unpinned.evaluate(trust(interceptedChain), forDomain: "api.example.com")),
                Scenario(client: "public-key pinned", server: "genuine server", expectTrusted: true,
                         verdict: await pinned.evaluate(trust(genuineChain), forDomain: "api.example.com")),
                Scenario(client: "public-key pinned", server: "intercepting proxy", expectTrusted: false,
                         verdict: await pinned.evaluate(trust(interceptedChain), forDomain: "api.example.com")),
                Scenario(client: "public-key pinned", server: "proxy + genuine certs appended", expectTrusted: false,
                         verdict: await pinned.evaluate(trust(appendedChain), forDomain: "api.example.com")),
                Scenario(client: "certificate pinned", server: "self-signed device", expectTrusted: true,
                         verdict: await devicePolicy.evaluate(trust([device.certificate]), forDomain: "device-7.local")),
                Scenario(client: "certificate pinned", server: "impostor device (same name)", expectTrusted: false,
                         verdict: await devicePolicy.evaluate(trust([impostorDevice.certificate]), forDomain: "device-7.local")),
            ]

            print("swift-pinning demo: one throwaway PKI, evaluated in process\n")
            print(Self.row("client", "server", "verdict", "as expected"))
            print(String(repeating: "-", count: 100))
            var allExpected = true
            for scenario in scenarios {
                let expected = scenario.verdict.isTrusted == scenario.expectTrusted
                allExpected = allExpected && expected
                let verdict = scenario.verdict.isTrusted ? "TRUSTED" : "REFUSED"
                print(Self.row(scenario.client, scenario.server, verdict, expected ? "yes" : "NO"))
                if let failure = scenario.verdict.failure {
                    print("      why: [\(failure.code)] \(failure.reason)")
                }
            }
            print(String(repeating: "-", count: 100))
            print("The unpinned client trusts the proxy: its root is installed, so the chain validates. That is the danger")
            print("pinning removes. The pinned client refuses it even when the proxy appends the genuine certificates,")
            print("because pins are matched only on the validated path.")
            print(String(format: "\n%d scenarios, %@, %.2f s", scenarios.count, allExpected ? "all as expected" : "SOME NOT AS EXPECTED", Date().timeIntervalSince(start)))
            if !allExpected {
                throw ExitCode(1)
            }
        }

        static func row(_ a: String, _ b: String, _ c: String, _ d: String) -> String {
            a.padding(toLength: 20, withPad: " ", startingAt: 0) + b.padding(toLength: 34, withPad: " ", startingAt: 0)
                + c.padding(toLength: 10, withPad: " ", startingAt: 0) + d
        }
    }
}
