import Foundation
import Pinning
import PinningTestSupport
import Testing
import X509

/// `ServerTrust.evaluate`: path building, anchors, time, names, key usages, constraints, limits and reports.
@Suite("ServerTrust")
struct ServerTrustTests {
    static let fixture = Result { try ServerTrustPKI() }
    static let time = TestPKI.referenceTime
    static let day: TimeInterval = 86400

    static func trust(
        _ certificates: [Certificate],
        roots: [Certificate],
        anchors: [Certificate] = [],
        anchorsOnly: Bool = false,
        at time: Date? = ServerTrustTests.time,
        purpose: TrustPurpose = .serverAuthentication,
        limits: TrustLimits = .default
    ) -> ServerTrust {
        ServerTrust(
            certificates: certificates,
            anchors: anchors,
            anchorsOnly: anchorsOnly,
            platformRoots: TrustRoots(roots),
            validationTime: time,
            purpose: purpose,
            limits: limits
        )
    }

    /// Expects `verdict` to be a refusal with `code`, and returns the failure.
    @discardableResult
    static func expectRefused(
        _ verdict: TrustEvaluation,
        _ code: TrustFailure.Code,
        _ comment: Comment? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> TrustFailure? {
        guard let failure = verdict.failure else {
            Issue.record("trusted, expected \(code) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
            return nil
        }
        #expect(failure.code == code, "\(comment.map { "\($0): " } ?? "")\(failure)", sourceLocation: sourceLocation)
        // Every report: a one-line description naming the code (and the host, when one was checked).
        #expect(!failure.description.contains("\n"), "description spans lines: \(failure.description)", sourceLocation: sourceLocation)
        #expect(failure.description.contains("\(failure.code)"), sourceLocation: sourceLocation)
        if let host = failure.host, !host.isEmpty {
            #expect(failure.description.contains(host), sourceLocation: sourceLocation)
        }
        return failure
    }

    static func expectTrusted(
        _ verdict: TrustEvaluation,
        _ comment: Comment? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        if let failure = verdict.failure {
            Issue.record("\(comment.map { "\($0): " } ?? "")refused: \(failure)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Presentation order, duplicates, extras

    @Test("Out of order, duplicated or padded chains still build the one valid path", arguments: ServerTrustPKI.Presentation.allCases)
    func presentationDoesNotMatter(_ presentation: ServerTrustPKI.Presentation) async throws {
        let pki = try Self.fixture.get()
        let verdict = await Self.trust(pki.present(presentation), roots: [pki.root.certificate]).evaluate(.ssl(host: "localhost"))
        let chain = try verdict.get()
        #expect(chain.path == [pki.deepLeaf.certificate, pki.deepIntermediateB.certificate, pki.deepIntermediateA.certificate, pki.root.certificate])
        #expect(chain.basis == .validatedPath)
        #expect(chain.presentedChain == pki.present(presentation))
    }

    // MARK: - Anchors

    @Test("Anchors are added to the platform roots; anchorsOnly trusts nothing else")
    func anchorsVersusAnchorsOnly() async throws {
        let pki = try Self.fixture.get()
        let publicChain = [pki.leaf.certificate, pki.intermediate.certificate]  // under pki.root (platform)
        let privateChain = [pki.privateLeaf.certificate]  // issued directly by pki.privateRoot
        let platform = [pki.root.certificate]
        let anchors = [pki.privateRoot.certificate]

        // The platform roots alone.
        Self.expectTrusted(await Self.trust(publicChain, roots: platform).evaluate(.ssl(host: "localhost")))
        Self.expectRefused(await Self.trust(privateChain, roots: platform).evaluate(.ssl(host: "localhost")), .noPathToAnchor)
        // Anchors added: both validate (adding anchors never drops the platform roots, unlike SecTrustSetAnchorCertificates).
        Self.expectTrusted(await Self.trust(publicChain, roots: platform, anchors: anchors).evaluate(.ssl(host: "localhost")), "platform root with anchors added")
        Self.expectTrusted(await Self.trust(privateChain, roots: platform, anchors: anchors).evaluate(.ssl(host: "localhost")), "anchor")
        // Anchors only: the chain only the platform roots validate is refused.
        Self.expectRefused(
            await Self.trust(publicChain, roots: platform, anchors: anchors, anchorsOnly: true).evaluate(.ssl(host: "localhost")),
            .noPathToAnchor, "anchorsOnly must ignore the platform roots"
        )
        Self.expectTrusted(await Self.trust(privateChain, roots: platform, anchors: anchors, anchorsOnly: true).evaluate(.ssl(host: "localhost")))
        // Anchors only with no anchors trusts nothing.
        Self.expectRefused(
            await Self.trust(publicChain, roots: platform, anchors: [], anchorsOnly: true).evaluate(.ssl(host: "localhost")),
            .noPathToAnchor
        )
        // The initializer's defaults: no anchors, not anchors-only, server purpose, default limits.
        let defaults = ServerTrust(certificates: publicChain)
        #expect(defaults.anchors.isEmpty && !defaults.anchorsOnly && defaults.purpose == .serverAuthentication)
        #expect(defaults.limits == .default && defaults.platformRoots == nil && defaults.validationTime == nil)
    }

    @Test("A self-signed certificate marked as a CA (openssl req -x509's default) can be the only anchor")
    func selfSignedCAAsAnchor() async throws {
        let pki = try Self.fixture.get()
        let certificate = pki.selfSignedCA.certificate
        let verdict = await Self.trust([certificate], roots: [], anchors: [certificate], anchorsOnly: true).evaluate(.ssl(host: "localhost"))
        #expect(try verdict.get().path == [certificate])
        // Not an anchor: no path.
        Self.expectRefused(await Self.trust([certificate], roots: [pki.root.certificate]).evaluate(.ssl(host: "localhost")), .noPathToAnchor)
    }

    /// Apple's SecTrust (and so AFNetworking's certificate pinning, which calls SecTrustSetAnchorCertificates
    /// with the pinned certificates) trusts a chain whose leaf is itself one of the anchors, whatever its
    /// basicConstraints: RFC 5280 §6.1 takes the trust anchor as an input and checks nothing about it.
    /// (swift-certificates' RFC5280Policy alone would demand that the one-certificate path be a CA; the
    /// library exempts a leaf that is itself the anchor.)
    @Test("A leaf certificate (cA FALSE) given as an anchor is trusted", arguments: ["CA-issued leaf", "self-signed leaf"])
    func leafAsAnchor(_ which: String) async throws {
        let pki = try Self.fixture.get()
        let leaf = which == "CA-issued leaf" ? pki.leaf.certificate : pki.selfSignedLeaf.certificate
        let verdict = await Self.trust([leaf], roots: [], anchors: [leaf], anchorsOnly: true).evaluate(.ssl(host: "localhost"))
        let chain = try verdict.get()
        #expect(chain.path == [leaf])
    }

    // MARK: - Validation time

    @Test("The validation instant decides validity; both ends of the window are inclusive")
    func validationInstant() async throws {
        let pki = try Self.fixture.get()
        let chain = [pki.shortLivedLeaf.certificate, pki.intermediate.certificate]
        let roots = [pki.root.certificate]
        let notBefore = pki.shortLivedLeaf.certificate.notValidBefore
        let notAfter = pki.shortLivedLeaf.certificate.notValidAfter
        #expect(notBefore < Self.time && Self.time < notAfter)

        Self.expectTrusted(await Self.trust(chain, roots: roots, at: Self.time).evaluate(.ssl(host: "localhost")))
        Self.expectTrusted(await Self.trust(chain, roots: roots, at: notBefore).evaluate(.ssl(host: "localhost")), "at notBefore")
        Self.expectTrusted(await Self.trust(chain, roots: roots, at: notAfter).evaluate(.ssl(host: "localhost")), "at notAfter")
        Self.expectRefused(
            await Self.trust(chain, roots: roots, at: notAfter + 1).evaluate(.ssl(host: "localhost")), .certificateExpired
        )
        Self.expectRefused(
            await Self.trust(chain, roots: roots, at: notBefore - 1).evaluate(.ssl(host: "localhost")), .certificateNotYetValid
        )
        // No validation time: the moment of evaluation. Today is outside the two-day window around 2030-06-01.
        let now = Date()
        let expectedNow: TrustFailure.Code = now < notBefore ? .certificateNotYetValid : .certificateExpired
        Self.expectRefused(await Self.trust(chain, roots: roots, at: nil).evaluate(.ssl(host: "localhost")), expectedNow, "validated now")
    }

    @Test("A chain that was valid at a past instant is valid then and expired today")
    func pastChainExpiredToday() async throws {
        let pki = try Self.fixture.get()
        let chain = [pki.pastLeaf.certificate]
        let roots = [pki.pastRoot.certificate]
        #expect(pki.pastLeaf.certificate.notValidAfter < Date())
        Self.expectTrusted(await Self.trust(chain, roots: roots, at: ServerTrustPKI.pastTime).evaluate(.ssl(host: "localhost")))
        let failure = Self.expectRefused(await Self.trust(chain, roots: roots, at: nil).evaluate(.ssl(host: "localhost")), .certificateExpired)
        #expect(failure.map { abs($0.validationTime.timeIntervalSinceNow) < 600 } == true, "nil validation time means now")
    }

    // MARK: - Host names

    @Test("Host name rules", arguments: ServerTrustPKI.HostCase.all)
    func hostnames(_ hostCase: ServerTrustPKI.HostCase) async throws {
        let pki = try Self.fixture.get()
        let leaf = pki.hostLeaf(hostCase.leaf)
        let verdict = await Self.trust([leaf.certificate, pki.intermediate.certificate], roots: [pki.root.certificate])
            .evaluate(.ssl(host: hostCase.host))
        if hostCase.matches {
            Self.expectTrusted(verdict, "\(hostCase)")
        } else if hostCase.leaf == .partialWildcard {
            // A wildcard anywhere but as the whole left-most label is not a DNS name at all (RFC 5280 §4.2.1.6
            // preferred name syntax): the certificate is refused outright, whatever the host.
            let failure = Self.expectRefused(verdict, .constraintViolation, "\(hostCase)")
            #expect(failure?.reason.contains("not a valid DNS name") == true)
        } else {
            let failure = Self.expectRefused(verdict, .hostnameMismatch, "\(hostCase)")
            #expect(failure?.host == hostCase.host)
            // The report lists the names the leaf does carry (none for a CN-only leaf).
            #expect(failure?.leafNames == hostCase.leaf.reportedNames, "\(hostCase)")
            if let failure, !hostCase.leaf.reportedNames.isEmpty {
                #expect(failure.multilineDescription.contains(hostCase.leaf.reportedNames[0]))
            }
        }
    }

    @Test("basicX509 checks no name: the wrong-host and CN-only leaves validate")
    func basicX509ChecksNoName() async throws {
        let pki = try Self.fixture.get()
        for kind in [ServerTrustPKI.HostLeaf.commonNameOnly, .dnsSpelledIP, .wildcard] {
            let verdict = await Self.trust([pki.hostLeaf(kind).certificate, pki.intermediate.certificate], roots: [pki.root.certificate])
                .evaluate(.basicX509)
            Self.expectTrusted(verdict, "\(kind)")
        }
    }

    @Test("A host that is neither a DNS name nor an IP address is refused as invalid", arguments: ["", "local host", "exa*mple.com", "a..b"])
    func invalidHost(_ host: String) async throws {
        let pki = try Self.fixture.get()
        let verdict = await Self.trust([pki.leaf.certificate, pki.intermediate.certificate], roots: [pki.root.certificate])
            .evaluate(.ssl(host: host))
        Self.expectRefused(verdict, .invalidHost, "host \"\(host)\"")
    }

    // MARK: - Extended key usage

    @Test("Extended key usage against the purpose", arguments: ServerTrustPKI.UsageCase.all)
    func extendedKeyUsage(_ usageCase: ServerTrustPKI.UsageCase) async throws {
        let pki = try Self.fixture.get()
        let leaf = try #require(pki.usageLeaves[usageCase.usage])
        let verdict = await Self.trust([leaf.certificate, pki.intermediate.certificate], roots: [pki.root.certificate], purpose: usageCase.purpose)
            .evaluate(.ssl(host: "localhost"))
        if usageCase.accepted {
            Self.expectTrusted(verdict, "\(usageCase)")
        } else {
            let failure = Self.expectRefused(verdict, .extendedKeyUsage, "\(usageCase)")
            #expect(failure?.failedCertificateIndex == 0, "the leaf is the certificate that fails")
        }
    }

    // MARK: - RFC 5280 constraints

    @Test("Name constraints: a leaf outside the permitted subtree, or inside an excluded one, is refused")
    func nameConstraints() async throws {
        let pki = try Self.fixture.get()
        let roots = [pki.root.certificate]
        // The intermediate permits only example.com.
        Self.expectRefused(
            await Self.trust([pki.outsidePermittedLeaf.certificate, pki.constrainedIntermediate.certificate], roots: roots).evaluate(.ssl(host: "localhost")),
            .constraintViolation, "localhost is outside the permitted example.com"
        )
        // A name check is not what refuses it: basicX509 refuses it too.
        Self.expectRefused(
            await Self.trust([pki.outsidePermittedLeaf.certificate, pki.constrainedIntermediate.certificate], roots: roots).evaluate(.basicX509),
            .constraintViolation
        )
        Self.expectTrusted(
            await Self.trust([pki.insidePermittedLeaf.certificate, pki.constrainedIntermediate.certificate], roots: roots).evaluate(.ssl(host: "a.example.com")),
            "a.example.com is inside the permitted example.com"
        )
        // The intermediate excludes bad.example.com.
        Self.expectRefused(
            await Self.trust([pki.excludedLeaf.certificate, pki.excludingIntermediate.certificate], roots: roots).evaluate(.ssl(host: "x.bad.example.com")),
            .constraintViolation, "x.bad.example.com is in the excluded subtree"
        )
    }

    @Test("An intermediate that is not a CA cannot issue")
    func intermediateNotCA() async throws {
        let pki = try Self.fixture.get()
        let verdict = await Self.trust([pki.leafUnderNonCA.certificate, pki.nonCAIntermediate.certificate], roots: [pki.root.certificate])
            .evaluate(.ssl(host: "localhost"))
        let failure = try #require(verdict.failure, "a chain through a cA=FALSE certificate was trusted")
        // basicConstraints cA FALSE is an RFC 5280 constraint; its keyUsage also lacks keyCertSign.
        #expect([TrustFailure.Code.constraintViolation, .keyUsage].contains(failure.code), "\(failure)")
    }

    @Test("pathLenConstraint 0 forbids a further intermediate below it")
    func pathLengthExceeded() async throws {
        let pki = try Self.fixture.get()
        let verdict = await Self.trust(
            [pki.leafBelowTooDeep.certificate, pki.tooDeepIntermediate.certificate, pki.intermediate.certificate],
            roots: [pki.root.certificate]
        ).evaluate(.ssl(host: "localhost"))
        Self.expectRefused(verdict, .constraintViolation, "the intermediate has pathLen 0 and issued a CA")
    }

    // MARK: - Resource limits

    @Test("More presented certificates than the limit are refused before any path building")
    func tooManyCertificates() async throws {
        let pki = try Self.fixture.get()
        let valid = [pki.leaf.certificate, pki.intermediate.certificate]
        let roots = [pki.root.certificate]
        let seventy = valid + Array(repeating: pki.unrelatedRoot.certificate, count: 68)
        #expect(seventy.count == 70)
        let failure = Self.expectRefused(await Self.trust(seventy, roots: roots).evaluate(.ssl(host: "localhost")), .tooManyCertificates)
        #expect(failure?.reason.contains("70") == true, "the reason says how many were presented: \(failure?.reason ?? "")")
        // The default limit is 64 (path-building suites send up to 36): exactly 64 is fine, 65 is not.
        let sixtyFour = valid + Array(repeating: pki.unrelatedRoot.certificate, count: 62)
        Self.expectTrusted(await Self.trust(sixtyFour, roots: roots).evaluate(.ssl(host: "localhost")), "64 certificates")
        Self.expectRefused(
            await Self.trust(sixtyFour + [pki.unrelatedRoot.certificate], roots: roots).evaluate(.ssl(host: "localhost")),
            .tooManyCertificates
        )
        // A custom limit.
        let tight = TrustLimits(maximumPresentedCertificates: 2, maximumIntermediates: 8, maximumIssuerLookups: 1024)
        Self.expectTrusted(await Self.trust(valid, roots: roots, limits: tight).evaluate(.ssl(host: "localhost")))
        Self.expectRefused(
            await Self.trust(valid + [pki.root.certificate], roots: roots, limits: tight).evaluate(.ssl(host: "localhost")),
            .tooManyCertificates
        )
    }

    @Test("maximumIntermediates is honoured")
    func maximumIntermediates() async throws {
        let pki = try Self.fixture.get()
        let chain = pki.present(.inOrder)  // two intermediates
        let roots = [pki.root.certificate]
        func limits(_ intermediates: Int) -> TrustLimits {
            TrustLimits(maximumPresentedCertificates: 32, maximumIntermediates: intermediates, maximumIssuerLookups: 1024)
        }
        Self.expectTrusted(await Self.trust(chain, roots: roots, limits: limits(2)).evaluate(.ssl(host: "localhost")))
        Self.expectRefused(await Self.trust(chain, roots: roots, limits: limits(1)).evaluate(.ssl(host: "localhost")), .pathTooLong)
        Self.expectRefused(
            await Self.trust([pki.leaf.certificate, pki.intermediate.certificate], roots: roots, limits: limits(0)).evaluate(.ssl(host: "localhost")),
            .pathTooLong
        )
        Self.expectTrusted(await Self.trust([pki.privateLeaf.certificate], roots: [pki.privateRoot.certificate], limits: limits(0)).evaluate(.ssl(host: "localhost")))
    }

    @Test("maximumIssuerLookups bounds path building")
    func issuerLookupLimit() async throws {
        let pki = try Self.fixture.get()
        let chain = pki.present(.inOrder)
        let none = TrustLimits(maximumPresentedCertificates: 32, maximumIntermediates: 8, maximumIssuerLookups: 0)
        Self.expectRefused(
            await Self.trust(chain, roots: [pki.root.certificate], limits: none).evaluate(.ssl(host: "localhost")),
            .pathBuildingLimitExceeded
        )
        #expect(TrustLimits.default == TrustLimits(maximumPresentedCertificates: 64, maximumIntermediates: 8, maximumIssuerLookups: 1024))
    }

    // MARK: - Cross-signing

    @Test("Path building finds a pinned key through the cross-signed path")
    func crossSignedPath() async throws {
        let pki = try Self.fixture.get()
        let presented = [pki.crossLeaf.certificate, pki.crossIntermediate.certificate, pki.newRootCrossSigned.certificate]
        let bothRoots = [pki.oldRoot.certificate, pki.newRoot.certificate]
        let oldRootPin = Pin(spkiOf: pki.oldRoot.certificate)

        // Only the old root is trusted: the cross-signature is the only way.
        let viaCross = try await Self.trust(presented, roots: [pki.oldRoot.certificate]).evaluate(.ssl(host: "localhost")).get()
        #expect(viaCross.path.last == pki.oldRoot.certificate)
        Self.expectRefused(
            await Self.trust(Array(presented.prefix(2)), roots: [pki.oldRoot.certificate]).evaluate(.ssl(host: "localhost")),
            .noPathToAnchor, "without the cross-signed certificate"
        )
        // Both roots trusted, the old root's key pinned: the short path through the new root carries no pin,
        // so path building must go on to the long one.
        let pinned = try await Self.trust(presented, roots: bothRoots).evaluate(.ssl(host: "localhost"), pins: .publicKeys([oldRootPin])).get()
        #expect(pinned.path.last == pki.oldRoot.certificate)
        #expect(pinned.path.contains(pki.newRootCrossSigned.certificate))
        // The new root's key is on both paths.
        Self.expectTrusted(
            await Self.trust(presented, roots: bothRoots).evaluate(.ssl(host: "localhost"), pins: .publicKeys([Pin(spkiOf: pki.newRoot.certificate)]))
        )
        // A certificate pin on the old root is found the same way.
        Self.expectTrusted(
            await Self.trust(presented, roots: bothRoots).evaluate(.ssl(host: "localhost"), pins: .certificates([pki.oldRoot.certificate]))
        )
        // A key on no path: a pin mismatch reported against a path that validated.
        let failure = Self.expectRefused(
            await Self.trust(presented, roots: bothRoots).evaluate(.ssl(host: "localhost"), pins: .publicKeys([Pin(spkiOf: pki.unrelatedRoot.certificate)])),
            .pinMismatch
        )
        #expect(failure?.validatedPath?.first == pki.crossLeaf.certificate)
        #expect(failure?.expectedPins == [Pin(spkiOf: pki.unrelatedRoot.certificate)])
    }

    // MARK: - Failure texts

    @Test("An expiry report: one-line description with code and host; the long form has pins and dates")
    func expiryReport() async throws {
        let pki = try Self.fixture.get()
        let presented = [pki.shortLivedLeaf.certificate, pki.intermediate.certificate]
        let expectedPin = Pin(spkiOf: pki.intermediate.certificate)
        let after = pki.shortLivedLeaf.certificate.notValidAfter + 3600
        let failure = try #require(
            await Self.trust(presented, roots: [pki.root.certificate], at: after)
                .evaluate(.ssl(host: "localhost"), pins: .publicKeys([expectedPin])).failure
        )
        #expect(failure.code == .certificateExpired)
        #expect(!failure.description.contains("\n"))
        #expect(failure.description.contains("certificateExpired"))
        #expect(failure.description.contains("localhost"))

        let text = failure.multilineDescription
        #expect(text.hasPrefix(failure.description))
        for certificate in presented {
            #expect(text.contains(Pin(spkiOf: certificate).description), "presented pin missing:\n\(text)")
        }
        #expect(text.contains("sha256/"))
        #expect(text.contains(expectedPin.description), "expected pin missing:\n\(text)")
        // The dates that explain the expiry: the leaf's window and the validation time.
        #expect(text.contains(RFC3339.format(pki.shortLivedLeaf.certificate.notValidAfter)), "notAfter missing:\n\(text)")
        #expect(text.contains(RFC3339.format(pki.shortLivedLeaf.certificate.notValidBefore)), "notBefore missing:\n\(text)")
        #expect(text.contains(RFC3339.format(after)), "validation time missing:\n\(text)")
        #expect(RFC3339.format(pki.shortLivedLeaf.certificate.notValidAfter) == "2030-06-02T00:00:00Z")
        #expect(failure.failedCertificateIndex == 0)
    }

    @Test("A pin-mismatch report lists every presented pin and every expected pin")
    func pinMismatchReport() async throws {
        let pki = try Self.fixture.get()
        let presented = [pki.leaf.certificate, pki.intermediate.certificate]
        let expected = [Pin(spkiOf: pki.unrelatedRoot.certificate), Pin(spkiOf: pki.privateRoot.certificate)]
        let failure = try #require(
            await Self.trust(presented, roots: [pki.root.certificate]).evaluate(.ssl(host: "localhost"), pins: .publicKeys(expected)).failure
        )
        #expect(failure.code == .pinMismatch)
        #expect(!failure.description.contains("\n"))
        #expect(failure.description.contains("pinMismatch") && failure.description.contains("localhost"))
        #expect(Set(failure.expectedPins) == Set(expected))
        let text = failure.multilineDescription
        for pin in presented.map({ Pin(spkiOf: $0) }) + expected + [Pin(spkiOf: pki.root.certificate)] {
            #expect(text.contains(pin.description), "\(pin) missing:\n\(text)")
        }
        // Both presented certificates are on the path that validated.
        #expect(failure.presentedCertificates.map(\.isOnValidatedPath) == [true, true])
        #expect(failure.validatedPath == [pki.leaf.certificate, pki.intermediate.certificate, pki.root.certificate])
    }

    @Test("Reports without a host say so on their one line")
    func reportWithoutHost() async throws {
        let pki = try Self.fixture.get()
        let failure = try #require(
            await Self.trust([pki.privateLeaf.certificate], roots: [pki.root.certificate]).evaluate(.basicX509).failure
        )
        #expect(failure.code == .noPathToAnchor)
        #expect(failure.host == nil)
        #expect(!failure.description.contains("\n"))
        #expect(failure.description.contains("noPathToAnchor"))
        #expect(failure.multilineDescription.contains(Pin(spkiOf: pki.privateLeaf.certificate).description))
    }

    @Test("No certificates at all")
    func noCertificates() async throws {
        let pki = try Self.fixture.get()
        Self.expectRefused(await Self.trust([], roots: [pki.root.certificate]).evaluate(.ssl(host: "localhost")), .noPeerCertificates)
    }
}

// MARK: - The PKI

struct ServerTrustPKI: Sendable {
    static let time = TestPKI.referenceTime
    static let day: TimeInterval = 86400
    /// 2020-06-01T00:00:00Z: an instant in the past.
    static let pastTime = Date(timeIntervalSince1970: 1_590_969_600)

    let root: TestIdentity
    let intermediate: TestIdentity
    let leaf: TestIdentity
    let shortLivedLeaf: TestIdentity
    let privateRoot: TestIdentity
    let privateLeaf: TestIdentity
    let unrelatedRoot: TestIdentity
    let unrelatedLeaf: TestIdentity
    let pastRoot: TestIdentity
    let pastLeaf: TestIdentity
    let selfSignedCA: TestIdentity
    let selfSignedLeaf: TestIdentity

    // root → A (pathLen 1) → B (pathLen 0) → deepLeaf
    let deepIntermediateA: TestIdentity
    let deepIntermediateB: TestIdentity
    let deepLeaf: TestIdentity

    let hostLeaves: [HostLeaf: TestIdentity]
    let usageLeaves: [TestPKI.LeafUsage: TestIdentity]

    let constrainedIntermediate: TestIdentity
    let insidePermittedLeaf: TestIdentity
    let outsidePermittedLeaf: TestIdentity
    let excludingIntermediate: TestIdentity
    let excludedLeaf: TestIdentity
    let nonCAIntermediate: TestIdentity
    let leafUnderNonCA: TestIdentity
    let tooDeepIntermediate: TestIdentity
    let leafBelowTooDeep: TestIdentity

    let oldRoot: TestIdentity
    let newRoot: TestIdentity
    let newRootCrossSigned: TestIdentity
    let crossIntermediate: TestIdentity
    let crossLeaf: TestIdentity

    init() throws {
        let t = Self.time
        let day = Self.day
        let from = t - 365 * day
        let until = t + 365 * day
        func ca(_ name: String) throws -> TestIdentity {
            try TestPKI.root(name, notValidBefore: from, notValidAfter: until)
        }
        func intermediate(_ name: String, _ issuer: TestIdentity, pathLength: Int? = 0, permitted: [String] = [], excluded: [String] = [], isCA: Bool = true) throws -> TestIdentity {
            try TestPKI.intermediate(
                name, issuer: issuer, notValidBefore: from, notValidAfter: until, maxPathLength: pathLength,
                permittedDNSDomains: permitted, excludedDNSDomains: excluded, isCA: isCA
            )
        }
        func leaf(_ name: String, _ issuer: TestIdentity, dns: [String]? = nil, ips: [String] = [], usage: TestPKI.LeafUsage = .serverAuth, includeSAN: Bool = true) throws -> TestIdentity {
            try TestPKI.leaf(
                name, issuer: issuer, dnsNames: dns ?? [name], ipAddresses: ips, usage: usage,
                notValidBefore: from, notValidAfter: until, includeSAN: includeSAN
            )
        }

        self.root = try ca("Server Trust Root CA")
        self.intermediate = try intermediate("Server Trust Intermediate CA", self.root)
        self.leaf = try leaf("localhost", self.intermediate)
        self.shortLivedLeaf = try TestPKI.leaf(
            "localhost", issuer: self.intermediate, dnsNames: ["localhost"], notValidBefore: t - day, notValidAfter: t + day
        )
        self.privateRoot = try ca("Private Root CA")
        self.privateLeaf = try leaf("localhost", self.privateRoot)
        self.unrelatedRoot = try ca("Unrelated Root CA")
        self.unrelatedLeaf = try leaf("localhost", self.unrelatedRoot)
        self.pastRoot = try TestPKI.root("Past Root CA", notValidBefore: Self.pastTime - 365 * day, notValidAfter: Self.pastTime + 365 * day)
        self.pastLeaf = try TestPKI.leaf(
            "localhost", issuer: self.pastRoot, dnsNames: ["localhost"],
            notValidBefore: Self.pastTime - 30 * day, notValidAfter: Self.pastTime + 30 * day
        )

        self.selfSignedCA = try TestPKI.selfSigned("localhost", notValidBefore: from, notValidAfter: until, isCA: true)
        self.selfSignedLeaf = try TestPKI.selfSigned("localhost", notValidBefore: from, notValidAfter: until)

        self.deepIntermediateA = try intermediate("Deep Intermediate A", self.root, pathLength: 1)
        self.deepIntermediateB = try intermediate("Deep Intermediate B", self.deepIntermediateA, pathLength: 0)
        self.deepLeaf = try leaf("localhost", self.deepIntermediateB)

        var hostLeaves: [HostLeaf: TestIdentity] = [:]
        for kind in HostLeaf.allCases {
            hostLeaves[kind] = try leaf(kind.commonName, self.intermediate, dns: kind.dnsNames, ips: kind.ipAddresses, includeSAN: kind != .commonNameOnly)
        }
        self.hostLeaves = hostLeaves
        var usageLeaves: [TestPKI.LeafUsage: TestIdentity] = [:]
        for usage in TestPKI.LeafUsage.allCases {
            usageLeaves[usage] = try leaf("localhost", self.intermediate, usage: usage)
        }
        self.usageLeaves = usageLeaves

        self.constrainedIntermediate = try intermediate("Constrained Intermediate", self.root, permitted: ["example.com"])
        self.insidePermittedLeaf = try leaf("a.example.com", self.constrainedIntermediate)
        self.outsidePermittedLeaf = try leaf("localhost", self.constrainedIntermediate)
        self.excludingIntermediate = try intermediate("Excluding Intermediate", self.root, excluded: ["bad.example.com"])
        self.excludedLeaf = try leaf("x.bad.example.com", self.excludingIntermediate)
        self.nonCAIntermediate = try intermediate("Not A CA", self.root, isCA: false)
        self.leafUnderNonCA = try leaf("localhost", self.nonCAIntermediate)
        // self.intermediate has pathLen 0, yet issues another CA.
        self.tooDeepIntermediate = try intermediate("Too Deep Intermediate", self.intermediate)
        self.leafBelowTooDeep = try leaf("localhost", self.tooDeepIntermediate)

        self.oldRoot = try ca("Old Root CA")
        self.newRoot = try ca("New Root CA")
        self.newRootCrossSigned = try TestPKI.crossSign(self.newRoot, by: self.oldRoot)
        self.crossIntermediate = try intermediate("Cross Intermediate", self.newRoot)
        self.crossLeaf = try leaf("localhost", self.crossIntermediate)
    }

    func hostLeaf(_ kind: HostLeaf) -> TestIdentity { self.hostLeaves[kind]! }

    enum Presentation: String, Sendable, CaseIterable {
        case inOrder, reversed, duplicates, unrelatedExtras, rootIncluded
    }

    func present(_ presentation: Presentation) -> [Certificate] {
        let leaf = self.deepLeaf.certificate
        let a = self.deepIntermediateA.certificate
        let b = self.deepIntermediateB.certificate
        switch presentation {
        case .inOrder: return [leaf, b, a]
        case .reversed: return [leaf, a, b]
        case .duplicates: return [leaf, a, b, b, leaf, a, a]
        case .unrelatedExtras:
            return [leaf, self.unrelatedRoot.certificate, a, self.unrelatedLeaf.certificate, self.intermediate.certificate, b, self.privateRoot.certificate]
        case .rootIncluded: return [leaf, self.root.certificate, a, b]
        }
    }

    /// Leaves with particular names.
    enum HostLeaf: String, Sendable, CaseIterable {
        case commonNameOnly, wildcard, partialWildcard, publicSuffixWildcard, dnsSpelledIP, ipAddresses, mixedCase, trailingDot

        var commonName: String {
            switch self {
            case .commonNameOnly: return "localhost"
            case .dnsSpelledIP, .ipAddresses: return "127.0.0.1"
            default: return self.dnsNames.first ?? "leaf"
            }
        }

        var dnsNames: [String] {
            switch self {
            case .commonNameOnly: return []
            case .wildcard: return ["*.example.com"]
            case .partialWildcard: return ["f*.example.com"]
            case .publicSuffixWildcard: return ["*.com"]
            case .dnsSpelledIP: return ["127.0.0.1"]
            case .ipAddresses: return []
            case .mixedCase: return ["LocalHost.Example.COM"]
            case .trailingDot: return ["localhost."]
            }
        }

        var ipAddresses: [String] { self == .ipAddresses ? ["127.0.0.1", "::1"] : [] }

        /// How a failure report lists the leaf's names.
        var reportedNames: [String] {
            switch self {
            case .commonNameOnly: return []
            case .ipAddresses: return ["IP:127.0.0.1", "IP:::1"]
            default: return self.dnsNames.map { "DNS:\($0)" }
            }
        }
    }

    struct HostCase: Sendable, CustomTestStringConvertible {
        var leaf: HostLeaf
        var host: String
        var matches: Bool

        var testDescription: String { "\(self.leaf.rawValue) for \"\(self.host)\" → \(self.matches ? "match" : "mismatch")" }

        /// Each expectation follows RFC 6125 as browsers apply it (the rules listed in the brief).
        static let all: [HostCase] = [
            // SAN only: a CN of localhost without a SAN extension proves nothing.
            HostCase(leaf: .commonNameOnly, host: "localhost", matches: false),
            // A wildcard is exactly one whole left-most label.
            HostCase(leaf: .wildcard, host: "a.example.com", matches: true),
            HostCase(leaf: .wildcard, host: "A.Example.Com", matches: true),
            HostCase(leaf: .wildcard, host: "a.example.com.", matches: true),
            HostCase(leaf: .wildcard, host: "a.b.example.com", matches: false),
            HostCase(leaf: .wildcard, host: "example.com", matches: false),
            HostCase(leaf: .wildcard, host: "a.example.org", matches: false),
            // Partial-label wildcards never match.
            HostCase(leaf: .partialWildcard, host: "foo.example.com", matches: false),
            HostCase(leaf: .partialWildcard, host: "f.example.com", matches: false),
            // A wildcard over a single remaining label matches nothing.
            HostCase(leaf: .publicSuffixWildcard, host: "example.com", matches: false),
            // IP hosts match only IP SANs; a DNS SAN spelling an address is not an IP SAN.
            HostCase(leaf: .dnsSpelledIP, host: "127.0.0.1", matches: false),
            HostCase(leaf: .ipAddresses, host: "127.0.0.1", matches: true),
            HostCase(leaf: .ipAddresses, host: "::1", matches: true),
            HostCase(leaf: .ipAddresses, host: "[::1]", matches: true),
            HostCase(leaf: .ipAddresses, host: "0:0:0:0:0:0:0:1", matches: true),
            HostCase(leaf: .ipAddresses, host: "127.0.0.2", matches: false),
            HostCase(leaf: .ipAddresses, host: "::2", matches: false),
            HostCase(leaf: .ipAddresses, host: "localhost", matches: false),
            // DNS names compare case-insensitively, ignoring one trailing dot, on either side.
            HostCase(leaf: .mixedCase, host: "localhost.example.com", matches: true),
            HostCase(leaf: .mixedCase, host: "LOCALHOST.EXAMPLE.COM", matches: true),
            HostCase(leaf: .mixedCase, host: "localhost.example.com.", matches: true),
            HostCase(leaf: .mixedCase, host: "localhost.example", matches: false),
            HostCase(leaf: .trailingDot, host: "localhost", matches: true),
            HostCase(leaf: .trailingDot, host: "localhost.", matches: true),
            HostCase(leaf: .trailingDot, host: "LOCALHOST", matches: true),
        ]
    }

    struct UsageCase: Sendable, CustomTestStringConvertible {
        var usage: TestPKI.LeafUsage
        var purpose: TrustPurpose
        var accepted: Bool

        var testDescription: String { "\(self.usage) for \(self.purpose) → \(self.accepted ? "accepted" : "refused")" }

        /// RFC 5280 §4.2.1.12: with an EKU extension the purpose must be listed; without one, any purpose goes.
        static let all: [UsageCase] = [
            UsageCase(usage: .serverAuth, purpose: .serverAuthentication, accepted: true),
            UsageCase(usage: .serverAuth, purpose: .clientAuthentication, accepted: false),
            UsageCase(usage: .clientAuth, purpose: .serverAuthentication, accepted: false),
            UsageCase(usage: .clientAuth, purpose: .clientAuthentication, accepted: true),
            UsageCase(usage: .serverAndClientAuth, purpose: .serverAuthentication, accepted: true),
            UsageCase(usage: .serverAndClientAuth, purpose: .clientAuthentication, accepted: true),
            UsageCase(usage: .none, purpose: .serverAuthentication, accepted: true),
            UsageCase(usage: .none, purpose: .clientAuthentication, accepted: true),
            UsageCase(usage: .codeSigning, purpose: .serverAuthentication, accepted: false),
            UsageCase(usage: .codeSigning, purpose: .clientAuthentication, accepted: false),
        ]
    }
}
