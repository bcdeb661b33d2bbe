import Config
import FuzzSupport
import Logs

@testable import Credentials

// libFuzzer target: Amazon Cognito's InitiateAuth and RevokeToken answers (`AuthenticationResult`,
// `ChallengeName`, `{"__type": …, "message": …}` errors) as `type: cognito` reads them. The input is
// an answer (status, headers, body; see `answer(from:)`); byte 0 of the body-free prefix also picks
// the operation and which token is used. Nothing may trap, and no message may carry the client
// secret or what was sent.

/// What every run shares.
enum Fixed {
    static let clientSecret = "fuzz-client-secret"

    static let sent = "fuzz-refresh-token"
}

func makeProvider(useIDToken: Bool) -> CognitoProvider {
    var credentials = CognitoConfiguration(clientID: "fuzz-client", endpoint: "http://127.0.0.1:9/")
    credentials.clientSecret = Secret(value: Fixed.clientSecret, origin: .literal)
    credentials.useToken = useIDToken ? .id : .access
    return try! CognitoProvider(credentials)
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))[...]
    let response = answer(from: input)
    let selector = input.first ?? 0
    let operations: [CognitoProvider.Operation] = [.refresh, .login, .revoke]
    let operation = operations[Int(selector / 16) % operations.count]
    let provider = makeProvider(useIDToken: selector & 0x80 != 0)
    do {
        let call = try provider.read(response, secrets: [Fixed.sent], operation: operation)
        if operation != .revoke {
            let issued = try provider.tokens(from: call, previousUsername: "previous-user")
            precondition(BearerToken.isUsable(issued.accessToken), "an unusable token was accepted")
            if let refreshToken = issued.refreshToken {
                precondition(BearerToken.isUsable(refreshToken), "an unusable refresh token was accepted")
            }
            if let seconds = issued.expiresIn { precondition(seconds.isFinite && seconds > 0, "bad ExpiresIn accepted") }
        }
    } catch let error as TokenSourceError {
        let reason = "\(error)"
        precondition(!reason.contains(Fixed.clientSecret) && !reason.contains(Fixed.sent), "a reason carries a secret")
    } catch {
        // RevokeToken's "nothing to revoke" outcome is the only other error.
        precondition(operation == .revoke, "an unexpected error: \(error)")
    }
    _ = response.date
    SecretRegistry.shared.removeAll()
    return 0
}

runFuzzer(fuzzOneInput)
