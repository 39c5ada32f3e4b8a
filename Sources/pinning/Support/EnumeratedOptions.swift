import ArgumentParser
import NIOSSL
import Pinning
import PinningExportCore

/// An option that takes one of a few words: `--mode`, `--profile`, `bench handshake --key`.
///
/// Each is an `ExpressibleByArgument` enum, as argument-parser's examples write them (`Math.swift`'s `Kind`):
/// `init?(argument:)` is the one place that says which spellings are accepted, and `allValueStrings` (from
/// `CaseIterable`) lists the values in the option's help and in the refusal.
///
/// The option names ``parser(option:)`` as its `transform`, so a word outside the list is refused while the
/// command line is parsed, before anything runs, with the message this CLI has always printed (on stderr as
/// `pinning: --mode: unknown mode "sometimes"; use none, public-key or certificate`, exit status 2; see
/// `PinningCommand.main`). Without the transform argument-parser would print its own sentence ("The value
/// 'sometimes' is invalid for '--mode <mode>'. Please provide one of …") instead of the one scripts and the
/// tests know.
protocol EnumeratedArgument: CaseIterable, ExpressibleByArgument {
    /// What a refusal calls a value: "mode" in `unknown mode "x"`.
    static var valueKind: String { get }
}

extension EnumeratedArgument {
    /// The accepted values as a sentence lists them: `none, public-key or certificate`.
    ///
    /// Built in a plain loop: each option's help text calls this when its command's options are initialised, which
    /// `pinning evaluate` does on every run (issue 31's cold path), and `joined(separator:)` on a slice is a first use
    /// of generic code there.
    static var choices: String {
        let names = Self.allValueStrings
        var sentence = ""
        for (index, name) in names.enumerated() {
            if index > 0 {
                sentence += index == names.count - 1 ? " or " : ", "
            }
            sentence += name
        }
        return sentence
    }

    /// The `transform` of an option taking one of these values; `option` is its name as the user types it.
    static func parser(option: String) -> @Sendable (String) throws -> Self {
        { text in
            guard let value = Self(argument: text) else {
                throw InputError("\(option): unknown \(Self.valueKind) \"\(text)\"; use \(Self.choices)")
            }
            return value
        }
    }
}

extension EnumeratedArgument where Self: RawRepresentable, RawValue == String {
    /// Each case's raw value, in declaration order: what argument-parser's default gives for such an enum
    /// (`allCases.map(\.rawValue.defaultValueDescription)`, and a `String`'s description is itself), without its
    /// key path, whose generic instantiation perf put at ~3% of a one-chain `pinning evaluate` process.
    static var allValueStrings: [String] {
        Self.allCases.map { $0.rawValue }
    }
}

/// `--mode`: what a policy pins (AFSecurityPolicy's `SSLPinningMode`).
enum PinningModeArgument: String, EnumeratedArgument {
    case none
    case publicKey = "public-key"
    case certificate

    static let valueKind = "mode"

    /// The spellings: the listed ones, and `publicKey` as AFNetworking's name is written in code.
    init?(argument: String) {
        if argument == "publicKey" {
            self = .publicKey
            return
        }
        self.init(rawValue: argument)
    }

    var mode: SecurityPolicy.PinningMode {
        switch self {
        case .none: return .none
        case .publicKey: return .publicKey
        case .certificate: return .certificate
        }
    }
}

/// `--profile`: the certificate profile chains are validated under.
enum ProfileArgument: String, EnumeratedArgument {
    case rfc5280
    case webpki

    static let valueKind = "profile"

    /// Any letter case (`webPKI` as the library spells it, `RFC5280`).
    init?(argument: String) {
        self.init(rawValue: argument.lowercased())
    }
}

/// `--tls-max`: the newest TLS version offered or accepted (as curl's `--tls-max`), for reproducing a TLS 1.2
/// handshake against a server that prefers 1.3 (key logging and captures, issue 15).
enum TLSVersionArgument: String, EnumeratedArgument {
    case tls12 = "1.2"
    case tls13 = "1.3"

    static let valueKind = "TLS version"

    var version: TLSVersion {
        switch self {
        case .tls12: return .tlsv12
        case .tls13: return .tlsv13
        }
    }
}

/// `config export --format`: a mobile platform's pin configuration format.
enum ExportFormatArgument: String, EnumeratedArgument {
    case androidNSC = "android-nsc"
    case trustKit = "trustkit"
    case ats
    case okHttp = "okhttp"

    static let valueKind = "format"

    var format: PlatformFormat { PlatformFormat(rawValue: self.rawValue)! }
}

/// `config import --format`: the formats that can be read back.
enum ImportFormatArgument: String, EnumeratedArgument {
    case androidNSC = "android-nsc"
    case trustKit = "trustkit"

    static let valueKind = "format"

    var format: PlatformFormat { PlatformFormat(rawValue: self.rawValue)! }
}
