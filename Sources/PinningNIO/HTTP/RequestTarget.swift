import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import X509

/// Scheme, host, port and path of an `https` URL.
struct RequestTarget: Sendable {
    var host: String
    var port: Int
    var pathAndQuery: String

    init(_ url: URL) throws(PinningConnectionError) {
        guard url.scheme?.lowercased() == "https" else {
            throw PinningConnectionError(code: .invalidRequest, host: nil, message: "\(url.absoluteString): only https URLs are supported")
        }
        guard var host = url.host, !host.isEmpty else {
            throw PinningConnectionError(code: .invalidRequest, host: nil, message: "\(url.absoluteString): no host")
        }
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        }
        let port = url.port ?? 443
        guard (1...65535).contains(port) else {
            throw PinningConnectionError(code: .invalidRequest, host: host, message: "\(url.absoluteString): port \(port) is not a TCP port")
        }
        self.host = host
        self.port = port
        var path = url.path(percentEncoded: true)
        if path.isEmpty { path = "/" }
        if let query = url.query(percentEncoded: true) { path += "?" + query }
        self.pathAndQuery = path
    }

    var hostHeader: String {
        let name = self.host.contains(":") ? "[\(self.host)]" : self.host
        return self.port == 443 ? name : "\(name):\(self.port)"
    }
}
