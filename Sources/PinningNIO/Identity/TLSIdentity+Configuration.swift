public import Foundation
package import Pinning
import X509

/// Why a configuration entry's `clientIdentity` cannot be used, in words naming the entry and the file.
package struct ClientIdentityError: Error, Sendable, CustomStringConvertible {
    /// `clientIdentityUnusable`: the error's stable code (for logs, metrics and JSON; the words may change).
    package var code: String { "clientIdentityUnusable" }

    /// The entry whose identity failed.
    package var entry: String
    /// The `clientIdentity` member at fault (`certificate`, `key`, `pkcs12`, `passphraseEnv`), nil when the
    /// whole object is (a key that is not the certificate's: either file may be the wrong one).
    package var field: String?
    /// What is wrong.
    package var message: String

    package init(entry: String, field: String? = nil, message: String) {
        self.entry = entry
        self.field = field
        self.message = message
    }

    /// `domains["ENTRY"].clientIdentity.FIELD: MESSAGE` (without `.FIELD` when the whole object is at fault).
    package var description: String { "domains[\"\(self.entry)\"].clientIdentity\(self.field.map { "." + $0 } ?? ""): \(self.message)" }
}

extension TLSIdentity {
    /// Loads the client identity a configuration entry names.
    ///
    /// - Parameters:
    ///   - source: The entry's ``Pinning/PinningConfiguration/ClientIdentitySource``.
    ///   - entry: The entry's key, for messages.
    ///   - environment: Where `passphraseEnv` is looked up (the process environment, usually).
    /// - Throws: ``ClientIdentityError``: the variable is not set, a file cannot be read, the passphrase is wrong,
    ///   the key is not the certificate's.
    package static func load(
        _ source: PinningConfiguration.ClientIdentitySource,
        entry: String,
        environment: [String: String]
    ) throws(ClientIdentityError) -> TLSIdentity {
        var passphrase: String?
        if let name = source.passphraseEnvironmentVariable {
            guard let value = environment[name] else {
                throw ClientIdentityError(entry: entry, field: "passphraseEnv", message: "the passphrase variable \(name) (passphraseEnv) is not set")
            }
            passphrase = value
        }
        switch source.files {
        case .pkcs12(let path):
            do {
                return try TLSIdentity.pkcs12(file: path, passphrase: passphrase ?? "")
            } catch {
                throw ClientIdentityError(entry: entry, field: "pkcs12", message: error.description)
            }
        case .pem(let chain, let key):
            return try Self.loadPEM(chain: chain, key: key, passphrase: passphrase, entry: entry)
        }
    }

    /// `certificate` and `key`, each failure naming the member whose file is at fault, as `check` names
    /// `--identity-cert` and `--identity-key`: the certificate file's reading and certificates name `certificate`,
    /// the key file's reading, key and passphrase name `key`, and a key that is not the first certificate's names
    /// the object. The key's errors are told apart by their origin, a label no path equals, so this holds when both
    /// members name one file, which is then read once.
    private static func loadPEM(chain chainPath: String, key keyPath: String, passphrase: String?, entry: String) throws(ClientIdentityError) -> TLSIdentity {
        let keyOrigin = "clientIdentity.key \(keyPath)"
        let chain: [UInt8]
        let key: [UInt8]
        do {
            chain = try TLSIdentity.read(chainPath)
        } catch {
            throw ClientIdentityError(entry: entry, field: "certificate", message: error.description)
        }
        do {
            key = keyPath == chainPath ? chain : try TLSIdentity.read(keyPath)
        } catch {
            throw ClientIdentityError(entry: entry, field: "key", message: error.description)
        }
        do {
            return try TLSIdentity.pem(certificateChain: chain, privateKey: key, passphrase: passphrase, certificateOrigin: chainPath, keyOrigin: keyOrigin)
        } catch {
            guard error.origin == keyOrigin else {
                throw ClientIdentityError(entry: entry, field: "certificate", message: error.description)
            }
            var named = error
            named.origin = keyPath
            throw ClientIdentityError(entry: entry, field: error.code == .noCertificateMatchingKey ? nil : "key", message: named.description)
        }
    }

    /// What is wrong with this identity for mutual TLS at `date`: an extended key usage without clientAuth, or a
    /// leaf that is expired or not yet valid (errors); one that expires within `window` (a warning).
    public func clientUseProblems(at date: Date, expiringWithin window: TimeInterval = 30 * 86400) -> (errors: [String], warnings: [String]) {
        var errors: [String] = []
        var warnings: [String] = []
        let leaf = self.leaf
        do {
            if let usage = try leaf.extensions.extendedKeyUsage, !usage.contains(.clientAuth), !usage.contains(.any) {
                errors.append("the certificate \(leaf.subject) has an extended key usage without clientAuth, so servers refuse it as a client")
            }
        } catch {
            errors.append("the certificate \(leaf.subject) has an unreadable extended key usage: \(error)")
        }
        if date > leaf.notValidAfter {
            errors.append("the certificate \(leaf.subject) expired at \(RFC3339.format(leaf.notValidAfter))")
        } else if date < leaf.notValidBefore {
            errors.append("the certificate \(leaf.subject) is not valid before \(RFC3339.format(leaf.notValidBefore))")
        } else if leaf.notValidAfter.timeIntervalSince(date) < window {
            warnings.append("the certificate \(leaf.subject) expires at \(RFC3339.format(leaf.notValidAfter)), within \(Int(window / 86400)) days")
        }
        return (errors, warnings)
    }
}
