import Foundation
import PinningTestSupport
import Testing

// Clients that misbehave on purpose, for the deadline, refusal-log and blame tests of issue 27 (items 2, 4, 5):
// written in Python (its `ssl` module is OpenSSL, software we did not write), loopback only, each reporting what
// it saw as one JSON object on stdout.

enum SlowClients {
    /// What one client run saw.
    struct Outcome: CustomStringConvertible {
        var json: [String: Any]
        var run: TestTools.ProcessResult

        /// Seconds from the connection (or the start of the TLS session) until the server closed it; nil when it
        /// stayed open for the whole run.
        var closedAfter: Double? { self.json["how"] as? String == "open" ? nil : self.json["closedAfter"] as? Double }
        /// Everything the server sent (after the TLS handshake, for TLS modes), as text.
        var received: String { self.json["received"] as? String ?? "" }
        /// The client's local port (its name in the server's log).
        var port: Int { self.json["port"] as? Int ?? 0 }
        var description: String { "\(self.json) \(self.run.stderr)" }
    }

    /// Runs the script with `arguments` (a mode, then its arguments); bounded by `timeout`.
    static func run(_ arguments: [String], in directory: TemporaryDirectory, timeout: Double = 120) async throws -> Outcome {
        let script = try directory.write("slow_client.py", Self.script)
        let run = try await TestTools.run("/usr/bin/python3", ["-u", script] + arguments, in: directory, timeout: timeout)
        let line = run.stdout.split(separator: "\n").last.map(String.init) ?? "{}"
        let json = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
        return Outcome(json: json, run: run)
    }

    static let script = #"""
        import json, socket, ssl, sys, time

        def out(**fields):
            print(json.dumps(fields), flush=True)

        def wait_close(s, limit, start):
            """Reads until EOF, an error or `limit` seconds after `start`."""
            data = b""
            s.settimeout(0.1)
            while time.monotonic() - start < limit:
                try:
                    chunk = s.recv(65536)
                except (socket.timeout, ssl.SSLWantReadError):
                    continue
                except (OSError, ssl.SSLError) as error:
                    return time.monotonic() - start, data, "error " + type(error).__name__
                if not chunk:
                    return time.monotonic() - start, data, "eof"
                data += chunk
            return time.monotonic() - start, data, "open"

        def dribble(s, text, interval, limit, start):
            """Sends `text` one byte every `interval` seconds, watching for the server to close."""
            data = b""
            for byte in text:
                try:
                    s.sendall(bytes([byte]))
                except (OSError, ssl.SSLError) as error:
                    return time.monotonic() - start, data, "error " + type(error).__name__
                waited, chunk, how = wait_close(s, interval, time.monotonic())
                data += chunk
                if how != "open":
                    return time.monotonic() - start, data, how
                if time.monotonic() - start > limit:
                    return time.monotonic() - start, data, "open"
            elapsed, chunk, how = wait_close(s, limit, start)
            return elapsed, data + chunk, how

        def through_proxy(proxy_port, target):
            """A socket to the proxy that asked CONNECT `target` and read the proxy's answer head."""
            s = socket.create_connection(("127.0.0.1", proxy_port), timeout=30)
            s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(1)
                if not chunk:
                    raise SystemExit("the proxy closed before answering CONNECT: %r" % head)
                head += chunk
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit("CONNECT refused: %r" % head)
            return s

        def tls(s, cafile, name):
            context = ssl.create_default_context(cafile=cafile)
            return context.wrap_socket(s, server_hostname=name)

        def report(s, elapsed, data, how):
            out(port=s.getsockname()[1], closedAfter=elapsed, how=how, received=data.decode("latin-1"))

        mode = sys.argv[1]
        if mode == "silent":
            # silent PORT LIMIT: connect, send nothing.
            port, limit = int(sys.argv[2]), float(sys.argv[3])
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            start = time.monotonic()
            report(s, *wait_close(s, limit, start))
        elif mode == "dribble":
            # dribble PORT LIMIT INTERVAL TEXT: a request head, one byte at a time, in plain TCP.
            port, limit, interval, text = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            start = time.monotonic()
            report(s, *dribble(s, text.encode(), interval, limit, start))
        elif mode == "tls-dribble" or mode == "tls-send":
            # tls-dribble|tls-send PORT LIMIT INTERVAL TEXT|@FILE CAFILE NAME [CONNECT-TARGET]
            port, limit, interval = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
            text = open(sys.argv[5][1:], "rb").read() if sys.argv[5].startswith("@") else sys.argv[5].encode()
            cafile, name = sys.argv[6], sys.argv[7]
            raw = through_proxy(port, sys.argv[8]) if len(sys.argv) > 8 else socket.create_connection(("127.0.0.1", port), timeout=30)
            s = tls(raw, cafile, name)
            start = time.monotonic()
            if mode == "tls-send":
                s.sendall(text)
                report(s, *wait_close(s, limit, start))
            else:
                report(s, *dribble(s, text, interval, limit, start))
        elif mode == "connect-silent":
            # connect-silent PORT LIMIT TARGET: CONNECT answered, then no TLS handshake at all.
            port, limit, target = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
            s = through_proxy(port, target)
            start = time.monotonic()
            report(s, *wait_close(s, limit, start))
        elif mode == "refusals":
            # refusals PORT SERVER-CA DIR: the clients a mutual-TLS server refuses, one after another; one JSON
            # line each, naming the case and the client's local port.
            port, server_ca, directory = int(sys.argv[2]), sys.argv[3], sys.argv[4]
            def client(case, certfile=None, keyfile=None, cafile=server_ca, plain=None, send_nothing=False):
                s = socket.create_connection(("127.0.0.1", port), timeout=30)
                local = s.getsockname()[1]
                outcome = "closed"
                try:
                    if send_nothing:
                        pass
                    elif plain is not None:
                        s.sendall(plain)
                        wait_close(s, 10, time.monotonic())
                    else:
                        context = ssl.create_default_context(cafile=cafile)
                        if certfile:
                            context.load_cert_chain(certfile, keyfile)
                        t = context.wrap_socket(s, server_hostname="localhost")
                        t.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                        elapsed, data, how = wait_close(t, 10, time.monotonic())
                        outcome = "served" if data.startswith(b"HTTP/1.1 200") else "refused: " + how
                except (OSError, ssl.SSLError) as error:
                    outcome = "refused: " + type(error).__name__ + " " + str(error)[:120]
                finally:
                    s.close()
                out(case=case, port=local, outcome=outcome)
            d = directory + "/"
            client("good", d + "client-chain.pem", d + "client.key")
            client("noCertificate")
            client("otherCA", d + "stranger-chain.pem", d + "stranger.key")
            client("tooManyCertificates", d + "many-chain.pem", d + "client.key")
            client("over100KiB", d + "huge-chain.pem", d + "client.key")
            client("distrustsServer", d + "client-chain.pem", d + "client.key", cafile=d + "stranger-root.pem")
            client("plainHTTP", plain=b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            client("silent", send_nothing=True)
        """#
}
