import NIOCore
import NIOPosix
import NIOSSL
import Pinning
import PinningTestSupport
import SwiftASN1
import Testing
import X509

@testable import PinningNIO

/// The pieces of the verification callback that save work per handshake: the memo of parsed certificates and
/// handing the validated path to NIOSSL from certificates already in its form. Neither may change what is
/// validated or handed over; the loopback suites (MutualTLSTests, PinningVaporTests) drive both end to end.
@Suite("Peer verification")
struct PeerVerificationTests {
    @Test("The memo returns what a fresh parse returns, stores only what it is told to remember, never a failure")
    func memoReturnsTheParse() throws {
        let chain = try TestChain(host: "memo.example")
        let memo = ParsedCertificateMemo(capacity: 8)
        let der = chain.leaf.der
        // Parsing alone stores nothing: a refused peer's certificates are never kept.
        let first = try memo.certificate(derEncoded: der)
        #expect(first == (try Certificate(derEncoded: der)))
        #expect(memo.count == 0)
        memo.remember([(der, first), (chain.intermediate.der, chain.intermediate.certificate)])
        #expect(memo.count == 2)
        #expect(try memo.certificate(derEncoded: der) == first)
        #expect(try memo.certificate(derEncoded: chain.intermediate.der) == chain.intermediate.certificate)
        // Remembering the same again adds nothing.
        memo.remember([(der, first)])
        #expect(memo.count == 2)
        // Garbage throws every time.
        #expect(throws: (any Error).self) { try memo.certificate(derEncoded: [0x30, 0x03, 0x02, 0x01]) }
        #expect(throws: (any Error).self) { try memo.certificate(derEncoded: [0x30, 0x03, 0x02, 0x01]) }
        // One byte changed (inside the signature) is another DER: parsed afresh, not the remembered leaf.
        var altered = der
        altered[altered.count - 1] ^= 0x01
        #expect(try memo.certificate(derEncoded: altered) != first)
        #expect(memo.count == 2)
        // One letter of the subject changed, outside the 64 bytes at each end that the key's hash samples: hashed
        // alike, told apart only by comparing every byte.
        let name = try #require(der.firstRange(of: Array("memo.example".utf8)))
        try #require(name.lowerBound >= 64 && der.count - name.upperBound >= 64)
        var renamed = der
        renamed[name.lowerBound] = UInt8(ascii: "n")
        #expect(!memo.contains(derEncoded: renamed))
        #expect(try memo.certificate(derEncoded: renamed) != first)
        #expect(memo.contains(derEncoded: der))
    }

    @Test("The memo holds at most its capacity, forgetting the oldest first")
    func memoIsBounded() throws {
        let root = try TestPKI.root("Memo Root")
        let leaves = try (0..<5).map { try TestPKI.leaf("memo-\($0)", issuer: root) }
        let memo = ParsedCertificateMemo(capacity: 3)
        memo.remember(leaves.map { ($0.der, $0.certificate) })
        #expect(memo.count == 3)
        // Forgotten or not, every answer is still the right certificate.
        for leaf in leaves.reversed() {
            #expect(try memo.certificate(derEncoded: leaf.der) == leaf.certificate)
        }
        #expect(memo.count == 3)
    }

    @Test("Through the verification callback, a trusted chain's certificates are remembered and a refused chain's are not")
    func onlyTrustedChainsAreRemembered() async throws {
        let trusted = try TestChain(host: "kept.example")
        let refused = try TestChain(host: "refused.example")
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        // Judged against `trusted`'s root only, so `refused`'s chain finds no anchor. Made on the loop it is called
        // on, as NIOSSL calls it.
        let callback = try await loop.submit {
            NIOLoopBound(
                PeerVerification.callback(verdict: HandshakeVerdict()) { presented in
                    await ServerTrust(certificates: presented, anchors: [trusted.root.certificate], anchorsOnly: true).evaluate(.basicX509)
                },
                eventLoop: loop
            )
        }.get()
        func verify(_ chain: TestChain) async throws -> NIOSSLVerificationResultWithMetadata {
            let promise = loop.makePromise(of: NIOSSLVerificationResultWithMetadata.self)
            let presented = try [chain.leaf.der, chain.intermediate.der].map { try NIOSSLCertificate(bytes: $0, format: .der) }
            loop.execute { callback.value(presented, promise) }
            return try await promise.futureResult.get()
        }
        guard case .failed = try await verify(refused) else {
            Issue.record("a chain without an anchor was verified")
            return
        }
        #expect(!ParsedCertificateMemo.shared.contains(derEncoded: refused.leaf.der))
        #expect(!ParsedCertificateMemo.shared.contains(derEncoded: refused.intermediate.der))
        guard case .certificateVerified = try await verify(trusted) else {
            Issue.record("the trusted chain was refused")
            return
        }
        #expect(ParsedCertificateMemo.shared.contains(derEncoded: trusted.leaf.der))
        #expect(ParsedCertificateMemo.shared.contains(derEncoded: trusted.intermediate.der))
    }

    @Test("NIOSSL's form is remembered only beside a parse, never replaced, and added to a parse without one")
    func memoKeepsNIOSSLForm() throws {
        let chain = try TestChain(host: "form.example")
        let memo = ParsedCertificateMemo(capacity: 4)
        let first = try NIOSSLCertificate(bytes: chain.leaf.der, format: .der)
        let second = try NIOSSLCertificate(bytes: chain.leaf.der, format: .der)
        // A client's remembering keeps no NIOSSL form.
        memo.remember([(chain.intermediate.der, chain.intermediate.certificate)])
        #expect(memo.entry(derEncoded: chain.intermediate.der)?.nio == nil)
        memo.remember([(der: chain.leaf.der, certificate: chain.leaf.certificate, nio: first)])
        #expect(memo.entry(derEncoded: chain.leaf.der)?.nio === first)
        // Remembered again: the first form stays, nothing is added.
        memo.remember([(der: chain.leaf.der, certificate: chain.leaf.certificate, nio: second)])
        #expect(memo.entry(derEncoded: chain.leaf.der)?.nio === first)
        #expect(memo.count == 2)
        // A parse remembered without a form gains one, and keeps its parse.
        let intermediate = try NIOSSLCertificate(bytes: chain.intermediate.der, format: .der)
        memo.remember([(der: chain.intermediate.der, certificate: chain.intermediate.certificate, nio: intermediate)])
        #expect(memo.entry(derEncoded: chain.intermediate.der)?.nio === intermediate)
        #expect(memo.entry(derEncoded: chain.intermediate.der)?.certificate == chain.intermediate.certificate)
        #expect(memo.count == 2)
    }

    @Test("A server's callback hands over the NIOSSL form remembered at a trusted handshake, for the same DER only")
    func handoverUsesRememberedForm() async throws {
        let chain = try TestChain(host: "served-form.example")
        let other = try TestChain(host: "other-form.example")
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let root = try NIOSSLCertificate(bytes: chain.root.der, format: .der)
        let handover = NIOSSLPathHandover(anchors: [(chain.root.certificate, root)])
        let callback = try await loop.submit {
            NIOLoopBound(
                PeerVerification.callback(verdict: HandshakeVerdict(), handover: handover) { presented in
                    await ServerTrust(certificates: presented, anchors: [chain.root.certificate, other.root.certificate], anchorsOnly: true)
                        .evaluate(.basicX509)
                },
                eventLoop: loop
            )
        }.get()
        func handed(_ chain: TestChain) async throws -> (presented: [NIOSSLCertificate], handed: [NIOSSLCertificate]) {
            let promise = loop.makePromise(of: NIOSSLVerificationResultWithMetadata.self)
            let presented = try [chain.leaf.der, chain.intermediate.der].map { try NIOSSLCertificate(bytes: $0, format: .der) }
            loop.execute { callback.value(presented, promise) }
            guard case .certificateVerified(let metadata) = try await promise.futureResult.get() else {
                Issue.record("the trusted chain was refused")
                return (presented, [])
            }
            return (presented, Array(try #require(metadata.validatedCertificateChain)))
        }
        let firstHandshake = try await handed(chain)
        try #require(firstHandshake.handed.count == 3)
        #expect(firstHandshake.handed[0] === firstHandshake.presented[0])
        #expect(firstHandshake.handed[2] === root)
        // The same chain again: the path is handed over in the forms remembered at the first handshake, which NIOSSL
        // made from the same bytes.
        let secondHandshake = try await handed(chain)
        try #require(secondHandshake.handed.count == 3)
        #expect(secondHandshake.handed[0] === firstHandshake.handed[0])
        #expect(secondHandshake.handed[1] === firstHandshake.handed[1])
        #expect(try secondHandshake.handed.map { try $0.toDERBytes() } == [chain.leaf.der, chain.intermediate.der, chain.root.der])
        // Another chain is handed over in its own forms, never a remembered one of other bytes.
        let otherHandshake = try await handed(other)
        try #require(otherHandshake.handed.count == 3)
        #expect(otherHandshake.handed[0] === otherHandshake.presented[0])
        #expect(try otherHandshake.handed.map { try $0.toDERBytes() } == [other.leaf.der, other.intermediate.der, other.root.der])
    }

    @Test("The path handed to NIOSSL is the validated path, from the objects NIOSSL handed over and the anchors")
    func handoverReusesWhatNIOSSLHolds() throws {
        let chain = try TestChain(host: "handover.example")
        let leaf = try NIOSSLCertificate(bytes: chain.leaf.der, format: .der)
        let intermediate = try NIOSSLCertificate(bytes: chain.intermediate.der, format: .der)
        let root = try NIOSSLCertificate(bytes: chain.root.der, format: .der)
        let presented = PresentedChain(
            certificates: [chain.leaf.certificate, chain.intermediate.certificate],
            nioCertificates: [leaf, intermediate],
            der: [chain.leaf.der, chain.intermediate.der]
        )
        let handover = NIOSSLPathHandover(anchors: [(chain.root.certificate, root)])
        let path = [chain.leaf.certificate, chain.intermediate.certificate, chain.root.certificate]
        let handed = try handover.certificates(for: path, presented: presented)
        #expect(handed.count == 3)
        #expect(handed[0] === leaf)
        #expect(handed[1] === intermediate)
        #expect(handed[2] === root)
        // A certificate in neither (an anchor the handover was not given) is converted from its DER.
        let bare = NIOSSLPathHandover(anchors: [])
        let converted = try bare.certificates(for: path, presented: presented)
        #expect(converted[2] !== root)
        #expect(try converted[2].toDERBytes() == chain.root.der)
    }
}
