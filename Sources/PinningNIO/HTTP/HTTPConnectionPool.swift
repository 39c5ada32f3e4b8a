import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Pinning
import X509

/// A connection with a trusted handshake and HTTP/1.1 handlers.
struct HTTPConnection: Sendable {
    let channel: any Channel
    let handshake: PinnedHandshake
    /// What went wrong on the connection first, readable after its handlers are gone.
    let events: ConnectionEvents

    /// Starts closing without waiting: NIOSSL waits up to its shutdown timeout (5 s) for the peer's
    /// close_notify, which must not delay the caller's result.
    func closeInBackground() {
        self.channel.close(promise: nil)
    }

    func close() async {
        do {
            try await self.channel.close()
        } catch {
            // Already closed: nothing to release.
        }
    }
}

/// Idle connections by host, port and resolved address.
final class HTTPConnectionPool: Sendable {
    struct Key: Hashable, Sendable {
        var host: String
        var port: Int
        var address: String?
    }

    private struct State {
        var idle: [Key: [HTTPConnection]] = [:]
        var isShutDown = false
        var opened = 0
    }

    private let state = NIOLockedValueBox(State())
    private let maximumIdlePerKey: Int

    init(maximumIdlePerKey: Int) {
        self.maximumIdlePerKey = maximumIdlePerKey
    }

    var opened: Int { self.state.withLockedValue { $0.opened } }
    var isShutDown: Bool { self.state.withLockedValue { $0.isShutDown } }

    func countOpened() {
        self.state.withLockedValue { $0.opened += 1 }
    }

    /// An idle, still open connection for `key`. Closed ones found on the way are dropped.
    func take(_ key: Key) -> HTTPConnection? {
        self.state.withLockedValue { state in
            while var list = state.idle[key], let connection = list.popLast() {
                state.idle[key] = list
                if connection.channel.isActive { return connection }
            }
            return nil
        }
    }

    /// Keeps `connection` for reuse; false when the pool is shut down or full (the caller closes it).
    func put(_ connection: HTTPConnection, for key: Key) -> Bool {
        self.state.withLockedValue { state in
            guard !state.isShutDown, state.idle[key, default: []].count < self.maximumIdlePerKey else { return false }
            state.idle[key, default: []].append(connection)
            return true
        }
    }

    /// Marks the pool shut down and hands back every idle connection.
    func shutdown() -> [HTTPConnection] {
        self.state.withLockedValue { state in
            state.isShutDown = true
            let all = state.idle.values.flatMap { $0 }
            state.idle = [:]
            return all
        }
    }
}
