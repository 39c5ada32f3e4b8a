package import X509

/// One certificate of a file as `inspect` and `pins` list it: any well-formed X.509 certificate, whether or not
/// the verifier can use it.
///
/// A pin is a hash of the SubjectPublicKeyInfo, so it exists for every well-formed certificate; the facts come
/// from our own reading of the TBSCertificate when swift-certificates cannot parse it (RSASSA-PSS or MD5
/// signatures, RSA keys under 2048 bits, DSA keys, negative serial numbers, …).
package struct InspectedCertificate: Sendable {
    /// The file (or caller-given label) the certificate came from.
    package var origin: String
    /// Where in that input: `"block 2 (CERTIFICATE)"`, `"certificate 3 in the PKCS#7 bundle"`, `"the certificate"`.
    package var position: String
    /// The certificate's exact DER encoding.
    package var derBytes: [UInt8]
    /// The SubjectPublicKeyInfo's exact DER bytes, from which ``pin`` is hashed.
    let spki: [UInt8]
    /// The certificate's facts; ``CertificateInfo/unsupportedForVerification`` says what the verifier cannot use.
    package var info: CertificateInfo
    /// The parsed certificate, usable for evaluation; `nil` when the verifier does not support it.
    package var certificate: Certificate?
    /// The error loading this certificate for evaluation throws (``CertificateLoadingError/Code/unsupportedKey`` or
    /// ``CertificateLoadingError/Code/unsupportedCertificate``, naming the reason); `nil` when it is usable.
    package var unsupported: CertificateLoadingError?

    /// The SPKI pin: `base64(SHA-256(SubjectPublicKeyInfo DER))`, over the exact bytes in the certificate.
    package var pin: Pin {
        // Pin strings we make are always valid; `Pin(_:)` would only throw for text a user typed.
        Pin(subjectPublicKeyInfoDER: self.spki)
    }
}

/// The certificates of one or more inputs for listing, and the entries that are not certificates at all.
package struct CertificateListing: Sendable {
    /// Every well-formed certificate, in input order.
    package var certificates: [InspectedCertificate]
    /// The entries that could not be read as certificates (broken PEM, bytes that are not X.509, unreadable files
    /// of a directory), each naming its file and block. They never hide the certificates around them.
    package var failures: [CertificateLoadingError]

    /// A listing.
    package init(certificates: [InspectedCertificate] = [], failures: [CertificateLoadingError] = []) {
        self.certificates = certificates
        self.failures = failures
    }
}

extension CertificateLoader {
    /// Every certificate in a file or directory for listing (`pinning inspect`, `pinning pins`): each well-formed
    /// X.509 certificate with its facts and pin, including those the verifier does not support, and separately
    /// the entries that are not certificates.
    ///
    /// - Parameter path: A file (PEM, DER or PKCS#7) or a directory (as ``certificates(inDirectory:)`` reads).
    /// - Returns: At least one certificate.
    /// - Throws: ``CertificateLoadingError`` when the path cannot be read, or when it holds no certificate at all
    ///   (then the first failure, which names its file, or ``CertificateLoadingError/Code/noCertificates``).
    package static func inspect(atPath path: String) throws(CertificateLoadingError) -> CertificateListing {
        var listing = CertificateListing()
        if try Self.isDirectory(path) {
            let files = try Self.nonEmptyCertificateFiles(inDirectory: path)
            for file in files {
                do {
                    listing.add(try Self.readFile(atPath: file), origin: file)
                } catch {
                    listing.failures.append(error)
                }
            }
        } else {
            listing.add(try Self.readFile(atPath: path), origin: path)
        }
        guard !listing.certificates.isEmpty else {
            throw listing.failures.first
                ?? CertificateLoadingError(code: .noCertificates, origin: path, problem: "no certificate found")
        }
        return listing
    }

    /// ``inspect(atPath:)`` for bytes already in memory.
    ///
    /// - Parameters:
    ///   - bytes: The encoded certificates; at most ``maximumFileSize`` bytes.
    ///   - origin: What to call the input in errors.
    /// - Returns: The certificates and failures; `certificates` may be empty (then `failures` is not).
    package static func inspect(from bytes: [UInt8], origin: String) -> CertificateListing {
        var listing = CertificateListing()
        listing.add(bytes, origin: origin)
        return listing
    }
}

extension CertificateListing {
    fileprivate mutating func add(_ bytes: [UInt8], origin: String) {
        for result in CertificateParser.inspect(from: bytes, origin: origin) {
            switch result {
            case .success(let certificate): self.certificates.append(certificate)
            case .failure(let error): self.failures.append(error)
            }
        }
    }
}
