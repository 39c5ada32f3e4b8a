import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Pinning
import X509

/// A connection with a trusted handshake and HTTP/1.1 handlers, or HTTP/2 with its stream multiplexer.
struct HTTPConnection: Sendable {
    let channel: any Channel
    let handshake: PinnedHandshake
    /// What went wrong on the connection first, readable after its handlers are gone.
    let events: ConnectionEvents
    /// Set when the server chose HTTP/2: requests are streams of this connection, which many share at once.
    var multiplexer: NIOHTTP2Handler.StreamMultiplexer? = nil
    /// The generation of the client's configuration source read before the handshake (never newer than the
    /// configuration that judged it); nil for a client with a fixed evaluator.
    var generation: Int? = nil

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
        /// HTTP/2 connections: never taken out, shared by every request to the key while open.
        var shared: [Key: HTTPConnection] = [:]
        /// Connections being made that may turn out to speak HTTP/2: requests to the same key wait for them
        /// rather than each opening its own.
        var connecting: [Key: Task<HTTPConnection, any Error>] = [:]
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

    /// The open HTTP/2 connection for `key`, if any (a closed one is dropped).
    func shared(_ key: Key) -> HTTPConnection? {
        self.state.withLockedValue { state in
            guard let connection = state.shared[key] else { return nil }
            if connection.channel.isActive { return connection }
            state.shared[key] = nil
            return nil
        }
    }

    /// Takes `connection` out of the shared HTTP/2 connections (it was trusted under an older configuration):
    /// new requests get a new connection; its streams in flight finish, then it closes (GOAWAY).
    func retireShared(_ connection: HTTPConnection, for key: Key) {
        let retired = self.state.withLockedValue { state -> Bool in
            guard let current = state.shared[key], current.channel === connection.channel else { return false }
            state.shared[key] = nil
            return true
        }
        if retired {
            connection.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
    }

    /// The connection being made for `key` by another request, or `start`'s, registered for others to join.
    /// The returned flag says whether this caller started it (and so owns an HTTP/1.1 result).
    func connecting(_ key: Key, start: () -> Task<HTTPConnection, any Error>) -> (Task<HTTPConnection, any Error>, started: Bool) {
        self.state.withLockedValue { state in
            if let pending = state.connecting[key] { return (pending, false) }
            let task = start()
            state.connecting[key] = task
            return (task, true)
        }
    }

    /// The connection for `key` is made (or failed): an HTTP/2 one becomes shared; joiners stop waiting on it.
    /// False when the pool was shut down meanwhile (the caller closes an HTTP/2 connection it cannot share).
    func connected(_ key: Key, _ connection: HTTPConnection?) -> Bool {
        self.state.withLockedValue { state in
            state.connecting[key] = nil
            guard let connection, connection.multiplexer != nil else { return true }
            guard !state.isShutDown else { return false }
            state.shared[key] = connection
            return true
        }
    }

    /// Marks the pool shut down and hands back every idle and shared connection.
    func shutdown() -> [HTTPConnection] {
        self.state.withLockedValue { state in
            state.isShutDown = true
            let all = state.idle.values.flatMap { $0 } + state.shared.values
            state.idle = [:]
            state.shared = [:]
            return all
        }
    }
}
