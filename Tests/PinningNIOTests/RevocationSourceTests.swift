import Foundation
import Pinning
import PinningNIO
import PinningTestSupport
import Testing
import X509

/// ``RevocationSource``: CRL files re-read when they change; a broken update never turns revocation off.
@Suite("RevocationSource: CRL files kept current")
struct RevocationSourceTests {
    static func crl(_ issuer: TestIdentity, revoking revoked: [TestIdentity] = [], number: Int) throws -> TestCRL {
        try TestCRL(
            issuer: issuer,
            entries: revoked.map { .init(serialNumber: $0.certificate.serialNumber, revocationDate: Date().addingTimeInterval(-1)) },
            number: number,
            thisUpdate: Date().addingTimeInterval(-60),
            nextUpdate: Date().addingTimeInterval(3600)
        )
    }

    @Test("a CRL file whose name is not UTF-8 is refused naming the directory and the name, never skipped")
    func crlNameNotUTF8() throws {
        let chain = try TestChain()
        let directory = try TemporaryDirectory(prefix: "pinning-crl-name")
        defer { directory.remove() }
        try directory.write("issuing.crl.pem", try Self.crl(chain.intermediate, number: 1).pem)
        // r\xFE.crl, made with open(2): no String can name it.
        let path = Array(directory.path("r").utf8).map { CChar(bitPattern: $0) } + [CChar(bitPattern: 0xFE)] + ".crl".utf8.map { CChar(bitPattern: $0) } + [0]
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        try #require(descriptor >= 0)
        let der = try Self.crl(chain.root, revoking: [chain.leaf], number: 1).der
        _ = der.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        do {
            _ = try CRLFiles.load([directory.path])
            Issue.record("a CRL under a name that is not UTF-8 was skipped")
        } catch {
            #expect(error.path == directory.path("r\\xFE.crl"))
            #expect(error.problem.hasPrefix("the file name is not UTF-8; rename it"))
        }
        #expect(throws: CRLFiles.LoadError.self) { try RevocationSource.watching([directory.path]) }
    }

    @Test("a CRL whose UTF-8 name holds ESC or a zero-width space is refused as well, naming it escaped")
    func crlNameWithHiddenCharacter() throws {
        let chain = try TestChain()
        for name in ["r\u{1B}[2J.crl", "issu\u{200B}ing.crl"] {
            let directory = try TemporaryDirectory(prefix: "pinning-crl-hidden")
            defer { directory.remove() }
            try directory.write("issuing.crl.pem", try Self.crl(chain.intermediate, number: 1).pem)
            try Data(try Self.crl(chain.root, revoking: [chain.leaf], number: 1).der).write(to: URL(fileURLWithPath: directory.path(name)))
            do {
                _ = try CRLFiles.load([directory.path])
                Issue.record("a CRL named \(name.debugDescription) was read or skipped")
            } catch {
                #expect(error.path == directory.path(VisibleText.escaped(name)), "\(error.path)")
                #expect(!error.path.unicodeScalars.contains(where: VisibleText.isHidden))
                #expect(error.problem.hasPrefix("the file name has a control or invisible character; rename it"), "\(error.problem)")
            }
        }
    }

    @Test("the first read must succeed; a change is read; a broken change keeps the previous CRLs and is reported once")
    func reload() throws {
        let chain = try TestChain()
        let directory = try TemporaryDirectory(prefix: "pinning-crl-source")
        defer { directory.remove() }
        #expect(throws: CRLFiles.LoadError.self) { try RevocationSource.watching([directory.path("missing.crl")]) }
        try directory.write("issuing.crl.pem", try Self.crl(chain.intermediate, number: 1).pem)
        let outcomes = LockedOutcomes()
        let source = try RevocationSource.watching([directory.path], mode: .soft, scope: .chain, interval: .seconds(3600)) { outcomes.append($0) }
        defer { source.stop() }
        #expect(source.current.crls.count == 1 && source.current.mode == .soft && source.current.scope == .chain)
        #expect(source.reloadIfChanged() == nil)

        // A second CRL dropped into the directory (DER, as `pki crl` writes it beside the PEM) is a change.
        try directory.write("root.crl", bytes: try Self.crl(chain.root, number: 1).der)
        guard case .reloaded(crls: 2)? = source.reloadIfChanged() else {
            Issue.record("the new file in the directory was not read")
            return
        }
        #expect(Set(source.current.crls.map(\.issuer)) == [chain.intermediate.certificate.subject, chain.root.certificate.subject])

        // Broken in place: the previous CRLs stay, the error names the file, and it is reported once.
        let before = source.current
        try directory.write("issuing.crl.pem", "-----BEGIN X509 CRL-----\nMAMCAQA=\n-----END X509 CRL-----\n")
        guard case .failed(let error)? = source.reloadIfChanged() else {
            Issue.record("a broken CRL file was not reported")
            return
        }
        #expect(error.path == directory.path("issuing.crl.pem"), "\(error)")
        #expect(source.current == before)
        #expect(source.reloadIfChanged() == nil)

        // Fixed: read again, now revoking the leaf.
        try directory.write("issuing.crl.pem", try Self.crl(chain.intermediate, revoking: [chain.leaf], number: 2).pem)
        guard case .reloaded(crls: 2)? = source.reloadIfChanged() else {
            Issue.record("the fixed file was not read")
            return
        }
        #expect(source.current.crls.contains { $0.entry(for: chain.leaf.certificate) != nil })
        #expect(source.reloadCount == 2)
        #expect(outcomes.count == 3)
    }

    @Test("the polling notices a change by itself, within its interval")
    func polling() async throws {
        let chain = try TestChain()
        let directory = try TemporaryDirectory(prefix: "pinning-crl-poll")
        defer { directory.remove() }
        let file = try directory.write("issuing.crl.pem", try Self.crl(chain.intermediate, number: 1).pem)
        let source = try RevocationSource.watching([file], interval: .milliseconds(50))
        defer { source.stop() }
        try directory.write("issuing.crl.pem", try Self.crl(chain.intermediate, revoking: [chain.leaf], number: 2).pem)
        // Generous: the polling task shares 2 cores with the whole suite running in parallel (10 s was not
        // enough in CI); the loop ends as soon as the reload is seen.
        // (60 s was not enough twice in a full run on a machine loaded by other builds: the polling task itself did
        // not run; 180 s bounds a real failure all the same.)
        let deadline = Date().addingTimeInterval(180)
        while source.reloadCount == 0 && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(source.reloadCount == 1)
        #expect(source.current.crls.first?.entry(for: chain.leaf.certificate) != nil)
    }
}

final class LockedOutcomes: @unchecked Sendable {
    private let lock = NSLock()
    private var outcomes: [RevocationSource.ReloadOutcome] = []
    func append(_ outcome: RevocationSource.ReloadOutcome) { self.lock.withLock { self.outcomes.append(outcome) } }
    var count: Int { self.lock.withLock { self.outcomes.count } }
}
