import Foundation

/// What `Tests/servers/moto_sigv4.py` set up: an IAM user's key and a session of an assumed role.
public struct MotoAccount: Decodable, Sendable {
    public struct Session: Decodable, Sendable {
        public var access_key_id: String
        public var secret_access_key: String
        public var session_token: String
    }
    public var endpoint: String
    public var region: String
    public var access_key_id: String
    public var secret_access_key: String
    public var role_arn: String
    public var session: Session
}

/// A moto_server with IAM authentication on: every request after its set-up is checked with
/// botocore's SigV4 (Tests/servers/moto_sigv4.py). It takes seconds to start, so each
/// test module keeps one for the whole process.
public final class MotoSigV4Server: Sendable {
    public let server: PythonServer
    public let folder: TempDir
    public let account: MotoAccount

    public init(prefix: String) throws {
        folder = try TempDir(prefix: prefix)
        let infoFile = folder.file("account.json")
        server = try PythonServer("moto_sigv4", arguments: ["--info-file", infoFile], startupTimeout: 120)
        account = try JSONDecoder().decode(MotoAccount.self, from: Data(contentsOf: URL(fileURLWithPath: infoFile)))
    }
}

/// An object key as a client puts it in a path: every byte but RFC 3986's unreserved ones and `/`
/// percent-encoded (what the AWS SDKs send).
public func awsPathEncoded(_ key: String) -> String {
    var out = ""
    for byte in key.utf8 {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
            out.append(Character(Unicode.Scalar(byte)))
        default:
            out += String(format: "%%%02X", byte)
        }
    }
    return out
}
