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
/// ends when the handshake has completed (a TLS 1.3 client: once the peer's next record has been through NIOSSL,
/// where a refusal of our certificate would be), when the channel closes (after the handlers behind it saw it close),
/// or at that limit; then it passes bytes through unread. Malformed or hostile records end its reading with "no alert
/// known". The secrets are held from the key log lines until it ends, then overwritten; they are never logged or
/// exposed.
///
/// The kept records are opened (keys derived, records decrypted) only when ``alerts`` is asked for before it ended
/// (or when it stops reading at the record limit or at records that are not TLS), which is when a failure is
/// mapped: this package's handshake handler, HTTP response collector and servers ask in `errorCaught` or
/// `channelInactive`, both of which reach them before the observer ends. A connection nobody asks about, every
/// successful one, derives no key: what it kept is forgotten unread. (Asked for only after it ended, ``alerts`` has
/// the plaintext alerts and what earlier questions opened.)
public final class TLSAlertObserver: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private var observation: TLSRecordObservation
    private let secrets: TLSAlertSecrets
    /// The random this observer registered its interest under, until it ends.
    private var registered: [UInt8]?

    private enum State {
        /// Reading the records of both directions.
        case reading
        /// Reading stopped at the peer's first record after our completed handshake (a TLS 1.3 client), which is now
        /// passing through NIOSSL: if it is a refusal, NIOSSL fails the connection within that read and the failure
        /// is mapped there, with ``alerts`` opening what was kept. `closing`: a close passed us during that read, so
        /// the handlers' `channelInactive` may still ask; the observer ends after it.
        case holding(closing: Bool)
        /// Nothing is read, held or opened any more.
        case ended
    }

    private var state = State.reading
    private var ended: Bool {
        if case .ended = self.state { return true }
        return false
    }
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

    /// How many traffic keys it derived to open kept records (none unless ``alerts`` was asked for in time).
    var keysDerived: Int { self.observation.keysDerived }

    /// The alerts seen so far; until the observer ends, the kept encrypted records are opened first with the secrets
    /// logged until now.
    ///
    /// Ask while the failure is being mapped: in `errorCaught` or `channelInactive` of a handler behind this one, as
    /// every mapper of this package does. The observer ends after `channelInactive` has passed it and forgets what it
    /// kept unopened, so one who asks later (after `closeFuture`) gets the plaintext alerts and what earlier questions
    /// opened, but no encrypted alert opened anew. Deliberate: a clean close (our close_notify, then the server's)
    /// looks the same as a refusal until the record is opened, and opening every connection's last records cost
    /// 1.45% of a 1,000-leaf handshake bench's samples (issue 31).
    public var alerts: TLSAlertsSeen {
        self.resolve()
        return self.observation.alerts
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .reading = self.state { self.observe(self.unwrapInboundIn(data).readableBytesView, .inbound) }
        context.fireChannelRead(data)
        // The record that stopped the reading has been through NIOSSL, which fails the connection on an alert in it
        // before returning (errorCaught, then close): whoever maps that failure has asked for ``alerts`` by now. A
        // connection still open, no close requested, was not ended by that record (under TLS 1.3 only closure
        // alerts leave it open), so it is forgotten unopened. A closing one ends after `channelInactive`.
        if case .holding(closing: false) = self.state, context.channel.isActive { self.end() }
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .reading = self.state { self.observe(self.unwrapOutboundIn(data).readableBytesView, .outbound) }
        context.write(data, promise: promise)
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if case .holding = self.state, mode == .all { self.state = .holding(closing: true) }
        context.close(mode: mode, promise: promise)
    }

    public func channelInactive(context: ChannelHandlerContext) {
        // The handlers after us map the failure here and ask for ``alerts``, which opens what was kept while the
        // secrets are still held; only then does the observer end.
        context.fireChannelInactive()
        self.end()
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
    /// to refuse. Ending forgets what was kept, unopened, and overwrites the secrets.
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
            // The record limit, or records that are not TLS: no later moment is known at which a failure would be
            // mapped, so what was kept is opened now, as it always was.
            self.resolve()
            self.end()
        } else if let mark = self.inboundRecordsAtCompletion, self.observation.recordsRead(.inbound) > mark {
            self.state = .holding(closing: false)
        }
    }

    /// Opens the kept records with the secrets logged so far.
    private func resolve() {
        guard !self.ended, self.observation.hasPendingCandidates, let random = self.registered, !random.isEmpty else { return }
        self.secrets.withSecrets(of: random) { self.observation.resolve(secrets: $0) }
    }

    /// Forgets the secrets and the kept records, unopened (``alerts`` opened them if anyone asked); from now on
    /// bytes pass unread.
    private func end() {
        guard !self.ended else { return }
        self.state = .ended
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
    private let entries = NIOLockedValueBox([ClientRandom: TLS13Secrets]())

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Registers interest in `random`'s secrets; false when it is registered already (another connection chose, or a
    /// hostile client replayed, the same random), the registry is full, or it is not a 32-byte random.
    func register(_ random: [UInt8]) -> Bool {
        guard let key = ClientRandom(random) else { return false }
        return self.entries.withLockedValue { entries in
            guard entries[key] == nil, entries.count < self.capacity else { return false }
            entries[key] = TLS13Secrets()
            return true
        }
    }

    func unregister(_ random: [UInt8]) {
        guard let key = ClientRandom(random) else { return }
        self.entries.withLockedValue { entries in
            entries[key]?.wipe()
            entries.removeValue(forKey: key)
        }
    }

    func withSecrets(of random: [UInt8], _ body: (TLS13Secrets) -> Void) {
        guard let key = ClientRandom(random) else { return }
        self.entries.withLockedValue { entries in
            if let secrets = entries[key] { body(secrets) }
        }
    }

    /// How many connections are registered now (tests check that ended observers leave none).
    package var count: Int { self.entries.withLockedValue { $0.count } }

    /// Takes one NSS key log line (`LABEL <client_random hex> <secret hex>\n`), in place: BoringSSL calls the
    /// callback for every secret of every handshake (five lines for TLS 1.3), so a line whose label is not a traffic
    /// secret, or whose random no observer registered, is dropped without a copy; only a kept secret is decoded.
    func take(_ line: ByteBuffer) {
        line.withUnsafeReadableBytes { self.take(line: $0) }
    }

    private func take(line: UnsafeRawBufferPointer) {
        let space = UInt8(ascii: " ")
        guard let labelEnd = line.firstIndex(of: space), let label = TLS13Secrets.Label(line[..<labelEnd]) else { return }
        let randomEnd = labelEnd + 1 + 64
        guard randomEnd < line.count, line[randomEnd] == space, let random = ClientRandom(hex: line[(labelEnd + 1)..<randomEnd]) else { return }
        var secretEnd = line.count
        while secretEnd > randomEnd + 1, line[secretEnd - 1] == UInt8(ascii: "\n") || line[secretEnd - 1] == UInt8(ascii: "\r") { secretEnd -= 1 }
        guard secretEnd > randomEnd + 1 else { return }
        let secretHex = line[(randomEnd + 1)..<secretEnd]
        self.entries.withLockedValue { entries in
            guard entries[random] != nil, let secret = Self.hex(secretHex) else { return }
            entries[random]?.set(label, secret: secret)
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
            guard let value = Self.nibble(character) else { return nil }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }

    /// One hex digit's value, either case.
    static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// A ClientHello random as the registry's key: its 32 bytes as four words, hashed and compared without an array.
struct ClientRandom: Hashable {
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    /// From the random's 32 bytes; nil for any other length.
    init?(_ bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        for (index, byte) in bytes.enumerated() { self.set(byte, at: index) }
    }

    /// From the 64 hex digits of a key log line (either case); nil for anything else.
    init?(hex: Slice<UnsafeRawBufferPointer>) {
        guard hex.count == 64 else { return nil }
        var index = 0
        var position = hex.startIndex
        while index < 32 {
            guard let high = TLSAlertSecrets.nibble(hex[position]), let low = TLSAlertSecrets.nibble(hex[position + 1]) else { return nil }
            self.set(high << 4 | low, at: index)
            index += 1
            position += 2
        }
    }

    private mutating func set(_ byte: UInt8, at index: Int) {
        let shift = UInt64(56 - 8 * (index % 8))
        switch index / 8 {
        case 0: self.words.0 |= UInt64(byte) << shift
        case 1: self.words.1 |= UInt64(byte) << shift
        case 2: self.words.2 |= UInt64(byte) << shift
        default: self.words.3 |= UInt64(byte) << shift
        }
    }

    static func == (lhs: ClientRandom, rhs: ClientRandom) -> Bool {
        lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.words.2 == rhs.words.2 && lhs.words.3 == rhs.words.3
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(self.words.0)
        hasher.combine(self.words.1)
        hasher.combine(self.words.2)
        hasher.combine(self.words.3)
    }
}
