import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import Pinning
import PinningNIO

extension PinningCommand.PinSet {
    /// `pinning pinset publish REPO CONFIG.json [--target-name pinning.json] --targets-key K --snapshot-key K --timestamp-key K [--check-live]`.
    struct Publish: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "publish",
            abstract: "Publish a pinning configuration (and the anchor and CRL files it references) as a new version of the pin set.",
            discussion: """
                The configuration is checked with `pinning config lint`'s rules first; one that would break clients (an \
                enforced entry without a backup pin, an unreadable anchor or CRL, a CRL no anchor signed) is refused, exit 2, \
                listing every problem. Anchor and CRL paths must be relative, without .., so clients can lay the files out \
                beside the configuration: they are published as targets beside --target-name, in the same targets version, \
                and the configuration's target lists them in its custom.pinset.files. An entry with a clientIdentity is \
                refused, exit 2: a pin set carries no private keys, and every client refuses one that names one.

                Several configurations may share one repository (each its own --target-name); one whose file would replace \
                a file of the same target path that another references, with other bytes, is refused, exit 2, naming both: \
                give it a --target-name in a directory of its own (other/other.json publishes its files under other/).

                --check-live connects to every host the configuration names exactly (not *. or **. patterns) on port \
                --live-port and refuses, exit 2, a configuration whose pins the host's live chain would fail. Hosts that \
                cannot be reached are listed and do not refuse.
                """
        )

        @Argument(help: ArgumentHelp("The repository directory.", valueName: "repo"))
        var repository: String

        @Argument(help: ArgumentHelp("The pinning configuration (JSON), published byte for byte.", valueName: "config"))
        var configurationFile: String

        @Option(name: .customLong("target-name"), help: ArgumentHelp("The configuration's target path in the repository (default pinning.json).", valueName: "path"))
        var targetName = "pinning.json"

        @OptionGroup var keys: OnlineKeyOptions

        @Flag(name: .customLong("check-live"), help: "Connect to each host the configuration names and refuse pins its live chain would fail.")
        var checkLive = false

        @Option(name: .customLong("live-port"), parsing: .unconditional, help: ArgumentHelp("The port --check-live connects to (default 443).", valueName: "port"))
        var livePort: Int = 443

        @Option(name: .long, help: ArgumentHelp("For --check-live: connect HOST:PORT to ADDR instead of resolving HOST (as curl). Repeatable.", valueName: "host:port:addr"))
        var resolve: [String] = []

        @OptionGroup var expiry: ExpiryOptions

        @OptionGroup var passphraseOptions: PassphraseOptions

        func validate() throws {
            guard (1...65535).contains(self.livePort) else { throw InputError("--live-port \(self.livePort): not a port (1 to 65535)") }
            _ = try ResolveOption.parse(self.resolve)
        }

        func run() async throws {
            let writer = try PinningCommand.PinSet.repository(self.repository, command: "publish")
            let passphrase = try self.passphraseOptions.passphrase()
            let online = try self.keys.load(passphrase: passphrase)
            let now = Date()
            let (configuration, bytes) = try self.lint(at: now)
            let files = try self.referencedFiles(configuration)
            let base = self.targetName.contains("/") ? String(self.targetName[...self.targetName.lastIndex(of: "/")!]) : ""
            if let clash = files.keys.first(where: { base + $0 == self.targetName }) {
                throw InputError(
                    "pinset publish: not published: --target-name \(VisibleText.escaped(self.targetName)) is also where \(VisibleText.escaped(clash)), a file the configuration references, is published; give another --target-name"
                )
            }
            if self.checkLive {
                try await self.checkLiveHosts(configuration)
            }
            do {
                try self.expiry.store(in: writer)
                let versions = try writer.publishPinSet(
                    bytes, name: self.targetName, files: files, targetsKey: online[0].key, snapshotKey: online[1].key, timestampKey: online[2].key, now: now)
                let extra = files.isEmpty ? "" : " with \(files.count) referenced file\(files.count == 1 ? "" : "s") (\(files.keys.sorted().joined(separator: ", ")))"
                print("pinning pinset: published \(self.configurationFile) as \(self.targetName) (\(bytes.count) bytes)\(extra): \(versions)")
            } catch let error as TUFRepositoryError {
                throw PinningCommand.PinSet.fail(error, command: "publish", keyFiles: online)
            }
        }

        /// The configuration, loaded and checked as `config lint` checks it (revocation included), and its exact bytes.
        /// An entry naming a clientIdentity is a problem: clients following a pin set refuse one that names one
        /// (`PinSetUpdater`), since a pin set carries no private keys; the identity is not loaded.
        func lint(at time: Date) throws -> (PinningConfiguration, [UInt8]) {
            let configuration: PinningConfiguration
            do {
                // A pin set's cap (16 MiB), not a hand-written file's (1 MiB): clients following it accept as much
                // (PinSetUpdater.Options.maximumConfigurationSize), and fleets of 10,000 hosts exceed 1 MiB.
                configuration = try PinningConfiguration(contentsOfFile: self.configurationFile, maximumSize: PinningConfiguration.maximumPinSetSize)
            } catch {
                throw InputError("pinset publish: not published: \(error.description)")
            }
            var problems: [String] = []
            var warnings = configuration.warnings(at: time)
            for entry in configuration.entries where entry.clientIdentity != nil {
                problems.append(
                    "domains[\"\(VisibleText.escaped(entry.key))\"].clientIdentity: a pin set carries no private keys, and every client refuses one that names a clientIdentity; publish the configuration without it"
                )
            }
            for entry in configuration.entries {
                guard let revocation = entry.revocation else { continue }
                let (errors, notes) = PinningCommand.Config.Lint.revocationProblems(revocation, entry: entry, configurationFile: self.configurationFile, at: time)
                problems += errors
                warnings += notes
            }
            guard problems.isEmpty else {
                throw InputError(
                    "pinset publish: not published: invalid pinning configuration \(self.configurationFile): \(problems.count) problem\(problems.count == 1 ? "" : "s")\n"
                        + problems.map { "  " + $0 }.joined(separator: "\n"))
            }
            for warning in warnings { print("warning: \(warning)") }
            let bytes: [UInt8]
            do {
                bytes = try CertificateLoader.readFile(atPath: self.configurationFile)
            } catch {
                throw InputError("pinset publish: \(error.description)")
            }
            return (configuration, bytes)
        }

        /// The anchor and CRL files, by the path the configuration writes (relative to its directory).
        func referencedFiles(_ configuration: PinningConfiguration) throws(InputError) -> [String: [UInt8]] {
            let base = URL(fileURLWithPath: self.configurationFile).deletingLastPathComponent()
            var files: [String: [UInt8]] = [:]
            for entry in configuration.entries {
                let listed =
                    entry.anchorFiles.enumerated().map { ("anchors[\($0.offset)]", $0.element) }
                    + entry.revocationFiles.enumerated().map { ("revocation.crls[\($0.offset)]", $0.element) }
                for (field, path) in listed {
                    let parts = path.split(separator: "/", omittingEmptySubsequences: false)
                    guard !path.hasPrefix("/"), parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }) else {
                        throw InputError(
                            "pinset publish: not published: domains[\"\(entry.key)\"].\(field) \(path): clients find referenced files beside the configuration; use a relative path without . or .. parts"
                        )
                    }
                    if files[path] != nil { continue }
                    do {
                        files[path] = try CertificateLoader.readFile(atPath: base.appendingPathComponent(path).path)
                    } catch {
                        throw InputError("pinset publish: not published: domains[\"\(entry.key)\"].\(field): \(error.description)")
                    }
                }
            }
            return files
        }

        /// Connects to each exactly named host with the configuration as the evaluator; refuses when a live chain
        /// fails it.
        func checkLiveHosts(_ configuration: PinningConfiguration) async throws {
            let overrides = try ResolveOption.parse(self.resolve)
            let client: PinnedTLSClient
            do {
                client = try PinnedTLSClient(evaluator: configuration)
            } catch {
                throw InputError("pinset publish: --check-live: cannot build the TLS configuration: \(ConnectionFailureWords.words(error))")
            }
            var refusals: [String] = []
            for entry in configuration.entries where !entry.key.contains("*") && !entry.excludesSubdomainFromParentPolicy {
                // The name as `pinning check` connects to it (its URL's host): an internationalised one by its
                // A-labels, for the lookup, SNI and --resolve, which keys its names the same way.
                let host = ResolveOption.asciiHost(entry.key) ?? entry.key
                let address = overrides[ResolveKey(host: host, port: self.livePort)]
                // Named as the configuration writes it, with the A-labels connected to when they differ.
                let named = VisibleText.escaped(host == entry.key.lowercased() ? entry.key : "\(entry.key) (\(host))")
                do {
                    let connection = try await client.connect(
                        host: host, port: self.livePort, address: address, group: MultiThreadedEventLoopGroup.singleton, timeout: .seconds(10))
                    // The check is done (the handshake passed); a failed close changes nothing about it.
                    try? await connection.channel.close()
                    print("live: \(named) port \(self.livePort): its chain passes the configuration")
                } catch  where error.code == .untrusted {
                    // The message quotes the live server's certificate names: its text, escaped.
                    let words = error.trustFailure?.codeAndReason ?? error.message
                    refusals.append("\(named) port \(self.livePort): \(VisibleText.escaped(words))")
                } catch {
                    print("live: \(named) port \(self.livePort): not checked: \(VisibleText.escaped(error.message))")
                }
            }
            guard refusals.isEmpty else {
                throw InputError(
                    "pinset publish: not published: --check-live: \(refusals.count) host\(refusals.count == 1 ? "" : "s") would fail the new pins\n"
                        + refusals.map { "  " + $0 }.joined(separator: "\n"))
            }
        }
    }

    /// `pinning pinset status REPO [--json]`.
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show each role's version, expiry, keys and signatures, the targets, and whether a client would accept the repository.",
            discussion: "Exit status: 0 a client starting from version 1 of the root would accept the repository now, 1 it would not (expired, a signature missing), 2 not a repository."
        )

        @Argument(help: ArgumentHelp("The repository directory.", valueName: "repo"))
        var repository: String

        @Flag(name: .long, help: "Print the status as JSON.")
        var json = false

        func run() async throws {
            let writer = try PinningCommand.PinSet.repository(self.repository, command: "status")
            let status: TUFRepositoryStatus
            do {
                status = try writer.status()
            } catch {
                throw PinningCommand.PinSet.fail(error, command: "status")
            }
            if self.json {
                print(Self.json(status))
            } else {
                // The repository may be someone else's clone: its role names, key ids, types, schemes and target
                // paths are shown escaped (VisibleText), each line whole.
                let print: (String) -> Void = { Swift.print(VisibleText.escaped($0)) }
                print("\(status.directory): \(status.clientRefusal == nil ? "a client accepts it" : "a client would refuse it")")
                for role in status.roles {
                    let days = Double(role.secondsToExpiry) / 86_400
                    let expiry = role.expired ? "EXPIRED at \(role.expires)" : "expires \(role.expires) (in \(String(format: "%.1f", days)) days)"
                    print("  \(role.name) v\(role.version): \(expiry); \(role.validSignatures) of \(role.keys.count) key\(role.keys.count == 1 ? "" : "s") signed validly, threshold \(role.threshold)")
                    for key in role.keys {
                        let signature = key.signatureValid ? "signed" : key.signaturePresent ? "INVALID signature" : "no signature"
                        print("    \(key.keyID) \(key.keyType)/\(key.scheme): \(signature)")
                    }
                    for other in role.otherSignatures { print("    \(other): a signature from a key that is not the role's") }
                }
                for target in status.targets {
                    print("  target \(target.path): \(target.length) bytes, sha256 \(target.hashes["sha256"] ?? "?")")
                }
                // The refusal is display text already (a TUFError's description): printed as it is, not escaped again.
                if let refusal = status.clientRefusal { Swift.print("  refused: \(refusal)") }
            }
            if status.clientRefusal != nil { throw ExitCode(1) }
        }

        /// `{"directory", "time", "clientAccepts", "clientRefusal"?, "roles": [{name, version, expires, expired,
        /// secondsToExpiry, threshold, validSignatures, keys: [{keyID, keyType, scheme, signaturePresent,
        /// signatureValid}]}], "targets": [{path, length, sha256}]}`.
        static func json(_ status: TUFRepositoryStatus) -> String {
            func string(_ text: String) -> TUFJSON { .string(text) }
            func object(_ members: [(String, TUFJSON)]) -> TUFJSON { .object(TUFJSONObject(members)!) }
            let roles: [TUFJSON] = status.roles.map { role in
                object([
                    ("name", string(role.name)), ("version", .integer(String(role.version))), ("expires", string(role.expires)), ("expired", .bool(role.expired)),
                    ("secondsToExpiry", .integer(String(role.secondsToExpiry))), ("threshold", .integer(String(role.threshold))),
                    ("validSignatures", .integer(String(role.validSignatures))),
                    (
                        "keys",
                        .array(
                            role.keys.map { key in
                                object([
                                    ("keyID", string(key.keyID)), ("keyType", string(key.keyType)), ("scheme", string(key.scheme)),
                                    ("signaturePresent", .bool(key.signaturePresent)), ("signatureValid", .bool(key.signatureValid)),
                                ])
                            })
                    ),
                    ("otherSignatures", .array(role.otherSignatures.map(string))),
                ])
            }
            let targets: [TUFJSON] = status.targets.map { target in
                object([("path", string(target.path)), ("length", .integer(String(target.length))), ("sha256", string(target.hashes["sha256"] ?? ""))])
            }
            var members: [(String, TUFJSON)] = [
                ("directory", string(status.directory)), ("time", string(RFC3339.format(status.time))), ("clientAccepts", .bool(status.clientRefusal == nil)),
                ("roles", .array(roles)), ("targets", .array(targets)),
            ]
            if let refusal = status.clientRefusal { members.append(("clientRefusal", string(refusal))) }
            // Canonical JSON escapes only C0; DEL, C1, bidi and the other hidden characters are written as \uXXXX so
            // that none reaches the terminal raw (the values a JSON reader gets are unchanged).
            return VisibleText.jsonEscaped(String(decoding: object(members).jsonBytes(), as: UTF8.self))
        }
    }
}
