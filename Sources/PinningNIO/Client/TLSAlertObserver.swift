import NIOConcurrencyHelpers
public import NIOCore
package import NIOSSL

/// Reads the TLS alerts of a connection from its records: added between the socket and NIOSSL's handler, it sees
/// the bytes NIOSSL reads and writes, passes every one on unchanged and untouched in time, and answers "which
/// alerts crossed, in which direction" as values (``TLSAlertsSeen``) for ``PinningConnectionError``.
///
/// NIOSSL keeps BoringSSL's error codes private (only their text is public) and gives no `SSL*` for an info
/// callback, so the alert is taken from the wire instead:
/// - A plaintext alert record (content type 21, two bytes: TLS 1.2 before ChangeCipherSpec, TLS 1.3 before the
///   sender has handshake keys) is read as it passes.
/// - TLS 1.3 encrypts alerts once the sender has keys (outer type 23). The connection's traffic secrets reach the
///   observer through the context's key log callback (a process-wide table keyed by the ClientHello's random,
///   which the observer read); with the cipher suite from the ServerHello it derives each direction's key and IV
///   (RFC 8446 §7.3) and opens only the small records it kept, trying the sequence
///   numbers the record's position allows. A server that refuses our client certificate writes its alert after
///   its own Finished, under its application traffic secret, when our side of the handshake has completed: so the
///   observer keeps reading a bounded number of records past the handshake.
/// - TLS 1.2 alerts sent after ChangeCipherSpec (rare: a bad Finished) are not decrypted: no alert known.
///
/// It never decides anything: trust is the verification callback's and ``PinningHandshakeHandler``'s. It reads at
/// most the first 64 records of each direction, keeps at most a few hundred bytes of each of a few records, and
/// ends when the handshake has completed (a TLS 1.3 client: after the peer's next record, where a refusal of our
/// certificate would be), when the channel closes, or at that limit; then it passes bytes through unread.
/// Malformed or hostile records end its reading with "no alert known". The secrets are held from the key log lines
/// until it ends, then overwritten; they are never logged or exposed.
public final class TLSAlertObserver: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private var observation: TLSRecordObservation
    private let secrets: TLSAlertSecrets
    /// The random this observer registered its interest under, until it ends.
    private var registered: [UInt8]?
    private var ended = false
    /// Once the handshake completed on our side: how many peer records had been read then.
    private var inboundRecordsAtCompletion: Int?

    init(role: TLSRecordObservation.Role, secrets: TLSAlertSecrets = .shared) {
        self.observation = TLSRecordObservation(role: role)
        self.secrets = secrets
    }

    /// An observer for the server side of a connection whose TLS handler this module did not add (the proxy's
    /// local-CA side); its context must carry ``TLSAlertSecrets/keyLogCallback(forwardingTo:)`` for TLS 1.3 alerts.
    package static func forServer() -> TLSAlertObserver {
        TLSAlertObserver(role: .server)
    }

    /// The observer in `channel`'s pipeline (its parent's, for an HTTP/2 stream), if there is one: no observer is
    /// "no alert known", never a different verdict. On the channel's event loop.
    package static func alerts(of channel: any Channel) -> TLSAlertsSeen? {
        if let observer = try? channel.pipeline.syncOperations.handler(type: TLSAlertObserver.self) {
            return observer.alerts
        }
        // An HTTP/2 stream's observer is on its connection, its parent, on the same event loop. The parent of a
        // connection a server accepted is the listening channel instead: it has no observer, and it may run on
        // another event loop, whose pipeline may not be read from here (NIO's precondition; a data race in a
        // release build). So a parent is asked only when it shares this event loop.
        guard let parent = channel.parent, parent.eventLoop.inEventLoop else { return nil }
        return (try? parent.pipeline.syncOperations.handler(type: TLSAlertObserver.self))?.alerts
    }

    /// Whether it still reads records (and may hold the connection's secrets); false once it ended.
    package var isObserving: Bool { !self.ended }

    /// The alerts seen so far, the kept encrypted records decrypted first with the secrets logged until now.
    public var alerts: TLSAlertsSeen {
        self.resolve()
        return self.observation.alerts
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !self.ended { self.observe(self.unwrapInboundIn(data).readableBytesView, .inbound) }
        context.fireChannelRead(data)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if !self.ended { self.observe(self.unwrapOutboundIn(data).readableBytesView, .outbound) }
        context.write(data, promise: promise)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        // Before the handlers after us map the failure: they ask for ``alerts`` once we ended, so read them now.
        self.end()
        context.fireChannelInactive()
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.end()
    }

    /// Our side's handshake completed (``PinningHandshakeHandler`` or the proxy tell it, from NIOSSL's event, which
    /// this handler on the socket's side of NIOSSL does not see).
    ///
    /// A TLS 1.3 client's handshake completes before the server has read our certificate: a server refusing it
    /// sends its alert as its next record. So a TLS 1.3 client reads one more whole record from the peer (that alert,
    /// a session ticket or the response), then ends; every other side ends now, as nothing of the handshake is left
    /// to refuse. Ending opens what was kept and overwrites the secrets.
    package func handshakeCompleted() {
        guard !self.ended, self.inboundRecordsAtCompletion == nil else { return }
        self.observation.handshakeCompleted()
        if self.observation.role == .client && self.observation.isTLS13 {
            self.inboundRecordsAtCompletion = self.observation.recordsRead(.inbound)
        } else {
            self.end()
        }
    }

    private func observe(_ bytes: ByteBufferView, _ direction: TLSRecordObservation.Direction) {
        self.observation.read(bytes, direction)
        if self.registered == nil, let random = self.observation.clientRandom {
            // Refused (nil) when another live connection registered the same random: its secrets are never ours.
            self.registered = self.secrets.register(random) ? random : []
        }
        if self.observation.isFinished {
            self.end()
        } else if let mark = self.inboundRecordsAtCompletion, self.observation.recordsRead(.inbound) > mark {
            self.end()
        }
    }

    /// Opens the kept records with the secrets logged so far.
    private func resolve() {
        guard !self.ended, self.observation.hasPendingCandidates, let random = self.registered, !random.isEmpty else { return }
        self.secrets.withSecrets(of: random) { self.observation.resolve(secrets: $0) }
    }

    /// Reads what is kept, then forgets the secrets and the kept records; from now on bytes pass unread.
    private func end() {
        guard !self.ended else { return }
        self.resolve()
        self.ended = true
        self.observation.dropCandidates()
        if let random = self.registered, !random.isEmpty { self.secrets.unregister(random) }
    }
}

@available(*, unavailable)
extension TLSAlertObserver: Sendable {}

/// Where key log lines meet the observers that asked for them: each ``TLSAlertObserver`` registers the ClientHello
/// random of its connection, and the key log callback of every context we make (``keyLogCallback(forwardingTo:)``)
/// stores a line's secret only when its random is registered; every other line is dropped at once. An observer
/// unregisters when its reading ends, and its secrets are overwritten then. Bounded: at most ``capacity``
/// connections registered at once (beyond that, "no alert known").
package final class TLSAlertSecrets: Sendable {
    /// The process's registry, which every context's callback feeds.
    package static let shared = TLSAlertSecrets(capacity: 4096)

    let capacity: Int
    private let entries = NIOLockedValueBox([[UInt8]: TLS13Secrets]())

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Registers interest in `random`'s secrets; false when it is registered already (another connection chose, or a
    /// hostile client replayed, the same random) or the registry is full.
    func register(_ random: [UInt8]) -> Bool {
        self.entries.withLockedValue { entries in
            guard entries[random] == nil, entries.count < self.capacity else { return false }
            entries[random] = TLS13Secrets()
            return true
        }
    }

    func unregister(_ random: [UInt8]) {
        self.entries.withLockedValue { entries in
            entries[random]?.wipe()
            entries.removeValue(forKey: random)
        }
    }

    func withSecrets(of random: [UInt8], _ body: (TLS13Secrets) -> Void) {
        self.entries.withLockedValue { entries in
            if let secrets = entries[random] { body(secrets) }
        }
    }

    /// How many connections are registered now (tests check that ended observers leave none).
    package var count: Int { self.entries.withLockedValue { $0.count } }

    /// Takes one NSS key log line (`LABEL <client_random hex> <secret hex>\n`).
    func take(_ line: ByteBuffer) {
        let fields = line.readableBytesView.split(separator: UInt8(ascii: " "))
        guard fields.count == 3, let random = Self.hex(fields[1]), random.count == 32 else { return }
        self.entries.withLockedValue { entries in
            guard entries[random] != nil else { return }
            var secret = Array(fields[2])
            while let last = secret.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { secret.removeLast() }
            guard let value = Self.hex(secret[...]) else { return }
            entries[random]?.set(label: Substring(decoding: fields[0], as: UTF8.self), secret: value)
        }
    }

    /// The key log callback to install in a TLS configuration: this registry first, then `other` (a ``TLSKeyLog``
    /// or the caller's own callback) with the same line.
    package func keyLogCallback(forwardingTo other: NIOSSLKeyLogCallback?) -> NIOSSLKeyLogCallback {
        { line in
            self.take(line)
            other?(line)
        }
    }

    static func hex<Bytes: Collection>(_ text: Bytes) -> [UInt8]? where Bytes.Element == UInt8 {
        guard text.count % 2 == 0, text.count <= 256 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count / 2)
        var high: UInt8?
        for character in text {
            let value: UInt8
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = character - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = character - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }
}
