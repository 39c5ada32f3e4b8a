import Foundation
import Pinning
import PinningExport

// `pinning-config-import`: the work of `pinning config import` (issue 31). `pinning` parses the command line (usage,
// refusals and help are its own) and hands the options over in the fixed form `ConfigImportHandOver` writes; this
// reads the file, translates it and writes the result exactly as the command did inside `pinning`: the same lines
// on standard output and standard error, exit status 0 written, 2 bad input. It lives apart because the importer's
// XML parser links FoundationXML (libxml2, ICU, liblzma), which every `pinning` start would otherwise load.

/// Bad input: `pinning: MESSAGE` on standard error, exit status 2, as `pinning` prints its own.
func refuse(_ message: String) -> Never {
    FileHandle.standardError.write(Data("pinning: \(message)\n".utf8))
    exit(2)
}

// The bound on waiting for a FIFO (the file read, --out written), read here once: the core reads no environment.
BoundedFileReader.setWaitSeconds(fromVariable: ProcessInfo.processInfo.environment[BoundedFileReader.waitVariable])

guard let options = ConfigImportHandOver.options(Array(CommandLine.arguments.dropFirst())) else {
    refuse("pinning-config-import is run by `pinning config import`; see `pinning config import --help`")
}

let bytes: [UInt8]
do {
    bytes = try CertificateLoader.readFile(atPath: options.file)
} catch {
    refuse("\(options.file): \(error.problem)")
}
guard bytes.count <= PinningConfiguration.maximumFileSize else {
    refuse("\(options.file): larger than \(PinningConfiguration.maximumFileSize) bytes")
}
if let res = options.res {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: res, isDirectory: &isDirectory), isDirectory.boolValue else {
        refuse("--res \(res): not a directory")
    }
}
let base = options.out.map { URL(fileURLWithPath: $0).deletingLastPathComponent().path } ?? FileManager.default.currentDirectoryPath
let importer = ConfigurationImporter(format: options.format, lossy: options.lossy, resourceDirectory: options.res)
let translation: Translation
do {
    translation = try importer.importConfiguration(bytes, baseDirectory: base)
} catch {
    refuse("cannot import \(options.file) as \(options.format.rawValue): \(error.description)")
}
do {
    try TranslationOutput.write(translation, command: "import", to: options.out)
} catch {
    refuse(error.message)
}
