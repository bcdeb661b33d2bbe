import Config
import FuzzSupport
import Logs

@testable import Credentials

// libFuzzer target: a `json_refresh` backend's login and refresh answers, read with the configured
// dotted paths (CONTRACT.md, `credentials:`). The input is an answer (status, headers, body; see
// `answer(from:)`); byte 0 also picks one of a few path configurations (defaults, nested paths,
// `expires_at` as epoch seconds or RFC 3339). Nothing may trap, an accepted token is usable, and
// an accepted expiry is finite.

func makeProvider(_ choice: UInt8) -> JSONRefreshProvider {
    var credentials = JSONRefreshConfiguration(refreshURL: "http://127.0.0.1:9/auth/refresh", loginURL: "http://127.0.0.1:9/auth/login")
    switch choice % 3 {
    case 0:
        break
    case 1:
        credentials.accessTokenPath = "data.tokens.access"
        credentials.refreshTokenPath = "data.tokens.refresh"
        credentials.expiresInPath = "data.tokens.ttl"
    default:
        credentials.expiresInPath = nil
        credentials.expiresAtPath = "expires_at"
    }
    return try! JSONRefreshProvider(credentials)
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))[...]
    let response = answer(from: input)
    let provider = makeProvider((input.first ?? 0) / 16)
    do {
        let issued = try provider.read(response)
        precondition(BearerToken.isUsable(issued.accessToken), "an unusable access token was accepted")
        if let refreshToken = issued.refreshToken {
            precondition(BearerToken.isUsable(refreshToken), "an unusable refresh token was accepted")
        }
        if let seconds = issued.expiresIn { precondition(seconds.isFinite && seconds > 0, "bad expires_in accepted") }
        if let time = issued.expiresAt { precondition(time.isFinite && time > 0, "bad expires_at accepted") }
    } catch is TokenSourceError {
    } catch {
        preconditionFailure("read threw something other than a TokenSourceError: \(error)")
    }
    _ = response.date
    SecretRegistry.shared.removeAll()
    return 0
}

runFuzzer(fuzzOneInput)
