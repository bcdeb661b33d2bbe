/// Which upstream 403s a `type: aws` route takes as the "401" of CONTRACT.md point 3 (one fetch of
/// new credentials, one retry): CONTRACT.md "AWS credentials and SigV4 signing". AWS answers expired
/// or revoked credentials with 403, naming why in `x-amzn-ErrorType` (JSON protocols) or in the body
/// (`<Code>` of the XML protocols, `__type` of JSON ones, API Gateway's `message`). Beside SigV4 in
/// Credentials with `AWSServiceRules`: what AWS answers is AWS's rule, not the request path's.
public enum AWSRefusal {
    public enum Verdict: Sendable, Equatable {
        /// Counts as the 401.
        case refresh
        /// Hold the answer and read its body (bounded) to decide.
        case readBody
        /// An ordinary answer.
        case passOn
    }

    /// The error codes that say the credentials are no longer good.
    public static let expiredCodes: Set<String> = ["ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "RequestExpired"]
    /// API Gateway's words for it (it sends no code).
    public static let apiGatewayExpired = "The security token included in the request is expired"

    /// At the answer's head. `errorType`: the `x-amzn-ErrorType` field (`Code:namespace`);
    /// `nearExpiry`: the credentials the request went with were within `refresh_margin` of their
    /// expiry (a 403 to a HEAD has no body to say why).
    public static func atHead(status: Int, errorType: String?, isHEAD: Bool, nearExpiry: Bool) -> Verdict {
        guard status == 403 else { return .passOn }
        if let errorType {
            let code = errorType.prefix { $0 != ":" }
            return expiredCodes.contains(String(code)) ? .refresh : .passOn
        }
        if isHEAD { return nearExpiry ? .refresh : .passOn }
        return .readBody
    }

    /// Whether a held 403's body names one of the codes as a whole word, or carries API Gateway's message.
    public static func bodyNamesExpiredCredentials(_ body: [UInt8]) -> Bool {
        let text = String(decoding: body, as: UTF8.self)
        if text.contains(apiGatewayExpired) { return true }
        var word = ""
        for character in text {
            if character.isASCII && (character.isLetter || character.isNumber) {
                word.append(character)
                continue
            }
            if expiredCodes.contains(word) { return true }
            word = ""
        }
        return expiredCodes.contains(word)
    }
}
