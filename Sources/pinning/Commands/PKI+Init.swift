import ArgumentParser
import Foundation
import Pinning
import PinningNIO
import PinningPKI
import X509

extension PinningCommand.PKI {
    /// `pinning pki init DIR [--name NAME] [--key ec|rsa] [--days N]`.
    struct Init: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Create a root CA: DIR/NAME.pem and DIR/NAME.key."
        )

        @Argument(help: ArgumentHelp("The PKI directory (created when missing).", valueName: "DIR"))
        var directory: String

        @Option(name: .long, help: "The root's file name and common name.")
        var name: String = "root"

        @OptionGroup var options: PKICreationOptions

        func run() async throws {
            try PKIDirectory.checkName(self.name, option: "--name")
            let pki = PKIDirectory(path: self.directory)
            let certificatePath = pki.certificatePath(self.name)
            let keyPath = pki.keyPath(self.name)
            try pki.create()
            try PKIDirectory.checkWritable([certificatePath, keyPath], force: self.options.force)
            let notValidAfter = try self.options.notValidAfter(defaultDays: 3650, issuer: nil)
            let root: TestIdentity
            do {
                // Unlimited path length: the root may issue intermediates that issue intermediates.
                root = try TestPKI.root(self.name, key: self.options.key.testKeyType, notValidAfter: notValidAfter)
            } catch {
                throw InputError("cannot create the root \(self.name): \(PKIErrorWords.words(error))")
            }
            try PKIDirectory.write(root, certificatePath: certificatePath, keyPath: keyPath)
            print("root CA \"\(self.name)\" (\(self.options.key.label), \(PKIOutput.validity(root.certificate)))")
            PKIOutput.wrote(certificatePath: certificatePath, keyPath: keyPath)
            PKIOutput.pins([(self.name, root.certificate)])
        }
    }
}
