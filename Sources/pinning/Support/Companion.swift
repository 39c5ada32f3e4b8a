import Foundation
import Pinning

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The executables installed beside `pinning` that some commands hand over to, as `pinning collector` does to
/// `pinning-collector`: found in the directory of the running executable (symbolic links resolved) and run with
/// `execv`, so the companion replaces this process (same pid, standard streams, signals and exit status).
enum Companion {
    /// `pinning collector` and `pinning bench collector` (issue 30): an HTTP server, SQLite, PostgreSQL and
    /// templates that the rest of the CLI never needs.
    static let collector = "pinning-collector"

    /// `pinning config import`'s reading, translating and writing (issue 31): the importer's XML parser links
    /// FoundationXML, libxml2, ICU and liblzma, which no other command needs.
    static let configImport = "pinning-config-import"

    /// `name` in the directory of the running executable.
    static func path(of name: String) -> String {
        let executable = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
        return executable.resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// Replaces this process with `name ARGUMENTS`; returns only by throwing (the companion is not there or cannot
    /// be run), with a message that starts with `command`.
    static func handOver(to name: String, command: String, arguments: [String]) throws(InputError) -> Never {
        let path = Self.path(of: name)
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw InputError(
                "\(command): \(path) is not there; \(command) runs its own executable: build it with `swift build --product \(name)` and install it beside pinning"
            )
        }
        let argv = [path] + arguments
        var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
        cArguments.append(nil)
        fflush(nil)
        execv(path, cArguments)
        let reason = SystemErrorText.text(errno)
        for pointer in cArguments { free(pointer) }
        throw InputError("\(command): cannot run \(path): \(reason)")
    }
}
