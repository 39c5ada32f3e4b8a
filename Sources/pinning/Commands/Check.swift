import ArgumentParser
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
@_spi(FixedValidationTime) import Pinning
import PinningNIO
import X509

extension PinningCommand {
    /// `pinning check URL`: connects with the pinned HTTPS client, reports the server's chain and the verdict,
    /// and when trusted performs the GET.
    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Connect to an HTTPS URL with pinning enforced on the handshake; report the chain, the verdict, and the GET's result.",
            discussion: """
                SNI and the checked name are the URL's host; --resolve HOST:PORT:ADDR connects to ADDR instead (as curl).

                The policy flags are those of `pinning evaluate` (or --config FILE: the host pinning configuration; or --pinset METADATA_URL --pinset-root ROOT.json --pinset-dir DIR: a pin set followed in a TUF repository, refreshed before connecting; the last good one is used when the refresh fails, and with none the check refuses to connect, exit 3).

                A client identity for mutual TLS: --identity FILE.p12 (with --passphrase-env VAR or --passphrase-file FILE), or --identity-cert CHAIN --identity-key KEY.

                Exit status: 0 trusted and a 2xx response; 1 refused by the policy; 2 bad input; 3 connection, TLS or HTTP error (including a server that rejects our client certificate or wants one we did not give).

                Failure reports: with --config or --pinset, a pin mismatch of an entry that names reportURIs (enforced or report-only) is reported to them, as TrustKit does: an RFC 7469 report with validation-result, enforce-pinning, library-version, app-id "pinning-cli check" and pinset-version, POSTed through the library's report queue (2 attempts of 2 s each). The check waits at most 5 s for delivery before it exits; delivery never changes the exit status or stdout, and only --verbose says what became of each report (one line on stderr). --no-reports sends none.

                On a connection, TLS or HTTP error, stdout stays empty and one line on stderr says what happened; --verbose adds what was trusted and the underlying error on stderr, --json prints the report (with the details) on stdout.
                """
        )

        @Argument(help: ArgumentHelp("The https URL.", valueName: "url"))
        var url: String

        @OptionGroup var policyOptions: PolicyOptions

        @OptionGroup var pinSetOptions: PinSetOptions

        @OptionGroup var revocationOptions: RevocationOptions

        @Flag(
            name: .customLong("fetch-crls"),
            help:
                "Download CRLs from the certificates' distribution points (http:// or https://, 5 s and 16 MiB each) and check them (hard mode, leaf scope unless --revocation/--revocation-scope say otherwise)."
        )
        var fetchCRLs = false

        @Option(name: .long, help: ArgumentHelp("A PKCS#12 client identity (.p12/.pfx).", valueName: "file"))
        var identity: String?

        /// `--passphrase-env` / `--passphrase-file`: of --identity or an encrypted --identity-key (the group
        /// `serve` and `pki export` use too).
        @OptionGroup var passphraseOptions: PassphraseOptions

        @Option(name: .customLong("identity-cert"), help: ArgumentHelp("The client certificate followed by its intermediates (PEM).", valueName: "file"))
        var identityCert: String?

        @Option(name: .customLong("identity-key"), help: ArgumentHelp("The client certificate's private key.", valueName: "file"))
        var identityKey: String?

        @Option(name: .long, help: ArgumentHelp("Connect to ADDR for HOST:PORT instead of resolving HOST (as curl). Repeatable.", valueName: "host:port:addr"))
        var resolve: [String] = []

        @Option(
            name: .customLong("connect-timeout"), parsing: .unconditional, help: ArgumentHelp("Seconds allowed for connecting plus the TLS handshake (0.001 to 604800).", valueName: "seconds"),
            transform: NumericOption.seconds(NumericOption.timeoutRange))
        var connectTimeout: Double = 5

        @Option(
            name: .customLong("max-time"), parsing: .unconditional, help: ArgumentHelp("Seconds allowed for the request, after the handshake (0.001 to 604800).", valueName: "seconds"),
            transform: NumericOption.seconds(NumericOption.timeoutRange))
        var maxTime: Double = 15

        @Flag(name: .long, help: "Offer HTTP/2 in ALPN (h2, then http/1.1), as curl's --http2; HTTP/1.1 when the server does not pick it.")
        var http2 = false

        @Flag(name: .long, help: "Print the result as JSON.")
        var json = false

        @Flag(name: .long, help: "On an error, also print what was trusted and the underlying TLS or socket error (on stderr).")
        var verbose = false

        @Flag(
            name: .customLong("no-reports"),
            help: "With --config or --pinset: send no pin failure reports (by default an entry's reportURIs get one, waited for up to 5 s before exiting).")
        var noReports = false

        @OptionGroup var keyLogOptions: KeyLogOptions

        @Option(
            name: .customLong("tls-max"), help: ArgumentHelp("The newest TLS version offered: 1.2 or 1.3 (default 1.3), as curl's --tls-max.", valueName: "version"),
            transform: TLSVersionArgument.parser(option: "--tls-max"))
        var tlsMax: TLSVersionArgument?

        /// Option combinations, refused before any file is read or any connection made. (The timeouts' range,
        /// 0.001 to 604800 seconds, is checked while parsing: see ``NumericOption``.)
        func validate() throws {
            if self.pinSetOptions.isGiven {
                if self.policyOptions.config != nil {
                    throw InputError("--pinset cannot be combined with --config: the pin set is the configuration")
                }
                let used = self.policyOptions.flagsConflictingWithConfiguration
                if !used.isEmpty {
                    throw InputError("\(used.joined(separator: ", ")) cannot be combined with --pinset: the pin set decides pins, anchors and validation")
                }
            } else if self.policyOptions.config != nil {
                try self.policyOptions.checkNoConflictWithConfiguration()
            }
            try self.pinSetOptions.check()
            if self.noReports && self.policyOptions.config == nil && !self.pinSetOptions.isGiven {
                throw InputError("--no-reports needs --config or --pinset: only a configuration's entries send failure reports")
            }
            _ = try self.identitySource()
        }

        func run() async throws {
            let url = try self.parsedURL()
            let overrides = try self.parsedResolve()
            var identity = try self.loadIdentity()
            let host = Self.host(of: url)

            let evaluator: any ServerTrustEvaluating
            var trust: ServerTrust
            // The report of a verdict for the host it judged: after a redirect to another host, that host, not the
            // first URL's.
            let describe: @Sendable (TrustEvaluation, ServerTrust, String) -> EvaluationReport
            // Each verdict records the settings and instant it was judged under (a configuration entry's revocation
            // policy combined with the client's, for one); the report shows those. `presented` (this command's
            // template with the chain the server sent) stands in only for a verdict that records none.
            var pinSetReport: PinSetReport?
            let configured: (configuration: PinningConfiguration, option: String)?
            // With --pinset, --roots serves the repository's server and the server judged: read once, because a FIFO
            // or `<(…)` gives its bytes only once.
            let pinSetRoots = self.pinSetOptions.isGiven ? try InputLoading.roots(self.policyOptions.roots) : nil
            if self.pinSetOptions.isGiven {
                let followed = try await self.followPinSet(roots: pinSetRoots)
                configured = (followed.configuration, "--pinset")
                pinSetReport = followed.report
            } else if let path = self.policyOptions.config {
                configured = (try self.policyOptions.loadConfiguration(path), "--config \(path)")
            } else {
                configured = nil
            }
            // Failure reports, by default, for the entries that name reportURIs (ReportDelivery says how).
            var reportQueue: PinFailureReportQueue?
            if configured != nil && !self.noReports {
                let verbose = self.verbose
                reportQueue = ReportDelivery.checkQueue { outcome in
                    if verbose { Self.warn("report \(outcome)") }
                }
            }
            if let configured {
                var configuration = configured.configuration
                configuration.reportQueue = reportQueue
                let option = configured.option
                evaluator = configuration
                // The entry's clientIdentity, unless an identity was given on the command line (which wins).
                if identity == nil, let entry = configuration.entry(forHost: host), let source = entry.clientIdentity {
                    do {
                        identity = try TLSIdentity.load(source, entry: entry.key, environment: ProcessInfo.processInfo.environment)
                    } catch {
                        throw InputError("\(option): \(error.description)")
                    }
                }
                trust = ServerTrust(
                    certificates: [],
                    platformRoots: try pinSetRoots ?? InputLoading.roots(self.policyOptions.roots),
                    profile: try self.policyOptions.loadProfile()
                )
                // The entry the configuration itself would apply (exact, `*.`, `**.`, includeSubdomains, exclusions)
                // to the host judged.
                let judging = configuration
                describe = { verdict, presented, judged in
                    let pins = judging.entry(forHost: judged)?.pins ?? []
                    return EvaluationReport(verdict: verdict, trust: verdict.judgedTrust ?? presented, mode: "configuration", expectedPins: pins, host: judged)
                }
            } else {
                let made = try self.policyOptions.makePolicy(presented: [], host: host)
                evaluator = made.policy
                trust = made.trust
                let policy = made.policy
                describe = { verdict, presented, judged in
                    EvaluationReport(verdict: verdict, trust: verdict.judgedTrust ?? presented, policy: policy, host: judged)
                }
            }
            // Without --at, each handshake is judged at its own time. With it (a one-shot replay, the use the SPI is
            // for), the client's settings carry the instant; `trust` keeps it only for the report.
            let instant = try InputLoading.instant(self.policyOptions.at)
            trust.validationTime = instant
            trust.revocation = try self.revocationOptions.policy(fetching: self.fetchCRLs)
            // --fetch-crls sets the trust's policy to fetch; a configuration entry may ask for it too. The client
            // puts RevocationFetchingEvaluator in front of the evaluator, which fetches when either asks.
            let judge = evaluator

            let keyLog = try self.keyLogOptions.open(command: "check")
            var tlsConfiguration: TLSConfiguration?
            if let tlsMax = self.tlsMax {
                var base = TLSConfiguration.makePinnedClientConfiguration()
                base.maximumTLSVersion = tlsMax.version
                tlsConfiguration = base
            }
            let client: PinnedHTTPClient
            do {
                client = try PinnedHTTPClient(
                    evaluator: judge,
                    settings: trust.settings.validatingAt(instant),
                    identity: identity,
                    tlsConfiguration: tlsConfiguration,
                    configuration: PinnedHTTPClientConfiguration(
                        connectTimeout: .milliseconds(Int64(self.connectTimeout * 1000)),
                        requestTimeout: .milliseconds(Int64(self.maxTime * 1000)),
                        keyLog: keyLog,
                        httpVersions: self.http2 ? .automatic : .http1Only
                    )
                )
            } catch {
                if self.verbose { Self.warn("detail: \(String(reflecting: error))") }
                throw InputError("cannot build the TLS configuration: \(ConnectionFailureWords.words(error))")
            }
            let outcome: Result<PinnedHTTPResponse, PinningConnectionError>
            do {
                outcome = .success(try await client.get(url) { host, port in overrides[ResolveKey(host: host.lowercased(), port: port)] })
            } catch {
                outcome = .failure(error)
            }
            await client.shutdown()
            // A report of this check's mismatch is under way: delivered, given up on, or abandoned after the limit.
            // Nothing about it reaches stdout or the exit status.
            if let reportQueue, !(await reportQueue.waitForDelivery(timeout: ReportDelivery.checkWaitLimit)) {
                if self.verbose { Self.warn("a failure report was still being delivered after \(ReportDelivery.checkWaitLimit.components.seconds) s; abandoned") }
            }

            var report = CheckReport(url: url.absoluteString)
            report.pinset = pinSetReport
            // The one line an error gets on stderr (exit 3), and what --verbose adds before it.
            var errorLine: String?
            var errorDetail: String?
            switch outcome {
            case .success(let response):
                var presented = trust
                presented.certificates = response.presentedChain
                report.evaluation = describe(.trusted(response.trustedChain), presented, response.handshake.host ?? Self.host(of: response.url))
                report.finalURL = response.url.absoluteString
                report.status = Int(response.status.code)
                report.reasonPhrase = response.status.reasonPhrase
                report.httpVersion = "\(response.version)"
                report.body = response.bodyText
                report.bodyMayBeTruncated = response.bodyMayBeTruncated
                if !(200..<300).contains(Int(response.status.code)) {
                    errorLine = "\(response.url.absoluteString): the server answered HTTP \(response.status.code) \(response.status.reasonPhrase)"
                }
            case .failure(let error):
                // The URL that failed: after a redirect, not the one given (the text report says it was redirected).
                report.finalURL = error.url?.absoluteString
                let judged = error.host ?? error.url.map(Self.host(of:)) ?? host
                if let failure = error.trustFailure {
                    var presented = trust
                    presented.certificates = failure.presentedChain
                    report.evaluation = describe(.untrusted(failure), presented, failure.host ?? judged)
                } else {
                    if let handshake = error.handshake {
                        // Trusted, then the exchange failed: --verbose and --json show what was trusted.
                        var presented = trust
                        presented.certificates = handshake.trustedChain.presentedChain
                        report.evaluation = describe(.trusted(handshake.trustedChain), presented, handshake.host ?? judged)
                    }
                    errorLine = Self.errorLine(error, host: host, identityGiven: identity != nil)
                    errorDetail = error.debugDescription
                    report.error = errorLine
                    report.errorCode = error.code.description
                    report.errorDetail = errorDetail
                    report.tlsAlert = error.receivedAlert.map(CheckReport.Alert.init)
                    report.tlsAlertSent = error.sentAlert.map(CheckReport.Alert.init)
                }
            }
            if report.bodyMayBeTruncated == true, errorLine == nil {
                Self.warn(
                    "warning: the body ended when the server closed the connection without a TLS close_notify, and the response has neither Content-Length nor chunked framing: it may be truncated")
            }
            if let errorLine {
                // One message, once, on stderr; stdout stays empty unless --json asked for the report.
                if self.json {
                    try JSONOutput.print(report)
                } else if self.verbose {
                    var details = report
                    details.error = nil
                    Self.warn(details.humanReadable)
                    if let errorDetail { Self.warn("detail: \(VisibleText.escaped(errorDetail))") }
                }
                // The server's words (a status line's reason, a certificate's names in a TLS failure) are the peer's:
                // escaped, as every peer's text this command prints (VisibleText).
                Self.warn(VisibleText.escaped(errorLine))
                throw ExitCode(3)
            }
            try JSONOutput.print(report, json: self.json)
            if report.evaluation?.trusted != true {
                throw ExitCode(1)
            }
        }

        /// The host of `url` as the client connects to it and the policy judges it: an IPv6 literal without its brackets.
        static func host(of url: URL) -> String {
            url.host.map { $0.hasPrefix("[") ? String($0.dropFirst().dropLast()) : $0 } ?? ""
        }

        static func warn(_ text: String) {
            FileHandle.standardError.write(Data("pinning: check: \(text)\n".utf8))
        }

        /// `--pinset`: the last good pin set, refreshed once first. With none (nothing stored and the refresh failed)
        /// the check refuses to connect: exit 3, saying so.
        func followPinSet(roots: TrustRoots?) async throws -> (configuration: PinningConfiguration, report: PinSetReport) {
            let verbose = self.verbose
            // The updater's lines, its last error and a failed outcome are display text: the repository's text (role
            // names, target paths, its server's errors) is escaped in them once, where they are made. Printed as they
            // are: escaping again would show an escape (`\u{1b}`) as the sender's literal text (`\u{5c}u{1b}`).
            let updater = try self.pinSetOptions.makeUpdater(roots: roots, resolve: try self.parsedResolve()) { line in
                if verbose { Self.warn(line) }
            }
            let outcome = await updater.refresh()
            guard let current = updater.currentConfiguration() else {
                let why = updater.status.lastError ?? "no pin set"
                let kept = PinSetOptions.keptWords(updater, directory: self.pinSetOptions.directory ?? "")
                Self.warn("refusing to connect: no pin set to judge by (\(kept), and the refresh failed: \(why))")
                throw ExitCode(3)
            }
            if case .failed(let line) = outcome {
                Self.warn("warning: the pin set was not refreshed; version \(current.generation) stays enforced: \(line)")
            }
            let status = updater.status
            if status.stale {
                Self.warn(
                    "warning: pin set version \(current.generation) is stale: its metadata expired \(status.secondsStale) s ago and no refresh has succeeded since; its pins are still enforced"
                )
            }
            return (current.configuration, PinSetReport(status))
        }

        /// The error in one line of words, naming the host, with a hint when the server's alert says what to do.
        static func errorLine(_ error: PinningConnectionError, host: String, identityGiven: Bool) -> String {
            var line = error.message
            // Connection messages name the host and port already; the others get the host in front.
            if error.code != .connectFailed && error.code != .timedOut {
                line = "\(error.host ?? host): \(line)"
            }
            if let alert = error.receivedAlert {
                if alert.code == 116 && !identityGiven {
                    line += " (the server requires a client certificate: give one with --identity, or --identity-cert and --identity-key)"
                } else if alert.isAboutCertificate && identityGiven {
                    line += " (the server did not accept our client certificate)"
                }
            }
            return line
        }

        func parsedURL() throws(InputError) -> URL {
            // A port that is not 1-65535 is bad input (exit 2), not a connection failure. Foundation accepts
            // `:99999` as a port and refuses `:abc` as a URL; read the authority's port text ourselves, first.
            // The URL as messages show it: a password in it is never echoed.
            let shown = Self.redacted(self.url)
            if let text = Self.portText(self.url) {
                guard !text.isEmpty, text.allSatisfy(\.isASCII), text.allSatisfy(\.isNumber), let port = Int(text), (1...65535).contains(port) else {
                    throw InputError("\(shown): the port \"\(text)\" is not a TCP port (1-65535)")
                }
            }
            guard let url = URL(string: self.url), url.scheme?.lowercased() == "https", let host = url.host, !host.isEmpty else {
                throw InputError("\(shown): not an https URL with a host")
            }
            // User information (`user:password@`) is refused, not ignored: this client sends no Authorization
            // header (curl would send it as Basic authentication), so accepting the URL would make a request the
            // user did not mean, without the credentials, and print the password in the report's `GET` line.
            if url.user != nil || url.password != nil || Self.authority(self.url)?.contains("@") == true {
                throw InputError(
                    "\(shown): credentials in the URL are not sent; pinning check sends no Authorization header, so remove the user information (\"user:password@\") from the URL"
                )
            }
            return url
        }

        /// The URL's authority (`user:pw@host:port`): the text between `://` and the first `/`, `?` or `#` after it.
        static func authority(_ url: String) -> Substring? {
            guard let schemeEnd = url.range(of: "://") else { return nil }
            let rest = url[schemeEnd.upperBound...]
            return rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        }

        /// `url` with the password of its user information replaced by `xxxxx`, as Go's `URL.Redacted()` writes it:
        /// `https://user:xxxxx@host/`. A URL without a password is returned as it is.
        static func redacted(_ url: String) -> String {
            guard let authority = Self.authority(url), let at = authority.lastIndex(of: "@"),
                let colon = authority[..<at].firstIndex(of: ":")
            else { return url }
            return String(url[..<colon]) + ":xxxxx" + String(url[at...])
        }

        /// The text after the host's `:` in the URL's authority (nil without one): `https://h:99999/` → `99999`.
        static func portText(_ url: String) -> String? {
            guard var authority = Self.authority(url) else { return nil }
            if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
            if authority.hasPrefix("[") {
                guard let close = authority.firstIndex(of: "]") else { return nil }
                let after = authority[authority.index(after: close)...]
                return after.hasPrefix(":") ? String(after.dropFirst()) : nil
            }
            guard let colon = authority.firstIndex(of: ":") else { return nil }
            return String(authority[authority.index(after: colon)...])
        }

        func parsedResolve() throws(InputError) -> [ResolveKey: SocketAddress] {
            try ResolveOption.parse(self.resolve)
        }

        /// Where the client identity comes from: a PKCS#12 file, a PEM certificate chain and key, or nowhere.
        enum IdentitySource {
            case none
            case pkcs12(file: String)
            case pem(certificateChain: String, privateKey: String)
        }

        /// The identity options' combination, checked: one source or none, and a passphrase only for one.
        func identitySource() throws(InputError) -> IdentitySource {
            switch (self.identity, self.identityCert, self.identityKey) {
            case (nil, nil, nil):
                if self.passphraseOptions.isGiven {
                    throw InputError("--passphrase-env/--passphrase-file need --identity or --identity-key")
                }
                return .none
            case (let path?, nil, nil):
                return .pkcs12(file: path)
            case (nil, let cert?, let key?):
                return .pem(certificateChain: cert, privateKey: key)
            case (nil, _, _):
                throw InputError("--identity-cert and --identity-key go together")
            case (_?, _, _):
                throw InputError("--identity cannot be combined with --identity-cert/--identity-key")
            }
        }

        func loadIdentity() throws(InputError) -> TLSIdentity? {
            let source = try self.identitySource()
            // One reader for every command (serve, pki export): FIFOs and <(…) files, UTF-8 checked.
            let passphrase = try self.passphraseOptions.passphrase()
            switch source {
            case .none:
                return nil
            case .pkcs12(let path):
                do {
                    return try TLSIdentity.pkcs12(file: path, passphrase: passphrase ?? "")
                } catch {
                    throw self.identityRefusal(error, option: "--identity")
                }
            case .pem(let cert, let key):
                return try self.loadPEMIdentity(certificateChainFile: cert, privateKeyFile: key, passphrase: passphrase)
            }
        }

        /// `--identity-cert` and `--identity-key`, each failure naming the option whose file is at fault (both once
        /// named both): the certificate file's reading and certificates name `--identity-cert`, the key file's
        /// reading, key and passphrase `--identity-key`, and a key that is not the first certificate's names both.
        /// The key's errors are told apart by their origin, a label that no path equals, so this holds when both
        /// options name one file; that file is read once (a FIFO or `<(…)` has no second reading), as `serve` does.
        func loadPEMIdentity(certificateChainFile cert: String, privateKeyFile key: String, passphrase: String?) throws(InputError) -> TLSIdentity {
            let keyOrigin = "--identity-key \(key)"
            let chain: [UInt8]
            let keyBytes: [UInt8]
            do {
                chain = try TLSIdentity.read(cert)
            } catch {
                throw self.identityRefusal(error, option: "--identity-cert")
            }
            do {
                keyBytes = key == cert ? chain : try TLSIdentity.read(key)
            } catch {
                throw self.identityRefusal(error, option: "--identity-key")
            }
            do {
                return try TLSIdentity.pem(certificateChain: chain, privateKey: keyBytes, passphrase: passphrase, certificateOrigin: cert, keyOrigin: keyOrigin)
            } catch {
                guard error.origin == keyOrigin else {
                    throw self.identityRefusal(error, option: "--identity-cert")
                }
                var named = error
                named.origin = key
                throw self.identityRefusal(named, option: error.code == .noCertificateMatchingKey ? "--identity-cert/--identity-key" : "--identity-key")
            }
        }

        /// The one line a bad identity gets: the option, the file and what is wrong, all in words
        /// (``TLSIdentityError/description``, built from the failure's kind). What the library underneath reported
        /// is printed before it only with --verbose.
        func identityRefusal(_ error: TLSIdentityError, option: String) -> InputError {
            if self.verbose, let underlying = error.underlyingError {
                Self.warn("detail: \(underlying)")
            }
            return InputError("\(option) \(error.description)")
        }
    }
}

struct ResolveKey: Hashable, Sendable {
    var host: String
    var port: Int
}

/// `--resolve HOST:PORT:ADDR` (repeatable), as curl takes it: connect HOST:PORT to ADDR (IPv6 bracketed or not).
enum ResolveOption {
    static func parse(_ entries: [String]) throws(InputError) -> [ResolveKey: SocketAddress] {
        var overrides: [ResolveKey: SocketAddress] = [:]
        for entry in entries {
            let parts = entry.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, !parts[0].isEmpty, let port = Int(parts[1]), (1...65535).contains(port) else {
                throw InputError("--resolve \(entry): expected HOST:PORT:ADDR")
            }
            let host = try Self.host(String(parts[0]), entry: entry)
            var address = String(parts[2])
            if address.hasPrefix("[") && address.hasSuffix("]") {
                address = String(address.dropFirst().dropLast())
            }
            do {
                overrides[ResolveKey(host: host, port: port)] = try SocketAddress(ipAddress: address, port: port)
            } catch {
                throw InputError("--resolve \(entry): \(address) is not an IP address")
            }
        }
        return overrides
    }

    /// HOST as the client names the host it connects to, which is what an entry is looked up by: lower case, and a
    /// Unicode name in its ASCII (A-label, `xn--…`) form, converted by the same URL parser that reads the URL's host,
    /// so `例え.テスト` matches `https://例え.テスト/` as `xn--r8jz45g.xn--zckzah` does (the Unicode entry was once
    /// kept as typed and never matched).
    static func host(_ text: String, entry: String) throws(InputError) -> String {
        guard let host = Self.asciiHost(text) else {
            throw InputError("--resolve \(VisibleText.escaped(entry)): \"\(VisibleText.escaped(text))\" is not a host name")
        }
        return host
    }

    /// `text` as the client names the host it connects to (``host(_:entry:)``): lower case, a Unicode name in its
    /// A-label form; nil when the URL parser does not read it as a host name. `pinset publish --check-live` connects
    /// to a configuration's names this way.
    static func asciiHost(_ text: String) -> String? {
        if text.unicodeScalars.allSatisfy(\.isASCII) {
            return text.lowercased()
        }
        // Nothing but the name may reach the URL parser: a `/`, `@`, `?` or `#` would make another URL of it.
        guard !text.unicodeScalars.contains(where: { "/@?#[]\\%".unicodeScalars.contains($0) || $0.properties.isWhitespace }),
            let host = URL(string: "https://\(text)/")?.host, !host.isEmpty, host.unicodeScalars.allSatisfy(\.isASCII)
        else {
            return nil
        }
        return host.lowercased()
    }
}

/// What `pinning check` prints.
struct CheckReport: TextReport {
    /// A TLS alert as PinningNIO read it from the connection's records (never from a library's error text).
    struct Alert: Encodable {
        var code: Int
        var name: String
        /// `fatal` or `warning`.
        var level: String

        init(_ alert: TLSAlert) {
            self.code = alert.code
            self.name = alert.name
            self.level = alert.level == .fatal ? "fatal" : "warning"
        }
    }

    var url: String
    /// With `--pinset`: the pin set the connection was judged by.
    var pinset: PinSetReport?
    var evaluation: EvaluationReport?
    /// The URL that answered (after redirects), or, when the request failed, the URL it failed at: the one
    /// `evaluation` judged the host of.
    var finalURL: String?
    var status: Int?
    var reasonPhrase: String?
    /// `HTTP/1.1` or `HTTP/2.0`: what carried the response.
    var httpVersion: String?
    var body: String?
    /// True when the body was delimited by the connection's close alone and that close had no TLS close_notify.
    var bodyMayBeTruncated: Bool?
    var error: String?
    var errorCode: String?
    /// The underlying error as the libraries report it (internals included): only in --json and --verbose.
    var errorDetail: String?
    /// The TLS alert the server sent, when the error is one.
    var tlsAlert: Alert?
    /// The TLS alert this client sent, when the error came with one (its TLS library refusing the handshake).
    var tlsAlertSent: Alert?

    /// The lines for people. What the server wrote (the redirect's URL, the status line's reason, the body, an error
    /// quoting it) is escaped by ``VisibleText`` (the body line by line, its line feeds kept); the evaluation and the
    /// pin set escape their own.
    var humanReadable: String {
        var lines = ["GET \(VisibleText.escaped(self.url))"]
        if let pinset {
            lines.append(pinset.humanReadable)
        }
        // Before the verdict, which is the redirect target's (its host, its chain) when there was one.
        if let finalURL, finalURL != self.url {
            lines.append("redirected to \(VisibleText.escaped(finalURL))")
        }
        if let evaluation {
            lines.append(evaluation.humanReadable)
        }
        if let status {
            lines.append("HTTP \(status) \(VisibleText.escaped(self.reasonPhrase ?? ""))")
            if let body, !body.isEmpty {
                lines.append(Self.bodyLines(body))
            }
        }
        if let error {
            lines.append("error: \(VisibleText.escaped(error))")
        }
        return lines.joined(separator: "\n")
    }

    /// A body's lines, each escaped, for the text report: split at each LF, a CR just before it taken as part of
    /// the line break (a CRLF body reads as lines, as it did when bodies were printed raw), one final line break
    /// dropped. Split by Unicode scalars: as Characters, "\r\n" is one grapheme that no "\n" matches.
    static func bodyLines(_ body: String) -> String {
        var pieces = body.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map { piece in
            piece.last == "\r" ? piece.dropLast() : piece
        }
        if body.unicodeScalars.last == "\n" { pieces.removeLast() }
        return pieces.map { VisibleText.escaped(String(String.UnicodeScalarView($0))) }.joined(separator: "\n")
    }
}
