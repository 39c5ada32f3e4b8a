import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// The pinned clients against servers we did not write: `openssl s_server` with OpenSSL-made certificates of every
/// key type, Python `ssl` servers that close without a TLS close_notify, and OpenSSL refusing our client
/// certificate. (Issue 11, items 4, 7 and 9.)
@Suite("Interoperability with openssl s_server and Python ssl", .serialized)
struct InteroperabilityTests {
    static func client(root: String) throws -> PinnedHTTPClient {
        let anchors = try CertificateLoader.certificates(fromFile: root)
        return try PinnedHTTPClient(
            evaluator: SecurityPolicy.default,
            settings: TrustSettings(anchors: anchors, anchorsOnly: true),
            configuration: PinnedHTTPClientConfiguration(connectTimeout: .seconds(10), requestTimeout: .seconds(10))
        )
    }

    static func url(_ port: Int, _ path: String = "/") -> URL {
        URL(string: "https://localhost:\(port)\(path)")!
    }

    static let resolveLoopback: PinnedHTTPClient.Resolve = { _, port in try? SocketAddress(ipAddress: "127.0.0.1", port: port) }

    // Item 4: BoringSSL's default list of accepted signature algorithms leaves out Ed25519 and P-521; the
    // pinned client offers them (TLSConfiguration.pinningAcceptedSignatureAlgorithms).
    @Test(
        "the pinned client reaches openssl s_server with an OpenSSL-made certificate of every key type, over TLS 1.2 and 1.3",
        .enabled(if: opensslAvailable),
        arguments: ["ed25519", "p256", "p384", "p521", "rsa2048"]
    )
    func keyTypes(_ keyType: String) async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-interop")
        defer { directory.remove() }
        let pki = try await OpenSSLPKI(keyType: keyType, in: directory)
        for version in ["-tls1_2", "-tls1_3"] {
            let server = try await ServerProcess.opensslServer(["-cert", pki.leafPEM, "-key", pki.leafKey, "-www", version])
            defer { server.stop() }
            let client = try Self.client(root: pki.rootPEM)
            do {
                let response = try await client.get(Self.url(server.port), resolve: Self.resolveLoopback)
                #expect(response.status == .ok, "\(keyType) \(version)")
                #expect(response.presentedChain.first?.subject.description == "CN=localhost")
            } catch {
                Issue.record("\(keyType) \(version): \(error.debugDescription)\n\(server.output)")
            }
            await client.shutdown()
        }
    }

    @Test("an RSA-PSS-keyed server certificate fails with a message in words (BoringSSL cannot use RSA-PSS keys)", .enabled(if: opensslAvailable))
    func rsaPSSKey() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-interop")
        defer { directory.remove() }
        // The root is RSA (PKCS#1 signatures) so that only the leaf's key is RSA-PSS.
        let pki = try await OpenSSLPKI(keyType: "rsa-pss", rootKeyType: "rsa2048", in: directory)
        let server = try await ServerProcess.opensslServer(["-cert", pki.leafPEM, "-key", pki.leafKey, "-www"])
        defer { server.stop() }
        let client = try Self.client(root: pki.rootPEM)
        defer { Task { await client.shutdown() } }
        do {
            _ = try await client.get(Self.url(server.port), resolve: Self.resolveLoopback)
            Issue.record("an RSA-PSS-keyed server was reached; update Docs/BadInput.md and the algorithm list's comment")
        } catch {
            #expect(error.code == .handshakeFailed, "\(error.debugDescription)")
            #expect(!error.message.contains("OPENSSL_internal") && !error.message.contains(".cc:"), "\(error.message)")
        }
    }

    // Item 4, the server side: a mutual-TLS server accepts an Ed25519 client certificate.
    @Test("MutualTLSServer accepts a client whose certificate has an Ed25519 key (openssl s_client)", .enabled(if: opensslAvailable))
    func ed25519Client() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-interop")
        defer { directory.remove() }
        let clientPKI = try await OpenSSLPKI(keyType: "ed25519", clientAuth: true, in: directory)
        let serverChain = try TestChain(host: "device.local", rootName: "Server Root")
        let mtls = try MutualTLSServer(
            identity: try serverChain.leaf.tlsIdentity(chain: [serverChain.intermediate.certificate]),
            clientCertificateAuthorities: try CertificateLoader.certificates(fromFile: clientPKI.rootPEM)
        )
        let server = try await ResumptionTestServer(mtls)
        defer { Task { await server.stop() } }
        let port = server.port
        for version in ["-tls1_2", "-tls1_3"] {
            // A request, and -ign_eof: s_client stays until the server has answered (under TLS 1.3 it would
            // otherwise leave before the server finished its side of the handshake).
            let result = try await openssl(
                ["s_client", "-connect", "127.0.0.1:\(port)", "-cert", clientPKI.leafPEM, "-key", clientPKI.leafKey, version, "-noservername", "-ign_eof"], input: "GET / HTTP/1.0\r\n\r\n")
            let outcome = try #require(await server.log.nextOutcome(), "\(version): \(result.output.suffix(1500))")
            switch outcome {
            case .success(let handshake):
                #expect(handshake.peer.subject == "CN=client-ed")
            case .failure(let error):
                Issue.record("\(version): \(error.debugDescription)\n\(result.output.suffix(2500))")
            }
            #expect(result.output.contains("client CN=client-ed"), "\(version): \(result.output.suffix(1500))")
        }
    }

    // Item 7: a body ended by a close without close_notify.
    @Test(
        "a server that closes without TLS close_notify: complete Content-Length and chunked bodies are accepted, a close-delimited body is accepted and flagged, a cut-short body is an error saying so",
        .enabled(if: opensslAvailable && python3Available),
        arguments: [
            ("length", "accepted"),
            ("chunked", "accepted"),
            ("close", "flagged"),
            ("close-clean", "accepted"),
            ("length-short", "the response was cut short: the server closed the connection without a TLS close_notify after 13 of the 100 body bytes its Content-Length announced"),
            ("chunked-short", "the response was cut short: the server closed the connection without a TLS close_notify before the last chunk of its chunked body (13 bytes received)"),
        ]
    )
    func uncleanShutdown(_ mode: String, _ expected: String) async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-unclean")
        defer { directory.remove() }
        let pki = try await OpenSSLPKI(keyType: "p256", in: directory)
        let server = try await ServerProcess.pythonServer(certificate: pki.leafPEM, key: pki.leafKey, mode: mode, in: directory)
        defer { server.stop() }
        let client = try Self.client(root: pki.rootPEM)
        defer { Task { await client.shutdown() } }
        do {
            let response = try await client.get(Self.url(server.port), resolve: Self.resolveLoopback)
            #expect(expected == "accepted" || expected == "flagged", "\(mode): accepted a response that should fail")
            #expect(response.status == .ok)
            #expect(response.bodyText == "hello, world\n")
            #expect(response.bodyMayBeTruncated == (expected == "flagged"), "\(mode)")
        } catch {
            #expect(error.message == expected, "\(mode): \(error.debugDescription)")
            #expect(error.code == .httpFailed)
        }
    }

    @Test("a reply that is not HTTP is said to be so, and not blamed on client certificates", .enabled(if: opensslAvailable && python3Available))
    func notHTTP() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-nothttp")
        defer { directory.remove() }
        let pki = try await OpenSSLPKI(keyType: "p256", in: directory)
        let server = try await ServerProcess.pythonServer(certificate: pki.leafPEM, key: pki.leafKey, mode: "not-http", in: directory)
        defer { server.stop() }
        let client = try Self.client(root: pki.rootPEM)
        defer { Task { await client.shutdown() } }
        let error = await #expect(throws: PinningConnectionError.self) {
            _ = try await client.get(Self.url(server.port), resolve: Self.resolveLoopback)
        }
        #expect(error?.message.hasPrefix("the server did not answer with HTTP") == true, "\(String(describing: error?.debugDescription))")
        #expect(error?.message.contains("certificate") == false)
    }

    // Item 9: TLS 1.3 servers refuse our certificate after our side of the handshake is done; the alert they
    // send is reported every time. Over HTTP/2 too: with TLS 1.3 the refusal arrives after ALPN chose h2 and the
    // HTTP/2 pipeline was set up, before any stream exists, so the connection itself keeps the alert for the
    // request that fails next (HTTP2ConnectionFailureRecorder).
    @Test(
        "openssl s_server -Verify 1 refusing us: the same message with the server's alert, 20 times in a row, HTTP/1.1 and h2",
        .enabled(if: opensslAvailable),
        arguments: ["-tls1_3", "-tls1_2"], [false, true]
    )
    func refusedClientCertificateAlert(_ version: String, http2: Bool) async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-alert")
        defer { directory.remove() }
        let pki = try await OpenSSLPKI(keyType: "p256", in: directory)
        let clientCADirectory = try TemporaryDirectory(prefix: "pinning-alert-ca")
        defer { clientCADirectory.remove() }
        let clientCA = try await OpenSSLPKI(keyType: "p256", clientAuth: true, in: clientCADirectory)
        let server = try await ServerProcess.opensslServer(
            ["-cert", pki.leafPEM, "-key", pki.leafKey, "-www", version, "-Verify", "1", "-verify_return_error", "-CAfile", clientCA.rootPEM]
                + (http2 ? ["-alpn", "h2"] : []))
        defer { server.stop() }
        // A client certificate from a CA the server does not know.
        let stranger = try TestChain(host: "client-7", ipAddresses: [], leafUsage: .clientAuth, rootName: "Stranger Root")
        let strangerIdentity = try stranger.leaf.tlsIdentity(chain: [stranger.intermediate.certificate])
        let anchors = try CertificateLoader.certificates(fromFile: pki.rootPEM)
        for (identity, alert) in [(nil, version == "-tls1_3" ? 116 : 40), (strangerIdentity, 48)] as [(TLSIdentity?, Int)] {
            var messages: Set<String> = []
            for _ in 0..<20 {
                let client = try PinnedHTTPClient(
                    evaluator: SecurityPolicy.default,
                    settings: TrustSettings(anchors: anchors, anchorsOnly: true),
                    identity: identity,
                    configuration: PinnedHTTPClientConfiguration(httpVersions: http2 ? .automatic : .http1Only)
                )
                do {
                    _ = try await client.get(Self.url(server.port), resolve: Self.resolveLoopback)
                    messages.insert("accepted")
                } catch {
                    messages.insert(error.message)
                    #expect(error.receivedAlert?.code == alert, "\(error.debugDescription)")
                }
                await client.shutdown()
            }
            #expect(messages == ["the server refused the handshake: \(TLSAlert(code: alert))"], "\(version) h2 \(http2) identity \(identity != nil): \(messages)")
        }
    }

    @Test("our MutualTLSServer refusing a client without a certificate: the same alert message 20 times in a row")
    func refusedByOurServer() async throws {
        let setup = try MutualTLSSetup()
        let server = try await LoopbackHTTPSServer(mutualTLS: setup.server, respond: LoopbackHTTPSServer.hello)
        defer { Task { await server.stop() } }
        var messages: Set<String> = []
        for _ in 0..<20 {
            let client = try PinnedHTTPClient(evaluator: SecurityPolicy.default, settings: setup.serverTrust.clientSettings)
            do {
                _ = try await client.get(URL(string: "https://device.local:\(server.port)/")!) { _, port in try? SocketAddress(ipAddress: "127.0.0.1", port: port) }
                messages.insert("accepted")
            } catch {
                messages.insert(error.message)
            }
            await client.shutdown()
        }
        #expect(messages == ["the server refused the handshake: TLS alert certificate_required (116)"], "\(messages)")
    }
}
