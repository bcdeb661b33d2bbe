import Config
import Foundation
import IdentityHTTP
import Logs
import TestSupport
import Testing

@testable import Credentials

/// What `Tests/servers/aws_metadata.py` was asked.
private struct EndpointCalls: Decodable {
    struct STSCall: Decodable {
        var token: String
        var role: String
        var session: String
    }
    var sts: [STSCall]
    var container: [String?]
    var imds_tokens: Int
    var imds_gets: Int
    var imds_refused: Int
}

private func calls(_ server: PythonServer) throws -> EndpointCalls {
    let answer = try BlockingHTTPClient.perform(HTTPCallRequest(url: server.baseURL + "/calls", method: "GET"))
    return try JSONDecoder().decode(EndpointCalls.self, from: Data(answer.body))
}

private func configuration(_ source: AWSConfiguration.Source, _ change: (inout AWSConfiguration) -> Void = { _ in }) -> AWSConfiguration {
    var c = AWSConfiguration(region: "eu-west-1", service: "execute-api")
    c.source = source
    change(&c)
    return c
}

/// `source: environment` with the key `AKIAFILE1` and the secret `file/secret` in files of `folder`.
private func keysFromFiles(in folder: TempDir, _ change: (inout AWSConfiguration) -> Void = { _ in }) throws -> AWSConfiguration {
    let keyFile = try folder.write("key", "AKIAFILE1\n")
    let secretFile = try folder.write("secret", "file/secret\n")
    return configuration(.environment) {
        $0.accessKeyID = .file(keyFile)
        $0.secretAccessKey = .file(secretFile)
        change(&$0)
    }
}

@Suite("AWS credential sources", .serialized)
struct AWSCredentialSourceTests {
    // MARK: environment

    @Test func environmentVariables() throws {
        let env = ["AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "env/secret", "AWS_SESSION_TOKEN": "env-token"]
        let credentials = try AWSEnvironmentCredentials(configuration(.environment), environment: env).fetch()
        #expect(credentials == AWSCredentials(accessKeyID: "AKIAENV", secretAccessKey: "env/secret", sessionToken: "env-token"))
        let longTerm = try AWSEnvironmentCredentials(configuration(.environment), environment: ["AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "S"]).fetch()
        #expect(longTerm.sessionToken == nil && longTerm.expiration == nil)
        #expect(throws: AWSCredentialError.self) { try AWSEnvironmentCredentials(configuration(.environment), environment: ["AWS_ACCESS_KEY_ID": "A"]).fetch() }
    }

    @Test func environmentFilesAreReadAtEachFetch() throws {
        let folder = try TempDir(prefix: "aws-env")
        let source = AWSEnvironmentCredentials(
            try keysFromFiles(in: folder) { $0.sessionToken = .env("MY_TOKEN") }, environment: ["MY_TOKEN": "tok", "AWS_ACCESS_KEY_ID": "ignored"])
        #expect(try source.fetch() == AWSCredentials(accessKeyID: "AKIAFILE1", secretAccessKey: "file/secret", sessionToken: "tok"))
        _ = try folder.write("key", "AKIAFILE2")
        #expect(try source.fetch().accessKeyID == "AKIAFILE2")
    }

    // MARK: web_identity

    @Test func webIdentityReadsTheTokenFileForEveryCall() throws {
        let server = try PythonServer("aws_metadata")
        let folder = try TempDir(prefix: "aws-wi")
        let tokenFile = try folder.write("token", "first.jwt\n")
        let source = try AWSWebIdentityCredentials(
            configuration(.webIdentity) {
                $0.stsEndpoint = server.baseURL + "/sts/"
                $0.roleSessionName = "tests"
            }, environment: ["AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile, "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/reader"])
        let before = Date().timeIntervalSince1970
        let first = try source.fetch()
        #expect(first.accessKeyID == "ASIAWEB1")
        #expect(first.secretAccessKey == "web/secret+1")
        #expect(first.sessionToken == "web-session-1")
        let expiration = try #require(first.expiration)
        #expect(expiration > before + 3500 && expiration < before + 3700)

        _ = try folder.write("token", "second.jwt")
        #expect(try source.fetch().accessKeyID == "ASIAWEB2")
        let seen = try calls(server).sts
        #expect(seen.map(\.token) == ["first.jwt", "second.jwt"])
        #expect(seen.allSatisfy { $0.role == "arn:aws:iam::123456789012:role/reader" && $0.session == "tests" })
    }

    @Test func webIdentityRefusalNamesSTSCode() throws {
        let server = try PythonServer("aws_metadata")
        let folder = try TempDir(prefix: "aws-wi")
        let source = try AWSWebIdentityCredentials(
            configuration(.webIdentity) {
                $0.stsEndpoint = server.baseURL + "/sts/"
                $0.webIdentityTokenFile = try? folder.write("token", "refuse-me")
                $0.roleARN = "arn:aws:iam::123456789012:role/reader"
            }, environment: [:])
        let error = try #require(throws: AWSCredentialError.self) { try source.fetch() }
        #expect(error.description.contains("HTTP 400 InvalidIdentityToken: Couldn't retrieve verification key"), "\(error)")
        #expect(!error.description.contains("refuse-me"))
        #expect(throws: AWSCredentialError.self) { try AWSWebIdentityCredentials(configuration(.webIdentity), environment: [:]) }
    }

    /// moto's STS (auth off: it cannot take this unsigned call with auth on) as a second, real answerer.
    @Test func webIdentityAgainstMotoSTS() throws {
        let folder = try TempDir(prefix: "aws-wi-moto")
        let info = folder.file("moto.json")
        let moto = try PythonServer("moto_sigv4", arguments: ["--info-file", info, "--no-auth"], startupTimeout: 120)
        defer { moto.stop() }
        let endpoint = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: info))) as? [String: String])["endpoint"]
        let source = try AWSWebIdentityCredentials(
            configuration(.webIdentity) {
                $0.stsEndpoint = endpoint
                $0.webIdentityTokenFile = try? folder.write("token", "any.jwt.token")
                $0.roleARN = "arn:aws:iam::123456789012:role/reader"
            }, environment: [:])
        let credentials = try source.fetch()
        #expect(credentials.accessKeyID.hasPrefix("ASIA"))
        #expect(!(credentials.sessionToken ?? "").isEmpty)
        #expect(credentials.expiration != nil)
    }

    // MARK: container

    @Test func containerEndpointWithRotatingTokenFile() throws {
        let server = try PythonServer("aws_metadata", arguments: ["--container-token", "pod-identity-1"])
        let folder = try TempDir(prefix: "aws-container")
        let tokenFile = try folder.write("token", "pod-identity-1\n")
        let source = try AWSContainerCredentials(
            configuration(.container),
            environment: ["AWS_CONTAINER_CREDENTIALS_FULL_URI": server.baseURL + "/container/creds", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokenFile])
        let credentials = try source.fetch()
        #expect(credentials.accessKeyID == "ASIACONTAINER")
        #expect(credentials.secretAccessKey == "container/secret")
        #expect(credentials.sessionToken == "container-session")
        #expect(credentials.expiration != nil)

        _ = try folder.write("token", "rotated")
        let error = try #require(throws: AWSCredentialError.self) { try source.fetch() }
        #expect(error.description.contains("HTTP 401"), "\(error)")
        #expect(try calls(server).container == ["pod-identity-1", "rotated"])
    }

    /// A resolver of fixed answers: `evil.example` and every name under it is another machine.
    private func resolve(_ host: String) -> [[UInt8]] {
        switch host {
        case "127.0.0.1": return [[127, 0, 0, 1]]
        case "127.9.8.7": return [[127, 9, 8, 7]]
        case "localhost": return [[127, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]]
        case "::1": return [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]]
        case "half-loopback.example": return [[127, 0, 0, 1], [203, 0, 113, 9]]
        case "10.0.0.5": return [[10, 0, 0, 5]]
        case "::ffff:127.0.0.1": return [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1]]
        case _ where host.hasSuffix("evil.example"): return [[203, 0, 113, 7]]
        default: return []
        }
    }

    @Test("AWS_CONTAINER_CREDENTIALS_FULL_URI: plain http only to loopback or a container agent, read as a URL")
    func containerFullURIRules() {
        for allowed in [
            "https://creds.example/x", "https://user@anything.example/x", "http://127.0.0.1:51679/c", "HTTP://127.9.8.7/c", "http://localhost/c",
            "http://[::1]:80/c", "http://169.254.170.23/v1/credentials", "http://[fd00:ec2::23]/v1/credentials", "http://169.254.170.2/v2/credentials/id",
            "http://127.0.0.1?x=@evil.example", "http://127.0.0.1#@evil.example",
        ] {
            #expect(ContainerFullURI.problem(allowed, resolve: resolve) == nil, "\(allowed)")
        }
        // What a prefix test took: each sends the token to evil.example in clear.
        let refused: [(uri: String, reason: String)] = [
            ("http://127.0.0.1@evil.example/creds", "user information"),
            ("http://localhost:x@evil.example/creds", "user information"),
            ("http://169.254.170.2@evil.example/", "user information"),
            ("http://@evil.example/", "user information"),
            ("http://127.0.0.1.evil.example/creds", "not the machine itself"),
            ("http://169.254.170.2.evil.example/", "not the machine itself"),
            ("http://localhost.evil.example/", "not the machine itself"),
            ("http://127.0.0.1\\@evil.example/", "user information"),
            ("http://127.0.0.1\\.evil.example/", "cannot hold"),
            ("http://127.0.0.1%2eevil.example/", "cannot hold"),
            ("http://half-loopback.example/", "not the machine itself"),
            ("http://10.0.0.5/creds", "not the machine itself"),
            ("http://[::ffff:127.0.0.1]/", "not the machine itself"),
            ("http://[fd00:ec2::23%25eth0]/", "no IPv6 address"),
            ("http://[::1/", "closing ]"),
            ("http://127.0.0.1:80x/", "port"),
            ("http:///creds", "no host"),
            ("http://unknown.invalid/", "resolves to no address"),
            ("ftp://127.0.0.1/", "https://"),
        ]
        for (uri, reason) in refused {
            let problem = ContainerFullURI.problem(uri, resolve: resolve)
            #expect(problem?.contains(reason) == true, "\(uri): \(problem ?? "accepted")")
        }
    }

    @Test func containerSourceRefusesAnotherHost() throws {
        let error = try #require(throws: AWSCredentialError.self) {
            try AWSContainerCredentials(configuration(.container), environment: ["AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://localhost:x@10.0.0.5/creds"])
        }
        #expect(error.description.contains("AWS_CONTAINER_CREDENTIALS_FULL_URI has user information"), "\(error)")
        // The URI's user information may be a password: it is not repeated.
        #expect(!error.description.contains("localhost:x"))
        #expect(throws: AWSCredentialError.self) {
            try AWSContainerCredentials(configuration(.container), environment: ["AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://10.0.0.5/creds"])
        }
        let loopback = try AWSContainerCredentials(configuration(.container), environment: ["AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://localhost:8/c"])
        #expect(loopback.url == "http://localhost:8/c")
        let relative = try? AWSContainerCredentials(configuration(.container), environment: ["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/abc"])
        #expect(relative?.url == "http://169.254.170.2/v2/credentials/abc")
    }

    // MARK: instance_metadata

    @Test func imdsV2TokenThenRoleThenCredentials() throws {
        let server = try PythonServer("aws_metadata")
        let source = AWSInstanceMetadataCredentials(configuration(.instanceMetadata) { $0.imdsEndpoint = server.baseURL + "/" })
        let credentials = try source.fetch()
        #expect(
            credentials
                == AWSCredentials(accessKeyID: "ASIAIMDS", secretAccessKey: "imds/secret", sessionToken: "imds-session", expiration: credentials.expiration))
        #expect(credentials.expiration != nil)
        let seen = try calls(server)
        #expect(seen.imds_tokens == 1)
        #expect(seen.imds_gets == 2)
        #expect(seen.imds_refused == 0)
    }

    @Test func containerEndpointJSONRoundTrips() throws {
        let temporary = AWSCredentials(accessKeyID: "ASIA1", secretAccessKey: "s/\"x", sessionToken: "t+1", expiration: 1_764_331_200)
        #expect(
            temporary.containerEndpointJSON
                == #"{"AccessKeyId":"ASIA1","SecretAccessKey":"s/\"x","Token":"t+1","Expiration":"2025-11-28T12:00:00Z"}"#)
        #expect(try AWSCredentialsJSON.parse(Array(temporary.containerEndpointJSON.utf8), source: "t") == temporary)
        #expect(AWSCredentials(accessKeyID: "AKIA1", secretAccessKey: "s").containerEndpointJSON == #"{"AccessKeyId":"AKIA1","SecretAccessKey":"s"}"#)
    }

    @Test func credentialProcessJSON() {
        let temporary = AWSCredentials(accessKeyID: "ASIA1", secretAccessKey: "s/\"x", sessionToken: "t+1", expiration: 1_764_331_200)
        #expect(
            temporary.credentialProcessJSON
                == #"{"Version":1,"AccessKeyId":"ASIA1","SecretAccessKey":"s/\"x","SessionToken":"t+1","Expiration":"2025-11-28T12:00:00Z"}"#)
        #expect(
            AWSCredentials(accessKeyID: "AKIA1", secretAccessKey: "s").credentialProcessJSON == #"{"Version":1,"AccessKeyId":"AKIA1","SecretAccessKey":"s"}"#)
    }

    @Test("only fetched credentials are kept in the store; keys from the environment or files never are")
    func whichCredentialsAreStored() {
        let keys = ["AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "S"]
        #expect(!configuration(.environment).fetchesCredentials(environment: [:]))
        #expect(!configuration(.default).fetchesCredentials(environment: keys))
        #expect(!configuration(.default) { $0.accessKeyID = .file("/k") }.fetchesCredentials(environment: [:]))
        #expect(configuration(.environment) { $0.roleARN = "arn:aws:iam::1:role/r" }.fetchesCredentials(environment: keys))
        #expect(configuration(.default).fetchesCredentials(environment: [:]))
        #expect(configuration(.default).fetchesCredentials(environment: ["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/c"]))
        #expect(configuration(.container).fetchesCredentials(environment: keys))
        #expect(configuration(.webIdentity).fetchesCredentials(environment: keys))
        #expect(configuration(.instanceMetadata).fetchesCredentials(environment: keys))
    }

    @Test("keys from files: read at each fetch, and a changed file is an input change")
    func keysTokenSourceWatchesItsFiles() throws {
        let folder = try TempDir(prefix: "aws-keys-source")
        let source = AWSKeysTokenSource(try keysFromFiles(in: folder), environment: [:])
        #expect(source.pollInterval == 1)
        #expect(try source.fetch(current: nil).accessToken == #"{"AccessKeyId":"AKIAFILE1","SecretAccessKey":"file/secret"}"#)
        #expect(!source.inputChanged())
        _ = try folder.write("key", "AKIAFILE22\n")
        #expect(source.inputChanged())
        #expect(!source.inputChanged())
        #expect(try source.fetch(current: nil).accessToken.contains("AKIAFILE22"))
        let variables = AWSKeysTokenSource(configuration(.environment), environment: ["AWS_ACCESS_KEY_ID": "AKIAENV", "AWS_SECRET_ACCESS_KEY": "e"])
        #expect(variables.pollInterval == nil)
        #expect(try variables.fetch(current: nil).expiresAt == nil)
    }

    @Test("fetched secret keys and session tokens never reach a log line")
    func fetchedSecretsAreRedacted() throws {
        let secret = "wJalrXUtnFEMI-\(UUID().uuidString)"
        let session = "IQoJb3JpZ2luX2VjE-\(UUID().uuidString)"
        let source = try makeAWSCredentialSource(
            configuration(.environment), environment: ["AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": session])
        #expect(SecretRegistry.shared.redact("k=\(secret) t=\(session)") == "k=\(secret) t=\(session)")
        _ = try source.fetch()
        #expect(SecretRegistry.shared.redact("k=\(secret) t=\(session)") == "k=[REDACTED] t=[REDACTED]")
    }

    // MARK: default

    @Test func defaultChainOrder() throws {
        let aws = configuration(.default)
        #expect(
            try makeAWSCredentialSource(
                aws, environment: ["AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "S", "AWS_WEB_IDENTITY_TOKEN_FILE": "/t", "AWS_ROLE_ARN": "r"]
            ).name == "environment")
        #expect(
            try makeAWSCredentialSource(
                aws, environment: ["AWS_WEB_IDENTITY_TOKEN_FILE": "/t", "AWS_ROLE_ARN": "r", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/c"]
            ).name == "web_identity")
        #expect(try makeAWSCredentialSource(aws, environment: ["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/c"]).name == "container")
        #expect(try makeAWSCredentialSource(aws, environment: [:]).name == "instance_metadata")
        #expect(try makeAWSCredentialSource(configuration(.container) { $0.containerEndpoint = "http://127.0.0.1:1/c" }, environment: [:]).name == "container")
    }
}
