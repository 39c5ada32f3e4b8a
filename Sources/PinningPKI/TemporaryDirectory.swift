import Foundation

/// A fresh directory under the system temporary directory, for tests that need files (the CLI tests).
///
/// It is not removed automatically: call ``remove()`` when done, for example in a `defer`.
public struct TemporaryDirectory: Sendable, Hashable {
    /// The directory's absolute path.
    public let path: String

    /// Creates a new, empty, uniquely named directory.
    ///
    /// - Parameter prefix: The start of the directory's name, before a random UUID.
    /// - Throws: ``TestPKIError/Code/fileSystem`` when the directory cannot be created.
    public init(prefix: String = "pinning-test") throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory(), isDirectory: true)
        let url = base.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        } catch {
            throw TestPKIError(.fileSystem, "cannot create \(url.path): \(error)")
        }
        self.path = url.path
    }

    /// Writes `contents` as UTF-8 to `name` inside the directory, creating subdirectories in `name`.
    ///
    /// - Returns: The file's full path.
    @discardableResult
    public func write(_ name: String, _ contents: String) throws -> String {
        try self.write(name, bytes: Array(contents.utf8))
    }

    /// Writes `bytes` to `name` inside the directory, creating subdirectories in `name`.
    ///
    /// - Returns: The file's full path.
    @discardableResult
    public func write(_ name: String, bytes: [UInt8]) throws -> String {
        guard !name.isEmpty, !name.hasPrefix("/"), !name.split(separator: "/").contains("..") else {
            throw TestPKIError(.fileSystem, "\"\(name)\" is not a relative path inside \(self.path)")
        }
        let url = URL(fileURLWithPath: self.path, isDirectory: true).appendingPathComponent(name)
        do {
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            try Data(bytes).write(to: url)
        } catch {
            throw TestPKIError(.fileSystem, "cannot write \(url.path): \(error)")
        }
        return url.path
    }

    /// The full path of `name` inside the directory (which need not exist).
    public func path(_ name: String) -> String {
        URL(fileURLWithPath: self.path, isDirectory: true).appendingPathComponent(name).path
    }

    /// Removes the directory and everything in it. Errors are ignored: a leftover temporary directory must
    /// not fail a test.
    public func remove() {
        do {
            try FileManager.default.removeItem(atPath: self.path)
        } catch {
            // Already gone, or not removable: nothing a test can do about it.
        }
    }
}
