// The host pinning configuration (JSON). Relative anchor paths resolve against a scratch directory that holds
// the fuzzing root as "root.pem".
import Foundation
import FuzzSupport
import Pinning

/// One per process (libFuzzer's -jobs and -fork run several side by side).
let baseDirectoryPath = NSTemporaryDirectory() + "pinning-fuzz-configuration-\(ProcessInfo.processInfo.processIdentifier)"

let baseDirectory: String = {
    let directory = baseDirectoryPath
    do {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(FuzzPKI.pem([FuzzPKI.shared.root])).write(to: URL(fileURLWithPath: directory + "/root.pem"))
    } catch {
        preconditionFailure("cannot prepare \(directory): \(error)")
    }
    // Removed when libFuzzer exits normally (-runs or -max_total_time reached); a crash leaves it, beside the
    // crash's artifact.
    atexit {
        do {
            try FileManager.default.removeItem(atPath: baseDirectoryPath)
        } catch {
            // Nothing to be done about it at exit.
        }
    }
    return directory
}()

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutableRawPointer?, _ argv: UnsafeMutableRawPointer?) -> CInt {
    FuzzSeeds.exportPKI()
    _ = baseDirectory
    let pin = Pin(spkiOf: FuzzPKI.shared.leaf).description
    let backup = Pin(spkiOf: FuzzPKI.shared.root).description
    func config(_ body: String) -> [UInt8] { Array(body.utf8) }
    FuzzSeeds.write([
        "minimal.json": config("{\"version\": 1, \"domains\": {}}"),
        "full.json": config(
            """
            {"version": 1, "unlistedHosts": "default", "domains": {
              "api.fuzz.example": {"pins": ["\(pin)", "\(backup)"], "enforce": true, "expires": "2030-01-01T00:00:00Z",
                "anchors": ["root.pem"], "anchorsOnly": true, "reportURIs": ["https://report.fuzz.example/pins"]},
              "*.cdn.fuzz.example": {"pins": ["\(pin)", "\(backup)"], "includeSubdomains": false},
              "**.fleet.internal": {"pins": ["\(pin)", "\(backup)"], "enforce": false},
              "127.0.0.1": {"pins": ["\(pin)", "\(backup)"]}
            }}
            """),
        "reject.json": config("{\"version\": 1, \"unlistedHosts\": \"reject\", \"domains\": {\"fuzz.example\": {\"pins\": [\"\(pin)\", \"\(backup)\"], \"includeSubdomains\": true}}}"),
    ])
    return 0
}

/// What reading a text gave: the entries, or the problems (compared between the two readings).
enum Outcome: Equatable {
    case read(unlisted: String, entries: [PinningConfiguration.Entry])
    case refused([PinningConfigurationError.Problem])
    case otherError(String)

    init(_ read: () throws -> PinningConfiguration) {
        do {
            let configuration = try read()
            self = .read(unlisted: configuration.unlistedHosts.rawValue, entries: configuration.entries)
        } catch let error as PinningConfigurationError {
            self = .refused(error.problems)
        } catch {
            self = .otherError("\(error)")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = start.map { Data(UnsafeRawBufferPointer(start: $0, count: count)) } ?? Data()
    // The oracle: the one-pass reading (taken when the text has the usual shape) and the strict reader alone give the
    // same entries or the same problems (PinSetReadingDifferentialTests holds generated texts to it; here every input).
    let maximumSize = PinningConfiguration.maximumFileSize
    let onePass = Outcome { try PinningConfiguration(text: .init(bytes, maximumSize: maximumSize), baseDirectory: baseDirectory, origin: "<fuzz>") }
    let strict = Outcome {
        try PinningConfiguration(text: .init(bytes, maximumSize: maximumSize, readingInOnePass: false), baseDirectory: baseDirectory, origin: "<fuzz>")
    }
    if onePass != strict {
        preconditionFailure("the one-pass reading and the strict reader disagree: \(onePass) against \(strict)")
    }
    do {
        let configuration = try PinningConfiguration(data: bytes, baseDirectory: baseDirectory, origin: "<fuzz>")
        for entry in configuration.entries {
            _ = configuration.entry(forHost: entry.key)
        }
        _ = configuration.entry(forHost: "api.fuzz.example")
    } catch {
        _ = String(describing: error)
    }
    return 0
}

/// The entry point SwiftPM's `--defsym main=FuzzConfiguration_main` points at; libFuzzer's driver does the rest.
@_cdecl("FuzzConfiguration_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzer(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}
