// A Vapor application for devices over mutual TLS, judged by swift-pinning's policy, and a device calling it
// through the pinned Vapor client.
//
//     swift run VaporDevicesExample
//
// It mints a throw-away PKI (PinningPKI, as tests do), serves https://device.local:<port>/me on 127.0.0.1 with
// client certificates required from the device CA, then acts as a device: a request with the device's
// identity is answered with its validated subject, and a request without one is refused at the handshake.
// Replace the minted PKI with your own files (`TLSIdentity.pem(certificateChainFile:privateKeyFile:)` or
// `TLSIdentity.pkcs12(file:passphrase:)`, `CertificateLoader`) to use it for real.
import Foundation
import NIOCore
import Pinning
import PinningNIO
import PinningPKI
import PinningVapor
import Vapor
import X509

@main
enum VaporDevicesExample {
    static func main() async throws {
        // `--help` says what the demo does and runs nothing; it takes no other arguments.
        let arguments = CommandLine.arguments.dropFirst()
        if arguments.contains("--help") || arguments.contains("-h") {
            print(
                """
                USAGE: swift run VaporDevicesExample

                Mints a throw-away PKI, serves https://device.local:<port>/me on 127.0.0.1 with Vapor, client certificates
                required from the device CA and judged by swift-pinning's MutualTLSServer, then calls it through the pinned
                Vapor client as a device (answered with its validated subject) and without an identity (refused at the
                handshake). Takes no arguments; the source (Examples/VaporDevices) says how to use your own files.
                """)
            return
        }
        if let first = arguments.first {
            FileHandle.standardError.write(Data("VaporDevicesExample: unexpected argument \"\(first)\"; it takes none (--help says what it does)\n".utf8))
            exit(2)
        }
        let serverChain = try TestChain(host: "device.local", rootName: "Example Server Root")
        let deviceRoot = try TestPKI.root("Example Device Root")
        let deviceCA = try TestPKI.intermediate("Example Device CA", issuer: deviceRoot)
        let device = try TestPKI.leaf("thermostat-42", issuer: deviceCA, usage: .clientAuth, includeSAN: false)

        // The server: Vapor's own TLS server, the device policy from MutualTLSServer.
        let app = try await Application.make(.development)
        app.logger.logLevel = .warning
        let server = try MutualTLSServer(
            identity: try serverChain.leaf.tlsIdentity(chain: [serverChain.intermediate.certificate]),
            clientCertificateAuthorities: [deviceRoot.certificate]
        )
        app.http.server.configuration.useMutualTLS(server) { refusal in
            app.logger.warning("refused a device: \(refusal)")
        }
        app.grouped(MutualTLSMiddleware()).get("me") { req -> String in
            // MutualTLSMiddleware already answered 403 to a request without a client.
            guard let client = req.authenticatedClient else { throw Abort(.forbidden) }
            return "hello \(client.subject), pin \(client.pin)"
        }
        try await app.server.start(address: .hostname("127.0.0.1", port: 0))
        guard let port = app.http.server.shared.localAddress?.port else { fatalError("the server has no port") }
        print("serving https://device.local:\(port)/me (mutual TLS, device CA: \(deviceRoot.certificate.subject))")

        // The device: the pinned client, pinned to the server's key, presenting the device identity; `app.client`
        // is that client.
        let pinned = try PinnedHTTPClient(
            evaluator: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: serverChain.leaf.certificate)]),
            settings: TrustSettings(anchors: [serverChain.root.certificate], anchorsOnly: true),
            identity: try device.tlsIdentity(chain: [deviceCA.certificate])
        )
        let loopback: PinnedHTTPClient.Resolve = { host, port in host == "device.local" ? try? SocketAddress(ipAddress: "127.0.0.1", port: port) : nil }
        app.clients.use(.pinned(pinned, resolve: loopback))
        var failed = false
        let answer = try await app.client.get(URI(string: "https://device.local:\(port)/me")).get()
        print("device with its identity: \(answer.status.code) \(answer.body.map { String(buffer: $0) } ?? "")")
        failed = failed || answer.status != .ok

        let anonymous = try PinnedHTTPClient(
            evaluator: SecurityPolicy(pinningMode: .publicKey, pins: [Pin(spkiOf: serverChain.leaf.certificate)]),
            settings: TrustSettings(anchors: [serverChain.root.certificate], anchorsOnly: true))
        do {
            _ = try await anonymous.get(URL(string: "https://device.local:\(port)/me")!, resolve: loopback)
            print("a client without a certificate was served: wrong")
            failed = true
        } catch {
            print("client without a certificate: refused (\(error))")
        }
        await anonymous.shutdown()
        await pinned.shutdown()
        await app.server.shutdown()
        try await app.asyncShutdown()
        if failed { exit(1) }
    }
}
