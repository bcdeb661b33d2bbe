import Foundation
import Synchronization
import TestSupport
import Testing

/// One moto_server for the test process, with IAM authentication on: every request after its set-up
/// is checked with botocore's SigV4.
private enum Moto {
    private static let started = Result { try MotoSigV4Server(prefix: "tokenproxy-moto-e2e") }
    static func shared() throws -> MotoSigV4Server { try started.get() }
}

extension MotoSigV4Server {
    /// The assumed role's session in the `environment` source's variables.
    var sessionEnvironment: [String: String] {
        [
            "AWS_ACCESS_KEY_ID": account.session.access_key_id, "AWS_SECRET_ACCESS_KEY": account.session.secret_access_key,
            "AWS_SESSION_TOKEN": account.session.session_token,
        ]
    }
    var secrets: [String] { [account.secret_access_key, account.session.secret_access_key, account.session.session_token] }
}

/// `type: aws` end to end (CONTRACT.md "AWS credentials and SigV4 signing"): the real binary signs
/// requests from clients that send none (curl, the AWS CLI with --no-sign-request, boto3 unsigned),
/// and moto_server checks each signature as AWS would.
@Suite("AWS SigV4 signing", .tags(.endToEnd), .timeLimit(.minutes(35)))
struct AWSSigningTests {
    func config(upstream: String, service: String, source: String = "source: environment", extra: String = "") -> String {
        """
        listen: 127.0.0.1:0
        upstream: \(upstream)
        workers: 1
        drain_timeout: 1s
        admin:
          listen: 127.0.0.1:0
        credentials:
          type: aws
          region: us-east-1
          service: \(service)
          \(source)
        \(extra)
        log:
          level: debug
        """
    }

    /// A unique bucket name per test (moto is shared).
    func bucket(_ name: String) -> String { "tp-\(name)-\(UInt32.random(in: 0...UInt32.max))" }

    func expectNoSecret(_ proxy: ProxyProcess, _ secrets: [String]) {
        let log = proxy.stderr
        #expect(!log.isEmpty)
        for secret in secrets { #expect(!log.contains(secret), "a secret reached the log") }
        #expect(!log.contains("Signature="))
    }

    @Test("curl: S3 bucket, objects with spaces in their keys, a listing with a query, a chunked upload")
    func s3WithCurl() throws {
        let moto = try Moto.shared()
        let proxy = try ProxyProcess(config: config(upstream: moto.account.endpoint, service: "s3"), environment: moto.sessionEnvironment)
        let bucket = bucket("curl")
        let created = try curl(["-X", "PUT", proxy.baseURL + "/\(bucket)"])
        #expect(created.status == 200, "\(created.bodyString)")
        let folder = try TempDir(prefix: "aws-body")
        // A Content-Type of its own: with curl's form type moto reads the body as a form and stores nothing.
        let binary = ["-H", "Content-Type: application/octet-stream"]
        let put = try curl(
            ["-X", "PUT"] + binary + ["--data-binary", "@" + (try folder.write("a", "first object")), proxy.baseURL + "/\(bucket)/key%20with%20spaces.txt"])
        #expect(put.status == 200, "\(put.bodyString)")
        let got = try curl([proxy.baseURL + "/\(bucket)/key%20with%20spaces.txt"])
        #expect(got.status == 200)
        #expect(got.bodyString == "first object")
        // Chunked from the client: held whole (within forward.retry_body_limit), hashed, sent with Content-Length.
        let chunked = try curl(
            binary + [
                "-X", "PUT", "-H", "Transfer-Encoding: chunked", "--data-binary", "@" + (try folder.write("b", String(repeating: "chunk ", count: 5000))),
                proxy.baseURL + "/\(bucket)/dir/chunked",
            ])
        #expect(chunked.status == 200, "\(chunked.bodyString)")
        let back = try curl([proxy.baseURL + "/\(bucket)/dir/chunked"])
        #expect(back.body.count == 30_000)
        #expect(back.bodyString == String(repeating: "chunk ", count: 5000), "the body came back changed")
        let listing = try curl([proxy.baseURL + "/\(bucket)?list-type=2&prefix=dir&max-keys=10"])
        #expect(listing.status == 200, "\(listing.bodyString)")
        #expect(listing.bodyString.contains("<Key>dir/chunked</Key>"))
        #expect(!listing.bodyString.contains("key with spaces"))
        // What moto refuses unsigned: the proxy's signature is what lets these through.
        let direct = try curl([moto.account.endpoint + "/\(bucket)/dir/chunked"])
        #expect(direct.status == 403)
        expectNoSecret(proxy, moto.secrets)
    }

    @Test("the AWS CLI and boto3 with no signature of their own, through the proxy")
    func awsCLIAndBoto3() throws {
        let moto = try Moto.shared()
        let proxy = try ProxyProcess(config: config(upstream: moto.account.endpoint, service: "s3"), environment: moto.sessionEnvironment)
        let bucket = bucket("cli")
        let folder = try TempDir(prefix: "aws-cli")
        let file = try folder.write("upload.txt", String(repeating: "cli bytes\n", count: 300))
        // The CLI must not find keys of its own: the proxy's are the only ones.
        let environment = childEnvironment([
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
            "AWS_CONFIG_FILE": folder.file("none"), "AWS_SHARED_CREDENTIALS_FILE": folder.file("none"),
        ])
        func aws(_ arguments: [String]) throws -> CommandResult {
            try runCommand(
                "aws", arguments: ["--no-sign-request", "--endpoint-url", proxy.baseURL] + arguments, environment: environment, timeout: 120)
        }
        let made = try aws(["s3", "mb", "s3://\(bucket)"])
        #expect(made.status == 0, "\(made.output)")
        let copied = try aws(["s3", "cp", file, "s3://\(bucket)/from cli/upload.txt"])
        #expect(copied.status == 0, "\(copied.output)")
        // `s3 ls` sends `delimiter=%2F`, which moto cannot verify (TEST-SERVERS.md): the API call lists plainly.
        let listed = try aws(["s3api", "list-objects-v2", "--bucket", bucket, "--query", "Contents[].Key"])
        #expect(listed.status == 0, "\(listed.output)")
        #expect(listed.stdout.contains("\"from cli/upload.txt\""))
        let read = try aws(["s3", "cp", "s3://\(bucket)/from cli/upload.txt", "-"])
        #expect(read.stdout == String(repeating: "cli bytes\n", count: 300))

        let script = """
            import boto3, sys
            from botocore import UNSIGNED
            from botocore.config import Config
            s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=sys.argv[1], config=Config(signature_version=UNSIGNED))
            s3.put_object(Bucket=sys.argv[2], Key="boto3 key", Body=b"from boto3")
            print(s3.get_object(Bucket=sys.argv[2], Key="boto3 key")["Body"].read().decode())
            print(",".join(o["Key"] for o in s3.list_objects_v2(Bucket=sys.argv[2], Prefix="boto3")["Contents"]))
            """
        let boto = try runCommand(
            ProcessInfo.processInfo.environment["PYTHON"] ?? "python3", arguments: ["-c", script, proxy.baseURL, bucket], environment: environment,
            timeout: 120)
        #expect(boto.status == 0, "\(boto.output)")
        #expect(boto.stdout == "from boto3\nboto3 key\n")
        expectNoSecret(proxy, moto.secrets)
    }

    @Test("SQS's JSON protocol: moto hashes the body itself, so the payload hash is checked")
    func sqsJSON() throws {
        let moto = try Moto.shared()
        let proxy = try ProxyProcess(config: config(upstream: moto.account.endpoint, service: "sqs"), environment: moto.sessionEnvironment)
        let queue = "tp-queue-\(UInt32.random(in: 0...UInt32.max))"
        func call(_ action: String, _ body: String, chunked: Bool = false) throws -> CurlResult {
            var arguments = [
                "-X", "POST", "-H", "Content-Type: application/x-amz-json-1.0", "-H", "X-Amz-Target: AmazonSQS.\(action)", "--data-binary", body,
            ]
            if chunked { arguments += ["-H", "Transfer-Encoding: chunked"] }
            return try curl(arguments + [proxy.baseURL + "/"])
        }
        let created = try call("CreateQueue", "{\"QueueName\":\"\(queue)\"}")
        #expect(created.status == 200, "\(created.bodyString)")
        let url = try #require(created.json?["QueueUrl"] as? String)
        let sent = try call("SendMessage", "{\"QueueUrl\":\"\(url)\",\"MessageBody\":\"hello through the proxy\"}", chunked: true)
        #expect(sent.status == 200, "\(sent.bodyString)")
        let received = try call("ReceiveMessage", "{\"QueueUrl\":\"\(url)\",\"MaxNumberOfMessages\":1}")
        #expect(received.status == 200)
        #expect(received.bodyString.contains("hello through the proxy"))
        expectNoSecret(proxy, moto.secrets)
    }

    @Test("a body over forward.retry_body_limit: UNSIGNED-PAYLOAD and streamed for s3, 413 for another service")
    func bodiesOverTheLimit() throws {
        let moto = try Moto.shared()
        let limits = "forward:\n  retry_body_limit: 1KiB"
        let s3 = try ProxyProcess(
            config: config(upstream: moto.account.endpoint, service: "s3", extra: limits), environment: moto.sessionEnvironment)
        let bucket = bucket("big")
        #expect(try curl(["-X", "PUT", s3.baseURL + "/\(bucket)"]).status == 200)
        let folder = try TempDir(prefix: "aws-big")
        let big = try folder.write("big", String(repeating: "0123456789", count: 1000))
        let put = try curl(["-X", "PUT", "-H", "Content-Type: application/octet-stream", "--data-binary", "@" + big, s3.baseURL + "/\(bucket)/big"])
        #expect(put.status == 200, "\(put.bodyString)")
        #expect(try curl([s3.baseURL + "/\(bucket)/big"]).body.count == 10_000)
        let sqs = try ProxyProcess(
            config: config(upstream: moto.account.endpoint, service: "sqs", extra: limits), environment: moto.sessionEnvironment)
        let refused = try curl([
            "-X", "POST", "-H", "Content-Type: application/x-amz-json-1.0", "-H", "X-Amz-Target: AmazonSQS.ListQueues",
            "--data-binary", "@" + big, sqs.baseURL + "/",
        ])
        #expect(refused.status == 413)
        #expect(refused.json?["error"] as? String == "body_too_large")
    }

    @Test("100 MiB with payload: unsigned streams to moto S3 (UNSIGNED-PAYLOAD) and the proxy's memory does not grow with it")
    func largeUnsignedUpload() throws {
        let moto = try Moto.shared()
        let proxy = try ProxyProcess(
            config: config(upstream: moto.account.endpoint, service: "s3", source: "source: environment\n  payload: unsigned"),
            environment: moto.sessionEnvironment)
        let bucket = bucket("large")
        #expect(try curl(["-X", "PUT", proxy.baseURL + "/\(bucket)"]).status == 200)
        let folder = try TempDir(prefix: "aws-large")
        let size = 100 * 1024 * 1024
        let file = folder.file("large")
        #expect(FileManager.default.createFile(atPath: file, contents: Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 13) })))
        let small = try curl(
            ["-X", "PUT", "-H", "Content-Type: application/octet-stream", "--data-binary", "warm", proxy.baseURL + "/\(bucket)/warm"])
        #expect(small.status == 200)
        let before = try MemoryTests.memory(proxy.processIdentifier, "VmHWM")
        let put = try curl(
            ["-X", "PUT", "-H", "Content-Type: application/octet-stream", "-T", file, proxy.baseURL + "/\(bucket)/large"], timeout: 300)
        #expect(put.status == 200, "\(put.bodyString)")
        let after = try MemoryTests.memory(proxy.processIdentifier, "VmHWM")
        #expect(after - before < MemoryTests.limit, "peak RSS grew by \((after - before) >> 20) MiB (from \(before >> 20) MiB)")
        let head = try curl(["-I", proxy.baseURL + "/\(bucket)/large"])
        #expect(head.status == 200)
        #expect(head.headers.first { $0.name.lowercased() == "content-length" }?.value == String(size))
    }

    @Test("keys and query values moto cannot verify, checked by botocore's signers (sigv4_verifier.py)", arguments: ["s3", "execute-api"])
    func reservedCharactersWithBotocore(service: String) throws {
        let verifier = try PythonServer("sigv4_verifier", arguments: ["--key", "AKIDVERIFY:verify/secret+key:verify-session"])
        let proxy = try ProxyProcess(
            config: config(upstream: verifier.baseURL + "/base", service: service),
            environment: ["AWS_ACCESS_KEY_ID": "AKIDVERIFY", "AWS_SECRET_ACCESS_KEY": "verify/secret+key", "AWS_SESSION_TOKEN": "verify-session"])
        for key in ["café ü.txt", "a+b=c&d", "(x)!*'", "%41 already", "deep/er/~tilde"] {
            let path = "/bucket/" + awsPathEncoded(key)
            let put = try curl(["-X", "PUT", "-H", "Content-Type: text/plain", "--data-binary", "body of \(key)", proxy.baseURL + path])
            #expect(put.status == 200, "\(key): \(put.bodyString)")
            let got = try curl([proxy.baseURL + path])
            #expect(got.status == 200, "\(key): \(got.bodyString)")
            #expect(got.bodyString == "body of \(key)")
        }
        // Encoded query values, unsorted: verified (an unknown object is 404; a bad signature would be 403).
        let listing = try curl([proxy.baseURL + "/bucket?prefix=a%20b%2F&delimiter=%2F&list-type=2&a=%E2%9C%93"])
        #expect(listing.status == 404, "\(listing.bodyString)")
        expectNoSecret(proxy, ["verify/secret+key", "verify-session"])
    }

    /// Issue 39, points 2 and 21: a key spelled with escapes of unreserved characters (`%7E`), with
    /// reserved ones left raw (`(`), or with lower-case escapes (`%2b`) goes upstream in the one form
    /// an SDK sends, and is signed in that form.
    @Test(
        "every spelling of a key goes and is signed in the SDKs' form: verifiers reading the path as sent and decoding it agree",
        arguments: [("s3", false), ("s3", true), ("execute-api", false), ("execute-api", true)])
    func everySpellingOfAKey(service: String, decodePath: Bool) throws {
        let verifier = try PythonServer(
            "sigv4_verifier", arguments: ["--key", "AKIDVERIFY:verify/secret+key:verify-session"] + (decodePath ? ["--decode-path"] : []))
        let proxy = try ProxyProcess(
            config: config(upstream: verifier.baseURL + "/base", service: service),
            environment: ["AWS_ACCESS_KEY_ID": "AKIDVERIFY", "AWS_SECRET_ACCESS_KEY": "verify/secret+key", "AWS_SESSION_TOKEN": "verify-session"])
        // One key (space, +, ~, ü, parentheses), four spellings.
        let spellings = [
            "/bucket/dir/a%20b%2Bc~%C3%BC%281%29.txt", "/bucket/dir/a%20b%2Bc~%C3%BC(1).txt", "/bucket/dir/a%20b%2Bc%7E%C3%BC%281%29.txt",
            "/bucket/dir/a%20b%2bc%7e%c3%bc%281%29.txt",
        ]
        let put = try curl(["--path-as-is", "-X", "PUT", "-H", "Content-Type: text/plain", "--data-binary", "one key", proxy.baseURL + spellings[1]])
        #expect(put.status == 200, "\(put.bodyString)")
        for spelling in spellings {
            let got = try curl(["--path-as-is", proxy.baseURL + spelling])
            #expect(got.status == 200, "\(spelling): \(got.bodyString)")
            #expect(got.bodyString == "one key", "\(spelling)")
        }
    }

    @Test("moto (botocore decodes the path and encodes it again): a key spelled with %7E or %7e reads back")
    func motoReadsEverySpellingOfAKey() throws {
        let moto = try Moto.shared()
        let proxy = try ProxyProcess(config: config(upstream: moto.account.endpoint, service: "s3"), environment: moto.sessionEnvironment)
        let bucket = bucket("spelling")
        #expect(try curl(["-X", "PUT", proxy.baseURL + "/\(bucket)"]).status == 200)
        // moto's own re-quoting (werkzeug's) leaves `+`, `(` and UTF-8 unlike any SDK: only space and `~` verify there.
        let put = try curl(
            [
                "--path-as-is", "-X", "PUT", "-H", "Content-Type: application/octet-stream", "--data-binary", "tilde",
                proxy.baseURL + "/\(bucket)/dir/a%20b~c.txt",
            ])
        #expect(put.status == 200, "\(put.bodyString)")
        for spelling in ["a%20b~c.txt", "a%20b%7Ec.txt", "a%20b%7ec.txt", "a%20%62%7E%63.txt"] {
            let got = try curl(["--path-as-is", proxy.baseURL + "/\(bucket)/dir/" + spelling])
            #expect(got.status == 200, "\(spelling): \(got.bodyString)")
            #expect(got.bodyString == "tilde", "\(spelling)")
        }
        let listing = try curl([proxy.baseURL + "/\(bucket)?list-type=2"])
        #expect(listing.bodyString.contains("<Key>dir/a b~c.txt</Key>"), "\(listing.bodyString)")
        expectNoSecret(proxy, moto.secrets)
    }

    /// Issue 39, point 9: virtual-hosted S3 (`BUCKET.s3.REGION.amazonaws.com`) through the forward
    /// proxy, with a route `*.s3.eu-west-1.amazonaws.com` whose upstream is the request's own host.
    /// Those names resolve nowhere here: tokenproxy reaches them through `https_proxy`, a relay that
    /// ends TLS for them (a test CA's `*.s3.eu-west-1.amazonaws.com`) and sends every tunnel on to
    /// moto, which reads the bucket from the Host and checks the signature.
    @Test("virtual-hosted S3 through the forward proxy: each bucket's host goes upstream and is signed (curl, boto3, the AWS CLI)")
    func virtualHostedBucketsThroughTheForwardProxy() throws {
        let moto = try Moto.shared()
        let ca = try TestCA()
        let upstreamCertificate = try ca.issue(["*.s3.eu-west-1.amazonaws.com"])
        let relay = try PythonServer(
            "connect_relay",
            arguments: [
                "--to", "127.0.0.1:\(URL(string: moto.account.endpoint)!.port!)", "--tls-cert", upstreamCertificate.certificate, "--tls-key",
                upstreamCertificate.key,
            ])
        let f = try ForwardProxyFixture(
            routes: [
                .init(
                    name: "s3", host: "\"*.s3.eu-west-1.amazonaws.com\"", upstream: "\"https://{host}\"",
                    extra: "    upstream_tls: {ca_file: \(ca.certificate)}", credentials: "{type: aws, region: eu-west-1, service: s3, source: environment}")
            ],
            environment: moto.sessionEnvironment.merging(["https_proxy": relay.baseURL, "no_proxy": "", "NO_PROXY": ""]) { $1 })
        let first = bucket("vhost")
        let second = bucket("vhost")
        func url(_ bucket: String, _ path: String) -> String { "https://\(bucket).s3.eu-west-1.amazonaws.com\(path)" }
        let location =
            "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LocationConstraint>eu-west-1</LocationConstraint></CreateBucketConfiguration>"
        for name in [first, second] {
            let made = try f.curl(["-X", "PUT", "-H", "Content-Type: application/xml", "--data-binary", location, url(name, "/")], timeout: 60)
            #expect(made.status == 200, "\(name): \(made.bodyString) \(f.proxy.stderr.suffix(2000))")
        }
        let binary = ["-H", "Content-Type: application/octet-stream"]
        #expect(try f.curl(["-X", "PUT"] + binary + ["--data-binary", "in the first", url(first, "/dir/a%20key.txt")], timeout: 60).status == 200)
        #expect(try f.curl(["-X", "PUT"] + binary + ["--data-binary", "in the second", url(second, "/other.txt")], timeout: 60).status == 200)
        let got = try f.curl([url(first, "/dir/a%20key.txt")], timeout: 60)
        #expect(got.status == 200, "\(got.bodyString)")
        #expect(got.bodyString == "in the first")
        // Each bucket's own Host reached moto: each lists its own object only.
        let listed = try f.curl([url(second, "/?list-type=2")], timeout: 60)
        #expect(listed.bodyString.contains("<Key>other.txt</Key>") && !listed.bodyString.contains("a key"), "\(listed.bodyString)")
        // The connections went to the request's own host, never to another.
        let targets = (try JSONSerialization.jsonObject(with: Data(try curl([relay.baseURL + "/targets"]).body))) as? [String] ?? []
        #expect(Set(targets) == ["\(first).s3.eu-west-1.amazonaws.com:443", "\(second).s3.eu-west-1.amazonaws.com:443"], "\(targets)")
        // A Host the "*." name matches by its suffix but that is no host name never chooses where the keys go.
        for host in ["evil.example#.s3.eu-west-1.amazonaws.com", "user@evil.example:443@x.s3.eu-west-1.amazonaws.com"] {
            let refused = try curl(["-H", "Host: \(host)", f.proxyURL + "/"])
            #expect(refused.status == 400, "\(host): \(refused.bodyString)")
        }
        #expect((try JSONSerialization.jsonObject(with: Data(try curl([relay.baseURL + "/targets"]).body))) as? [String] == targets)

        // boto3 and the AWS CLI with their own virtual-host URLs, HTTPS_PROXY and the proxy's CA, no keys.
        let folder = try TempDir(prefix: "aws-vhost")
        let environment = childEnvironment([
            "HTTPS_PROXY": f.proxyURL, "AWS_CA_BUNDLE": f.caFile, "AWS_DEFAULT_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_CONFIG_FILE": folder.file("none"),
            "AWS_SHARED_CREDENTIALS_FILE": folder.file("none"), "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_S3": "",
        ])
        let script = """
            import boto3, sys
            from botocore import UNSIGNED
            from botocore.config import Config
            s3 = boto3.client("s3", region_name="eu-west-1", config=Config(signature_version=UNSIGNED, s3={"addressing_style": "virtual"}))
            s3.put_object(Bucket=sys.argv[1], Key="from boto3", Body=b"boto3 bytes")
            print(s3.get_object(Bucket=sys.argv[1], Key="from boto3")["Body"].read().decode())
            """
        let boto = try runCommand(
            ProcessInfo.processInfo.environment["PYTHON"] ?? "python3", arguments: ["-c", script, first], environment: environment, timeout: 120)
        #expect(boto.status == 0, "\(boto.output)")
        #expect(boto.stdout == "boto3 bytes\n")
        let cli = try runCommand(
            "aws", arguments: ["--no-sign-request", "--region", "eu-west-1", "s3", "cp", "s3://\(first)/from boto3", "-"], environment: environment,
            timeout: 120)
        #expect(cli.status == 0, "\(cli.output)")
        #expect(cli.stdout == "boto3 bytes")
        // Over https both send uploads aws-chunked with a trailing checksum: the object holds the bytes, not the framing.
        let upload = try folder.write("upload.txt", String(repeating: "cli upload\n", count: 500))
        let copied = try runCommand(
            "aws", arguments: ["--no-sign-request", "--region", "eu-west-1", "s3", "cp", upload, "s3://\(first)/from cli.txt"], environment: environment,
            timeout: 120)
        #expect(copied.status == 0, "\(copied.output)")
        let read = try f.curl([url(first, "/from%20cli.txt")], timeout: 60)
        #expect(read.bodyString == String(repeating: "cli upload\n", count: 500), "\(read.bodyString.prefix(300))")
        try f.finish()
        expectNoSecret(f.proxy, moto.secrets)
    }

    @Test(
        "an upstream 403 that says the credentials expired fetches new ones and retries once; any other 403 goes as it came",
        arguments: [("GET", "/xml/object"), ("GET", "/header/object"), ("POST", "/apigw/stage/items"), ("HEAD", "/xml/object")])
    func expiredCredentials(method: String, path: String) throws {
        let folder = try TempDir(prefix: "aws-expired")
        let sequence = try folder.write(
            "sequence.json",
            """
            [{"AccessKeyId": "ASIAOLD", "SecretAccessKey": "old/secret", "Token": "old-session", "lifetime": 3600},
             {"AccessKeyId": "ASIANEW", "SecretAccessKey": "new/secret", "Token": "new-session", "lifetime": 3600}]
            """)
        let metadata = try PythonServer("aws_metadata", arguments: ["--container-token", "pod-token", "--container-sequence", sequence])
        let verifier = try PythonServer("sigv4_verifier", arguments: ["--key", "ASIANEW:new/secret:new-session", "--expired-key", "ASIAOLD"])
        // A margin longer than the credentials' life: a 403 to a HEAD (no body to say why) counts too.
        let proxy = try ProxyProcess(
            config: config(
                upstream: verifier.baseURL, service: "s3",
                source: "source: container\n  container_endpoint: \(metadata.baseURL)/container/creds\n  refresh_margin: 2h"),
            environment: ["AWS_CONTAINER_AUTHORIZATION_TOKEN": "pod-token"])
        func containerCalls() throws -> Int { (try curl([metadata.baseURL + "/calls"]).json?["container"] as? [Any])?.count ?? -1 }
        func signedBy() throws -> [String: Int] { (try curl([verifier.baseURL + "/calls"]).json as? [String: Int]) ?? [:] }
        let answer = try curl(method == "HEAD" ? ["-I", proxy.baseURL + path] : ["-X", method, proxy.baseURL + path])
        // 404: the new key's signature was good and there is no such object.
        #expect(answer.status == 404, "\(answer.bodyString)")
        #expect(try containerCalls() == 2)
        #expect(try signedBy() == ["ASIAOLD": 1, "ASIANEW": 1])
        // AccessDenied is not about the credentials: no fetch, no retry.
        let denied = try curl([proxy.baseURL + "/denied/x"])
        #expect(denied.status == 403)
        #expect(denied.bodyString.contains("AccessDenied"))
        #expect(try containerCalls() == 2)
        #expect(try signedBy()["ASIANEW"] == 2)
    }

    @Test("container credentials at expiry: 50 concurrent requests make one endpoint call and all go with the new key")
    func containerCredentialsAtExpiry() throws {
        let folder = try TempDir(prefix: "aws-container")
        // The first credentials expire soon; the answer with the next ones takes a while, so requests
        // that come after the expiry wait for that one fetch.
        let sequence = try folder.write(
            "sequence.json",
            """
            [{"AccessKeyId": "ASIAFIRST", "SecretAccessKey": "first/secret", "Token": "first-session", "lifetime": 4},
             {"AccessKeyId": "ASIASECOND", "SecretAccessKey": "second/secret", "Token": "second-session", "lifetime": 3600, "delay": 4}]
            """)
        let metadata = try PythonServer("aws_metadata", arguments: ["--container-token", "pod-token", "--container-sequence", sequence])
        // The upstream knows only the second key: a request signed with the first is refused.
        let verifier = try PythonServer("sigv4_verifier", arguments: ["--key", "ASIASECOND:second/secret:second-session"])
        let proxy = try ProxyProcess(
            config: config(
                upstream: verifier.baseURL, service: "execute-api",
                source: "source: container\n  container_endpoint: \(metadata.baseURL)/container/creds\n  refresh_margin: 3s",
                extra: "limits:\n  refresh_wait: 30s"),
            environment: ["AWS_CONTAINER_AUTHORIZATION_TOKEN": "pod-token"])
        func containerCalls() throws -> Int { (try curl([metadata.baseURL + "/calls"]).json?["container"] as? [Any])?.count ?? -1 }
        // The first credentials are fetched at start; wait until they have expired.
        let started = Date()
        while try containerCalls() < 1 && Date().timeIntervalSince(started) < 30 { Thread.sleep(forTimeInterval: 0.1) }
        #expect(try containerCalls() == 1)
        Thread.sleep(forTimeInterval: 4.5)
        let results = Mutex<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 50) { i in
            let status = (try? curl(["-X", "PUT", "--data-binary", "request \(i)", proxy.baseURL + "/stage/items/\(i)"], timeout: 60))?.status ?? 0
            results.withLock { $0.append(status) }
        }
        #expect(results.withLock { $0 } == Array(repeating: 200, count: 50))
        #expect(try containerCalls() == 2)
        let token = try runCommand(
            RepositoryPaths.tokenproxyBinary, arguments: ["token", "--config", proxy.configPath],
            environment: childEnvironment(["AWS_CONTAINER_AUTHORIZATION_TOKEN": "pod-token"]))
        #expect(token.status == 0, "\(token.output)")
        let printed = try JSONSerialization.jsonObject(with: Data(token.stdout.utf8)) as? [String: String]
        #expect(printed?["AccessKeyId"] == "ASIASECOND")
        #expect(printed?["Token"] == "second-session")
        #expect(printed?["Expiration"]?.hasSuffix("Z") == true)
        expectNoSecret(proxy, ["first/secret", "second/secret", "first-session", "second-session", "pod-token"])
    }

    @Test(
        "a plain-http AWS_CONTAINER_CREDENTIALS_FULL_URI with user information is refused at start: the token goes nowhere",
        arguments: ["http://127.0.0.1@", "http://localhost:x@", "http://169.254.170.2@"])
    func containerFullURIWithUserInformation(prefix: String) throws {
        let metadata = try PythonServer("aws_metadata", arguments: ["--container-token", "pod-token-userinfo"])
        let folder = try TempDir(prefix: "aws-full-uri")
        let config = try folder.write(
            "tokenproxy.yaml", config(upstream: metadata.baseURL, service: "execute-api", source: "source: container"))
        // The part after the @ is the metadata server: a prefix test sent the token there.
        let uri = prefix + metadata.baseURL.dropFirst("http://".count) + "/container/creds"
        let environment = childEnvironment(["AWS_CONTAINER_CREDENTIALS_FULL_URI": uri, "AWS_CONTAINER_AUTHORIZATION_TOKEN": "pod-token-userinfo"])
        for command in [["serve", "--config", config], ["token", "--config", config]] {
            let run = try runCommand(RepositoryPaths.tokenproxyBinary, arguments: command, environment: environment, timeout: 60)
            #expect(run.status == 2, "\(command[0]): \(run.output)")
            #expect(run.stderr.contains("AWS_CONTAINER_CREDENTIALS_FULL_URI has user information"), "\(command[0]): \(run.stderr)")
            #expect(!run.output.contains("pod-token-userinfo"))
        }
        let calls = try curl([metadata.baseURL + "/calls"]).json?["container"] as? [Any]
        #expect(calls?.count == 0, "the container endpoint was called")
    }

    /// IAM at moto with the set-up user's key (boto3): `script` sees `iam` and `sys.argv[1:]`, prints its answer.
    func motoIAM(_ moto: MotoSigV4Server, _ script: String, _ arguments: [String]) throws -> String {
        let program = """
            import boto3, json, sys
            iam = boto3.client("iam", region_name="us-east-1", endpoint_url=sys.argv[1],
                aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3])
            sys.argv = sys.argv[:1] + sys.argv[4:]

            """ + script
        let run = try runCommand(
            ProcessInfo.processInfo.environment["PYTHON"] ?? "python3",
            arguments: ["-c", program, moto.account.endpoint, moto.account.access_key_id, moto.account.secret_access_key] + arguments,
            environment: childEnvironment(["AWS_SESSION_TOKEN": ""]), timeout: 120)
        guard run.status == 0 else { throw HarnessError("IAM at moto: \(run.output)") }
        return run.stdout
    }

    /// A new IAM user at moto, allowed everything, and its two access keys ([id, secret] each).
    func motoUserWithTwoKeys(_ moto: MotoSigV4Server) throws -> (user: String, first: [String], second: [String]) {
        let user = "rotating-\(UInt32.random(in: 0...UInt32.max))"
        let made = try motoIAM(
            moto,
            """
            iam.create_user(UserName=sys.argv[1])
            iam.put_user_policy(UserName=sys.argv[1], PolicyName="all", PolicyDocument=json.dumps(
                {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
            keys = [iam.create_access_key(UserName=sys.argv[1])["AccessKey"] for _ in range(2)]
            print(json.dumps([[k["AccessKeyId"], k["SecretAccessKey"]] for k in keys]))
            """, [user])
        let keys = try #require(try JSONSerialization.jsonObject(with: Data(made.utf8)) as? [[String]])
        return (user, keys[0], keys[1])
    }

    @Test("keys from the environment are never stored: a restart with new keys signs with them at once, also over a store an older version wrote")
    func environmentKeysAreNotStored() throws {
        let moto = try Moto.shared()
        // A user of its own with two keys; the first is deleted after the first run (a rotation).
        let (user, old, new) = try motoUserWithTwoKeys(moto)
        func environment(_ key: [String]) -> [String: String] {
            ["AWS_ACCESS_KEY_ID": key[0], "AWS_SECRET_ACCESS_KEY": key[1], "AWS_SESSION_TOKEN": ""]
        }
        let folder = try TempDir(prefix: "aws-rotation")
        let store = folder.file("state/tokens.json")
        let bucket = bucket("rotation")
        let config = config(upstream: moto.account.endpoint, service: "s3")

        let first = try ProxyProcess(config: config, directory: folder, environment: environment(old))
        let created = try curl(["-X", "PUT", first.baseURL + "/\(bucket)"])
        #expect(created.status == 200, "\(created.bodyString)")
        first.terminate()
        _ = try first.waitForExit()
        let written = (try? String(contentsOfFile: store, encoding: .utf8)) ?? ""
        #expect(!written.contains(old[1]), "the secret key was written to the store")

        _ = try motoIAM(moto, "iam.delete_access_key(UserName=sys.argv[1], AccessKeyId=sys.argv[2])", [user, old[0]])
        // What an older version left in the store: the deleted key, with no expiry.
        let oldToken = String(decoding: try JSONSerialization.data(withJSONObject: ["AccessKeyId": old[0], "SecretAccessKey": old[1]]), as: UTF8.self)
        let document: [String: Any] = ["version": 1, "kind": "aws", "access_token": oldToken, "last_refresh_outcome": "success"]
        try FileManager.default.createDirectory(atPath: folder.file("state"), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try folder.write("state/tokens.json", try JSONSerialization.data(withJSONObject: document), mode: 0o600)

        let second = try ProxyProcess(config: config, directory: folder, environment: environment(new))
        let listed = try curl([second.baseURL + "/\(bucket)?list-type=2"])
        #expect(listed.status == 200, "signed with the deleted key? \(listed.bodyString)")
        let stored = (try? String(contentsOfFile: store, encoding: .utf8)) ?? ""
        #expect(!stored.contains(new[1]), "the new secret key was written to the store")
        expectNoSecret(second, [old[1], new[1]])
    }

    @Test("keys from files: rewritten files sign the next requests with the new key, with no restart and nothing stored")
    func keyFilesRotate() throws {
        let moto = try Moto.shared()
        let (user, old, new) = try motoUserWithTwoKeys(moto)
        let folder = try TempDir(prefix: "aws-key-files")
        let keyFile = try folder.write("key-id", old[0] + "\n", mode: 0o600)
        let secretFile = try folder.write("secret-key", old[1] + "\n", mode: 0o600)
        let proxy = try ProxyProcess(
            config: config(
                upstream: moto.account.endpoint, service: "s3",
                source: "source: environment\n  access_key_id_file: \(keyFile)\n  secret_access_key_file: \(secretFile)"),
            directory: folder)
        let bucket = bucket("key-files")
        let created = try curl(["-X", "PUT", proxy.baseURL + "/\(bucket)"])
        #expect(created.status == 200, "\(created.bodyString)")

        _ = try motoIAM(moto, "iam.delete_access_key(UserName=sys.argv[1], AccessKeyId=sys.argv[2])", [user, old[0]])
        _ = try folder.write("secret-key", new[1] + "\n", mode: 0o600)
        _ = try folder.write("key-id", new[0] + "\n", mode: 0o600)
        // The files are looked at once a second: wait (bounded) for a request that the new key signed.
        let deadline = Date().addingTimeInterval(60)
        var listed = try curl([proxy.baseURL + "/\(bucket)?list-type=2"])
        while listed.status != 200, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.2)
            listed = try curl([proxy.baseURL + "/\(bucket)?list-type=2"])
        }
        #expect(listed.status == 200, "still signed with the deleted key? \(listed.bodyString)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("state/tokens.json")), "the keys were written to the store")
        expectNoSecret(proxy, [old[1], new[1]])
    }

    /// botocore reads what `tokenproxy token` printed: `process` runs the `credential_process` of the
    /// profile `tp` in AWS_CONFIG_FILE; `container` serves standard input as the container credentials
    /// endpoint. Prints the keys it got as a JSON list.
    static let botocoreReader = """
        import botocore.credentials, botocore.session, http.server, json, sys, threading
        if sys.argv[1] == "process":
            credentials = botocore.session.Session(profile="tp").get_credentials()
        else:
            body = sys.stdin.buffer.read()
            class Endpoint(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                def log_message(self, *arguments):
                    pass
            server = http.server.HTTPServer(("127.0.0.1", 0), Endpoint)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            uri = "http://127.0.0.1:%d/creds" % server.server_port
            credentials = botocore.credentials.ContainerProvider(environ={"AWS_CONTAINER_CREDENTIALS_FULL_URI": uri}).load()
        frozen = credentials.get_frozen_credentials()
        print(json.dumps([credentials.method, frozen.access_key, frozen.secret_key, frozen.token]))
        """

    @Test("what `tokenproxy token` prints is read by botocore: credential_process for keys of every kind, the container provider for fetched ones")
    func tokenOutputReadByBotocore() throws {
        let metadata = try PythonServer("aws_metadata", arguments: ["--container-token", "pod-token-botocore"])
        let folder = try TempDir(prefix: "aws-token-format")
        // Keys in variables of their own: botocore must find none of its own, only what tokenproxy prints.
        let environmentKeys = "source: environment\n  access_key_id_env: TP_KEY_ID\n  secret_access_key_env: TP_SECRET\n  session_token_env: TP_SESSION"
        let container = "source: container\n  container_endpoint: \(metadata.baseURL)/container/creds"
        let configs = [
            ("session", try folder.write("session.yaml", config(upstream: "http://127.0.0.1:9", service: "s3", source: environmentKeys))),
            ("container", try folder.write("container.yaml", config(upstream: "http://127.0.0.1:9", service: "s3", source: container))),
        ]
        let base = childEnvironment([
            "TP_KEY_ID": "AKIDBOTOCORE", "TP_SECRET": "botocore/secret+key", "TP_SESSION": "botocore-session",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN": "pod-token-botocore", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
            "AWS_SHARED_CREDENTIALS_FILE": folder.file("none"), "AWS_EC2_METADATA_DISABLED": "true",
        ])
        let python = ProcessInfo.processInfo.environment["PYTHON"] ?? "python3"
        func read(_ mode: String, config: String, input: String? = nil, environment: [String: String] = [:]) throws -> [String?] {
            let awsConfig = try folder.write(
                "aws-config-\(UUID().uuidString)",
                "[profile tp]\ncredential_process = \(RepositoryPaths.tokenproxyBinary.path) token --config \(config) --format credential-process\n")
            var env = base.merging(environment) { $1 }
            env["AWS_CONFIG_FILE"] = awsConfig
            let run = try runCommand(python, arguments: ["-c", Self.botocoreReader, mode], environment: env, stdin: input.map { Data($0.utf8) }, timeout: 120)
            #expect(run.status == 0, "\(mode): \(run.output)")
            // null (no session token) is NSNull: nil here.
            return ((try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [Any] ?? []).map { $0 as? String }
        }

        // Temporary keys from the environment, then long-term ones (TP_SESSION empty).
        #expect(try read("process", config: configs[0].1) == ["custom-process", "AKIDBOTOCORE", "botocore/secret+key", "botocore-session"])
        #expect(try read("process", config: configs[0].1, environment: ["TP_SESSION": ""]) == ["custom-process", "AKIDBOTOCORE", "botocore/secret+key", nil])
        let fetched = ["ASIACONTAINER", "container/secret", "container-session"]
        #expect(try read("process", config: configs[1].1) == ["custom-process"] + fetched)

        // The container endpoint's JSON, as `token` prints it by default, read by botocore's container provider.
        let printed = try runCommand(RepositoryPaths.tokenproxyBinary, arguments: ["token", "--config", configs[1].1], environment: base)
        #expect(printed.status == 0, "\(printed.output)")
        #expect(try read("container", config: configs[1].1, input: printed.stdout) == ["container-role"] + fetched)

        let process = try runCommand(
            RepositoryPaths.tokenproxyBinary, arguments: ["token", "--config", configs[1].1, "--format", "credential-process"], environment: base)
        let object = try JSONSerialization.jsonObject(with: Data(process.stdout.utf8)) as? [String: Any]
        #expect(object?["Version"] as? Int == 1)
        #expect((object?["Expiration"] as? String)?.hasSuffix("Z") == true)
        // Another credentials type has no AWS keys to print.
        let staticConfig = try folder.write(
            "static.yaml", "listen: 127.0.0.1:0\nupstream: http://127.0.0.1:9\ncredentials:\n  type: static\n  token_env: TP_STATIC\n")
        let refused = try runCommand(
            RepositoryPaths.tokenproxyBinary, arguments: ["token", "--config", staticConfig, "--format", "credential-process"],
            environment: childEnvironment(["TP_STATIC": "static-token"]))
        #expect(refused.status == 2, "\(refused.output)")
        #expect(refused.stderr.contains("--format credential-process"))
        #expect(!refused.output.contains("static-token"))
    }
}
