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
            commandName: "serve",
            abstract: "Serve HTTPS (mutual TLS with --client-ca): every GET gets 200 and a JSON body naming the client certificate.",
            discussion: """
                Serves exactly the chain in --cert, in that order. Once it accepts connections it prints `listening on https://ADDR:PORT` on stdout (an IPv6 ADDR in brackets).

                An encrypted --key takes its passphrase from --passphrase-env VAR or --passphrase-file FILE (as check).

                With --client-ca a client certificate is required and validated (chain to one of the CAs, extendedKeyUsage clientAuth), and every client whose handshake does not end trusted is one line on stderr saying why (the policy's failure code, the TLS library's reason, the client leaving, a deadline). Runs until SIGINT or SIGTERM.

                Deadlines: a connection is closed when its TLS handshake has not completed --handshake-timeout seconds after it was accepted (default 10), and, over HTTP/1.1, when a request head has not arrived whole --request-head-timeout seconds after the handshake or the end of the previous request (default 30; 408 Request Timeout when part of it came). A request that cannot be parsed gets 431 (a head over 80 KiB) or 400, in words, and the connection is closed.

                HTTP/2 when the client offers h2 in ALPN, else HTTP/1.1. The JSON reply has method, path, httpVersion and clientCertificate (null without one).

                Exit status: 0 stopped by a signal, 2 bad input, 3 cannot listen.
                """
        )

        @Option(name: .long, help: ArgumentHelp("The server's certificate chain, leaf first (PEM).", valueName: "file"))
        var cert: String

        @Option(name: .long, help: ArgumentHelp("The leaf's private key (PEM or DER; encrypted keys need --passphrase-env or --passphrase-file).", valueName: "file"))
        var key: String

        @OptionGroup var passphraseOptions: PassphraseOptions

        @Option(name: .customLong("client-ca"), help: ArgumentHelp("A CA that client certificates must chain to; requires client certificates. Repeatable.", valueName: "file"))
        var clientCA: [String] = []

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("The port, 0 to 65535; 0 picks a free one.", valueName: "n"), transform: NumericOption.port(allowingZero: true))
        var port: Int = 8443

        @Option(name: .long, help: ArgumentHelp("The address to listen on: an IPv4 or IPv6 address (bracketed or not, e.g. ::1 or [::1]) or a host name.", valueName: "addr"))
        var bind: String = "127.0.0.1"

        @OptionGroup var keyLogOptions: KeyLogOptions

        @OptionGroup var revocationOptions: RevocationOptions

        @Option(
            name: .customLong("crl-reload"), parsing: .unconditional,
            help: ArgumentHelp("With --crl: seconds between checks for changed CRL files (0.1 to 86400; default 5).", valueName: "seconds"),
            transform: NumericOption.seconds(0.1...86_400))
        var crlReload: Double = 5

        @OptionGroup var deadlines: DeadlineOptions<DeadlineHelp>

        /// What `serve`'s deadlines cover: each accepted connection's handshake, and over HTTP/1.1 each request head.
        enum DeadlineHelp: DeadlineWords {
            static let handshakeTimeout =
                "Close a connection whose TLS handshake (the client's chain judged included) has not completed this long after it was accepted (0.001 to 604,800; default 10)."
            static let requestHeadTimeout =
                "HTTP/1.1: close a connection whose request head has not arrived whole this long after the handshake or the previous request (0.001 to 604,800; default 30); 408 when part of it came."
        }

        func validate() throws {
            if !self.revocationOptions.crl.isEmpty && self.clientCA.isEmpty {
                throw InputError("--crl needs --client-ca: without client certificates there is nothing to check for revocation")
            }
        }

        func run() async throws {
            let address = try Self.bindAddress(self.bind, port: self.port)
            let identity = try self.loadIdentity()
            let keyLog = try self.keyLogOptions.open(command: "serve")
            var authorities: [Certificate] = []
            for path in self.clientCA {
                authorities += try InputLoading.certificates(path, option: "--client-ca")
            }
            let revocation = try self.revocationSource()
            let channel: any Channel
            do {
                channel = try await LocalHTTPSServer.start(
                    identity: identity,
                    clientCertificateAuthorities: authorities,
                    bind: address.host,
                    port: self.port,
                    keyLog: keyLog,
                    revocation: revocation,
                    logsRefusals: true,
                    deadlines: LocalHTTPSServer.Deadlines(handshake: self.deadlines.handshake, requestHead: self.deadlines.requestHead)
                )
            } catch let error as LocalHTTPSServer.SetupError {
                // In words, as check says it: NIOSSL's error text carries BoringSSL's codes and source paths.
                throw InputError("cannot build the TLS configuration: \(ConnectionFailureWords.words(error.underlying))")
            } catch {
                // The address is --bind's fault (exit 2, naming it): a name that does not resolve, or an address no
                // interface of this machine has. Anything else (the port in use, permissions) is exit 3 as before.
                if let fault = Self.bindFault(error) {
                    throw InputError("--bind \(self.bind): \(fault)")
                }
                let problem = Self.listenProblem(error)
                FileHandle.standardError.write(Data("pinning: serve: cannot listen on \(address.display):\(self.port): \(problem)\n".utf8))
                throw ExitCode(3)
            }
            // Installed before the start-up line is printed (SignalHandlers says why).
            let signals = await SignalHandlers.install([SIGINT, SIGTERM]) { _ in channel.close(promise: nil) }
            let port = channel.localAddress?.port ?? self.port
            FileHandle.standardOutput.write(Data("listening on https://\(address.display):\(port)\n".utf8))

            do {
                try await channel.closeFuture.get()
            } catch {
                FileHandle.standardError.write(Data("pinning: serve: the listening socket failed: \(ConnectionFailureWords.words(error))\n".utf8))
            }
            for source in signals { source.cancel() }
        }

        /// `--crl` watched for changes every `--crl-reload` seconds; each reload is one line on stderr.
        func revocationSource() throws(InputError) -> RevocationSource? {
            // Parsed by the same rules as evaluate and check (--revocation needs --crl, files named in errors).
            guard let policy = try self.revocationOptions.policy() else { return nil }
            let paths = self.revocationOptions.crl
            do {
                return try RevocationSource.watching(
                    paths,
                    mode: policy.mode,
                    scope: policy.scope,
                    interval: .milliseconds(Int64(self.crlReload * 1000))
                ) { outcome in
                    let line: String
                    switch outcome {
                    case .reloaded(let count):
                        line = "pinning: serve: CRLs changed; \(count) CRL\(count == 1 ? "" : "s") now in force"
                    case .failed(let error):
                        line = "pinning: serve: CRLs changed but cannot be read (the previous ones stay in force): --crl \(error.description)"
                    }
                    FileHandle.standardError.write(Data((line + "\n").utf8))
                }
            } catch {
                throw InputError("--crl \(error.description)")
            }
        }

        /// Why binding failed when the address given is at fault, in words, or nil.
        static func bindFault(_ error: any Error) -> String? {
            if let error = error as? SocketAddressError, case .unknown = error {
                return "the host name does not resolve"
            }
            if error is SocketAddressError.UnknownHost {
                return "the host name does not resolve"
            }
            if let error = error as? IOError, error.errnoCode == EADDRNOTAVAIL {
                return "not an address of this machine (no interface has it)"
            }
            return nil
        }

        /// Why binding failed, in words: "address already in use", not NIO's `bind(descriptor:ptr:bytes:)` dump.
        static func listenProblem(_ error: any Error) -> String {
            if let error = error as? SocketAddressError, case .unknown = error {
                return "the host name does not resolve"
            }
            return ConnectionFailureWords.words(error)
        }

        /// The server identity from --cert and --key, with messages about the *server's* certificate and key.
        func loadIdentity() throws(InputError) -> TLSIdentity {
            let passphrase = try self.passphraseOptions.passphrase()
            // Each input is named by its option as well as its path (the errors' `origin`), so a failure names the
            // option whose file is wrong even when both options name one file (`--cert pki/api.key --key
            // pki/api.key` once blamed --key for the missing certificate: the origin was compared with --key's
            // path). One file given for both is read once: a FIFO or <(…) has no second reading.
            let certificateOrigin = "--cert \(self.cert)"
            let keyOrigin = "--key \(self.key)"
            do throws(TLSIdentityError) {
                let chain = try Self.read(self.cert, origin: certificateOrigin)
                let key = self.key == self.cert ? chain : try Self.read(self.key, origin: keyOrigin)
                return try TLSIdentity.pem(
                    certificateChain: chain, privateKey: key, passphrase: passphrase, certificateOrigin: certificateOrigin, keyOrigin: keyOrigin)
            } catch {
                switch error.code {
                case .noCertificateMatchingKey:
                    let subject = Self.firstSubject(self.cert)
                    throw InputError(
                        "--key \(self.key) is not the private key of the server certificate \(subject) (the first certificate of --cert \(self.cert)): give the key this certificate was issued for, or put this key's certificate first in --cert"
                    )
                case .wrongPassphrase where passphrase == nil:
                    throw InputError("--key \(self.key): the private key is encrypted; give its passphrase with --passphrase-env VAR or --passphrase-file FILE")
                case .wrongPassphrase:
                    throw InputError("--key \(self.key): \(error.problem)")
                default:
                    // `--cert FILE: CODE: PROBLEM` or `--key FILE: …`: the origin names the option.
                    throw InputError(error.description)
                }
            }
        }

        /// The bytes of `path`, through the identity loader's reader (size limit, FIFOs); a failure is named `origin`.
        private static func read(_ path: String, origin: String) throws(TLSIdentityError) -> [UInt8] {
            do {
                return try TLSIdentity.read(path)
            } catch {
                var named = error
                named.origin = origin
                throw named
            }
        }

        private static func firstSubject(_ path: String) -> String {
            switch Result(catching: { () throws(InputError) -> [Certificate] in try InputLoading.certificates(path, option: "--cert") }) {
            case .success(let certificates): return certificates.first.map { "\($0.subject)" } ?? "(none)"
            case .failure: return "(unreadable)"
            }
        }

        /// Where to listen: an IP address (IPv6 with or without brackets, as in a URL) or a host name.
        struct BindAddress {
            /// What `bind(host:port:)` gets: the address without brackets, or the host name.
            var host: String
            /// How it appears in a URL: IPv6 in brackets.
            var display: String
        }

        static func bindAddress(_ text: String, port: Int) throws(InputError) -> BindAddress {
            var host = text.trimmingCharacters(in: .whitespaces)
            let bracketed = host.hasPrefix("[") || host.hasSuffix("]")
            if bracketed {
                guard host.hasPrefix("["), host.hasSuffix("]"), host.count > 2 else {
                    throw InputError("--bind \(text): unbalanced brackets; write an IPv6 address as ::1 or [::1]")
                }
                host = String(host.dropFirst().dropLast())
            }
            guard !host.isEmpty else {
                throw InputError("--bind: empty; give an IP address such as 127.0.0.1 or ::1, or a host name")
            }
            let isIPv6: Bool
            do {
                let address = try SocketAddress(ipAddress: host, port: port)
                if case .v6 = address { isIPv6 = true } else { isIPv6 = false }
            } catch {
                if bracketed || host.contains(":") {
                    throw InputError("--bind \(text): not an IPv6 address")
                }
                // The short and numeric IPv4 forms the system's resolver has always taken here (`127.1`, `0`,
                // `0x7f.1`: inet_aton's forms, which getaddrinfo accepts), kept as they were, listening on the
                // address they stand for.
                if let dotted = IPAddressText.legacyIPv4(host) {
                    return BindAddress(host: dotted, display: dotted)
                }
                // Otherwise a name whose last label is all digits (999.1.1.1, 256.256.256.256) is an IPv4 address
                // written wrongly, not a host name: no top-level domain is numeric (RFC 3696 §2), and resolvers would
                // try it as a name and fail with nothing to say.
                if let last = host.split(separator: ".").last, last.allSatisfy({ $0.isASCII && $0.isNumber }) {
                    throw InputError("--bind \(text): not an IPv4 address (four numbers from 0 to 255) nor a host name")
                }
                // An internationalised name is resolved by its A-labels, as every other host option is (NU3).
                let name = try PinningCommand.PKI.Issue.asciiDNSName(host, option: "--bind")
                guard PinningCommand.PKI.Issue.isDNSName(name), !name.hasPrefix("*") else {
                    throw InputError("--bind \(text): neither an IP address nor a host name (ASCII letters, digits and '-' in dot-separated labels, or an internationalised name)")
                }
                return BindAddress(host: name, display: name)
            }
            if bracketed && !isIPv6 {
                throw InputError("--bind \(text): not an IPv6 address; brackets are for IPv6 (write an IPv4 address without them)")
            }
            return BindAddress(host: host, display: isIPv6 ? "[\(host)]" : host)
        }

        /// The JSON body: method, path, HTTP version, and the client certificate when one was presented and validated.
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
            /// `HTTP/1.1` or `HTTP/2.0` (negotiated with ALPN).
            var httpVersion: String
            var clientCertificate: Client?

            enum CodingKeys: String, CodingKey { case method, path, httpVersion, clientCertificate }

            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(self.method, forKey: .method)
                try container.encode(self.path, forKey: .path)
                try container.encode(self.httpVersion, forKey: .httpVersion)
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
            let reply = Reply(method: head.method.rawValue, path: head.uri, httpVersion: "\(head.version)", clientCertificate: client)
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
