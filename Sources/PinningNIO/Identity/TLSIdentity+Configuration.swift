public import Foundation
package import Pinning
import X509

/// Why a configuration entry's `clientIdentity` cannot be used, in words naming the entry and the file.
package struct ClientIdentityError: Error, Sendable, CustomStringConvertible {
    /// `clientIdentityUnusable`: the error's stable code (for logs, metrics and JSON; the words may change).
    package var code: String { "clientIdentityUnusable" }

    /// The entry whose identity failed.
    package var entry: String
    /// What is wrong.
    package var message: String

    /// `domains["ENTRY"].clientIdentity: MESSAGE`.
    package var description: String { "domains[\"\(self.entry)\"].clientIdentity: \(self.message)" }
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
                throw ClientIdentityError(entry: entry, message: "the passphrase variable \(name) (passphraseEnv) is not set")
            }
            passphrase = value
        }
        do {
            switch source.files {
            case .pkcs12(let path):
                return try TLSIdentity.pkcs12(file: path, passphrase: passphrase ?? "")
            case .pem(let chain, let key):
                return try TLSIdentity.pem(certificateChainFile: chain, privateKeyFile: key, passphrase: passphrase)
            }
        } catch {
            throw ClientIdentityError(entry: entry, message: error.description)
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
