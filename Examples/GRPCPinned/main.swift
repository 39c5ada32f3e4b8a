// A gRPC server for devices over mutual TLS and a pinned gRPC client, both on swift-pinning's transports.
//
//     swift run GRPCPinnedExample
//
// It mints a throw-away PKI (PinningPKI), serves `devices.Devices/Whoami` on 127.0.0.1 with
// MutualTLSGRPCServerTransport (device certificates judged by MutualTLSServer), then calls it as a device with
// PinnedGRPCClientTransport pinned to the server's key, and once more pinned to another key, to show the
// refusal a caller gets. Messages are UTF-8 text, so no protobuf code generation is needed; with
// grpc-swift-protobuf, generated clients and services take these transports unchanged.
import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import NIOCore
import Pinning
import PinningGRPC
import PinningNIO
import PinningPKI

// `--help` says what the demo does and runs nothing; it takes no other arguments.
let arguments = CommandLine.arguments.dropFirst()
if arguments.contains("--help") || arguments.contains("-h") {
    print(
        """
        USAGE: swift run GRPCPinnedExample

        Mints a throw-away PKI, serves devices.Devices/Whoami on 127.0.0.1 over mutual TLS (MutualTLSGRPCServerTransport),
        calls it as a device through PinnedGRPCClientTransport pinned to the server's key, then once more pinned to
        another key to show the refusal a caller gets. Takes no arguments.
        """)
    exit(0)
}
if let first = arguments.first {
    FileHandle.standardError.write(Data("GRPCPinnedExample: unexpected argument \"\(first)\"; it takes none (--help says what it does)\n".utf8))
    exit(2)
}

struct Text: MessageSerializer, MessageDeserializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: String) throws -> Bytes { Bytes(Array(message.utf8)) }
    func deserialize<Bytes: GRPCContiguousBytes>(_ bytes: Bytes) throws -> String {
        bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }
}

struct Devices: RegistrableRPCService {
    static let whoami = MethodDescriptor(fullyQualifiedService: "devices.Devices", method: "Whoami")

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(forMethod: Self.whoami, deserializer: Text(), serializer: Text()) { request, context in
            for try await _ in request.messages {}
            // The device the transport's handshake validated: its chain, subject and pin.
            let subject = context.authenticatedClient?.subject ?? "nobody"
            return StreamingServerResponse(single: ServerResponse(message: "hello \(subject)"))
        }
    }
}

let serverChain = try TestChain(host: "devices.example", rootName: "Example Server Root")
let deviceRoot = try TestPKI.root("Example Device Root")
let deviceCA = try TestPKI.intermediate("Example Device CA", issuer: deviceRoot)
let device = try TestPKI.leaf("thermostat-42", issuer: deviceCA, usage: .clientAuth, includeSAN: false)
let deviceIdentity = try device.tlsIdentity(chain: [deviceCA.certificate])

let transport = MutualTLSGRPCServerTransport(
    host: "127.0.0.1",
    port: 0,
    server: try MutualTLSServer.makeGRPC(
        identity: try serverChain.leaf.tlsIdentity(chain: [serverChain.intermediate.certificate]),
        clientCertificateAuthorities: [deviceRoot.certificate]
    )
)

func call(port: Int, pin: Pin) async throws -> String {
    let client = try PinnedGRPCClientTransport(
        host: "devices.example",
        port: port,
        evaluator: SecurityPolicy(pinningMode: .publicKey, pins: [pin]),
        settings: TrustSettings(anchors: [serverChain.root.certificate], anchorsOnly: true),
        identity: deviceIdentity,
        address: try SocketAddress(ipAddress: "127.0.0.1", port: port)
    )
    return try await withGRPCClient(transport: client) { grpc in
        try await grpc.unary(
            request: ClientRequest(message: ""), descriptor: Devices.whoami, serializer: Text(), deserializer: Text(), options: .defaults
        ) { response in try response.message }
    }
}

let failed = try await withGRPCServer(transport: transport, services: [Devices()]) { server in
    defer { server.beginGracefulShutdown() }
    guard let port = try await transport.listeningAddress.ipv4?.port else { return true }
    print("serving devices.Devices on 127.0.0.1:\(port) (mutual TLS)")
    let answer = try await call(port: port, pin: Pin(spkiOf: serverChain.leaf.certificate))
    print("pinned to the server's key: \(answer)")
    do {
        _ = try await call(port: port, pin: Pin(spkiOf: deviceRoot.certificate))
        print("pinned to another key: answered (wrong)")
        return true
    } catch let error as RPCError {
        print("pinned to another key: \(error.code): \(error.message)")
    }
    return answer != "hello CN=thermostat-42"
}
exit(failed ? 1 : 0)
