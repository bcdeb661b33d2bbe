import Crypto
import Foundation
import Synchronization

/// The AWS credentials a `TokenSnapshot` carries for `type: aws` (CONTRACT.md "AWS credentials and
/// SigV4 signing"), with the day's signing key kept: the HMAC chain of date, region and service
/// changes once a day (UTC), so a request costs one HMAC over its string to sign plus the hashes.
/// Shared by every loop; the one lock guards the kept key only.
public final class AWSSigningCredentials: Sendable {
    public let credentials: AWSCredentials
    /// The day's HMAC, keyed and not yet fed: each request feeds a copy.
    private let dayKey = Mutex<(scope: String, mac: HMAC<SHA256>)?>(nil)

    public init(_ credentials: AWSCredentials) {
        self.credentials = credentials
    }

    /// The HMAC keyed by the signing key for `date` (YYYYMMDD), `region` and `service`: made once
    /// per day and scope.
    func signingMAC(date: String, region: String, service: String) -> HMAC<SHA256> {
        let scope = "\(date)/\(region)/\(service)"
        if let kept = dayKey.withLock({ $0 }), kept.scope == scope { return kept.mac }
        let mac = HMAC<SHA256>(key: SigV4.signingKey(secret: credentials.secretAccessKey, date: date, region: region, service: service))
        dayKey.withLock { $0 = (scope, mac) }
        return mac
    }

    /// The fields that sign `request` at `time` (`SigV4.sign`), with the kept key.
    public func sign(_ request: SigV4Request, region: String, service: String, time: Double) -> [(name: String, value: String)] {
        SigV4.sign(request, region: region, service: service, credentials: credentials, time: time) { date in
            signingMAC(date: date, region: region, service: service)
        }
    }
}

extension AWSCredentials {
    /// Reads back what `containerEndpointJSON` wrote (the token a `type: aws` session holds, also
    /// when it comes from the store); nil when it is not that JSON.
    public init?(containerEndpointJSON text: String) {
        struct Fields: Decodable {
            var AccessKeyId: String
            var SecretAccessKey: String
            var Token: String?
            var Expiration: String?
        }
        guard let fields = try? JSONDecoder().decode(Fields.self, from: Data(text.utf8)), !fields.AccessKeyId.isEmpty,
            // Each goes into a field (RFC 9110 §5.5): no space, line break or control character.
            BearerToken.isUsable(fields.AccessKeyId), BearerToken.isUsable(fields.SecretAccessKey),
            fields.Token.map(BearerToken.isUsable) ?? true
        else { return nil }
        var expiration: Double? = nil
        if let stamp = fields.Expiration {
            guard let time = RFC3339.parse(stamp) else { return nil }
            expiration = time
        }
        self.init(accessKeyID: fields.AccessKeyId, secretAccessKey: fields.SecretAccessKey, sessionToken: fields.Token, expiration: expiration)
    }
}
