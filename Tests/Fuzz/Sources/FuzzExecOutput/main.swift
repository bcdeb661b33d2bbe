import FuzzSupport

@testable import Credentials

// libFuzzer target: what an `exec` command prints (CONTRACT.md, `credentials:`): one token line, or
// JSON `{"token"|"access_token": …, "expires_in"|"expires_at": …}` with numbers, numeric strings or
// RFC 3339 times. The input is the command's output. Nothing may trap; an accepted token is usable in
// a header; accepted times are finite; every refusal says why.

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    switch ExecOutput.parse(Array(UnsafeBufferPointer(start: data, count: size))) {
    case .success(let issued):
        precondition(BearerToken.isUsable(issued.accessToken), "an unusable token was accepted")
        if let seconds = issued.expiresIn { precondition(seconds.isFinite, "a non-finite expires_in was accepted") }
        if let time = issued.expiresAt { precondition(time.isFinite, "a non-finite expires_at was accepted") }
        _ = TokenExpiry.resolve(issued, now: 1_800_000_000, defaultLifetime: 3600)
    case .failure(let problem):
        precondition(!problem.description.isEmpty, "a refusal without a reason")
    }
    return 0
}

runFuzzer(fuzzOneInput)
