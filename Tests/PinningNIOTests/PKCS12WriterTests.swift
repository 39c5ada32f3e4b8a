import Foundation
import PinningNIO
import PinningTestSupport
import Testing
import X509

@Suite("PKCS12Writer")
struct PKCS12WriterTests {
    static let passphrase = "correct horse"

    @Test("AES-256 and legacy 3DES files load back with the key and the chain", arguments: [PKCS12Encryption.aes256, .legacy3DES])
    func roundTrip(encryption: PKCS12Encryption) throws {
        for key in TestKeyType.allCases {
            let chain = try TestChain(host: "device-7", ipAddresses: [], key: key, leafUsage: .clientAuth)
            let bytes = try PKCS12Writer.serialize(
                certificateChain: chain.presented,
                privateKeyPEM: chain.leaf.privateKeyPEM,
                passphrase: Self.passphrase,
                friendlyName: "device-7",
                encryption: encryption
            )
            let identity = try TLSIdentity.pkcs12(bytes: bytes, passphrase: Self.passphrase, origin: "written")
            #expect(identity.certificateChain == chain.presented)
            #expect(throws: TLSIdentityError.self) {
                try TLSIdentity.pkcs12(bytes: bytes, passphrase: "wrong", origin: "written")
            }
        }
    }

    @Test("A key that is not the leaf's, an empty chain and a NUL in the passphrase are errors, not files")
    func refusals() throws {
        let chain = try TestChain(host: "device-7", ipAddresses: [])
        let other = try TestPKI.selfSigned("other")
        #expect(throws: PKCS12Writer.WriteError.self) {
            try PKCS12Writer.serialize(
                certificateChain: chain.presented, privateKeyPEM: other.privateKeyPEM,
                passphrase: Self.passphrase, friendlyName: "x", encryption: .aes256)
        }
        #expect(throws: PKCS12Writer.WriteError.self) {
            try PKCS12Writer.serialize(
                certificateChain: [], privateKeyPEM: chain.leaf.privateKeyPEM,
                passphrase: Self.passphrase, friendlyName: "x", encryption: .aes256)
        }
        #expect(throws: PKCS12Writer.WriteError.self) {
            try PKCS12Writer.serialize(
                certificateChain: chain.presented, privateKeyPEM: chain.leaf.privateKeyPEM,
                passphrase: "a\u{0}b", friendlyName: "x", encryption: .aes256)
        }
        #expect(throws: PKCS12Writer.WriteError.self) {
            try PKCS12Writer.serialize(
                certificateChain: chain.presented, privateKeyPEM: "not a key",
                passphrase: Self.passphrase, friendlyName: "x", encryption: .legacy3DES)
        }
    }

    @Test("PinningPKI's TestIdentity.pkcs12 writes what TLSIdentity loads: key, leaf, then the intermediates given", arguments: TestIdentity.PKCS12Encryption.allCases)
    func publicExport(encryption: TestIdentity.PKCS12Encryption) throws {
        let chain = try TestChain(host: "device-7", ipAddresses: [], leafUsage: .clientAuth)
        let bytes = try chain.leaf.pkcs12(
            passphrase: Self.passphrase, intermediates: [chain.intermediate.certificate], friendlyName: "device-7",
            encryption: encryption
        )
        let identity = try TLSIdentity.pkcs12(bytes: bytes, passphrase: Self.passphrase, origin: "exported")
        #expect(identity.certificateChain == chain.presented)
        #expect(identity.leaf == chain.leaf.certificate)
    }

    @Test("TestIdentity.pkcs12 refuses a NUL in the passphrase with TestPKIError.pkcs12Export and the writer's reason")
    func publicExportRefusal() throws {
        let leaf = try TestPKI.selfSigned("device-7")
        let error = #expect(throws: TestPKIError.self) {
            try leaf.pkcs12(passphrase: "a\u{0}b")
        }
        #expect(error?.code == .pkcs12Export)
        #expect(error?.reason.contains("NUL") == true)
    }
}
