public import PinningNIO
public import X509

extension TestIdentity {
    /// This identity as a ``/PinningNIO/TLSIdentity`` presenting `chain` (its intermediates) after the
    /// certificate: what a loopback server or an mTLS client of a test (or an example) presents.
    public func tlsIdentity(chain: [Certificate] = []) throws -> TLSIdentity {
        try TLSIdentity.pem(
            certificateChain: Array(TestPKI.pemBundle([self.certificate] + chain).utf8),
            privateKey: Array(self.privateKeyPEM.utf8),
            certificateOrigin: "<test chain>",
            keyOrigin: "<test key>"
        )
    }
}
