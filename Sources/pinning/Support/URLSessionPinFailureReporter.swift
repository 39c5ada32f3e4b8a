import Foundation
import Pinning
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends pin failure reports to `https://` URIs with URLSession, for the CLI: the core library has no TLS
/// client, so ``HTTPPinFailureReporter`` hands https URIs here. One attempt each, bounded by `timeout`.
struct URLSessionPinFailureReporter: PinFailureReporting {
    var timeout: TimeInterval

    func send(_ report: PinFailureReport, to uris: [URL]) async {
        let body: Data
        do {
            body = try report.jsonData()
        } catch {
            Self.log("report not sent: it does not encode: \(error)")
            return
        }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = self.timeout
        configuration.timeoutIntervalForResource = self.timeout
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        for uri in uris {
            var request = URLRequest(url: uri, timeoutInterval: self.timeout)
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = body
            do {
                let (_, response) = try await session.data(for: request)
                let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                Self.log("report \((200..<300).contains(status) ? "delivered" : "not delivered") to \(uri.absoluteString): HTTP \(status)")
            } catch {
                Self.log("report not delivered to \(uri.absoluteString): \(error.localizedDescription)")
            }
        }
    }

    private static func log(_ message: String) {
        FileHandle.standardError.write(Data("pinning: \(message)\n".utf8))
    }
}
