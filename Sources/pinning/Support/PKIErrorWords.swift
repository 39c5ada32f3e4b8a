import Foundation
import PinningNIO
import PinningPKI

/// What the `pinning pki` commands say about a failure of the libraries they call: the reason in words, never a
/// Swift type name or a source location.
///
/// `TestPKIError`'s description (`TestPKIError.keyDoesNotMatchCertificate: … (PinningPKI/TestIdentity.swift:23)`)
/// is made for a failing test, and swift-certificates' and swift-asn1's errors print as
/// `CertificateError.code: reason File.swift:12`; a reason may also quote such an error of a library below it.
/// So the reason is taken where the type offers it, and what remains of a type name or a location is cut out of
/// the text.
enum PKIErrorWords {
    static func words(_ error: any Error) -> String {
        let text: String
        switch error {
        case let error as TestPKIError:
            text = error.reason
        case let error as TLSIdentityError:
            text = error.problem
        case let error as InputError:
            text = error.message
        case is DecodingError:
            return "not JSON of the expected form"
        default:
            text = String(describing: error)
        }
        return Self.withoutInternals(text)
    }

    /// `text` without `SomeError.code: ` prefixes, ` Path/File.swift:12` locations, and Foundation's
    /// `(Swift.DecodingError error 1.)` tails.
    static func withoutInternals(_ text: String) -> String {
        var result = text
        let patterns = [
            // A source location, bare or in parentheses: ` X509/Certificate.swift:120`, ` (PinningPKI/TestIdentity.swift:23)`.
            #"\s*\(?[A-Za-z0-9_./+-]*\.swift:\d+\)?"#,
            // Foundation's bridged description of an error it has no words for.
            #"\s*\((?:[A-Za-z]+\.)*[A-Za-z]*Error error -?\d+\.?\)"#,
            // `CertificateError.invalidPrivateKey: `, `ASN1Error.invalidPEMDocument: `, `TestPKIError.fileSystem: `.
            #"\b(?:[A-Za-z]+\.)*[A-Z][A-Za-z0-9]*Error\.[A-Za-z0-9]+:\s*"#,
        ]
        for pattern in patterns {
            result = result.replacingOccurrences(of: pattern, with: "", options: .regularExpression)
        }
        result = result.trimmingCharacters(in: .whitespacesAndNewlines)
        return result.isEmpty ? "no further detail" : result
    }
}
