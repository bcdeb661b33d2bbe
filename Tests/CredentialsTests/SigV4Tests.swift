import Testing

@testable import Credentials

/// SigV4 against the values AWS publishes, re-typed here: the "aws-sig-v4-test-suite" cases
/// (https://docs.aws.amazon.com/general/latest/gr/signature-v4-test-suite.html: credentials
/// AKIDEXAMPLE, us-east-1, service `service`, 2015-08-30T12:36:00Z), the IAM ListUsers example of
/// "Create a signed AWS API request", and the S3 examples of
/// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html.
@Suite("SigV4")
struct SigV4Tests {
    static let suiteCredentials = AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    static let s3Credentials = AWSCredentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    /// 2015-08-30T12:36:00Z
    static let suiteTime: Double = 1_440_938_160
    /// 2013-05-24T00:00:00Z
    static let s3Time: Double = 1_369_353_600

    func authorization(_ fields: [(name: String, value: String)]) -> String? {
        fields.first { $0.name == "Authorization" }?.value
    }

    func suiteSignature(_ path: String, method: String = "GET", query: String = "", headers: [(name: String, value: String)] = [], body: String = "")
        -> String?
    {
        let request = SigV4Request(
            method: method, path: path, query: query, headers: [("Host", "example.amazonaws.com")] + headers,
            payload: .hash(SigV4.sha256Hex(Array(body.utf8))))
        let fields = SigV4.sign(request, region: "us-east-1", service: "service", credentials: Self.suiteCredentials, time: Self.suiteTime)
        return authorization(fields)?.components(separatedBy: "Signature=").last
    }

    @Test func timestampIsBasicISO8601() {
        #expect(SigV4.timestamp(Self.suiteTime) == "20150830T123600Z")
        #expect(SigV4.timestamp(Self.s3Time + 0.999) == "20130524T000000Z")
        #expect(SigV4.timestamp(0) == "19700101T000000Z")
    }

    @Test func getVanilla() {
        let request = SigV4Request(method: "GET", path: "/", headers: [("Host", "example.amazonaws.com")], payload: .hash(SigV4.emptyPayloadHash))
        let fields = SigV4.sign(request, region: "us-east-1", service: "service", credentials: Self.suiteCredentials, time: Self.suiteTime)
        #expect(fields.map(\.name) == ["Authorization", "X-Amz-Date"])
        #expect(fields[1].value == "20150830T123600Z")
        #expect(
            fields[0].value
                == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, "
                + "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
    }

    @Test func suiteCases() {
        // get-utf8: GET /ሴ (the suite's raw path; its canonical URI is /%E1%88%B4)
        #expect(suiteSignature("/ሴ") == "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85")
        // get-space: GET /example space/
        #expect(suiteSignature("/example space/") == "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741")
        // normalize-path: get-slash-pointless-dot, get-slashes, get-slash, get-slash-dot-slash, get-relative, get-relative-relative
        #expect(suiteSignature("/./example") == "ef75d96142cf21edca26f06005da7988e4f8dc83a165a80865db7089db637ec5")
        #expect(suiteSignature("//example//") == "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84")
        for vanilla in ["//", "/./", "/example/..", "/example1/example2/../.."] {
            #expect(suiteSignature(vanilla) == "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31", "\(vanilla)")
        }
        // get-vanilla-query-order-key-case
        #expect(suiteSignature("/", query: "Param2=value2&Param1=value1") == "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500")
        // get-vanilla-query-order-value: one name twice, sorted by value
        #expect(suiteSignature("/", query: "Param1=value2&Param1=value1") == "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694")
        // post-x-www-form-urlencoded
        #expect(
            suiteSignature("/", method: "POST", headers: [("Content-Type", "application/x-www-form-urlencoded")], body: "Param1=value1")
                == "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a")
    }

    @Test func iamListUsers() {
        let request = SigV4Request(
            method: "GET", path: "/", query: "Action=ListUsers&Version=2010-05-08",
            headers: [("Host", "iam.amazonaws.com"), ("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
            payload: .hash(SigV4.emptyPayloadHash))
        let fields = SigV4.sign(request, region: "us-east-1", service: "iam", credentials: Self.suiteCredentials, time: Self.suiteTime)
        #expect(
            authorization(fields)
                == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, SignedHeaders=content-type;host;x-amz-date, "
                + "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7")
    }

    func s3(_ method: String, _ path: String, query: String = "", headers: [(name: String, value: String)] = [], body: String = "")
        -> [(name: String, value: String)]
    {
        let request = SigV4Request(
            method: method, path: path, query: query, headers: [("Host", "examplebucket.s3.amazonaws.com")] + headers,
            payload: .hash(SigV4.sha256Hex(Array(body.utf8))))
        return SigV4.sign(request, region: "us-east-1", service: "s3", credentials: Self.s3Credentials, time: Self.s3Time)
    }

    @Test func s3GetObject() {
        let fields = s3("GET", "/test.txt", headers: [("Range", "bytes=0-9")])
        #expect(fields.map(\.name) == ["Authorization", "X-Amz-Date", "X-Amz-Content-Sha256"])
        #expect(fields[2].value == SigV4.emptyPayloadHash)
        #expect(
            fields[0].value
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    @Test func s3PutObject() {
        // The key `test$file.text` goes upstream as /test%24file.text, and S3 signs it encoded once.
        let fields = s3(
            "PUT", "/test%24file.text", headers: [("Date", "Fri, 24 May 2013 00:00:00 GMT"), ("x-amz-storage-class", "REDUCED_REDUNDANCY")],
            body: "Welcome to Amazon S3.")
        #expect(fields[2].value == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        #expect(authorization(fields)?.hasSuffix("Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd") == true)
        // The key sent raw ($ is allowed in a path) signs the same.
        #expect(
            authorization(
                s3(
                    "PUT", "/test$file.text", headers: [("Date", "Fri, 24 May 2013 00:00:00 GMT"), ("x-amz-storage-class", "REDUCED_REDUNDANCY")],
                    body: "Welcome to Amazon S3.")) == authorization(fields))
    }

    @Test func s3ListAndLifecycle() {
        #expect(
            authorization(s3("GET", "/", query: "max-keys=2&prefix=J"))?.hasSuffix("34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7") == true)
        #expect(authorization(s3("GET", "/", query: "lifecycle"))?.hasSuffix("fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543") == true)
    }

    // MARK: Canonicalisation edge cases

    @Test func canonicalURIEncodesOnceForS3AndTwiceElsewhere() {
        #expect(SigV4.canonicalURI("/my%20key/a b", service: "s3") == "/my%20key/a%20b")
        #expect(SigV4.canonicalURI("/my%20key", service: "execute-api") == "/my%2520key")
        // Escapes are upper-cased; reserved characters escaped; `/` and unreserved kept.
        #expect(SigV4.canonicalURI("/%c3%bc!*'()+=&;:@,$~-._", service: "s3") == "/%C3%BC%21%2A%27%28%29%2B%3D%26%3B%3A%40%2C%24~-._")
        #expect(SigV4.canonicalURI("/%c3%bc", service: "es") == "/%25C3%25BC")
        // A `%` that starts no escape is a byte like any other.
        #expect(SigV4.canonicalURI("/100%", service: "s3") == "/100%25")
        #expect(SigV4.canonicalURI("/%zz", service: "lambda") == "/%25zz")
        #expect(SigV4.canonicalURI("", service: "s3") == "/")
        // S3 keys are names, not paths: `.`, `..` and `//` are signed as sent; elsewhere they are resolved.
        #expect(SigV4.canonicalURI("/b//a/../k/./", service: "s3") == "/b//a/../k/./")
        #expect(SigV4.canonicalURI("/b//a/../k/./", service: "es") == "/b/k/")
        // Raw UTF-8 (a client that did not encode) counts as not yet encoded.
        #expect(SigV4.canonicalURI("/ü", service: "s3") == "/%C3%BC")
    }

    /// CONTRACT.md "AWS credentials and SigV4 signing": the one form an SDK sends (issue 39, points 2 and 21).
    @Test func sdkPathIsTheOneFormOfEverySpelling() {
        let key = "/bucket/dir/a%20b%2Bc~%C3%BC%281%29.txt"
        // Escapes of unreserved bytes decoded; raw reserved bytes escaped; lower-case hex upper-cased.
        #expect(SigV4.sdkPath("/bucket/dir/a%20b%2Bc%7E%C3%BC%281%29.txt") == key)
        #expect(SigV4.sdkPath("/bucket/dir/a%20b%2Bc~%C3%BC(1).txt") == key)
        #expect(SigV4.sdkPath("/bucket/dir/a%20b%2bc%7e%c3%bc%281%29.txt") == key)
        #expect(SigV4.sdkPath("/bucket/dir/a b+c~ü(1).txt") == key)
        #expect(SigV4.sdkPath("/%41%2D%2e%5F%7e%30") == "/A-._~0")
        // An escaped `/` stays escaped: it is part of a key, not a separator.
        #expect(SigV4.sdkPath("/a%2fb/c") == "/a%2Fb/c")
        // A `%` that starts no escape is a byte like any other.
        #expect(SigV4.sdkPath("/100%") == "/100%25")
        #expect(SigV4.sdkPath("/%zz%4") == "/%25zz%254")
        #expect(SigV4.sdkPath("") == "")
        // The form is a fixed point: what goes upstream is signed as it goes.
        for path in ["/a%2525b", key, "/100%", "/%c3%bc!*'()+=&;:@,$"] {
            #expect(SigV4.sdkPath(SigV4.sdkPath(path)) == SigV4.sdkPath(path))
            #expect(SigV4.canonicalURI(SigV4.sdkPath(path), service: "s3") == SigV4.canonicalURI(path, service: "s3"))
        }
    }

    @Test func everySpellingOfAKeyIsSignedAsOne() {
        let spellings = ["/b/a%20b%2Bc%7E%C3%BC%281%29", "/b/a%20b%2Bc~%C3%BC(1)", "/b/a%20b%2bc%7e%c3%bc%281%29"]
        #expect(Set(spellings.map { SigV4.canonicalURI(SigV4.sdkPath($0), service: "s3") }) == ["/b/a%20b%2Bc~%C3%BC%281%29"])
        #expect(
            Set(spellings.map { SigV4.canonicalURI(SigV4.sdkPath($0), service: "execute-api") }) == ["/b/a%2520b%252Bc~%25C3%25BC%25281%2529"])
        // `%2E%2E` is `..`, resolved for services other than S3.
        #expect(SigV4.canonicalURI(SigV4.sdkPath("/a/%2E%2E/b"), service: "es") == "/b")
    }

    @Test func canonicalQuerySortsAndEncodes() {
        // Repeated names sorted by value; a name without `=` and an empty value both give `name=`.
        #expect(SigV4.canonicalQuery("b=2&a=z&a=y&c&d=") == "a=y&a=z&b=2&c=&d=")
        // Sorted by the encoded bytes: upper case before lower case.
        #expect(SigV4.canonicalQuery("a=1&B=2&_=3") == "B=2&_=3&a=1")
        // Escapes decoded and encoded again: `%7E` is `~`, `%2f` is `%2F`; `+`, `/`, space and UTF-8 escaped.
        #expect(SigV4.canonicalQuery("prefix=a%2fb&t=%7E&p=a+b&s=a b&u=ü") == "p=a%2Bb&prefix=a%2Fb&s=a%20b&t=~&u=%C3%BC")
        // `=` inside a value stays in the value; empty pairs are dropped.
        #expect(SigV4.canonicalQuery("x=a=b&&y=1") == "x=a%3Db&y=1")
        #expect(SigV4.canonicalQuery("") == "")
    }

    @Test func canonicalHeadersTrimAndJoin() {
        let (text, signed) = SigV4.canonicalHeaders([
            ("Host", "example.amazonaws.com"), ("My-Header1", "  value1  "), ("my-header2", "\"a   b   c\""),
            ("MY-HEADER1", "value2"), ("X-Amz-Meta-Empty", ""),
        ])
        #expect(text == "host:example.amazonaws.com\nmy-header1:value1,value2\nmy-header2:\"a b c\"\nx-amz-meta-empty:\n")
        #expect(signed == "host;my-header1;my-header2;x-amz-meta-empty")
    }

    @Test func sessionTokenAndUnsignedPayload() {
        var credentials = Self.suiteCredentials
        credentials.sessionToken = "SESSION/TOKEN=="
        let request = SigV4Request(method: "PUT", path: "/k", headers: [("Host", "h")], payload: .unsigned)
        let fields = SigV4.sign(request, region: "eu-west-1", service: "execute-api", credentials: credentials, time: Self.suiteTime)
        #expect(fields.map(\.name) == ["Authorization", "X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Security-Token"])
        #expect(fields[2].value == "UNSIGNED-PAYLOAD")
        #expect(fields[3].value == "SESSION/TOKEN==")
        let value = fields[0].value
        #expect(value.contains("Credential=AKIDEXAMPLE/20150830/eu-west-1/execute-api/aws4_request,"))
        #expect(value.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,"))
        // The token is signed: another token, another signature.
        credentials.sessionToken = "OTHER"
        let other = SigV4.sign(request, region: "eu-west-1", service: "execute-api", credentials: credentials, time: Self.suiteTime)
        #expect(other[0].value != value)
    }

    @Test func aClientsOwnSigningFieldsAreNotSigned() {
        let clean = SigV4Request(method: "GET", path: "/", headers: [("Host", "example.amazonaws.com")], payload: .hash(SigV4.emptyPayloadHash))
        var dirty = clean
        dirty.headers += [
            ("Authorization", "AWS4-HMAC-SHA256 old"), ("X-Amz-Date", "20000101T000000Z"), ("x-amz-security-token", "old"),
            ("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD"),
        ]
        let a = SigV4.sign(clean, region: "us-east-1", service: "service", credentials: Self.suiteCredentials, time: Self.suiteTime)
        let b = SigV4.sign(dirty, region: "us-east-1", service: "service", credentials: Self.suiteCredentials, time: Self.suiteTime)
        #expect(a.map(\.value) == b.map(\.value))
        #expect(a[0].value.hasSuffix("Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"))
    }

    @Test func regionAndServiceAreNotInterchangeable() {
        let request = SigV4Request(method: "GET", path: "/", headers: [("Host", "h")], payload: .hash(SigV4.emptyPayloadHash))
        let a = SigV4.sign(request, region: "us-east-1", service: "es", credentials: Self.suiteCredentials, time: Self.suiteTime)
        let b = SigV4.sign(request, region: "es", service: "us-east-1", credentials: Self.suiteCredentials, time: Self.suiteTime)
        #expect(a[0].value.contains("/us-east-1/es/aws4_request"))
        #expect(a[0].value != b[0].value)
    }

    @Test func signedFieldSelection() {
        for name in ["Host", "content-type", "Content-MD5", "X-Amz-Meta-Colour", "x-amz-target"] { #expect(SigV4.signsField(name), "\(name)") }
        for name in ["User-Agent", "X-Forwarded-For", "X-Amzn-Trace-Id", "Connection", "Transfer-Encoding", "Accept"] {
            #expect(!SigV4.signsField(name), "\(name)")
        }
    }
}
