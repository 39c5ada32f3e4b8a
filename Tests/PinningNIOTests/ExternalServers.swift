import Foundation
import PinningTestSupport
import Testing

/// Whether /usr/bin/python3 exists (the unclean-shutdown servers are Python `ssl` servers).
let python3Available = TestTools.python3Available

extension ServerProcess {
    /// A Python `ssl` server answering every request with the response `mode` names, then closing the TCP
    /// connection WITHOUT a TLS close_notify (Python's `SSLSocket.close()` never sends one; only `unwrap()` does),
    /// except in mode `close-clean`.
    static func pythonServer(certificate: String, key: String, mode: String, in directory: TemporaryDirectory) async throws -> ServerProcess {
        let script = try directory.write("server-\(UUID().uuidString).py", pythonScript)
        return try await ServerProcess("/usr/bin/python3", ["-u", script, certificate, key, mode], in: directory) { line in
            guard line.hasPrefix("PORT ") else { return nil }
            return Int(line.dropFirst(5))
        }
    }

    static let pythonScript = #"""
        import socket, ssl, sys
        cert, key, mode = sys.argv[1:4]
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        print("PORT", listener.getsockname()[1], flush=True)
        body = b"hello, world\n"
        responses = {
            "length": b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
            "length-short": b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + body,
            "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n",
            "chunked-short": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % len(body) + body + b"\r\n",
            "close": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body,
            "close-clean": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body,
            "not-http": b"SSH-2.0-OpenSSH_9.6\r\n",
            "status404": b"HTTP/1.1 404 Not Found\r\nContent-Length: 10\r\nConnection: close\r\n\r\nnot found\n",
        }
        while True:
            raw, _ = listener.accept()
            try:
                conn = ctx.wrap_socket(raw, server_side=True)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                conn.sendall(responses[mode])
                if mode == "close-clean":
                    conn.unwrap().close()
                else:
                    conn.close()
            except Exception as error:
                print("error", error, file=sys.stderr, flush=True)
        """#
}

/// Certificates made by the openssl command line: a root and a leaf for localhost / 127.0.0.1 (serverAuth) or a
/// client leaf (clientAuth), both with the key type `keyArguments` picks (`-newkey ed25519`, …).
struct OpenSSLPKI {
    let directory: TemporaryDirectory
    let rootPEM: String
    let leafPEM: String
    let leafKey: String

    /// The `openssl req -newkey` arguments per key type.
    static let keyTypes: [String: [String]] = [
        "ed25519": ["-newkey", "ed25519"],
        "p256": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
        "p384": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384"],
        "p521": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-521"],
        "rsa2048": ["-newkey", "rsa:2048"],
        "rsa-pss": ["-newkey", "rsa-pss", "-pkeyopt", "rsa_keygen_bits:2048"],
    ]

    init(keyType: String, rootKeyType: String? = nil, clientAuth: Bool = false, in directory: TemporaryDirectory) async throws {
        self.directory = directory
        let key = try #require(Self.keyTypes[keyType])
        let rootKey = try #require(Self.keyTypes[rootKeyType ?? keyType])
        let root = directory.path("root-\(keyType).pem")
        let rootPrivate = directory.path("root-\(keyType).key")
        let leaf = directory.path("leaf-\(keyType).pem")
        let leafPrivate = directory.path("leaf-\(keyType).key")
        let request = directory.path("leaf-\(keyType).csr")
        let extensions = try directory.write(
            "leaf-\(keyType).ext",
            clientAuth
                ? "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\nsubjectAltName=DNS:client-ed\n"
                : "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
        )
        try await Self.run(
            ["req", "-x509"] + rootKey + [
                "-nodes", "-keyout", rootPrivate, "-out", root, "-days", "2", "-subj", "/CN=Interop Root \(keyType)",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ])
        try await Self.run(["req", "-new"] + key + ["-nodes", "-keyout", leafPrivate, "-out", request, "-subj", clientAuth ? "/CN=client-ed" : "/CN=localhost"])
        try await Self.run(["x509", "-req", "-in", request, "-CA", root, "-CAkey", rootPrivate, "-CAcreateserial", "-days", "1", "-out", leaf, "-extfile", extensions])
        self.rootPEM = root
        self.leafPEM = leaf
        self.leafKey = leafPrivate
    }

    static func run(_ arguments: [String]) async throws {
        let result = try await openssl(arguments)
        guard result.status == 0 else {
            throw ServerProcess.StartError(description: "openssl \(arguments.joined(separator: " ")): \(result.output)")
        }
    }
}
