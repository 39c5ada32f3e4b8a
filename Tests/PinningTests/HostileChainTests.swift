import Foundation
import PinningTestSupport
import Testing
import X509

@testable import Pinning

/// Issue 27: a chain of many certificates with one subject name, cross-signed by each other's keys, cost
/// seconds of CPU per evaluation. The work is now bounded by a budget of signature checks; these tests build
/// such meshes at test time and count the work (never time it).
@Suite("Hostile chains: the work of one evaluation is bounded")
struct HostileChainTests {
    struct Shape: Sendable, CustomTestStringConvertible {
        var keys: Int
        var presenting: Int?
        var testDescription: String { "\(self.keys) keys, \(self.presenting.map { "\($0) presented" } ?? "all presented")" }
    }

    /// The shapes issue 27 names: 8 keys in full (56 cross-signed certificates and the leaf), and samples of
    /// 16- and 64-key meshes filling the 64-certificate limit.
    static let shapes = [Shape(keys: 8, presenting: nil), Shape(keys: 16, presenting: 63), Shape(keys: 64, presenting: 63)]
    static let meshes: [Int: Result<SameSubjectMesh, any Error>] = Dictionary(
        uniqueKeysWithValues: shapes.map { shape in (shape.keys, Result { try SameSubjectMesh(keys: shape.keys, presenting: shape.presenting) }) }
    )
    static let unrelated = Result { try TestPKI.root("Unrelated Root CA") }

    /// Validates `presented` against `anchors` the way every evaluation does, and returns the verdict with the
    /// work it was charged.
    static func validate(
        _ presented: [Certificate],
        anchors: [Certificate],
        host: String,
        limits: TrustLimits = .default
    ) async -> (result: Result<X509.ValidatedCertificateChain, TrustFailure>, checks: Int, units: Int) {
        let trust = ServerTrust(certificates: presented, anchors: anchors, anchorsOnly: true, limits: limits)
        let validation = PathValidation(trust: trust, validationTime: Date())
        let result = validation.validate(
            anchors: AnchorSet(anchors),
            namePolicy: .ssl(host: host),
            pins: nil,
            expectedPins: []
        )
        let charged = validation.budget.charged
        return (result, charged.checks, charged.units)
    }

    @Test("A same-subject mesh with no path to an anchor is refused within 100 signature checks", arguments: shapes)
    func unanchoredMesh(shape: Shape) async throws {
        let mesh = try #require(try Self.meshes[shape.keys]?.get())
        #expect(mesh.presented.count <= TrustLimits.default.maximumPresentedCertificates)
        let outcome = await Self.validate(mesh.presented, anchors: [try Self.unrelated.get().certificate], host: "mesh.example")
        guard case .failure(let failure) = outcome.result else {
            Issue.record("a mesh with no anchor was trusted")
            return
        }
        #expect(failure.code == .pathBuildingLimitExceeded, "\(failure)")
        #expect(failure.reason.contains("signature checks") || failure.reason.contains("are tried as the issuer"), "\(failure.reason)")
        #expect(outcome.units <= 100, "charged \(outcome.units) units")
        #expect(outcome.checks <= 100)
    }

    @Test("A mesh whose keys include the anchor, every path failing the host name, stays within the budget", arguments: shapes)
    func anchoredMesh(shape: Shape) async throws {
        let mesh = try #require(try Self.meshes[shape.keys]?.get())
        // The anchor is one of the mesh's own keys (its self-signed certificate has the mesh's name), so complete
        // paths exist; the host name refuses every one of them, so an unbounded search would try them all.
        let outcome = await Self.validate(mesh.presented, anchors: [mesh.keys[shape.keys - 1].certificate], host: "other.example")
        guard case .failure(let failure) = outcome.result else {
            Issue.record("a mesh was trusted for the wrong host")
            return
        }
        #expect([.pathBuildingLimitExceeded, .hostnameMismatch].contains(failure.code), "\(failure)")
        #expect(outcome.units <= 100, "charged \(outcome.units) units")
        // Through the public entry point too: the same refusal.
        let verdict = await ServerTrust(certificates: mesh.presented, anchors: [mesh.keys[shape.keys - 1].certificate], anchorsOnly: true)
            .evaluate(.ssl(host: "other.example"))
        #expect(verdict.failure?.code == failure.code)
    }

    @Test("The same mesh still validates for its own host when a path exists, well inside the budget")
    func meshWithAValidPath() async throws {
        let mesh = try #require(try Self.meshes[8]?.get())
        // The leaf is issued by key 0; with key 0's own certificate as the anchor the first look-up finds it.
        let outcome = await Self.validate(mesh.presented, anchors: [mesh.keys[0].certificate], host: "mesh.example")
        guard case .success(let chain) = outcome.result else {
            Issue.record("refused: \(outcome.result)")
            return
        }
        #expect(Array(chain).count == 2)
        #expect(outcome.checks <= 2)
    }

    @Test("A real chain is charged a handful of checks")
    func realChainCost() async throws {
        let root = try TestPKI.root("Budget Root")
        let intermediate = try TestPKI.intermediate("Budget Intermediate", issuer: root)
        let leaf = try TestPKI.leaf("budget.example", issuer: intermediate, dnsNames: ["budget.example"])
        let outcome = await Self.validate([leaf.certificate, intermediate.certificate], anchors: [root.certificate], host: "budget.example")
        guard case .success = outcome.result else {
            Issue.record("refused: \(outcome.result)")
            return
        }
        #expect(outcome.checks == 2, "leaf ← intermediate, intermediate ← root")
    }

    @Test("Costlier keys count as several checks: a P-384 mesh is held to the same CPU bound")
    func weightedKeys() async throws {
        let mesh = try SameSubjectMesh(keys: 6, key: .p384)
        let outcome = await Self.validate(mesh.presented, anchors: [try Self.unrelated.get().certificate], host: "mesh.example")
        guard case .failure(let failure) = outcome.result else {
            Issue.record("a mesh with no anchor was trusted")
            return
        }
        #expect(failure.code == .pathBuildingLimitExceeded, "\(failure)")
        #expect(outcome.units <= 100)
        #expect(outcome.checks <= 100 / PathBuildingBudget.cost(of: mesh.keys[0].certificate.publicKey))
    }

    @Test("More certificates of one name than a look-up tries: refused naming that bound")
    func candidatesPerLookup() async throws {
        let mesh = try #require(try Self.meshes[8]?.get())
        let tight = TrustLimits(
            maximumPresentedCertificates: 64,
            maximumIntermediates: 8,
            maximumIssuerLookups: 1024,
            maximumSignatureChecks: 10_000,
            maximumIssuerCandidates: 4
        )
        let outcome = await Self.validate(mesh.presented, anchors: [try Self.unrelated.get().certificate], host: "mesh.example", limits: tight)
        guard case .failure(let failure) = outcome.result else {
            Issue.record("trusted")
            return
        }
        #expect(failure.code == .pathBuildingLimitExceeded)
        #expect(failure.reason.contains("56 certificates are named") && failure.reason.contains("at most 4"), "\(failure.reason)")
    }

    @Test("An evaluation whose task is cancelled is abandoned and refused")
    func cancelledEvaluation() async throws {
        let mesh = try #require(try Self.meshes[8]?.get())
        let anchors = [try Self.unrelated.get().certificate]
        let task = Task {
            // Cancelled before it starts: the first look-up sees it.
            withUnsafeCurrentTask { $0?.cancel() }
            return await Self.validate(mesh.presented, anchors: anchors, host: "mesh.example")
        }
        let outcome = await task.value
        guard case .failure(let failure) = outcome.result else {
            Issue.record("trusted")
            return
        }
        #expect(failure.code == .pathBuildingLimitExceeded)
        #expect(failure.reason.contains("abandoned"), "\(failure.reason)")
        #expect(outcome.checks == 0)
    }

    @Test("allowInvalidCertificates' signature-linked explanation draws on the same budget")
    func signatureLinkedPathIsBounded() async throws {
        let mesh = try #require(try Self.meshes[8]?.get())
        let other = try TestPKI.root("Pinned Elsewhere")
        var policy = SecurityPolicy.publicKeys([Pin(spkiOf: other.certificate)])
        policy.allowInvalidCertificates = true
        policy.validatesDomainName = false
        let trust = ServerTrust(certificates: mesh.presented, anchors: [try Self.unrelated.get().certificate], anchorsOnly: true)
        let verdict = await policy.evaluate(trust, forDomain: "mesh.example")
        let failure = try #require(verdict.failure)
        #expect([.pinMismatch, .pathBuildingLimitExceeded].contains(failure.code), "\(failure)")
    }
}
