import ArgumentParser
import Foundation
import Pinning
import PinningExport
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

        @Option(name: .long, help: ArgumentHelp("Write here instead of standard output.", valueName: "path"))
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

        @Option(name: .long, help: ArgumentHelp("Write here instead of standard output (anchor paths are made relative to it).", valueName: "path"))
        var out: String?

        func run() async throws {
            let bytes: [UInt8]
            do {
                bytes = try CertificateLoader.readFile(atPath: self.file)
            } catch {
                throw InputError("\(self.file): \(error.problem)")
            }
            guard bytes.count <= PinningConfiguration.maximumFileSize else {
                throw InputError("\(self.file): larger than \(PinningConfiguration.maximumFileSize) bytes")
            }
            if let res = self.res {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: res, isDirectory: &isDirectory), isDirectory.boolValue else {
                    throw InputError("--res \(res): not a directory")
                }
            }
            let base =
                self.out.map { URL(fileURLWithPath: $0).deletingLastPathComponent().path } ?? FileManager.default.currentDirectoryPath
            let importer = ConfigurationImporter(format: self.format.format, lossy: self.lossy, resourceDirectory: self.res)
            let translation: Translation
            do {
                translation = try importer.importConfiguration(bytes, baseDirectory: base)
            } catch {
                throw InputError("cannot import \(self.file) as \(self.format.rawValue): \(error.description)")
            }
            try OutputFile.write(translation, command: "import", to: self.out)
        }
    }
}
