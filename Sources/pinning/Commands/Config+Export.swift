import ArgumentParser
import Foundation
import Pinning
import PinningExportCore
import X509

extension PinningCommand.Config {
    /// `pinning config export FILE --format android-nsc|trustkit|ats|okhttp [--lossy] [--out PATH]`.
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Write a host pinning configuration as an Android, TrustKit, App Transport Security or OkHttp pin configuration.",
            discussion: """
                Formats: android-nsc (res/xml/network_security_config.xml), trustkit (a TSKConfiguration property \
                list), ats (an Info.plist NSAppTransportSecurity fragment with NSPinnedDomains), okhttp (Kotlin \
                building a CertificatePinner).

                A feature the platform cannot express (report-only pins on Android, pin expiry on OkHttp, anchors on \
                TrustKit, a one-label wildcard on Android, …) is an error naming the entry and the platform; with \
                --lossy it is dropped with one warning each on stderr. For ats each pin must be placed as a leaf or \
                CA identity: the certificate it hashes is looked for among the entry's anchors and --certificates.

                Exit status: 0 written, 2 bad input or a feature that cannot be expressed (without --lossy).
                """
        )

        @Argument(help: ArgumentHelp("The configuration file (JSON).", valueName: "file"))
        var file: String

        @Option(
            name: .long,
            help: ArgumentHelp("\(ExportFormatArgument.choices).", valueName: "format"),
            transform: ExportFormatArgument.parser(option: "--format")
        )
        var format: ExportFormatArgument

        @Flag(name: .long, help: "Drop what the platform cannot express, with a warning per feature, instead of failing.")
        var lossy = false

        @Option(name: .long, help: ArgumentHelp("Write here instead of standard output ('-' is standard output; ./- is a file named -).", valueName: "path"))
        var out: String?

        @Option(
            name: .long,
            help: ArgumentHelp("Certificates the pins belong to (ats: decides leaf or CA identity); repeatable.", valueName: "file")
        )
        var certificates: [String] = []

        func run() async throws {
            let configuration: PinningConfiguration
            do {
                configuration = try PinningConfiguration(contentsOfFile: self.file)
            } catch {
                throw InputError(error.description)
            }
            var known: [Certificate] = []
            for path in self.certificates {
                do {
                    known += try CertificateLoader.certificates(atPath: path)
                } catch {
                    throw InputError("--certificates \(error.description)")
                }
            }
            let exporter = ConfigurationExporter(format: self.format.format, lossy: self.lossy, certificates: known)
            let translation: Translation
            do {
                translation = try exporter.export(configuration)
            } catch {
                throw InputError("cannot export \(self.file) for \(self.format.format.platformName): \(error.description)")
            }
            try OutputFile.write(translation, command: "export", to: self.out)
        }
    }

    /// `pinning config import FILE --format android-nsc|trustkit [--res DIR] [--lossy] [--out PATH]`.
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract: "Read an Android Network Security Config or a TrustKit configuration into a host pinning configuration.",
            discussion: """
                android-nsc reads res/xml/network_security_config.xml: domain-configs (nested ones inherit their \
                parent's pin-set and trust-anchors), pin-sets with their expiration, and trust anchors (@raw/NAME \
                found in --res DIR's raw folder, system). trustkit reads a property list holding TSKPinnedDomains, at \
                its root or under TSKConfiguration (an Info.plist).

                What a pinning configuration cannot express (the user trust store, overridePins, base-config anchors) \
                is an error naming the entry; with --lossy it is dropped with one warning each on stderr. The result is \
                validated before it is written (an enforced entry needs two pins, as TrustKit requires).

                Exit status: 0 written, 2 bad input or a feature that cannot be expressed (without --lossy).
                """
        )

        @Argument(help: ArgumentHelp("The Network Security Config (XML) or TrustKit property list.", valueName: "file"))
        var file: String

        @Option(
            name: .long,
            help: ArgumentHelp("\(ImportFormatArgument.choices).", valueName: "format"),
            transform: ImportFormatArgument.parser(option: "--format")
        )
        var format: ImportFormatArgument

        @Option(name: .long, help: ArgumentHelp("android-nsc: the app's res directory, where @raw/NAME anchors are.", valueName: "dir"))
        var res: String?

        @Flag(name: .long, help: "Drop what cannot be expressed, with a warning per feature, instead of failing.")
        var lossy = false

        @Option(
            name: .long,
            help: ArgumentHelp(
                "Write here instead of standard output (anchor paths are made relative to it; '-' is standard output, ./- a file named -).",
                valueName: "path"))
        var out: String?

        /// Hands over to `pinning-config-import` (beside this executable), which reads, translates and writes: the
        /// importer's XML parser links libraries that no other command needs and every `pinning` start would load
        /// (issue 31). The options go over as parsed (``ConfigImportHandOver``); what the companion prints and its
        /// exit status are this command's.
        func run() async throws {
            let arguments = ConfigImportHandOver.arguments(
                file: self.file, format: self.format.rawValue, res: self.res, lossy: self.lossy, out: self.out)
            try Companion.handOver(to: Companion.configImport, command: "config import", arguments: arguments)
        }
    }
}

/// `--out PATH` or standard output (``TranslationOutput``, shared with `pinning-config-import`).
enum OutputFile {
    /// What `config export` and `config import` print: the translation's warnings and notes on stderr, one line
    /// each, then its text to `path` or standard output.
    static func write(_ translation: Translation, command: String, to path: String?) throws(InputError) {
        do {
            try TranslationOutput.write(translation, command: command, to: path)
        } catch {
            throw InputError(error.message)
        }
    }
}
