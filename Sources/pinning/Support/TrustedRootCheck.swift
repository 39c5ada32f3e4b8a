import Foundation
import Pinning

/// The one check of a TUF root a user hands the CLI to start trusting from (`--pinset-root`, `pinning tuf init`):
/// read as a refresh will read it, its structure and the signatures of its own root keys at their threshold. Its
/// expiry does not matter for a trusted root (TUF §5.2: an expired root is still the start of the update chain).
enum TrustedRootCheck {
    /// Why `bytes` cannot be a trusted root, in words (`not a usable TUF root metadata file (…)`, the core's
    /// reason inside, display text already), or nil when it can.
    static func refusal(_ bytes: [UInt8], limits: TUFLimits) -> String? {
        do {
            _ = try TUFTrustedSet(trustedRoot: bytes, updateStartTime: Date(), limits: limits)
            return nil
        } catch {
            return "not a usable TUF root metadata file (\(error.description))"
        }
    }
}
