import ArgumentParser
import Foundation
import Pinning
import PinningNIO

extension PinningCommand {
    /// `pinning pinset`: publish pin sets as a TUF repository of static files (issue 29), on the library's
    /// `TUFRepositoryWriter`.
    struct PinSet: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pinset",
            abstract: "Publish pinning configurations as a TUF repository of static files that clients follow.",
            discussion: """
                A repository (REPO) holds metadata/ (N.root.json, root.json, N.targets.json, N.snapshot.json, timestamp.json) \
                and targets/ (each file as DIR/SHA256.NAME); serve REPO's two folders from any HTTPS server, object store or CDN. \
                Only metadata/timestamp.json and metadata/root.json change in place: give timestamp.json a short cache lifetime.

                Keys are PEM private keys as openssl genpkey writes them (Ed25519, EC P-256, RSA of 2048 bits or more), or \
                made by `pinning pinset keygen`. Keep root and targets keys offline; the timestamp key signs from a scheduler.

                Exit status: 0 success; 1 the command failed (the repository is damaged or expired, another command holds \
                its lock, a file cannot be written; status: a client would refuse the repository); 2 bad input or usage \
                (a key file, a configuration that would break clients, a REPO that is not a repository).
                """,
            subcommands: [Keygen.self, Init.self, Publish.self, RotateRoot.self, Timestamp.self, Status.self]
        )

        /// Reads a key file for `option`, naming the option and the file in any refusal.
        static func key(_ path: String, option: String, passphrase: String?) throws(InputError) -> TUFSigningKey {
            do {
                return try TUFSigningKey.load(file: path, passphrase: passphrase)
            } catch {
                throw InputError("\(option) \(error.description)")
            }
        }

        /// The key files given with `option` (repeatable), each read as ``key(_:option:passphrase:)`` reads it, with
        /// the option and file that name it in a refusal.
        static func keys(_ paths: [String], option: String, passphrase: String?) throws(InputError) -> [(option: String, path: String, key: TUFSigningKey)] {
            try paths.map { path throws(InputError) in (option, path, try Self.key(path, option: option, passphrase: passphrase)) }
        }

        /// A repository error as this CLI reports it: bad input exits 2 (an InputError), failures exit 1. A refused
        /// key is named by its option and file.
        static func fail(_ error: TUFRepositoryError, command: String, keyFiles: [(option: String, path: String, key: TUFSigningKey)] = []) -> any Error {
            switch error.code {
            case .notARepository, .alreadyARepository, .invalidInput:
                return InputError("pinset \(command): \(error.message)")
            case .wrongKey:
                if let keyID = error.keyID, let file = keyFiles.first(where: { $0.key.keyID == keyID }) {
                    return InputError("pinset \(command): \(file.option) \(file.path): \(error.message)")
                }
                return InputError("pinset \(command): \(error.message)")
            case .inconsistent, .io, .busy:
                // The prefix of every error line of the CLI (`pinning: pinset publish: …` for bad input): only the
                // exit status says bad input (2) from a failure (1).
                FileHandle.standardError.write(Data("pinning: pinset \(command): \(error.message)\n".utf8))
                return ExitCode(1)
            }
        }

        /// Refuses an empty list of root keys given with `option`, or a `--root-threshold` those keys cannot meet:
        /// the one rule of `init` (its `--root-key`) and `rotate-root` (its `--new-key`).
        static func checkRootKeys(_ paths: [String], option: String, threshold: Int, command: String) throws(InputError) {
            guard !paths.isEmpty else { throw InputError("pinset \(command): give at least one \(option)") }
            guard threshold >= 1 && threshold <= paths.count else {
                throw InputError("--root-threshold \(threshold): must be between 1 and the \(paths.count) \(option) given")
            }
        }

        /// `N root key(s), threshold T`, as `init` and `rotate-root` report a root.
        static func rootKeys(_ count: Int, threshold: Int) -> String {
            "\(count) root key\(count == 1 ? "" : "s"), threshold \(threshold)"
        }

        /// The repository at `path`, or a refusal naming it.
        static func repository(_ path: String, command: String) throws -> TUFRepositoryWriter {
            do {
                return try TUFRepositoryWriter(directory: path)
            } catch {
                throw Self.fail(error, command: command)
            }
        }
    }
}

/// `--expires ROLE=DAYS` (repeatable): how long each role's metadata stays valid.
struct ExpiryOptions: ParsableArguments {
    @Option(
        name: .customLong("expires"),
        help: ArgumentHelp(
            "How long a role's metadata stays valid, in days: root, targets, snapshot or timestamp (defaults 365, 90, 90, 1). Repeatable; kept in REPO/pinset.json for later commands.",
            valueName: "role=days"))
    var expires: [String] = []

    /// `periods` with the options applied.
    func applied(to periods: TUFExpiryPeriods) throws(InputError) -> TUFExpiryPeriods {
        var result = periods
        for entry in self.expires {
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, result[String(parts[0])] != nil else {
                throw InputError("--expires \(entry): expected ROLE=DAYS with ROLE root, targets, snapshot or timestamp")
            }
            guard let days = Int(parts[1]), (1...TUFExpiryPeriods.maximumDays).contains(days) else {
                throw InputError("--expires \(entry): DAYS must be a whole number from 1 to \(TUFExpiryPeriods.maximumDays)")
            }
            result[String(parts[0])] = days
        }
        return result
    }

    /// Applies the options to the periods the repository keeps (`pinset.json`), for this command and later ones;
    /// nothing when none is given.
    func store(in writer: TUFRepositoryWriter) throws {
        guard !self.expires.isEmpty else { return }
        try writer.setExpiryPeriods(try self.applied(to: try writer.expiryPeriods()))
    }

    func validate() throws {
        _ = try self.applied(to: TUFExpiryPeriods())
    }
}

/// `--targets-key`, `--snapshot-key`, `--timestamp-key`: the keys of the roles `init` and `publish` sign. Each is
/// required; a missing one is refused in this CLI's words (one line naming it), not argument-parser's usage text.
struct OnlineKeyOptions: ParsableArguments {
    @Option(name: .customLong("targets-key"), help: ArgumentHelp("The targets role's private key (PEM). Required.", valueName: "file"))
    var targetsKey: String?

    @Option(name: .customLong("snapshot-key"), help: ArgumentHelp("The snapshot role's private key (PEM). Required.", valueName: "file"))
    var snapshotKey: String?

    @Option(name: .customLong("timestamp-key"), help: ArgumentHelp("The timestamp role's private key (PEM). Required.", valueName: "file"))
    var timestampKey: String?

    func validate() throws {
        _ = try self.paths()
    }

    func paths() throws(InputError) -> [(option: String, path: String)] {
        let given = [("--targets-key", self.targetsKey), ("--snapshot-key", self.snapshotKey), ("--timestamp-key", self.timestampKey)]
        return try given.map { (option, path) throws(InputError) in
            guard let path else { throw InputError("pinset: \(option) FILE is required") }
            return (option, path)
        }
    }

    func load(passphrase: String?) throws(InputError) -> [(option: String, path: String, key: TUFSigningKey)] {
        try self.paths().map { (option, path) throws(InputError) in (option, path, try PinningCommand.PinSet.key(path, option: option, passphrase: passphrase)) }
    }
}

extension PinningCommand.PinSet {
    /// `pinning pinset keygen --type ed25519|ecdsa-p256|rsa --out FILE`.
    struct Keygen: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "keygen",
            abstract: "Make a signing key: PKCS#8 PEM, mode 0600, never overwriting a file.",
            discussion: "RSA keys are 3072 bits. With --passphrase-env or --passphrase-file the key is encrypted (PBES2, AES-256-CBC), as openssl pkcs8 -topk8 writes it. Prints the key id."
        )

        @Option(name: .long, help: ArgumentHelp("ed25519, ecdsa-p256 or rsa.", valueName: "type"), transform: KeyTypeArgument.parser(option: "--type"))
        var type: KeyTypeArgument

        @Option(name: .long, help: ArgumentHelp("The key file to create.", valueName: "file"))
        var out: String

        @OptionGroup var passphraseOptions: PassphraseOptions

        func run() async throws {
            let passphrase = try self.passphraseOptions.passphrase()
            let key: TUFSigningKey
            do {
                key = try TUFSigningKey.generate(self.type.keyType)
                try key.write(toNewFile: self.out, passphrase: passphrase)
            } catch let error as TUFKeyFileError {
                throw InputError("--out \(error.description)")
            }
            print("pinning pinset: wrote an \(self.type.rawValue) key to \(self.out) (key id \(key.keyID))")
        }
    }

    /// `pinning pinset init REPO --root-key K… [--root-threshold N] --targets-key K --snapshot-key K --timestamp-key K`.
    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Make a repository: root version 1 (metadata/1.root.json and root.json), empty targets, a snapshot and a timestamp.",
            discussion: "Ship REPO/metadata/root.json with every client as its trusted root."
        )

        @Argument(help: ArgumentHelp("The repository directory (created; it must not hold a repository).", valueName: "repo"))
        var repository: String

        @Option(name: .customLong("root-key"), help: ArgumentHelp("A root private key (repeat for several).", valueName: "file"))
        var rootKeys: [String] = []

        @Option(name: .customLong("root-threshold"), parsing: .unconditional, help: ArgumentHelp("How many root keys must sign a new root (default 1).", valueName: "n"))
        var rootThreshold: Int = 1

        @OptionGroup var keys: OnlineKeyOptions

        @OptionGroup var expiry: ExpiryOptions

        @OptionGroup var passphraseOptions: PassphraseOptions

        func validate() throws {
            try PinningCommand.PinSet.checkRootKeys(self.rootKeys, option: "--root-key", threshold: self.rootThreshold, command: "init")
        }

        func run() async throws {
            let passphrase = try self.passphraseOptions.passphrase()
            let periods = try self.expiry.applied(to: TUFExpiryPeriods())
            let roots = try PinningCommand.PinSet.keys(self.rootKeys, option: "--root-key", passphrase: passphrase).map(\.key)
            let online = try self.keys.load(passphrase: passphrase)
            do {
                let writer = try TUFRepositoryWriter.initialize(
                    directory: self.repository, rootKeys: roots, rootThreshold: self.rootThreshold, targetsKey: online[0].key, snapshotKey: online[1].key,
                    timestampKey: online[2].key, expiry: periods)
                print(
                    "pinning pinset: initialized \(self.repository): root v1 (\(PinningCommand.PinSet.rootKeys(roots.count, threshold: self.rootThreshold))); ship \(writer.metadataDirectory)/root.json with clients"
                )
            } catch {
                throw PinningCommand.PinSet.fail(error, command: "init")
            }
        }
    }

    /// `pinning pinset timestamp REPO --timestamp-key K`.
    struct Timestamp: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "timestamp",
            abstract: "Sign a new timestamp version (a new expiry), for a scheduler: run it well within the timestamp period.",
            discussion:
                "Exit status 1 when the snapshot or targets have expired (a new timestamp would not help clients: publish again), or the root has (renew it with rotate-root first)."
        )

        @Argument(help: ArgumentHelp("The repository directory.", valueName: "repo"))
        var repository: String

        @Option(name: .customLong("timestamp-key"), help: ArgumentHelp("The timestamp role's private key (PEM). Required.", valueName: "file"))
        var timestampKey: String?

        @OptionGroup var expiry: ExpiryOptions

        @OptionGroup var passphraseOptions: PassphraseOptions

        func validate() throws {
            _ = try self.timestampKeyPath()
        }

        /// The `--timestamp-key` file, or the refusal of a command without one.
        func timestampKeyPath() throws(InputError) -> String {
            guard let timestampKey = self.timestampKey else { throw InputError("pinset timestamp: --timestamp-key FILE is required") }
            return timestampKey
        }

        func run() async throws {
            let timestampKey = try self.timestampKeyPath()
            let writer = try PinningCommand.PinSet.repository(self.repository, command: "timestamp")
            let key = try PinningCommand.PinSet.key(timestampKey, option: "--timestamp-key", passphrase: try self.passphraseOptions.passphrase())
            do {
                try self.expiry.store(in: writer)
                let versions = try writer.renewTimestamp(timestampKey: key)
                print("pinning pinset: \(self.repository): timestamp v\(versions.timestamp) (\(versions))")
            } catch let error as TUFRepositoryError {
                throw PinningCommand.PinSet.fail(error, command: "timestamp", keyFiles: [("--timestamp-key", timestampKey, key)])
            }
        }
    }

    /// `pinning pinset rotate-root REPO --old-key K… --new-key K… [--root-threshold N]`.
    struct RotateRoot: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-root",
            abstract: "Sign a new root version with new root keys, signed by a threshold of the old root keys and of the new.",
            discussion: """
                --new-key lists every root key of the new version (repeat an old key to keep it). The other roles' keys are unchanged.

                An expired repository is renewed this way: the current root, timestamp, snapshot or targets may have expired \
                (clients accept a new root whatever the expiry of the one they trust; signatures and thresholds are still \
                checked). A timestamp, snapshot or targets that has expired is not re-signed here (they need the online keys): \
                the command says which command to run next.
                """
        )

        @Argument(help: ArgumentHelp("The repository directory.", valueName: "repo"))
        var repository: String

        @Option(name: .customLong("old-key"), help: ArgumentHelp("A root private key of the current root version (repeat).", valueName: "file"))
        var oldKeys: [String] = []

        @Option(name: .customLong("new-key"), help: ArgumentHelp("A root private key of the new root version (repeat).", valueName: "file"))
        var newKeys: [String] = []

        @Option(name: .customLong("root-threshold"), parsing: .unconditional, help: ArgumentHelp("How many new root keys must sign the root after this one (default 1).", valueName: "n"))
        var rootThreshold: Int = 1

        @OptionGroup var expiry: ExpiryOptions

        @OptionGroup var passphraseOptions: PassphraseOptions

        func validate() throws {
            guard !self.oldKeys.isEmpty else { throw InputError("pinset rotate-root: give at least one --old-key") }
            try PinningCommand.PinSet.checkRootKeys(self.newKeys, option: "--new-key", threshold: self.rootThreshold, command: "rotate-root")
        }

        func run() async throws {
            let writer = try PinningCommand.PinSet.repository(self.repository, command: "rotate-root")
            let passphrase = try self.passphraseOptions.passphrase()
            let old = try PinningCommand.PinSet.keys(self.oldKeys, option: "--old-key", passphrase: passphrase)
            let new = try PinningCommand.PinSet.keys(self.newKeys, option: "--new-key", passphrase: passphrase)
            let now = Date()
            do {
                try self.expiry.store(in: writer)
                let versions = try writer.rotateRoot(oldKeys: old.map(\.key), newKeys: new.map(\.key), threshold: self.rootThreshold, now: now)
                let count = Set(new.map(\.key.keyID)).count
                print("pinning pinset: \(self.repository): root v\(versions.root) (\(PinningCommand.PinSet.rootKeys(count, threshold: self.rootThreshold)))")
            } catch let error as TUFRepositoryError {
                throw PinningCommand.PinSet.fail(error, command: "rotate-root", keyFiles: old + new)
            }
            // The new root is written: from here on the rotation has succeeded, whatever happens to the hint. A failure
            // to read the status only warns (exit 0), so nobody retries and signs yet another root version.
            let expired: [String]
            do throws(TUFRepositoryError) {
                expired = try writer.status(at: now).roles.filter { $0.expired && $0.name != TUFRoleName.root }.map(\.name)
            } catch {
                FileHandle.standardError.write(
                    Data("pinning: pinset rotate-root: warning: the new root is written, but the repository's status cannot be read to say what to run next: \(error.message)\n".utf8))
                return
            }
            if expired == [TUFRoleName.timestamp] {
                print("pinning pinset: next: the timestamp has expired, and clients refuse the repository until `pinning pinset timestamp \(self.repository) --timestamp-key K` renews it")
            } else if !expired.isEmpty {
                print(
                    "pinning pinset: next: the \(expired.joined(separator: ", ")) metadata has expired, and clients refuse the repository until `pinning pinset publish \(self.repository) CONFIG …` signs new targets, snapshot and timestamp"
                )
            }
        }
    }
}

/// `keygen --type`.
enum KeyTypeArgument: String, EnumeratedArgument {
    case ed25519
    case ecdsaP256 = "ecdsa-p256"
    case rsa

    static let valueKind = "key type"

    var keyType: TUFSigningKey.KeyType {
        switch self {
        case .ed25519: .ed25519
        case .ecdsaP256: .ecdsaP256
        case .rsa: .rsa
        }
    }
}
