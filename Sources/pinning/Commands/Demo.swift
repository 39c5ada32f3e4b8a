import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Pinning
import PinningNIO
import PinningPKI
import X509

extension PinningCommand {
    /// `pinning demo`: what pinning protects against, on this machine, with real TLS servers on 127.0.0.1.
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "demo",
            abstract: "Show what pinning protects against: real servers on 127.0.0.1, real pinned clients.",
            discussion: """
                Builds a throwaway PKI in a temporary directory and starts four HTTPS servers on 127.0.0.1: the genuine \
                server, an intercepting proxy whose root the client has installed (the debugging-proxy scenario), a \
                self-signed device, and a mutual-TLS server. Then runs the clients and prints what happened.

                Exit status 0 only when every scenario behaved as expected; everything is cleaned up.
                """
        )

        struct Outcome {
            var scenario: String
            var expected: String
            var got: String
            var detail: String
            var asExpected: Bool
        }

        @OptionGroup var keyLogOptions: KeyLogOptions

        func run() async throws {
            let start = Date()
            let keyLog = try self.keyLogOptions.open(command: "demo")
            let directory = try TemporaryDirectory(prefix: "pinning-demo")
            defer { directory.remove() }
            var world = try DemoWorld(directory: directory)
            world.keyLog = keyLog
            let servers = try await world.startServers()
            var outcomes: [Outcome] = []
            do {
                outcomes = await world.runScenarios(servers)
            }
            await servers.stop()

            print("swift-pinning demo: a throwaway PKI and four HTTPS servers on 127.0.0.1\n")
            print(Self.row("scenario", "expected", "got", "ok"))
            print(String(repeating: "-", count: 108))
            for outcome in outcomes {
                print(Self.row(outcome.scenario, outcome.expected, outcome.got, outcome.asExpected ? "yes" : "NO"))
                if !outcome.detail.isEmpty { print("      \(outcome.detail)") }
            }
            print(String(repeating: "-", count: 108))
            print(
                """
                The unpinned client accepts the proxy: its root is installed, so the chain validates. That is the danger
                pinning removes. The pinned client refuses it, also when the proxy appends the genuine certificates,
                because pins count only on the validated path.
                """)
            let allExpected = !outcomes.isEmpty && outcomes.allSatisfy(\.asExpected)
            print(String(format: "\n%d scenarios, %@, %.1f s", outcomes.count, allExpected ? "all as expected" : "SOME NOT AS EXPECTED", Date().timeIntervalSince(start)))
            if !allExpected {
                throw ExitCode(1)
            }
        }

        static func row(_ a: String, _ b: String, _ c: String, _ d: String) -> String {
            a.padding(toLength: 52, withPad: " ", startingAt: 0) + b.padding(toLength: 22, withPad: " ", startingAt: 0)
                + c.padding(toLength: 28, withPad: " ", startingAt: 0) + d
        }
    }
}

/// The demo's PKI, files and servers.
private struct DemoWorld {
    static let host = "api.example.com"
    static let deviceHost = "device-7.local"
    static let passphrase = "correct horse battery staple"

    let genuine: TestChain
    let proxyRoot: TestIdentity
    let proxyLeaf: TestIdentity
    let device: TestIdentity
    let fleetCA: TestIdentity
    let mtlsServer: TestIdentity
    let p12: [UInt8]
    let backupPin: Pin
    /// `--keylog`: the clients' session secrets, so a capture of the demo can be read in Wireshark.
    var keyLog: TLSKeyLog?

    init(directory: TemporaryDirectory) throws {
        self.genuine = try TestChain(host: Self.host, ipAddresses: [], rootName: "Genuine Root CA", intermediateName: "Genuine Issuing CA")
        self.proxyRoot = try TestPKI.root("Debugging Proxy Root (installed by the user)")
        self.proxyLeaf = try TestPKI.leaf(Self.host, issuer: self.proxyRoot, dnsNames: [Self.host])
        self.device = try TestPKI.selfSigned(Self.deviceHost, dnsNames: [Self.deviceHost])
        self.fleetCA = try TestPKI.root("Device Fleet CA")
        self.mtlsServer = try TestPKI.leaf("mtls.example.com", issuer: self.genuine.intermediate, dnsNames: ["mtls.example.com"])
        let client = try TestPKI.leaf("app-client-42", issuer: self.fleetCA, usage: .clientAuth, includeSAN: false)
        do {
            self.p12 = try PKCS12Writer.serialize(
                certificateChain: [client.certificate],
                privateKeyPEM: client.privateKeyPEM,
                passphrase: Self.passphrase,
                friendlyName: "app-client-42",
                encryption: .aes256
            )
        } catch {
            throw InputError("demo: cannot write the client's .p12: \(error.description)")
        }
        _ = try directory.write("client.p12", bytes: self.p12)
        self.backupPin = Pin(spkiOf: try TestPKI.root("Offline Backup Key").certificate)
    }

    struct Servers {
        var genuine: any Channel
        var proxy: any Channel
        var proxyAppending: any Channel
        var device: any Channel
        var mtls: any Channel

        func port(_ channel: any Channel) -> Int { channel.localAddress?.port ?? 0 }

        func stop() async {
            for channel in [self.genuine, self.proxy, self.proxyAppending, self.device, self.mtls] {
                do {
                    try await channel.close()
                } catch {
                    continue
                }
            }
        }
    }

    func identity(_ chain: [TestIdentity], key: TestIdentity) throws -> TLSIdentity {
        let pem = TestPKI.pemBundle(chain.map(\.certificate))
        do {
            return try TLSIdentity.pem(
                certificateChain: Array(pem.utf8),
                privateKey: Array(key.privateKeyPEM.utf8),
                certificateOrigin: "demo chain",
                keyOrigin: "demo key"
            )
        } catch {
            throw InputError("demo: \(error.description)")
        }
    }

    func startServers() async throws -> Servers {
        func start(_ identity: TLSIdentity, clientCAs: [Certificate] = []) async throws -> any Channel {
            try await LocalHTTPSServer.start(identity: identity, clientCertificateAuthorities: clientCAs, bind: "127.0.0.1", port: 0)
        }
        let genuineServer = try await start(try self.identity([self.genuine.leaf, self.genuine.intermediate], key: self.genuine.leaf))
        let proxy = try await start(try self.identity([self.proxyLeaf], key: self.proxyLeaf))
        // The proxy that also sends the genuine intermediate and root after its own leaf.
        let appending = try await start(
            try self.identity([self.proxyLeaf, self.genuine.intermediate, self.genuine.root], key: self.proxyLeaf)
        )
        let device = try await start(try self.identity([self.device], key: self.device))
        let mtls = try await start(
            try self.identity([self.mtlsServer, self.genuine.intermediate], key: self.mtlsServer),
            clientCAs: [self.fleetCA.certificate]
        )
        return Servers(genuine: genuineServer, proxy: proxy, proxyAppending: appending, device: device, mtls: mtls)
    }

    /// Where the client resolves the name to: the server under test (DNS spoofing or a proxy, as the source
    /// documents describe, is exactly "the name leads to another server").
    func get(
        _ policy: SecurityPolicy,
        host: String,
        server: any Channel,
        identity: TLSIdentity? = nil
    ) async -> Result<PinnedHTTPResponse, PinningConnectionError> {
        let port = server.localAddress?.port ?? 0
        // The client "has installed" the proxy's root: it is in its platform roots next to the genuine root.
        let trust = ServerTrust(certificates: [], platformRoots: TrustRoots([self.genuine.root.certificate, self.proxyRoot.certificate]))
        var configuration = PinnedHTTPClientConfiguration()
        configuration.connectTimeout = .seconds(5)
        configuration.requestTimeout = .seconds(10)
        configuration.keyLog = self.keyLog
        let client: PinnedHTTPClient
        do {
            client = try PinnedHTTPClient(evaluator: policy, settings: trust.settings, identity: identity, configuration: configuration)
        } catch {
            return .failure(PinningConnectionError(code: .handshakeFailed, host: host, message: "cannot build the TLS configuration: \(ConnectionFailureWords.words(error))", underlying: error))
        }
        let url = URL(string: "https://\(host):\(port)/") ?? URL(fileURLWithPath: "/")
        let result: Result<PinnedHTTPResponse, PinningConnectionError>
        do {
            let response = try await client.get(
                url,
                resolve: { _, port in
                    do {
                        return try SocketAddress(ipAddress: "127.0.0.1", port: port)
                    } catch {
                        return nil
                    }
                })
            result = .success(response)
        } catch {
            result = .failure(error)
        }
        await client.shutdown()
        return result
    }

    func runScenarios(_ servers: Servers) async -> [PinningCommand.Demo.Outcome] {
        let unpinned = SecurityPolicy.default
        let pinned = SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: self.genuine.intermediate.certificate), self.backupPin])
        var devicePolicy = SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [self.device.certificate])
        devicePolicy.allowInvalidCertificates = true
        var outcomes: [PinningCommand.Demo.Outcome] = []

        func record(_ scenario: String, expectTrusted: Bool, _ result: Result<PinnedHTTPResponse, PinningConnectionError>) {
            switch result {
            case .success(let response):
                let subject = response.bodyText.contains("\"subject\"") ? " (server saw the client certificate)" : ""
                outcomes.append(
                    .init(
                        scenario: scenario,
                        expected: expectTrusted ? "accepted" : "refused",
                        got: "accepted, HTTP \(response.status.code)",
                        detail: "validated path: \(response.trustedChain.path.map { CertificateInfo($0).subject }.joined(separator: " <- "))\(subject)",
                        asExpected: expectTrusted && response.status.code == 200
                    ))
            case .failure(let error):
                let why = error.trustFailure.map { "[\($0.code)] \($0.reason)" } ?? error.description
                outcomes.append(
                    .init(
                        scenario: scenario,
                        expected: expectTrusted ? "accepted" : "refused",
                        got: error.trustFailure == nil ? "refused (\(error.code))" : "refused by policy",
                        detail: "why: \(why)",
                        asExpected: !expectTrusted
                    ))
            }
        }

        // Which client meets which server, and whether it should accept it; run in this order.
        let scenarios: [(scenario: String, expectTrusted: Bool, policy: SecurityPolicy, host: String, server: any Channel)] = [
            ("unpinned client -> genuine server", true, unpinned, Self.host, servers.genuine),
            ("unpinned client -> intercepting proxy (DANGER)", true, unpinned, Self.host, servers.proxy),
            ("public-key pinned -> genuine server", true, pinned, Self.host, servers.genuine),
            ("public-key pinned -> intercepting proxy", false, pinned, Self.host, servers.proxy),
            ("public-key pinned -> proxy appending genuine certs", false, pinned, Self.host, servers.proxyAppending),
            ("certificate pinned -> self-signed device", true, devicePolicy, Self.deviceHost, servers.device),
            ("unpinned client -> self-signed device", false, unpinned, Self.deviceHost, servers.device),
        ]
        for one in scenarios {
            record(one.scenario, expectTrusted: one.expectTrusted, await self.get(one.policy, host: one.host, server: one.server))
        }

        // Mutual TLS: the client's identity comes from the .p12 written above.
        switch Result(catching: { () throws(TLSIdentityError) -> TLSIdentity in
            try TLSIdentity.pkcs12(bytes: self.p12, passphrase: Self.passphrase, origin: "client.p12")
        }) {
        case .success(let identity):
            record(
                "mutual TLS with the .p12 identity", expectTrusted: true,
                await self.get(unpinned, host: "mtls.example.com", server: servers.mtls, identity: identity))
        case .failure(let error):
            outcomes.append(
                .init(
                    scenario: "mutual TLS with the .p12 identity", expected: "accepted", got: "identity failed",
                    detail: error.description, asExpected: false))
        }
        record(
            "mutual TLS without an identity", expectTrusted: false,
            await self.get(unpinned, host: "mtls.example.com", server: servers.mtls))

        // A wrong passphrase is a clear, typed error before any connection.
        do {
            _ = try TLSIdentity.pkcs12(bytes: self.p12, passphrase: "wrong passphrase", origin: "client.p12")
            outcomes.append(
                .init(
                    scenario: "client.p12 with a wrong passphrase", expected: "clear error", got: "loaded!",
                    detail: "", asExpected: false))
        } catch {
            outcomes.append(
                .init(
                    scenario: "client.p12 with a wrong passphrase", expected: "clear error",
                    got: "error (\(error.code))", detail: error.description, asExpected: error.code == .wrongPassphrase))
        }
        return outcomes
    }
}
