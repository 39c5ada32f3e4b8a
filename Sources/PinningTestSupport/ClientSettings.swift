@_spi(FixedValidationTime) public import Pinning

extension ServerTrust {
    /// The settings of this trust with its validation instant, as a client holds them (tests only): clients take
    /// ``Pinning/TrustSettings``, and a fixed instant reaches them only through the settings' SPI (issue 28).
    public var clientSettings: TrustSettings {
        self.settings.validatingAt(self.validationTime ?? self.settings.validationTime)
    }
}
