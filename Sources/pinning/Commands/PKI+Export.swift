import ArgumentParser
import Foundation
import Pinning
import PinningNIO
import PinningPKI
import X509

extension PinningCommand.PKI {
    /// `pinning pki export DIR NAME --p12 OUT (--passphrase-env VAR | --passphrase-file FILE) [--legacy]`.
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Export a certificate, its key and intermediates as PKCS#12 (.p12).",
            discussion: """
                The default encryption is AES-256-CBC with PBKDF2-HMAC-SHA256; --legacy writes \
                pbeWithSHAAnd3-KeyTripleDES-CBC, which older tools need (macOS before 10.15, Windows before Server \
                2019, Java 8 before 8u301, OpenSSL 1.0). Both use an HMAC-SHA1 MAC. The file is written with mode 0600 \
                and read back before the command succeeds.
                """
        )

        @Argument(help: ArgumentHelp("The PKI directory.", valueName: "DIR"))
        var directory: String

        @Argument(help: ArgumentHelp("The certificate to export (DIR/NAME.pem, DIR/NAME.key).", valueName: "NAME"))
        var name: String

        @Option(name: .customLong("p12"), help: ArgumentHelp("The PKCS#12 file to write.", valueName: "OUT"))
        var output: String

        @OptionGroup var passphraseOptions: PassphraseOptions

        @Flag(name: .long, help: "Write the 3DES form older tools need instead of AES-256.")
        var legacy = false

        @Flag(name: .long, help: "Replace an existing OUT.")
        var force = false

        /// Any UTF-8 passphrase but the empty one (a PKCS#12 file without a passphrase protects nothing).
        func passphrase() throws(InputError) -> String {
            guard let passphrase = try self.passphraseOptions.passphrase() else {
                throw InputError("pass exactly one of --passphrase-env VAR, --passphrase-file FILE")
            }
            guard !passphrase.isEmpty else {
                if let variable = self.passphraseOptions.environment {
                    throw InputError("--passphrase-env \(variable): the environment variable is empty")
                }
                throw InputError("--passphrase-file \(self.passphraseOptions.file ?? ""): the first line is empty")
            }
            return passphrase
        }

        func run() async throws {
            try PKIDirectory.checkName(self.name, option: "NAME")
            let passphrase = try self.passphrase()
            let pki = PKIDirectory(path: self.directory)
            let identity = try pki.identity(self.name, option: "NAME")
            try PKIDirectory.checkWritable([self.output], force: self.force)
            let intermediates = try pki.intermediates(above: identity.certificate)
            let chain = [identity.certificate] + intermediates
            let bytes: [UInt8]
            do {
                bytes = try PKCS12Writer.serialize(
                    certificateChain: chain,
                    privateKeyPEM: identity.privateKeyPEM,
                    passphrase: passphrase,
                    friendlyName: self.name,
                    encryption: self.legacy ? .legacy3DES : .aes256
                )
            } catch {
                throw InputError("\(self.name): cannot write PKCS#12: \(PKIErrorWords.words(error))")
            }
            // Read it back the way applications will, before anyone relies on it.
            let loaded: TLSIdentity
            do {
                loaded = try TLSIdentity.pkcs12(bytes: bytes, passphrase: passphrase, origin: self.output)
            } catch {
                throw InputError("\(self.output): the written PKCS#12 does not load back: \(PKIErrorWords.words(error))")
            }
            guard loaded.leaf == identity.certificate, loaded.certificateChain.count == chain.count else {
                throw InputError("\(self.output): the written PKCS#12 loads back with a different chain")
            }
            try PKIDirectory.write(bytes, to: self.output, mode: PKIDirectory.keyMode)
            let form = self.legacy ? "legacy: pbeWithSHAAnd3-KeyTripleDES-CBC" : "AES-256-CBC, PBKDF2-HMAC-SHA256"
            print("PKCS#12 \"\(self.name)\" (\(form); key and \(chain.count) certificate\(chain.count == 1 ? "" : "s"))")
            PKIOutput.wrote(self.output, note: "mode 0600")
            PKIOutput.pins([(self.name, identity.certificate)])
        }
    }
}
