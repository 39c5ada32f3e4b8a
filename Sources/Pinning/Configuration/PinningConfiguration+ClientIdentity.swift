import Foundation

extension PinningConfiguration {
    /// Where an entry's client identity for mutual TLS comes from: the `clientIdentity` field,
    /// `{"pkcs12": "device.p12", "passphraseEnv": "DEVICE_P12_PASS"}` or
    /// `{"certificate": "chain.pem", "key": "key.pem"}`, paths relative to the configuration file.
    ///
    /// The core only names the files (it reads no file it was not handed); `PinningNIO`'s `TLSIdentity` loads
    /// them, and `pinning config lint` checks them.
    package struct ClientIdentitySource: Sendable, Hashable {
        /// The files, with paths resolved against the configuration file's directory.
        package enum Files: Sendable, Hashable {
            /// A PKCS#12 file (key, certificate and intermediates).
            case pkcs12(String)
            /// A PEM certificate chain (leaf first) and its private key.
            case pem(certificateChain: String, privateKey: String)
        }

        /// The files.
        package let files: Files
        /// The environment variable that holds the passphrase (of the PKCS#12 file, or of an encrypted key).
        package let passphraseEnvironmentVariable: String?
        /// The paths as written in the configuration (for encoding it back).
        let writtenPaths: [String]
    }
}

extension ConfigurationValidator {
    static let clientIdentityFields = ["certificate", "key", "passphraseEnv", "pkcs12"]

    /// `clientIdentity`: an object with `pkcs12`, or `certificate` and `key`; `passphraseEnv` optional.
    mutating func clientIdentity(_ value: TUFJSON?, _ key: String) -> PinningConfiguration.ClientIdentitySource? {
        guard let value else { return nil }
        guard case .object(let fields) = value else {
            self.addProblem(
                .wrongType, key, "clientIdentity",
                "must be an object such as {\"pkcs12\": \"device.p12\", \"passphraseEnv\": \"DEVICE_P12_PASS\"} or {\"certificate\": \"chain.pem\", \"key\": \"key.pem\"}, not \(value.typeName)"
            )
            return nil
        }
        let before = self.problemCount
        for field in fields.keys.sorted() where !Self.clientIdentityFields.contains(field) {
            self.addProblem(.unknownField, key, "clientIdentity.\(field)", "unknown field; clientIdentity has only \(Self.clientIdentityFields.joined(separator: ", "))")
        }
        func path(_ name: String) -> String? {
            switch fields[name] {
            case nil:
                return nil
            case .string(let text)?:
                guard !text.isEmpty else {
                    self.addProblem(.invalidValue, key, "clientIdentity.\(name)", "the path is empty")
                    return nil
                }
                return text
            case let other?:
                self.addProblem(.wrongType, key, "clientIdentity.\(name)", "must be a path string, not \(other.typeName)")
                return nil
            }
        }
        let pkcs12 = path("pkcs12")
        let certificate = path("certificate")
        let privateKey = path("key")
        var variable: String?
        switch fields["passphraseEnv"] {
        case nil:
            break
        case .string(let name)?:
            let valid =
                !name.isEmpty && name.utf8.count <= 255
                && name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || $0 == "_" || ("0"..."9").contains($0)) }
                && !("0"..."9").contains(name.unicodeScalars.first!)
            if valid {
                variable = name
            } else {
                self.addProblem(.invalidValue, key, "clientIdentity.passphraseEnv", "\"\(name)\" is not an environment variable name (letters, digits, _)")
            }
        case let other?:
            self.addProblem(.wrongType, key, "clientIdentity.passphraseEnv", "must be an environment variable name, not \(other.typeName)")
        }
        let files: PinningConfiguration.ClientIdentitySource.Files
        let written: [String]
        switch (pkcs12, certificate, privateKey) {
        case (let p12?, nil, nil):
            files = .pkcs12(self.resolve(p12))
            written = [p12]
        case (nil, let chain?, let keyFile?):
            files = .pem(certificateChain: self.resolve(chain), privateKey: self.resolve(keyFile))
            written = [chain, keyFile]
        case (_?, _, _):
            self.addProblem(.invalidValue, key, "clientIdentity", "give either pkcs12, or certificate and key, not both")
            return nil
        case (nil, _?, nil):
            self.addProblem(.missingField, key, "clientIdentity.key", "missing; a PEM certificate needs its private key")
            return nil
        case (nil, nil, _?):
            self.addProblem(.missingField, key, "clientIdentity.certificate", "missing; a private key needs its certificate chain")
            return nil
        case (nil, nil, nil):
            if self.problemCount == before {
                self.addProblem(.missingField, key, "clientIdentity", "names no file; give pkcs12, or certificate and key")
            }
            return nil
        }
        guard self.problemCount == before else { return nil }
        return PinningConfiguration.ClientIdentitySource(files: files, passphraseEnvironmentVariable: variable, writtenPaths: written)
    }

    /// A path from the configuration, resolved against its directory.
    func resolve(_ path: String) -> String {
        path.hasPrefix("/") ? path : URL(fileURLWithPath: self.baseDirectory, isDirectory: true).appendingPathComponent(path).path
    }
}
