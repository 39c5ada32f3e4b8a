import Foundation
import Pinning
import PinningTestSupport
import Testing

// What a tester using the product as a new user found (negative numbers, `help` with an unknown name, a URL with
// credentials, a Unicode --resolve entry, the host blamed after a redirect): each refused or reported as the
// help and the documentation say. Parsing is tested in process (InProcessCLI); the redirect needs a real server.
@Suite("First use: the defects a new user met")
struct FirstUseCLITests {
    /// Every numeric option of the `pinning` command tree, with the arguments its subcommand needs before it.
    static let numericOptions: [(prefix: [String], option: String)] = [
        (["check", "https://localhost:1/"], "--connect-timeout"), (["check", "https://localhost:1/"], "--max-time"),
        (["serve", "--cert", "c", "--key", "k"], "--port"), (["serve", "--cert", "c", "--key", "k"], "--crl-reload"),
        (["serve", "--cert", "c", "--key", "k"], "--handshake-timeout"), (["serve", "--cert", "c", "--key", "k"], "--request-head-timeout"),
        (["evaluate", "--chain", "c"], "--port"),
        (["bench", "--chain", "c"], "--iterations"), (["bench", "evaluations", "--chain", "c"], "--cached-iterations"),
        (["bench", "handshake"], "--connections"), (["bench", "handshake"], "--concurrency"), (["bench", "handshake"], "--rounds"),
        (["bench", "handshake"], "--clients"), (["bench", "handshake"], "--leaves"), (["bench", "handshake"], "--seconds"),
        (["pki", "init", "d"], "--days"), (["pki", "issue", "d", "--client", "c"], "--days"), (["pki", "crl", "d"], "--days"),
    ]

    @Test("a negative number after a space is the option's value: refused with the option's range, never \"Missing value\"")
    func negativeNumbers() {
        for (prefix, option) in Self.numericOptions {
            for value in ["-1", "-5", "-0.5", "-1e3"] {
                let run = InProcessCLI.parse(prefix + [option, value])
                #expect(run.status == 2, "\(run)")
                #expect(run.stderr.contains("'\(option) <"), "\(run)")
                #expect(run.stderr.contains("out of range") || run.stderr.contains("not a "), "\(run)")
                #expect(!run.stderr.contains("Missing value"), "\(run)")
            }
        }
        let port = InProcessCLI.parse(["serve", "--cert", "c.pem", "--key", "k.pem", "--port", "-1"])
        #expect(port.stderr.contains("'--port <n>': out of range; use a TCP port from 0 to 65535"), "\(port)")
        // The value is taken whatever it looks like: an option name where a number belongs is refused as not a
        // number, and a missing value is still missing.
        let flag = InProcessCLI.parse(["serve", "--cert", "c.pem", "--key", "k.pem", "--port", "--json"])
        #expect(flag.status == 2 && flag.stderr.contains("'--port <n>': not a TCP port"), "\(flag)")
        let missing = InProcessCLI.parse(["serve", "--cert", "c.pem", "--key", "k.pem", "--port"])
        #expect(missing.status == 2 && missing.stderr.contains("Missing value for '--port <n>'"), "\(missing)")
        // In range, with a space, as before.
        #expect(InProcessCLI.parse(["serve", "--cert", "c.pem", "--key", "k.pem", "--port", "8443"]).status == -1)
        #expect(InProcessCLI.parse(["pinset", "init", "repo", "--root-threshold", "-1"]).stderr.contains("Missing value") == false)
    }

    @Test("help naming a subcommand that does not exist: exit 2, one line naming it; known names still give help")
    func helpUnknownSubcommand() {
        let top = InProcessCLI.parse(["help", "nonexist"])
        #expect(top.status == 2, "\(top)")
        #expect(top.stderr.hasPrefix("pinning: help: unknown subcommand \"nonexist\" of pinning; use one of evaluate, check, serve, "), "\(top)")
        #expect(top.stderr.split(separator: "\n").count == 1 && top.stdout.isEmpty, "\(top)")
        let nested = InProcessCLI.parse(["help", "pki", "nonexist"])
        #expect(nested.status == 2 && nested.stderr.hasPrefix("pinning: help: unknown subcommand \"nonexist\" of pinning pki; use one of init"), "\(nested)")
        let leaf = InProcessCLI.parse(["help", "check", "extra"])
        #expect(leaf.status == 2 && leaf.stderr.contains("pinning check has no subcommands"), "\(leaf)")
        for known in [["help"], ["help", "check"], ["help", "pki", "issue"]] {
            #expect(InProcessCLI.parse(known).status != 2, "\(known)")
        }
    }

    @Test("a URL with user information is refused (exit 2), the password never echoed")
    func credentialsInURL() {
        for url in ["https://user:pw@localhost:44320/auth", "https://user@localhost/", "https://user:pw@localhost:99999/"] {
            let target = InProcessCLI.checkTarget([url])
            guard let refusal = target.refusal else {
                Issue.record("\(url) accepted: \(target)")
                continue
            }
            #expect(refusal.hasPrefix("pinning: https://user"), "\(url): \(refusal)")
            #expect(!refusal.contains("pw"), "\(url): \(refusal)")
        }
        #expect(InProcessCLI.checkTarget(["https://user:pw@localhost:44320/auth"]).refusal?.contains("https://user:xxxxx@localhost:44320/auth: credentials in the URL are not sent") == true)
        #expect(InProcessCLI.checkTarget(["https://localhost:44320/a@b"]).url == "https://localhost:44320/a@b", "an @ in the path is no user information")
    }

    @Test("--resolve with a Unicode host matches the URL's host, which the URL parser writes in its A-label form")
    func unicodeResolve() throws {
        let unicode = InProcessCLI.checkTarget(["https://例え.テスト:44301/", "--resolve", "例え.テスト:44301:127.0.0.1"])
        let ascii = InProcessCLI.checkTarget(["https://例え.テスト:44301/", "--resolve", "xn--r8jz45g.xn--zckzah:44301:127.0.0.1"])
        #expect(unicode.refusal == nil && ascii.refusal == nil, "\(unicode) \(ascii)")
        #expect(unicode.resolve == ["xn--r8jz45g.xn--zckzah:44301"], "\(unicode)")
        #expect(unicode.resolve == ascii.resolve)
        // The key is the host the client asks for: the URL's.
        let host = try #require(URL(string: "https://例え.テスト:44301/")?.host)
        #expect(unicode.resolve == ["\(host):44301"])
        #expect(InProcessCLI.checkTarget(["https://LocalHost:1/", "--resolve", "LOCALHOST:1:127.0.0.1"]).resolve == ["localhost:1"])
        let bad = InProcessCLI.checkTarget(["https://localhost:1/", "--resolve", "é@x:1:127.0.0.1"])
        #expect(bad.refusal?.contains("is not a host name") == true, "\(bad)")
    }

    @Test("a Unicode --resolve entry is used by the built binary (the connection is refused, not the name unresolved)")
    func unicodeResolveBinary() async throws {
        let directory = try TemporaryDirectory(prefix: "pinning-idn-resolve")
        defer { directory.remove() }
        // Port 1 on loopback: nothing listens, so the connection is refused once the address is known.
        let run = try await CLI.run(["check", "https://例え.テスト:1/", "--resolve", "例え.テスト:1:127.0.0.1", "--connect-timeout", "5"], in: directory)
        #expect(run.status == 3, "\(run)")
        #expect(!run.stderr.contains("cannot resolve"), "\(run)")
    }

    @Test("after a redirect to another host, the verdict names the host judged and the URL it was judged for", .enabled(if: CLI.hasOpenSSL))
    func redirectBlamesTheTarget() async throws {
        let fixture = try await ServeCheckFixture()
        defer { fixture.directory.remove() }
        let leaf = try fixture.directory.write("leaf.pem", fixture.server.leaf.certificatePEM)
        let intermediate = try fixture.directory.write("intermediate.pem", fixture.server.intermediate.certificatePEM)
        // `s_server -HTTP` answers GET /far2 with the file far2 of its directory, a whole HTTP response.
        let server = try await ServerProcess.opensslServer(["-cert", leaf, "-cert_chain", intermediate, "-key", fixture.serverKey, "-HTTP"], in: fixture.directory)
        defer { server.stop() }
        let target = "https://other.example:\(server.port)/auth"
        _ = try fixture.directory.write("far2", "HTTP/1.1 301 Moved Permanently\r\nLocation: \(target)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        let start = "https://localhost:\(server.port)/far2"
        let arguments = [
            "check", start, "--roots", fixture.root, "--resolve", "localhost:\(server.port):127.0.0.1", "--resolve", "other.example:\(server.port):127.0.0.1",
        ]

        let json = try await fixture.check(arguments + ["--json"])
        #expect(json.status == 1, "\(json)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json)")
        #expect(object["url"] as? String == start)
        #expect(object["finalURL"] as? String == target, "\(json.stdout)")
        let evaluation = try #require(object["evaluation"] as? [String: Any], "\(json.stdout)")
        #expect(evaluation["host"] as? String == "other.example", "\(json.stdout)")
        #expect(evaluation["code"] as? String == "hostnameMismatch", "\(json.stdout)")

        let text = try await fixture.check(arguments)
        #expect(text.status == 1, "\(text)")
        let redirected = try #require(text.stdout.range(of: "redirected to \(target)\n"), "\(text.stdout)")
        let verdict = try #require(text.stdout.range(of: "NOT TRUSTED: other.example"), "\(text.stdout)")
        #expect(redirected.upperBound <= verdict.lowerBound, "the redirect is said before the verdict on its target: \(text.stdout)")
        #expect(!text.stdout.contains("NOT TRUSTED: localhost"), "\(text.stdout)")
    }
}
