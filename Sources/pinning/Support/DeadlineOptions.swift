import ArgumentParser
import NIOCore

/// `--handshake-timeout` and `--request-head-timeout`, shared by `serve` and `proxy`: the same names, range
/// (``NumericOption/timeoutRange``), defaults (10 and 30 seconds) and value name in both. What each deadline covers
/// differs between a server and the proxy (which of its clients' handshakes, which request heads), so each command
/// keeps its own help text, given by `Words`.
struct DeadlineOptions<Words: DeadlineWords>: ParsableArguments {
    @Option(
        name: .customLong("handshake-timeout"), parsing: .unconditional,
        help: ArgumentHelp(Words.handshakeTimeout, valueName: "seconds"),
        transform: NumericOption.seconds(NumericOption.timeoutRange))
    var handshakeTimeout: Double = 10

    @Option(
        name: .customLong("request-head-timeout"), parsing: .unconditional,
        help: ArgumentHelp(Words.requestHeadTimeout, valueName: "seconds"),
        transform: NumericOption.seconds(NumericOption.timeoutRange))
    var requestHeadTimeout: Double = 30

    /// `--handshake-timeout` as a NIO time amount.
    var handshake: TimeAmount { .nanoseconds(Int64(self.handshakeTimeout * 1e9)) }

    /// `--request-head-timeout` as a NIO time amount.
    var requestHead: TimeAmount { .nanoseconds(Int64(self.requestHeadTimeout * 1e9)) }
}

/// The help text of ``DeadlineOptions``' two options for one command.
protocol DeadlineWords {
    static var handshakeTimeout: String { get }
    static var requestHeadTimeout: String { get }
}
