import Foundation
import NIOConcurrencyHelpers
import Pinning
import Testing

@testable import PinningNIO

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

@Suite("TUF file store")
struct TUFFileStoreTests {
    @Test("a file that appears and disappears is read whole or found missing, never judged by a check before its open")
    func presenceIsTheOpensAnswer() throws {
        // A name renamed in and out of place while `TUFFiles.readFile` reads it. A reader that stats the path and
        // then opens it can see the file and then fail to open it ("cannot read …: no such file"), an error where
        // the state was only "not there yet"; one whose open says what is there answers nil or the bytes.
        let directory = NSTemporaryDirectory() + "tuf-file-store-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let name = directory + "/timestamp.json"
        let aside = directory + "/aside"
        let contents = Array("{\"signed\":{}}".utf8)
        #expect(FileManager.default.createFile(atPath: aside, contents: Data(contents)))
        let stop = NIOLockedValueBox(false)
        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var present = false
            while !stop.withLockedValue({ $0 }) {
                _ = present ? rename(name, aside) : rename(aside, name)
                present.toggle()
            }
            stopped.signal()
        }
        defer {
            stop.withLockedValue { $0 = true }
            stopped.wait()
        }
        var found = 0
        var missing = 0
        // At least 20,000 reads, and on until both answers have been seen (the swapping thread may start late on a
        // loaded machine), at most 1,000,000.
        for read in 0..<1_000_000 where read < 20_000 || found == 0 || missing == 0 {
            do {
                if let bytes = try TUFFiles.readFile(name, maximumLength: 1024, role: "timestamp") {
                    #expect(bytes == contents)
                    found += 1
                } else {
                    missing += 1
                }
            } catch {
                Issue.record("a file present or absent was reported unreadable: \(error)")
                return
            }
        }
        // Not vacuous: the name was read both present and absent.
        #expect(found > 0 && missing > 0, "\(found) present, \(missing) absent")
    }
}
