import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import X509

/// Scheme, host, port and path of an `https` URL (or, for ``PinnedHTTPClient/getPlainHTTP(_:headers:maximumBodySize:resolve:)``
/// only, an `http` URL).
struct RequestTarget: Sendable {
    var host: String
    var port: Int
    var pathAndQuery: String
    /// 443, or 80 for plain HTTP.
    var defaultPort: Int

    init(_ url: URL, plainHTTP: Bool = false) throws(PinningConnectionError) {
        let scheme = plainHTTP ? "http" : "https"
        guard url.scheme?.lowercased() == scheme else {
            throw PinningConnectionError(code: .invalidRequest, host: nil, message: "\(url.absoluteString): only \(scheme) URLs are supported here")
        }
        guard var host = url.host, !host.isEmpty else {
            throw PinningConnectionError(code: .invalidRequest, host: nil, message: "\(url.absoluteString): no host")
        }
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        }
        self.defaultPort = plainHTTP ? 80 : 443
        let port = url.port ?? self.defaultPort
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
        return self.port == self.defaultPort ? name : "\(name):\(self.port)"
    }
}
