@_spi(FixedValidationTime) package import Pinning

/// A client, reporter or adapter was handed a ``/Pinning/ServerTrust`` template that fixes the validation instant
/// on the trust itself (``/Pinning/ServerTrust/validationTime``). Every handshake of a long-lived client would then
/// be judged at that instant, accepting certificates that expired since: the clock would be frozen with no SPI in
/// sight. Clients hold ``/Pinning/TrustSettings``; a fixed instant for tests is `TrustSettings.validatingAt(_:)`
/// behind `@_spi(FixedValidationTime)`, the one way to get one (issue 28).
public struct FixedValidationTimeError: Error, CustomStringConvertible, Sendable {
    /// The stable code of this error: `fixedValidationTime`.
    public static let code = "fixedValidationTime"
    /// The stable code of this error.
    public var code: String { Self.code }
    /// Which initialiser refused the template.
    public let api: String

    /// One line in words.
    public var description: String {
        "\(self.api): the ServerTrust template fixes the validation time, which would freeze this client's clock; pass TrustSettings (settings:) instead"
    }
}

extension TrustSettings {
    /// The settings of a deprecated `trust:` template: its certificates are ignored, as they always were, and a
    /// validation instant set on the trust itself (rather than through the settings' SPI) is refused.
    package static func ofTemplate(_ trust: ServerTrust, for api: String) throws(FixedValidationTimeError) -> TrustSettings {
        guard trust.validationTime == nil || trust.validationTime == trust.settings.validationTime else {
            throw FixedValidationTimeError(api: api)
        }
        return trust.settings
    }
}
