import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO
import X509

extension PinningCommand {
    /// `pinning serve`: an HTTPS server (mutual TLS with `--client-ca`) for trying clients and pins.
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve HTTPS (mutual TLS with --client-ca): every GET gets 200 and a JSON body naming the client certificate.",
            discussion: """
                Serves exactly the chain in --cert, in that order. Once it accepts connections it prints `listening on https://ADDR:PORT` on stdout.

                With --client-ca a client certificate is required and validated (chain to one of the CAs, extendedKeyUsage clientAuth). Runs until SIGINT or SIGTERM.

                Exit status: 0 stopped by a signal, 2 bad input, 3 cannot listen.
                """
        )

        @Option(name: .long, help: ArgumentHelp("The server's certificate chain, leaf first (PEM).", valueName: "file"))
        var cert: String

        @Option(name: .long, help: ArgumentHelp("The leaf's private key (PEM or DER).", valueName: "file"))
        var key: String

        @Option(name: .customLong("client-ca"), help: ArgumentHelp("A CA that client certificates must chain to; requires client certificates. Repeatable.", valueName: "file"))
        var clientCA: [String] = []

        @Option(name: .long, help: ArgumentHelp("The port; 0 picks a free one.", valueName: "n"))
        var port: Int = 8443

        @Option(name: .long, help: ArgumentHelp("The address to listen on.", valueName: "addr"))
        var bind: String = "127.0.0.1"

        func run() async throws {
            guard (0...65535).contains(self.port) else {
                throw InputError("--port: \(self.port) is not a TCP port")
            }
            let identity: TLSIdentity
            do {
                identity = try TLSIdentity.pem(certificateChainFile: self.cert, privateKeyFile: self.key)
            } catch {
                throw InputError("--cert/--key: \(error.description)")
            }
            var authorities: [Certificate] = []
            for path in self.clientCA {
                authorities += try InputLoading.certificates(path, option: "--client-ca")
            }
            let channel: any Channel
            do {
                channel = try await LocalHTTPSServer.start(
                    identity: identity,
                    clientCertificateAuthorities: authorities,
                    bind: self.bind,
                    port: self.port
                )
            } catch let error as LocalHTTPSServer.SetupError {
                throw InputError("cannot build the TLS configuration: \(error.underlying)")
            } catch {
                FileHandle.standardError.write(Data("pinning: serve: cannot listen on \(self.bind):\(self.port): \(error)\n".utf8))
                throw ExitCode(3)
            }
            let port = channel.localAddress?.port ?? self.port
            let host = self.bind.contains(":") ? "[\(self.bind)]" : self.bind
            FileHandle.standardOutput.write(Data("listening on https://\(host):\(port)\n".utf8))

            let signals = [SIGINT, SIGTERM].map { number in
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { channel.close(promise: nil) }
                source.resume()
                return source
            }
            do {
                try await channel.closeFuture.get()
            } catch {
                FileHandle.standardError.write(Data("pinning: serve: \(error)\n".utf8))
            }
            for source in signals { source.cancel() }
        }

        /// The JSON body: method, path, and the client certificate when one was presented and validated.
        struct Reply: Encodable {
            struct Client: Encodable {
                var subject: String
                var subjectAlternativeNames: [String]
                var pin: String
                var sha256Fingerprint: String
                var chain: [String]
            }

            var method: String
            var path: String
            var clientCertificate: Client?

            enum CodingKeys: String, CodingKey { case method, path, clientCertificate }

            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(self.method, forKey: .method)
                try container.encode(self.path, forKey: .path)
                // null, not absent, without a client certificate.
                if let client = self.clientCertificate {
                    try container.encode(client, forKey: .clientCertificate)
                } else {
                    try container.encodeNil(forKey: .clientCertificate)
                }
            }
        }

        static func respond(_ head: HTTPRequestHead, peer: AuthenticatedPeer?) -> SimpleHTTPResponse {
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/json")
            guard head.method == .GET else {
                headers.add(name: "allow", value: "GET")
                return SimpleHTTPResponse(status: .methodNotAllowed, headers: headers, body: Array("{\"error\":\"only GET\"}\n".utf8))
            }
            let client = peer.map { peer in
                Reply.Client(
                    subject: peer.subject,
                    subjectAlternativeNames: peer.subjectAlternativeNames.map(\.value),
                    pin: peer.pin.description,
                    sha256Fingerprint: peer.sha256Fingerprint,
                    chain: peer.certificateChain.map { CertificateInfo($0).subject }
                )
            }
            let reply = Reply(method: head.method.rawValue, path: head.uri, clientCertificate: client)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            do {
                return SimpleHTTPResponse(status: .ok, headers: headers, body: Array(try encoder.encode(reply)) + [0x0A])
            } catch {
                return SimpleHTTPResponse(status: .internalServerError, headers: headers, body: Array("{\"error\":\"cannot encode the reply\"}\n".utf8))
            }
        }
    }
}

