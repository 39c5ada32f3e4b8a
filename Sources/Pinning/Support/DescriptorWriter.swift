#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The one loop that writes a whole buffer to a file descriptor its caller opened: the modules that write files (a
/// TUF repository and client store, signing-key files, the TLS key log, `pinning pki`'s keys and certificates, a
/// translated configuration) each wrote it themselves. The core writes nothing with it: it holds it because it is
/// the one module all of those callers depend on.
package enum DescriptorWriter {
    /// Writes every byte of `bytes` to `descriptor`, again after a `write(2)` that was interrupted (`EINTR`) or
    /// wrote part. Returns nil when all were written, else the `errno` of the failure, copied the moment the call
    /// failed; `EIO` when `write(2)` wrote nothing for a non-empty buffer, which would otherwise loop forever.
    package static func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: CInt) -> CInt? {
        guard var base = bytes.baseAddress else { return nil }
        var remaining = bytes.count
        while remaining > 0 {
            let written = write(descriptor, base, remaining)
            if written < 0 {
                let code = errno
                if code == EINTR { continue }
                return code
            }
            if written == 0 { return EIO }
            remaining -= written
            base += written
        }
        return nil
    }

    /// ``writeAll(_:to:)`` of an array's bytes.
    package static func writeAll(_ bytes: [UInt8], to descriptor: CInt) -> CInt? {
        bytes.withUnsafeBytes { Self.writeAll($0, to: descriptor) }
    }
}
