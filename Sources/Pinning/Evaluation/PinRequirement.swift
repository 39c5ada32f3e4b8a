public import X509

/// What a validated path must contain for pinning to be satisfied.
public struct PinRequirement: Hashable, Sendable {
    enum Storage: Hashable, Sendable {
        /// Some certificate on the path has one of these SPKI pins.
        case publicKeys(Set<Pin>)
        /// Some certificate on the path is byte-for-byte one of these.
        case certificates(Set<[UInt8]>)
    }

    let storage: Storage

    /// Satisfied when a certificate on the validated path has one of these SPKI SHA-256 pins.
    public static func publicKeys(_ pins: some Sequence<Pin>) -> PinRequirement {
        PinRequirement(storage: .publicKeys(Set(pins)))
    }

    /// Satisfied when a certificate on the validated path is DER-equal to one of these.
    public static func certificates(_ certificates: some Sequence<Certificate>) -> PinRequirement {
        PinRequirement(storage: .certificates(Set(certificates.map(\.derBytes))))
    }

    /// The SPKI pins this requirement accepts (for certificate pins, the pins of the pinned certificates' keys;
    /// reported so a reader can compare them with the presented chain).
    var isEmpty: Bool {
        switch self.storage {
        case .publicKeys(let pins): return pins.isEmpty
        case .certificates(let ders): return ders.isEmpty
        }
    }

    func isSatisfied(by certificate: Certificate) -> Bool {
        switch self.storage {
        case .publicKeys(let pins):
            return pins.contains(Pin(spkiOf: certificate))
        case .certificates(let ders):
            return ders.contains(certificate.derBytes)
        }
    }

    /// The index of the first certificate in `path` (leaf first) that satisfies the requirement.
    func firstMatch(in path: some Sequence<Certificate>) -> Int? {
        for (index, certificate) in path.enumerated() where self.isSatisfied(by: certificate) {
            return index
        }
        return nil
    }

    /// ``firstMatch(in:)`` for certificates whose facts are decoded (``CertificateFacts``): a key's pin is hashed
    /// once per certificate rather than once per look-up.
    func firstMatch(in path: [CertificateFacts]) -> Int? {
        for (index, facts) in path.enumerated() {
            switch self.storage {
            case .publicKeys(let pins):
                if pins.contains(facts.spkiPin) { return index }
            case .certificates(let ders):
                if ders.contains(facts.certificate.derBytes) { return index }
            }
        }
        return nil
    }
}
