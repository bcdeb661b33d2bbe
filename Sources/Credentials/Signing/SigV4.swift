import Basics
import Crypto

/// An AWS access key, and for temporary credentials their session token and expiry (CONTRACT.md
/// "AWS credentials and SigV4 signing").
public struct AWSCredentials: Sendable, Equatable {
    public var accessKeyID: String
    public var secretAccessKey: String
    public var sessionToken: String?
    /// Seconds since 1970; nil for long-term keys.
    public var expiration: Double?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil, expiration: Double? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.expiration = expiration
    }
}

/// One request as SigV4 sees it. `path` and `query` are the request target's parts as they go
/// upstream (already percent-encoded, the query without `?`; the path in `SigV4.sdkPath`'s form,
/// which the signature assumes); `headers` are the fields to sign,
/// `host` among them (which fields: `SigV4.signsField`).
public struct SigV4Request: Sendable {
    public enum Payload: Sendable, Equatable {
        /// The body's SHA-256, lower-case hex.
        case hash(String)
        /// `UNSIGNED-PAYLOAD` (S3 and services that allow it).
        case unsigned
        /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: an S3 body in `aws-chunked` framing with its checksum
        /// in a trailer, as the SDKs send uploads over https (S3 decodes the framing).
        case unsignedTrailer
    }
    public var method: String
    public var path: String
    public var query: String
    public var headers: [(name: String, value: String)]
    public var payload: Payload

    public init(method: String, path: String, query: String = "", headers: [(name: String, value: String)], payload: Payload) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.payload = payload
    }
}

/// AWS Signature Version 4, a pure function of its inputs: "Create a signed AWS API request",
/// https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html (and for S3,
/// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html).
public enum SigV4 {
    public static let algorithm = "AWS4-HMAC-SHA256"
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"
    public static let unsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    /// SHA-256 of no bytes.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// The fields to add to the request: `Authorization`, `X-Amz-Date`, `X-Amz-Security-Token` with
    /// temporary credentials, `X-Amz-Content-Sha256` for `s3` and for an unsigned payload. All but
    /// Authorization are signed too; fields of those names among `request.headers` (a client's own)
    /// are left out of the signature, and the caller must not forward them.
    public static func sign(
        _ request: SigV4Request, region: String, service: String, credentials: AWSCredentials, time: Double
    ) -> [(name: String, value: String)] {
        sign(request, region: region, service: service, credentials: credentials, time: time) { date in
            HMAC<SHA256>(key: signingKey(secret: credentials.secretAccessKey, date: date, region: region, service: service))
        }
    }

    /// The same with the HMAC keyed by the signing key for a date (YYYYMMDD) from `mac`, which may
    /// keep it (`AWSSigningCredentials`: a keyed HMAC copied is one less key set-up per request).
    static func sign(
        _ request: SigV4Request, region: String, service: String, credentials: AWSCredentials, time: Double,
        mac: (String) -> HMAC<SHA256>
    ) -> [(name: String, value: String)] {
        let stamp = timestamp(time)
        var added: [(name: String, value: String)] = [("X-Amz-Date", stamp)]
        if AWSServiceRules(service: service).sendsPayloadHash(request.payload) {
            added.append(("X-Amz-Content-Sha256", payloadHash(request.payload)))
        }
        if let token = credentials.sessionToken { added.append(("X-Amz-Security-Token", token)) }
        var signed = request
        signed.headers = request.headers.filter { !setsField($0.name) } + added
        let scope = "\(stamp.prefix(8))/\(region)/\(service)/aws4_request"
        let (canonical, signedHeaders) = canonicalRequest(signed, service: service)
        let toSign = stringToSign(timestamp: stamp, scope: scope, canonicalRequest: canonical)
        var keyed = mac(String(stamp.prefix(8)))
        keyed.update(data: Array(toSign.utf8))
        let signature = hex(keyed.finalize())
        let authorization =
            "\(algorithm) Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return [("Authorization", authorization)] + added
    }

    /// CONTRACT.md: `host`, `content-type`, `content-md5` and every `x-amz-*` field are signed;
    /// X-Forwarded-*, X-Amzn-Trace-Id, User-Agent and hop-by-hop fields never are (a proxy or the
    /// client's library may change them on the way: aws-sigv4-proxy and botocore leave them out too).
    public static func signsField(_ name: String) -> Bool {
        let lower = name.lowercased()
        return lower == "host" || lower == "content-type" || lower == "content-md5" || lower.hasPrefix("x-amz-")
    }

    /// The fields `sign` writes itself.
    public static func setsField(_ name: String) -> Bool {
        let lower = name.lowercased()
        return lower == "authorization" || lower == "x-amz-date" || lower == "x-amz-security-token" || lower == "x-amz-content-sha256"
    }

    /// `YYYYMMDD'T'HHMMSS'Z'` in UTC (ISO 8601 basic format, as X-Amz-Date wants it).
    public static func timestamp(_ time: Double) -> String {
        let civil = CivilTime(epochSeconds: Int(time.rounded(.down)))
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let s = civil.secondOfDay
        return "\(civil.year)\(two(civil.month))\(two(civil.day))T\(two(s / 3600))\(two(s / 60 % 60))\(two(s % 60))Z"
    }

    static func payloadHash(_ payload: SigV4Request.Payload) -> String {
        switch payload {
        case .hash(let hex): return hex
        case .unsigned: return unsignedPayload
        case .unsignedTrailer: return unsignedTrailer
        }
    }

    /// The canonical request and its SignedHeaders list (task 1 of the signing steps).
    static func canonicalRequest(_ request: SigV4Request, service: String) -> (text: String, signedHeaders: String) {
        let (headers, signedHeaders) = canonicalHeaders(request.headers)
        let text = [
            request.method.uppercased(),
            canonicalURI(request.path, service: service),
            canonicalQuery(request.query),
            headers,
            signedHeaders,
            payloadHash(request.payload),
        ].joined(separator: "\n")
        return (text, signedHeaders)
    }

    static func stringToSign(timestamp: String, scope: String, canonicalRequest: String) -> String {
        "\(algorithm)\n\(timestamp)\n\(scope)\n\(hex(SHA256.hash(data: Array(canonicalRequest.utf8))))"
    }

    /// kSecret → kDate → kRegion → kService → kSigning, each an HMAC-SHA256 keyed by the one before.
    static func signingKey(secret: String, date: String, region: String, service: String) -> SymmetricKey {
        var key = SymmetricKey(data: Array("AWS4\(secret)".utf8))
        for part in [date, region, service, "aws4_request"] {
            key = SymmetricKey(data: HMAC<SHA256>.authenticationCode(for: Array(part.utf8), using: key))
        }
        return key
    }

    /// The one form of a path an AWS SDK sends (CONTRACT.md "AWS credentials and SigV4 signing"):
    /// escapes of RFC 3986 §2.3 unreserved bytes decoded (`%7E` is `~`), every other escape kept
    /// with its hex upper-cased (`%2b` is `%2B`), every other byte that is neither unreserved nor `/`
    /// escaped (a byte a client left raw, or a `%` that starts no escape). Every spelling of one S3
    /// key has this one form, so a verifier that reads the path as sent and one that decodes and
    /// encodes it again (S3 itself) compute the same canonical URI. Applying it twice changes nothing.
    public static func sdkPath(_ path: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(path.utf8.count + 16)
        let bytes = Array(path.utf8)
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%"), i + 2 < bytes.count, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) {
                let decoded = high << 4 | low
                if isUnreserved(decoded) { out.append(decoded) } else { appendEscape(decoded, to: &out) }
                i += 3
                continue
            }
            if isUnreserved(byte) || byte == UInt8(ascii: "/") { out.append(byte) } else { appendEscape(byte, to: &out) }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The canonical URI, as the SDKs compute it from the path they send (`sdkPath`'s form, which
    /// the request writer sends): for `s3` encoded once (unreserved bytes and `/` kept, escapes kept
    /// with their hex upper-cased, every other byte escaped), which leaves that form as it is; every
    /// other service encodes that once more, so an escape `%XX` becomes `%25XX`. A byte a caller left
    /// raw (not allowed in a request target, RFC 3986 §2) counts as not yet encoded, as in AWS's test
    /// suite. Every service but S3 also signs the path normalized: no `.` or `..` segment, no empty segment.
    static func canonicalURI(_ path: String, service: String) -> String {
        let escapePercent = AWSServiceRules(service: service).encodesPathTwice
        let path = escapePercent ? normalizedPath(path) : path
        if path.isEmpty { return "/" }
        var out: [UInt8] = []
        out.reserveCapacity(path.utf8.count + 16)
        let bytes = Array(path.utf8)
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%"), i + 2 < bytes.count, isHex(bytes[i + 1]), isHex(bytes[i + 2]) {
                if escapePercent { out += Array("%25".utf8) } else { out.append(byte) }
                out.append(upperHex(bytes[i + 1]))
                out.append(upperHex(bytes[i + 2]))
                i += 3
                continue
            }
            if isUnreserved(byte) || byte == UInt8(ascii: "/") { out.append(byte) } else { appendEscape(byte, to: &out) }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Dot segments resolved (RFC 3986 §5.2.4) and empty segments dropped, a final `/` kept: the
    /// path as AWS's test suite (normalize-path cases) and the SDKs sign it for services other than S3.
    static func normalizedPath(_ path: String) -> String {
        var kept: [Substring] = []
        for segment in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch segment {
            case ".": continue
            case "..": _ = kept.popLast()
            default: kept.append(segment)
            }
        }
        if kept.isEmpty { return "/" }
        return "/" + kept.joined(separator: "/") + (path.hasSuffix("/") ? "/" : "")
    }

    /// Each name and value decoded and encoded again (RFC 3986 unreserved bytes kept, every other
    /// byte escaped: `+` is `%2B`, as AWS reads it), a name without `=` given an empty value, the
    /// pairs sorted by encoded name, then value.
    static func canonicalQuery(_ query: String) -> String {
        if query.isEmpty { return "" }
        var pairs: [(name: [UInt8], value: [UInt8])] = []
        for part in Array(query.utf8).split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            if let equals = part.firstIndex(of: UInt8(ascii: "=")) {
                pairs.append((reencode(part[..<equals]), reencode(part[part.index(after: equals)...])))
            } else {
                pairs.append((reencode(part[...]), []))
            }
        }
        pairs.sort { a, b in
            a.name != b.name ? a.name.lexicographicallyPrecedes(b.name) : a.value.lexicographicallyPrecedes(b.value)
        }
        var out: [UInt8] = []
        for (index, pair) in pairs.enumerated() {
            if index > 0 { out.append(UInt8(ascii: "&")) }
            out += pair.name
            out.append(UInt8(ascii: "="))
            out += pair.value
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Names lower-cased, values trimmed with inner runs of spaces made one, the values of one name
    /// joined by `,` in their order, sorted by name; each line ends with a newline.
    static func canonicalHeaders(_ headers: [(name: String, value: String)]) -> (text: String, signedHeaders: String) {
        var byName: [String: [String]] = [:]
        for field in headers {
            byName[field.name.lowercased(), default: []].append(collapseSpaces(field.value))
        }
        let names = byName.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        var text = ""
        for name in names { text += "\(name):\(byName[name]!.joined(separator: ","))\n" }
        return (text, names.joined(separator: ";"))
    }

    private static func collapseSpaces(_ value: String) -> String {
        var out: [UInt8] = []
        var pendingSpace = false
        for byte in value.utf8 {
            if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                pendingSpace = !out.isEmpty
                continue
            }
            if pendingSpace { out.append(UInt8(ascii: " ")) }
            pendingSpace = false
            out.append(byte)
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func reencode(_ text: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        var i = text.startIndex
        while i < text.endIndex {
            var byte = text[i]
            if byte == UInt8(ascii: "%"), i + 2 < text.endIndex, let high = hexValue(text[i + 1]), let low = hexValue(text[i + 2]) {
                byte = high << 4 | low
                i += 2
            }
            if isUnreserved(byte) { out.append(byte) } else { appendEscape(byte, to: &out) }
            i += 1
        }
        return out
    }

    /// RFC 3986 §2.3.
    private static func isUnreserved(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)
    private static let lowerHexDigits = Array("0123456789abcdef".utf8)

    private static func appendEscape(_ byte: UInt8, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "%"))
        out.append(hexDigits[Int(byte >> 4)])
        out.append(hexDigits[Int(byte & 0x0F)])
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    private static func isHex(_ b: UInt8) -> Bool { hexValue(b) != nil }

    private static func upperHex(_ b: UInt8) -> UInt8 {
        b >= UInt8(ascii: "a") && b <= UInt8(ascii: "f") ? b - 32 : b
    }

    /// Lower-case hex, as SigV4 writes hashes and signatures.
    static func hex<D: Sequence>(_ bytes: D) -> String where D.Element == UInt8 {
        var out: [UInt8] = []
        for byte in bytes {
            out.append(lowerHexDigits[Int(byte >> 4)])
            out.append(lowerHexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// SHA-256 of a body, lower-case hex: the payload hash of a signed body.
    public static func sha256Hex(_ body: [UInt8]) -> String { hex(SHA256.hash(data: body)) }
}
