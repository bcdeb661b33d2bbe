import Config
import FuzzSupport
import Logs

@testable import Credentials

// libFuzzer target: the token endpoint's answers (RFC 6749 §5.1 success, §5.2 error), as
// `oauth2_refresh` and `oauth2_client_credentials` read them. The input is an answer (status,
// headers, body; see `answer(from:)`). Both readers see every answer: `read` what a 2xx brings,
// `failure` the classification of anything else. Nothing may trap, and no message may carry the
// body's tokens or the client secret.

/// What every run shares.
enum Fixed {
    static let clientSecret = "fuzz-client-secret"
}

func makeProvider() -> OAuth2Provider {
    let client = OAuth2ClientConfiguration(
        tokenURL: "http://127.0.0.1:9/token", clientID: "fuzz-client", clientSecret: Secret(value: Fixed.clientSecret, origin: .literal))
    return try! OAuth2Provider(CredentialsConfiguration(.oauth2Refresh(OAuth2RefreshConfiguration(client: client))))
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let response = answer(from: Array(UnsafeBufferPointer(start: data, count: size))[...])
    let provider = makeProvider()
    do {
        let issued = try provider.read(response, call: "refresh")
        precondition(BearerToken.isUsable(issued.accessToken), "an unusable access token was accepted")
        if let refreshToken = issued.refreshToken {
            precondition(BearerToken.isUsable(refreshToken), "an unusable refresh token was accepted")
        }
        if let seconds = issued.expiresIn { precondition(seconds.isFinite && seconds > 0, "bad expires_in accepted") }
    } catch let error as TokenSourceError {
        precondition(!"\(error)".contains(Fixed.clientSecret), "a reason carries the client secret")
    } catch {
        preconditionFailure("read threw something other than a TokenSourceError: \(error)")
    }
    let failure = provider.failure(response, call: "refresh", secrets: ["fuzz-refresh-token"])
    let reason = "\(failure)"
    precondition(!reason.contains(Fixed.clientSecret) && !reason.contains("fuzz-refresh-token"), "a reason carries a secret")
    _ = response.date
    SecretRegistry.shared.removeAll()
    return 0
}

runFuzzer(fuzzOneInput)
